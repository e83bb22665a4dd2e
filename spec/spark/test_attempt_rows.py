"""Attempt stream entries into lake rows without a JVM: each attempt is classified as
the API classifies it (app/models/attempts.py), named by its client, never its token."""

from __future__ import annotations

from app.models import attempts
from spark.attempt_rows import to_record_batch


def entry(
    n: int, status: str, body: bytes = b"", wait: int | None = None
) -> tuple[bytes, dict[bytes, bytes]]:
    fields = {
        b"subscriber": b"billing", b"batch": b"17", b"events": b"3", b"lane": b"10",
        b"attempt": str(n).encode(), b"worker": b"w.1.ab/4", b"duration_ms": b"12",
        b"status": status.encode(), b"body": body,
    }  # fmt: skip
    if wait is not None:  # deliver_fail stores a 429's or 503's wait beside its status
        fields[b"retry_after_ms"] = str(wait).encode()
    return f"1767225600123-{n}".encode(), fields


def test_each_attempt_is_one_row_classified_as_the_api_does():
    entries = [
        entry(1, "500", b"down"), entry(2, "timeout"), entry(3, "connection_refused"),
        entry(4, "503 retry-after 2000", wait=2000), entry(5, "abandoned"), entry(6, "204"),
        entry(7, "429 retry-after 1500"),  # stored by busbar 0.2.0: the wait in the status only
    ]  # fmt: skip
    found = to_record_batch(2, entries).to_pylist()
    api = [attempts.shown(raw_id, fields) for raw_id, fields in entries]
    same = ("outcome", "status", "reason", "retry_after_ms", "body", "attempt", "duration_ms")
    assert [{k: r[k] for k in same} for r in found] == [{k: a[k] for k in same} for a in api]
    assert [r["outcome"] for r in found] == [
        "5xx", "timeout", "connection", "5xx", "abandoned", "2xx", "4xx",
    ]  # fmt: skip
    assert [r["retry_after_ms"] for r in found] == [None] * 3 + [2000] + [None] * 2 + [1500]
    first = found[0]
    assert (first["subscriber"], first["batch_id"], first["events"], first["lane"]) == (
        "billing", 17, 3, 10,
    )  # fmt: skip
    assert (first["stream_partition"], first["stream_id"]) == (2, "1767225600123-1")
    assert first["at"].isoformat() == "2026-01-01T00:00:00.123000+00:00"
