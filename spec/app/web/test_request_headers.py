"""The strict header reader (app/web/request_headers.py), on byte streams: what gevent's
handler reads from it, and each rule that refuses a block."""

from __future__ import annotations

import io

import pytest

from app.web.request_headers import MAX_HEADERS, MAX_LINE, RequestHeaders, read_headers


def read(block: bytes) -> RequestHeaders:
    return read_headers(io.BytesIO(block))


def test_fields_keep_their_order_and_the_first_of_a_name_wins() -> None:
    stream = io.BytesIO(b"Host: x\r\nX-A:  one \t\r\nx-a: two\nContent-Type: a/b\r\n\r\nBODY")
    headers = read_headers(stream)
    assert headers.status == ""
    fields = [("Host", "x"), ("X-A", "one"), ("x-a", "two"), ("Content-Type", "a/b")]
    assert headers.fields == fields
    assert headers.get("x-A") == "one" and headers.getheader("HOST") == "x"
    assert headers.get("missing", "d") == "d" and headers.typeheader == "a/b"
    assert stream.read() == b"BODY"  # the body is left where it was


def test_deleting_a_name_removes_every_field_of_it() -> None:
    headers = read(b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\ncontent-length: 4\r\n\r\n")
    del headers["content-LENGTH"]
    assert headers.get("content-length") is None and headers.items() == [
        ("Transfer-Encoding", "chunked")
    ]
    with pytest.raises(KeyError):
        del headers["content-length"]


def test_the_end_of_the_stream_ends_the_block() -> None:
    assert read(b"Host: x\r\n").fields == [("Host", "x")]
    assert read(b"").fields == []


@pytest.mark.parametrize(
    ("block", "why"),
    [
        (b"X-A: a\r\n folded\r\n\r\n", "Invalid header line"),
        (b"X-A: a\r\n\tfolded\r\n\r\n", "Invalid header line"),
        (b"X-A : a\r\n\r\n", "Invalid header line"),
        (b"X(A): a\r\n\r\n", "Invalid header line"),
        (b": a\r\n\r\n", "Invalid header line"),
        (b"no colon\r\n\r\n", "Invalid header line"),
        (b"X-A: a\x00b\r\n\r\n", "Invalid character in a header value"),
        (b"X-A: a\rb\r\n\r\n", "Invalid character in a header value"),
        (b"X-A: a\r\r\n\r\n", "Invalid character in a header value"),
        (b"X-A: " + b"a" * MAX_LINE + b"\r\n\r\n", "Line too long"),
        (b"X: a\r\n" * (MAX_HEADERS + 1) + b"\r\n", f"More than {MAX_HEADERS} headers"),
        (b"X-A: a", "Header block cut short"),
    ],
)
def test_a_block_breaking_a_rule_is_refused_with_its_reason(block: bytes, why: str) -> None:
    headers = read(block)
    assert headers.status == why and headers.fields == []


def test_exactly_the_limits_are_accepted() -> None:
    assert len(read(b"X: a\r\n" * MAX_HEADERS + b"\r\n").fields) == MAX_HEADERS
    line = b"X: " + b"a" * (MAX_LINE - 5) + b"\r\n"
    assert len(line) == MAX_LINE and read(line + b"\r\n").status == ""
