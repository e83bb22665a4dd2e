"""`make run` stopped the ways people stop it: SIGTERM to make (an IDE, `timeout`, a
supervisor) and Ctrl-C (SIGINT to the terminal's foreground process group), with a
delivery in flight; and a second `make run` beside a running one.

make runs from a temporary directory with `-f` the repository's Makefile, so each test
has its own var/ (data, lock, root key) and never meets a `make run` of the developer's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from spec.integration.processes import (
    answers,
    busbar_env,
    children_of,
    free_port,
    pid_alive,
    wait_until,
)
from spec.integration.subscriber import Subscriber, serving

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@contextmanager
def make_run(cwd: Path, port: int, log: Path) -> Iterator[subprocess.Popen]:
    """`make run` as a shell starts a job: in a process group of its own, whose id is
    make's pid. Whatever is left at the end is SIGKILLed (and fails the test before)."""
    with open(log, "wb") as out:
        make = subprocess.Popen(
            ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "run", f"PORT={port}"],
            cwd=cwd,
            env=busbar_env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_until(lambda: "busbar dev is running" in log.read_text(), 60, "make run")
            yield make
        finally:
            for pid in [*children_of(make.pid), make.pid]:
                if pid_alive(pid):
                    os.kill(pid, signal.SIGKILL)
            make.wait()


def gone_within(pids: set[int], limit: float) -> float:
    """Seconds until every pid has exited; fails past `limit`."""
    started = time.monotonic()
    wait_until(lambda: not [p for p in pids if pid_alive(p)], limit, "every process to exit")
    return time.monotonic() - started


def root_key(cwd: Path) -> str:
    return (cwd / "var" / "root-key").read_text().strip()


def dev_pid(cwd: Path) -> int:
    return json.loads((cwd / "var" / "dev.json").read_text())["pid"]


def test_sigterm_to_make_stops_everything(tmp_path: Path):
    port = free_port()
    with make_run(tmp_path, port, tmp_path / "run.log") as make:
        tree = children_of(make.pid) | {make.pid}
        assert len(tree) >= 5  # make, busbar dev, Redis, gunicorn master + worker, worker
        make.send_signal(signal.SIGTERM)
        assert gone_within(tree, 10) < 10
    assert not answers(f"http://127.0.0.1:{port}/health")
    assert "busbar dev stopped" in (tmp_path / "run.log").read_text()


def _slow_first_request(arrived: threading.Event) -> Subscriber:
    def responder(_request) -> tuple[int, float]:
        arrived.set()
        return 200, 1.5

    return Subscriber(responder=responder)


def test_ctrl_c_settles_the_delivery_in_flight_and_stops_everything(tmp_path: Path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    arrived = threading.Event()
    with serving(_slow_first_request(arrived)) as sub:
        with make_run(tmp_path, port, tmp_path / "run.log") as make:
            key = root_key(tmp_path)
            http = requests.Session()
            for name in ("pub", "sub"):
                made = http.post(f"{base}/api_tokens", json={"name": name, "token": name},
                                 auth=(key, ""), timeout=5)  # fmt: skip
                assert made.status_code == 201
            subscription = {"topics": ["orders"], "callback": sub.url, "max": 10, "timeout": 0}
            assert http.post(f"{base}/subscription", json=subscription, auth=("sub", ""),
                             timeout=5).status_code == 204  # fmt: skip
            events = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(3)]
            assert http.post(f"{base}/topics/orders", json=events, auth=("pub", ""),
                             timeout=5).status_code == 204  # fmt: skip
            assert arrived.wait(10), "the delivery never reached the subscriber"
            tree = children_of(make.pid) | {make.pid}
            os.killpg(make.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
            took = gone_within(tree, 5)
        assert [r.status for r in sub.received] == [200]  # answered while stopping
        assert took >= 1.0  # it waited for the subscriber's answer instead of cutting it

        # The acknowledgement was written before Redis stopped: after a restart the
        # subscription shows the batch sent, nothing queued, and nothing comes again.
        with make_run(tmp_path, port, tmp_path / "run2.log") as make:
            (listing,) = requests.get(f"{base}/subscriptions", auth=("sub", ""), timeout=5).json()
            assert listing["events"] == {"sent": 3, "queued": 0, "oldest": None, "filtered": 0,
                                         "transformed_out": 0}  # fmt: skip
            time.sleep(1)
            assert len(sub.received) == 1
            tree = children_of(make.pid) | {make.pid}
            os.killpg(make.pid, signal.SIGINT)
            assert gone_within(tree, 5) < 5
    log = (tmp_path / "run.log").read_text()
    assert "SIGKILL" not in log and "Traceback" not in log
    assert "busbar dev stopped" in log


def test_a_second_make_run_says_it_is_running_in_one_line(tmp_path: Path):
    port = free_port()
    with make_run(tmp_path, port, tmp_path / "run.log"):
        started = time.monotonic()
        second = subprocess.run(
            ["make", "-s", "-f", str(ROOT / "Makefile"), "run", f"PORT={port}"],
            cwd=tmp_path, env=busbar_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert time.monotonic() - started < 10
        assert second.returncode != 0
        ours = [line for line in second.stdout.splitlines() + second.stderr.splitlines()
                if not line.startswith("make")]  # fmt: skip
        assert ours == [f"busbar dev: already running with var/ (pid {dev_pid(tmp_path)}, "
                        f"http://127.0.0.1:{port}): stop it first, or run another one from "
                        "a different directory with another PORT"]  # fmt: skip
        assert answers(f"http://127.0.0.1:{port}/health")  # the first one still serves

        other = tmp_path / "elsewhere"
        other.mkdir()
        taken = subprocess.run(
            ["make", "-s", "-f", str(ROOT / "Makefile"), "run", f"PORT={port}"],
            cwd=other, env=busbar_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert taken.returncode != 0
        assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr
        assert not (other / "var" / "redis").exists()  # refused before starting anything
