"""A subscription's own headers as its users meet them, `busbar web` and `busbar worker`
as processes and a real subscriber: plain and secret values arrive with every delivery
beside busbar's Basic uuid and signature; a listing says only that a secret is set; a
refused name is a 400 naming it and changes nothing; a change keeps a secret by name;
a worker whose key cannot open a secret (a header's, or the push key's of a JWT
subscriber) sends nothing (`secret_unsealable` in the attempt log) until the former key
is given, and `busbar secrets reseal` moves every secret to the new key. After all
that, the secret is in no Redis key, log line, listing or attempt entry."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import redis

from spec.integration.bus import ROOT_KEY, Bus, bus, events
from spec.integration.processes import wait_until
from spec.integration.subscriber import serving

SECRET = "sk-live-only-the-subscriber-knows-7f3a9c"
NEW_KEY = "a-new-bus-secret-key-0123456789abcdef"


def everything_in(client: redis.Redis) -> bytes:
    """Every key's name and value, whatever its type (on a cluster, every master's), as
    the raw bytes stored: a secret or an erased url is looked for in it (a repr would
    escape a multi-line key's newlines and hide it)."""
    out = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        if kind == "none":  # expired since the scan named it (a rate bucket, a publish id)
            continue
        read = {
            "string": lambda k: [client.get(k)],
            "hash": lambda k: [b for kv in client.hgetall(k).items() for b in kv],
            "list": lambda k: client.lrange(k, 0, -1),
            "set": lambda k: list(client.smembers(k)),
            "zset": lambda k: client.zrange(k, 0, -1),
            "stream": lambda k: [b for _, f in client.xrange(k) for kv in f.items() for b in kv],
        }[kind]
        out += [key, *(v for v in read(key) if v is not None)]
    return b"\n".join(out)


def everything_stored(the_bus: Bus) -> bytes:
    """everything_in() the bus's Redis, on a client of its own."""
    client = the_bus.redis()
    try:
        return everything_in(client)
    finally:
        client.close()


def test_own_headers_arrive_stay_write_only_and_survive_a_key_rotation(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    with serving() as sub, serving() as audit, bus(redis_url, tmp_path) as the_bus:
        the_bus.client("pub"), the_bus.client("billing"), the_bus.client("audit")
        # a JWT per push: the push key's private half is sealed like the headers' secrets
        the_bus.subscribe("audit", audit.url, ["orders"], max=2, timeout=0, auth={"type": "jwt"})
        given = {"X-Tenant": "acme", "X-Api-Key": {"value": SECRET, "secret": True}}
        the_bus.subscribe("billing", sub.url, ["orders"], max=2, timeout=0, headers=given)
        the_bus.publish("pub", "orders", events(2))
        sub.wait_for(2)
        first = sub.received[0]
        assert first.headers["X-Tenant"] == "acme" and first.headers["X-Api-Key"] == SECRET
        assert first.user == the_bus.subscription("billing")["uuid"]  # Basic uuid still there
        assert first.headers["webhook-signature"].startswith("v1,")

        listed = the_bus.subscription("billing")["headers"]
        assert listed["X-Tenant"] == "acme"
        assert listed["X-Api-Key"]["secret"] is True and listed["X-Api-Key"]["set_at"] > 0

        refused = the_bus.call("POST", "/subscription", "billing",
                               {"topics": ["orders"], "callback": sub.url,
                                "headers": {"Authorization": "Bearer x"}})  # fmt: skip
        assert refused.status_code == 400
        assert "headers.Authorization cannot be set" in refused.json()["error"]
        assert the_bus.subscription("billing")["headers"] == listed  # nothing changed

        kept = {"X-Api-Key": {"secret": True}, "X-Env": "prod"}
        the_bus.subscribe("billing", sub.url, ["orders"], max=2, timeout=0, headers=kept)
        the_bus.publish("pub", "orders", events(2, start=2))
        sub.wait_for(4)
        latest = sub.received[-1].headers
        assert latest["X-Api-Key"] == SECRET and latest["X-Env"] == "prod"
        assert "X-Tenant" not in latest

        # the key rotated on the worker alone: the secret does not open, nothing is sent
        for worker in the_bus.workers:
            worker.terminate()
            assert worker.wait(60) == 0
        the_bus.start_worker(BUSBAR_SECRET_KEY=NEW_KEY)
        the_bus.publish("pub", "orders", events(2, start=4))

        def unsealable() -> bool:
            found = the_bus.call("GET", "/subscriber/attempts", "billing").json()["attempts"]
            return any(a["reason"] == "secret_unsealable" for a in found)

        wait_until(unsealable, 30, "an attempt that could not open its secret")
        assert len(sub.delivered) == 4  # nothing more was sent
        # the end of a rotation: the former key given, everything sealed again, dropped
        the_bus.workers[-1].terminate()
        assert the_bus.workers[-1].wait(60) == 0
        env = {**the_bus.env, "BUSBAR_SECRET_KEY": NEW_KEY,
               "BUSBAR_SECRET_KEY_PREVIOUS": ROOT_KEY}  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "busbar", "secrets", "reseal"], env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "2 secrets in 2 places sealed again" in done.stdout  # a header, the push key
        assert SECRET not in done.stdout + done.stderr
        the_bus.start_worker(BUSBAR_SECRET_KEY=NEW_KEY, BUSBAR_RETRY_FIRST_MS="100")
        sub.wait_for(6, timeout=60), audit.wait_for(6, timeout=60)
        assert sub.received[-1].headers["X-Api-Key"] == SECRET
        assert audit.received[-1].headers["Authorization"].startswith("Bearer ")

        time.sleep(0.5)
        attempts = the_bus.call("GET", "/subscribers/billing/attempts", ROOT_KEY).text
        listings = [
            the_bus.call("GET", "/subscriptions", who).text for who in ("billing", ROOT_KEY)
        ]
        stored = everything_stored(the_bus)
    logs = b"".join(p.read_bytes() for p in tmp_path.glob("*.log"))
    assert logs and stored
    for place, text in [("attempts", attempts.encode()), ("listings", "".join(listings).encode()),
                        ("Redis", stored), ("logs", logs)]:  # fmt: skip
        assert SECRET.encode() not in text, f"the secret is in the {place}"
