"""A real OTLP/HTTP trace receiver for end-to-end tests: what busbar's processes export
arrives here as the collector would get it (POST /v1/traces, protobuf), decoded with
opentelemetry-proto's own classes, never with busbar's code."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass
class Received:
    """One exported span, with the service.name of the process that sent it."""

    service: str
    span: Span

    @property
    def trace_id(self) -> str:
        return self.span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self.span.span_id.hex()

    @property
    def parent_id(self) -> str:
        return self.span.parent_span_id.hex()

    @property
    def attributes(self) -> dict[str, object]:
        found: dict[str, object] = {}
        for kv in self.span.attributes:
            kind = kv.value.WhichOneof("value")
            value = getattr(kv.value, kind)
            if kind == "array_value":
                value = [getattr(v, v.WhichOneof("value")) for v in value.values]
            found[kv.key] = value
        return found


@dataclass
class Receiver:
    url: str = ""
    spans: list[Received] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def named(self, prefix: str) -> list[Received]:
        with self.lock:
            return [s for s in self.spans if s.span.name.startswith(prefix)]

    def wait_for(self, prefix: str, count: int, timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.named(prefix)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{len(self.named(prefix))} of {count} `{prefix}` spans arrived")


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            request = ExportTraceServiceRequest.FromString(body)
            with receiver.lock:
                receiver.requests += 1
                for resource_spans in request.resource_spans:
                    attributes = {a.key: a.value for a in resource_spans.resource.attributes}
                    service = attributes["service.name"].string_value
                    for scope_spans in resource_spans.scope_spans:
                        receiver.spans += [Received(service, s) for s in scope_spans.spans]
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
