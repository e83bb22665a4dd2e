"""How the engine's client frames a callback's answer (RFC 9112 section 6.3): what a
subscriber's server may send, in any split across reads, gives the status it meant, and
a connection is kept only when its answer was read to the end. What cannot be framed is
a BadAnswer, never a hang; a body over a few KiB is not read on.

The client against real servers (keep-alive, TLS, refusals, a huge body) is checked in
test_callback.py; these feed bytes straight to the reader, in every split."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.delivery.answer import KEPT, MAX_ANSWER, MAX_HEAD, Answer, AnswerReader
from app.errors import BadAnswer


def read(*pieces: bytes, eof: bool = False) -> AnswerReader:
    reader = AnswerReader()
    whole = False
    for piece in pieces:
        whole = reader.feed(piece)
        if whole:
            break
    if not whole and eof:
        assert reader.eof()
    return reader


def splits(data: bytes) -> list[tuple[bytes, ...]]:
    """The answer whole, byte by byte, and cut in two at every place."""
    return [(data,), tuple(data[i : i + 1] for i in range(len(data)))] + [
        (data[:i], data[i:]) for i in range(1, len(data))
    ]


KEPT_ALIVE = [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200),
    (b"HTTP/1.1 204 No Content\r\n\r\n", 204),
    (b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nX-A: b\r\n\r\n", 201),
    (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n1;x=y\r\n!\r\n0\r\n\r\n",
        200,
    ),
    (b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nTrailer: t\r\n\r\n", 500),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 1\r\n\r\n.", 202),
    (
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        200,
    ),
    (b"HTTP/1.1 200\r\nContent-Length: 3\r\n\r\nabc", 200),  # no reason phrase
    (b"HTTP/1.1 200 \r\nContent-Length:3\r\nX-Empty:\r\nX-B: \t a  b \r\n\r\nabc", 200),
    (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
        b'3;a;b=c;d="e;\\"f"\r\nabc\r\n000\r\nT: 1\r\n\r\n',
        200,
    ),
]


@pytest.mark.parametrize(("answer", "status"), KEPT_ALIVE)
def test_a_whole_answer_keeps_its_connection(answer: bytes, status: int):
    for pieces in splits(answer):
        reader = read(*pieces)
        assert reader.answer is not None and reader.answer.status == status, pieces
        assert reader.reusable, pieces


CLOSED = [
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 200, False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, False),
    (b"HTTP/1.1 200 OK\r\n\r\nto the close", 200, True),  # no length: the body runs to the close
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA", 200, False),  # out of step after
]


@pytest.mark.parametrize(("answer", "status", "eof"), CLOSED)
def test_an_answer_that_ends_its_connection(answer: bytes, status: int, eof: bool):
    reader = read(answer, eof=eof)
    assert reader.answer is not None and reader.answer.status == status
    assert not reader.reusable


def test_retry_after_is_read_as_sent():
    reader = read(b"HTTP/1.1 429 Slow down\r\nretry-after:  120 \r\nContent-Length: 0\r\n\r\n")
    assert reader.answer == Answer(429, "120")


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/2 200\r\n\r\n",
        b"ICY 200 OK\r\n\r\n",
        b"HTTP/1.1 20 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded: line\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n0\r\n\r\n",
    ],
)
def test_what_cannot_be_framed_is_a_bad_answer(answer: bytes):
    with pytest.raises(BadAnswer):
        read(answer)


OK = b"HTTP/1.1 200 OK\r\n"
CHUNKED = b"Transfer-Encoding: chunked\r\n"


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (OK + b"Content-Length: 2\r\n" + CHUNKED + b"\r\n0\r\n\r\n", "together"),
        (OK + CHUNKED + b"Content-Length: 2\r\n\r\n0\r\n\r\n", "together"),
        (OK + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\nok", "more than once"),
        (OK + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nok", "more than once"),
        (OK + b"Content-Length: 2, 2\r\n\r\nok", "list"),
        (OK + b"Content-Length: +2\r\n\r\nok", "digits"),
        (OK + b"Content-Length: 2.0\r\n\r\nok", "digits"),
        (OK + b"Content-Length: 2x\r\n\r\nok", "digits"),
        (OK + b"Content-Length: 0x2\r\n\r\nok", "digits"),
        (OK + b"Transfer-Encoding: gzip\r\n\r\nzzz", "only Transfer-Encoding: chunked"),
        (OK + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "only"),
        (OK + b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", "only"),
        (OK + CHUNKED + CHUNKED + b"\r\n0\r\n\r\n", "more than once"),
        (OK + b"Content-Length : 2\r\n\r\nok", "before a header field's colon"),
        (OK + b"X-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok", "folding"),
        (b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", "CRLF"),
        (OK + b"Content-Length: 2\n\r\nok", "CRLF"),
        (OK + b"X-A: a\rb\r\nContent-Length: 2\r\n\r\nok", "CRLF"),
        (OK + b"X-A: a\x0bb\r\nContent-Length: 2\r\n\r\nok", "control character"),
        (b"HTTP/1.1\t200 OK\r\n\r\n", "status line"),
        (OK + CHUNKED + b"\r\n2;\nx\r\nok\r\n0\r\n\r\n", "chunk size line"),
        (OK + CHUNKED + b"\r\n2;a b\r\nok\r\n0\r\n\r\n", "chunk size line"),
        (OK + CHUNKED + b"\r\n2 \r\nok\r\n0\r\n\r\n", "chunk size line"),
        (OK + CHUNKED + b"\r\n2\nok\r\n0\r\n\r\n", "chunk size line"),
        (OK + CHUNKED + b"\r\n2\r\nok\n0\r\n\r\n", "CRLF"),
        (OK + CHUNKED + b"\r\n0\r\nno colon\r\n\r\n", "not a valid field"),
        (OK + CHUNKED + b"\r\n0\r\nT: 1\n\r\n", "CRLF"),
        (OK + CHUNKED + b"\r\n0\r\n" + b"T: 1\r\n" * 17 + b"\r\n", "trailer fields"),
        (
            b"HTTP/1.1 103 Hints\r\nContent-Length: 1e1\r\n\r\n"
            + OK
            + b"Content-Length: 0\r\n\r\n",
            "digits",
        ),  # an interim answer's framing headers too (found by the framing fuzz)
    ],
)
def test_ambiguous_framing_is_a_bad_answer_in_any_split(answer: bytes, why: str):
    """RFC 9112 section 6.3's ambiguous cases (both framing headers, two lengths, a length
    that is not digits, a coding other than chunked), bare line ends, folds and abused
    chunk lines: a failed delivery, whichever way the bytes arrive."""
    for pieces in splits(answer):
        with pytest.raises(BadAnswer, match=why):
            read(*pieces, eof=True)


def test_a_head_that_never_ends_is_cut_at_its_bound():
    reader = AnswerReader()
    assert not reader.feed(b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(BadAnswer, match="head"):
        for _ in range(MAX_HEAD):
            reader.feed(b"X-Pad: " + b"x" * 100 + b"\r\n")


@pytest.mark.parametrize("chunked", [False, True])
def test_a_long_body_is_not_read_on(chunked: bool):
    """The status is known once MAX_ANSWER bytes of body have come; the connection is
    then closed, not drained."""
    if chunked:
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        pieces = [head] + [b"400\r\n" + b"x" * 1024 + b"\r\n"] * 100
    else:
        pieces = [b"HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n"] + [b"x" * 1024] * 100
    reader = AnswerReader()
    fed = 0
    for piece in pieces:
        fed += 1
        if reader.feed(piece):
            break
    assert reader.answer is not None and reader.answer.status == 200
    assert not reader.reusable
    assert fed <= 2 + MAX_ANSWER // 1024


def test_an_answer_cut_short_is_not_whole():
    reader = read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    assert not reader.eof()  # the close came before the body's end: no answer to keep


@given(st.binary(max_size=300), st.integers(min_value=1, max_value=40))
def test_any_bytes_end_in_an_answer_a_bad_answer_or_a_wait(data: bytes, size: int):
    """Whatever a server sends, the reader answers, refuses, or waits for more; it never
    raises anything else, in any split."""
    reader = AnswerReader()
    try:
        for i in range(0, len(data), size):
            if reader.feed(data[i : i + size]):
                assert reader.answer is not None
                break
        reader.eof()
    except BadAnswer:
        pass


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 400 Bad\r\nContent-Length: 2000\r\n\r\n" + b"e" * 2000,
        b"HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n"
        + b"e" * 2000
        + b"\r\n0\r\n\r\n",
        b"HTTP/1.1 400 Bad\r\n\r\n" + b"e" * 2000,
    ],
)
def test_the_first_kib_of_the_body_is_kept(answer: bytes):
    """What the attempt log shows of an answer: its first KiB, in any split."""
    for pieces in splits(answer)[:50]:
        reader = read(*pieces, eof=True)
        assert reader.answer is not None
        assert reader.answer.body == b"e" * KEPT, pieces


def test_an_empty_body_keeps_nothing():
    empty = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    assert read(empty).answer == Answer(200, None, b"")


def test_bytes_after_a_whole_answer_do_not_keep_the_connection():
    reader = read(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert reader.reusable
    assert reader.feed(b"HTTP/1.1 200 OK\r\n")  # a second answer nobody asked for
    assert not reader.reusable and reader.answer == Answer(200, None, b"ok")
