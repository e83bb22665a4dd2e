"""What a script's `-- USES` libraries put before it: only the functions it can call.

Redis compiles a script once, but every call runs its body from the top, and a library
prepended to it is part of that body: each `local function` of lib/*.lua is made anew
(a closure, its upvalues bound) on every call, whether the script calls it or not. The
topic step of a publish (publish.lua) named four libraries, and of their 39 functions
it calls a dozen; making the rest was several µs of Redis CPU on every publish
(bench/publish_profile.py: "of which its Lua libraries"). So each library is split into
its top-level definitions, and a script gets those its own text names, and those they
name in turn, in library order (a Lua local is only seen by code after it).

A definition is a top-level `local function NAME(` ... up to the `end` in column 0 that
closes it, or a top-level `local NAME = ...` line, with the comment lines just above it;
the libraries are written that way (a test checks every library splits into nothing
else, spec/app/lua/test_prelude.py). Names are matched as whole words, so a name in a
comment or a string keeps its definition: never one too few.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from app.errors import BusbarError

_HEAD = re.compile(r"local function ([A-Za-z_][A-Za-z0-9_]*)\(|local ([A-Za-z_][A-Za-z0-9_]*) =")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Definition(NamedTuple):
    name: str
    text: str  # its comment lines, then the definition, newline-terminated
    names: frozenset[str]  # every word in it: what it may call


def definitions(library: str, source: str) -> list[Definition]:
    """A library's top-level definitions, in order; BusbarError for any other top-level
    line (code that would run on its own, which pruning would drop)."""
    found: list[Definition] = []
    comments: list[str] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--") or not line.strip():
            comments = [*comments, line] if line.strip() else []
            i += 1
            continue
        head = _HEAD.match(line)
        if head is None:
            raise BusbarError(f"lib/{library}.lua line {i + 1}: not a top-level definition")
        end = i
        if head.group(1):  # a function: up to the `end` in column 0
            end = next((j for j in range(i + 1, len(lines)) if lines[j] == "end"), -1)
            if end < 0:
                raise BusbarError(f"lib/{library}.lua line {i + 1}: no `end` in column 0")
        body = lines[i : end + 1]
        text = "\n".join([*comments, *body]) + "\n"
        name = head.group(1) or head.group(2)
        found.append(Definition(name, text, frozenset(_WORD.findall("\n".join(body)))))
        comments, i = [], end + 1
    return found


def prelude(libraries: list[list[Definition]], script: str) -> str:
    """The definitions of `libraries` (in order) that `script` needs, as one text."""
    every = [d for lib in libraries for d in lib]
    wanted: set[str] = set()
    todo = set(_WORD.findall(script))
    by_name = {d.name: d for d in every}
    while todo:
        name = todo.pop()
        if name in by_name and name not in wanted:
            wanted.add(name)
            todo |= by_name[name].names - wanted
    return "".join(d.text for d in every if d.name in wanted)
