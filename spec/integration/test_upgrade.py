"""A rolling upgrade, and its rollback, tried as an orchestrator does one: the previous
release's web and worker (its commit, named in CHANGELOG.md's Upgrading note, taken
from this repository's history) serve a bus under load, then are replaced one at a
time by this tree's, on one Redis and on a cluster; and the other way round.

Under a publisher that never stops: subscribers with ordering keys at `concurrency`
8, one at concurrency 1 with a write-only header (sealed by the first release, sent by
either) whose refused events go to the dead letters (made by the first release,
replayed through the second), and one with a content filter, paused through the first
release and resumed through the second; the topic's events under a schema put through
the first release and still checked by the second. Checked as a user would: every
acknowledged publish delivered, each key in publish order and never in two deliveries
at once, concurrency 1 never two at once, and all of it within a bounded time of the
last publish (docs/operating.md, Releases and upgrades)."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import tarfile
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

import pytest

from app.release import LAYOUT, version
from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, web_env
from spec.integration.faults import Publisher
from spec.integration.processes import free_port, running, wait_until, web_ready
from spec.integration.subscriber import Received, Subscriber, serving
from spec.integration.test_ordering_keys import KeyWatch

ROOT = Path(__file__).resolve().parents[2]
KEYS = 20  # ordering keys the events are spread over
SETTLE_S = 90  # everything acknowledged delivered within this of the last publish
QUICK = {  # retries and dead letters in seconds, not minutes
    "BUSBAR_ALLOW_HTTP": "1",
    "BUSBAR_WEB_WORKERS": "1",
    "BUSBAR_RETRY_FIRST_MS": "200",
    "BUSBAR_MAX_BACKOFF_MS": "500",
}


def previous_release() -> tuple[str, str]:
    """(version, commit) of the release this one upgrades from, as CHANGELOG.md's
    Upgrading note for this version names it: `**From 0.1.0 (commit ec7cb31).**`."""
    text = (ROOT / "CHANGELOG.md").read_text()
    section = text.split(f"## [{version()}]", 1)[1].split("\n## [", 1)[0]
    found = re.search(r"\*\*From (\S+) \(commit ([0-9a-f]{7,40})\)", section)
    assert found, f"CHANGELOG.md's {version()} names no release to upgrade from"
    return found.group(1), found.group(2)


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's tree, from git (no worktree: nothing registered)."""
    _, commit = previous_release()
    archived = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, timeout=120
    )
    if archived.returncode != 0:
        pytest.fail(
            f"the rolling upgrade test needs commit {commit} from this repository's history "
            f"(a shallow clone lacks it: git fetch --unshallow): {archived.stderr.decode()}"
        )
    where = tmp_path_factory.mktemp("previous-release")
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
        tar.extractall(where, filter="data")
    return where


class Refusing:
    """Concurrency 1's subscriber: answers 500 to a batch holding an event whose i ends
    in 07 until mended (the batch goes to the dead letters whole)."""

    def __init__(self) -> None:
        self.mended = False

    def __call__(self, request: Received) -> tuple[int, float]:
        if not self.mended and any(e["data"]["i"] % 100 == 7 for e in request.events):
            return 500, 0.0
        return 200, 0.01


def delivered(sub: Subscriber) -> list[int]:
    return [e["data"]["i"] for e in sub.delivered]


def out_of_order(events: list[dict]) -> list[str]:
    """Keys whose first deliveries are not in publish order (a batch sent again after
    a worker stopped may repeat: only first arrivals count)."""
    seen: set[int] = set()
    by_key: dict[str, list[int]] = defaultdict(list)
    for e in events:
        i = e["data"]["i"]
        if i not in seen:
            seen.add(i)
            by_key[KeyWatch.key(e)].append(i)
    return [k for k, got in by_key.items() if got != sorted(got)]


def start_web(
    stack: ExitStack, redis_url: str, tree: Path | None, log: Path
) -> tuple[Bus, subprocess.Popen]:
    """A web of `tree` (None: this one), and a Bus to start that tree's workers from."""
    port = free_port()
    env = web_env(redis_url, port, **QUICK)
    process = stack.enter_context(running(["web"], env, cwd=tree, log=log / "web.log"))
    wait_until(lambda: web_ready(log / "web.log", port), what=f"the web of {log.name}")
    return Bus(f"http://127.0.0.1:{port}", env, log, stack, tree=tree), process


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0


def roll(redis_url: str, tmp_path: Path, first: Path | None, second: Path | None) -> None:
    """First's web and worker under load, replaced by second's one at a time."""
    watch, refusing = KeyWatch(0.05), Refusing()
    logs = {name: tmp_path / name for name in ("first", "second")}
    for where in logs.values():
        where.mkdir()
    with (
        serving(Subscriber(responder=watch)) as keyed,
        serving(Subscriber(responder=refusing)) as single,
        serving() as paused,
        ExitStack() as stack,
    ):
        old, old_web = start_web(stack, redis_url, first, logs["first"])
        health = old.http.get(f"{old.base}/health", timeout=10).json()
        assert ("layout" in health) == (first is None)  # the release it says it is
        for name in ("pub", "keyed", "single", "paused"):
            old.client(name)
        old.subscribe("keyed", keyed.url, ["orders"], max=5, timeout=0, concurrency=8)
        secret = {"X-Api-Key": {"value": "sk-upgrade", "secret": True}}  # sealed by one
        old.subscribe("single", single.url, ["orders"], max=10, timeout=0, max_attempts=2,
                      headers=secret)  # fmt: skip
        over = {"topic": "orders", "filter": {"data.i": {"$gt": 50}}}  # matched by both
        old.subscribe("paused", paused.url, [over], max=50, timeout=0)
        schema = {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]}
        assert old.call("PUT", "/topics/orders/schemas/update", "pub", schema).ok
        assert old.call("POST", "/subscriber/pause", "paused").ok
        old_worker = old.start_worker()
        # about 100 events a second, each of KEYS ordering keys
        publisher = stack.enter_context(
            Publisher(old.base, "pub", "orders", chunk=10, pause=0.1, keys=KEYS)
        )
        time.sleep(3)
        new, new_web = start_web(stack, redis_url, second, logs["second"])
        publisher.move_to(new.base)  # the load balancer moves over, then the old web goes
        stop(old_web)
        time.sleep(1)
        new_worker = new.start_worker()
        stop(old_worker)
        time.sleep(3)
        publisher.stop()
        acked = set(publisher.acked)
        assert len(acked) >= 200, (len(acked), publisher.statuses)
        root = (ROOT_KEY, "")
        assert new.http.post(f"{new.base}/subscribers/paused/resume", auth=root).ok

        def drained(name: str) -> bool:
            (entry,) = new.call("GET", "/subscriptions", name).json()
            return entry["events"]["queued"] == 0 and entry["in_flight"] == 0

        wait_until(lambda: acked <= set(delivered(keyed)), timeout=SETTLE_S, what="keyed")
        wait_until(lambda: drained("single"), timeout=SETTLE_S, what="single settled")
        dead = new.call("GET", "/subscriber/deadletters", "single").json()
        assert dead, "nothing refused went to the dead letters"
        refusing.mended = True
        assert new.call("POST", "/subscriber/deadletters/replay", "single").status_code == 202
        wait_until(lambda: acked <= set(delivered(single)), timeout=SETTLE_S, what="single")
        over_50 = {i for i in acked if i > 50}
        wait_until(lambda: over_50 <= set(delivered(paused)), timeout=SETTLE_S, what="paused")
        bad = {"type": "update", "url": "https://o.test/0", "data": {"i": "one"}}
        assert new.call("POST", "/topics/orders", "pub", bad).status_code == 400  # the schema
        assert new.http.get(f"{new.base}/health", timeout=10).json().get("layout") == (
            LAYOUT if second is None else None
        )
        stop(new_worker)
        stop(new_web)
    assert watch.overlaps == []  # never one key in two deliveries at once
    assert watch.most >= 2, watch.most  # concurrency was in play
    assert out_of_order(keyed.delivered) == []
    assert out_of_order(paused.delivered) == []
    assert single.max_in_flight == 1
    assert {r.headers.get("X-Api-Key") for r in single.received} == {"sk-upgrade"}
    assert min(delivered(paused)) > 50  # the filter held throughout


def test_a_rolling_upgrade_from_the_previous_release_loses_nothing(
    redis_url: str, redis_client, tmp_path: Path, previous: Path
):
    roll(redis_url, tmp_path, previous, None)


def test_a_rollback_to_the_previous_release_loses_nothing(
    redis_url: str, redis_client, tmp_path: Path, previous: Path
):
    roll(redis_url, tmp_path, None, previous)
