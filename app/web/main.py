"""`busbar web`: gunicorn serving the Flask app on $PORT (app/web/server.py)."""

from __future__ import annotations

import sys

from config.startup import start

NO_ROOT_KEY = (
    "busbar web: BUSBAR_ROOT_KEY is not set. Set it to a secret of 8+ printable "
    "characters (it is the root API key), or use `busbar dev`, which makes one."
)


def main(argv: list[str]) -> int:
    settings = start("web", argv, "serve the HTTP API with gunicorn on $PORT")
    if not settings.root_key:
        print(NO_ROOT_KEY, file=sys.stderr)
        return 2
    from app.web.server import serve  # gunicorn and Flask load only for this command

    serve(settings)
    return 0
