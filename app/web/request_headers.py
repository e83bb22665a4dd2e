"""A request's head (request line and header block), read for gevent.pywsgi's handler in
one strict pass, and how its body is framed.

gevent's handler reads headers with the standard library's `http.client.parse_headers`,
which hands the block to the `email` package's feed parser: about 14 µs of a publish's
CPU (of some 220 µs in all), and lenient where an HTTP server should not be. It splits
the request line on any whitespace and frames a body sent with both Content-Length and
Transfer-Encoding by the latter: a request-smuggling pair behind a proxy that reads it
the other way. Here the lines are checked as RFC 9112 asks of a server (app/framing.py
holds the rules, shared with the engine's reader of callbacks' answers):

- the request line is `method SP target SP HTTP/1.0|1.1 CRLF`, nothing looser;
- every header line ends in CRLF and is a valid field (no fold, no space before the
  colon, no control character);
- at most MAX_HEADERS fields of at most MAX_LINE bytes each (http.client's limits);
- one Host (an HTTP/1.1 request without one is refused, as RFC 9112 section 3.2 says);
- the body is framed by one Content-Length of digits, or by Transfer-Encoding: chunked
  alone (not both; not chunked in HTTP/1.0); another coding is 501.

A head that breaks a rule is refused (BadFraming: 400 or 501, with a message naming the
rule) and the connection closed; nothing of it reaches the app. The header object answers
what gevent's handler and gunicorn's access log ask of `http.client.HTTPMessage`, except
the raw header lines: the worker (app/web/worker.py) builds the environ from `fields`.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from app import framing
from app.errors import BadFraming

MAX_LINE = 65536
MAX_HEADERS = 100
_REQUEST_LINE = re.compile(r"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) (HTTP/1\.[01])\r\n")


class RequestHeaders:
    """The fields in the order received (names as sent); `status` is empty when the
    block was read whole and valid, else what was wrong with it."""

    __slots__ = ("_first", "fields", "status")

    def __init__(self, fields: list[tuple[str, str]], status: str = "") -> None:
        self.fields = fields
        self.status = status
        self._first: dict[str, str] = {}
        for key, value in reversed(fields):
            self._first[key.lower()] = value

    def get(self, name: str, default: Any = None) -> Any:
        """The first field of that name (any case), as HTTPMessage.get."""
        return self._first.get(name.lower(), default)

    getheader = get

    def every(self, name: str) -> list[bytes]:
        """Each field of that name (any case), as received: framing must see repeats."""
        wanted = name.lower()
        return [v.encode("latin-1") for k, v in self.fields if k.lower() == wanted]

    def items(self) -> list[tuple[str, str]]:
        return list(self.fields)

    @property
    def typeheader(self) -> str | None:
        return self._first.get("content-type")


def _refused(why: str) -> RequestHeaders:
    return RequestHeaders([], why)


def read_headers(rfile: Any, *_: Any) -> RequestHeaders:
    """Read up to the blank line that ends the block; a stream that ends first is a block
    cut short (a request without its end is never served)."""
    fields: list[tuple[str, str]] = []
    while True:
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            return _refused(f"a header line over {MAX_LINE} bytes")
        if line == b"\r\n":
            return RequestHeaders(fields)
        if not line.endswith(b"\n"):
            return _refused("the header block was cut short")
        if not line.endswith(b"\r\n"):
            return _refused("a header line ended by a bare LF, not CRLF")
        if len(fields) == MAX_HEADERS:
            return _refused(f"more than {MAX_HEADERS} header fields")
        try:
            name, value = framing.field(line[:-2])
        except BadFraming as exc:
            return _refused(exc.message)
        fields.append((name.decode("latin-1"), value.decode("latin-1")))


class RequestHead(NamedTuple):
    method: str
    target: str
    version: str  # HTTP/1.0 or HTTP/1.1
    headers: RequestHeaders
    length: int | None  # Content-Length, or None: chunked (see `chunked`) or no body
    chunked: bool
    close: bool  # the client asked for the connection to end after this answer


def read_head(request_line: str, rfile: Any) -> RequestHead:
    """The request line (as read, CRLF included) and the header block after it, framed;
    BadFraming for anything ambiguous (module docstring)."""
    found = _REQUEST_LINE.fullmatch(request_line)
    if found is None:
        raise BadFraming("not a request line (method SP target SP HTTP/1.x CRLF)")
    method, target, version = found.groups()
    headers = read_headers(rfile)
    if headers.status:
        raise BadFraming(headers.status)
    hosts = len(headers.every("host"))
    if hosts > 1 or (hosts == 0 and version == "HTTP/1.1"):
        raise BadFraming(
            "an HTTP/1.1 request must carry one Host" if hosts == 0 else "Host sent more than once"
        )
    codings = headers.every("transfer-encoding")
    if codings and version == "HTTP/1.0":
        raise BadFraming("Transfer-Encoding in an HTTP/1.0 request")
    length = framing.body_length(headers.every("content-length"), codings)
    tokens = {t.strip() for t in (headers.get("connection") or "").lower().split(",")}
    close = "close" in tokens if version == "HTTP/1.1" else "keep-alive" not in tokens
    chunked = length == framing.CHUNKED
    return RequestHead(
        method, target, version, headers, None if chunked else length, chunked, close
    )
