"""The import directions the design fixes, checked on the source: a wrong import fails
here instead of waiting for a reviewer to notice it."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported(package: str) -> dict[str, set[str]]:
    """Module path -> every module it imports (at any depth, lazily or not)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names |= {f"{node.module}.{alias.name}" for alias in node.names}
        found[str(path.relative_to(ROOT))] = names
    return found


def offending(package: str, allowed: Callable[[str], bool]) -> dict[str, list[str]]:
    return {
        path: sorted(n for n in names if not allowed(n))
        for path, names in imported(package).items()
        if any(not allowed(n) for n in names)
    }


def ours(name: str) -> str:
    return name.split(".")[0]


FIRST_PARTY = {"app", "workers", "jobs", "spark", "config", "dev", "busbar", "bench", "spec"}


def test_config_imports_nothing_of_busbar_but_itself():
    assert offending("config", lambda n: ours(n) not in FIRST_PARTY - {"config"}) == {}


def test_app_never_imports_the_layers_above_it():
    above = {"workers", "jobs", "dev", "busbar", "spark", "bench", "spec"}
    assert offending("app", lambda n: ours(n) not in above) == {}


def test_spark_takes_from_app_only_what_reads_the_same_bytes_and_times():
    """Executors import the source and rows modules; the drivers, never on an executor,
    take more: the replay's (spark/replay.py) drives the replay's Redis side,
    app/services/replay.py, and the command (spark/cli.py) checks the store's layout
    before Spark starts (app/models/layout.py).
    The selection reads times as the API does (app/clock.py, and its InvalidInput); the
    attempts table reads an attempt as the API does (app/models/attempts.py's shown());
    a replayed row's trace context is the codec's (app/models/trace_context.py)."""
    allowed = (
        "app.codec", "app.models.keys", "app.models.event_ids", "app.clock", "app.errors",
        "app.models.attempts", "app.models.trace_context",
    )  # fmt: skip
    driver = (*allowed, "app.services.replay", "app.lua", "app.errors", "app.models.layout")
    found = offending(
        "spark",
        lambda n: ours(n) not in FIRST_PARTY - {"spark", "config"} or n.startswith(allowed),
    )
    assert set(found) <= {"spark/replay.py", "spark/cli.py"}
    replay = offending(
        "spark", lambda n: ours(n) not in FIRST_PARTY - {"spark", "config"} or n.startswith(driver)
    )
    assert replay == {}


def test_models_import_nothing_above_them():
    """What is stored (app/models) is beneath what uses it: the delivery engine, the
    services and the web app import models, never the reverse. A format two layers
    share lives in the lower one (app/models/attempt_result.py)."""
    above = ("app.delivery", "app.services", "app.web")
    assert offending("app/models", lambda n: not n.startswith(above)) == {}


def test_benchmarks_import_nothing_from_workers():
    assert offending("bench", lambda n: ours(n) != "workers") == {}


@pytest.mark.parametrize(
    ("command", "absent"),
    [
        ("config", ["flask", "gunicorn", "pyspark", "workers"]),
        ("--help", ["flask", "app.web"]),
        ("subscriber", ["flask", "gunicorn", "pyspark", "workers", "app.delivery"]),
    ],
)
def test_the_dispatcher_loads_only_the_command_asked_for(command, absent):
    run = (
        f"import sys, runpy; sys.argv = ['busbar', {command!r}]\n"
        "try:\n    runpy.run_module('busbar', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
    )
    assert loaded_after(run, absent) == []


def loaded_after(code: str, modules: list[str]) -> list[str]:
    """Which of `modules` a fresh interpreter holds once it has run `code`."""
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {modules!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["workers.main", "app.web.factory"])
def test_a_process_loads_certificates_and_jwt_only_when_a_subscription_uses_them(module):
    """cryptography's x509 and keys, and PyJWT, are loaded at first use (a client
    certificate, a JWT per push, OAuth2's private_key_jwt): most buses use none, and
    every busbar process loaded them at start, about 30 ms of a worker's CPU."""
    heavy = ["cryptography.x509", "jwt", "cryptography.hazmat.primitives.asymmetric.ec"]
    assert loaded_after(f"import {module}", heavy) == []
