"""A real `busbar web` (one gevent process) beside 3,000 subscribers and 5,000 topics:
while root lists every subscription or every topic, or Prometheus scrapes `/metrics`,
publishes to the same process are still answered within a few milliseconds
(app/web/turns.py). Before, each listing held
the process for its whole computing (0.5 s beside 10,000 subscribers) and a publish
that came meanwhile waited for it.

Timing: one at a time (`alone`), and each bound is relative to the long answer's own
time in the same run, so a slower machine stretches both alike."""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus, events

pytestmark = pytest.mark.alone
SUBSCRIBERS = 3000
TOPICS = 5000  # 1,000 a subscription: the most one takes


def topic_names(client: int) -> list[str]:
    """1,000 topic names of the client's own (a-z and _ only)."""
    letters = "abcdefghij"
    return [f"t_{letters[client]}_" + "".join(letters[int(d)] for d in f"{i:03}")
            for i in range(1000)]  # fmt: skip


def subscribers(b: Bus, count: int) -> None:
    def one(start: int) -> None:
        with requests.Session() as session:
            for i in range(start, count, 4):
                token = f"s{i:05}"
                made = session.post(f"{b.base}/api_tokens", auth=(ROOT_KEY, ""),
                                    json={"name": token, "token": token})  # fmt: skip
                assert made.status_code == 201, made.text
                body = {"topics": ["rest"], "callback": f"http://127.0.0.1:9/{i}", "max": 1}
                subscribed = session.post(f"{b.base}/subscription", auth=(token, ""), json=body)
                assert subscribed.status_code == 204, subscribed.text

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(4)))


def publishes_beside(b: Bus, path: str, calls: int) -> tuple[list[float], list[float]]:
    """The long answer's times, and every publish's, made one after another on a kept
    connection while `calls` of it run."""
    took: list[float] = []
    done = threading.Event()

    def long_answers() -> None:
        with requests.Session() as session:
            for _ in range(calls):
                started = time.perf_counter()
                answer = session.get(f"{b.base}{path}", auth=(ROOT_KEY, ""))
                took.append(time.perf_counter() - started)
                assert answer.status_code == 200
        done.set()

    waited: list[float] = []
    with requests.Session() as session:
        reader = threading.Thread(target=long_answers)
        reader.start()
        while not done.is_set():
            started = time.perf_counter()
            answer = session.post(f"{b.base}/topics/probe", auth=("pub", ""), json=events(1)[0])
            waited.append(time.perf_counter() - started)
            assert answer.status_code == 204, answer.text
            time.sleep(0.003)
        reader.join()
    return took, waited


def test_publishes_are_answered_while_a_long_answer_runs(redis_url: str, tmp_path: Path):
    """The long answers on one bus (its 3,000 subscribers are most of the test's time)."""
    found = {}
    with bus(redis_url, tmp_path, workers=0) as b:
        subscribers(b, SUBSCRIBERS)
        for n in range(TOPICS // 1000):
            b.subscribe(b.client(f"many{n}"), "http://127.0.0.1:9/x", topic_names(n))
        b.client("pub")
        for path in ("/subscriptions", "/metrics", "/topics"):
            publishes_beside(b, path, 1)  # warm: the first call's imports and connections
            found[path] = publishes_beside(b, path, 5)
    for path, (took, waited) in found.items():
        answer = statistics.median(took)
        assert answer > 0.08, f"{path} took {answer:.3f} s: too short to tell"
        assert len(waited) > 20, (path, len(waited))
        # a publish waits for at most a turn (5 ms) and its own work, not for the answer
        assert max(waited) < answer / 3, (path, answer, sorted(waited)[-5:])
