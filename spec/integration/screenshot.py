"""The picture of the console on docs/console.md, taken from a real bus: `make docs`
makes it again whenever the console has changed since it was taken, so it never shows a
console that is gone.

    .venv/bin/python -m spec.integration.screenshot docs/console.png [--minutes 2]
        [--attempts docs/img/attempts.png] [--if-stale]

Starts Redis, `busbar web` and `busbar worker`, and seeds a bus as an operator's looks:
a healthy subscriber with ordering keys at `concurrency` 8, one with a content filter
that fails a third of its batches, one that fails everything into dead letters, and one
paused; publishes a few events a second for `--minutes` (the charts get one point a
minute), then signs in as root in headless chromium and saves the first screenful
(1280x900) with the dead letters shown; with `--attempts`, also the attempt log of the
flaky subscriber.

The picture's inputs (the console's files and this script: spec/console_picture.py) are
summed into `<picture>.sha256` beside it; `--if-stale` takes the picture only when they
changed, and spec/app/web/test_console_picture.py fails while the sum is not the current
one.
"""

from __future__ import annotations

import argparse
import itertools
import random
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from dev import redis_server
from spec.conftest import ROOT_KEY
from spec.console_picture import inputs_sum, recorded, stamp_of
from spec.integration.browser import chromium, tab
from spec.integration.bus import bus, events
from spec.integration.subscriber import Subscriber, serving


def seeded(minutes: float, picture: Path, attempts: Path | None) -> None:
    chance = random.Random(15)
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        server = redis_server.start(Path(tmp) / "redis", persistent=False)
        stack.callback(server.stop)
        the_bus = stack.enter_context(bus(server.url, Path(tmp), BUSBAR_MONITOR_INTERVAL="5"))
        healthy = stack.enter_context(serving(Subscriber(lambda _: (200, 0.02))))
        flaky = stack.enter_context(
            serving(Subscriber(lambda _: (503 if chance.random() < 0.33 else 200, 0.15)))
        )
        broken = stack.enter_context(serving(Subscriber(lambda _: (500, 0.0))))
        later = stack.enter_context(serving())
        for token in ("orders", "payments", "shipping", "billing", "audit", "reports"):
            the_bus.client(token)
        the_bus.subscribe("shipping", healthy.url, [{"topic": "parcels", "priority": 0}, "orders"],
                          concurrency=8)  # fmt: skip
        big = {"topic": "orders", "filter": {"data.i": {"$gt": 20}}}
        the_bus.subscribe("billing", flaky.url, ["invoices", big], max=20, timeout=1000)
        the_bus.subscribe("audit", broken.url, ["invoices"], max=5, max_attempts=2)
        the_bus.subscribe("reports", later.url, ["orders", "invoices"], max=50)
        assert the_bus.call("POST", "/subscriber/pause", "reports").ok
        deadline = time.monotonic() + minutes * 60
        for n in itertools.count():
            if time.monotonic() > deadline:
                break
            the_bus.publish("orders", "orders", events(chance.randint(1, 6), start=n * 10))
            the_bus.publish("orders", "parcels", events(chance.randint(0, 3), start=n * 10))
            if n % 3 == 0:
                the_bus.publish("payments", "invoices", events(2, start=n * 10, type_="update"))
            time.sleep(0.5)
        with chromium() as browser, tab(browser, the_bus.base) as t:
            t.sign_in(ROOT_KEY)
            audit = t.page.locator('#subscribers tr[data-subscriber="audit"]')
            audit.get_by_role("button", name="dead letters").click()
            t.page.locator("#dl-table tbody tr").first.wait_for()
            t.page.wait_for_timeout(1000)
            picture.parent.mkdir(parents=True, exist_ok=True)
            t.page.screenshot(path=str(picture))  # the first screenful
            if attempts:
                billing = t.page.locator('#subscribers tr[data-subscriber="billing"]')
                billing.get_by_role("button", name="attempts").click()
                t.page.locator("#at-table tbody tr").nth(5).wait_for()
                t.page.wait_for_timeout(1000)
                t.page.locator("#attempts").screenshot(path=str(attempts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--attempts", type=Path, help="where to save the attempt log's picture")
    parser.add_argument("--if-stale", action="store_true", help="only when the console changed")
    args = parser.parse_args()
    current = inputs_sum()
    if args.if_stale and recorded(args.output) == current:
        return
    seeded(args.minutes, args.output, args.attempts)
    stamp_of(args.output).write_text(
        f"{current}  the console's files and spec/integration/screenshot.py\n"
    )
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
