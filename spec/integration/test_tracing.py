"""Traces across the bus, end to end: real `busbar web` and `busbar worker` processes, a
real subscriber and a real OTLP/HTTP receiver (docs/tracing.md).

A publisher's `traceparent` arrives at the subscriber; with OTEL_EXPORTER_OTLP_ENDPOINT
set, the publish's span is a child of the publisher's, the delivery attempt's span a
child of the publish's (the context kept with the first event), linked to the other
events' contexts, and the subscriber's traceparent names that attempt's span. The
spans are exported at the latest when the processes stop gracefully.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, events, web_env
from spec.integration.otlp import Receiver, receiving
from spec.integration.processes import (
    busbar_env,
    free_port,
    running,
    wait_until,
    web_ready,
)
from spec.integration.subscriber import Subscriber, serving

pytestmark = [pytest.mark.slow, pytest.mark.single_node]

TRACE_A, PARENT_A = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACE_B, PARENT_B = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
PARENT_HEADER_A = f"00-{TRACE_A}-{PARENT_A}-01"
PARENT_HEADER_B = f"00-{TRACE_B}-{PARENT_B}-01"
STATE_B = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


def untraced_env() -> dict[str, str]:
    """The tests' own environment may name a collector: a bus here only has the one given."""
    return {k: v for k, v in busbar_env().items() if not k.startswith("OTEL_")}


@contextmanager
def traced_bus(redis_url: str, log_dir: Path, **env: str) -> Iterator[tuple[Bus, subprocess.Popen]]:
    """web and one worker; yields the bus and the web process, which the test stops."""
    port = free_port()
    base = {k: v for k, v in web_env(redis_url, port).items() if not k.startswith("OTEL_")}
    base.update(BUSBAR_ALLOW_HTTP="1", BUSBAR_WEB_WORKERS="1", **env)
    with ExitStack() as stack:
        web = stack.enter_context(running(["web"], base, log=log_dir / "web.log"))
        the_bus = Bus(f"http://127.0.0.1:{port}", base, log_dir, stack)
        wait_until(lambda: web_ready(log_dir / "web.log", port), what="busbar web to answer")
        the_bus.start_worker()
        yield the_bus, web


def publish(b: Bus, events_: list[dict], **headers: str) -> None:
    answer = b.http.post(
        f"{b.base}/topics/orders",
        json=events_,
        auth=("tok-publisher", ""),
        headers=headers,
        timeout=10,
    )
    assert answer.status_code == 204, answer.text


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0


def queue_two_publishes(b: Bus, sub: Subscriber) -> None:
    """Two publishes, of two traces, queued while the subscriber is paused: one batch."""
    b.call("POST", "/api_tokens", ROOT_KEY, {"name": "publisher", "token": "tok-publisher"})
    b.call("POST", "/api_tokens", ROOT_KEY, {"name": "ledger", "token": "tok-ledger"})
    b.subscribe("tok-ledger", sub.url, ["orders"], event_ids=True, max=10)
    assert b.call("POST", "/subscriber/pause", "tok-ledger").status_code == 200
    publish(b, events(2), traceparent=PARENT_HEADER_A)
    publish(b, events(1, start=2), traceparent=PARENT_HEADER_B, tracestate=STATE_B)
    assert b.call("POST", "/subscriber/resume", "tok-ledger").status_code == 200


def fail_first(record: object) -> tuple[int, float]:
    """The first attempt fails, the next succeeds: a span per attempt."""
    fail_first.count += 1  # type: ignore[attr-defined]
    return (500 if fail_first.count == 1 else 200), 0.0  # type: ignore[attr-defined]


def test_spans_reach_the_receiver_with_the_right_parents(redis_url: str, tmp_path: Path) -> None:
    """Exported while running, with a retried batch: one `deliver` span per attempt."""
    fail_first.count = 0  # type: ignore[attr-defined]
    with receiving() as receiver, serving(Subscriber(responder=fail_first)) as sub:
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with traced_bus(redis_url, tmp_path, BUSBAR_RETRY_FIRST_MS="100", **otel) as (b, _):
            queue_two_publishes(b, sub)
            sub.wait_for(3)
            assert [r.status for r in sub.received] == [500, 200]
            check_spans(receiver, sub)


def test_spans_still_buffered_are_exported_at_a_graceful_stop(
    redis_url: str, tmp_path: Path
) -> None:
    with receiving() as receiver, serving() as sub:
        # spans are exported only as the processes stop: their shutdown flushes them
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "600000"}
        with traced_bus(redis_url, tmp_path, **otel) as (b, web):
            queue_two_publishes(b, sub)
            sub.wait_for(3)
            assert receiver.spans == []
            for process in [*b.workers, web]:
                stop(process)
        check_spans(receiver, sub)


def check_spans(receiver: Receiver, sub: Subscriber) -> None:
    (publish_a,) = [s for s in receiver.wait_for("publish", 2) if s.trace_id == TRACE_A]
    (publish_b,) = [s for s in receiver.named("publish") if s.trace_id == TRACE_B]
    assert publish_a.parent_id == PARENT_A and publish_b.parent_id == PARENT_B
    assert publish_a.span.name == "publish orders" and publish_a.service == "busbar-web"
    assert publish_a.span.kind == publish_a.span.SPAN_KIND_SERVER
    assert publish_a.attributes["messaging.destination.name"] == "orders"
    assert publish_a.attributes["messaging.batch.message_count"] == 2
    assert publish_b.span.trace_state == STATE_B
    kept_a = f"00-{TRACE_A}-{publish_a.span_id}-01"
    kept_b = f"00-{TRACE_B}-{publish_b.span_id}-01"
    delivers = {s.span_id: s for s in receiver.wait_for("deliver", len(sub.received))}
    assert len(delivers) == len(sub.received)
    for request in sub.received:
        # each event's context (the publish's span), and the attempt's in the header
        assert [e.get("traceparent") for e in request.events] == [kept_a, kept_a, kept_b]
        assert [e.get("tracestate") for e in request.events] == [None, None, STATE_B]
        traceparent = request.headers["traceparent"]
        assert traceparent.startswith(f"00-{TRACE_A}-") and traceparent.endswith("-01")
        deliver = delivers[traceparent[36:52]]
        assert deliver.service == "busbar-worker"
        assert deliver.span.kind == deliver.span.SPAN_KIND_CLIENT
        assert deliver.trace_id == TRACE_A and deliver.parent_id == publish_a.span_id
        assert [(link.trace_id.hex(), link.span_id.hex()) for link in deliver.span.links] == [
            (TRACE_B, publish_b.span_id)
        ]
        assert "tracestate" not in request.headers
        attributes = deliver.attributes
        assert attributes["busbar.subscriber"] == "ledger"
        assert attributes["messaging.batch.message_count"] == 3
        assert attributes["http.response.status_code"] == request.status
        assert str(attributes["busbar.batch_id"]).isdigit()
        failed = deliver.span.status.code == deliver.span.status.STATUS_CODE_ERROR
        assert failed == (request.status != 200)
    assert all(b"tok-" not in s.span.SerializeToString() for s in receiver.spans)  # no token


def test_without_an_endpoint_the_context_still_travels_and_nothing_is_exported(
    redis_url: str, tmp_path: Path
) -> None:
    with receiving() as receiver, serving() as sub, traced_bus(redis_url, tmp_path) as (b, _):
        queue_two_publishes(b, sub)
        sub.wait_for(3)
        publish(b, events(1, start=3), traceparent="00-" + "0" * 32 + f"-{PARENT_A}-01")
        sub.wait_for(4)
        first, second = sub.received
        assert first.headers["traceparent"] == PARENT_HEADER_A
        assert "tracestate" not in first.headers
        traced = [e.get("traceparent") for e in first.events]
        assert traced == [PARENT_HEADER_A, PARENT_HEADER_A, PARENT_HEADER_B]
        assert first.events[2]["tracestate"] == STATE_B
        # an invalid traceparent (all-zero trace id) is ignored, not refused
        assert "traceparent" not in second.headers and "traceparent" not in second.events[0]
    assert receiver.requests == 0


PROBE = textwrap.dedent(
    """
    import sys
    if sys.argv[1] == "redis":  # redis-py alone: see below
        import redis
    else:
        from config.settings import Settings
        from app.web.server import WebServer
        from workers.process import WorkerProcess

        settings = Settings(redis_url=sys.argv[1], root_key="k" * 32)
        WebServer(settings).load()
        WorkerProcess(settings)
    print(" ".join(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
    """
)


def loaded(what: str, env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, what], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_nothing_of_opentelemetry_is_loaded_without_an_endpoint(redis_url: str) -> None:
    """The web app and the worker built as `busbar web` and `busbar worker` build them.
    redis-py 8.1 itself imports OpenTelemetry's metrics SDK whenever it is installed (its
    own optional observability, off unless initialized): that much is loaded by
    `import redis` alone, and busbar adds nothing to it."""
    off = untraced_env()
    assert loaded(redis_url, off) <= loaded("redis", off)
    assert not {m for m in loaded(redis_url, off) if m.startswith("opentelemetry.sdk.trace")}
    on = loaded(redis_url, {**off, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert {"opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http"} <= on
