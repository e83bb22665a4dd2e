"""`busbar spark replay`'s run (spark/replay.py's `run_replay`, what the command runs once
its arguments are parsed) in this test process, on the suite's one SparkSession and a
real Redis, over a lake the ingest made from delivery log entries: what a dry run prints
and queues (nothing), a selection that finds nothing, the same command again (it
resumes at its end and queues nothing more), and the listing, newest first. The command
as a process, over a lake of real deliveries, is spec/integration/test_spark_replay.py;
these checks were there, each a Spark start of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.models.tokens import TokenStore
from app.services.replay import Replays
from spark.cli import parser
from spark.ingest import ingest
from spark.replay import run_replay
from spec.app.delivery.delivery_bench import Bench
from spec.spark.logdata import LogWriter

pytestmark = pytest.mark.jvm


class Unstoppable:
    """The run's stop request as the command arms it on SIGINT/SIGTERM; in a test
    process the signals stay pytest's, and nothing asks the run to stop."""

    requested = False

    def arm(self) -> None:
        return None


@pytest.fixture
def lake(tmp_path: Path, redis_url: str, redis_client, spark) -> str:
    """Six delivered events of `widgets` (t = 1000..1005 ms) ingested into a lake."""
    log = LogWriter(redis_client)
    for partition in range(3):
        log.batch(partition, events=2)
    result = ingest(tmp_path / "lake", tmp_path / "checkpoint", redis_url, spark=spark)
    assert result.tables["events"].rows == 6
    return str(tmp_path / "lake")


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    """The subscriber `shop`, routing `widgets`, with no worker: what is queued stays."""
    found = Bench(redis_client, keys, scripts)
    TokenStore(redis_client, keys).create("shop", "sub")
    found.subscribe("http://127.0.0.1:9/never", ["widgets"], max=2, timeout=0)
    return found


def replay(settings, *args: str) -> int:
    return run_replay(parser().parse_args(["replay", *args]), settings, Unstoppable())


def test_a_dry_run_prints_what_it_selects_and_queues_nothing(
    lake: str, bench: Bench, settings, redis_client, keys, scripts, capsys
):  # fmt: skip
    selection = ["--lake", lake, "--topic", "widgets", "--since", "1001", "--until", "1004"]
    assert replay(settings, *selection, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "busbar spark replay: 3 events selected" in out
    assert "widgets 1970-01-01: 3 events" in out
    assert "first: widgets update https://example.com/widgets/1 t=1001" in out
    assert "last: widgets update https://example.com/widgets/3 t=1003" in out
    replays = Replays(redis_client, keys, scripts)
    assert replays.queued_for(replays.target("shop")) == 0


def test_the_same_command_again_resumes_at_its_end_and_queues_nothing_more(
    lake: str, bench: Bench, settings, redis_client, keys, scripts, capsys
):  # fmt: skip
    replays = Replays(redis_client, keys, scripts)
    selection = ["--lake", lake, "--topic", "widgets", "--since", "1001", "--until", "1004"]
    assert replay(settings, *selection, "--to", "shop") == 0
    assert "started at 0 of 3" in capsys.readouterr().out
    assert replays.queued_for(replays.target("shop")) == 3
    assert replay(settings, *selection, "--to", "shop") == 0
    out = capsys.readouterr().out
    assert "resumed at 3 of 3" in out and "0 events queued to shop" in out
    assert replays.queued_for(replays.target("shop")) == 3
    assert replay(settings, "--lake", lake, "--topic", "widgets", "--to", "shop",
                  "--id", "rpl_newer") == 0  # fmt: skip
    listed = [(r["id"], r["state"], r["position"], r["selected"]) for r in replays.listing()]
    first = listed[-1][0]
    assert listed == [("rpl_newer", "done", 6, 6), (first, "done", 3, 3)]  # newest first


def test_a_selection_that_finds_nothing_says_so_and_queues_nothing(
    lake: str, bench: Bench, settings, redis_client, keys, scripts, capsys
):  # fmt: skip
    selection = ["--lake", lake, "--topic", "widgets", "--since", "2030-01-01", "--to", "shop"]
    assert replay(settings, *selection) == 0
    assert "nothing selected in" in capsys.readouterr().out
    replays = Replays(redis_client, keys, scripts)
    assert replays.queued_for(replays.target("shop")) == 0
