"""Real HTTP servers for receivers under test: Werkzeug's threaded WSGI server, and
uvicorn for ASGI, each on a free loopback port in a thread, stopped on exit."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from werkzeug.serving import make_server

from dev.redis_server import free_port


def recording(app: Any, wire: list[tuple[bytes, dict[str, str]]]) -> Any:
    """`app` behind a middleware that keeps each request as it arrived, raw body and
    headers (lower-case), before the app reads it: what a verifier must be given."""

    def middleware(environ: dict[str, Any], start_response: Any) -> Any:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        headers = {
            k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")
        }
        wire.append((body, headers))
        environ["wsgi.input"] = io.BytesIO(body)
        return app(environ, start_response)

    return middleware


@contextmanager
def wsgi_serving(app: Any, port: int = 0) -> Iterator[str]:
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


@contextmanager
def asgi_serving(app: Any, port: int = 0) -> Iterator[str]:
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
