"""A callback's answer, framed as RFC 9112 section 6.3 says, strictly; fed its bytes as
they come, in any split.

Interim 1xx answers are skipped; 204 and 304 have no body; Transfer-Encoding (chunked
last) wins over Content-Length, which must be one number; otherwise the body runs to
the close. Only the status, Retry-After and the body's first KEPT bytes are kept, and
at most MAX_ANSWER bytes of the body are read. The answer's connection can carry
another request only when the answer was read to the end, was HTTP/1.1 and did not say
`Connection: close`. Anything this reader cannot frame is a BadAnswer (a failed
delivery).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from app.errors import BadAnswer

MAX_ANSWER = 4096  # bytes of an answer's body read at most; a longer one closes the connection
MAX_HEAD = 16 * 1024  # bytes of an answer's status line and headers
KEPT = 1024  # bytes of the body kept, for the attempt log
_END_OF_HEAD = re.compile(rb"\r?\n\r?\n")
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?:[ \t][^\r\n]*)?\r?")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,8})[ \t]*(?:;[^\r\n]*)?\r?\n")
HEAD, LENGTH, CHUNK_SIZE, CHUNK_DATA, CHUNK_END, TRAILERS, TO_CLOSE, DONE = range(8)


class Answer(NamedTuple):
    status: int
    retry_after: str | None  # the header, as sent (app/delivery/backpressure.py reads it)
    body: bytes = b""  # its first KEPT bytes (of the data, when chunked)


class AnswerReader:
    """Fed the bytes of one answer as they come; says when it is whole."""

    def __init__(self) -> None:
        self._buffer = b""
        self._state = HEAD
        self._left = 0  # body bytes still to come in this length or chunk
        self._read = 0  # body bytes read so far
        self._kept = b""  # the first KEPT of them
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
        while self._state != DONE and self._step():
            pass
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
        if len(self._kept) < KEPT:
            self._kept += buffer[: min(taken, KEPT - len(self._kept))]
        self._buffer, self._read = buffer[taken:], self._read + taken
        if state != TO_CLOSE:
            self._left -= taken
        if self._read > MAX_ANSWER:
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
        if buffer.find(b"\n", 0, 1024) < 0:
            return self._need(buffer, 1024, "a chunk size line")
        found = _CHUNK_SIZE.match(buffer)
        if found is None:
            raise BadAnswer("not a chunk size line")
        self._buffer, self._left = buffer[found.end() :], int(found.group(1), 16)
        self._state = CHUNK_DATA if self._left else TRAILERS
        return True

    def _chunk_end(self) -> bool:
        buffer = self._buffer
        end = buffer.find(b"\n")
        if end < 0:
            return self._need(buffer, 2, "the end of a chunk")
        if buffer[:end] not in (b"", b"\r"):
            raise BadAnswer("a chunk longer than its size")
        self._buffer, self._state = buffer[end + 1 :], CHUNK_SIZE
        return True

    def _trailer(self) -> bool:
        """Fields after the last chunk, up to an empty line: skipped."""
        buffer = self._buffer
        end = buffer.find(b"\n")
        if end < 0:
            return self._need(buffer, MAX_HEAD, "the trailer")
        self._buffer = buffer[end + 1 :]
        if buffer[:end] in (b"", b"\r"):
            self._done(reusable=not self._buffer)
            return False
        return True

    def _need(self, buffer: bytes, most: int, what: str) -> bool:
        if len(buffer) > most:
            raise BadAnswer(f"{what} over {most} bytes")
        return False

    def _head(self) -> bool:
        buffer = self._buffer
        end = _END_OF_HEAD.search(buffer)
        if end is None:
            return self._need(buffer, MAX_HEAD, "the answer's head")
        lines = buffer[: end.start()].split(b"\n")
        self._buffer = buffer[end.end() :]
        status_line = _STATUS_LINE.fullmatch(lines[0])
        if status_line is None:
            raise BadAnswer("not an HTTP/1.x status line")
        status = int(status_line.group(2))
        if status < 200 and status != 101:
            return True  # an interim answer (100 Continue, 103 Early Hints): the real one follows
        fields = _fields(lines[1:])
        connection = fields.get(b"connection", b"").lower()
        self._keep = status != 101 and status_line.group(1) == b"1" and b"close" not in connection
        retry_after = fields.get(b"retry-after")
        self.answer = Answer(status, None if retry_after is None else retry_after.decode("latin-1"))
        coding, length = fields.get(b"transfer-encoding"), fields.get(b"content-length")
        if status in (101, 204, 304):
            self._done(reusable=not self._buffer)
            return False
        if coding is not None:
            chunked = coding.rsplit(b",", 1)[-1].strip().lower() == b"chunked"
            self._state = CHUNK_SIZE if chunked else TO_CLOSE
        elif length is not None:
            self._state, self._left = LENGTH, _length(length)
        else:
            self._state = TO_CLOSE
        return True

    def _done(self, reusable: bool) -> None:
        self._state = DONE
        self.reusable = reusable and self._keep
        if self._kept and self.answer is not None:
            self.answer = self.answer._replace(body=self._kept)


def _fields(lines: list[bytes]) -> dict[bytes, bytes]:
    """The header fields a delivery reads, names lowercased; repeats joined by commas."""
    fields: dict[bytes, bytes] = {}
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or name[:1] in b" \t":
            raise BadAnswer("a header line that is not a field")
        key = name.lower()
        if key in (b"content-length", b"transfer-encoding", b"connection", b"retry-after"):
            value = value.strip()
            fields[key] = fields[key] + b"," + value if key in fields else value
    return fields


def _length(value: bytes) -> int:
    """Content-Length: one number (repeats of the same number allowed, as RFC 9110 does)."""
    numbers = {v.strip() for v in value.split(b",")}
    if len(numbers) != 1:
        raise BadAnswer("Content-Length with different values")
    (number,) = numbers
    if not number.isdigit() or len(number) > 15:
        raise BadAnswer("a Content-Length that is not a number")
    return int(number)
