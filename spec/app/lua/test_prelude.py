"""A script's prelude holds every library function it can call, and only those
(app/lua/prelude.py): a function left out would fail only when its branch runs."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from app import lua
from app.errors import BusbarError
from app.lua.prelude import definitions

LIBRARIES = sorted(
    e.name.removesuffix(".lua") for e in (resources.files("app.lua") / "lib").iterdir()
)
DEFINED = re.compile(r"^local function ([A-Za-z_][A-Za-z0-9_]*)\(", re.M)
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_library_splits_into_definitions_and_loses_no_line_of_code(library: str):
    source = lua._read(f"lib/{library}.lua")
    kept = "".join(d.text for d in definitions(library, source))
    code = lambda text: [x for x in text.splitlines() if x.strip() and not x.startswith("--")]  # noqa: E731
    assert code(source) == code(kept)


def test_every_function_a_script_names_is_defined_before_it_runs():
    for entry in resources.files("app.lua").iterdir():
        if not entry.name.endswith(".lua"):
            continue
        name = entry.name.removesuffix(".lua")
        uses = [n for line in lua.header(entry.read_text()) if line.startswith("-- USES ")
                for n in line.split()[2:]]  # fmt: skip
        offered = {
            f for lib in lua._libraries(uses) for f in DEFINED.findall(lua._read(f"lib/{lib}.lua"))
        }
        source = re.sub(r"--.*", "", lua._sources()[name])  # words in comments call nothing
        defined = DEFINED.findall(source)
        assert len(defined) == len(set(defined)), name
        for word in set(WORD.findall(source)) & offered:
            assert word in defined, f"{name}.lua names {word} but its prelude lacks it"


def test_a_script_gets_only_what_it_calls():
    publish = lua._sources()["publish"]
    assert "local function ingest_subscriber(" in publish  # its own call
    assert "local function job_due_by(" in publish  # through ingest_subscriber
    for unused in ("partitions_of", "new_rules_version", "name_holder"):
        assert f"local function {unused}(" not in publish


def test_a_library_line_that_is_no_definition_is_refused():
    with pytest.raises(BusbarError, match="line 2"):
        definitions("x", "-- a comment\nredis.call('DEL', KEYS[1])\n")
