"""User patterns on RE2, and why one is refused, in words a user can act on.

busbar runs a user's pattern only on an engine that matches in time linear in the text,
whatever the pattern: RE2 for a filter's `$regex` (app/models/filters.py), Rust's `regex`
for a schema's `pattern` (app/models/schemas.py). Neither has backreferences or
lookaround, which need backtracking. RE2's own text for them ("invalid escape sequence:
\\1", "invalid perl operator: (?=") reads like a typo to hunt for, so the refusal says
which feature it is and that no pattern may use it.
"""

from __future__ import annotations

import re
from typing import Any

import re2

REGEX_MEMORY = 1 << 20  # bytes RE2 may use for one compiled pattern
UNSUPPORTED = "busbar's patterns run in linear time, so no backreferences and no lookaround"
# RE2's error texts for the two features (`\1`..`\9` and `\k<name>`; `(?P=name)` is told
# apart by the pattern, since RE2 says "(?P" for every (?P form it refuses)
_BACKREFERENCE = re.compile(r"invalid escape sequence: \\[1-9k]")
_LOOKAROUND = re.compile(r"invalid perl operator: \(\?(=|!|<=|<!)")


def compiled(pattern: str) -> Any:
    """The pattern compiled by RE2 (re2.error if it is refused); its size is bounded."""
    options = re2.Options()
    options.log_errors = False  # the 400 says what is wrong, not the server's stderr
    options.max_mem = REGEX_MEMORY
    return re2.compile(pattern, options)


def reason(pattern: str, error: re2.error) -> str:
    """RE2's text for the refusal, and which feature it is when it is one RE2 lacks."""
    text = error.args[0] if error.args else str(error)
    why = text.decode() if isinstance(text, bytes) else str(text)
    if _BACKREFERENCE.search(why) or ("(?P" in why and "(?P=" in pattern):
        return f"{why} (a backreference: {UNSUPPORTED})"
    if _LOOKAROUND.search(why):
        return f"{why} (a lookaround: {UNSUPPORTED})"
    return why


def refusal(pattern: str) -> str | None:
    """Why RE2 refuses `pattern`; None when it takes it."""
    try:
        compiled(pattern)
    except re2.error as exc:
        return reason(pattern, exc)
    return None
