"""Deliveries parked at a busy origin: waiting their turn for a connection without a slot.

A slot whose delivery must wait in line for its origin (app/delivery/gate.py) used to
wait there holding the slot: ten thousand deliveries to one gateway held every slot of
the worker, starved the subscribers of every other origin, and were held back and begun
again every wait (7.5 s) until their turn came, a script and a fail each time round and
the line's order lost. Now such a delivery parks: its slot hands its place to a new slot
(a new holder name, its own pending lists), which goes on taking jobs, while the parked
one waits in its origin's line, in the order the deliveries became ready, for as long as
its lease allows (half the scrub window from its begin: request.check_lease), then sends
and settles like any other and ends. Waiting costs a coroutine and a place in a line: no
script, no slot, no CPU that grows with the line.

At most as many deliveries park as there are slots (BUSBAR_DELIVERY_CONCURRENCY); past
that, a delivery waits holding its slot as before (gate.py's own rules, held back when
its turn is too far). A parked delivery keeps its job in its own holder's pending list,
so a worker that dies with deliveries parked gives them back like any in flight.

The origin learns a delivery may park through PARKING, the running slot's Parker: the
wait is five calls below the slot (Sender.post, CallbackClient.connection,
Origins.connection), and only the slot's task sets it, so a token fetch or a test call
made outside a slot never parks.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol


class Parker(Protocol):
    def park(self) -> bool:
        """Free the slot, the delivery waiting on without it: False when the lot is full
        (the delivery then waits holding its slot)."""


PARKING: ContextVar[Parker | None] = ContextVar("busbar_parking", default=None)


class Lot:
    """How many deliveries are parked, at most `most`, and the holder names (slot
    numbers past the first BUSBAR_DELIVERY_CONCURRENCY) that slots made for parked ones
    gave back when they ended: reused, so the pending index does not grow a name a park."""

    def __init__(self, most: int, first: int) -> None:
        self.most = most
        self.parked = 0
        self._next = first
        self._free: list[tuple[int, bool]] = []  # (number, whether its lists may hold jobs)

    def enter(self) -> bool:
        if self.parked >= self.most:
            return False
        self.parked += 1
        return True

    def name(self) -> tuple[int, bool]:
        """A slot number for the slot that takes a parked one's place, and whether its
        pending lists may still hold jobs (then it gives them back before it takes)."""
        if self._free:
            return self._free.pop()
        self._next += 1
        return self._next - 1, False

    def leave(self, number: int, dirty: bool) -> None:
        """A parked delivery's slot ended: one fewer parked, its name free again."""
        self.parked -= 1
        self._free.append((number, dirty))
