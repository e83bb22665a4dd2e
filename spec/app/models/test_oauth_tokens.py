"""The bus-wide cache of OAuth2 access tokens (oauth_token.lua) on a real Redis: one
worker at a time fetches, the others use what it stored or wait; a token due for
renewal serves on while one worker renews it; a 401 drops the token only while it is
still the one cached, so workers that meet the same refused token fetch once between
them; a claim whose worker died frees itself; the hash expires with what it holds."""

from __future__ import annotations

import time

import redis

from app.lua import Scripts
from app.models import oauth_tokens as tokens
from app.models.keys import Keys
from app.models.oauth_tokens import CLAIM_MS, Cached
from spec.app.delivery.test_calls import place
from spec.app.models.test_script_calls import fits

FP = "fp1"


def test_the_calls_fill_the_scripts_header():
    keys = Keys("busbar:", 4)
    put = tokens.put(keys, "tok", 100, FP, "w1", "SEALED", 200, 300, "DIGEST")
    argv = fits(put)
    assert put.keys == [keys.oauth_token("tok")] and put.args[0] == "put"
    assert "now" in argv[place(put, 100)] and "fingerprint" in argv[place(put, FP)]
    assert "worker" in argv[place(put, "w1")] and "claim" in argv[place(put, CLAIM_MS)]
    assert "sealed token" in argv[place(put, "SEALED")] and "again" in argv[place(put, 200)]
    assert "expires" in argv[place(put, 300)] and "digest" in argv[place(put, "DIGEST")]
    drop = tokens.drop(keys, "tok", 1, FP, "w", "D")
    assert "digest" in fits(drop, extra_args=-3)[place(drop, "D")]
    assert fits(tokens.get(keys, "tok", 1, FP, "w"), extra_args=-4)
    assert put.read([b"token", b"S", b"5", b"9"]) == Cached("token", "S", 5, 9)
    assert put.read([b"wait", 7]) == Cached("wait", until=7)


def test_one_worker_fetches_and_the_others_use_what_it_stored(
    redis_client: redis.Redis, keys: Keys, scripts: Scripts
):  # fmt: skip
    T = int(time.time() * 1000)

    def run(call: object) -> Cached:
        return scripts.run(call)  # type: ignore[arg-type]

    assert run(tokens.get(keys, "tok", T + 1000, FP, "w1")) == Cached("fetch", "", 0, 0)
    assert run(tokens.get(keys, "tok", T + 1001, FP, "w2")) == Cached(
        "wait", until=T + 1000 + CLAIM_MS
    )
    run(
        tokens.put(
            keys, "tok", T + 1100, FP, "w1", "S1", T + 50_000, T + 60_000, tokens.digest("t1")
        )
    )
    assert run(tokens.get(keys, "tok", T + 1200, FP, "w2")) == Cached(
        "token", "S1", T + 50_000, T + 60_000
    )
    assert 0 < redis_client.pttl(keys.oauth_token("tok")) <= 60_000

    # due for renewal but valid: one worker renews, the other goes on with the old one
    assert run(tokens.get(keys, "tok", T + 51_000, FP, "w1")) == Cached(
        "fetch", "S1", 0, T + 60_000
    )
    assert run(tokens.get(keys, "tok", T + 51_001, FP, "w2")).sealed == "S1"
    run(
        tokens.put(
            keys, "tok", T + 51_100, FP, "w1", "S2", T + 100_000, T + 110_000, tokens.digest("t2")
        )
    )

    # a 401 to t2 met by two workers: one new fetch between them
    assert (
        run(tokens.drop(keys, "tok", T + 52_000, FP, "w1", tokens.digest("t2"))).action == "fetch"
    )
    assert run(tokens.drop(keys, "tok", T + 52_001, FP, "w2", tokens.digest("t2"))).action == "wait"
    run(
        tokens.put(
            keys, "tok", T + 52_100, FP, "w1", "S3", T + 100_000, T + 110_000, tokens.digest("t3")
        )
    )
    late = run(tokens.drop(keys, "tok", T + 52_200, FP, "w2", tokens.digest("t2")))
    assert late == Cached("token", "S3", T + 100_000, T + 110_000)  # t3 is not dropped for t2's 401

    # another configuration (a new secret, URL, scope): the token is not for it
    assert run(tokens.get(keys, "tok", T + 53_000, "fp2", "w2")).action == "fetch"
    assert run(tokens.get(keys, "tok", T + 53_001, "fp2", "w1")).action == "wait"
    assert (
        run(tokens.get(keys, "tok", T + 53_000 + CLAIM_MS, "fp2", "w1")).action == "fetch"
    )  # w2 died
