"""A long answer takes turns with the requests beside it (app/web/turns.py): its JSON is
what jsonify answered, byte for byte, and under gevent a greenlet computing with turns
lets the others run within a few milliseconds. A listing of more subscribers than are
described at once is the whole listing, in the clients' names' order."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap

from flask import Flask, jsonify
from flask.testing import FlaskClient

from app.web import subscriptions
from app.web.turns import Turns, collections_held, json_array
from spec.app.web.conftest import ROOT, make_client, subscribe

ENTRIES = [
    {"name": "ünïcode ✓", "n": 1, "nested": {"b": [1, 2.5, None, True]}, "a": '"q"\n'},
    {},
    {"z": [], "y": {"x": {}}},
]


def test_json_array_answers_what_jsonify_answers_byte_for_byte(app: Flask):
    with app.app_context():
        for chunks in ([ENTRIES], [ENTRIES[:1], [], ENTRIES[1:]], [], [[]]):
            whole = [e for chunk in chunks for e in chunk]
            ours, theirs = json_array(chunks, Turns()), jsonify(whole)
            assert ours.get_data() == theirs.get_data()
            assert ours.mimetype == theirs.mimetype == "application/json"


def test_a_listing_longer_than_a_read_is_whole_and_in_order(http: FlaskClient):
    count = subscriptions.DESCRIBED_AT_ONCE * 2 + 7
    names = [f"c{i:04}" for i in reversed(range(count))]
    for name in names:
        subscribe(http, make_client(http, name), ["t"])
    response = http.get("/subscriptions", headers=ROOT)
    assert response.status_code == 200
    listed = response.get_json()
    assert [e["name"] for e in listed] == sorted(names)
    assert len({e["subscriber"] for e in listed}) == count
    assert response.get_data() == json.dumps(listed, separators=(",", ":")).encode() + b"\n"


def test_collections_are_held_while_a_long_answer_runs_and_back_after():
    assert gc.isenabled()
    with collections_held():
        assert not gc.isenabled()
        with collections_held():  # a second answer at once
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_turns_let_another_greenlet_in_within_milliseconds():
    """In a process of its own, patched as the gevent worker's is: a greenlet computing
    for 300 ms, with and without turns, and another that wants to run every 2 ms."""
    script = textwrap.dedent(
        """
        from gevent import monkey
        monkey.patch_all()
        import time, gevent
        from app.web.turns import Turns

        def longest_wait(turns):
            waits, stop = [], []
            def ticker():
                while not stop:
                    t = time.perf_counter()
                    gevent.sleep(0.002)
                    waits.append(time.perf_counter() - t - 0.002)
            other = gevent.spawn(ticker)
            gevent.sleep(0.01)
            end = time.perf_counter() + 0.3
            while time.perf_counter() < end:
                sum(range(200))
                if turns is not None:
                    turns.take()
            stop.append(1)
            other.join()
            return max(waits), (turns.taken if turns else 0)

        print(*longest_wait(None), *longest_wait(Turns()))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    without, _, within, taken = (float(x) for x in done.stdout.split())
    assert without > 0.25  # held the whole time
    assert within < 0.1 and taken > 20, (within, taken)
