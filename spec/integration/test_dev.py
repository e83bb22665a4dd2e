"""`busbar dev` on a machine without Redis: embedded server, web and worker, clean stops."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import requests

from spec.integration.processes import (
    busbar_env,
    children_of,
    free_port,
    pid_alive,
    running,
    wait_until,
)


def _start_and_read(tmp_path: Path, port: int, log: Path):
    return running(["dev"], busbar_env(PORT=str(port)), cwd=tmp_path, log=log)


def test_dev_runs_everything_keeps_data_and_leaves_nothing_behind(tmp_path: Path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "dev.log"
    with _start_and_read(tmp_path, port, log) as dev:
        wait_until(lambda: "busbar dev is running" in log.read_text(), 60, "busbar dev to start")
        root_key = (tmp_path / "var" / "root-key").read_text().strip()
        output = log.read_text()
        assert f"API       {base}" in output and f"root key  {root_key}" in output
        assert requests.get(f"{base}/health", timeout=5).status_code == 200
        made = requests.post(
            f"{base}/api_tokens", json={"name": "demo"}, auth=(root_key, ""), timeout=5
        )
        assert made.status_code == 201
        descendants = children_of(dev.pid)
        assert len(descendants) >= 4  # server, web master + workers, worker
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(60) == 0
    assert not [pid for pid in descendants if pid_alive(pid)]
    assert (tmp_path / "var" / "redis").is_dir()

    # Second start: same root key, and the token survived in the AOF.
    log2 = tmp_path / "dev2.log"
    with _start_and_read(tmp_path, port, log2) as dev:
        wait_until(lambda: "busbar dev is running" in log2.read_text(), 60, "busbar dev to restart")
        listed = requests.get(f"{base}/api_tokens", auth=(root_key, ""), timeout=5)
        assert listed.status_code == 200
        assert listed.json() == [made.json()]
        dev.send_signal(signal.SIGINT)
        assert dev.wait(60) == 0


def test_killing_dev_with_sigkill_takes_its_children_along(tmp_path: Path):
    port = free_port()
    log = tmp_path / "dev.log"
    with _start_and_read(tmp_path, port, log) as dev:
        wait_until(lambda: "busbar dev is running" in log.read_text(), 60, "busbar dev to start")
        descendants = children_of(dev.pid)
        assert descendants
        os.kill(dev.pid, signal.SIGKILL)
        dev.wait()
        wait_until(lambda: not [p for p in descendants if pid_alive(p)], 30, "children to exit")


def test_dev_uses_the_given_root_key(tmp_path: Path):
    port = free_port()
    log = tmp_path / "dev.log"
    env = busbar_env(PORT=str(port), BUSBAR_ROOT_KEY="my-own-root-key")
    with running(["dev"], env, cwd=tmp_path, log=log) as dev:
        wait_until(lambda: "busbar dev is running" in log.read_text(), 60, "busbar dev to start")
        assert "root key  my-own-root-key" in log.read_text()
        response = requests.get(
            f"http://127.0.0.1:{port}/api_tokens", auth=("my-own-root-key", ""), timeout=5
        )
        assert response.status_code == 204
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(60) == 0
