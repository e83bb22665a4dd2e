"""W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` and
`tracestate` a publish may carry, checked before they are kept with its events.

A header that does not parse is ignored, never refused: the spec asks a receiver to
start afresh rather than fail the request, and a publisher's tracing must never cost
it a publish. Only version 00 is written; a later version is read as the spec says
(its first four fields, whatever follows a `-`) and kept as 00. `tracestate` is kept
only beside a valid `traceparent`, only whole (a malformed or oversized one is
dropped, not truncated), and normalized (members joined by `,`, empty ones left out).
Nothing here imports OpenTelemetry: the context is kept and sent with tracing off.
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_TRACESTATE_CHARS = 512  # the spec's limit a platform must propagate
MAX_TRACESTATE_MEMBERS = 32
_HEX = frozenset("0123456789abcdef")
# a list-member's key (simple-key, or tenant@system multi-tenant-key) and value
_KEY = r"(?:[a-z0-9][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
_VALUE = r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
_MEMBER = re.compile(f"{_KEY}={_VALUE}")


class TraceContext(NamedTuple):
    traceparent: str  # normalized: `00-<trace-id>-<parent-id>-<flags>`
    tracestate: str | None = None

    def headers(self) -> dict[str, str]:
        """The context as the request headers that propagate it."""
        if self.tracestate is None:
            return {"traceparent": self.traceparent}
        return {"traceparent": self.traceparent, "tracestate": self.tracestate}

    @property
    def trace_id(self) -> str:
        return self.traceparent[3:35]

    @property
    def parent_id(self) -> str:
        return self.traceparent[36:52]

    @property
    def flags(self) -> int:
        return int(self.traceparent[53:55], 16)


def _hex(text: str, length: int) -> bool:
    """Lower-case hex of exactly `length` characters, not all zeros (invalid ids)."""
    return len(text) == length and _HEX.issuperset(text) and text.strip("0") != ""


def parse_traceparent(value: str | None) -> str | None:
    """The normalized traceparent, or None when absent or invalid."""
    if value is None:
        return None
    value = value.strip(" \t")
    if len(value) < 55 or value[2] != "-" or not _HEX.issuperset(version := value[:2]):
        return None
    if version == "ff" or (version == "00" and len(value) != 55):
        return None
    if len(value) > 55 and value[55] != "-":  # a later version's extra fields follow a `-`
        return None
    if value[35] != "-" or value[52] != "-":
        return None
    trace_id, parent_id, flags = value[3:35], value[36:52], value[53:55]
    if not (_hex(trace_id, 32) and _hex(parent_id, 16) and _HEX.issuperset(flags)):
        return None
    if version == "00":
        return value
    return f"00-{trace_id}-{parent_id}-{int(flags, 16) & 1:02x}"  # only `sampled` is known


def parse_tracestate(value: str | None) -> str | None:
    """The normalized tracestate, or None when absent, empty, malformed or over the
    spec's bounds (a repeated header arrives joined by commas, which is its list form)."""
    if not value or len(value) > MAX_TRACESTATE_CHARS:
        return None
    members = [m.strip(" \t") for m in value.split(",")]
    members = [m for m in members if m]
    if not members or len(members) > MAX_TRACESTATE_MEMBERS:
        return None
    if not all(_MEMBER.fullmatch(m) for m in members):
        return None
    keys = [m.partition("=")[0] for m in members]
    if len(set(keys)) != len(keys):  # a key at most once
        return None
    return ",".join(members)


def parse(traceparent: str | None, tracestate: str | None = None) -> TraceContext | None:
    """A publish's context from its headers; None without a valid traceparent."""
    parent = parse_traceparent(traceparent)
    if parent is None:
        return None
    return TraceContext(parent, parse_tracestate(tracestate))
