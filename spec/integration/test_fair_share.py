"""One client's flood against another's few events, with real processes under a small
BUSBAR_REDIS_MAX_MEM (issue 23 item 4: a flood at a subscriber that was down made
Autodrop drop all 200 events queued for a healthy client). The flooded subscriber is
shed, counted and named; the healthy one, within its share, loses nothing and gets every
event; publishing never stops."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from redis.cluster import RedisCluster

from spec.conftest import ROOT_KEY
from spec.integration.bus import bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving
from spec.integration.test_delivery import fullest_node
from spec.view import counter

MIB = 1024 * 1024
FLOOD = "flood-token-4f1c9a"  # the clients' tokens: never in a log line or a label
CALM = "calm-token-77b2e0"


def test_a_flood_is_shed_and_a_subscriber_within_its_share_loses_nothing(
    redis_url: str, redis_client, tmp_path: Path
) -> None:
    used = fullest_node(redis_client)
    # the bus's own overhead (scripts, Lua, jobs) takes about 1.2 MiB of the 4 it is given
    budget = {"BUSBAR_REDIS_MAX_MEM": str(used + 4 * MIB), "BUSBAR_REDIS_MIN_FREE": str(MIB // 2),
              "BUSBAR_AUTODROP_INTERVAL": "1", "BUSBAR_MAX_EVENT_DATA": "1024"}  # fmt: skip
    with serving() as sub, bus(redis_url, tmp_path, **budget) as b:
        b.client("pub")
        for name, token in (("flood-service", FLOOD), ("calm-service", CALM)):
            made = b.call("POST", "/api_tokens", ROOT_KEY, {"name": name, "token": token})
            assert made.status_code == 201, made.text
        b.subscribe(FLOOD, "http://127.0.0.1:9/down", ["orders"], max=100, timeout=60_000)
        # 200 events waiting in one open batch (full at 1,000, due in an hour)
        b.subscribe(CALM, sub.url, ["invoices"], max=1000, timeout=3_600_000)
        b.publish("pub", "invoices", events(200, 100_000))
        padding = "x" * 500
        for start in range(0, 8000, 400):  # about 4.5 MB more than fits: all 204
            b.publish("pub", "orders", [
                {"type": "create", "url": f"https://o.test/{i}", "data": {"p": padding}}
                for i in range(start, start + 400)
            ])  # fmt: skip
        try:
            wait_until(
                lambda: (
                    counter(redis_client, b.keys, "events.autodropped") > 0
                    and fullest_node(redis_client) < used + 4 * MIB
                ),
                30,
                "Autodrop to bring memory under the budget",
            )
        except AssertionError as exc:  # seen once in a loaded fresh clone: say where it stood
            raise AssertionError(
                f"{exc}: {memory(redis_client, used)}, autodropped "
                f"{counter(redis_client, b.keys, 'events.autodropped')}, flood queued "
                f"{b.subscription(FLOOD)['events']['queued']}; "
                f"autodrop lines {autodrop_lines(tmp_path)[-6:]}"
            ) from None
        # Autodrop runs every second: read the subscriptions, the counter and /metrics
        # between two runs of it, so that all three are of the same moment
        seen: list = []

        def still() -> bool:
            dropped = counter(redis_client, b.keys, "events.autodropped")
            read = (b.subscription(FLOOD), b.subscription(CALM), dropped,
                    b.call("GET", "/metrics", ROOT_KEY).text)  # fmt: skip
            seen[:] = read
            return counter(redis_client, b.keys, "events.autodropped") == dropped

        wait_until(still, 30, "a moment between two Autodrop runs")
        flood, calm, dropped, text = seen
        # each Autodrop run's lines: which node it judged short, and what it dropped there
        # (a failure once read 200 short here, the calm subscriber's 200: a last resort?)
        runs = autodrop_lines(tmp_path)
        assert flood["dropped"]["autodropped"] == dropped > 0, (calm["dropped"], runs)
        assert flood["events"]["queued"] + dropped == 8000  # queued or counted, never lost
        assert calm["dropped"]["autodropped"] == 0 and calm["events"]["queued"] == 200

        assert sample(text, "busbar_subscriber_events_dropped_total",
                      subscriber="flood-service", reason="autodropped") == dropped  # fmt: skip
        logs = "".join(p.read_text() for p in tmp_path.glob("worker*.log"))
        assert "events of flood-service shed: over its share" in logs
        assert FLOOD not in logs + text and CALM not in logs + text

        # the healthy subscriber's batch fills up and goes: every one of its events
        b.publish("pub", "invoices", events(800, 100_200))
        got = sub.wait_for(1000)
    assert [e["data"]["i"] for e in got] == list(range(100_000, 101_000))


def autodrop_lines(work: Path) -> list[str]:
    """Each Autodrop run's lines in the workers' logs."""
    return [line for p in work.glob("worker*.log") for line in p.read_text().splitlines()
            if "autodrop" in line]  # fmt: skip


def memory(client, used: int) -> str:
    """Where the fullest node's memory went, its use against the budget's base (`used`)."""
    if isinstance(client, RedisCluster):
        found = client.info("memory", target_nodes=RedisCluster.PRIMARIES).values()
        info = max(found, key=lambda node: int(node["used_memory"]))
    else:
        info = client.info("memory")
    parts = ("used_memory_dataset", "used_memory_scripts", "mem_clients_normal")
    listed = ", ".join(f"{k} {int(info.get(k, 0)):,}" for k in parts)
    return f"used_memory {int(info['used_memory']) - used:+,} over the base; {listed}"


def sample(text: str, name: str, **labels: str) -> float:
    """One sample of GET /metrics, read with prometheus_client's own parser."""
    (value,) = [
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and s.labels == labels
    ]
    return value
