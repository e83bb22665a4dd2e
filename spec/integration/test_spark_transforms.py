"""Route transforms through the lake (docs/transforms.md, What is kept), as a user meets
them: `busbar web` and `busbar worker` deliver to a subscriber whose route transforms
its events and to one whose route does not; `busbar spark ingest` keeps, for each row,
the data the subscriber received (`data`) and, where a transform changed it, the data
as published (`source_data`); `busbar spark replay` queues the events as published, so
the target's own transform shapes them: replayed to the subscriber they first went to,
they are sent as they were; to a subscriber without a transform, as published.

On one Redis (`layout_free`): transforms are delivered on both layouts in
test_transforms.py, and the lake's ingest and a replay into a Redis Cluster run in
test_spark_cluster.py (whose bus runs on one); what this adds is the lake's columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spec.integration.bus import bus
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving
from spec.integration.test_spark_lake import ingest, lake_rows
from spec.integration.test_spark_replay import replay

pytest.importorskip("pyspark")
SHAPE = "{'text': 'Order ' & $string(data.i), 'who': data.who}"


@pytest.mark.jvm
@pytest.mark.layout_free
@pytest.mark.timeout(600)  # Spark starts three times: slow on a busy machine
def test_the_lake_keeps_what_was_sent_and_a_replay_sends_it_again_as_it_was(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    lake = tmp_path / "lake"
    with serving() as shaped, serving() as plain, serving() as fresh, \
            bus(redis_url, tmp_path) as b:  # fmt: skip
        for name in ("pub", "shaped", "plain", "fresh"):
            b.client(name)
        b.subscribe("shaped", shaped.url, [{"topic": "orders", "transform": SHAPE}],
                    max=4, timeout=0, event_ids=True)  # fmt: skip
        b.subscribe("plain", plain.url, ["orders"], max=4, timeout=0, event_ids=True)
        published = [
            {"type": "create", "url": f"https://o.test/{i}", "data": {"i": i, "who": "ann"}}
            for i in range(3)
        ]
        b.publish("pub", "orders", published)
        first = shaped.wait_for(3)
        plain.wait_for(3)
        wait_until(lambda: b.subscription("shaped")["events"]["sent"] == 3, what="acks")
        wait_until(lambda: b.subscription("plain")["events"]["sent"] == 3, what="acks")
        ingest(redis_url, lake, tmp_path / "checkpoint")

        rows = {(r["subscriber"], r["url"]): r for r in lake_rows(lake)}
        for e in first:  # what the subscriber received, byte for byte as JSON goes
            row = rows[("shaped", e["url"])]
            assert json.loads(row["data"]) == e["data"] and row["id"] == e["id"]
            assert json.loads(row["source_data"]) == {"i": int(e["url"][-1]), "who": "ann"}
            assert rows[("plain", e["url"])]["source_data"] is None
            assert rows[("plain", e["url"])]["id"] == e["id"]  # one event, two shapes

        b.subscribe("fresh", fresh.url, ["orders"], max=4, timeout=0, event_ids=True)
        selection = ["--lake", str(lake), "--from-subscriber", "shaped"]
        done = replay(redis_url, *selection, "--to", "fresh")
        assert done.returncode == 0, done.stderr[-2000:]
        got = fresh.wait_for(3)
        assert [e["data"] for e in got] == [e["data"] for e in published]  # as published

        again = replay(redis_url, *selection, "--to", "shaped", "--id", "rpl_again")
        assert again.returncode == 0, again.stderr[-2000:]
        resent = shaped.wait_for(6)[3:]
        assert [(e["id"], e["data"]) for e in resent] == [(e["id"], e["data"]) for e in first]
