"""The HTTP side: the Flask app (create_app, from app/web/factory.py) and the gunicorn
server around it (app/web/server.py, app/web/worker.py).

create_app is loaded on first use, not with the package: `busbar web` imports
app.web.main first, and with the gevent worker class it must patch the standard library
before Flask, redis and ssl are imported (gevent's own rule: patch first).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from app.web.factory import create_app

        return create_app
    raise AttributeError(f"module 'app.web' has no attribute {name!r}")
