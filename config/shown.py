"""A setting's value as `busbar config` shows it: the text an operator would set, with
secrets masked (config/redact.py).

`busbar dev` shows its web and worker's values the same way when it writes them down
for `busbar config` (config/origins.py), so a value looks the same whichever process
read it, and no secret reaches var/dev.json unmasked.
"""

from __future__ import annotations

from typing import Any

from config import redact


def text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def shown(kind: str, value: Any) -> str:
    """`kind`: a variable's `shown` (config/settings.py): plain, secret or url."""
    if kind == "secret":
        return redact.secret(value)
    if kind == "url" and value:
        return redact.url(value)
    return text(value)
