"""The key names the Lua scripts build are the ones app/models/keys.py writes. A script
gets the keys it starts from in KEYS and derives the rest (`base .. 'batch:' .. id`); a
key renamed in keys.py and not in the Lua, or mistyped in a script, would split the
data in two without an error. Each literal a script joins into a name must appear in a
key keys.py renders; the few joined literals that name no key are listed, with what
they are."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from app.models.keys import Keys

LUA = Path(__file__).resolve().parents[3] / "app" / "lua"
JOINED = re.compile(r"\.\.\s*'([^']*)'|'([^']*)'\s*\.\.")  # a literal beside Lua's `..`
NOT_KEYS = {
    ":": "a separator: coalesce members `<batch>:<url>`, trash lanes",
    "/": "the trash set's members `<token>/<n>/<lane>`",
    "|": "a route table's `<shard>|<table>`, a dead letter's status",
    "events.": "a counter's field in a counters hash (events.expired, ...)",
    "latency.le.": "a histogram bucket's field in a counters hash",
    "attempts.": "a subscriber hash's count of attempts by outcome (attempts.5xx, ...)",
    "xx": "an attempt's outcome from its status code's first digit (5xx)",
    "#": "a partition's pid `<token>#<n>.<p>`, which names its keys `part:<n>.<p>:`",
    " ": "the filters an event matched, ` <token>=1,3` (lib/ingest.lua's pick_route)",
    "=": "the same",
    ",": "the same",
    ":last": "a schemas hash's field `<type>:last`, the last version drawn (lib/schemas.lua)",
    "|0|": "a kept schema version's `<at>|<deprecated>|<JSON>`, stored not deprecated",
    "key:": "a push keys hash's field `key:<kid>`, a key pair's entry (push_keys.lua)",
    "retire:": "the same hash's `retire:<kid>`, until when a former key is published",
    "q:": "an erasure receipt's field `q:<pid>`, where its step goes on (erase_queued.lua)",
    "dl:": "the same receipt's `dl:<token>`, for dead letters (erase_deadletters.lua)",
    "(": "XRANGE's exclusive start `(<id>`, not a key",
    "pass.": "an erasure receipt's field `pass.<stream>`: read to its end this pass",
}
SAMPLES = {  # an argument for every parameter name keys.py's templates take
    "token": "tok", "lane": 3, "batch_id": 7, "worker": "w/0", "name": "orders",
    "publish_id": "p1", "n": 1, "queue": "main", "shard": 0, "pid": "tok#4.1",
}  # fmt: skip


def joined_literals() -> dict[str, str]:
    """Every literal joined with `..` in the scripts (comments left out): where first."""
    found: dict[str, str] = {}
    for path in sorted(LUA.rglob("*.lua")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in JOINED.finditer(line.split("--")[0]):
                literal = match.group(1) if match.group(1) is not None else match.group(2)
                found.setdefault(literal, f"{path.relative_to(LUA)}:{number}")
    return found


def rendered(queue: str) -> list[str]:
    """Every key keys.py's Keys and Place write, with sample arguments."""
    keys = Keys("P:", 2)
    names: list[str] = []
    for owner in (keys, keys.catalog, keys.shard(0)):
        for attribute in dir(owner):
            if attribute.startswith("_"):
                continue
            value = getattr(owner, attribute)
            if callable(value) and not isinstance(value, type):
                parameters = inspect.signature(value).parameters
                if not all(p in SAMPLES for p in parameters):
                    continue
                value = value(*({**SAMPLES, "queue": queue}[p] for p in parameters))
            values = value if isinstance(value, list) else [value]
            names += [v for v in values if isinstance(v, str)]
    return names


def test_the_scripts_build_only_key_names_keys_py_writes():
    keys = rendered("main") + rendered("aux")
    unknown = {
        literal: where
        for literal, where in joined_literals().items()
        if literal not in NOT_KEYS and not any(literal in key for key in keys)
    }
    assert unknown == {}


def test_the_check_sees_the_keys_the_scripts_derive():
    """It would pass on nothing: it reads the literals the batch and lane keys are built
    from, and keys.py renders those keys."""
    found = joined_literals()
    assert {"batch:", "lane:", "current:", "coalesce", "jobs:index:main"} <= set(found)
    assert "P:{s:0}:sub:tok:batch:7" in rendered("main")
    assert "batch:" not in NOT_KEYS
