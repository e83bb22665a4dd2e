"""The configuration's own error, kept in config/ so that config imports nothing from app.

It is not an app.errors.BusbarError: a bad setting stops a process before it serves
anything, and `busbar` answers it with exit status 2 (a usage error), not 1.
"""

from __future__ import annotations


class ConfigError(Exception):
    """A setting is missing or malformed; the process must not start. The message names
    the variable and never holds a secret's value."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
