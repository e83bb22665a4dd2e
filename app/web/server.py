"""`busbar web`: gunicorn serving create_app(), configured from Settings only."""

from __future__ import annotations

from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from app.limits import open_files_for
from config.gunicorn import options
from config.settings import Settings


class WebServer(BaseApplication):  # type: ignore[misc]  # gunicorn ships no types: Any
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        super().__init__()

    def load_config(self) -> None:
        known = self.cfg.settings
        for key, value in options(self._settings).items():
            if key in known:
                self.cfg.set(key, value)
        s = self._settings
        if s.web_worker_class == "gevent":
            from app.web.worker import worker_class  # gevent: only when it is the class

            self.cfg.set("worker_class", worker_class(s.header_timeout_s, s.body_timeout_s))
            open_files_for(s.web_connections, "BUSBAR_WEB_CONNECTIONS")
        self.cfg.set("worker_exit", flush_spans)

    def load(self) -> Flask:
        from app.tracing import from_env
        from app.web.factory import create_app

        # built in each gunicorn worker (no preload): the span exporter's thread is its own
        return create_app(self._settings, tracing=from_env("busbar-web"))

    # gunicorn's BaseApplication calls init(parser, opts, args); busbar reads no arguments
    def init(self, parser: Any, opts: Any, args: Any) -> None:  # noqa: ARG002  # pragma: no cover
        return None


def flush_spans(_arbiter: Any, worker: Any) -> None:
    """gunicorn's worker_exit hook, run in the worker as it stops (a graceful SIGTERM
    included): the spans its tracing still buffers are exported."""
    from app.web.context import EXTENSION, WebContext

    app = getattr(worker, "wsgi", None)
    ctx = getattr(app, "extensions", {}).get(EXTENSION)
    if isinstance(ctx, WebContext):
        ctx.tracing.shutdown()


def serve(settings: Settings) -> None:
    WebServer(settings).run()
