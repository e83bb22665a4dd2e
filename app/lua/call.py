"""One call of a Lua script: its name, KEYS and ARGV as a typed builder made them, and
how its reply is read.

A script's slots are positional; each builder names them, and a test checks it against
the KEYS/ARGV header of its script, so a caller cannot put the nonce where the job goes,
and two callers cannot build the same call two ways. The reply is read where the call
is built (`read`), into a bool, a count, an enum or a named tuple, so no caller handles
a magic int or a bytes tag. Scripts.run and AsyncScripts.run are the only way to call a
script. The builders (the modules named *_calls.py, and app/delivery/calls.py):
app/models/job_calls.py (the job state machine and worker liveness), subscriber_calls.py
(subscriptions, topics, dead letters), publish_calls.py (publish and replay),
shed_calls.py (expiry and autodrop), token_calls.py (clients and their tokens),
schema_calls.py (event schemas), erasure_calls.py (erasures), app/delivery/calls.py (the
delivery scripts); a few single calls are built beside their one caller (the retention,
layout, push key and OAuth2 token scripts' in their models).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

R = TypeVar("R")


@dataclass(frozen=True)
class Call(Generic[R]):
    script: str
    keys: list[str]
    args: list[object]
    read: Callable[[Any], R]


def as_int(reply: Any) -> int:
    return int(reply)


def as_bool(reply: Any) -> bool:
    return bool(int(reply))
