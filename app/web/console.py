"""GET /console: the operator console, one hand-written page, its script (ES modules the
browser loads as they are) and its style, shipped in the package (no CDN, no build step).

The page holds no data: its script asks for a token, keeps it in the tab's
sessionStorage and calls the JSON API with Basic auth, like any other client. The
Content-Security-Policy allows nothing but this origin's own files: no inline script or
style, no third-party request, no framing.
"""

from __future__ import annotations

import functools
import html
from importlib import resources

from flask import Blueprint, Response

from app.errors import NotFound
from app.release import LAYOUT, version

blueprint = Blueprint("console", __name__)

SCRIPTS = (
    "console.js",
    "session.js",
    "dom.js",
    "tables.js",
    "attempts.js",
    "deadletters.js",
    "pausing.js",
    "erasures.js",
    "trial.js",
    "transform.js",
    "page.js",
    "charts.js",
    "subpages.js",
)
TYPES = {
    "console.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    **dict.fromkeys(SCRIPTS, "text/javascript; charset=utf-8"),
}
ASSETS = (*SCRIPTS, "console.css")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@functools.cache
def read(name: str) -> bytes:
    return resources.files(__package__).joinpath("console_assets", name).read_bytes()


def served(name: str, body: bytes | None = None) -> Response:
    response = Response(read(name) if body is None else body, content_type=TYPES[name])
    response.headers.update(HEADERS)
    return response


@functools.cache
def page_text() -> bytes:
    """The page with this release's version and layout in its footer (app/release.py)."""
    text = read("console.html").decode()
    text = text.replace("@VERSION@", html.escape(version())).replace("@LAYOUT@", str(LAYOUT))
    return text.encode()


@blueprint.get("/console")
def page() -> Response:
    return served("console.html", page_text())


@blueprint.get("/console/<asset>")
def asset(asset: str) -> Response:
    if asset not in ASSETS:
        raise NotFound("no such console file")
    return served(asset)
