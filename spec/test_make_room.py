"""`make test` on a machine short of disk: it fails before installing anything, with one
line naming the folder and what it lacks. Before, CI's clone failed part way through
pip's install of the test virtualenv with `[Errno 28] No space left on device`, a
traceback of pip's that named neither the need nor the folder."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def room(tmp: Path, need_mb: int, tmpdir: Path | None = None) -> subprocess.CompletedProcess[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not on PATH: this test is about make's targets")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["TMPDIR"] = str(tmpdir or tmp)
    return subprocess.run(
        ["make", "--no-print-directory", "-s", "-C", str(ROOT), "room", f"TEST_SPACE_MB={need_mb}"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_machine_with_room_passes_the_check_silently(tmp_path: Path):
    done = room(tmp_path, 1)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_a_machine_short_of_disk_is_told_in_one_line_what_it_lacks(tmp_path: Path):
    done = room(tmp_path, 1 << 40)  # a thousand petabytes: no machine has them
    assert done.returncode != 0
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"make test needs about {1 << 40} MB free in {ROOT} (it has ")
    assert "free some space" in line


def test_a_missing_temporary_folder_is_named(tmp_path: Path):
    done = room(tmp_path, 1, tmp_path / "gone")
    assert done.returncode != 0
    (line,) = done.stdout.splitlines()
    assert str(tmp_path / "gone") in line and "does not exist" in line
