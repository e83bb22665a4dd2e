"""Where a single-event publish's CPU goes, piece by piece, in one process.

The WSGI app runs here without gunicorn, on a real valkey-server, and each piece of a
publish is timed alone (CPU time per call, the median of several batches): what Flask
costs (GET /health through Flask; a publish through the Flask view against the fast
path that answers before Flask), credentials, JSON decoding, validation, the Redis
round trip of the topic step (the kept connection busbar uses against app/lua's
LuaScript, which every other script goes through; a bare socket round trip as the
kernel's floor), and, on the Redis side, the topic step's script per call (INFO
commandstats), of which the Lua library functions it defines on every call.
bench.publish adds gunicorn's share from its wrk runs (web CPU per request there, less
the WSGI app's here).

    .venv/bin/python -m bench.publish_profile
"""

from __future__ import annotations

import base64
import io
import json
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from flask import Flask
from werkzeug.datastructures import Authorization
from werkzeug.test import EnvironBuilder

from app import lua
from app.lua.held import HeldScript
from app.models import publish_calls
from app.models.event import parse_events
from app.models.publish_calls import Publish
from app.web import create_app
from app.web.auth import claimed_client
from app.web.body import decode_json
from app.web.context import EXTENSION
from config.settings import Settings
from dev import redis_server

BODY = b'{"type": "create", "url": "https://example.com/orders/1", "data": {"id": 1}}'
AUTH = "Basic " + base64.b64encode(b"pub:").decode()
SUBSCRIPTION = {"topics": ["bench"], "callback": "https://example.com/in"}
BATCHES, CALLS = 7, 1500


def cpu_micros(call: Callable[[], Any]) -> float:
    """CPU µs per call: the median of BATCHES batches, after a warm-up."""
    for _ in range(200):
        call()
    times = []
    for _ in range(BATCHES):
        started = time.process_time()
        for _ in range(CALLS):
            call()
        times.append((time.process_time() - started) / CALLS * 1e6)
    return statistics.median(times)


def ping(raw: socket.socket) -> None:
    """One PING and its answer on a plain socket: the floor of any round trip."""
    raw.sendall(b"PING\r\n")
    raw.recv(64)


def wsgi(app: Any, path: str, method: str = "GET", body: bytes | None = None) -> Callable[[], None]:
    """One request through a WSGI callable."""
    headers = [("Authorization", AUTH)] if body is not None else []
    base = EnvironBuilder(path=path, method=method, data=body, headers=headers).get_environ()
    status: list[str] = []

    def call() -> None:
        environ = dict(base, **{"wsgi.input": io.BytesIO(body or b"")})
        b"".join(app(environ, lambda s, _h, _e=None: status.append(s)))
        if not status.pop().startswith(("200", "204")):
            raise RuntimeError(f"{method} {path} failed")

    return call


def redis_side(client: redis.Redis, topic_step: Callable[[], Any], source: str) -> dict:
    """The topic step's script per call in Redis, and its library prelude alone."""
    body = lua._read("publish.lua")  # the script without its libraries
    prelude = client.register_script(source.removesuffix(body) + "\nreturn 0")
    found = {}
    for name, call in (("script", topic_step), ("prelude", lambda: prelude(keys=[], args=[]))):
        for _ in range(200):
            call()
        client.config_resetstat()
        for _ in range(CALLS):
            call()
        found[name] = float(client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"])
    return found


def measure(work: Path) -> dict[str, float]:
    """Every piece's CPU µs per call, on a valkey of its own under `work` (one token, one
    subscriber), so no other load's data or connections weigh on the figures."""
    server = redis_server.start(work / "profile-redis", persistent=False)
    try:
        settings = Settings(
            redis_url=server.url,
            root_key="r" * 32,
            publish_rate=100_000_000,
            publish_burst=1_000_000_000,
        )
        client = redis.Redis.from_url(server.url)
        app = create_app(settings)
        ctx = app.extensions[EXTENSION]
        http = app.test_client()
        root = {"Authorization": "Basic " + base64.b64encode(b"r" * 32 + b":").decode()}
        for name in ("pub", "sub"):
            http.post("/api_tokens", json={"name": name, "token": name}, headers=root)
        sub = {"Authorization": "Basic " + base64.b64encode(b"sub:").decode()}
        http.post("/subscription", json=SUBSCRIPTION, headers=sub)
        events = parse_events(json.loads(BODY), now_ms=1, allow_http=False, max_data=64)
        packed: list[object] = [
            events[0].type, events[0].url, events[0].ordering_key, events[0].pack("bench"), ""
        ]  # fmt: skip
        # publish.lua's call: no publish id (so no fingerprint); the rate limit on, at a
        # rate the loop never reaches, as in the web benchmarks (bench/common.py)
        p = Publish("bench", "pub", int(time.time() * 1000), 0, "", 60, packed)
        call = publish_calls.publish(ctx.keys, p, 3000, "", 100_000_000, 1_000_000_000)
        held = HeldScript(ctx.redis, ctx.scripts, "publish")
        raw = socket.create_connection(("127.0.0.1", server.port))
        # Flask's own WSGI entry, which the fast path wraps: a publish as it was before
        flask_only = lambda environ, start: Flask.wsgi_app(app, environ, start)  # noqa: E731
        figures = {
            "flask_health": cpu_micros(wsgi(app, "/health")),
            "flask_publish": cpu_micros(wsgi(flask_only, "/topics/bench", "POST", BODY)),
            "fast_publish": cpu_micros(wsgi(app, "/topics/bench", "POST", BODY)),
            "auth": cpu_micros(lambda: claimed_client(ctx, Authorization.from_header(AUTH))),
            "json": cpu_micros(lambda: decode_json(BODY)),
            "validation": cpu_micros(
                lambda: parse_events(json.loads(BODY), now_ms=1, allow_http=False, max_data=64)
            ),
            "held": cpu_micros(lambda: held.run(call)),
            "lua_script": cpu_micros(lambda: ctx.scripts.run(call)),
            "socket": cpu_micros(lambda: ping(raw)),
        }
        source = lua._sources()["publish"]  # the text Redis runs
        lua_side = redis_side(client, lambda: held.run(call), source)
        raw.close()
        client.close()
        return figures | {f"redis_{k}": v for k, v in lua_side.items()}
    finally:
        server.stop()


def rows(f: dict[str, float], gunicorn: float | None = None) -> list[str]:
    """The breakdown as a markdown table; `gunicorn`: web CPU per request under wrk at the
    floor less Flask's /health here, when bench.publish has it."""
    out = ["| piece | CPU µs per request | what it is |", "|---|---|---|"]
    line = lambda piece, value, what: out.append(f"| {piece} | {value:,.1f} | {what} |")  # noqa: E731
    if gunicorn is not None:
        line("gunicorn gthread", gunicorn, "HTTP parsing, thread hand-off, keep-alive "
             "polling, socket calls: web CPU per request under wrk at the floor, less the "
             "row below")  # fmt: skip
    line("Flask, GET /health", f["flask_health"], "the WSGI app's floor: request context, "
         "routing, hooks, Response, JSON of the answer")  # fmt: skip
    line("publish through the Flask view", f["flask_publish"], "as before the fast path "
         "(and still for chunked bodies): Flask plus everything below")  # fmt: skip
    line("publish, fast path (busbar's)", f["fast_publish"], "answered before Flask: "
         "everything below")  # fmt: skip
    line("- credentials", f["auth"], "Basic header parsed, root and token pattern checked")
    line("- JSON decoding", f["json"], "strict json.loads (no NaN, no lone surrogates)")
    line("- validation", f["validation"], "fields, URL rule, data msgpacked and its size")
    line("- topic step round trip, kept connection", f["held"], "EVALSHA packed by hiredis, "
         "sent and answered on the thread's connection (app/lua/held.py)")  # fmt: skip
    line("- the same through LuaScript", f["lua_script"], "as every other script (app/lua): "
         "redis-py's pool checkout, retry wrapper, metrics hooks, Python packer")  # fmt: skip
    line("- of which a bare socket round trip", f["socket"], "PING on a raw socket: the "
         "kernel's send, receive and wake-up")  # fmt: skip
    line("Redis: the topic step's script", f["redis_script"], "per EVALSHA, INFO "
         "commandstats (1 subscriber: token check, claim, counters, queue, gauges)")  # fmt: skip
    line("- of which its Lua libraries", f["redis_prelude"], "the functions of lib/*.lua "
         "defined anew on every call")  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    del argv
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        print("\n".join(rows(measure(Path(tmp)))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
