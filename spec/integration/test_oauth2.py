"""OAuth2 client credentials as a receiver behind an API gateway meets them: `busbar web`
and `busbar worker`s as processes, a real token endpoint (authlib's server side,
spec/integration/oauth_server.py) and a subscriber that serves only requests whose
bearer token that server issued, unexpired, unrevoked and of the scope asked.

The token is fetched once for the whole bus, whatever the number of workers; a token
the receiver refuses (401) makes exactly one new token request and the batch goes
again at once; a token endpoint that fails is an attempt that failed (`auth_failed`,
the reason in the attempt log) until it answers again; the client secret, the private
key and every token issued are in no listing, log, attempt entry or Redis value."""

from __future__ import annotations

import time
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from spec.integration.bus import bus, events
from spec.integration.oauth_server import TokenServer, token_server
from spec.integration.processes import wait_until
from spec.integration.subscriber import Received, Subscriber, serving
from spec.integration.test_callback_headers import everything_stored
from spec.integration.tls import client_certificate, make_internal_ca

SECRET = "gw-secret-4f1d9c2ab7e0"


def guarded(receiver: Subscriber, tokens: TokenServer, client_id: str) -> None:
    """The receiver serves only requests with a valid token issued to `client_id`."""

    def answer(request: Received) -> tuple[int, float]:
        return (200 if tokens.check(request.headers.get("Authorization", "")) == client_id
                else 401, 0.0)  # fmt: skip

    receiver.responder = answer


def oauth2(tokens: TokenServer, client_id: str, **more: str) -> dict:
    return {"type": "oauth2", "token_url": tokens.url, "client_id": client_id,
            "scope": "events", **more}  # fmt: skip


def attempts(the_bus: object, token: str) -> list[dict]:
    return the_bus.call("GET", "/subscriber/attempts", token).json()["attempts"]  # type: ignore[attr-defined]


def test_one_token_serves_every_worker_and_a_refused_one_is_renewed_once(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    with token_server() as tokens, serving() as receiver, \
            bus(redis_url, tmp_path, workers=2) as the_bus:  # fmt: skip
        tokens.add("billing-api", SECRET)
        guarded(receiver, tokens, "billing-api")
        the_bus.client("pub"), the_bus.client("billing")
        auth = oauth2(tokens, "billing-api", client_secret=SECRET)
        the_bus.subscribe("billing", receiver.url, ["orders"], max=1, timeout=0, auth=auth)
        listed = the_bus.subscription("billing")["auth"]
        set_at = listed["client_secret"]["set_at"]
        assert listed == {"type": "oauth2", "token_url": tokens.url, "client_id": "billing-api",
                          "scope": "events", "audience": None,
                          "client_secret": {"secret": True, "set_at": set_at}}  # fmt: skip

        the_bus.publish("pub", "orders", events(12))
        wait_until(lambda: len(receiver.delivered) >= 12, 60, "12 deliveries")
        assert all(r.status == 200 for r in receiver.received)  # no request without a token
        assert tokens.requests == 1  # one token for both workers and every delivery
        assert len({r.peer for r in receiver.received}) >= 1

        # a change that gives no secret keeps the stored one (and the cached token), and
        # so does the same subscription posted again, secret and all (as at every start)
        kept = {k: v for k, v in auth.items() if k != "client_secret"}
        the_bus.subscribe("billing", receiver.url, ["orders"], max=1, timeout=0, auth=kept)
        the_bus.subscribe("billing", receiver.url, ["orders"], max=1, timeout=0, auth=auth)
        assert the_bus.subscription("billing")["auth"] == listed

        tokens.revoke_all("billing-api")  # the gateway no longer takes the token
        the_bus.publish("pub", "orders", events(3, start=12))
        wait_until(lambda: len(receiver.delivered) >= 15, 60, "3 more deliveries")
        assert tokens.requests == 2  # one 401 made exactly one new token, nothing else
        assert [r.status for r in receiver.received].count(401) == 1
        outcomes = {a["outcome"] for a in attempts(the_bus, "billing")}
        assert outcomes == {"2xx"}  # sent again at once with the new token: no failure

        tried = the_bus.call("POST", "/subscription/test", "billing").json()
        assert tried["status"] == 200, tried  # the test call fetches its own token
        assert tokens.requests == 3

        stored = everything_stored(the_bus)
        listings = the_bus.call("GET", "/subscriptions", "billing").text
        log = the_bus.call("GET", "/subscriber/attempts", "billing").text
    issued = [t.access_token for t in tokens.issued("billing-api")]
    assert len(issued) == 3
    logs = b"".join(p.read_bytes() for p in tmp_path.glob("*.log"))
    for value in [SECRET, *issued]:
        for place, text in [("Redis", stored), ("logs", logs), ("listing", listings.encode()),
                            ("attempt log", log.encode())]:  # fmt: skip
            assert value.encode() not in text, f"a secret or token is in the {place}"


def test_a_private_key_assertion_and_a_token_endpoint_that_fails(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()  # fmt: skip
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    public = key.public_key().public_bytes(serialization.Encoding.PEM, spki)
    with token_server(lifetime_s=2) as tokens, serving() as receiver, \
            bus(redis_url, tmp_path, BUSBAR_RETRY_FIRST_MS="200") as the_bus:  # fmt: skip
        tokens.add("audit-api", public_key=public.decode())
        guarded(receiver, tokens, "audit-api")
        tokens.down = True
        the_bus.client("pub"), the_bus.client("audit")
        auth = oauth2(tokens, "audit-api", private_key=pem)
        the_bus.subscribe("audit", receiver.url, ["orders"], max=1, timeout=0, auth=auth)
        assert "private_key" in the_bus.subscription("audit")["auth"]
        the_bus.publish("pub", "orders", events(1))

        def failed() -> list[dict]:
            return [a for a in attempts(the_bus, "audit") if a["reason"] == "auth_failed"]

        wait_until(lambda: len(failed()) >= 2, 60, "attempts failing as auth_failed")
        assert "the token endpoint answered 503 (temporarily_unavailable)" in failed()[0]["body"]
        assert not receiver.received  # nothing sent without a token
        tried = the_bus.call("POST", "/subscription/test", "audit").json()
        assert tried["reason"] == "auth_failed" and "503" in tried["body"], tried

        tokens.down = False  # the endpoint is back: the batch goes at its next attempt
        receiver.wait_for(1, timeout=60)
        assert receiver.received[0].status == 200
        first = tokens.issued("audit-api")
        assert len(first) == 1
        time.sleep(2.5)  # the token's 2 s are over: the next delivery gets a new one
        the_bus.publish("pub", "orders", events(1, start=1))
        wait_until(lambda: len(receiver.delivered) >= 2, 60, "the second delivery")
        assert [r.status for r in receiver.received] == [200, 200]
        assert len(tokens.issued("audit-api")) == 2
        logs = b"".join(p.read_bytes() for p in tmp_path.glob("*.log"))
        listing = the_bus.call("GET", "/subscriptions", "audit").text
    line = pem.split("\n")[1].encode()  # a line of the key's base64
    assert line not in logs and line.decode() not in listing


def test_a_token_url_on_https_gets_the_subscriptions_client_certificate(
    redis_url: str, tmp_path: Path
):  # fmt: skip
    ca = make_internal_ca(tmp_path / "ca")
    cert, key = client_certificate(ca, "billing")
    with token_server(tls=(ca.cert, ca.key), client_ca=ca.ca) as tokens, serving() as receiver, \
            bus(redis_url, tmp_path, BUSBAR_CA_BUNDLE=str(ca.ca)) as the_bus:  # fmt: skip
        tokens.add("billing-api", SECRET)
        tokens.add("audit-api", SECRET)
        guarded(receiver, tokens, "billing-api")
        the_bus.client("pub"), the_bus.client("billing"), the_bus.client("audit")
        the_bus.subscribe("billing", receiver.url, ["orders"], max=1, timeout=0,
                          auth=oauth2(tokens, "billing-api", client_secret=SECRET),
                          client_cert={"cert": cert, "key": key})  # fmt: skip
        the_bus.subscribe("audit", receiver.url, ["orders"], max=1, timeout=0,
                          auth=oauth2(tokens, "audit-api", client_secret=SECRET))  # fmt: skip
        the_bus.publish("pub", "orders", events(1))
        receiver.wait_for(1)  # billing's: its token came over mutual TLS
        assert [r.status for r in receiver.received] == [200]
        assert len(tokens.issued("billing-api")) == 1

        def refused() -> list[dict]:  # audit has no certificate: the endpoint refuses it
            return [a for a in attempts(the_bus, "audit") if a["reason"] == "auth_failed"]

        wait_until(lambda: bool(refused()), 30, "audit's token request refused")
        assert "could not be asked" in refused()[0]["body"]
        assert not tokens.issued("audit-api") and len(receiver.received) == 1
