"""make test's stages after the parallel one (the tests marked `alone`, then `failover`)
collect only the files the Makefile names for them (ALONE_SUITES, FAILOVER_SUITES), not
the 2,000 tests of spec/ each time. A test marked in another file would run in no stage:
every marked test's file must be named there, and every file named must hold some."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"


def named(variable: str) -> set[str]:
    """The spec/ files a Makefile variable names (`$(addprefix $(ROOT)/,spec/...)`, or
    `$(ROOT)/spec/...` paths), relative to spec/."""
    text = (ROOT / "Makefile").read_text()
    (line,) = [x for x in text.splitlines() if x.startswith(f"{variable} :=")]
    value = line.split(":=", 1)[1]
    if "addprefix" in value:
        value = value.split(",", 1)[1].rstrip(")")
    return {p.split("spec/", 1)[1] for p in value.split()}


def marked(mark: str) -> set[str]:
    pattern = re.compile(rf"\bpytest\.mark\.{mark}\b")
    return {
        str(path.relative_to(SPEC))
        for path in SPEC.rglob("test_*.py")
        if pattern.search(path.read_text())
    }


def test_every_file_of_alone_tests_is_one_the_alone_stage_runs():
    assert marked("alone")
    assert marked("alone") == named("ALONE_SUITES")


def test_every_file_of_failover_tests_is_one_the_failover_stage_runs():
    assert marked("failover")
    assert marked("failover") == named("FAILOVER_SUITES")
