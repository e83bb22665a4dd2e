"""`make check` on a fresh machine: every command of the machine's that its tests look for
(promtool for the alert rules, systemd-analyze for the units, openssl for the
certificates) is one `make unit` sees to first, installing it as `make test` does.
Before, the rules' tests failed on a machine where `make test` had never run."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
# how a test finds a command: shutil.which, or spec/deploy/prometheus.py's tool, of a name
LOOKED_FOR = re.compile(r"""\b(?:which|tool)\(\s*["']([\w.+-]+)["']""")


def unit_selection() -> set[Path]:
    """make unit's test files and helpers (spec/ without spec/integration), with the
    modules of spec/integration they import."""
    files = {p for p in SPEC.rglob("*.py") if "integration" not in p.relative_to(SPEC).parts}
    for path in list(files):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "spec.integration."
            ):
                files.add(ROOT / ((node.module or "").replace(".", "/") + ".py"))
    return files


def commands_looked_for() -> set[str]:
    """Each name a test looks for, but make: `make check` runs on it."""
    found = {name for path in unit_selection() for name in LOOKED_FOR.findall(path.read_text())}
    return found - {"make"}


def test_make_unit_sees_to_every_command_its_tests_look_for():
    if shutil.which("make") is None:
        pytest.skip("make is not on PATH: this test is about make's targets")
    looked_for = commands_looked_for()
    assert {"promtool", "systemd-analyze", "openssl"} <= looked_for  # the scan finds them
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    dry = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "unit"], env=env, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    unseen = sorted(c for c in looked_for if f"command -v {c} " not in dry.stdout)
    assert unseen == [], "make unit neither installs nor names these commands its tests run"
