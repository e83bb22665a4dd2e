"""Tracing's switch and the SDK glue's conversions (the spans themselves are tested end
to end, exported to a real receiver: spec/integration/test_tracing.py)."""

from __future__ import annotations

from app import tracing
from app.models.trace_context import TraceContext

KEPT = TraceContext(f"00-{'4b' * 16}-{'00f067aa0ba902b7'}-01", "rojo=1,congo=2")


def test_tracing_is_off_without_an_endpoint() -> None:
    assert tracing.from_env("busbar-test", {}) is tracing.NO_TRACING
    assert (
        tracing.from_env("busbar-test", {"OTEL_EXPORTER_OTLP_ENDPOINT": ""}) is tracing.NO_TRACING
    )
    span = tracing.NO_TRACING.publish("orders", KEPT)
    assert span.context is None  # what came in goes on as it came
    span.end(204, "", 1)


def test_either_endpoint_turns_it_on() -> None:
    for name in tracing.ENDPOINTS:
        assert tracing.enabled({name: "http://127.0.0.1:9"})


def test_a_kept_context_and_the_sdk_s_agree() -> None:
    from app import otel

    context = otel.span_context(KEPT)
    assert context.is_remote and context.trace_flags.sampled
    assert otel.propagated(context) == KEPT
    plain = TraceContext(KEPT.traceparent)
    assert otel.propagated(otel.span_context(plain)) == plain
