"""`busbar web`: gunicorn serving create_app(), configured from Settings only."""

from __future__ import annotations

from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from config.gunicorn import options
from config.settings import Settings


class WebServer(BaseApplication):
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        super().__init__()

    def load_config(self) -> None:
        known = self.cfg.settings
        for key, value in options(self._settings).items():
            if key in known:
                self.cfg.set(key, value)

    def load(self) -> Flask:
        from app.web import create_app

        return create_app(self._settings)

    def init(self, parser: Any, opts: Any, args: Any) -> None:  # pragma: no cover
        return None


def serve(settings: Settings) -> None:
    WebServer(settings).run()
