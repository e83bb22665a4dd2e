"""A chunked request body read strictly (app/web/chunked.py), on byte streams: the data
as sent, the stream left at the next request, and every malformed chunk refused."""

from __future__ import annotations

import io

import pytest
from gevent.pywsgi import Input

from app.errors import BadFraming
from app.web.chunked import DISCARD_MOST, ChunkedBody

NEXT = b"GET /next HTTP/1.1\r\n\r\n"


def body(raw: bytes) -> tuple[ChunkedBody, io.BytesIO]:
    stream = io.BytesIO(raw)
    return ChunkedBody(stream, Input(stream, None)), stream


@pytest.mark.parametrize(
    "raw",
    [
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        b'5;a\r\nhello\r\n6;b=c;d="e;\\"f"\r\n world\r\n000\r\nX-T: 1\r\nY:\r\n\r\n',
        b"B\r\nhello world\r\n0\r\n\r\n",
    ],
)
def test_the_data_is_read_whole_and_the_stream_left_at_the_next_request(raw: bytes) -> None:
    chunked, stream = body(raw + NEXT)
    assert chunked.read() == b"hello world"
    assert chunked.read() == b"" and stream.read() == NEXT


def test_reads_of_any_size_and_lines_give_the_same_data() -> None:
    raw = b"3\r\nab\n\r\n4\r\ncd\nx\r\n0\r\n\r\n"
    for size in (1, 2, 3, 5, 100):
        chunked, _ = body(raw)
        got = b""
        while piece := chunked.read(size):
            assert len(piece) <= size
            got += piece
        assert got == b"ab\ncd\nx"
    chunked, _ = body(raw)
    assert list(iter(chunked.readline, b"")) == [b"ab\n", b"cd\n", b"x"]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"5;\nx\r\nhello\r\n0\r\n\r\n", "chunk size line"),  # a bare LF inside an extension
        (b"5;a b\r\nhello\r\n0\r\n\r\n", "chunk size line"),
        (b"5;a=\r\nhello\r\n0\r\n\r\n", "chunk size line"),
        (b"5 \r\nhello\r\n0\r\n\r\n", "chunk size line"),
        (b" 5\r\nhello\r\n0\r\n\r\n", "chunk size line"),
        (b"0x5\r\nhello\r\n0\r\n\r\n", "chunk size line"),
        (b"-5\r\nhello\r\n0\r\n\r\n", "chunk size line"),
        (b"5\nhello\r\n0\r\n\r\n", "chunk size line"),
        (b"5\r\nhello\n0\r\n\r\n", "not followed by CRLF"),
        (b"5\r\nhelloXX0\r\n\r\n", "not followed by CRLF"),
        (b"5;" + b"a" * 2000 + b"\r\nhello\r\n0\r\n\r\n", "over 1024 bytes"),
        (b"1" * 17 + b"\r\n", "chunk size line"),
        (b"5\r\nhel", "cut short"),
        (b"5\r\nhello\r\n", "cut short"),
        (b"0\r\nno colon\r\n\r\n", "not a valid field"),
        (b"0\r\nX : 1\r\n\r\n", "whitespace before"),
        (b"0\r\nX: 1\n\r\n", "bare LF"),
        (b"0\r\n" + b"X: 1\r\n" * 17 + b"\r\n", "more than 16 trailer fields"),
    ],
)
def test_a_malformed_body_is_refused_and_stays_refused(raw: bytes, why: str) -> None:
    chunked, _ = body(raw)
    with pytest.raises(BadFraming, match=why):
        chunked.read()
    assert chunked.broken
    with pytest.raises(BadFraming):
        chunked.read(1)


def test_an_unread_body_is_discarded_up_to_its_end() -> None:
    chunked, stream = body(b"5\r\nhello\r\n0\r\n\r\n" + NEXT)
    chunked._discard()
    assert not chunked.broken and stream.read() == NEXT


@pytest.mark.parametrize(
    "raw",
    [
        b"5\r\nhello\r\nzz\r\n",  # malformed after the first chunk
        (b"4000\r\n" + b"x" * 0x4000 + b"\r\n") * (DISCARD_MOST // 0x4000 + 2) + b"0\r\n\r\n",
    ],
)
def test_a_discard_that_fails_or_runs_long_ends_the_connection(raw: bytes) -> None:
    """The handler closes a connection whose body is `broken` rather than read on."""
    chunked, _ = body(raw)
    chunked._discard()
    assert chunked.broken
