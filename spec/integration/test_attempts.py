"""The attempt log, from outside: real web and worker processes, real subscribers that
succeed, fail with 500, time out, refuse the connection and ask to wait. Each client
reads its own attempts (root any subscriber's by name), with the fields an operator
needs and no credential in them; filters and paging hold as the log grows.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus, events, fast_scrub
from spec.integration.processes import wait_until
from spec.integration.subscriber import Subscriber, serving

ENV = {
    "BUSBAR_TIMEOUT": "1",
    "BUSBAR_CONNECT_TIMEOUT": "1",
    "BUSBAR_RETRY_FIRST_MS": "300",
    "BUSBAR_FAILING_SHARE": "100",
}
# name -> (token, how its subscriber answers: status, delay, body)
CLIENTS = {
    "ok": ("tok-ok-9f2c", (200, 0.0, b"thanks")),
    "broken": ("tok-broken-41aa", (500, 0.0, b'{"error": "database down"}')),
    "slow": ("tok-slow-77d0", (200, 2.5, b"")),
}


def closed_port() -> int:
    """A port nothing listens on: a connection there is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client(b: Bus, name: str, token: str) -> None:
    created = b.call("POST", "/api_tokens", ROOT_KEY, {"name": name, "token": token})
    assert created.status_code == 201, created.text


def attempts(b: Bus, token: str, **query: object) -> dict:
    answer = b.call(
        "GET", "/subscriber/attempts?" + "&".join(f"{k}={v}" for k, v in query.items()), token
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_every_attempt_is_on_record_with_what_an_operator_needs(
    redis_url: str, tmp_path: Path
) -> None:
    subs = {
        name: Subscriber(responder=lambda _, s=how[0], d=how[1]: (s, d))
        for name, (_, how) in CLIENTS.items()
    }
    for name, (_, how) in CLIENTS.items():
        subs[name].body_out = how[2]
    asking = Subscriber(responder=lambda _: (429, 0.0), headers_out={"Retry-After": "7"})
    with ExitStack() as stack:
        for sub in (*subs.values(), asking):
            stack.enter_context(serving(sub))
        b = stack.enter_context(bus(redis_url, tmp_path, **ENV))
        b.client("pub")
        for name, (token, _) in CLIENTS.items():
            client(b, name, token)
            b.subscribe(token, subs[name].url, ["orders"], max=2, timeout=0)
        client(b, "gone", "tok-gone-0b1e")
        b.subscribe(
            "tok-gone-0b1e", f"http://127.0.0.1:{closed_port()}/in", ["orders"], max=2, timeout=0
        )
        client(b, "asking", "tok-asking-5c3d")
        b.subscribe("tok-asking-5c3d", asking.url, ["orders"], max=2, timeout=0)
        b.publish("pub", "orders", events(4))

        def logged(token: str, count: int) -> bool:
            return len(attempts(b, token)["attempts"]) >= count

        for token in (
            "tok-ok-9f2c",
            "tok-broken-41aa",
            "tok-slow-77d0",
            "tok-gone-0b1e",
            "tok-asking-5c3d",
        ):
            wait_until(lambda t=token: logged(t, 2), 30, f"two attempts of {token}")

        ok = attempts(b, "tok-ok-9f2c")["attempts"]
        assert [a["outcome"] for a in ok] == ["2xx", "2xx"]
        newest, oldest = ok
        assert newest["at"] >= oldest["at"] and newest["id"] != oldest["id"]
        assert {a["events"] for a in ok} == {2} and {a["lane"] for a in ok} == {10}  # no priority
        assert {a["attempt"] for a in ok} == {1}
        assert (newest["status"], newest["reason"], newest["body"]) == (200, None, "thanks")
        assert newest["worker"].count("/") == 1 and newest["duration_ms"] >= 0
        assert newest["retry_after_ms"] is None

        broken = attempts(b, "tok-broken-41aa")["attempts"]
        # the failing batch, one click away while queued: its events, in order, with ids
        head = b.call("GET", f"/subscriber/batches/{broken[0]['batch']}", "tok-broken-41aa")
        assert head.status_code == 200, head.text
        assert [e["url"] for e in head.json()["events"]] == ["https://o.test/0", "https://o.test/1"]
        assert head.json()["lane"] == 10 and all(e["id"] for e in head.json()["events"])
        by_name = f"/subscribers/broken/batches/{broken[0]['batch']}"
        assert b.call("GET", by_name, ROOT_KEY).json()["events"] == head.json()["events"]
        delivered = b.call("GET", f"/subscriber/batches/{ok[0]['batch']}", "tok-ok-9f2c")
        assert delivered.status_code == 404 and "lake" in delivered.json()["error"]
        assert b.call("GET", "/subscriber/batches/x1", "tok-ok-9f2c").status_code == 400
        assert b.call("GET", "/subscriber/batches/%C2%B2", "tok-ok-9f2c").status_code == 400
        assert {a["outcome"] for a in broken} == {"5xx"}
        assert broken[0]["body"] == '{"error": "database down"}' and broken[0]["status"] == 500
        same_batch = [a for a in broken if a["batch"] == broken[-1]["batch"]]
        assert [a["attempt"] for a in same_batch][-2:] == [2, 1]  # the retry, newest first

        slow = attempts(b, "tok-slow-77d0")["attempts"][0]
        assert (slow["outcome"], slow["status"], slow["reason"]) == ("timeout", None, "timeout")
        assert 900 <= slow["duration_ms"] < 2500

        gone = attempts(b, "tok-gone-0b1e")["attempts"][0]
        assert (gone["outcome"], gone["reason"]) == ("connection", "connection_refused")

        asked = attempts(b, "tok-asking-5c3d")["attempts"][0]
        assert (asked["outcome"], asked["status"], asked["retry_after_ms"]) == ("4xx", 429, 7000)

        # root reads any subscriber's, by name; nobody's token is in anything listed
        by_root = b.call("GET", "/subscribers/broken/attempts", ROOT_KEY).json()
        assert by_root["attempts"][: len(broken)] == broken[: len(by_root["attempts"])]
        for token, _ in CLIENTS.values():
            for listed in (by_root, attempts(b, token)):
                assert not any(t in str(listed) for t, _ in CLIENTS.values())

        # filters and paging: newest first, no entry twice or skipped, whatever is appended
        everything = attempts(b, "tok-broken-41aa", limit=1000)["attempts"]
        seen, cursor = [], None
        while True:
            page = attempts(b, "tok-broken-41aa", limit=2, **({"before": cursor} if cursor else {}))
            seen += page["attempts"]
            cursor = page["next"]
            if cursor is None:
                break
        assert [a["id"] for a in seen][: len(everything)] == [a["id"] for a in everything]
        assert attempts(b, "tok-broken-41aa", outcome="2xx")["attempts"] == []
        batch = everything[-1]["batch"]
        assert {a["batch"] for a in attempts(b, "tok-broken-41aa", batch=batch)["attempts"]} == {
            batch
        }
        middle = everything[len(everything) // 2]["at"]
        since = attempts(b, "tok-broken-41aa", since=middle)["attempts"]
        assert since and all(a["at"] >= middle for a in since)
        until = attempts(b, "tok-broken-41aa", until=middle)["attempts"]
        assert all(a["at"] < middle for a in until)


def test_a_malformed_query_is_a_400_naming_it(redis_url: str, tmp_path: Path) -> None:
    with bus(redis_url, tmp_path) as b:
        b.client("someone")
        for query, named in [
            ("outcome=7xx", "outcome"),
            ("limit=0", "limit"),
            ("limit=ten", "limit"),
            ("since=yesterday", "since"),
            ("before=nope", "before"),
            ("before=99999999999999999999-0", "before"),
            ("since=99999999999999999999", "since"),
            ("until=1700-01-01", "until"),
            ("colour=red", "colour"),
            # Unicode digits str.isdigit takes and int() refuses: each was a 500
            ("since=%C2%B2", "since"),
            ("limit=%C2%B2", "limit"),
            ("before=%C2%B2-%C2%B2", "before"),
        ]:
            answer = b.call("GET", f"/subscriber/attempts?{query}", "someone")
            assert answer.status_code == 400, query
            assert named in answer.json()["error"], answer.text
        first = b.call("GET", "/subscriber/attempts?before=0-0&until=0", "someone")
        assert first.json() == {"attempts": [], "next": None}  # nothing precedes the start
        missing = b.call("GET", "/subscribers/nobody/attempts", ROOT_KEY)
        assert missing.status_code == 404


def test_a_delivery_cut_short_by_a_dead_worker_is_on_record_as_abandoned(
    redis_url: str, tmp_path: Path
) -> None:
    first = threading.Event()

    def answer(_: object) -> tuple[int, float]:
        if first.is_set():
            return 200, 0.0
        first.set()
        return 200, 1.5  # the first request hangs until the worker is dead

    sub = Subscriber(responder=answer)
    with serving(sub), bus(redis_url, tmp_path, **fast_scrub(4000, 2)) as b:
        b.client("pub")
        client(b, "victim", "tok-victim-3e8a")
        b.subscribe("tok-victim-3e8a", sub.url, ["orders"], max=5, timeout=0)
        (worker,) = b.workers
        b.publish("pub", "orders", events(3))
        assert first.wait(30), "the first request"  # it hangs now: the worker waits on it
        worker.kill()
        worker.wait(10)
        b.start_worker()
        sub.wait_for(6, 30)  # the batch again, whole
        wait_until(lambda: len(attempts(b, "tok-victim-3e8a")["attempts"]) >= 2, 30, "both")
        done, cut = attempts(b, "tok-victim-3e8a")["attempts"][:2]
        assert (cut["outcome"], cut["reason"], cut["status"]) == ("abandoned", "abandoned", None)
        assert f".{worker.pid}." in cut["worker"] and cut["events"] == 3
        assert done["outcome"] == "2xx" and done["batch"] == cut["batch"]
        assert attempts(b, "tok-victim-3e8a", outcome="abandoned")["attempts"] == [cut]


def test_attempts_by_outcome_and_each_lanes_oldest_batch_are_in_the_listing_and_metrics(
    redis_url: str, tmp_path: Path
) -> None:
    sub = Subscriber(responder=lambda _: (503, 0.0))
    with serving(sub), bus(redis_url, tmp_path, **ENV) as b:
        b.client("pub")
        client(b, "lagging", "tok-lagging-6a1f")
        route = {"topic": "orders", "priority": 2}
        b.subscribe("tok-lagging-6a1f", sub.url, [route], max=1, timeout=0)
        before = int(time.time() * 1000)
        b.publish("pub", "orders", events(3))
        wait_until(lambda: len(attempts(b, "tok-lagging-6a1f")["attempts"]) >= 3, 30, "attempts")
        listed = b.subscription("tok-lagging-6a1f")
        logged = attempts(b, "tok-lagging-6a1f", limit=1000)["attempts"]
        assert set(listed["attempts"]) == {
            "2xx",
            "3xx",
            "4xx",
            "5xx",
            "timeout",
            "connection",
            "abandoned",
            "secret_unsealable",
        }
        assert listed["attempts"]["5xx"] >= len(logged) >= 3  # later ones may have come since
        assert sum(listed["attempts"].values()) == listed["attempts"]["5xx"]
        (lane,) = listed["lanes"]
        assert (lane["lane"], lane["events"]) == (2, 3)
        assert before - 1000 <= lane["oldest"] <= int(time.time() * 1000)
        metrics = b.call("GET", "/metrics", ROOT_KEY).text
        assert re.search(
            r'^busbar_subscriber_attempts_total\{outcome="5xx",subscriber="lagging"\} [1-9]',
            metrics,
            re.M,
        ), metrics
        assert "tok-lagging" not in metrics
