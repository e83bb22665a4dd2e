"""`busbar dev` on a machine without Redis: embedded server, web and worker, clean stops."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import redis
import requests

from app.errors import BusbarError
from dev import redis_server
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


def test_a_server_started_on_a_port_another_took_is_never_taken_for_that_one(
    tmp_path: Path, monkeypatch
):
    """Tests run side by side and a free port may be bound by another's server before
    ours binds it: that server then answers PING. dev/redis_server.py's `start` takes
    only an answer from its own process, moves a port of its choosing elsewhere, and
    refuses a port it was given. (The collision is forced by handing `start` the
    first server's port as the free one.)"""
    first = redis_server.start(tmp_path / "first", persistent=False)
    try:
        taken = iter([first.port])
        real = redis_server.free_port
        monkeypatch.setattr(redis_server, "free_port", lambda: next(taken, None) or real())
        second = redis_server.start(tmp_path / "second", persistent=False)
        try:
            assert second.port != first.port and second.process.poll() is None
            with redis.Redis(port=second.port) as client:
                assert client.info("server")["process_id"] == second.process.pid
        finally:
            second.stop()
        with pytest.raises(BusbarError, match=str(first.port)):
            redis_server.start(tmp_path / "third", port=first.port, persistent=False)
    finally:
        first.stop()
