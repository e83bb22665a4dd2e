"""A transform: a JSONata expression (jsonata-python) that gives an event the shape its
subscriber wants, bounded so that no expression can take a process down.

Why these guards (measured on jsonata-python 0.7.1, docs/transforms.md): the package's
own `timeout` and `stack` options start their clock when the expression is compiled
and share one depth counter between calls, so a compiled expression cannot use them.
Instead each evaluation gets its own bindings (without them, threads sharing an
expression read each other's input), and in them the evaluator's entry and exit hooks,
which count depth, look at the clock every 32 steps and refuse any string or list
longer than the output limit as soon as a step makes one. A few built-ins do their work
in one call the hooks cannot see into ($pad, $replace, $join, $distinct): each is
checked before it runs. Patterns run on RE2 (linear in the text, as a filter's
`$regex`), `$eval` is refused (it would make event data code), and `$now`/`$millis` are
bound per call (the package keeps the time of the last compile).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from typing import Any

import re2

from app.errors import InvalidInput
from app.models.regexes import REGEX_MEMORY

# Importing jsonata raises Python's recursion limit to 10,000 for the whole process,
# which changes what every other parser in it does with deep input (a publish of JSON
# nested 5,000 deep went from a 400 to a RecursionError past the JSON decoder). The
# limit is put back: the depth bound stops a transform long before it matters, and a
# RecursionError inside one is a failure of that evaluation (bound "depth").
_RECURSION_LIMIT = sys.getrecursionlimit()
from jsonata import JException, Jsonata  # noqa: E402
from jsonata.regex_engine import RegexFlags  # noqa: E402

sys.setrecursionlimit(_RECURSION_LIMIT)

CHECK_EVERY = 32  # evaluation steps between two looks at the clock
DISTINCT_MAX = 2_000  # $distinct is quadratic in its input


@dataclass(frozen=True)
class Bounds:
    """One evaluation's limits: BUSBAR_TRANSFORM_TIME_MS, BUSBAR_TRANSFORM_MAX_DEPTH, and
    BUSBAR_MAX_EVENT_DATA for the output (as compact JSON) and any value made on the way."""

    time_ms: int = 50
    depth: int = 300
    output_bytes: int = 256 * 1024


class TransformFailed(Exception):
    """An evaluation that did not give an output: `bound` names the limit it hit
    (`time`, `depth`, `size`) or is `error` for an expression error on this event."""

    def __init__(self, bound: str, message: str) -> None:
        super().__init__(message)
        self.bound = bound
        self.message = message


class Guard:
    """One evaluation's hooks (the evaluator calls them around every step)."""

    __slots__ = ("deadline", "depth", "limits", "steps")

    def __init__(self, limits: Bounds) -> None:
        self.limits = limits
        # the evaluating thread's own CPU time, not the clock's: an evaluation that
        # waits for the CPU (another process, or a thread of this one holding the
        # interpreter) is not failed for it (its batch has a wall-clock bound too)
        self.deadline = time.thread_time() + limits.time_ms / 1000
        self.depth = 0
        self.steps = 0

    def enter(self, _expr: Any, _value: Any, _env: Any) -> None:
        self.depth += 1
        if self.depth > self.limits.depth:
            raise TransformFailed("depth", f"nested deeper than {self.limits.depth} steps")
        self.steps += 1
        if not self.steps % CHECK_EVERY:
            self.on_time()

    def exit(self, _expr: Any, _value: Any, _env: Any, result: Any) -> None:
        self.depth -= 1
        if isinstance(result, (str, list)) and len(result) > self.limits.output_bytes:
            raise TransformFailed("size", f"made a value over {self.limits.output_bytes:,} long")

    def on_time(self) -> None:
        if time.thread_time() > self.deadline:
            raise TransformFailed("time", f"took over {self.limits.time_ms} ms")


def re2_engine(pattern: str, flags: RegexFlags) -> Any:
    """JSONata's regex literals on RE2."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = REGEX_MEMORY
    options.case_sensitive = not flags.case_insensitive
    return re2.compile(f"(?m){pattern}" if flags.multiline else pattern, options)


def refuse_eval(*_: Any) -> Any:
    raise TransformFailed("error", "$eval is not available in a transform")


class Checked(Jsonata.JNativeFunction):  # type: ignore[misc]
    """A built-in whose arguments are checked first, against the output limit the
    transform was compiled with: one call of it could otherwise make a value of
    gigabytes, or take seconds, before any hook runs. A check answers None to let the
    built-in run, or the result it computed itself."""

    def __init__(self, name: str, check: Any, limit: int) -> None:
        self.__dict__.update(Jsonata.static_frame.lookup(name).__dict__)
        self._check, self._limit = check, limit

    def call(self, value: Any, args: list[Any] | None) -> Any:
        done = self._check(list(args or []), self._limit)
        return super().call(value, args) if done is None else done


def _too_big(size: int, limit: int, what: str) -> None:
    if size > limit:
        raise TransformFailed("size", f"{what} would make a value over {limit:,} long")


def _pad(args: list[Any], limit: int) -> None:
    if len(args) > 1 and isinstance(args[1], (int, float)):
        _too_big(int(abs(args[1])), limit, "$pad")


def _replace(args: list[Any], limit: int) -> str | None:
    """Also runs a string pattern itself, in linear time (replace_literal)."""
    text, pattern, by = [*args, None, None, None][:3]
    if isinstance(text, str) and isinstance(by, str):
        found = text.count(pattern) if isinstance(pattern, str) and pattern else len(text) + 1
        _too_big(len(text) + found * len(by), limit, "$replace")
    return replace_literal(args)


def literal_replacement(by: str, pattern: str) -> str:
    """What JSONata's $replace puts for each match of a string pattern: its `$$` a `$`,
    its `$0` the match, any other `$` as written (a string pattern has no groups)."""
    out, at = [], 0
    while (found := by.find("$", at)) != -1:
        out.append(by[at:found])
        following = by[found + 1 : found + 2]
        out.append({"$": "$", "0": pattern}.get(following, "$"))
        at = found + (2 if following in ("$", "0") else 1)
    out.append(by[at:])
    return "".join(out)


def replace_literal(args: list[Any]) -> str | None:
    """$replace of a string pattern by a string, in linear time (the package slices the
    text after every match: 0.54 s on 300 KB); None when it is another case."""
    text, pattern, by, most = [*args, None, None, None, None][:4]
    if not (isinstance(text, str) and isinstance(pattern, str) and pattern
            and isinstance(by, str)):  # fmt: skip
        return None
    if most is not None and (not isinstance(most, (int, float)) or most < 0):
        return None  # the package's own error
    count = -1 if most is None else math.ceil(most)
    return text.replace(pattern, literal_replacement(by, pattern), count)


def _join(args: list[Any], limit: int) -> None:
    if args and isinstance(args[0], list):
        glue = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
        size = sum(len(x) for x in args[0] if isinstance(x, str)) + len(args[0]) * len(glue)
        _too_big(size, limit, "$join")


def _distinct(args: list[Any], _limit: int) -> None:
    if args and isinstance(args[0], list) and len(args[0]) > DISTINCT_MAX:
        raise TransformFailed("size", f"$distinct takes at most {DISTINCT_MAX:,} values")


CHECKS = {"pad": _pad, "replace": _replace, "join": _join, "distinct": _distinct}


def position(error: JException) -> int | None:
    at = getattr(error, "location", -1)
    return at if isinstance(at, int) and at >= 0 else None


def message(error: BaseException) -> str:
    said = error.args[0] if len(error.args) == 1 else None
    text = (said.decode() if isinstance(said, bytes) else str(error)).strip()
    text = text or type(error).__name__
    at = position(error) if isinstance(error, JException) else None
    return text if at is None else f"{text} (at character {at})"


@dataclass(frozen=True)
class Transform:
    """A compiled transform; `source` as the subscriber wrote it."""

    source: str
    expression: Jsonata

    def apply(self, event: dict[str, Any], limits: Bounds) -> Any:
        """The expression's output (event_data() makes it an event's `data`); None for
        JSONata's undefined or null."""
        guard = Guard(limits)
        now = int(time.time() * 1000)
        bindings = {
            "__evaluate_entry": guard.enter,
            "__evaluate_exit": guard.exit,
            "millis": Jsonata.JLambda(lambda: now),
            "now": Jsonata.JLambda(lambda *_: _iso(now)),
        }
        try:
            output = self.expression.evaluate(event, bindings)
        except TransformFailed:
            raise
        except RecursionError:
            raise TransformFailed("depth", "nested too deep") from None
        except MemoryError:
            raise TransformFailed("size", "ran out of memory") from None
        except Exception as exc:  # an expression error on this event (T2002, D3137, ...)
            raise TransformFailed("error", message(exc)) from None
        guard.on_time()
        if output is not None:
            size = len(json.dumps(output, separators=(",", ":")))
            _too_big(size, limits.output_bytes, "the output")
        return output


def event_data(output: Any) -> dict[str, Any] | None:
    """An output as the `data` a subscriber receives: an object, as a published event's
    (receivers of Routemaster's shape read it so), or None to drop the event. Any other
    output fails, as an error of the expression on this event."""
    if output is None or isinstance(output, dict):
        return output
    kind = "a list" if isinstance(output, list) else json.dumps(output)[:40]
    raise TransformFailed("error", f"the output must be an object, not {kind}")


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def parse_transform(
    source: Any, where: str, max_bytes: int, output_bytes: int = Bounds.output_bytes
) -> Transform:
    """A transform compiled, or a 400 naming what is wrong and where; `output_bytes`
    (BUSBAR_MAX_EVENT_DATA) bounds what its one-call built-ins may make."""
    if not isinstance(source, str) or not source.strip():
        raise InvalidInput(f"{where} must be a JSONata expression (a non-empty string)")
    if len(source.encode()) > max_bytes:
        raise InvalidInput(f"{where} is over {max_bytes:,} bytes (BUSBAR_TRANSFORM_MAX_BYTES)")
    try:
        expression = Jsonata(source, re2_engine)
    except JException as exc:
        raise InvalidInput(f"{where} is not valid JSONata: {message(exc)}") from None
    except Exception as exc:  # a pattern RE2 refuses raises its own error
        raise InvalidInput(f"{where} has a pattern busbar cannot run: {message(exc)}") from None
    expression.set_validate_input(False)  # events come from JSON or msgpack: JSON types
    for name, check in CHECKS.items():
        expression.register_function(name, Checked(name, check, output_bytes))
    expression.register_function("eval", Jsonata.JLambda(refuse_eval))
    return Transform(source, expression)


def transform_bounds(settings: Any) -> Bounds:
    """The bus's bounds on one evaluation (config/settings.py)."""
    return Bounds(settings.transform_time_ms, settings.transform_max_depth,
                  settings.max_event_data)  # fmt: skip
