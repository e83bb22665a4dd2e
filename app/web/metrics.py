"""GET /metrics: the Prometheus text format, written by prometheus_client.

The library does the exposition (escaping, number formatting, histogram layout) from a
custom collector over the snapshot app/services/metrics.py takes from Redis: values
come out exact (10485760 stays 10485760, not 1.04858e+07), and a test reads the page
back with prometheus_client's own parser.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from flask import Blueprint, Response
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from app.services import metrics
from app.web.auth import allow
from app.web.context import web_context
from app.web.turns import Turns, collections_held, offloaded

# prometheus_client leaves floatToGoString unannotated: the same function, typed (a
# bucket's bound as Prometheus writes it, "+Inf" for the last)
go_float: Callable[[float], str] = floatToGoString

blueprint = Blueprint("metrics", __name__)
FAMILIES = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily}


def prometheus_name(name: str) -> str:
    """`events.published` -> `busbar_events_published` (counters gain `_total` on output)."""
    return "busbar_" + name.replace(".", "_")


class SnapshotCollector(Collector):
    def __init__(self, snapshot: metrics.Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        for m in self.snapshot.metrics:
            label_names = [k for k, _ in next(iter(m.samples), ())]
            family = FAMILIES[m.kind](prometheus_name(m.name), m.help, labels=label_names)
            for labels, value in m.samples.items():
                family.add_metric([v for _, v in labels], value)
            yield family
        latency = self.snapshot.latency
        if latency is not None:
            buckets = [(go_float(bound), count) for bound, count in latency.buckets]
            name = prometheus_name(latency.name)
            yield HistogramMetricFamily(name, latency.help, buckets, sum_value=latency.total)


def exposition(snapshot: metrics.Snapshot) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return generate_latest(registry)


@blueprint.get("/metrics")
@allow("root")
def prometheus() -> Response:
    """Beside thousands of subscribers a page takes a web process some 0.4 s of CPU: the
    reading takes turns with the requests beside it, and the writing, which is
    prometheus_client's and cannot be cut, runs on a thread of its own
    (app/web/turns.py)."""
    ctx = web_context()
    with collections_held():
        snapshot = metrics.collect(ctx.redis, ctx.keys, ctx.settings, turn=Turns().take)
        body = offloaded(lambda: exposition(snapshot))
    return Response(body, content_type=CONTENT_TYPE_PLAIN_0_0_4)
