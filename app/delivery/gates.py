"""Every origin's gate in one worker process, and the limits learnt for origins idle now.

A gate (app/delivery/gate.py) lives while its origin has connections open or deliveries
waiting; its limit outlives it, up to REMEMBERED_LIMITS origins, so a busy origin's next
burst starts where its last ended instead of at BUSBAR_ORIGIN_CONNECTIONS again. What
the worker reports of its origins (GET /origins, /metrics) is read from here.
"""

from __future__ import annotations

import time
from collections.abc import ItemsView

from app.delivery.dialer import Origin
from app.delivery.gate import Gate, Limits
from app.delivery.origin_limit import OriginLimit
from app.services.origin_limits import OriginRow

REMEMBERED_LIMITS = 10_000  # origins whose learnt limit is kept while idle, at most


class Gates:
    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._gates: dict[Origin, Gate] = {}
        self._learnt: dict[Origin, OriginLimit] = {}

    def of(self, origin: Origin) -> Gate:
        """The origin's gate, made with its learnt limit (or a new one) if it has none."""
        gate = self._gates.get(origin)
        if gate is None:
            limit = self._learnt.get(origin)
            if limit is None:
                if len(self._learnt) >= REMEMBERED_LIMITS:
                    self._forget_idle()
                limit = self._learnt[origin] = self._limits.start()
                limit.changed_at = time.monotonic()
            gate = self._gates[origin] = Gate(limit)
        return gate

    def get(self, origin: Origin) -> Gate | None:
        return self._gates.get(origin)

    def items(self) -> ItemsView[Origin, Gate]:
        return self._gates.items()

    def drop_idle(self, origin: Origin, gate: Gate) -> None:
        """Nothing open or waiting at the origin: its gate goes (its limit is kept)."""
        if gate.idle() and self._gates.get(origin) is gate:
            del self._gates[origin]

    def _forget_idle(self) -> None:
        """The learnt limits of origins with no gate (nothing open, nobody waiting)."""
        self._learnt = {o: limit for o, limit in self._learnt.items() if o in self._gates}

    def report(self, most: int) -> list[OriginRow]:
        """The `most` busiest origins with connections open or deliveries waiting, as
        GET /metrics and the console show them (app/services/origin_limits.py)."""
        now = time.monotonic()
        busiest = sorted(self._gates.items(), key=lambda g: -(g[1].open + len(g[1].waiters)))
        return [
            OriginRow(
                f"{'https' if o.tls else 'http'}://{o.host}:{o.port}", gate.limit.connections,
                gate.limit.ceiling, gate.open, gate.connecting, len(gate.waiters),
                round(gate.limit.round_s * 1000, 1), gate.limit.reason,
                int((now - gate.limit.changed_at) * 1000) if gate.limit.changed_at else 0,
            )
            for o, gate in busiest[:most]
        ]  # fmt: skip
