"""The slow lane's share of a core (app/delivery/cpu_budget.py) on a clock the test
moves: what a batch may take, when one overdrawn may run again, and that over any
stretch of time the lane takes no more than its share plus one overdraft."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.delivery.cpu_budget import SHORTEST_WAIT_MS, CpuBudget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_full_budget_lets_a_batch_take_one_bound_and_no_more() -> None:
    clock = Clock()
    budget = CpuBudget(0.02, 0.05, clock)
    assert budget.wait_ms() == 0 and budget.left_s() == 0.05
    clock.now += 3600  # it never fills past one bound, however long it rests
    assert budget.left_s() == 0.05


def test_an_overdrawn_budget_waits_until_it_is_back_above_nothing() -> None:
    clock = Clock()
    budget = CpuBudget(0.02, 0.05, clock)
    budget.spend(0.06)  # a batch of one evaluation run past what was left
    assert budget.left_s() == 0.0
    # 0.01 s overdrawn at 0.02 a second: half a second
    assert 500 <= budget.wait_ms() <= 502
    clock.now += 0.4
    assert 100 <= budget.wait_ms() <= 102
    clock.now += 0.11
    assert budget.wait_ms() == 0 and 0 < budget.left_s() < 0.001


def test_a_wait_is_never_shorter_than_the_shortest() -> None:
    clock = Clock()
    budget = CpuBudget(10.0, 0.05, clock)  # refills in milliseconds
    budget.spend(0.051)
    assert budget.wait_ms() == SHORTEST_WAIT_MS


@given(st.lists(st.tuples(st.floats(0, 2), st.floats(0, 0.2)), min_size=1, max_size=60))
def test_over_any_run_the_lane_takes_its_share_and_one_overdraft_at_most(
    steps: list[tuple[float, float]],
) -> None:
    """Batches run only when the budget says so, each taking what it takes (up to
    four bounds): the CPU they took in all is at most the share over the time passed,
    plus the full budget it began with, plus the last batch's overdraft."""
    clock = Clock()
    per_s, most = 0.02, 0.05
    budget = CpuBudget(per_s, most, clock)
    began, taken, largest = clock.now, 0.0, 0.0
    for pause, cost in steps:
        clock.now += pause
        if budget.wait_ms() == 0:
            budget.spend(cost)
            taken += cost
            largest = max(largest, cost)
    assert taken <= per_s * (clock.now - began) + most + largest + 1e-9
