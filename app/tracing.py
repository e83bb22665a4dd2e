"""Spans for publishes and delivery attempts: what the web and worker processes ask of
tracing, and the answer when it is off (docs/tracing.md).

Tracing is on only when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or its traces-only
form) is set: then `app/otel.py` loads the OpenTelemetry SDK (the `otel` extra) and
exports over OTLP/HTTP. Otherwise `NO_TRACING` answers, and nothing of OpenTelemetry is
imported: the callers test `Tracing.on` before anything that would cost a call, so a
process without tracing pays one attribute read a publish or a delivery. A trace
context a publisher sent is kept and delivered either way (app/models/trace_context.py).

Each process builds its Tracing once and passes it down explicitly (WebContext, the
engine's Room); nothing here is a module-level global.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from app.models.trace_context import TraceContext

if TYPE_CHECKING:
    from app.codec import QueuedEvent
    from app.delivery.flight import Flight

ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class Span:
    """A span begun: `context` is what to propagate (None: what came in, as it came);
    end() says how it went. This one records nothing."""

    context: TraceContext | None = None

    def end(self, code: int, error: str = "", events: int = 0) -> None:
        """`code`: the HTTP status answered (publish) or got (delivery), 0 for none;
        `error`: what went wrong, in words, when it was not a 2xx; `events`: how many a
        publish held."""


NO_SPAN = Span()


class Tracing:
    """Off: every span is NO_SPAN."""

    on = False

    def publish(self, topic: str, incoming: TraceContext | None) -> Span:  # noqa: ARG002  # off
        """The span of a publish to `topic`, a child of the publisher's context."""
        return NO_SPAN

    def delivery(self, flight: Flight, events: Sequence[QueuedEvent]) -> Span:  # noqa: ARG002  # off
        """The span of one delivery attempt of `flight`, whose events are `events`."""
        return NO_SPAN

    def shutdown(self) -> None:
        """Export what is still buffered: called once, as the process stops."""


NO_TRACING = Tracing()


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    return any(environ.get(name) for name in ENDPOINTS)


def from_env(service: str, environ: Mapping[str, str] = os.environ) -> Tracing:
    """The process's tracing: exported when an OTLP endpoint is set, else NO_TRACING.
    `service` names the process (service.name) unless OTEL_SERVICE_NAME does."""
    if not enabled(environ):
        return NO_TRACING
    from app.otel import OtelTracing  # the SDK: only now (the `otel` extra)

    return OtelTracing(service)
