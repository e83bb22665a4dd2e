"""Callbacks that authenticate the bus (issue 39): what presenting a subscription's
client certificate, or an OAuth2 access token, costs delivery throughput, against the
same https subscriber without either; and how many token requests the bus makes.

The issue asks that delivery with mTLS run at no less than 0.8x the same subscriber
without it, and with OAuth2 (a cached token) at no less than 0.9x; a JWT per push, the
third way a callback can authenticate the bus, is measured beside them. The token
endpoint is spec/integration/oauth_server.py's (authlib's server side), issuing tokens
of an hour for the rounds. Redis, `busbar web` and one `busbar worker` as real processes,
trusting a test CA through BUSBAR_CA_BUNDLE (spec/integration/tls.py makes it, with a
server certificate for 127.0.0.1 and a client certificate). Subscribers are bench.sink's,
serving https: one that asks for no client certificate, one that requires one the CA
signed (a client without is refused, checked before measuring). Four subscriptions,
each alone on its topic, concurrency 1, `max` 50, `timeout` 0: https (the baseline), the
same with `client_cert` on the subscriber that requires it, https with `auth`
`{"type": "jwt"}`, and https with `auth` oauth2. A run publishes N events in bulk
POSTs, timed from the first publish to the subscriber's receipt of the last, as
bench.delivery times throughput; the four runs of a round interleaved, their order
turning each round (as bench.filters does), a round disturbed by other jobs run again.
Medians (min-max) over rounds, and each against the baseline: the ratio of the
medians, and round by round.

Then the token requests: three workers deliver to a fifth subscription, oauth2 with a
token endpoint issuing tokens of TOKEN_LIFE_S, a publish every 50 ms for COUNT_S;
the endpoint counts the requests, against the COUNT_S / TOKEN_LIFE_S a token per
lifetime would make. Prints, and writes bench/results/mtls.md.

    .venv/bin/python -m bench.mtls [--events N] [--rounds R] [--max M] [--bulk B]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import math
import ssl
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import common, delivery
from bench.common import Api, Bus, Sink
from spec.integration.oauth_server import TokenServer, token_server
from spec.integration.tls import InternalCA, client_certificate, make_internal_ca

COMMAND = ".venv/bin/python -m bench.mtls"
ENV = {"BUSBAR_REDIS_MAX_MEM": str(1 << 30)}
WAIT_S = 60.0  # most a run waits for its last event (a failing configuration stops there)
DISTURBED = 0.15  # cores other jobs used during a round above which it runs again
BASELINE = "https"
MTLS = "mTLS (client certificate required)"
JWT = "https, a JWT per push"
OAUTH = "https, OAuth2 (a cached token)"
NAMES = [BASELINE, MTLS, JWT, OAUTH]
TOKEN_LIFE_S = 4  # the counted part's tokens
COUNT_S = 24.0


def tls_sink(ca: InternalCA, client_ca: Path | None = None) -> Sink:
    """bench.sink's subscriber over https, the server's certificate from `ca`; with
    `client_ca`, mutual TLS."""
    return Sink(tls=(str(ca.cert), str(ca.key), str(client_ca or "")))


def served_without_certificate(port: int, ca: InternalCA) -> bool:
    """Whether the subscriber on `port` answers a client that trusts `ca` but presents no
    certificate (under TLS 1.3 a refusal shows when the answer is read)."""
    context = ssl.create_default_context(cafile=str(ca.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    try:
        conn.request("POST", "/probe", body=b"[]", headers={"Content-Type": "application/json"})
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def oauth2(tokens: TokenServer, client_id: str) -> dict[str, Any]:
    tokens.add(client_id, "bench-secret")
    return {"auth": {"type": "oauth2", "token_url": tokens.url, "client_id": client_id,
                     "client_secret": "bench-secret", "scope": "events"}}  # fmt: skip


def subscribe(
    the_bus: Bus, sinks: dict[str, Sink], pem: tuple[str, str], size: int, tokens: TokenServer
) -> None:
    """A client and a topic of its own per configuration, subscribed on its sink."""
    options: dict[str, dict[str, Any]] = {
        BASELINE: {},
        MTLS: {"client_cert": {"cert": pem[0], "key": pem[1]}},
        JWT: {"auth": {"type": "jwt"}},
        OAUTH: oauth2(tokens, "bench"),
    }
    for i, (name, extra) in enumerate(options.items()):
        url = f"https://127.0.0.1:{sinks[name].port}/c{i}"
        body = {"topics": [topic_of(name)], "callback": url, "max": size, "timeout": 0}
        with contextlib.closing(the_bus.client(f"sub{i}")) as api:
            api.ok("POST", "/subscription", body | extra)


def topic_of(name: str) -> str:
    return common.topic_name(f"m{NAMES.index(name)}")


def run_once(the_bus: Bus, publisher: Api, to: Sink, name: str, events: int, bulk: int) -> dict:
    """Publish `events` to the configuration's topic in POSTs of `bulk` (on a thread) and
    time from the first until the subscriber has acknowledged the last."""
    to.take()
    start_count, topic = to.received, topic_of(name)
    body = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(bulk)]
    sizes = [bulk] * (events // bulk) + ([events % bulk] if events % bulk else [])

    def publish() -> None:
        for size in sizes:
            publisher.ok("POST", f"/topics/{topic}", body[:size])

    snap, cpu0 = common.others(), delivery.cpu(the_bus, to)
    t0 = time.perf_counter()
    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    complete = to.wait_for(start_count + events, WAIT_S)
    elapsed = time.perf_counter() - t0
    thread.join(WAIT_S)
    got = to.received - start_count
    if not complete:
        with contextlib.closing(the_bus.api(f"sub{NAMES.index(name)}")) as api:
            found = api.ok("GET", "/subscriber/attempts")[:600]
        raise RuntimeError(f"{name}: {got} of {events} events in {WAIT_S:.0f} s; {found!r}")
    cpu = delivery.per_event_us(cpu0, delivery.cpu(the_bus, to), got)
    return {
        "rate": got / elapsed,
        "requests": len(to.take()),
        "worker_us": cpu["worker"],
        "subscriber_us": cpu["subscriber"],
        "seconds": elapsed,
        "other_s": common.others_since(snap),  # CPU-seconds of processes not ours
    }


def measure(the_bus: Bus, sinks: dict[str, Sink], args: argparse.Namespace) -> dict:
    """Rounds of the four configurations, their order turning each round."""
    names = NAMES
    runs: dict[str, list[dict]] = {name: [] for name in names}
    with contextlib.closing(the_bus.client("pub")) as publisher:
        for name in names:  # warm-up: connections, handshakes, the client key, a token
            run_once(the_bus, publisher, sinks[name], name, min(args.events, 2_000), args.bulk)
        retried = 0
        while len(runs[BASELINE]) < args.rounds:
            common.wait_quiet()
            turn = len(runs[BASELINE]) % len(names)
            order = names[turn:] + names[:turn]
            one = {n: run_once(the_bus, publisher, sinks[n], n, args.events, args.bulk)
                   for n in order}  # fmt: skip
            rows = one.values()  # the round's, as its runs alone are too short to judge
            other = sum(r["other_s"] for r in rows) / sum(r["seconds"] for r in rows)
            if other > DISTURBED and retried < args.tries:
                retried += 1  # another job took CPU: this round again
                continue
            for name, row in one.items():
                runs[name].append(row)
                shown = ", ".join(f"{k} {v:,.2f}" for k, v in row.items())
                shown += f"; other cores, the round: {other:.2f}"
                print(f"round {len(runs[name])} {name}: {shown}", flush=True)
    return {"runs": runs, "retried": retried}


def count_tokens(the_bus: Bus, to: Sink, tokens: TokenServer, seconds: float) -> dict:
    """Three workers (this one and two more) delivering a publish every 50 ms for
    `seconds` to an oauth2 subscription whose tokens live TOKEN_LIFE_S: the token
    requests the endpoint saw."""
    topic = common.topic_name("m4")
    url = f"https://127.0.0.1:{to.port}/c4"
    body = {"topics": [topic], "callback": url, "max": 50, "timeout": 0}
    with contextlib.closing(the_bus.client("sub4")) as api:
        api.ok("POST", "/subscription", body | oauth2(tokens, "counted"))
    with contextlib.ExitStack() as stack, contextlib.closing(the_bus.client("pub4")) as publisher:
        for _ in range(2):
            stack.enter_context(common.worker(the_bus))
        to.take()
        start, sent, t0 = to.received, 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            publisher.ok(
                "POST", f"/topics/{topic}", [{"type": "create", "url": f"https://o.test/{sent}"}]
            )
            sent += 1
            time.sleep(0.05)
        if not to.wait_for(start + sent, WAIT_S):
            raise RuntimeError(f"the counted subscription got {to.received - start} of {sent}")
        elapsed = time.monotonic() - t0
    expected = math.ceil(elapsed / (TOKEN_LIFE_S * 0.9))
    return {"requests": tokens.requests, "events": sent, "seconds": elapsed,
            "lifetimes": elapsed / TOKEN_LIFE_S, "workers": 3, "expected": expected}  # fmt: skip


def report(found: dict, args: argparse.Namespace, took: float) -> str:
    runs: dict[str, list[dict]] = found["runs"]
    base = [r["rate"] for r in runs[BASELINE]]
    rows = []
    for name, rs in runs.items():
        rates = [r["rate"] for r in rs]
        of_medians = statistics.median(rates) / statistics.median(base)
        by_round = [r / b for r, b in zip(rates, base, strict=True)]
        rows.append(
            f"| {name} | {common.spread(rates)} | {of_medians:.2f}x "
            f"| {common.spread(by_round, '{:.2f}')}x "
            f"| {statistics.median(r['worker_us'] for r in rs):,.0f} "
            f"| {statistics.median(r['subscriber_us'] for r in rs):,.0f} |"
        )
    mtls = statistics.median(r["rate"] for r in runs[MTLS]) / statistics.median(base)
    oauth = statistics.median(r["rate"] for r in runs[OAUTH]) / statistics.median(base)
    counted = found["counted"]
    again = f", {found['retried']} disturbed rounds run again" if found["retried"] else ""
    command = (f"{COMMAND} --events {args.events} --rounds {args.rounds} --max {args.max} "
               f"--bulk {args.bulk}")  # fmt: skip
    return "\n".join([
        "# Delivery over https: a client certificate, a JWT per push, an OAuth2 token, none",
        "",
        f"`{command}`; {common.machine()}; {took:.0f} s.",
        "",
        f"{args.events:,} events a run, published in POSTs of {args.bulk}, one subscription "
        f"per configuration (max {args.max}, timeout 0, concurrency 1), {args.rounds} rounds "
        f"interleaved{again}. events/s from the first publish to the last event received; "
        "µs: CPU per event of the worker and of the subscriber. Median (min-max).",
        "",
        "| configuration | events/s | / https, of medians | / https, by round "
        "| worker µs | subscriber µs |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"mTLS against https: {mtls:.2f}x (the bar: 0.8x; {'met' if mtls >= 0.8 else 'NOT met'}). "
        f"OAuth2 with a cached token against https: {oauth:.2f}x (the bar: 0.9x; "
        f"{'met' if oauth >= 0.9 else 'NOT met'}). The token endpoint saw "
        f"{found['warm_requests']} token request(s) over "
        f"the warm-up and all {args.rounds} rounds.",
        "",
        f"Token requests: {counted['workers']} workers delivering {counted['events']:,} "
        f"events (one publish every 50 ms) over {counted['seconds']:.1f} s to a subscription "
        f"whose tokens live {TOKEN_LIFE_S} s ({counted['lifetimes']:.1f} lifetimes): "
        f"{counted['requests']} token requests; one per lifetime, each renewed a tenth of "
        f"its life before it expires, makes {counted['expected']} (bus-wide: "
        f"{'met' if counted['requests'] <= counted['expected'] else 'NOT met'}).",
    ])  # fmt: skip


def options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.mtls", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="events a run (20,000)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the four (7)")
    parser.add_argument("--max", type=int, default=50, help="the subscriptions' max (50)")
    parser.add_argument("--bulk", type=int, default=500, help="events a publish POST (500)")
    parser.add_argument("--tries", type=int, default=3, help="disturbed rounds run again (3)")
    parser.add_argument("--quick", action="store_true", help="tiny counts: shows it runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.rounds, args.tries = 1_000, 1, 0
    return args


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="busbar-bench-") as tmp:
        work = Path(tmp)
        ca = make_internal_ca(work / "ca")
        pem = client_certificate(ca, "busbar-bench")
        plain, mutual = tls_sink(ca), tls_sink(ca, client_ca=ca.ca)
        sinks = {BASELINE: plain, MTLS: mutual, JWT: plain, OAUTH: plain}
        try:
            if not served_without_certificate(plain.port, ca):
                raise RuntimeError("the https subscriber refused a client it should serve")
            if served_without_certificate(mutual.port, ca):
                raise RuntimeError("the mTLS subscriber served a client without a certificate")
            env = ENV | {"BUSBAR_CA_BUNDLE": str(ca.ca)}
            with token_server() as tokens, token_server(TOKEN_LIFE_S) as short, \
                    common.web_bus(work, env=env) as the_bus, common.worker(the_bus):  # fmt: skip
                subscribe(the_bus, sinks, pem, args.max, tokens)
                found = measure(the_bus, sinks, args)
                found["warm_requests"] = tokens.requests
                seconds = COUNT_S if not args.quick else 2 * TOKEN_LIFE_S
                found["counted"] = count_tokens(the_bus, plain, short, seconds)
                drops = the_bus.dropped()
        finally:
            for one in (plain, mutual):
                with contextlib.suppress(OSError):
                    one.stop()
    text = report(found, args, time.perf_counter() - started)
    if drops:
        text += f"\n\nEvents that left without delivery: {drops}"
    print()
    print(text)
    common.write_report("mtls", text)
    runs = found["runs"]
    base = [r["rate"] for r in runs[BASELINE]]
    common.write_headlines("mtls", [
        ("delivered events/s over https with a client certificate (mTLS)",
         common.spread([r["rate"] for r in runs[MTLS]])),
        ("the same against https without one",
         common.spread([r["rate"] / b for r, b in zip(runs[MTLS], base, strict=True)],
                       "{:.2f}") + "x"),
        ("https with a JWT per push against without",
         common.spread([r["rate"] / b for r, b in zip(runs[JWT], base, strict=True)],
                       "{:.2f}") + "x"),
        ("https with an OAuth2 token (cached) against without",
         common.spread([r["rate"] / b for r, b in zip(runs[OAUTH], base, strict=True)],
                       "{:.2f}") + "x"),
        ("OAuth2 token requests, 3 workers",
         f"{found['counted']['requests']} in {found['counted']['lifetimes']:.1f} token lifetimes"),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
