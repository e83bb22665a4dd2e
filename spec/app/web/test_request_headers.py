"""The strict head reader (app/web/request_headers.py), on byte streams: what gevent's
handler reads from it, each rule that refuses a header block, and how a request's body
is framed (RFC 9112 section 6.3: every ambiguous case refused)."""

from __future__ import annotations

import io

import pytest

from app.errors import BadFraming
from app.web.request_headers import (
    MAX_HEADERS,
    MAX_LINE,
    RequestHead,
    RequestHeaders,
    read_head,
    read_headers,
)


def read(block: bytes) -> RequestHeaders:
    return read_headers(io.BytesIO(block))


def test_fields_keep_their_order_and_the_first_of_a_name_wins() -> None:
    stream = io.BytesIO(b"Host: x\r\nX-A:  one \t\r\nx-a: two\r\nContent-Type: a/b\r\n\r\nBODY")
    headers = read_headers(stream)
    assert headers.status == ""
    fields = [("Host", "x"), ("X-A", "one"), ("x-a", "two"), ("Content-Type", "a/b")]
    assert headers.fields == fields
    assert headers.get("x-A") == "one" and headers.getheader("HOST") == "x"
    assert headers.get("missing", "d") == "d" and headers.typeheader == "a/b"
    assert stream.read() == b"BODY"  # the body is left where it was


def test_every_field_of_a_name_is_seen_for_framing() -> None:
    headers = read(b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\ncontent-length: 4\r\n\r\n")
    assert headers.every("content-LENGTH") == [b"3", b"4"]
    assert headers.every("transfer-encoding") == [b"chunked"] and headers.every("x") == []


def test_a_block_without_its_blank_line_is_cut_short() -> None:
    """A stream that ends inside the head is not a request: it is never served."""
    assert read(b"Host: x\r\n").status == "the header block was cut short"
    assert read(b"").status == "the header block was cut short"
    assert read(b"\r\n").fields == []


@pytest.mark.parametrize(
    ("block", "why"),
    [
        (b"X-A: a\r\n folded\r\n\r\n", "an obsolete line folding"),
        (b"X-A: a\r\n\tfolded\r\n\r\n", "an obsolete line folding"),
        (b"X-A : a\r\n\r\n", "whitespace before a header field's colon"),
        (b"X-A\t: a\r\n\r\n", "whitespace before a header field's colon"),
        (b"X(A): a\r\n\r\n", "a header line that is not a valid field"),
        (b": a\r\n\r\n", "a header line that is not a valid field"),
        (b"no colon\r\n\r\n", "a header line that is not a valid field"),
        (b"X-A: a\x00b\r\n\r\n", "a control character"),
        (b"X-A: a\rb\r\n\r\n", "a control character"),
        (b"X-A: a\r\r\n\r\n", "a control character"),
        (b"X-A: a\x0bb\r\n\r\n", "a control character"),
        (b"X-A: a\x7f\r\n\r\n", "a control character"),
        (b"X-A: a\nX-B: b\r\n\r\n", "a header line ended by a bare LF, not CRLF"),
        (b"X-A: a\r\n\n", "a header line ended by a bare LF, not CRLF"),
        (b"X-A: " + b"a" * MAX_LINE + b"\r\n\r\n", f"a header line over {MAX_LINE} bytes"),
        (b"X: a\r\n" * (MAX_HEADERS + 1) + b"\r\n", f"more than {MAX_HEADERS} header fields"),
        (b"X-A: a", "the header block was cut short"),
    ],
)
def test_a_block_breaking_a_rule_is_refused_with_its_reason(block: bytes, why: str) -> None:
    headers = read(block)
    assert headers.status.startswith(why) and headers.fields == []


def test_exactly_the_limits_are_accepted() -> None:
    assert len(read(b"X: a\r\n" * MAX_HEADERS + b"\r\n").fields) == MAX_HEADERS
    line = b"X: " + b"a" * (MAX_LINE - 5) + b"\r\n"
    assert len(line) == MAX_LINE and read(line + b"\r\n").status == ""


def head(raw: bytes) -> tuple[RequestHead, bytes]:
    """The head read from a whole request, and what is left of the stream after it."""
    line, _, rest = raw.partition(b"\n")
    stream = io.BytesIO(rest)
    return read_head((line + b"\n").decode("latin-1"), stream), stream.read()


POST = b"POST /topics/t HTTP/1.1\r\nHost: x\r\n"


def test_a_head_is_framed_by_its_length_by_chunked_or_has_no_body() -> None:
    framed, rest = head(POST + b"Content-Length: 2\r\nConnection: keep-alive, Close\r\n\r\nok")
    assert (framed.method, framed.target, framed.version) == ("POST", "/topics/t", "HTTP/1.1")
    assert (framed.length, framed.chunked, framed.close, rest) == (2, False, True, b"ok")
    framed, rest = head(POST + b"Transfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n")
    assert (framed.length, framed.chunked, framed.close) == (None, True, False)
    framed, _ = head(b"GET /health HTTP/1.0\r\n\r\n")
    assert (framed.length, framed.chunked, framed.close) == (None, False, True)
    framed, _ = head(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    assert framed.close is False


CL, TE = b"Content-Length: 4\r\n", b"Transfer-Encoding: chunked\r\n"


@pytest.mark.parametrize(
    ("raw", "status", "why"),
    [
        (POST + CL + TE + b"\r\n", 400, "Content-Length and Transfer-Encoding together"),
        (POST + TE + CL + b"\r\n", 400, "Content-Length and Transfer-Encoding together"),
        (POST + CL + b"Content-Length: 5\r\n\r\n", 400, "Content-Length sent more than once"),
        (POST + CL + CL + b"\r\n", 400, "Content-Length sent more than once"),
        (POST + b"Content-Length: 4, 4\r\n\r\n", 400, "Content-Length given as a list"),
        (POST + b"Content-Length: +38\r\n\r\n", 400, "digits only"),
        (POST + b"Content-Length: 5.0\r\n\r\n", 400, "digits only"),
        (POST + b"Content-Length:  5x\r\n\r\n", 400, "digits only"),
        (POST + b"Content-Length: -1\r\n\r\n", 400, "digits only"),
        (POST + b"Content-Length: \r\n\r\n", 400, "digits only"),
        (POST + b"Content-Length: " + b"9" * 16 + b"\r\n\r\n", 400, "digits only"),
        (POST + b"Transfer-Encoding: gzip\r\n\r\n", 501, "only Transfer-Encoding: chunked"),
        (POST + b"Transfer-Encoding: gzip, chunked\r\n\r\n", 501, "only Transfer-Encoding"),
        (POST + b"Transfer-Encoding: chunked, gzip\r\n\r\n", 501, "only Transfer-Encoding"),
        (POST + b"Transfer-Encoding: chunked, chunked\r\n\r\n", 501, "only Transfer-Encoding"),
        (POST + b"Transfer-Encoding: identity\r\n\r\n", 501, "only Transfer-Encoding"),
        (POST + TE + TE + b"\r\n", 400, "Transfer-Encoding sent more than once"),
        (POST + b"Transfer-Encoding : chunked\r\n\r\n", 400, "whitespace before"),
        (POST + b"X: a\r\n Transfer-Encoding: chunked\r\n\r\n", 400, "obsolete line folding"),
        (POST + b"Content-Length: 4\n\r\n", 400, "bare LF"),
        (b"POST /t HTTP/1.0\r\n" + TE + b"\r\n", 400, "Transfer-Encoding in an HTTP/1.0"),
        (b"POST /t HTTP/1.1\n" + CL + b"\r\n", 400, "not a request line"),
        (b"POST  /t HTTP/1.1\r\n\r\n", 400, "not a request line"),
        (b"POST /t\tHTTP/1.1\r\n\r\n", 400, "not a request line"),
        (b"GET /t\r\n\r\n", 400, "not a request line"),
        (b"GET /t HTTP/2.0\r\n\r\n", 400, "not a request line"),
        (b"GET /t http/1.1\r\n\r\n", 400, "not a request line"),
        (b"G(T /t HTTP/1.1\r\n\r\n", 400, "not a request line"),
        (b"GET /t HTTP/1.1 \r\n\r\n", 400, "not a request line"),
        (b"GET /t HTTP/1.1\r\n\r\n", 400, "an HTTP/1.1 request must carry one Host"),
        (POST + b"Host: y\r\n\r\n", 400, "Host sent more than once"),
    ],
)
def test_ambiguous_framing_is_refused_naming_the_rule(raw: bytes, status: int, why: str) -> None:
    with pytest.raises(BadFraming, match=why) as refused:
        head(raw)
    assert refused.value.status == status
