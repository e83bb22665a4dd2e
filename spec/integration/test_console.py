"""The operator console in a real browser (Debian's chromium, headless) against real
`busbar web` and `busbar worker` processes, a real Redis and a real HTTP subscriber.

On one Redis (`layout_free`): the console is a page of the API, and what it asks of
Redis runs on both layouts where the API is tested: queues and the Monitor's samples in
test_delivery.py, dead letters and their replay in test_routes.py's
test_exactly_max_attempts_then_a_dead_letter_then_replay and the composition matrix
(test_matrix.py), the attempt log in test_attempts.py, pause and transforms in the
composition matrix, destinations in test_destinations.py, erasures in
test_erasure.py; what one client may see of another's is the API's
(spec/app/web/test_security.py), whatever the layout."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from playwright.sync_api import Browser, expect

from app.lua import Scripts
from app.services.replay import Replays
from spec.conftest import ROOT_KEY
from spec.integration.browser import Tab, chromium, tab
from spec.integration.bus import Bus, bus, events
from spec.integration.processes import free_port, wait_until
from spec.integration.subscriber import Received, Subscriber, serving

pytestmark = [pytest.mark.slow, pytest.mark.layout_free]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as the_browser:
        yield the_browser


@pytest.fixture
def the_bus(redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> Iterator[Bus]:
    """With its first per-minute sample taken, so that the charts count what tests do."""
    with bus(redis_url, tmp_path, BUSBAR_MONITOR_INTERVAL="1") as the_bus:
        samples = the_bus.keys.samples
        wait_until(lambda: redis_client.hlen(samples) > 0, what="the Monitor's first sample")
        yield the_bus


def quiet(t: Tab) -> None:
    """Nothing but this bus was asked for, and nothing broke: no script error, no CSP
    violation (Chrome logs refused 401/403 fetches as errors too; those are expected)."""
    assert all(url.startswith(t.base + "/") for url in t.requests), t.requests
    assert [e for e in t.errors if not e.startswith("Failed to load resource")] == []


def row(t: Tab, name: str):
    return t.page.locator(f'#subscribers tr[data-subscriber="{name}"]')


def test_root_sees_a_queue_grow_and_drain(the_bus: Bus, browser: Browser):
    release = threading.Event()

    def hold(_: Received) -> tuple[int, float]:
        release.wait(60)
        return 200, 0.0

    with serving(Subscriber(responder=hold)) as sub:
        the_bus.client("orders")
        the_bus.client("shipping")
        the_bus.subscribe("shipping", sub.url, ["parcels"], max=1, timeout=0)
        the_bus.publish("orders", "parcels", events(1))
        wait_until(lambda: sub.in_flight == 1, what="the subscriber to hold the first batch")
        held_at = time.monotonic()
        the_bus.publish("orders", "parcels", events(4, start=1))
        client = the_bus.redis()
        replays = Replays(client, the_bus.keys, Scripts(client))
        fields = {"by": "ops@box", "selection": '{"topics": ["parcels"]}', "selected": 3}
        replays.start("rpl_console", replays.target("shipping"), fields, 1_767_225_600_000, False)
        with tab(browser, the_bus.base) as t:
            t.sign_in(ROOT_KEY)
            expect(t.page.locator("#who")).to_have_text("root")
            shipping = row(t, "shipping")
            expect(shipping.locator("td.queued")).to_have_text("5")
            expect(shipping.locator("td.sent")).to_have_text("0")
            expect(shipping.locator("td.circuit")).to_have_text("closed")
            parcels = t.page.locator('#topics tr[data-topic="parcels"]')
            expect(parcels).to_have_text(re.compile(r"parcels\s*orders\s*5"))
            worker = t.page.locator("#workers-table tbody tr").first
            expect(worker).to_contain_text("alive")
            expect(worker.locator("td").nth(2)).to_have_text(re.compile(r"^[1-9]"))
            replay = t.page.locator('#replays-table tr[data-replay="rpl_console"]')
            expect(replay).to_have_text(re.compile(
                r'rpl_console\s*shipping\s*\{"topics":\["parcels"\]\}\s*0 of 3\s*running\s*ops@box'
                r"\s*2026-01-01 00:00:00"
            ))  # fmt: skip

            time.sleep(max(0.0, 1.1 - (time.monotonic() - held_at)))  # p99 above 1024 ms
            release.set()
            expect(shipping.locator("td.queued")).to_have_text("0")
            expect(shipping.locator("td.sent")).to_have_text("5")
            expect(t.page.locator("#summary-events")).to_contain_text(
                "5 published, 5 delivered, 0 failed attempts"
            )
            # the first batch was held over a second, and the other four waited behind it
            expect(t.page.locator("#summary-latency")).to_have_text(
                re.compile(r"5 batches acknowledged, p50 ≤ \d+ ms, p99 ≤ \d{4,} ms, mean \d+ ms")
            )
            # the minute under way is charted once it spans 10 s (a rate from less is noise)
            published = t.page.locator("#chart-events circle.published")
            expect(published.first).to_be_attached(timeout=20_000)
            expect(t.page.locator("#chart-latency circle.p99").first).to_be_attached(timeout=20_000)
            quiet(t)


def test_a_client_never_sees_another_clients_data(the_bus: Bus, browser: Browser):
    with serving() as sub:
        for token in ("orders", "shipping", "billing-secret-token"):
            the_bus.client(token)
        the_bus.call("POST", "/api_tokens", ROOT_KEY, {"name": "billing", "token": "billing-2"})
        parcels = {"topic": "parcels", "filter": {"data.i": {"$lt": 2}}}
        the_bus.subscribe("shipping", sub.url, [parcels])
        the_bus.subscribe("billing-2", sub.url + "/billing-callback", ["invoices"], uuid="b-uuid")
        schema = {"type": "object", "required": ["i"]}
        put = the_bus.call("PUT", "/topics/parcels/schemas/create", "orders", schema)
        assert put.status_code == 200, put.text
        the_bus.publish("orders", "parcels", events(3))
        the_bus.publish("billing-2", "invoices", events(3))
        sub.wait_for(5)
        with tab(browser, the_bus.base) as t:
            t.sign_in("shipping")
            expect(t.page.locator("#who")).to_have_text("client shipping")
            expect(row(t, "shipping").locator("td.sent")).to_have_text("2")
            topics = row(t, "shipping").locator("td.topics")  # its filter, and what it kept out
            expect(topics).to_contain_text('parcels: {"data.i":{"$lt":2}}')
            expect(topics).to_contain_text("1 kept out by filters")
            parcels_row = t.page.locator('#topics tr[data-topic="parcels"]')
            expect(parcels_row).to_be_visible()
            parcels_row.locator("td.schemas button").click()  # its schema, read on demand
            expect(parcels_row.locator("pre.schema")).to_contain_text('"required": [')
            expect(parcels_row.locator("pre.schema")).to_contain_text("create v1")
            expect(t.page.locator("#workers")).to_be_hidden()
            expect(t.page.locator("#replays")).to_be_hidden()
            expect(t.page.locator("#charts")).to_be_hidden()
            t.page.wait_for_timeout(3500)  # at least one more refresh
            others = ("billing", "invoices", "b-uuid", "billing-2", "billing-callback", ROOT_KEY)
            seen = [t.page.content(), *t.bodies]
            assert not [s for s in others if any(s in text for text in seen)]
            assert len(t.page.locator("#subscribers tbody tr").all()) == 1
            assert "shipping" not in t.page.url
            assert t.page.context.cookies() == []
            stored = t.page.evaluate("() => sessionStorage.getItem('busbar.token')")
            assert stored == "shipping"
            t.page.click("#signout")
            expect(t.page.locator("#login")).to_be_visible()
            t.page.wait_for_timeout(3500)  # a refresh in flight draws nothing after sign-out
            assert t.page.locator("#subscribers tbody tr").count() == 0
            assert t.page.evaluate("() => sessionStorage.getItem('busbar.token')") is None
            quiet(t)


def test_root_pages_through_more_subscribers_than_a_page(the_bus: Bus, browser: Browser):
    """A bus of thousands is listed a page at a time (GET /subscriptions?limit), in the
    order of the clients' names; a refresh redraws the page shown."""
    names = [f"s{i:03}" for i in reversed(range(105))]  # made in the other order
    with serving() as sub:
        for name in names:
            the_bus.subscribe(the_bus.client(name), sub.url, ["parcels"])
        with tab(browser, the_bus.base) as t:
            t.sign_in(ROOT_KEY)
            rows = t.page.locator("#subscribers tbody tr")
            expect(rows).to_have_count(100)
            expect(rows.first).to_have_attribute("data-subscriber", "s000")
            expect(rows.last).to_have_attribute("data-subscriber", "s099")
            expect(t.page.locator("#sub-range")).to_have_text("subscribers 1 to 100")
            expect(t.page.locator("#sub-first")).to_be_disabled()
            t.page.click("#sub-next")
            expect(rows).to_have_count(5)
            expect(rows.first).to_have_attribute("data-subscriber", "s100")
            expect(t.page.locator("#sub-range")).to_have_text("subscribers 101 to 105")
            expect(t.page.locator("#sub-next")).to_be_disabled()
            t.page.wait_for_timeout(3500)  # at least one more refresh: the same page
            expect(rows).to_have_count(5)
            expect(rows.first).to_have_attribute("data-subscriber", "s100")
            t.page.click("#sub-first")
            expect(rows).to_have_count(100)
            expect(rows.first).to_have_attribute("data-subscriber", "s000")
            listings = [u for u in t.requests if "/subscriptions" in u]
            assert listings and all("limit=100" in u for u in listings), listings
            quiet(t)


def test_a_wrong_token_shows_the_auth_message(the_bus: Bus, browser: Browser):
    with tab(browser, the_bus.base) as t:
        t.sign_in("no-such-token")
        expect(t.page.locator("#message")).to_contain_text("does not know this token")
        expect(t.page.locator("#console")).to_be_hidden()
        expect(t.page.locator("#login")).to_be_visible()
        assert t.page.evaluate("() => sessionStorage.getItem('busbar.token')") is None
        quiet(t)


def test_dead_letters_replayed_by_root_are_delivered_and_a_client_purges_its_own(
    the_bus: Bus, browser: Browser
):
    answer = {"status": 500}
    with serving(Subscriber(responder=lambda _: (answer["status"], 0.0))) as sub:
        the_bus.client("orders")
        the_bus.client("shipping")
        the_bus.subscribe("shipping", sub.url, ["parcels"], max=1, timeout=0, max_attempts=1)
        the_bus.publish("orders", "parcels", events(1))
        wait_until(
            lambda: the_bus.subscription("shipping")["deadletters"] == 1, what="a dead letter"
        )
        with tab(browser, the_bus.base) as t:
            t.sign_in(ROOT_KEY)
            shipping = row(t, "shipping")
            expect(shipping.locator("td.deadletters")).to_have_text("1")
            expect(shipping.locator("td.failures")).not_to_have_text("")
            expect(shipping.locator("td.circuit")).to_have_text("closed, 1 failed in a row")
            shipping.get_by_role("button", name="dead letters").click()
            dead = t.page.locator("#dl-table tbody tr")
            expect(dead).to_have_count(1)
            expect(dead.first).to_contain_text("https://o.test/0")
            expect(dead.first).to_contain_text("500")
            answer["status"] = 200
            t.page.click("#dl-replay")
            expect(t.page.locator("#dl-question")).to_contain_text(
                "Replay 1 dead letters of shipping"
            )
            assert sub.delivered == []  # nothing happens before the confirmation
            t.page.click("#dl-yes")
            expect(t.page.locator("#notice")).to_contain_text("Replayed 1 dead letters of shipping")
            assert [e["url"] for e in sub.wait_for(1)] == ["https://o.test/0"]
            expect(shipping.locator("td.deadletters")).to_have_text("0")
            expect(shipping.locator("td.sent")).to_have_text("1")
            quiet(t)

        answer["status"] = 500
        the_bus.publish("orders", "parcels", events(1, start=1))
        wait_until(
            lambda: the_bus.subscription("shipping")["deadletters"] == 1, what="a dead letter"
        )
        with tab(browser, the_bus.base) as t:
            t.sign_in("shipping")
            row(t, "shipping").get_by_role("button", name="dead letters").click()
            expect(t.page.locator("#dl-table tbody tr")).to_have_count(1)
            t.page.click("#dl-purge")
            expect(t.page.locator("#dl-question")).to_contain_text("deleted for good")
            t.page.click("#dl-no")
            expect(t.page.locator("#dl-confirm")).to_be_hidden()
            assert the_bus.subscription("shipping")["deadletters"] == 1
            t.page.click("#dl-purge")
            t.page.click("#dl-yes")
            expect(t.page.locator("#dl-table tbody tr td.empty")).to_have_text("No dead letters.")
            assert the_bus.subscription("shipping")["deadletters"] == 0
            quiet(t)


def test_the_attempt_log_shows_each_attempt_and_filters_by_outcome_and_batch(
    the_bus: Bus, browser: Browser
):
    """Root opens a subscriber's attempts: a failure with its status and the answer's
    body, then the success of the same batch; the outcome filter and a click on the
    batch narrow the table; a client sees its own the same way."""
    answers = iter([(500, 0.0)] * 2)

    def answer(_: Received) -> tuple[int, float]:
        return next(answers, (200, 0.0))

    sub = Subscriber(responder=answer)
    sub.body_out = b"database is down"
    with serving(sub):
        the_bus.client("orders")
        the_bus.client("shipping")
        the_bus.subscribe("shipping", sub.url, ["parcels"], max=1, timeout=0)
        the_bus.publish("orders", "parcels", events(2))
        sub.wait_for(2, 30)
        wait_until(lambda: the_bus.subscription("shipping")["events"]["queued"] == 0, 30, "drained")
        with tab(browser, the_bus.base) as t:
            t.sign_in(ROOT_KEY)
            row(t, "shipping").get_by_role("button", name="attempts").click()
            rows = t.page.locator("#at-table tbody tr")
            expect(rows).to_have_count(4)  # 2 failures, then the 2 batches delivered
            failures = t.page.locator("#at-table tbody tr:has(td.bad)")
            expect(failures).to_have_count(2)
            expect(failures.first).to_contain_text("5xx")
            expect(failures.first).to_contain_text("500")
            expect(failures.first.locator("td.body")).to_have_text("database is down")
            t.page.select_option("#at-outcome", "2xx")
            expect(rows).to_have_count(2)
            expect(t.page.locator("#at-table tbody tr td.bad")).to_have_count(0)
            t.page.select_option("#at-outcome", "")
            expect(rows).to_have_count(4)
            batch = failures.first.locator("button.link").inner_text()
            failures.first.locator("button.link").click()
            expect(t.page.locator("#at-batch")).to_have_value(batch)
            expect(rows).to_have_count(3)  # the head batch: failed twice, then delivered
            expect(t.page.locator("#at-events")).to_contain_text(f"Batch {batch} is not queued")
            quiet(t)
        with tab(browser, the_bus.base) as t:
            t.sign_in("shipping")
            row(t, "shipping").get_by_role("button", name="attempts").click()
            expect(t.page.locator("#at-table tbody tr")).to_have_count(4)
            quiet(t)


def test_root_pauses_and_resumes_a_subscriber_after_a_confirmation(the_bus: Bus, browser: Browser):
    sub = Subscriber()
    with serving(sub):
        the_bus.client("orders")
        the_bus.client("shipping")
        the_bus.subscribe("shipping", sub.url, ["parcels"], max=1, timeout=0)
        with tab(browser, the_bus.base) as t:
            t.sign_in(ROOT_KEY)
            shipping = row(t, "shipping")
            shipping.get_by_role("button", name="pause").click()
            expect(t.page.locator("#sub-question")).to_contain_text("Pause shipping?")
            t.page.click("#sub-no")
            expect(t.page.locator("#sub-confirm")).to_be_hidden()
            assert the_bus.subscription("shipping")["paused"] is None  # nothing without a yes
            shipping.get_by_role("button", name="pause").click()
            t.page.click("#sub-yes")
            expect(t.page.locator("#notice")).to_contain_text("Paused shipping")
            expect(shipping.locator("td.next")).to_contain_text("paused by root")
            the_bus.publish("orders", "parcels", events(2))
            expect(shipping.locator("td.queued")).to_have_text("2")
            assert sub.received == []
            shipping.get_by_role("button", name="resume").click()
            expect(t.page.locator("#sub-question")).to_contain_text("Resume shipping?")
            t.page.click("#sub-yes")
            expect(t.page.locator("#notice")).to_contain_text("Resumed shipping")
            assert [e["url"] for e in sub.wait_for(2)] == ["https://o.test/0", "https://o.test/1"]
            expect(shipping.locator("td.queued")).to_have_text("0")
            quiet(t)


def test_a_subscriber_tries_its_callback_from_its_row(the_bus: Bus, browser: Browser):
    down = Subscriber(responder=lambda _: (503, 0.0), body_out=b"database is down")
    with serving(down):
        the_bus.client("shipping")
        the_bus.subscribe("shipping", down.url, ["parcels"], max=1, timeout=0)
        with tab(browser, the_bus.base) as t:
            t.sign_in("shipping")
            row(t, "shipping").get_by_role("button", name="test").click()
            expect(t.page.locator("#notice")).to_contain_text("Test call to shipping: 503 in")
            expect(t.page.locator("#notice")).to_contain_text("database is down")
            assert [r.headers.get("Busbar-Test") for r in down.received] == ["1"]
            quiet(t)


def test_a_destination_is_shown_without_its_secret_and_tried_from_its_row(
    the_bus: Bus, browser: Browser
):
    """A subscription publishing to a broker (docs/destinations.md) shows where it goes;
    its test call, with no broker listening there, says why it could not reach it."""
    the_bus.client("stream")
    to = {"type": "nats", "url": f"nats://127.0.0.1:{free_port()}", "subject": "parcels.{key}",
          "user": "busbar", "password": "never-shown-pass"}  # fmt: skip
    body = {"topics": ["parcels"], "destination": to}
    assert the_bus.call("POST", "/subscription", "stream", body).status_code == 204
    with tab(browser, the_bus.base) as t:
        t.sign_in("stream")
        expect(row(t, "stream").locator("div.destination")).to_have_text(
            f"to nats {to['url']} · parcels.{{key}}"
        )
        assert "never-shown-pass" not in t.page.content()
        row(t, "stream").get_by_role("button", name="test").click()
        expect(t.page.locator("#notice")).to_contain_text(
            "Test call to stream: no answer (connection_refused)"
        )
        quiet(t)


def test_a_routes_transform_is_shown_and_tried_on_the_last_delivered_event(
    the_bus: Bus, browser: Browser
):  # fmt: skip
    """Root's console lists the transform under the route and runs it, at a click, on
    the subscriber's last delivered event as published; an edited transform that fails
    on it says which bound; what the transform dropped is counted in the row."""
    shape = "data.i = 0 ? null : {'parcel': data.i}"
    with serving() as sub:
        the_bus.client("orders"), the_bus.client("shipping")
        the_bus.subscribe("shipping", sub.url, [{"topic": "parcels", "transform": shape}],
                          max=1, timeout=0)  # fmt: skip
        the_bus.publish("orders", "parcels", events(3))
        sub.wait_for(2)
        assert [e["data"] for e in sub.delivered] == [{"parcel": 1}, {"parcel": 2}]
        wait_until(lambda: the_bus.subscription("shipping")["events"]["transformed_out"] == 1)
        # the last delivered event is the delivery log's, written at the acknowledgement
        wait_until(lambda: the_bus.subscription("shipping")["events"]["queued"] == 0)
        with tab(browser, the_bus.base) as t:
            t.sign_in(ROOT_KEY)
            shipping = row(t, "shipping")
            expect(shipping.locator("td.topics")).to_contain_text(f"parcels: {shape}")
            expect(shipping.locator("td.dropped")).to_have_text("1 given nothing by a transform")
            shipping.get_by_role("button", name="try").click()
            expect(t.page.locator("#notice")).to_contain_text(
                'parcels transform of shipping on https://o.test/2: {"parcel":2}'
            )
            quiet(t)
        deep = "($f := function($n) { $f($n + 1) + 1 }; $f(0))"
        the_bus.subscribe("shipping", sub.url, [{"topic": "parcels", "transform": deep}],
                          max=1, timeout=0)  # fmt: skip
        with tab(browser, the_bus.base) as t:
            t.sign_in("shipping")
            row(t, "shipping").get_by_role("button", name="try").click()
            expect(t.page.locator("#notice")).to_contain_text("fails (depth)")
            quiet(t)


def test_root_erases_a_url_after_a_confirmation_and_reads_the_receipt(
    the_bus: Bus, browser: Browser
):
    """The erasures panel: nothing without a yes; then the workers erase the url's
    queued events (the subscriber is paused) and the receipt's row says so; the other
    url's stay."""
    the_bus.client("orders")
    the_bus.client("shipping")
    the_bus.subscribe("shipping", "https://shipping.test/in", ["parcels"], max=1, timeout=0)
    assert the_bus.call("POST", "/subscriber/pause", "shipping").status_code == 200
    the_bus.publish("orders", "parcels", events(4))  # urls https://o.test/0 .. /3
    with tab(browser, the_bus.base) as t:
        t.sign_in(ROOT_KEY)
        expect(t.page.locator("#erasures-table")).to_contain_text("No erasure yet.")
        t.page.fill("#er-value", "https://o.test/2")
        t.page.click("#er-ask")
        expect(t.page.locator("#er-question")).to_contain_text("url https://o.test/2")
        t.page.click("#er-no")
        expect(t.page.locator("#er-confirm")).to_be_hidden()
        assert the_bus.call("GET", "/erasures", ROOT_KEY).json() == []
        t.page.click("#er-ask")
        t.page.click("#er-yes")
        expect(t.page.locator("#notice")).to_contain_text("asked for")
        erased = t.page.locator("#erasures-table tbody tr").first
        expect(erased.locator("td.state")).to_have_text("done", timeout=20_000)
        expect(erased.locator("td.removed")).to_contain_text("queued 1")
        expect(erased).to_contain_text("sha256:")  # the url itself is forgotten
        expect(row(t, "shipping").locator("td.queued")).to_have_text("3")
        quiet(t)
