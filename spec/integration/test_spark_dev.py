"""`busbar spark ingest` exactly as docs/lake.md writes it, next to a running `busbar dev`
(whose Redis port is new at each start): it finds dev's Redis by itself, prints a line
per micro-batch, and stops on Ctrl-C without a traceback; an unreachable Redis is one
line and exit 2, before any JVM starts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from spec.integration.bus import queued
from spec.integration.processes import busbar_env, free_port, running, wait_until
from spec.integration.subscriber import serving

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pyspark")

PAGE_COMMAND = ["spark", "ingest", "--output", "lake", "--checkpoint", "lake/_checkpoint"]
REPLAY = ["spark", "replay", "--lake", "lake", "--topic", "orders"]  # docs/replay.md's


def busbar(*args: str) -> list[str]:
    return [sys.executable, "-m", "busbar", *args]


def test_the_pages_write_the_command_tested_here(project_root: Path):
    command = " ".join(["busbar", *PAGE_COMMAND])
    for page in ("lake.md", "walkthrough.md"):
        assert f"{command} --available-now" in (project_root / "docs" / page).read_text()
    assert f"{command} --interval" in (project_root / "docs" / "lake.md").read_text()
    replay = " ".join(["busbar", *REPLAY])
    page = (project_root / "docs" / "replay.md").read_text()
    assert f"{replay} --dry-run" in page and f"{replay} --to billing" in page


def test_unreachable_redis_is_one_line_and_exit_2_before_spark_starts(tmp_path: Path):
    started = time.monotonic()
    done = subprocess.run(
        busbar(*PAGE_COMMAND, "--available-now"),
        env=busbar_env(BUSBAR_REDIS_URL=f"redis://:pw-not-shown@127.0.0.1:{free_port()}/0"),
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert time.monotonic() - started < 10
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("busbar spark ingest: Redis at redis://****@127.0.0.1:")
    assert "does not answer" in line and "pw-not-shown" not in line


def rows_in_batches(log: Path, wanted: int, timeout: float) -> None:
    """Wait for `wanted` rows in the batch lines of a running ingest. The rows may come in
    more than one micro-batch (an acknowledgement can land after the first batch's read),
    and on a busy machine Spark's start alone has taken over 120 s: the failure shows
    the ingest's own lines, which say whether it started at all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = re.findall(r"busbar spark ingest: batch \d+: (\d+) rows in ", log.read_text())
        if sum(map(int, rows)) >= wanted:
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:]
    raise AssertionError(f"no {wanted} rows in the ingest's batches after {timeout:.0f} s:\n{tail}")


def publish(base: str, key: str, sub_url: str, count: int, first: int = 0) -> None:
    http = requests.Session()
    for name in ("pub", "sub"):
        http.post(f"{base}/api_tokens", json={"name": name, "token": name}, auth=(key, ""))
    subscription = {"topics": ["orders"], "callback": sub_url, "max": 5, "timeout": 0}
    assert http.post(f"{base}/subscription", json=subscription, auth=("sub", "")).ok
    events = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(first, first + count)]
    assert http.post(f"{base}/topics/orders", json=events, auth=("pub", "")).status_code == 204


def replay_to_billing(base: str, key: str, cwd: Path) -> None:
    """docs/replay.md's two commands as written, next to the same busbar dev: the dry
    run counts the lake's 19 orders, the replay delivers them to a new subscriber."""
    http = requests.Session()
    http.post(f"{base}/api_tokens", json={"name": "billing", "token": "billing"}, auth=(key, ""))
    with serving() as billing:
        subscription = {"topics": ["orders"], "callback": billing.url, "max": 5, "timeout": 0}
        assert http.post(f"{base}/subscription", json=subscription, auth=("billing", "")).ok
        runs = ((["--dry-run"], "19 events selected"), (["--to", "billing"], "queued to billing"))
        for extra, said in runs:
            done = subprocess.run(
                busbar(*REPLAY, *extra), env=busbar_env(), cwd=cwd,
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0 and said in done.stdout, done.stdout + done.stderr[-3000:]
        billing.wait_for(19)
    urls = [f"https://o.test/{i}" for i in [*range(12), *range(100, 107)]]
    assert [e["url"] for e in billing.delivered] == urls  # in the order they were published
    assert {r.headers.get("Busbar-Replay", "")[:4] for r in billing.received} == {"rpl_"}


@pytest.mark.jvm
@pytest.mark.timeout(720)  # Spark starts several times: slow on a busy machine
def test_the_page_command_next_to_busbar_dev(tmp_path: Path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    dev_log = tmp_path / "dev.log"
    with serving() as sub, running(["dev"], busbar_env(PORT=str(port)), tmp_path, dev_log):
        wait_until(lambda: "busbar dev is running" in dev_log.read_text(), 60, "busbar dev")
        key = (tmp_path / "var" / "root-key").read_text().strip()
        publish(base, key, sub.url, 12)
        sub.wait_for(12)
        # the acknowledgement (and its log entry, what the ingest reads) follows the answer
        wait_until(lambda: queued(base, "sub") == 0, 30, "the acknowledgements")

        done = subprocess.run(
            busbar(*PAGE_COMMAND, "--available-now"),
            env=busbar_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        lines = done.stdout.splitlines()
        assert lines[-1].startswith("busbar spark ingest: 12 events in ")
        assert "Spark's start included" in lines[-1]
        batches = [line for line in lines if line.startswith("busbar spark ingest: batch ")]
        assert batches and batches[-1].endswith("lag 0 entries")
        assert pq.read_table(tmp_path / "lake" / "events").num_rows == 12

        out = tmp_path / "interval.log"
        with open(out, "wb") as sink:
            ingest = subprocess.Popen(
                busbar(*PAGE_COMMAND, "--interval", "1"),
                env=busbar_env(), cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            try:
                publish(base, key, sub.url, 7, first=100)
                rows_in_batches(out, 7, 300)
                os.killpg(ingest.pid, signal.SIGINT)  # Ctrl-C in its terminal
                assert ingest.wait(60) == 0
            finally:
                if ingest.poll() is None:
                    os.killpg(ingest.pid, signal.SIGKILL)
                    ingest.wait()
        replay_to_billing(base, key, tmp_path)  # the lake's 19 orders, to a new subscriber
    text = out.read_text()
    assert "Traceback" not in text and "py4j" not in text and "Exception" not in text, text
    assert re.search(r"^busbar spark ingest: 7 events in \d+ micro-batches", text, re.M), text
    assert pq.read_table(tmp_path / "lake" / "events").num_rows == 19
