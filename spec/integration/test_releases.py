"""What a release is, seen from outside: one version everywhere it is shown, the layout
a process reads and writes in /health, a store of a newer layout refused by `busbar web`,
`busbar worker` and `busbar migrate` with one line and exit 2, and `busbar migrate`
on a store of this release's layout (app/release.py, app/models/layout.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import redis
import requests

from app.models.keys import Keys
from app.release import LAYOUT
from spec.integration.bus import web_env
from spec.integration.processes import (
    busbar_env,
    free_port,
    package_version,
    running,
    wait_until,
    web_ready,
)


def busbar(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "busbar", *args],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_one_version_everywhere_and_the_layout_in_health(
    redis_url: str, redis_client: redis.Redis, keys: Keys, tmp_path: Path
):
    version = package_version()
    shown = busbar("--version", env=busbar_env())
    assert shown.stdout == f"busbar {version}\n"
    port = free_port()
    with running(["web"], web_env(redis_url, port), log=tmp_path / "web.log"):
        wait_until(lambda: web_ready(tmp_path / "web.log", port), what="busbar web to answer")
        health = requests.get(f"http://127.0.0.1:{port}/health", timeout=10).json()
        spec = requests.get(f"http://127.0.0.1:{port}/openapi.json", timeout=10).json()
        console = requests.get(f"http://127.0.0.1:{port}/console", timeout=10).text
    assert (health["version"], health["layout"]) == (version, LAYOUT)
    assert spec["info"]["version"] == version
    assert f"busbar {version}" in console  # the console's footer
    assert int(redis_client.hget(keys.meta, "layout")) == LAYOUT  # the web stamped it
    checked = busbar("migrate", "--check", env=busbar_env(BUSBAR_REDIS_URL=redis_url))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines() == [
        f"busbar {version} reads and writes layout {LAYOUT}; the store holds {LAYOUT}",
        "nothing to migrate",
    ]


def test_a_newer_layout_is_refused_by_every_process_in_one_line(
    redis_url: str, redis_client: redis.Redis, keys: Keys, tmp_path: Path
):
    """As after a rollback past a release that moved the layout on: web, worker, migrate
    and the lake's ingest (before Spark starts) each stop at once, saying what they
    found and what to do."""
    redis_client.hset(keys.meta, "layout", LAYOUT + 1)
    env = web_env(redis_url, free_port())
    out = tmp_path / "lake"
    ingest = ["spark", "ingest", "--output", str(out), "--checkpoint", str(out / "_cp"),
              "--available-now"]  # fmt: skip
    for command in (["web"], ["worker"], ["migrate"], ingest):
        result = busbar(*command, env=env)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        (line,) = [line for line in result.stderr.splitlines() if line.strip()]
        assert line.startswith(f"busbar {command[0]}: Redis holds busbar layout {LAYOUT + 1}")
        assert f"newer than this busbar ({package_version()})" in line
        assert "CHANGELOG.md" in line
    assert int(redis_client.hget(keys.meta, "layout")) == LAYOUT + 1  # left as found
