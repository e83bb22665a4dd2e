"""A turn: what a long piece of work calls between its pieces, where a web process lets
the requests waiting beside it in (app/web/turns.py). Outside a web process, or where
nothing waits, it is `no_turn`: the Monitor's thread, the admin commands, the tests."""

from __future__ import annotations

from collections.abc import Callable

Turn = Callable[[], None]


def no_turn() -> None:
    """Nothing to let in."""
