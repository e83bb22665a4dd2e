"""The composition matrix, end to end (docs/tests.md, "The composition matrix"): every
pair of subscriber-side features (spec/integration/matrix.py's covering array), each
cell a subscription at `concurrency` 1 and at 4, all on one bus per layout (one Redis,
a 3-master cluster). The bus runs once per layout (the module's fixture); each test then
reads what one subscription met: everything it was promised arrived (acknowledged)
exactly as published, and nothing else, each key in order and never in two deliveries
at once, every request with the credentials the cell configured and a valid signature,
the pause, the dead letters and their replay, the Retry-After wait, the attempt log, the
test call and the operator's events as the features say."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spec.integration.layouts import flushed
from spec.integration.matrix import (
    CELLS,
    CONCURRENCIES,
    DIMENSIONS,
    Outcome,
    Pki,
    Sub,
    coalescing_problems,
    missing_pairs,
    pairwise,
    pki,
    problems,
    run,
)

# One test process runs them all (make test: --dist loadgroup), so the bus runs once per
# layout rather than once per process that gets a cell.
pytestmark = pytest.mark.xdist_group("matrix")


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return pki(tmp_path_factory.mktemp("matrix-ca"))


@pytest.fixture(scope="module", params=["single", "cluster"])
def matrix(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, keys: Pki
) -> Iterator[Outcome]:
    """The whole matrix run once on the layout: one Redis, or the session's cluster
    (flushed first, as the `redis_url` fixture does)."""
    layout = flushed(request, request.param)
    outcome = run(layout.url, tmp_path_factory.mktemp(f"matrix-{request.param}"), keys)
    print(f"\nthe matrix on {request.param}: {outcome.times}")
    yield outcome


def sub_of(outcome: Outcome, number: int, concurrency: int) -> Sub:
    return next(s for s in outcome.subs if (s.cell.number, s.concurrency) == (number, concurrency))


def cases() -> list:
    """Every cell at every concurrency (a defect the matrix finds is mended, never
    marked: docs/tests.md)."""
    return [pytest.param(cell.number, c, id=f"{cell.id}-c{c}")
            for cell in CELLS for c in CONCURRENCIES]  # fmt: skip


@pytest.mark.parametrize(("number", "concurrency"), cases())
def test_a_cell_gets_what_its_features_promise(matrix: Outcome, number: int, concurrency: int):
    found = problems(sub_of(matrix, number, concurrency), matrix)
    assert not found, "\n".join(found)


@pytest.mark.parametrize(("number", "concurrency"), cases())
def test_a_cell_keeps_each_key_in_order_and_in_one_delivery_at_once(
    matrix: Outcome, number: int, concurrency: int
):
    found = problems(sub_of(matrix, number, concurrency), matrix, ordering=True)
    assert not found, "\n".join(found)


def test_the_bus_counts_what_coalescing_merged_and_logs_no_error(matrix: Outcome):
    assert coalescing_problems(matrix) == []
    assert "Traceback" not in matrix.logs
    assert matrix.unsettled == []


def test_the_cells_cover_every_pair_of_feature_values():
    rows = [{d: getattr(cell, d) for d in DIMENSIONS} for cell in CELLS]
    assert missing_pairs(rows, DIMENSIONS) == []
    assert rows == pairwise(DIMENSIONS)  # the same cells every run
    assert len(CELLS) <= 22, len(CELLS)  # 15 at least: 5 routes x 3 of auth or transform
    tiny = {"a": (1, 2), "b": ("x", "y", "z"), "c": (True, False)}
    assert missing_pairs(pairwise(tiny), tiny) == []
    assert missing_pairs([{"a": 1, "b": "x", "c": True}], tiny) != []
