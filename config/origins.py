"""Where each setting's value came from, for `busbar config`.

A value alone does not tell an operator what to change: `BUSBAR_ALLOW_HTTP=true` may be
their shell's, or `busbar dev`'s choice for its own web and worker (it allows http and
signs with its own address unless told otherwise), or the default. So every value
`busbar config` shows carries its origin, and `busbar dev` writes down the values its
web and worker read, with their origins and secrets masked (`record`, kept in
var/dev.json), since `busbar config` started beside it cannot see their environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, fields
from typing import Any

from config.errors import ConfigError
from config.settings import Settings
from config.shown import shown

DEFAULT = "default"
ENVIRONMENT = "environment"  # the environment of the process that shows it
DEV = "busbar dev"  # chosen by `busbar dev` for its web and worker
DEV_ENVIRONMENT = "busbar dev's environment"  # set where `busbar dev` was started

# unset, a variable takes another's value (Settings.from_env): it has that one's origin
STANDS_IN = {"BUSBAR_SHARDS": "BUSBAR_DELIVERY_LOG_PARTITIONS"}

Record = dict[str, dict[str, str]]


def _given(environ: Mapping[str, str], name: str) -> str | None:
    raw = environ.get(name)
    return None if raw is None or not raw.strip() else raw


def _parsed(spec: Field[Any], raw: str | None) -> tuple[bool, Any]:
    """(whether it parsed, the value): a bad value equals nothing."""
    if raw is None:
        return False, None
    try:
        return True, spec.metadata["parse"](raw)
    except ValueError:
        return False, None


def origins(
    settings: Settings,
    read: Mapping[str, str],
    outer: Mapping[str, str],
    *,
    outer_label: str,
    inner_label: str,
) -> dict[str, str]:
    """Variable name -> where `settings`' value of it came from.

    `read` is the environment `settings` were read from; `outer` the environment of
    whoever started that process. A variable `read` sets is `outer_label`'s when `outer`
    sets it to the same value, even spelled otherwise (`busbar dev` passes an operator's
    BUSBAR_ALLOW_HTTP=yes on as 1), and `inner_label`'s otherwise: the starter chose it.
    One set nowhere is the default, or has the origin of the variable that stands in for
    it; a value that is neither came from `inner_label` too (a running `busbar dev`
    supplies the Redis URL to a command with none).
    """
    specs = {spec.metadata["env"]: spec for spec in fields(Settings)}

    def origin(name: str) -> str:
        spec = specs[name]
        raw = _given(read, name)
        if raw is not None:
            mine, theirs = _parsed(spec, raw), _parsed(spec, _given(outer, name))
            return outer_label if theirs[0] and theirs == mine else inner_label
        if getattr(settings, spec.name) == spec.default:
            return DEFAULT
        if name in STANDS_IN and _given(read, STANDS_IN[name]) is not None:
            return origin(STANDS_IN[name])
        return inner_label

    return {name: origin(name) for name in specs}


def record(
    read: Mapping[str, str], outer: Mapping[str, str], chosen: Mapping[str, str] | None = None
) -> Record | None:
    """What `busbar dev` keeps for `busbar config`: each variable as its web and worker
    read it from `read` (secrets masked) and where it came from; None when they cannot
    read it (they would not start either, and dev stops with them). `chosen`: a more
    precise origin for some of dev's own choices (the root key it keeps in a file)."""
    try:
        settings = Settings.from_env(read)
    except ConfigError:
        return None
    where = origins(settings, read, outer, outer_label=DEV_ENVIRONMENT, inner_label=DEV)
    for name, label in (chosen or {}).items():
        if where.get(name) == DEV:
            where[name] = label
    return {
        name: {
            "value": shown(spec.metadata["shown"], getattr(settings, spec.name)),
            "from": where[name],
        }
        for spec in fields(Settings)
        for name in [spec.metadata["env"]]
    }


def recorded(state: Mapping[str, Any]) -> Record | None:
    """The record in a running dev's state, if it holds a well-formed one (a dev of an
    earlier version wrote none)."""
    found = state.get("settings")
    if not isinstance(found, dict):
        return None
    for entry in found.values():
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("value"), str)
            and isinstance(entry.get("from"), str)
        ):
            return None
    return found
