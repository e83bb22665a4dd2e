"""The composition matrix (docs/tests.md, "The composition matrix"): every pair of
subscriber-side features, each cell a subscription at `concurrency` 1 and at 4, all of
them at once on one bus (`busbar web` and one `busbar worker`), one https receiver that
requires a client certificate and one that does not, an OAuth2 token server and an
operator told of what happens.

The cells are a covering array: `pairwise()` (below, greedy and seeded, so the same
every run) picks rows of the dimensions until every value of every dimension has met
every value of every other in some row. `run()` drives every cell through the same
script (subscribe, pause the cells that pause, publish a round, resume, publish a second
round and a bulk that breaks the topic's schema, let the failing cells dead-letter,
replay them, try the test call) and records what the receivers saw; `problems()` then
says, per subscription, what differs from what the cell promises."""

from __future__ import annotations

import datetime
import itertools
import random
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from standardwebhooks import Webhook

from spec.conftest import ROOT_KEY
from spec.integration.bus import Bus, bus
from spec.integration.oauth_server import TokenServer, token_server
from spec.integration.subscriber import Received, Subscriber, serving
from spec.integration.tls import InternalCA, make_internal_ca
from spec.view import counter

# Each dimension and its values. Signatures are checked on every delivery of every cell
# (`signing` says whether the secret was rotated first: two signatures, both valid);
# the attempt log, the test call, exclusion per key and order per key too.
DIMENSIONS: dict[str, tuple[Any, ...]] = {
    "auth": ("basic", "jwt", "oauth2"),  # the Basic uuid, a JWT per push, an OAuth2 token
    "headers": ("none", "plain", "secret"),  # the subscription's own, plain or write-only
    "cert": ("none", "own"),  # its own TLS client certificate (mutual TLS)
    "signing": ("one", "rotated"),  # one secret, or rotated before anything was sent
    "event_ids": (False, True),
    "filter": ("none", "subset"),  # a content filter on the route, taking 3 in 4
    "schema": ("none", "enforced"),  # a JSON Schema on the topic's `update` events
    "route": ("plain", "priority", "ttl", "types", "coalesce"),
    "max": (1, 10),  # events a batch holds at most
    "failing": ("none", "dead_letters", "outage"),  # see FAILING
    "key": ("url", "explicit"),  # the ordering key: the url, or a `key` two urls share
    "pause": (False, True),  # paused through the first round, then resumed
    "retry_after": (False, True),  # the first batch answered 503 Retry-After: 1
    "transform": ("none", "shape", "drop"),  # see TRANSFORMS
}
CONCURRENCIES = (1, 4)  # every cell at both
FAILING = {
    "none": "every batch answered 200",
    "dead_letters": "max_attempts 2, a url of its own refused (500) until the dead letters "
    "are replayed",
    "outage": "every batch refused (500) for OUTAGE_S from the first, then 200: backoff, "
    "and no circuit opening for an outage that short",
}

# a route's transform (docs/transforms.md): each keeps `i` and `n` (what the checks read)
# and marks what it shaped; "drop" gives nothing for each bulk's `b` event
TRANSFORMS = {
    "none": None,
    "shape": "$merge([data, {'via': 'transform'}])",
    "drop": "$contains(url, /\\/b[0-9]+$/) ? null : $merge([data, {'via': 'transform'}])",
}
DROPPED_URL = re.compile(r"/b[0-9]+$")  # what "drop" drops
ISSUER = "https://bus.matrix.test"  # BUSBAR_PUBLIC_URL: the JWTs' issuer
DELAY_S = 0.02  # each answer takes this long, so deliveries overlap where they may
MAX_ATTEMPTS = 2
TTL_S = 2  # above a Retry-After's least wait (1 s), so a cell that waits one keeps events
PAUSE_S = 2.6  # the first round waits this long while paused: past its ttl
PRIORITY = 3  # the lane of a priority route; the rest use lane 10
OUTAGE_S = 1.5
# Each bulk publishes 8 events, numbered on across bulks, to these urls: u0-u3 every bulk,
# a and b its own (a0 and b0 for the first bulk...): a, b, then a again, which a
# coalescing route merges into the first a, inside the one script that takes the publish.
# With explicit keys a and b are one key, u0 and u3 another, u1 and u2 a third.
BULK = ("a", "u0", "b", "u1", "a", "u2", "u3", "u0")
KEYS = {"a": "f", "b": "f", "u0": "k0", "u3": "k0", "u1": "k1", "u2": "k1"}
ROUNDS = ((0, 8), (8, 16)), ((16, 24), (24, 32))  # each round: two bulks of event numbers
POISONED = (11, 27)  # of a url of their own, which a failing cell's receiver answers 500
# to (any batch holding one) until the dead letters are replayed
ODD = (32, 34)  # a bulk whose second event (an update) breaks the schema: refused whole
SCHEMA = {
    "type": "object",
    "properties": {"i": {"type": "integer", "minimum": 0}, "n": {"type": "integer"}},
    "required": ["i", "n"],
}
ENV = {
    "BUSBAR_PUBLIC_URL": ISSUER,
    "BUSBAR_RETRY_FIRST_MS": "100",
    "BUSBAR_RETRY_LONE_MS": "50",
    "BUSBAR_ATTEMPT_LOG": "1000",
    # each receiver's origin held to 3 connections a worker: the cells' deliveries wait
    # their turn there, parked (app/delivery/parking.py), so parking meets every feature
    "BUSBAR_ORIGIN_CONNECTIONS": "3",
    "BUSBAR_ORIGIN_CONNECTIONS_MAX": "3",
}
SETTLE_S = 45.0  # at most this long for the queues to drain (a cell that never does fails)


# ---------------------------------------------------------------------------------------
# The covering array


Pair = tuple[int, int, int, int]  # (dimension a, value index, dimension b, value index)


def _pairs(row: Sequence[int]) -> set[Pair]:
    return {(a, row[a], b, row[b]) for a, b in itertools.combinations(range(len(row)), 2)}


def pairwise(dimensions: Mapping[str, Sequence[Any]], candidates: int = 40) -> list[dict]:
    """Rows (one value per dimension) covering every pair of values of two dimensions.

    Greedy, as AETG: each row starts from the first pair still uncovered and fixes the
    other dimensions one at a time, in a shuffled order, to the value covering the most
    pairs still uncovered with those fixed so far; of `candidates` such rows, the one
    covering the most is kept. Seeded by the row's number: the same rows every run."""
    names = list(dimensions)
    sizes = [len(dimensions[n]) for n in names]
    uncovered: set[Pair] = set()
    for a, b in itertools.combinations(range(len(names)), 2):
        uncovered |= {(a, x, b, y) for x in range(sizes[a]) for y in range(sizes[b])}
    rows: list[list[int]] = []
    while uncovered:
        tried = [
            _row(sizes, uncovered, random.Random(len(rows) * candidates + attempt))
            for attempt in range(candidates)
        ]
        best = max(tried, key=lambda row: len(_pairs(row) & uncovered))  # the first of equals
        rows.append(best)
        uncovered -= _pairs(best)
    return [{n: dimensions[n][v] for n, v in zip(names, row, strict=True)} for row in rows]


def _row(sizes: list[int], uncovered: set[Pair], rng: random.Random) -> list[int]:
    """One candidate row: the first uncovered pair, then each other dimension (in an
    order `rng` shuffles) the value that covers the most uncovered pairs with those
    fixed so far (of equals, the first in an order `rng` shuffles)."""
    a, x, b, y = min(uncovered)
    row: dict[int, int] = {a: x, b: y}
    rest = [d for d in range(len(sizes)) if d not in row]
    rng.shuffle(rest)
    for d in rest:

        def gain(v: int, d: int = d) -> int:
            return sum(((e, w, d, v) if e < d else (d, v, e, w)) in uncovered
                       for e, w in row.items())  # fmt: skip

        options = list(range(sizes[d]))
        rng.shuffle(options)
        row[d] = max(options, key=gain)
    return [row[d] for d in range(len(sizes))]


def missing_pairs(rows: Iterable[Mapping[str, Any]], dimensions: Mapping[str, Sequence]) -> list:
    """The pairs of values no row holds: [(dimension, value, dimension, value)]."""
    seen = {
        (a, row[a], b, row[b]) for row in rows for a, b in itertools.combinations(dimensions, 2)
    }
    return [
        (a, x, b, y)
        for a, b in itertools.combinations(dimensions, 2)
        for x in dimensions[a]
        for y in dimensions[b]
        if (a, x, b, y) not in seen
    ]


# ---------------------------------------------------------------------------------------
# The cells and their events

ROUTES: dict[str, dict[str, Any]] = {  # each route's fields but its topic and filter
    "plain": {}, "priority": {"priority": PRIORITY}, "ttl": {"ttl": TTL_S},
    "types": {"types": ["update"]}, "coalesce": {"coalesce": True},
}  # fmt: skip
SHORT: dict[str, dict[Any, str]] = {  # the codes of the values in a cell's id
    "auth": {"basic": "", "jwt": "jwt", "oauth2": "oauth2"},
    "headers": {"none": "", "plain": "hdr", "secret": "secret"},
    "cert": {"none": "", "own": "mtls"},
    "signing": {"one": "", "rotated": "rotated"},
    "event_ids": {False: "", True: "ids"},
    "filter": {"none": "", "subset": "filter"},
    "schema": {"none": "", "enforced": "schema"},
    "route": {
        "plain": "",
        "priority": "prio",
        "ttl": "ttl",
        "types": "types",
        "coalesce": "coalesce",
    },
    "max": {1: "max1", 10: ""},
    "failing": {"none": "", "dead_letters": "dlq", "outage": "outage"},
    "key": {"url": "", "explicit": "keys"},
    "pause": {False: "", True: "pause"},
    "retry_after": {False: "", True: "retry"},
    "transform": {"none": "", "shape": "shaped", "drop": "dropping"},
}


@dataclass(frozen=True)
class Cell:
    number: int
    auth: str
    headers: str
    cert: str
    signing: str
    event_ids: bool
    filter: str
    schema: str
    route: str
    max: int
    failing: str
    key: str
    pause: bool
    retry_after: bool
    transform: str = "none"

    @property
    def id(self) -> str:
        codes = [SHORT[d][getattr(self, d)] for d in DIMENSIONS]
        return f"{self.number:02d}-" + ("+".join(c for c in codes if c) or "basic")

    @property
    def topic(self) -> str:  # topic names are letters and _: matrix_a, matrix_b...
        return "matrix_" + "".join(chr(97 + int(d)) for d in f"{self.number:02d}")

    @property
    def lane(self) -> int:
        return PRIORITY if self.route == "priority" else 10

    def route_body(self) -> dict[str, Any]:
        route: dict[str, Any] = {"topic": self.topic}
        if self.filter == "subset":
            route["filter"] = {"data.n": {"$lt": 6}}
        route.update(ROUTES[self.route])
        if TRANSFORMS[self.transform] is not None:
            route["transform"] = TRANSFORMS[self.transform]
        return route

    def takes(self, event: dict) -> bool:
        """Whether the cell's route takes this (accepted) event and sends it."""
        return self.routes(event) and not self.drops(event)

    def routes(self, event: dict) -> bool:
        """Whether the cell's route takes this (accepted) event."""
        n = event["data"]["n"]
        if self.filter == "subset" and not (isinstance(n, int) and n < 6):
            return False
        return not (self.route == "types" and event["type"] != "update")

    def drops(self, event: dict) -> bool:
        """Whether the cell's transform gives nothing for an event its route takes."""
        return (self.transform == "drop" and bool(DROPPED_URL.search(event["url"]))
                and self.routes(event))  # fmt: skip

    def shaped(self, data: dict) -> dict:
        """The data its receiver gets for an event's data as published."""
        return data if self.transform == "none" else {**data, "via": "transform"}


CELLS = tuple(Cell(n, **row) for n, row in enumerate(pairwise(DIMENSIONS)))


def event(cell: Cell, i: int) -> dict:
    """Event i of a cell: the url of its place in its bulk (BULK), or the poisoned one;
    the second and seventh of a bulk creates, the rest updates; `n` its place, which the
    filter takes below 6; the odd bulk's second event breaks the schema (`n` a string)."""
    place, bulk = i % len(BULK), i // len(BULK)
    where = "poisoned" if i in POISONED else BULK[place]
    made = {"type": "create" if place in (1, 6) else "update",
            "url": url(cell, f"{where}{bulk}" if where in ("a", "b") else where),
            "data": {"i": i, "n": "x" if i == ODD[1] else place}}  # fmt: skip
    if cell.key == "explicit":
        made["key"] = f"f{bulk}" if where in ("a", "b") else KEYS.get(where, "kp")
    return made


def url(cell: Cell, where: str) -> str:
    return f"https://o.test/{cell.topic}/{where}"


def key(event: dict) -> str:
    """An event's ordering key: its `key`, else its url."""
    return str(event.get("key", event["url"]))


def round_events(cell: Cell, number: int) -> list[dict]:
    return [event(cell, i) for lo, hi in ROUNDS[number] for i in range(lo, hi)]


# ---------------------------------------------------------------------------------------
# A subscription of a cell, and what its receiver saw


@dataclass
class Sub:
    cell: Cell
    concurrency: int
    callback: str = ""
    secrets: tuple[str, ...] = ()  # the current signing secret, then the previous one
    uuid: str = ""
    certificate: tuple[str, str] | None = None
    oauth_secret: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    problems: list[str] = field(default_factory=list)  # what the receiver refused (401)
    holding: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    overlaps: list[str] = field(default_factory=list)  # keys seen in two requests at once
    now: int = 0
    most: int = 0  # requests in flight at once, at most
    asked: bool = False  # the one 503 Retry-After given
    outage_until: float = 0.0  # an outage cell: refused until then (set by the first batch)
    poisoned: bool = False  # the receiver refuses the poisoned url (a failing cell)
    requests: list[Received] = field(default_factory=list)  # set after the run
    subscribed: dict = field(default_factory=dict)  # its listing after subscribing
    while_paused: dict | None = None  # its listing at the end of the pause
    deadletters: list[dict] = field(default_factory=list)  # before the replay
    replayed: int | None = None  # the replay's count
    tried: dict = field(default_factory=dict)  # the test call's answer
    attempts: list[dict] = field(default_factory=list)
    listing: dict = field(default_factory=dict)  # at the end
    told: list[dict] = field(default_factory=list)  # operational events about it

    @property
    def name(self) -> str:
        return f"m{self.cell.number:02d}c{self.concurrency}"

    @property
    def path(self) -> str:
        return f"/events/{self.name}"

    @property
    def api_key(self) -> str:
        return f"key-{self.name}-5e1f"

    @property
    def client_id(self) -> str:
        return f"api-{self.name}"


class Receiver:
    """The responder of both https receivers: finds the subscription by path, checks what
    a receiver of that subscription would (its credentials and signature: a 401 when
    any is wrong, noted), records keys in flight, and answers as the cell says."""

    def __init__(self, subs: Iterable[Sub]) -> None:
        self.subs = {s.path: s for s in subs}
        self.tokens: TokenServer | None = None
        self.jwks: jwt.PyJWKClient | None = None
        self.jwks_lock = threading.Lock()

    def __call__(self, request: Received) -> tuple[int, float]:
        sub = self.subs.get(request.path)
        if sub is None:
            return 404, 0.0
        wrong = self.credentials(sub, request)
        if not request.events:  # the test call
            with sub.lock:
                sub.problems += [f"test call: {p}" for p in wrong]
            return (401 if wrong else 200), 0.0
        keys = {key(e) for e in request.events}
        urls = {e["url"] for e in request.events}
        with sub.lock:
            sub.problems += [f"delivery: {p}" for p in wrong]
            sub.now += 1
            sub.most = max(sub.most, sub.now)
            sub.overlaps += [k for k in keys if sub.holding[k]]
            for k in keys:
                sub.holding[k] += 1
            if wrong:
                status = 401
            elif sub.cell.retry_after and not sub.asked:
                sub.asked, status = True, 503  # Retry-After: 1 goes with every answer
            elif sub.poisoned and url(sub.cell, "poisoned") in urls:
                status = 500
            elif sub.cell.failing == "outage" and (
                not sub.outage_until or time.monotonic() < sub.outage_until
            ):
                sub.outage_until = sub.outage_until or time.monotonic() + OUTAGE_S
                status = 500
            else:
                status = 200
        time.sleep(DELAY_S)
        with sub.lock:
            sub.now -= 1
            for k in keys:
                sub.holding[k] -= 1
        return status, 0.0

    def credentials(self, sub: Sub, request: Received) -> list[str]:
        cell, wrong = sub.cell, []
        headers = {k.lower(): v for k, v in request.headers.items()}
        authorization = headers.get("authorization", "")
        if cell.auth == "basic":
            if request.user != sub.uuid:
                wrong.append(f"Basic user {request.user!r}, not the uuid")
        elif cell.auth == "jwt":
            wrong += self.jwt_wrong(sub, authorization)
        elif self.tokens is None or self.tokens.check(authorization) != sub.client_id:
            wrong.append("no valid OAuth2 token of its client")
        api_key = {"none": None, "plain": None, "secret": sub.api_key}[cell.headers]
        if headers.get("x-api-key") != api_key:
            wrong.append(f"X-Api-Key {headers.get('x-api-key')!r}")
        tenant = sub.name if cell.headers == "plain" else None
        if headers.get("x-tenant") != tenant:
            wrong.append(f"X-Tenant {headers.get('x-tenant')!r}")
        if request.client_cn != (sub.name if cell.cert == "own" else ""):
            wrong.append(f"client certificate {request.client_cn!r}")
        signatures = headers.get("webhook-signature", "").split()
        if len(signatures) != len(sub.secrets):
            wrong.append(f"{len(signatures)} signatures, not {len(sub.secrets)}")
        for secret in sub.secrets:  # each secret verifies (a rotated one: both)
            try:
                Webhook(secret).verify(request.raw, headers)
            except Exception as error:  # standardwebhooks' WebhookVerificationError
                wrong.append(f"signature: {error}")
        return wrong

    def jwt_wrong(self, sub: Sub, authorization: str) -> list[str]:
        kind, _, token = authorization.partition(" ")
        if kind != "Bearer" or self.jwks is None:
            return [f"Authorization {kind!r}, not a Bearer JWT"]
        try:
            with self.jwks_lock:
                signer = self.jwks.get_signing_key_from_jwt(token)
            claims = jwt.decode(token, signer.key, algorithms=["ES256"], audience=sub.callback,
                                issuer=ISSUER)  # fmt: skip
        except jwt.PyJWTError as error:
            return [f"JWT: {error}"]
        return [] if claims.get("sub") == sub.name else [f"JWT sub {claims.get('sub')!r}"]


# ---------------------------------------------------------------------------------------
# The run


SIGNING_ONLY = x509.KeyUsage(True, False, False, False, False, False, False, False, False)


@dataclass(frozen=True)
class Pki:
    """The receivers' CA and server certificate (tls.py's, made with openssl) and a client
    certificate for each subscription of a cell with one, CN its name: issued here with
    `cryptography` (as tls.client_certificate would with openssl, in a fraction of the
    time), once for both layouts."""

    ca: InternalCA
    clients: dict[str, tuple[str, str]]  # name -> (cert PEM, key PEM)


def pki(where: Path, cells: Sequence[Cell] = CELLS) -> Pki:
    ca = make_internal_ca(where)
    ca_cert = x509.load_pem_x509_certificate(ca.ca.read_bytes())
    ca_key = serialization.load_pem_private_key((where / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    now = datetime.datetime.now(datetime.UTC)
    pem = serialization.Encoding.PEM
    clients = {}
    for sub in (Sub(cell, c) for cell in cells for c in CONCURRENCIES):
        if sub.cell.cert != "own":
            continue
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, sub.name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(SIGNING_ONLY, critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
            .sign(ca_key, hashes.SHA256())
        )
        private = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())  # fmt: skip
        clients[sub.name] = (cert.public_bytes(pem).decode(), private.decode())
    return Pki(ca, clients)


@dataclass
class Outcome:
    subs: list[Sub]
    odd: dict[int, int]  # cell -> the status of its odd bulk's publish
    coalesced: int  # busbar's counter of events merged away (every coalescing cell)
    logs: str
    times: dict[str, float]  # phase -> seconds from the start
    unsettled: list[str]  # the phases whose wait ran out


def run(redis_url: str, log_dir: Path, keys: Pki, cells: Sequence[Cell] = CELLS) -> Outcome:
    """The whole matrix on the layout `redis_url` belongs to: one bus, every cell's
    subscriptions at once, driven through the same script; what each met, recorded."""
    subs = [Sub(cell, c, certificate=keys.clients.get(f"m{cell.number:02d}c{c}"))
            for cell in cells for c in CONCURRENCIES]  # fmt: skip
    receiver = Receiver(subs)
    plain = Subscriber(responder=receiver, headers_out={"Retry-After": "1"})
    mutual = Subscriber(responder=receiver, headers_out={"Retry-After": "1"})
    ops = Subscriber()
    driver = Driver(cells, subs, time.monotonic())
    tls = (keys.ca.cert, keys.ca.key)
    with ExitStack() as stack:
        receiver.tokens = stack.enter_context(token_server())
        stack.enter_context(serving(plain, tls=tls))
        stack.enter_context(serving(mutual, tls=tls, client_ca=keys.ca.ca))
        stack.enter_context(serving(ops))
        b = stack.enter_context(bus(redis_url, log_dir, BUSBAR_CA_BUNDLE=str(keys.ca.ca), **ENV))
        receiver.jwks = jwt.PyJWKClient(f"{b.base}/.well-known/jwks.json")
        driver.mark("bus up")
        subscribe_all(b, subs, receiver.tokens, plain.url, mutual.url, ops.url)
        driver.mark("subscribed")
        odd = driver.publish(b)
        driver.replay(b)
        for sub in subs:
            answer = b.call("POST", "/subscription/test", sub.name)
            sub.tried = answer.json() if answer.status_code == 200 else {"http": answer.text}
        driver.mark("test calls")
        coalesced = driver.collect(b, plain, mutual, ops)
    logs = "\n".join(p.read_text(errors="replace") for p in sorted(log_dir.glob("*.log")))
    driver.mark("stopped")
    return Outcome(subs, odd, coalesced, logs, driver.times, driver.late)


@dataclass
class Driver:
    """The script every cell goes through, phase by phase, and how long each took."""

    cells: Sequence[Cell]
    subs: list[Sub]
    began: float
    times: dict[str, float] = field(default_factory=dict)  # phase -> s from the start
    late: list[str] = field(default_factory=list)  # the waits that ran out

    def mark(self, phase: str) -> None:
        self.times[phase] = round(time.monotonic() - self.began, 2)

    def settle(self, what: str, done: Callable[[], bool], timeout: float) -> None:
        """Wait for `done`, at most `timeout`; if it never holds, note it and go on: the
        cells it concerns fail their own checks, the others still pass theirs."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                self.late.append(what)
                return
            time.sleep(0.05)

    def publish(self, b: Bus) -> dict[int, int]:
        """The first round with the pausing cells paused, held past its ttl, then the
        second round and the odd bulk: the odd bulk's status, per cell."""
        for sub in self.subs:
            if sub.cell.pause:
                answer = b.call("POST", "/subscriber/pause", sub.name)
                assert answer.status_code == 200, answer.text
        for cell in self.cells:
            for lo, hi in ROUNDS[0]:
                b.publish("pub", cell.topic, [event(cell, i) for i in range(lo, hi)])
        published = time.monotonic()
        self.mark("first round")
        time.sleep(max(0.0, published + PAUSE_S - time.monotonic()))
        listed = listing(b)
        for sub in self.subs:
            if sub.cell.pause:
                sub.while_paused = listed[sub.name]
                answer = b.call("POST", "/subscriber/resume", sub.name)
                assert answer.status_code == 200, answer.text
        self.mark("resumed")
        odd = {}
        for cell in self.cells:
            for lo, hi in ROUNDS[1]:
                b.publish("pub", cell.topic, [event(cell, i) for i in range(lo, hi)])
            answer = b.call("POST", f"/topics/{cell.topic}", "pub", [event(cell, i) for i in ODD])
            odd[cell.number] = answer.status_code
        self.mark("second round")
        return odd

    def replay(self, b: Bus) -> None:
        """Once every queue is empty, the failing cells' dead letters noted and replayed
        with the receiver mended; then until every queue is empty again."""

        def drained(deadletters: bool = False) -> bool:
            return all(
                e["events"]["queued"] == 0 and e["in_flight"] == 0
                and (not deadletters or e["deadletters"] == 0)
                for e in listing(b).values()
            )  # fmt: skip

        self.settle("the second round", drained, SETTLE_S)
        self.mark("drained")
        for sub in self.subs:
            if sub.cell.failing == "dead_letters":
                sub.deadletters = b.call("GET", "/subscriber/deadletters", sub.name).json()
                with sub.lock:
                    sub.poisoned = False
                answer = b.call("POST", "/subscriber/deadletters/replay", sub.name)
                assert answer.status_code == 202, answer.text
                sub.replayed = answer.json()["replayed"]
        self.settle("the replay", lambda: drained(deadletters=True), SETTLE_S)
        self.mark("replayed")

    def collect(self, b: Bus, *receivers: Subscriber) -> int:
        """What each subscription met: its requests, once its attempt log holds as many,
        its listing and the operator's events about it; busbar's count of coalesced
        events."""
        *callbacks, ops = receivers

        def logged() -> bool:
            for sub in self.subs:
                sub.requests = [r for c in callbacks for r in c.received if r.path == sub.path]
                sub.attempts = attempts(b, sub.name)
                if len(sub.attempts) != sum(1 for r in sub.requests if r.events):
                    return False
            return True

        self.settle("the attempt log", logged, 10)
        self.settle("the operator's events", lambda: listing(b)["noc"]["events"]["queued"] == 0, 10)
        listed = listing(b)
        for sub in self.subs:
            sub.listing = listed[sub.name]
            sub.told = [e["data"] for e in ops.delivered if e["data"].get("subscriber") == sub.name]
        client = b.redis()
        try:
            coalesced = counter(client, b.keys, "events.coalesced")
        finally:
            client.close()
        self.mark("checked")
        return coalesced


def subscribe_all(
    b: Bus, subs: list[Sub], tokens: TokenServer | None, plain: str, mutual: str, ops: str
) -> None:
    """The publisher, the operator (told of every subscriber) and each cell's
    subscriptions as its features say; each its secret, rotated first for some."""
    assert tokens is not None
    b.client("pub")
    operator = {"name": "noc", "token": "noc", "operator": True}
    made = b.call("POST", "/api_tokens", ROOT_KEY, operator)
    assert made.status_code == 201, made.text
    b.subscribe("noc", ops, ["busbar_operations"], max=100, timeout=0)
    for cell in sorted({s.cell for s in subs}, key=lambda c: c.number):
        if cell.schema == "enforced":
            put = b.call("PUT", f"/topics/{cell.topic}/schemas/update", "pub", SCHEMA)
            assert put.status_code == 200, put.text
    for sub in subs:
        cell = sub.cell
        b.client(sub.name)
        sub.callback = f"{mutual if cell.cert == 'own' else plain}/{sub.name}"
        sub.poisoned = cell.failing == "dead_letters"
        b.subscribe(sub.name, sub.callback, [cell.route_body()], **settings(sub, tokens))
        sub.subscribed = b.call("GET", "/subscriptions", sub.name).json()[0]
        sub.uuid = sub.subscribed.get("uuid") or ""
        first = b.call("GET", "/subscriber/secret", sub.name).json()["secret"]
        sub.secrets = (first,)
        if cell.signing == "rotated":
            rotated = b.call("POST", "/subscriber/secret/rotate", sub.name).json()["secret"]
            sub.secrets = (rotated, first)


def settings(sub: Sub, tokens: TokenServer) -> dict[str, Any]:
    """A subscription's fields but its topics and callback, as its cell's features say."""
    cell = sub.cell
    body: dict[str, Any] = {
        "max": cell.max, "timeout": 0, "concurrency": sub.concurrency,
        "event_ids": cell.event_ids,
    }  # fmt: skip
    if cell.failing == "dead_letters":
        body["max_attempts"] = MAX_ATTEMPTS
    if cell.headers == "plain":
        body["headers"] = {"X-Tenant": sub.name}
    elif cell.headers == "secret":
        body["headers"] = {"X-Api-Key": {"value": sub.api_key, "secret": True}}
    if cell.auth == "jwt":
        body["auth"] = {"type": "jwt"}
    elif cell.auth == "oauth2":
        sub.oauth_secret = f"oauth-{sub.name}-9c2d"
        tokens.add(sub.client_id, sub.oauth_secret)
        body["auth"] = {
            "type": "oauth2", "token_url": tokens.url, "client_id": sub.client_id,
            "client_secret": sub.oauth_secret, "scope": "events",
        }  # fmt: skip
    if sub.certificate is not None:
        cert, key = sub.certificate
        body["client_cert"] = {"cert": cert, "key": key}
    return body


def listing(b: Bus) -> dict[str, dict]:
    return {e["name"]: e for e in b.call("GET", "/subscriptions", ROOT_KEY).json()}


def attempts(b: Bus, token: str) -> list[dict]:
    answer = b.call("GET", "/subscriber/attempts?limit=1000", token)
    assert answer.status_code == 200, answer.text
    found: list[dict] = answer.json()["attempts"]
    return found


# ---------------------------------------------------------------------------------------
# What each subscription must have met


def accepted(cell: Cell, odd_status: int) -> list[dict]:
    """Every event of the cell the bus took (204), in publish order."""
    taken = round_events(cell, 0) + round_events(cell, 1)
    return taken + ([event(cell, i) for i in ODD] if odd_status == 204 else [])


def number(e: dict) -> int:
    return int(e["data"]["i"])


def increasing(seq: list[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(seq))


def by(requests: Iterable[Received], group: Callable[[dict], str]) -> dict[str, list[int]]:
    """Event numbers per group (key or url), in the order the requests were made."""
    found: dict[str, list[int]] = defaultdict(list)
    for r in requests:
        for e in r.events:
            found[group(e)].append(number(e))
    return found


@dataclass
class Seen:
    """One subscription's run, sorted out for the checks."""

    sub: Sub
    twin: Sub  # the same cell at the other concurrency
    odd: int  # the status of the cell's odd bulk
    sent: dict[int, dict]  # every event the bus took, by number
    expected: set[int]  # those the cell's route takes
    first_round: set[int]  # those of the first round
    requests: list[Received]  # with events, in the order they were made
    tests: list[Received]  # the test call's
    acked: list[Received]
    refused: list[Received]  # answered 500
    dead: set[int]  # the dead letters before the replay
    firsts: list[Received]  # acknowledged, not a replay
    replays: list[Received]  # acknowledged, of dead letters
    got: Counter[int]  # events acknowledged, each how often

    @classmethod
    def of(cls, sub: Sub, outcome: Outcome) -> Seen:
        cell = sub.cell
        odd = outcome.odd[cell.number]
        sent = {number(e): e for e in accepted(cell, odd)}
        requests = sorted((r for r in sub.requests if r.events), key=lambda r: r.started)
        acked = [r for r in requests if 200 <= r.status < 300]
        dead = {number(e) for e in sub.deadletters}
        replays = [r for r in acked if any(number(e) in dead for e in r.events)]
        return cls(
            sub, next(s for s in outcome.subs if s.cell == cell and s is not sub), odd, sent,
            {i for i, e in sent.items() if cell.takes(e)},
            {number(e) for e in round_events(cell, 0) if cell.takes(e)},
            requests, [r for r in sub.requests if not r.events], acked,
            [r for r in requests if r.status == 500], dead,
            [r for r in acked if r not in replays], replays,
            Counter(number(e) for r in acked for e in r.events),
        )  # fmt: skip


def problems(sub: Sub, outcome: Outcome, ordering: bool = False) -> list[str]:
    """What this subscription met that its cell does not promise; [] when all held. With
    `ordering`, of order and exclusion per key alone; else of everything else."""
    seen = Seen.of(sub, outcome)
    checks = [order] if ordering else [publishing, arrivals, dropped, dead_letters,
                                       credentials, pausing, event_ids, attempt_log,
                                       test_call, listed]  # fmt: skip
    return [problem for check in checks for problem in check(seen)]


def publishing(seen: Seen) -> list[str]:
    """A schema refuses the bulk that breaks it, whole; without one it is taken."""
    want = 400 if seen.sub.cell.schema == "enforced" else 204
    return [] if seen.odd == want else [f"the bulk breaking the schema was answered {seen.odd}"]


def arrivals(seen: Seen) -> list[str]:
    """Each event the route takes acknowledged once at most, exactly as published, and
    nothing else."""
    cell, found = seen.sub.cell, []
    found += [f"event {i} acknowledged {n} times" for i, n in seen.got.items() if n > 1]
    if set(seen.got) - seen.expected:
        found.append(f"events it should never get: {sorted(set(seen.got) - seen.expected)}")
    for r in seen.requests:
        for e in r.events:
            want = seen.sent.get(number(e))
            shown = {k: e[k] for k in ("topic", "type", "url", "data", "key") if k in e}
            if want is not None:  # as its route's transform shapes it
                want = {**want, "data": cell.shaped(want["data"])}
            if want is None or shown != {"topic": cell.topic, **want}:
                found.append(f"event delivered as {e}, published as {want}")
            if ("id" in e) != cell.event_ids or not str(e.get("id", "evt_")).startswith("evt_"):
                found.append(f"event {number(e)} with id {e.get('id')!r}")
    return found


def dropped(seen: Seen) -> list[str]:
    """Every event the route takes acknowledged, but what the route drops: past its ttl
    (and counted so), or merged into a newer state of its url (the last state of each
    url arrives)."""
    cell, found = seen.sub.cell, []
    missing = seen.expected - set(seen.got)
    expired = seen.sub.listing.get("dropped", {}).get("expired")
    given_nothing = seen.sub.listing.get("events", {}).get("transformed_out")
    dropping = {i for i, e in seen.sent.items() if cell.drops(e)}
    if cell.route == "ttl":
        # an event its transform drops is counted once: expired, when its ttl ran out
        # before it was shaped, or given nothing
        if expired != len(missing) + len(dropping) - (given_nothing or 0):
            found.append(f"{sorted(missing)} never acknowledged, {expired} counted expired, "
                         f"{given_nothing} of {len(dropping)} given nothing")  # fmt: skip
        if cell.pause and not seen.first_round <= missing:
            late = sorted(seen.first_round - missing)
            found.append(f"delivered after their ttl, held by the pause: {late}")
    elif cell.route == "coalesce":
        last = {seen.sent[i]["url"]: i for i in sorted(seen.expected)}
        if not set(last.values()) <= set(seen.got):
            lost = sorted(set(last.values()) - set(seen.got))
            found.append(f"the last state of a url never arrived: {lost}")
    elif missing:
        found.append(f"never acknowledged: {sorted(missing)}")
    if cell.route != "ttl" and expired != 0:
        found.append(f"{expired} expired without a ttl")
    if cell.route != "ttl" and given_nothing != len(dropping):  # a ttl may expire some first
        found.append(f"{given_nothing} counted transformed_out, not {len(dropping)}")
    return found


def dead_letters(seen: Seen) -> list[str]:
    """A failing cell: the batches holding the refused url go to the dead letters after
    max_attempts (their batch-mates with them), in key order, and come back with the
    replay, each once; nothing of that url gets through before. An outage: refused
    batches, then everything, and no dead letters."""
    sub, cell, found = seen.sub, seen.sub.cell, []
    refused = {number(e) for r in seen.refused for e in r.events}
    dead = seen.dead
    told = sum(t["events"] for t in sub.told if t["kind"] == "subscriber.dead_lettered")
    if told != len(dead):
        found.append(f"the operator was told of {told} dead letters, not {len(dead)}")
    if cell.failing != "dead_letters":
        if dead or (refused and cell.failing == "none"):
            found.append(f"refused {sorted(refused)}, dead letters {sorted(dead)}")
        return found
    if not dead <= refused or (not dead and cell.route != "ttl"):
        found.append(f"dead letters {sorted(dead)}, refused {sorted(refused)}")
    if cell.route not in ("ttl", "coalesce") and dead != refused:  # those may drop some
        found.append(f"dead letters {sorted(dead)} are not the refused {sorted(refused)}")
    for letter in sub.deadletters:
        if (letter["attempts"], letter["last_status"]) != (MAX_ATTEMPTS, "500"):
            found.append(f"dead letter {letter}")
    if sub.replayed != len(dead):
        found.append(f"{sub.replayed} replayed of {len(dead)} dead letters")
    through = {number(e) for r in seen.firsts for e in r.events} & set(POISONED)
    if through:
        found.append(f"the refused url's events {sorted(through)} got through")
    if any(number(e) not in dead for r in seen.replays for e in r.events):
        found.append("a replayed batch held events that were not dead letters")
    return found


def order(seen: Seen) -> list[str]:
    """Each key in publish order (first deliveries, the dead letters, the replay's), one
    lane in publish order at concurrency 1 (but where coalescing puts a newer state in an
    older one's place), never one key in two requests at once, at most `concurrency` at
    once."""
    sub, cell, c, found = seen.sub, seen.sub.cell, seen.sub.concurrency, []
    letters: dict[str, list[int]] = defaultdict(list)
    for letter in sub.deadletters:
        letters[key(letter)].append(number(letter))
    bad = {k: v for k, v in letters.items() if not increasing(v)}
    if bad:
        found.append(f"dead letters out of their key's order: {bad}")
    for what, requests in (("first deliveries", seen.firsts), ("the replay", seen.replays)):
        bad = {k: v for k, v in by(requests, key).items() if not increasing(v)}
        if bad:
            found.append(f"a key out of order in {what}: {bad}")
    if cell.key == "explicit":  # a url's states in order too (its key's, above, if not)
        bad = {u: v for u, v in by(seen.firsts, lambda e: e["url"]).items() if not increasing(v)}
        if bad:
            found.append(f"a url out of order: {bad}")
    numbers = [number(e) for r in seen.firsts for e in r.events]
    if c == 1 and cell.route != "coalesce" and not increasing(numbers):
        found.append(f"at concurrency 1, out of publish order: {numbers}")
    if sub.overlaps:
        found.append(f"a key in two deliveries at once: {sorted(set(sub.overlaps))}")
    if sub.most > c:
        found.append(f"{sub.most} requests in flight at once at concurrency {c}")
    return found


def credentials(seen: Seen) -> list[str]:
    """Every request (deliveries and the test call) with the cell's credentials and a
    valid signature: the receiver noted each one missing or wrong (and answered 401)."""
    return sorted(set(seen.sub.problems))


def pausing(seen: Seen) -> list[str]:
    """Paused: nothing sent, everything queued (once per url when coalescing), the
    operator told of the pause and the resume, in that order."""
    sub, cell, found = seen.sub, seen.sub.cell, []
    kinds = [t["kind"] for t in sub.told if t["kind"] in ("subscriber.paused",
                                                          "subscriber.resumed")]  # fmt: skip
    if not cell.pause:
        return [f"the operator was told {kinds}"] if kinds else []
    paused = sub.while_paused or {}
    if (paused.get("paused") or {}).get("by") != sub.name:
        found.append(f"not paused by its client: {paused.get('paused')}")
    queued = paused.get("events", {}).get("queued")
    # queued as published: a transform runs when they are sent, and drops none before
    routed = {number(e) for e in round_events(cell, 0) if cell.routes(e)}
    urls = {seen.sent[i]["url"] for i in routed}
    want = len(urls) if cell.route == "coalesce" else len(routed)
    if cell.route != "ttl" and queued != want:
        found.append(f"{queued} events queued while paused, not {want}")
    if kinds != ["subscriber.paused", "subscriber.resumed"]:
        found.append(f"the operator was told {kinds} of the pause")
    return found


def event_ids(seen: Seen) -> list[str]:
    """With event_ids, one id per event: the same in every copy (a retry, the replay)
    and in the twin subscription, never one for two events."""
    if not seen.sub.cell.event_ids:
        return []
    ids: dict[int, set[str]] = defaultdict(set)
    for sub in (seen.sub, seen.twin):
        for r in sub.requests:
            for e in r.events:
                ids[number(e)].add(e.get("id", ""))
    found = []
    differ = {i: v for i, v in ids.items() if len(v) != 1}
    if differ:
        found.append(f"event ids that differ between copies: {differ}")
    if len({min(v) for v in ids.values()}) != len(ids):
        found.append("two events with one id")
    return found


def attempt_log(seen: Seen) -> list[str]:
    """One entry per request, its status and outcome as the receiver answered, the
    events acknowledged, the cell's lane, the one Retry-After wait of 1 s."""
    cell, log, found = seen.sub.cell, seen.sub.attempts, []
    statuses = Counter(a["status"] for a in log)
    answered = Counter(r.status for r in seen.requests)
    if statuses != answered:
        found.append(f"attempt log statuses {dict(statuses)}, answers {dict(answered)}")
    outcomes = Counter(a["outcome"] for a in log)
    want = Counter({"2xx": answered[200], "5xx": answered[500] + answered[503]})
    if outcomes != +want:
        found.append(f"attempt outcomes {dict(outcomes)}, not {dict(+want)}")
    events = sum(a["events"] for a in log if a["outcome"] == "2xx")
    if events != sum(len(r.events) for r in seen.acked):
        found.append(f"the attempt log's 2xx events ({events}) are not those acknowledged")
    if {a["lane"] for a in log} - {cell.lane}:
        found.append(f"attempts on lanes {sorted({a['lane'] for a in log})}, not {cell.lane}")
    waits = [a["retry_after_ms"] for a in log if a["status"] == 503]
    if waits != ([1000] if cell.retry_after else []):
        found.append(f"Retry-After waits on record: {waits}")
    if any(a["retry_after_ms"] is not None for a in log if a["status"] != 503):
        found.append("a wait on record for an answer that asked for none")
    versions = {a["transform_version"] for a in log}
    if versions - {None if cell.transform == "none" else 1}:
        found.append(f"attempts name transform versions {versions}")
    return found


def test_call(seen: Seen) -> list[str]:
    """The test call answers what a delivery meets: 200 (its credentials were checked
    with the deliveries'), one request of `[]` marked Busbar-Test."""
    tried, tests, found = seen.sub.tried, seen.tests, []
    if tried.get("status") != 200 or tried.get("reason") is not None:
        found.append(f"the test call answered {tried}")
    if [(t.raw, t.status, t.headers.get("Busbar-Test")) for t in tests] != [(b"[]", 200, "1")]:
        found.append(f"the test call's requests: {[(t.raw, t.status) for t in tests]}")
    return found


def listed(seen: Seen) -> list[str]:
    """The listing says what was set, a write-only value never; at the end nothing
    queued, no dead letter, not paused, the circuit closed and never opened."""
    sub, cell, found = seen.sub, seen.sub.cell, []
    shown = sub.listing
    if (shown.get("concurrency"), shown.get("event_ids")) != (sub.concurrency, cell.event_ids):
        found.append(f"listed concurrency {shown.get('concurrency')}, ids {shown.get('event_ids')}")
    if shown.get("max_attempts") != (MAX_ATTEMPTS if cell.failing == "dead_letters" else None):
        found.append(f"listed max_attempts {shown.get('max_attempts')}")
    if (shown.get("auth") or {}).get("type") != cell.auth:
        found.append(f"listed auth {shown.get('auth')}")
    text = str(sub.subscribed) + str(shown)
    key_line = sub.certificate[1].splitlines()[1] if sub.certificate else ""
    if any(v and v in text for v in (sub.api_key, sub.oauth_secret, key_line)):
        found.append("a write-only value is listed")
    headers = sub.subscribed.get("headers") or {}
    if cell.headers == "secret" and (headers.get("X-Api-Key") or {}).get("secret") is not True:
        found.append(f"the secret header listed as {headers}")
    if cell.cert == "own" and sub.name not in str((shown.get("client_cert") or {}).get("subject")):
        found.append(f"listed client_cert {shown.get('client_cert')}")
    routes = [r.get("transform") for r in shown.get("routes", [])]
    version = None if cell.transform == "none" else 1
    if routes != [TRANSFORMS[cell.transform]] or shown.get("transform_version") != version:
        found.append(f"listed transforms {routes}, version {shown.get('transform_version')}")
    end = (shown.get("events", {}).get("queued"), shown.get("deadletters"),
           shown.get("paused"), shown.get("circuit", {}).get("state"))  # fmt: skip
    if end != (0, 0, None, "closed"):
        found.append(f"at the end queued, dead letters, paused, circuit: {end}")
    if any(t["kind"] == "subscriber.circuit_opened" for t in sub.told):
        found.append("its circuit opened")
    return found


def coalescing_problems(outcome: Outcome) -> list[str]:
    """Every event a coalescing route did not deliver was merged into a newer one:
    busbar's `events.coalesced` counts exactly those, over every coalescing cell."""
    merged = 0
    for sub in outcome.subs:
        if sub.cell.route == "coalesce":
            sent = accepted(sub.cell, outcome.odd[sub.cell.number])
            taken = {number(e) for e in sent if sub.cell.takes(e)}
            got = {number(e) for r in sub.requests if 200 <= r.status < 300 for e in r.events}
            merged += len(taken - got)
    if merged != outcome.coalesced:
        return [f"{merged} events merged away, {outcome.coalesced} counted coalesced"]
    return []
