"""Headers every response gets right, whatever view produced it.

A `204 No Content` has no body, so it has no content type either: Flask would label the
empty string `text/html`, which clients that dispatch on the type then try to parse.
"""

from __future__ import annotations

from flask import Flask, Response


def _no_type_without_content(response: Response) -> Response:
    if response.status_code == 204:
        del response.headers["Content-Type"]
    return response


def install(app: Flask) -> None:
    app.after_request(_no_type_without_content)
