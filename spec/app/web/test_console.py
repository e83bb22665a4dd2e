"""The console's page and files, and the API it added: /workers, /history, ?mine=true,
the operator fields of /subscriptions and root's dead letters by client name."""

from __future__ import annotations

import re
import time
from importlib import resources

import pytest
from flask.testing import FlaskClient

from app import codec
from app.web import console
from spec.app.delivery.delivery_bench import Bench
from spec.app.web.conftest import ROOT, basic, make_client, subscribe
from spec.integration.subscriber import Subscriber, serving


@pytest.fixture
def bench(redis_client, keys, scripts) -> Bench:
    return Bench(redis_client, keys, scripts, max_backoff_ms=60_000)


def test_the_page_allows_nothing_but_its_own_files(http: FlaskClient):
    response = http.get("/console")
    assert response.status_code == 200
    assert response.content_type == "text/html; charset=utf-8"
    csp = dict(
        d.strip().split(" ", 1) for d in response.headers["Content-Security-Policy"].split(";")
    )
    assert csp["default-src"] == csp["script-src"] == csp["style-src"] == "'self'"
    assert csp["frame-ancestors"] == "'none'" and csp["object-src"] == "'none'"
    assert "unsafe" not in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    html = response.get_data(as_text=True)
    assert re.findall(r"<script[^>]*>", html) == [
        '<script type="module" src="/console/console.js">'
    ]
    assert "</script>" in html and re.search(r"<script[^>]*>\s*\S+\s*</script>", html) is None
    assert not re.search(r"<style|\sstyle=|\son[a-z]+=|https?://", html)


def test_the_script_never_writes_html(http: FlaskClient):
    texts = []
    for name in console.SCRIPTS:
        script = http.get(f"/console/{name}")
        assert script.status_code == 200, name
        assert script.content_type.startswith("text/javascript")
        texts.append(script.get_data(as_text=True))
    text = "\n".join(texts)
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in text
    assert 'credentials: "omit"' in text and "sessionStorage" in text and "localStorage" not in text
    assert http.get("/console/console.css").content_type.startswith("text/css")


def test_every_module_the_script_imports_is_served(http: FlaskClient):
    """A module left out of SCRIPTS would be a 404 in the browser and a blank console."""
    folder = resources.files(console.__package__).joinpath("console_assets")
    on_disk = {f.name for f in folder.iterdir() if f.name.endswith(".js")}
    assert on_disk == set(console.SCRIPTS)
    for name in console.SCRIPTS:
        text = http.get(f"/console/{name}").get_data(as_text=True)
        for imported in re.findall(r'^import .* from "\./([\w.]+)";$', text, re.M):
            assert http.get(f"/console/{imported}").status_code == 200, (name, imported)


def test_only_the_console_files_are_served(http: FlaskClient):
    for path in ("/console/console.html", "/console/..%2Fconsole.py", "/console/x.js"):
        response = http.get(path)
        assert response.status_code == 404
        assert response.get_json()["error"]


def test_mine_lists_the_topics_a_client_publishes_or_takes(http: FlaskClient, pub, sub):
    other = make_client(http, "other")
    event = {"type": "create", "url": "https://o.test/1"}
    for headers, topic in ((pub, "orders"), (other, "invoices"), (sub, "returns")):
        assert http.post(f"/topics/{topic}", json=event, headers=headers).status_code == 204
    subscribe(http, sub, ["orders"])

    def names(headers: dict, query: str = "?mine=true") -> list[str]:
        return [t["name"] for t in http.get(f"/topics{query}", headers=headers).get_json()]

    assert names(sub) == ["orders", "returns"]
    assert names(pub) == ["orders"]
    assert names(sub, "") == names(ROOT) == names(ROOT, "?mine=false") == names(ROOT)
    assert names(ROOT) == ["invoices", "orders", "returns"]
    bad = http.get("/topics?mine=yes", headers=sub)
    assert bad.status_code == 400 and "mine" in bad.get_json()["error"]


def test_subscriptions_show_lanes_dead_letters_failures_and_backoff(
    http: FlaskClient, pub, sub, bench: Bench
):
    routes = [{"topic": "orders", "priority": 1, "types": ["delete"]}, {"topic": "orders"}]
    subscribe(http, sub, routes, max=2, timeout=0, max_attempts=1)
    events = [
        {"type": t, "url": f"https://o.test/{i}"}
        for i, t in enumerate(["delete"] * 3 + ["create"] * 2)
    ]
    published = int(time.time() * 1000)
    assert http.post("/topics/orders", json=events, headers=pub).status_code == 204
    (listed,) = http.get("/subscriptions", headers=sub).get_json()
    oldest = [lane.pop("oldest") for lane in listed["lanes"]]
    assert listed["lanes"] == [
        {"lane": 1, "batches": 2, "events": 3},
        {"lane": 10, "batches": 1, "events": 2},
    ]
    assert all(published - 1000 <= at <= int(time.time() * 1000) for at in oldest)
    assert (listed["deadletters"], listed["next_attempt_at"]) == (0, None)
    with serving(Subscriber(responder=lambda _: (500, 0.0))) as failing:
        bench.client.hset(bench.keys.subscriber("sub"), "callback", failing.url)
        before = int(time.time() * 1000)
        assert bench.run().kind == "failed"
    (listed,) = http.get("/subscriptions", headers=sub).get_json()
    assert listed["deadletters"] == 2  # the first lane-1 batch, max_attempts 1
    assert {**listed["lanes"][0], "oldest": 0} == {
        "lane": 1,
        "batches": 1,
        "events": 1,
        "oldest": 0,
    }
    assert listed["attempts"]["5xx"] == 1 and sum(listed["attempts"].values()) == 1
    assert listed["next_attempt_at"] > before
    assert listed["failures"] == 1
    bench.client.hset(bench.keys.subscriber("sub"), "failures", 4)
    assert http.get("/subscriptions", headers=ROOT).get_json()[0]["failures"] == 4


def test_root_reaches_a_subscribers_dead_letters_by_name(http: FlaskClient, sub, bench: Bench):
    subscribe(http, sub, ["orders"])
    entry = b"0|" + codec.pack_event("orders", "create", "https://o.test/1", 5, None)
    bench.client.rpush(bench.keys.deadletters("sub"), b"1|2|10|500|" + entry)
    (dead,) = http.get("/subscribers/sub/deadletters", headers=ROOT).get_json()
    assert (dead["url"], dead["last_status"], dead["attempts"]) == ("https://o.test/1", "500", 1)
    assert http.delete("/subscribers/sub/deadletters", headers=ROOT).status_code == 204
    assert not bench.client.exists(bench.keys.deadletters("sub"))
    replayed = http.post("/subscribers/sub/deadletters/replay", headers=ROOT)
    assert (replayed.status_code, replayed.get_json()) == (202, {"replayed": 0})
    missing = http.get("/subscribers/nobody/deadletters", headers=ROOT)
    assert missing.status_code == 404 and "nobody" in missing.get_json()["error"]
    # a name no client can have names nobody, whatever else the generator thought of it
    impossible = http.get("/subscribers/a%01b/deadletters", headers=ROOT)
    assert impossible.status_code == 404 and "control characters" in impossible.get_json()["error"]


def test_a_name_two_subscribers_share_is_a_conflict(http: FlaskClient, redis_client, keys):
    """Clients made before a name was one client's (seeded as that code wrote them)."""
    for token in ("twin-a", "twin-b"):
        redis_client.hsetnx(keys.tokens, token, "twin / one")
        subscribe(http, basic(token), ["orders"])
    response = http.get("/subscribers/twin%20%2F%20one/deadletters", headers=ROOT)
    assert response.status_code == 409
    assert "busbar clients rename" in response.get_json()["error"]  # how to mend it
    assert "twin-a" not in response.get_data(as_text=True)  # names, never tokens


def test_workers_and_history_answer_root(http: FlaskClient, redis_client, keys):
    assert http.get("/workers", headers=ROOT).get_json() == []
    history = http.get("/history", headers=ROOT).get_json()
    assert history["points"] == [] and history["total"] is None
    assert abs(history["now"] - time.time() * 1000) < 10_000
