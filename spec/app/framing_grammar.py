"""Hypothesis strategies for HTTP/1.1 messages as a fuzzer wants them: mostly well
formed, with the mutations that make framing ambiguous (duplicate and conflicting
framing headers, odd whitespace and case, folds, bare line ends, chunk sizes and
extensions, trailers, pipelining, truncation and stray bytes). Used by
spec/app/test_framing.py to compare busbar's readers with h11."""

from __future__ import annotations

from typing import TypeVar

from hypothesis import strategies as st

T = TypeVar("T")


def mostly(good: T, *others: T, weight: int = 60) -> st.SearchStrategy[T]:
    """`good` most of the time (weight to one against each other choice), so that most
    messages are well formed and a few break one rule: a message breaking many rules is
    refused by both readers and tells nothing. `good` at both ends too, as hypothesis
    draws the first and last choices more often than the rest."""
    return st.sampled_from([good] * weight + list(others) + [good] * weight)


EOL = mostly(b"\r\n", b"\n", b"\r", b"\r\r\n", b"\n\r", weight=300)
SEPARATOR = mostly(b": ", b":", b":  ", b":\t", b" : ", b"\t:", b": \t ", weight=20)
FRAMING_NAMES = [b"Content-Length", b"content-length", b"CONTENT-LENGTH", b"Transfer-Encoding",
                 b"transfer-encoding", b"TRANSFER-ENCODING"]  # fmt: skip
CODINGS = [b"chunked"] * 30 + [b"Chunked", b"CHUNKED", b"gzip, chunked", b"chunked, chunked",
           b"chunked, identity", b"identity", b"gzip", b" chunked", b"chunked ", b"chunked,",
           b"\tchunked", b"chunk", b"chunked;q=1"]  # fmt: skip
BODY = st.binary(max_size=40)
NAME = mostly(b"X-A", b"Host", b"Connection", b"Expect", b"X_U", b"Idempotency-Key", b"X\x00",
              b"X A", b"", b"\xff", weight=12).flatmap(
    lambda n: st.binary(min_size=1, max_size=4) if n == b"" else st.just(n))  # fmt: skip
VALUE = mostly(b"a", b"a b", b"", b" a ", b"close", b"keep-alive", b"100-continue", b"\x80",
               b"a\x01", b"\x7f", b"a\x0bb", b"\x0c", b"?", weight=12).flatmap(
    lambda v: st.binary(max_size=6) if v == b"?" else st.just(v))  # fmt: skip


@st.composite
def length_value(draw: st.DrawFn, size: int) -> bytes:
    return draw(
        mostly(b"%d" % size, b"%d" % (size + 1), b"+%d" % size, b"%d.0" % size,
               b" %d" % size, b"%d, %d" % (size, size), b"%d,%d" % (size, size + 1),
               b"0x%x" % size, b"", b"-1", b"0%d" % size, b"%dx" % size, b"1e1", weight=40)
    )  # fmt: skip


@st.composite
def field_line(draw: st.DrawFn, name: bytes, value: bytes) -> bytes:
    """One header line; now and then folded or ended other than by CRLF."""
    line = name + draw(SEPARATOR) + value + draw(EOL)
    if draw(st.integers(0, 60)) == 0:
        line = line[: -len(b"\r\n")] + b"\r\n" + draw(st.sampled_from([b" ", b"\t"])) + b"x\r\n"
    return line


@st.composite
def chunked_body(draw: st.DrawFn, data: bytes) -> bytes:
    """The data in chunks, each size line maybe with extensions or mistakes; the last
    chunk, maybe trailers, the end."""
    out, at = b"", 0
    while at < len(data):
        size = draw(st.integers(1, len(data) - at))
        piece = data[at : at + size]
        at += size
        declared = size + draw(mostly(0, -1, 1, weight=40))
        digits = draw(mostly(b"%x", b"%X", b"%04x", b"0x%x", b" %x", b"%x ", weight=30))
        ext = draw(mostly(b"", b";a", b";a=b", b';a="b c"', b";a b", b";\nx", b"; a", b";a=",
                          b";a\rb", weight=15))  # fmt: skip
        digits %= max(declared, 0)
        out += digits + ext + draw(EOL) + piece + draw(EOL)
    out += draw(mostly(b"0", b"000", b"0;x=y", weight=10)) + draw(EOL)
    for _ in range(draw(mostly(0, 1, 2, weight=4))):
        out += draw(NAME) + draw(SEPARATOR) + draw(VALUE) + draw(EOL)
    return out + draw(EOL)


@st.composite
def framed(
    draw: st.DrawFn, body: bytes, lines: list[bytes] | None = None, unframed: bool = False
) -> tuple[list[bytes], bytes]:
    """The header lines that frame a body (one way, none, or two at once), other fields
    among them in any order, and the body as those lines say it is sent. `unframed`:
    with no framing header the body is sent anyway (an answer's runs to the close)."""
    lines = list(lines or [])
    framing = draw(st.sampled_from(["length"] * 6 + ["chunked"] * 6 + ["none"] * 2 + [
        "both", "two-lengths", "two-codings"]))  # fmt: skip
    encoded = body if unframed or framing != "none" else b""
    if framing in ("length", "both", "two-lengths"):
        name = draw(mostly(*FRAMING_NAMES[:3], weight=1))
        lines.append(draw(field_line(name, draw(length_value(len(body))))))
    if framing in ("chunked", "both", "two-codings"):
        name = draw(mostly(*FRAMING_NAMES[3:], weight=1))
        lines.append(draw(field_line(name, draw(st.sampled_from(CODINGS)))))
        encoded = draw(chunked_body(body))
    if framing == "two-lengths":
        lines.append(b"Content-Length: " + draw(length_value(len(body))) + b"\r\n")
    if framing == "two-codings":
        lines.append(b"Transfer-Encoding: " + draw(st.sampled_from(CODINGS)) + b"\r\n")
    for _ in range(draw(st.integers(0, 3))):
        lines.append(draw(field_line(draw(NAME), draw(VALUE))))
    return draw(st.permutations(lines)), encoded


@st.composite
def request(draw: st.DrawFn) -> bytes:
    method = draw(mostly(b"POST", b"GET", b"GET", b"post", b"PUT", b"P(ST", b"", weight=60))
    target = draw(mostly(b"/topics/t", b"/", b"/a?b=c", b"*", b"/a b", b"", weight=60))
    version = draw(mostly(b"HTTP/1.1", *[b"HTTP/1.0"] * 4, b"HTTP/1.2", b"HTTP/2.0",
                          b"http/1.1", b"HTTP/1.1 ", weight=60))  # fmt: skip
    space = draw(mostly(b" ", b"  ", b"\t"))
    head = method + b" " + target + space + version + draw(EOL)
    hosts = [b"Host: x\r\n"] * draw(mostly(1, 0, 2, weight=30))
    lines, encoded = draw(framed(draw(BODY), hosts))
    return head + b"".join(lines) + draw(EOL) + encoded


@st.composite
def answer(draw: st.DrawFn) -> bytes:
    status = draw(mostly(b"200", b"201", b"204", b"304", b"429", b"500", b"503", b"100",
                         b"103", b"20", b"2000", b"099", weight=20))  # fmt: skip
    version = draw(mostly(b"HTTP/1.1", *[b"HTTP/1.0"] * 3, b"HTTP/2", b"HTTP/1.2", weight=40))
    reason = draw(mostly(b" OK", b"", b" ", b"\tOK", b" A\tB", b" \x01", weight=30))
    head = version + b" " + status + reason + draw(EOL)
    lines, encoded = draw(framed(draw(BODY), unframed=True))
    return head + b"".join(lines) + draw(EOL) + encoded


@st.composite
def mutated(draw: st.DrawFn, messages: st.SearchStrategy[bytes]) -> bytes:
    """One to three messages back to back (pipelined), then maybe a byte inserted,
    dropped or changed anywhere, and maybe cut short."""
    data = b"".join(draw(st.lists(messages, min_size=1, max_size=3)))
    for _ in range(draw(mostly(0, 1, 2, weight=6))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["insert", "drop", "change"]))
        byte = draw(st.sampled_from([b"\r", b"\n", b" ", b"\t", b"\x00", b":", b";", b"0", b"a",
                                     b",", b"\x7f", b"\xff", b"\x0b"]))  # fmt: skip
        if kind == "insert":
            data = data[:at] + byte + data[at:]
        elif kind == "drop":
            data = data[:at] + data[at + 1 :]
        else:
            data = data[:at] + byte + data[at + 1 :]
    if len(data) > 2 and draw(st.integers(0, 9)) == 0:
        data = data[: draw(st.integers(1, len(data) - 1))]
    return data
