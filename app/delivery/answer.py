"""A callback's answer, framed as RFC 9112 section 6.3 says, strictly; fed its bytes as
they come, in any split.

Interim 1xx answers are skipped; 204 and 304 have no body; otherwise the body is framed
by Transfer-Encoding: chunked or by one Content-Length, and runs to the close when
neither was sent. The rules are app/framing.py's, the same the web holds requests to:
lines end in CRLF, fields are valid, and an answer with both framing headers, two
lengths, a length that is not digits or a coding other than chunked is refused. Such an
answer is where a smuggled second answer hides, to be taken for the next delivery's on
a kept-alive connection; it is a BadAnswer (a failed delivery) and the connection is
closed.

Only the status, Retry-After and the body's first KEPT bytes are kept, and at most
MAX_ANSWER bytes of the body are read. The answer's connection can carry another request
only when the answer was read to the end, nothing came after it, it was HTTP/1.1 and did
not say `Connection: close`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from app import framing
from app.errors import BadAnswer, BadFraming

MAX_ANSWER = 4096  # bytes of an answer's body read at most; a longer one closes the connection
MAX_HEAD = 16 * 1024  # bytes of an answer's status line and headers
KEPT = 1024  # bytes of the body kept, for the attempt log
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [\t \x21-\x7e\x80-\xff]*)?")
HEAD, LENGTH, CHUNK_SIZE, CHUNK_DATA, CHUNK_END, TRAILERS, TO_CLOSE, DONE = range(8)


class Answer(NamedTuple):
    status: int
    retry_after: str | None  # the header, as sent (app/delivery/backpressure.py reads it)
    body: bytes = b""  # its first KEPT bytes (of the data, when chunked)


class AnswerReader:
    """Fed the bytes of one answer as they come; says when it is whole."""

    def __init__(self, limit: int = 0) -> None:
        """`limit`: keep and read the body up to that many bytes (a token endpoint's
        answer, app/delivery/token_fetch.py), instead of KEPT and MAX_ANSWER."""
        self._keep_bytes, self._most = (limit, limit) if limit else (KEPT, MAX_ANSWER)
        self._buffer = b""
        self._state = HEAD
        self._left = 0  # body bytes still to come in this length or chunk
        self._read = 0  # body bytes read so far
        self._kept = b""  # the first KEPT of them (or of limit)
        self._trailers = 0  # trailer fields read
        self._keep = True  # HTTP/1.1 without Connection: close
        self.got_bytes = False
        self.answer: Answer | None = None
        self.reusable = False

    def feed(self, data: bytes) -> bool:
        """True once the answer is whole (or enough of it: a body over MAX_ANSWER). Bytes
        after a whole answer put the connection out of step: it is not kept."""
        if self._state == DONE:
            self.reusable = False
            return True
        self.got_bytes = True
        self._buffer += data
        try:
            while self._state != DONE and self._step():
                pass
        except BadFraming as exc:
            raise BadAnswer(exc.message) from None
        return self._state == DONE

    def eof(self) -> bool:
        """The server closed its side: the end of a body that runs to the close."""
        if self._state == TO_CLOSE:
            self._done(reusable=False)
            return True
        return self._state == DONE

    def _step(self) -> bool:
        """One move of the framing; False when it needs more bytes."""
        state = self._state
        if state == HEAD:
            return self._head()
        if state == CHUNK_SIZE:
            return self._chunk_size()
        if state == CHUNK_END:
            return self._chunk_end()
        if state == TRAILERS:
            return self._trailer()
        return self._body(state)

    def _body(self, state: int) -> bool:
        """Body bytes: of a known length, of a chunk, or up to the close."""
        buffer = self._buffer
        taken = len(buffer) if state == TO_CLOSE else min(self._left, len(buffer))
        if len(self._kept) < self._keep_bytes:
            self._kept += buffer[: min(taken, self._keep_bytes - len(self._kept))]
        self._buffer, self._read = buffer[taken:], self._read + taken
        if state != TO_CLOSE:
            self._left -= taken
        if self._read > self._most:
            self._done(reusable=False)  # not drained: the connection is closed instead
            return False
        if state == TO_CLOSE or self._left:
            return False
        if state == LENGTH:
            self._done(reusable=not self._buffer)
            return False
        self._state = CHUNK_END
        return True

    def _chunk_size(self) -> bool:
        buffer = self._buffer
        end = buffer.find(b"\n", 0, framing.CHUNK_LINE)
        if end < 0:
            return self._need(buffer, framing.CHUNK_LINE, "a chunk size line")
        self._buffer, self._left = buffer[end + 1 :], framing.chunk_size(buffer[: end + 1])
        self._state = CHUNK_DATA if self._left else TRAILERS
        return True

    def _chunk_end(self) -> bool:
        buffer = self._buffer
        if len(buffer) < 2:
            return False
        if buffer[:2] != b"\r\n":
            raise BadAnswer("a chunk's data not followed by CRLF")
        self._buffer, self._state = buffer[2:], CHUNK_SIZE
        return True

    def _trailer(self) -> bool:
        """Fields after the last chunk, up to an empty line: checked, then skipped."""
        buffer = self._buffer
        end = buffer.find(b"\n")
        if end < 0:
            return self._need(buffer, MAX_HEAD, "the trailer")
        line, self._buffer = _line(buffer[: end + 1]), buffer[end + 1 :]
        if not line:
            self._done(reusable=not self._buffer)
            return False
        self._trailers += 1
        if self._trailers > framing.MAX_TRAILERS:
            raise BadAnswer(f"more than {framing.MAX_TRAILERS} trailer fields")
        framing.field(line)
        return True

    def _need(self, buffer: bytes, most: int, what: str) -> bool:
        if len(buffer) > most:
            raise BadAnswer(f"{what} over {most} bytes")
        return False

    def _head(self) -> bool:
        buffer = self._buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            _line_ends(buffer[: buffer.rfind(b"\n") + 1])  # a bare LF now, not at MAX_HEAD
            return self._need(buffer, MAX_HEAD, "the answer's head")
        head, self._buffer = buffer[: end + 2], buffer[end + 4 :]
        _line_ends(head)
        lines = head[:-2].split(b"\r\n")
        status_line = _STATUS_LINE.fullmatch(lines[0])
        if status_line is None:
            raise BadAnswer("not an HTTP/1.x status line")
        status = int(status_line.group(2))
        fields, lengths, codings = _fields(lines[1:])
        length = framing.body_length(lengths, codings)  # held to the rules even if unused
        if status < 200 and status != 101:
            return True  # an interim answer (100 Continue, 103 Early Hints): the real one follows
        connection = fields.get(b"connection", b"").lower()
        self._keep = status != 101 and status_line.group(1) == b"1" and b"close" not in connection
        retry_after = fields.get(b"retry-after")
        self.answer = Answer(status, None if retry_after is None else retry_after.decode("latin-1"))
        if status in (101, 204, 304):
            self._done(reusable=not self._buffer)
            return False
        if length == framing.CHUNKED:
            self._state = CHUNK_SIZE
        elif length is not None:
            self._state, self._left = LENGTH, length
        else:
            self._state = TO_CLOSE
        return True

    def _done(self, reusable: bool) -> None:
        self._state = DONE
        self.reusable = reusable and self._keep
        if self._kept and self.answer is not None:
            self.answer = self.answer._replace(body=self._kept)


def _line_ends(lines: bytes) -> None:
    """Every LF in a head is a CRLF's: a bare one may end a line for one reader and not
    for another."""
    if lines.count(b"\n") != lines.count(b"\r\n") or b"\r" in lines.replace(b"\r\n", b""):
        raise BadAnswer("a line of the answer's head not ended by CRLF")


def _line(line: bytes) -> bytes:
    """A trailer line without its CRLF, which it must end in."""
    if not line.endswith(b"\r\n"):
        raise BadAnswer("a trailer line not ended by CRLF")
    return line[:-2]


def _fields(lines: list[bytes]) -> tuple[dict[bytes, bytes], list[bytes], list[bytes]]:
    """The header fields a delivery reads, names lowercased and repeats joined by commas;
    and every Content-Length and Transfer-Encoding, each as sent (their repeats matter)."""
    fields: dict[bytes, bytes] = {}
    lengths: list[bytes] = []
    codings: list[bytes] = []
    for line in lines:
        name, value = framing.field(line)
        key = name.lower()
        if key == b"content-length":
            lengths.append(value)
        elif key == b"transfer-encoding":
            codings.append(value)
        elif key in (b"connection", b"retry-after"):
            fields[key] = fields[key] + b"," + value if key in fields else value
    return fields, lengths, codings
