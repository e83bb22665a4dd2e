"""HTTP/1.1 framing, held to RFC 9112 strictly: the rules both of busbar's readers share,
the one that reads requests to `busbar web` (app/web/request_headers.py) and the one that
reads callbacks' answers in the engine (app/delivery/answer.py).

Where a message could be framed two ways, a proxy in front of busbar (or a subscriber's
server behind one) may pick the other, and one client's bytes become the start of the
next message: request smuggling, or an answer taken for the next delivery's. So every
ambiguity is refused rather than resolved:

- a line ends in CRLF; a bare LF or CR is refused, as is an obsolete line fold;
- a field is `token ":" OWS value OWS`, no whitespace before the colon, and its value
  holds only visible characters (and obs-text) with single runs of SP/HTAB between;
- Content-Length is digits only (no sign, point, space or list), sent once;
- Transfer-Encoding is `chunked`, alone and once; any other coding is 501 (not
  implemented); together with Content-Length it is refused;
- a chunk size is hex digits, its extensions `;name[=value]` tokens (or a quoted value),
  its line at most CHUNK_LINE bytes; a chunk's data ends in CRLF;
- a trailer field follows the field rules, at most MAX_TRAILERS of them.

Each rule refuses at least what h11 (the reference parser the tests fuzz against,
spec/app/test_framing.py) refuses; where both accept, both frame alike.
"""

from __future__ import annotations

import re

from app.errors import BadFraming

MAX_CONTENT_LENGTH_DIGITS = 15  # 1 PB: beyond any body either side reads
CHUNK_LINE = 1024  # bytes of a chunk size line with its extensions
MAX_TRAILERS = 16
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_VCHAR = rb"[\x21-\x7e\x80-\xff]"
FIELD = re.compile(
    rb"(" + _TOKEN + rb"):[ \t]*+(" + _VCHAR + rb"++(?:[ \t]++" + _VCHAR + rb"++)*+)?[ \t]*"
)  # possessive: a run of whitespace is never tried two ways (linear time on any line)
_QUOTED = rb'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"'
_CHUNK_EXT = rb"(?:;" + _TOKEN + rb"(?:=(?:" + _TOKEN + rb"|" + _QUOTED + rb"))?)*"
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})" + _CHUNK_EXT + rb"\r\n")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_DIGITS = re.compile(rb"[0-9]{1,%d}" % MAX_CONTENT_LENGTH_DIGITS)
CHUNKED = -1  # body_length's answer for a chunked body


def field(line: bytes) -> tuple[bytes, bytes]:
    """One header or trailer line, its CRLF removed: (name, value without OWS)."""
    found = FIELD.fullmatch(line)
    if found is None:
        if line[:1] in (b" ", b"\t"):
            raise BadFraming("an obsolete line folding (a line starting with whitespace)")
        if _CONTROL.search(line):
            raise BadFraming("a control character (CR, LF, NUL or another) in a header field")
        name = line.partition(b":")[0]
        if name[-1:] in (b" ", b"\t"):
            raise BadFraming("whitespace before a header field's colon")
        raise BadFraming("a header line that is not a valid field")
    return found.group(1), found.group(2) or b""


def content_length(value: bytes) -> int:
    if _DIGITS.fullmatch(value) is None:
        if b"," in value:
            raise BadFraming("Content-Length given as a list")
        raise BadFraming("Content-Length is not a number of digits only")
    return int(value)


def body_length(lengths: list[bytes], codings: list[bytes]) -> int | None:
    """How a message's body is framed, from its Content-Length and Transfer-Encoding
    values (each field as received): a length, CHUNKED, or None (neither was sent)."""
    if codings:
        if lengths:
            raise BadFraming("Content-Length and Transfer-Encoding together")
        if len(codings) > 1:
            raise BadFraming("Transfer-Encoding sent more than once")
        if codings[0].lower() != b"chunked":
            raise BadFraming("only Transfer-Encoding: chunked is supported", 501)
        return CHUNKED
    if not lengths:
        return None
    if len(lengths) > 1:
        raise BadFraming("Content-Length sent more than once")
    return content_length(lengths[0])


def chunk_size(line: bytes) -> int:
    """A chunk size line, CRLF included; its extensions checked and skipped."""
    found = _CHUNK_SIZE.fullmatch(line)
    if found is None:
        raise BadFraming("a chunk size line that is not hex digits, extensions and CRLF")
    return int(found.group(1), 16)
