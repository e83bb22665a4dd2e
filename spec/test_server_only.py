"""make test runs the suites that depend on the server's semantics on Redis 7 as well,
with `--server-only` (spec/conftest.py): a test that talks to no server would run there
as it ran on the embedded server. What it keeps must be every test that talks to one,
by a fixture or by starting servers of its own; what it drops, the tests of pure logic
and of fakeredis."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def collected(*paths: str, server_only: bool) -> set[str]:
    extra = ["--server-only"] if server_only else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
         *extra, *paths],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_server_only_keeps_the_tests_that_talk_to_a_server_and_no_other():
    paths = (
        "spec/app/models/test_queue.py",
        "spec/app/lua/test_pipe.py",
        "spec/app/models/test_filters.py",
        "spec/app/models/test_replicas_cluster.py",
    )
    every, kept = collected(*paths, server_only=False), collected(*paths, server_only=True)
    assert kept < every
    # a fixture's server (redis_client), and the servers a module starts itself
    assert "spec/app/models/test_queue.py::test_queue_state_machine_on_the_real_server" in kept
    assert {t for t in every if "test_pipe.py" in t or "test_replicas_cluster" in t} <= kept
    # fakeredis, and pure logic
    assert "spec/app/models/test_queue.py::test_queue_state_machine_on_fakeredis" not in kept
    assert not {t for t in kept if "test_filters.py" in t}
