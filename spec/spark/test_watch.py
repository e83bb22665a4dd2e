"""The wait on the ingest's queries, with stand-ins for PySpark's StreamingQuery whose
ending can be placed exactly between two looks (a real one ends when Spark says)."""

from __future__ import annotations

from typing import Any, cast

from spark.watch import watch


class EndingQuery:
    """Active for its first `reads` looks at isActive, ended after: a query whose stream
    ran dry between `finished` and the choice of which query to wait on."""

    def __init__(self, reads: int) -> None:
        self.reads = reads
        self.waits = 0

    @property
    def isActive(self) -> bool:
        self.reads -= 1
        return self.reads >= 0

    def exception(self) -> None:
        return None

    def awaitTermination(self, timeout: int) -> None:
        assert timeout > 0
        self.waits += 1

    @property
    def recentProgress(self) -> list:
        return []


def test_a_query_ending_between_two_looks_ends_the_wait() -> None:
    query = EndingQuery(reads=1)  # `finished` sees it active, the next look sees it ended
    watch(cast(Any, None), [(cast(Any, query), None)], True, None, None, None)
    assert query.waits == 0


def test_an_active_query_is_waited_on_until_it_ends() -> None:
    query = EndingQuery(reads=6)  # three rounds of (finished, choice)
    watch(cast(Any, None), [(cast(Any, query), None)], True, None, None, None)
    assert query.waits == 3
