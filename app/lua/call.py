"""One call of a Lua script: its name, KEYS and ARGV, as a typed builder made them.

A script's slots are positional; each builder names them (app/models/job_calls.py for
the job scripts, app/delivery/calls.py for the delivery scripts), and a test checks it
against the KEYS/ARGV header of its script, so a caller cannot put the nonce where the
job goes, and two callers cannot build the same call two ways.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Call:
    script: str
    keys: list[str]
    args: list[object]
