"""Reading JSON request bodies strictly, with messages that say what is wrong.

Routemaster clients do not always send `Content-Type: application/json`, so the body is
parsed whatever the header says. A key that appears twice in one object is refused (the
last would silently win). NaN and Infinity are refused, written as such or as a
number too large for a double: they are not JSON and would come back out as invalid
JSON to subscribers.

Bodies over BUSBAR_MAX_BODY_BYTES are refused with 413 before a byte is read: a declared
Content-Length is checked before authentication (refusing costs nothing and needs no
Redis), and a chunked body is cut off by Werkzeug's MAX_CONTENT_LENGTH stream limit as
soon as it passes the limit while being read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Set as AbstractSet
from typing import Any

from flask import Flask, request
from werkzeug.exceptions import RequestEntityTooLarge

from app.errors import BadFraming, InvalidInput, PayloadTooLarge

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _too_large() -> PayloadTooLarge:
    limit = request.max_content_length
    return PayloadTooLarge(f"request body is larger than BUSBAR_MAX_BODY_BYTES ({limit} bytes)")


def _refuse_declared_oversize() -> None:
    length = request.content_length
    limit = request.max_content_length
    if length is not None and limit is not None and length > limit:
        raise _too_large()


def limit_bodies(app: Flask, max_bytes: int) -> None:
    """Cap every body at max_bytes, declared (checked first) or chunked (while read)."""
    app.config["MAX_CONTENT_LENGTH"] = max_bytes
    app.before_request(_refuse_declared_oversize)


def _refuse_chunked_under_gthread() -> None:
    """gunicorn's gthread worker frames requests with its own parser, strict about both
    framing headers and line ends but lenient on chunk lines (an extension may hold what
    a proxy reads as a line end); busbar cannot put its strict decoder (app/web/chunked.py)
    under it. So with that class a chunked body is refused, unread, and the connection
    closed: send Content-Length, or run the default gevent class, which decodes it."""
    coding = request.environ.get("HTTP_TRANSFER_ENCODING")
    if coding is None:
        return
    if coding.lower() != "chunked":
        raise BadFraming("only Transfer-Encoding: chunked is supported", 501)
    raise BadFraming(
        "a chunked body is not read with BUSBAR_WEB_WORKER_CLASS=gthread; send Content-Length",
        411,
    )


def frame_bodies_under_gthread(app: Flask) -> None:
    app.before_request(_refuse_chunked_under_gthread)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    """A number too large for a double (1e400) would become Infinity, which is not JSON
    and would reach subscribers as invalid JSON."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text[:40]} is beyond the range of a double")
    return value


def read_body() -> bytes:
    """Werkzeug ends a streamed (chunked) body at the limit without saying it was cut,
    which would turn an oversized body into a confusing JSON error: one byte more from
    the server's stream tells a body of exactly the limit from a longer one."""
    try:
        raw = request.get_data(cache=False)
    except RequestEntityTooLarge:
        raise _too_large() from None
    limit = request.max_content_length
    if limit is None or request.content_length is not None or len(raw) < limit:
        return raw
    if request.environ["wsgi.input"].read(1):  # a streamed body goes on past the limit
        raise _too_large()
    return raw


def _no_lone_surrogates(raw: bytes, value: Any) -> None:
    """`"\\ud800"` alone is accepted by json.loads but is no character: stored, it fails
    to encode later (a 500). Only a body that spells a surrogate escape is checked."""
    if _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise InvalidInput(
                "request body is not valid Unicode: it holds an unpaired surrogate escape"
            ) from None


def json_body() -> Any:
    return decode_json(read_body())


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose key appears twice is refused: json.loads would keep the last,
    so busbar would store (and pass on) another document than the one sent. Costs about
    2 µs a single publish and 0.5 µs an object in a bulk one (measured on this machine)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"key {json.dumps(key)[:80]} appears twice in one object")
            seen.add(key)
    return value


_STRICT = json.JSONDecoder(
    parse_constant=_no_constants, parse_float=_finite, object_pairs_hook=_unique_keys
)  # holds no state between calls: one serves every request


def decode_json(raw: bytes) -> Any:
    """A request body as JSON, strictly (module docstring), with a message saying what is
    wrong; the publish fast path (app/web/publish.py) reads its body itself."""
    if not raw.strip():
        raise InvalidInput("request body is empty; expected JSON")
    try:  # what json.loads does, without making a decoder a call (its arguments)
        value = _STRICT.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}") from None
    _no_lone_surrogates(raw, value)
    return value


def json_object(allowed: set[str], required: AbstractSet[str] = frozenset()) -> dict[str, Any]:
    """A JSON object with only known keys, so typos fail loudly instead of being ignored."""
    body = json_body()
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(f"unknown key(s): {', '.join(unknown)}")
    missing = sorted(required - set(body))
    if missing:
        raise InvalidInput(f"missing key(s): {', '.join(missing)}")
    return body
