"""A request's header block, read for gevent.pywsgi's handler in one strict pass.

gevent's handler reads headers with the standard library's `http.client.parse_headers`,
which hands the block to the `email` package's feed parser: about 14 µs of a publish's
CPU (of some 220 µs in all), and lenient where an HTTP server should not be. Here the
lines are split once and checked as RFC 9112 asks of a server:

- a field name is a token, with no whitespace before its colon;
- an obsolete line folding (a line starting with a space or a tab) is refused;
- a value holds no CR, LF or NUL;
- at most MAX_HEADERS fields of at most MAX_LINE bytes each (http.client's limits).

A header block that breaks a rule is refused with `400` (the handler reads `status`)
and the connection closed; nothing of it reaches the app. The object answers what
gevent's handler and gunicorn's access log ask of `http.client.HTTPMessage`, except the
raw header lines: the worker (app/web/worker.py) builds the environ from `fields`.
"""

from __future__ import annotations

import re
from typing import Any

MAX_LINE = 65536
MAX_HEADERS = 100
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_IN_VALUE = re.compile(rb"[\r\n\x00]")


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

    def __delitem__(self, name: str) -> None:
        wanted = name.lower()
        kept = [(k, v) for k, v in self.fields if k.lower() != wanted]
        if len(kept) == len(self.fields):
            raise KeyError(name)
        self.fields = kept
        del self._first[wanted]

    def items(self) -> list[tuple[str, str]]:
        return list(self.fields)

    @property
    def typeheader(self) -> str | None:
        return self._first.get("content-type")


def _refused(why: str) -> RequestHeaders:
    return RequestHeaders([], why)


def read_headers(rfile: Any, *_: Any) -> RequestHeaders:
    """Read up to the blank line that ends the block (or the end of the stream)."""
    fields: list[tuple[str, str]] = []
    while True:
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            return _refused("Line too long")
        if line in (b"\r\n", b"\n", b""):
            return RequestHeaders(fields)
        if len(fields) == MAX_HEADERS:
            return _refused(f"More than {MAX_HEADERS} headers")
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            return _refused("Invalid header line")  # also obs-fold and 'Name : value'
        if not value.endswith(b"\n"):
            return _refused("Header block cut short")
        value = value[:-2] if value.endswith(b"\r\n") else value[:-1]
        value = value.strip(b" \t")
        if _BAD_IN_VALUE.search(value):
            return _refused("Invalid character in a header value")
        fields.append((name.decode("latin-1"), value.decode("latin-1")))
