"""The systemd units in deploy/systemd are what `systemd-analyze verify` accepts, with
no warning (it warns and still exits 0 on an unknown directive or a bad value), their
ExecStart pointed at a real busbar; each runs a busbar command that exists, the lake's
ingest as docs/lake.md writes it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from busbar.cli import COMMANDS
from spec.deploy.prometheus import DEPLOY

UNITS = DEPLOY / "systemd"
INSTALLED = "/opt/busbar/bin/busbar"  # where the units expect the virtualenv


def exec_starts() -> dict[str, list[str]]:
    found = {}
    for unit in sorted(UNITS.glob("*.service")):
        (line,) = [x for x in unit.read_text().splitlines() if x.startswith("ExecStart=")]
        found[unit.name] = line.removeprefix("ExecStart=").split()
    return found


def test_systemd_analyze_verifies_every_unit_without_a_warning(tmp_path: Path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is not on PATH: install systemd (apt-get install systemd)")
    busbar = Path(sys.executable).parent / "busbar"  # this environment's, installed by make
    for unit in UNITS.iterdir():
        (tmp_path / unit.name).write_text(unit.read_text().replace(INSTALLED, str(busbar)))
    names = sorted(str(p) for p in tmp_path.iterdir())
    assert len(names) == 4
    done = subprocess.run([analyze, "verify", *names], capture_output=True, text=True, cwd=tmp_path)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_the_units_run_busbar_commands_that_exist():
    starts = exec_starts()
    assert {name: args[:2] for name, args in starts.items()} == {
        "busbar-ingest.service": [INSTALLED, "spark"],
        "busbar-web.service": [INSTALLED, "web"],
        "busbar-worker@.service": [INSTALLED, "worker"],
    }
    assert all(args[1] in COMMANDS for args in starts.values())
    ingest = " ".join(["busbar", *starts["busbar-ingest.service"][2:]])
    assert (
        f"busbar spark {ingest.removeprefix('busbar ')}"
        in (DEPLOY.parent / "docs" / "lake.md").read_text()
    )
