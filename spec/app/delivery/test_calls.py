"""Each delivery script's builder fills exactly the KEYS and ARGV its header names, each
in the place the header gives it: a slip in the order fails here, not in production."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from app.delivery import calls
from app.delivery.flight import Flight
from app.lua import header
from app.models.attempt_result import answered
from app.models.keys import Keys
from app.models.queue import QueueAt

KEYS = Keys("busbar:", 4)
FLIGHT = Flight("tok", "w.1.x/7", b"JOB", b"BATCH", "NONCE", 0.0, "https://s.test/", "u", "c", [])


def declared(script: str) -> tuple[int, dict[int, str]]:
    """(the highest fixed KEYS index, {ARGV index: its description}) from the header."""
    text = resources.files("app.lua").joinpath(f"{script}.lua").read_text()
    lines = header(text)
    found = [int(n) for line in lines for n in re.findall(r"KEYS\[(?:\d+\.\.)?(\d+)\]", line)]
    top_key = max(found, default=0)  # 0: every key comes in per-shard triples
    argv = {}
    for line in lines:
        for n, what in re.findall(r"ARGV\[(\d+)\]\s+([^,]*)", line):
            argv.setdefault(int(n), what.strip().lower())
    return top_key, argv


def place(call: calls.Call, value: object) -> int:
    """The 1-based ARGV index of `value` in the call."""
    return call.args.index(value) + 1


def test_begin_names_its_eleven_keys_and_six_arguments():
    call = calls.begin(KEYS, "tok", "w.1.x/7", b"JOB", 123, "NONCE", "SALT")
    top_key, argv = declared("deliver_begin")
    assert (len(call.keys), len(call.args)) == (top_key, max(argv))
    assert "token" in argv[place(call, "tok")] and "nonce" in argv[place(call, "NONCE")]
    assert "salt" in argv[place(call, "SALT")] and "now" in argv[place(call, 123)]
    assert call.keys[7] == KEYS.home("tok").jobs_pending("main", "w.1.x/7")
    assert call.keys[9:] == [KEYS.home("tok").delivery_log, KEYS.home("tok").attempt_stream]


def argv_of(script: str) -> dict[int, str]:
    return declared(script)[1]


@pytest.mark.parametrize("swept", [0, 2])
def test_ack_names_its_keys_arguments_and_the_sweep_tail(swept: int):
    group = [QueueAt(KEYS, "main", n, cluster=False) for n in range(swept)]
    sweep = calls.Sweep.of(group, "w.1.x/7") if swept else calls.NO_SWEEP
    record = calls.Record(100, 77, b"BODY", 9000)
    ack = calls.Ack(1, 42, 5000, "NEXT", "SALT", True, sweep, answered(204), record, b"SHAPED", 37)
    call = calls.ack(KEYS, FLIGHT, 123, ack)
    assert "gathered into a broker flight" in argv_of("deliver_ack")[place(call, 37)]
    top_key, argv = declared("deliver_ack")
    assert len(call.keys) == top_key + 3 * swept
    assert len(call.args) == max(argv) + swept
    assert "batch id" in argv[place(call, b"BATCH")]
    assert "nonce given to begin" in argv[place(call, "NONCE")]
    assert "health" in argv[place(call, 1)] and "took" in argv[place(call, 42)]
    assert "maxlen" in argv[place(call, 5000)]
    assert "transforms" in argv[place(call, b"SHAPED")]
    assert "nonce for a delivery begun" in argv[place(call, "NEXT")]
    assert "'1' to go on" in argv[place(call, "1")]
    assert "the worker" in argv[place(call, "w.1.x/7")]
    assert "status" in argv[place(call, "204")] and "outcome class" in argv[place(call, "2xx")]
    assert "attempts kept" in argv[place(call, 100)] and "oldest" in argv[place(call, 77)]
    assert "answer's body" in argv[place(call, b"BODY")]
    assert "attempt stream" in argv[place(call, 9000)] and "maxlen" in argv[place(call, 9000)]
    assert call.args[max(argv) :] == [q.place.base for q in group]


def test_fail_names_its_eleven_keys_and_thirty_two_arguments():
    retry = calls.Retry(1000, 60000, 5, 30000, 150, 7000, 4500)
    record = calls.Record(100, 77, b"BODY", 9000)
    fail = calls.Fail(-2, 1.25, answered(503, 2000), 10000, retry, record, 42, b"", 3, 8000, 4)
    call = calls.fail(KEYS, FLIGHT, 123, fail)
    top_key, argv = declared("deliver_fail")
    assert (len(call.keys), len(call.args)) == (top_key, 32) == (11, max(argv))
    assert "how many of a broker flight" in argv[place(call, 3)]
    assert "delivery log" in argv[place(call, 8000)] and "gained" in argv[place(call, 4)]
    assert "status" in argv[place(call, "confirmed")] and "outcome class" in argv[32]
    assert call.args[31] == "2xx"
    assert "transforms" in argv[25] and call.args[24] == ""  # the flight had none
    assert "transforms" in argv[26] and call.args[25] == b""
    assert "span to open the circuit" in argv[place(call, 4500)]
    assert "lone failure" in argv[place(call, 150)] and "alive" in argv[place(call, 7000)]
    assert "health" in argv[place(call, -2)] and "jitter" in argv[place(call, 1.25)]
    assert "answered" in argv[place(call, "503 retry-after 2000")]
    assert (
        "dead letters" in argv[place(call, 10000)] and "outcome class" in argv[place(call, "5xx")]
    )
    assert "asked for" in argv[place(call, 2000)]
    assert "first failure" in argv[place(call, 1000)] and "longest" in argv[place(call, 60000)]
    assert "open the circuit" in argv[place(call, 5)] and "probe" in argv[place(call, 30000)]
    assert "attempts kept" in argv[place(call, 100)] and "oldest" in argv[place(call, 77)]
    assert "answer's body" in argv[place(call, b"BODY")] and "took" in argv[place(call, 42)]
    assert "the worker" in argv[place(call, "w.1.x/7")]
    assert "attempt stream" in argv[place(call, 9000)]


def test_take_names_three_keys_and_a_base_per_shard():
    group = [QueueAt(KEYS, "main", n, cluster=False) for n in range(4)]
    call = calls.take(calls.Sweep.of(group, "w.1.x/7"), "w.1.x/7", 123, "NONCE", "SALT")
    _, argv = declared("deliver_take")
    assert len(call.keys) == 3 * 4 and len(call.args) == 4 + 4
    assert "the worker" in argv[place(call, "w.1.x/7")] and "nonce" in argv[place(call, "NONCE")]
    assert call.keys[:3] == [
        KEYS.all_shards()[0].jobs_instant("main"),
        KEYS.all_shards()[0].jobs_pending("main", "w.1.x/7"),
        KEYS.all_shards()[0].jobs_pending_index("main"),
    ]
