"""The destination matrix, end to end (spec/integration/destination_matrix.py): a
subscription's `destination`, of each kind, with every other feature a destination
takes, pairwise, each cell at `concurrency` 1 and 4, all on one bus per layout with a
real nats-server, RabbitMQ node and SQS API. Each test reads what one subscription met:
everything its route takes is in its broker as its transform shaped it, once (RabbitMQ
through an outage excepted), each key in order, the dead letters with the kind's reason
and their replay, the pause, the test call and the listing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spec.integration.destination_matrix import (
    CELLS,
    DIMENSIONS,
    DSub,
    Outcome,
    problems,
    run,
)
from spec.integration.layouts import flushed
from spec.integration.matrix import CONCURRENCIES, missing_pairs

# its own group: one process runs its cells, the bus and brokers once per layout, beside
# (not behind) the HTTP matrix's
pytestmark = [pytest.mark.xdist_group("destination_matrix"), pytest.mark.slow]


@pytest.fixture(scope="module", params=["single", "cluster"])
def outcome(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Outcome]:
    layout = flushed(request, request.param)
    yield run(layout.url, tmp_path_factory.mktemp(f"destinations-{request.param}"))


def sub_of(outcome: Outcome, number: int, concurrency: int) -> DSub:
    return next(s for s in outcome.subs
                if (s.dcell.number, s.concurrency) == (number, concurrency))  # fmt: skip


@pytest.mark.parametrize(
    ("number", "concurrency"),
    [pytest.param(c.number, k, id=f"{c.id}-c{k}") for c in CELLS for k in CONCURRENCIES],
)
def test_a_destination_cell_gets_what_its_features_promise(
    outcome: Outcome, number: int, concurrency: int
):
    found = problems(sub_of(outcome, number, concurrency), outcome)
    assert not found, "\n".join(found)


def test_the_destination_run_settled_and_logged_no_error(outcome: Outcome):
    assert outcome.late == []
    assert "Traceback" not in outcome.logs


def test_the_destination_cells_cover_every_pair():
    rows = [{"kind": c.kind, **{d: getattr(c.cell, d) for d in DIMENSIONS if d != "kind"}}
            for c in CELLS]  # fmt: skip
    assert missing_pairs(rows, DIMENSIONS) == []
    assert len(CELLS) <= 14, len(CELLS)
