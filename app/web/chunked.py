"""A chunked request body (wsgi.input), decoded strictly as app/framing.py says.

gevent's own decoder reads a chunk extension up to the next CR whatever it holds (a bare
LF, which a proxy may end the line at, included) and takes a trailer line without a
colon: the stream busbar then reads on may not be the one the client or a proxy meant.
This one takes a chunk size line only whole (hex digits, token extensions, CRLF, at most
framing.CHUNK_LINE bytes), each chunk's data followed by CRLF, and trailers that are
valid fields. Anything else raises BadFraming (400, connection closed): the app reads
a body whole before it acts on it, so nothing of such a request takes effect.
"""

from __future__ import annotations

from typing import Any

from app import framing
from app.errors import BadFraming

DISCARD_MOST = 64 * 1024  # body bytes read past when the app did not read them; more: close
_READ = 64 * 1024


class ChunkedBody:
    """Reads `rfile` from just after the head. `continuing` is gevent's Input for the same
    request, which sends `100 Continue` once, on the first read, when it was asked for."""

    def __init__(self, rfile: Any, continuing: Any) -> None:
        self._rfile, self._continuing = rfile, continuing
        self._left = 0  # data bytes still to come in the current chunk
        self._ended = False  # the last chunk and the trailers were read
        self._pending = b""  # read by readline beyond its line
        self.broken = False  # the stream is out of step: the connection must close

    def _line(self, most: int, what: str) -> bytes:
        line: bytes = self._rfile.readline(most + 1)
        if len(line) > most:
            raise BadFraming(f"{what} over {most} bytes")
        if not line.endswith(b"\n"):
            raise BadFraming("the chunked body was cut short")
        return line

    def _next_chunk(self) -> None:
        size = framing.chunk_size(self._line(framing.CHUNK_LINE, "a chunk size line"))
        if size:
            self._left = size
            return
        for _ in range(framing.MAX_TRAILERS + 1):
            line = self._line(framing.CHUNK_LINE, "a trailer line")
            if line == b"\r\n":
                self._ended = True
                return
            if not line.endswith(b"\r\n"):
                raise BadFraming("a trailer line ended by a bare LF, not CRLF")
            framing.field(line[:-2])
        raise BadFraming(f"more than {framing.MAX_TRAILERS} trailer fields")

    def _data(self, most: int) -> bytes:
        if not self._left:
            self._next_chunk()
            if self._ended:
                return b""
        data: bytes = self._rfile.read(min(self._left, most))
        if not data:
            raise BadFraming("the chunked body was cut short")
        self._left -= len(data)
        if not self._left and self._rfile.read(2) != b"\r\n":
            raise BadFraming("a chunk's data not followed by CRLF")
        return data

    def _read(self, size: int) -> bytes:
        """Up to `size` bytes of data; fewer only at the end of the body."""
        if self.broken:
            raise BadFraming("the chunked body could not be framed")
        self._continuing._send_100_continue()
        parts = [self._pending[:size]]
        self._pending, want = self._pending[size:], size - len(parts[0])
        try:
            while want > 0 and not self._ended:
                data = self._data(want)
                parts.append(data)
                want -= len(data)
        except BadFraming:
            self.broken = True
            raise
        return b"".join(parts)

    def read(self, size: int | None = None) -> bytes:
        if size is not None and size >= 0:
            return self._read(size)
        parts = []
        while chunk := self._read(_READ):
            parts.append(chunk)
        return b"".join(parts)

    def readline(self, size: int | None = None) -> bytes:
        most = _READ if size is None or size < 0 else size
        line = b""
        while len(line) < most and not line.endswith(b"\n"):
            piece = self._read(min(_READ, most - len(line)))
            if not piece:
                break
            end = piece.find(b"\n") + 1 or len(piece)
            line, self._pending = line + piece[:end], piece[end:] + self._pending
        return line

    def _discard(self) -> None:
        """gevent's handler, after the answer: the rest of a body the app did not read,
        so the next request starts where it should. Past DISCARD_MOST, or on a framing
        error, the connection is closed instead (the handler reads `broken`)."""
        self._continuing.send_100_continue_enabled = False
        try:
            left = DISCARD_MOST
            while left > 0 and (piece := self._read(min(_READ, left))):
                left -= len(piece)
            if not self._ended:
                self.broken = True
        except BadFraming:
            self.broken = True
