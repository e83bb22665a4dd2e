"""Tracing on: the OpenTelemetry SDK, exporting over OTLP/HTTP (the `otel` extra).

Imported only by app/tracing.py's from_env(), when an OTLP endpoint is set. Everything
else is the SDK's standard environment (OTEL_EXPORTER_OTLP_*, OTEL_BSP_*,
OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): read by the SDK
itself, not by busbar's Settings. The provider is the process's own, never installed
as OpenTelemetry's global one, so nothing else in the process starts exporting spans
through it. Its BatchSpanProcessor exports from a thread of its own; shutdown() (and
the SDK's atexit hook, should a process end another way) flushes what is left.

Span attributes name the topic, the subscriber's client name, the batch and the
outcome: never a token, a secret or a callback URL (which may carry credentials; the
host is named instead).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceState

from app import tracing
from app.models.trace_context import TraceContext

if TYPE_CHECKING:
    from app.codec import QueuedEvent
    from app.delivery.flight import Flight

SCOPE = "busbar"
SYSTEM = {"messaging.system": "busbar"}


def span_context(kept: TraceContext) -> SpanContext:
    """A kept context as the SDK's remote SpanContext (a parent, or a link)."""
    state = kept.tracestate
    return SpanContext(
        int(kept.trace_id, 16),
        int(kept.parent_id, 16),
        is_remote=True,
        trace_flags=trace.TraceFlags(kept.flags),
        trace_state=TraceState.from_header([state]) if state else None,
    )


def propagated(context: SpanContext) -> TraceContext:
    """A span's context as the headers that make it the parent of the next hop."""
    parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    return TraceContext(parent, context.trace_state.to_header() or None)


def parent(kept: TraceContext | None) -> otel_context.Context:
    """The context a span starts in: the kept one, or none at all (a root), never the
    thread's current context."""
    empty = otel_context.Context()
    if kept is None:
        return empty
    remote = trace.NonRecordingSpan(span_context(kept))
    return trace.set_span_in_context(remote, empty)


class OtelSpan(tracing.Span):
    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self.context = propagated(span.get_span_context())

    def end(self, code: int, error: str = "", events: int = 0) -> None:
        span = self._span
        if events:
            span.set_attribute("messaging.batch.message_count", events)
        if code:
            span.set_attribute("http.response.status_code", code)
        if not 200 <= code < 300:
            error = error or str(code)
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR, error))
        span.end()


class OtelTracing(tracing.Tracing):
    on = True

    def __init__(self, service: str) -> None:
        attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": service}
        self._provider = TracerProvider(resource=Resource.create(attributes))
        self._provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        self._tracer = self._provider.get_tracer(SCOPE)

    def publish(self, topic: str, incoming: TraceContext | None) -> tracing.Span:
        """SERVER: the bus answering the publisher's request, a child of its span.
        `topic`: empty when the path names no valid topic."""
        attributes = {**SYSTEM, "messaging.operation.type": "send"}
        if topic:
            attributes["messaging.destination.name"] = topic
        name = f"publish {topic}" if topic else "publish"
        span = self._tracer.start_span(name, parent(incoming), SpanKind.SERVER, attributes)
        return OtelSpan(span)

    def delivery(self, flight: Flight, events: Sequence[QueuedEvent]) -> tracing.Span:
        """CLIENT: the POST to the subscriber, a child of the first event's context (the
        first that has one), linked to the other distinct contexts of the batch."""
        contexts = list(dict.fromkeys(c for e in events if (c := e.trace) is not None))
        first = contexts[0] if contexts else None
        links = [Link(span_context(c)) for c in contexts[1:]]
        topics = sorted({e.topic for e in events})
        attributes: dict[str, str | int | Sequence[str]] = {
            **SYSTEM,
            "messaging.operation.type": "process",
            "messaging.batch.message_count": len(events),
            "busbar.subscriber": flight.client,
            "busbar.batch_id": flight.batch_id.decode(),
            "busbar.topics": topics,
            "server.address": flight.host,
        }
        if len(topics) == 1:
            attributes["messaging.destination.name"] = topics[0]
        span = self._tracer.start_span("deliver", parent(first), SpanKind.CLIENT, attributes, links)
        return OtelSpan(span)

    def shutdown(self) -> None:
        self._provider.shutdown()
