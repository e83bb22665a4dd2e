"""`busbar spark replay` as a user runs it: publish to `busbar web`, deliver to A with
`busbar worker`, ingest the lake, then replay a time range of one topic to a new
subscriber B: the replay delivers exactly those events once in their original order with
their ids and their publisher's trace context, and a replay killed (-9) half way and run
again delivers the rest and no duplicate. Both on one Redis (`layout_free`, and
`single_node` for the kill): a replay queues its events into a Redis Cluster in
test_spark_cluster.py, whose bus runs on one, in order; ids and trace context are the
events' own fields, whatever the layout. What the
command prints for a dry run, a selection that finds nothing and a rerun is checked in
one test process on one SparkSession: spec/spark/test_replay_run.py."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spec.integration.bus import ROOT_KEY, bus
from spec.integration.processes import busbar_env, wait_until
from spec.integration.subscriber import serving
from spec.integration.test_destinations import add_stream, stored, subscribe
from spec.integration.test_spark_lake import ingest
from spec.nats_server import nats_server

pytest.importorskip("pyspark")
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
TRACE = f"00-{'ab' * 16}-{'cd' * 8}-01"  # the publisher's W3C traceparent


def replay(
    redis_url: str, *args: str, master: str = "local[2]"
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "busbar", "spark", "replay", "--master", master, *args]
    env = busbar_env(BUSBAR_REDIS_URL=redis_url)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def orders(n: int) -> list[dict]:
    return [
        {
            "type": "create",
            "url": f"https://o.test/{i}",
            "timestamp": T0 + i * 1000,
            "data": {"i": i},
            "key": f"k{i % 2}",  # the ordering key goes through the lake and back
        }
        for i in range(n)
    ]


def delivered_to_a(
    the_bus, a, redis_url: str, tmp_path: Path, published: list[dict], also: tuple[str, ...] = ()
) -> dict:
    """`a` subscribed to orders and users; the orders published (with the publisher's
    trace context) and one user event, delivered to `a` (and the orders to the
    subscribers `also`), then the lake ingested; the event ids `a` got, by url."""
    the_bus.client("pub"), the_bus.client("a"), the_bus.client("b")
    the_bus.subscribe("a", a.url, ["orders", "users"], max=4, timeout=0, event_ids=True)
    answer = the_bus.http.post(
        f"{the_bus.base}/topics/orders",
        json=published,
        auth=("pub", ""),
        headers={"traceparent": TRACE, "tracestate": "rojo=1"},
        timeout=10,
    )
    assert answer.status_code == 204, answer.text
    the_bus.publish("pub", "users", [{"type": "update", "url": "https://u.test/1"}])
    total = len(published) + 1
    a.wait_for(total)
    wait_until(lambda: the_bus.subscription("a")["events"]["sent"] == total, what="acks")
    for name in also:
        wait_until(lambda n=name: the_bus.subscription(n)["events"]["sent"] == len(published),
                   what=f"{name}'s acks")  # fmt: skip
    ingest(redis_url, tmp_path / "lake", tmp_path / "checkpoint")
    return {e["url"]: e["id"] for e in a.delivered}


@pytest.mark.jvm
@pytest.mark.layout_free  # a replay into a Redis Cluster: test_spark_cluster.py
@pytest.mark.timeout(600)  # Spark starts twice: slow on a busy machine
def test_a_time_range_of_one_topic_replayed_to_a_new_subscriber(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    """The selection takes what `c`, a subscription with a NATS destination, was
    delivered: the lake holds a destination's deliveries as it holds a callback's."""
    lake = tmp_path / "lake"
    with serving() as a, serving() as b, bus(redis_url, tmp_path) as the_bus, \
            nats_server(tmp_path) as broker:  # fmt: skip
        add_stream(broker)
        subscribe(the_bus, "c", {"type": "nats", "url": broker.url, "subject": "orders.{key}"},
                  timeout=0)  # fmt: skip
        ids = delivered_to_a(the_bus, a, redis_url, tmp_path, orders(6), also=("c",))
        assert len(stored(broker)) == 6
        the_bus.subscribe("b", b.url, ["orders"], max=2, timeout=0, event_ids=True)
        selection = ["--lake", str(lake), "--topic", "orders", "--from-subscriber", "c",
                     "--since", "2026-01-01T00:00:01Z", "--until", str(T0 + 4000)]  # fmt: skip
        # its dry run, a selection that finds nothing and a rerun: spec/spark/test_replay_run.py

        unrouted = replay(redis_url, "--lake", str(lake), "--topic", "users", "--to", "b")
        assert unrouted.returncode == 2 and unrouted.stdout.count("\n") <= 1, unrouted.stdout
        assert unrouted.stderr.strip() == (
            "busbar spark replay: subscriber 'b' does not route topic 'users': "
            "subscribe it, or give --lane N"
        )

        done = replay(redis_url, *selection, "--to", "b")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "started at 0 of 3" in done.stdout
        b.wait_for(3)
        urls = [f"https://o.test/{i}" for i in (1, 2, 3)]
        assert [e["url"] for e in b.delivered] == urls
        assert [e["id"] for e in b.delivered] == [ids[u] for u in urls]
        assert [e["key"] for e in b.delivered] == ["k1", "k0", "k1"]
        (replay_id,) = {r.headers.get("Busbar-Replay") for r in b.received}
        # the publisher's trace context went through the lake and came back with them
        assert {(e["traceparent"], e["tracestate"]) for e in b.delivered} == {(TRACE, "rojo=1")}
        assert {r.headers.get("traceparent") for r in b.received} == {TRACE}
        assert replay_id and replay_id.startswith("rpl_")
        time.sleep(0.5)
        assert len(b.delivered) == 3

        listed = the_bus.call("GET", "/replays", ROOT_KEY).json()
        shown = [(r["id"], r["target"], r["state"], r["position"], r["selected"]) for r in listed]
        assert shown == [(replay_id, "b", "done", 3, 3)]
        assert listed[0]["selection"]["topics"] == ["orders"]
        assert all("token" not in r for r in listed)  # the target's token is never listed


@pytest.mark.jvm
@pytest.mark.single_node  # the replay's queueing on a cluster: test_spark_cluster.py
@pytest.mark.timeout(600)  # Spark starts three times: slow on a busy machine
def test_a_replay_killed_half_way_and_run_again_delivers_the_rest_once_in_order(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    lake = tmp_path / "lake"
    with serving() as a, serving() as b, bus(redis_url, tmp_path) as the_bus:
        delivered_to_a(the_bus, a, redis_url, tmp_path, orders(6))
        the_bus.subscribe("b", b.url, ["orders"], max=2, timeout=0, event_ids=True)
        # kill -9 half way: no worker, so the window (2 events queued) holds the replay
        for worker in the_bus.workers:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0
        every = ["--lake", str(lake), "--topic", "orders", "--to", "b", "--id", "rpl_all"]
        command = [sys.executable, "-m", "busbar", "spark", "replay", "--master", "local[2]",
                   *every, "--step", "1", "--window", "2"]  # fmt: skip
        driver = subprocess.Popen(command, env=busbar_env(BUSBAR_REDIS_URL=redis_url),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            wait_until(lambda: the_bus.subscription("b")["events"]["queued"] == 2, 120,
                       "the replay to fill its window")  # fmt: skip
            time.sleep(0.5)
        finally:
            driver.kill()
            driver.wait()
        assert the_bus.subscription("b")["events"]["queued"] == 2
        the_bus.start_worker()
        rest = replay(redis_url, *every, "--step", "1", "--window", "2")
        assert rest.returncode == 0, rest.stderr[-2000:]
        assert "rpl_all to b: resumed at 2 of 6" in rest.stdout
        b.wait_for(6)
        time.sleep(0.5)
        replayed = [e["url"] for e in b.delivered]
        assert replayed == [f"https://o.test/{i}" for i in range(6)]  # once each, in order
        listed = the_bus.call("GET", "/replays", ROOT_KEY).json()
        shown = [(r["id"], r["target"], r["state"], r["position"], r["selected"]) for r in listed]
        assert shown == [("rpl_all", "b", "done", 6, 6)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "2026-01-02", "--until", "2026-01-01", "--to", "b"], "--until must be after"),
        (["--to", "nobody"], "no subscriber named 'nobody'"),
        (["--since", "yesterday", "--dry-run"], "'yesterday' is neither ISO 8601"),
    ],
)
def test_a_selection_that_cannot_be_is_one_line_and_exit_2(
    redis_url: str, tmp_path: Path, args: list[str], message: str
):
    (tmp_path / "lake" / "events").mkdir(parents=True)
    done = replay(redis_url, "--lake", str(tmp_path / "lake"), *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_no_lake_at_the_path_is_one_line_and_exit_2(redis_url: str, tmp_path: Path):
    done = replay(redis_url, "--lake", str(tmp_path / "none"), "--dry-run")
    assert done.returncode == 2
    none = tmp_path / "none"
    assert (
        done.stderr.strip() == f"busbar spark replay: no lake at {none} ({none}/events is missing)"
    )
