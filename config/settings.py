"""The one settings object, read from the environment once at process start.

Every variable of the design's configuration list is a field here with its default, so
docs/configuration.md's table and the code cannot drift apart (spec/config checks both). A bad
value stops the process with a message naming the variable: a bus that silently falls
back to a default on a typo would misbehave in production instead of failing loudly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from config import devstate, parsers
from config.errors import ConfigError

MIB = 1024 * 1024
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


# Link-local ranges and every cloud's metadata address: AWS, GCP and Azure answer on
# 169.254.169.254, AWS also on fd00:ec2::254, Alibaba on 100.100.100.200 and Azure's
# wire server on 168.63.129.16 (see app/models/callback_policy.py).
# what `busbar dev` opens of the internal ranges (BUSBAR_CALLBACK_ALLOW): this machine
DEV_CALLBACK_ALLOW = "127.0.0.0/8, ::1/128, localhost"
CALLBACK_DENY = parsers.networks(
    "169.254.0.0/16, fe80::/10, fd00:ec2::254/128, 100.100.100.200/32, 168.63.129.16/32"
)


def _var(env: str, default: Any, parse: parsers.Parser, doc: str, shown: str = "plain") -> Any:
    """`shown`: how `busbar config` shows the value: plain, secret (masked) or url
    (password masked)."""
    meta = {"env": env, "parse": parse, "doc": doc, "shown": shown}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Settings:
    redis_url: str | None = _var(
        "BUSBAR_REDIS_URL",
        None,
        parsers.redis_url,
        "Redis URL; `busbar dev` starts its own server when unset",
        "url",
    )
    redis_cluster: bool = _var(
        "BUSBAR_REDIS_CLUSTER",
        False,
        parsers.boolean,
        "BUSBAR_REDIS_URL names a node of a Redis Cluster: use the cluster client",
    )
    redis_min_replicas: int = _var(
        "BUSBAR_REDIS_MIN_REPLICAS",
        0,
        parsers.integer(0, 16),
        "replicas that must confirm every write the API answers or a delivery settles "
        "(WAIT) before it is acknowledged; 0: none waited for (replication stays "
        "asynchronous)",
    )
    redis_replica_timeout_ms: int = _var(
        "BUSBAR_REDIS_REPLICA_TIMEOUT_MS",
        1000,
        parsers.integer(10, 4000),
        "ms a write waits for BUSBAR_REDIS_MIN_REPLICAS; short of them, the API answers 503",
    )
    dev_cluster: int = _var(
        "BUSBAR_DEV_CLUSTER",
        0,
        parsers.integer(0, 16),
        "`busbar dev` only: start a local Redis Cluster of this many masters (0: one server)",
    )
    shards: int = _var(
        "BUSBAR_SHARDS",
        4,
        parsers.integer(1, 1024),
        "subscriber shards (hash slots of a cluster; delivery log streams); fixed at first use",
    )
    key_prefix: str = _var(
        "BUSBAR_KEY_PREFIX",
        "busbar:",
        parsers.matching(r"[A-Za-z0-9:_.-]{0,64}", "up to 64 characters of A-Z a-z 0-9 : _ . -"),
        "prefix of every Redis key",
    )
    root_key: str | None = _var(
        "BUSBAR_ROOT_KEY",
        None,
        parsers.secret,
        "root API key (8+ printable characters); `busbar web` refuses to start without one",
        "secret",
    )
    secret_key: str | None = _var(
        "BUSBAR_SECRET_KEY",
        None,
        parsers.key(16),
        "key the subscribers' signing secrets are derived from, and the key that seals "
        "their write-only secrets in Redis (16+ printable characters); default: "
        "BUSBAR_ROOT_KEY. Changing it changes every signing secret",
        "secret",
    )
    secret_keys_previous: tuple[str, ...] = _var(
        "BUSBAR_SECRET_KEY_PREVIOUS",
        (),
        parsers.keys(16),
        "former BUSBAR_SECRET_KEYs, space-separated: what they sealed still opens, until "
        "`busbar secrets reseal` seals it again under the current key",
        "secret",
    )
    secret_grace_s: int = _var(
        "BUSBAR_SECRET_GRACE_S",
        86_400,
        parsers.integer(0, 30 * 86_400),
        "seconds a rotated-out signing secret still signs deliveries, beside the new one",
    )
    port: int = _var("PORT", 17890, parsers.integer(1, 65535), "HTTP port of `busbar web`")
    host: str | None = _var(
        "BUSBAR_HOST",
        None,
        parsers.matching(r"[0-9A-Za-z.:\[\]-]{1,255}", "a host name or IP address"),
        "listen address; default 0.0.0.0 (web), 127.0.0.1 (dev)",
    )
    web_workers: int = _var("BUSBAR_WEB_WORKERS", 2, parsers.integer(1, 256), "gunicorn processes")
    web_threads: int = _var(
        "BUSBAR_WEB_THREADS",
        8,
        parsers.integer(1, 256),
        "threads per gunicorn process, with BUSBAR_WEB_WORKER_CLASS=gthread",
    )
    web_worker_class: str = _var(
        "BUSBAR_WEB_WORKER_CLASS",
        "gevent",
        parsers.choice("gevent", "gthread"),
        "gunicorn worker class: gevent (a connection costs a greenlet, not a thread) or "
        "gthread (a thread per request being read or served; slow clients can take them all)",
    )
    web_connections: int = _var(
        "BUSBAR_WEB_CONNECTIONS",
        2000,
        parsers.integer(10, 100_000),
        "client connections each web process holds at once, with gevent",
    )
    header_timeout_s: int = _var(
        "BUSBAR_HEADER_TIMEOUT_S",
        10,
        parsers.integer(1, 3600),
        "seconds a request's line and headers may take to arrive (also how long an idle "
        "kept-alive connection is kept); then the connection is closed",
    )
    body_timeout_s: int = _var(
        "BUSBAR_BODY_TIMEOUT_S",
        10,
        parsers.integer(1, 3600),
        "seconds a request body may stall between two reads (or an answer between two "
        "writes) before the connection is closed, with gevent",
    )
    delivery_concurrency: int = _var(
        "BUSBAR_DELIVERY_CONCURRENCY",
        5000,
        parsers.integer(1, 100_000),
        "deliveries one worker process keeps in flight at once (replaces BUSBAR_WORKER_THREADS)",
    )
    delivery_redis_connections: int = _var(
        "BUSBAR_DELIVERY_REDIS_CONNECTIONS",
        16,
        parsers.integer(1, 1024),
        "connections a worker's delivery engine pipelines its script calls over",
    )
    acquire_timeout: int = _var(
        "BUSBAR_ACQUIRE_TIMEOUT",
        1,
        parsers.integer(1, 60),
        "seconds an idle delivery slot blocks on a shard waiting for a job",
    )
    allow_http: bool = _var(
        "BUSBAR_ALLOW_HTTP", False, parsers.boolean, "accept http:// event and callback URLs"
    )
    allow_link_local_callbacks: bool = _var(
        "BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS",
        False,
        parsers.boolean,
        "accept and call callbacks at link-local or cloud metadata addresses",
    )
    max_event_data: int = _var(
        "BUSBAR_MAX_EVENT_DATA",
        256 * 1024,
        parsers.integer(0, MIB),
        "largest `data` of an event, in bytes of msgpack (64: Routemaster's limit)",
    )
    origin_connections: int = _var(
        "BUSBAR_ORIGIN_CONNECTIONS",
        64,
        parsers.integer(1, 100_000),
        "connections one worker process starts with for one callback origin (scheme, "
        "host, port), in use or kept alive; the limit then adapts to how the origin takes "
        "them, up to BUSBAR_ORIGIN_CONNECTIONS_MAX; more deliveries wait their turn",
    )
    origin_connections_max: int = _var(
        "BUSBAR_ORIGIN_CONNECTIONS_MAX",
        4096,
        parsers.integer(1, 100_000),
        "the most connections one worker process opens to one callback origin however "
        "well it copes (at or below BUSBAR_ORIGIN_CONNECTIONS: a fixed limit, no adapting)",
    )
    origin_connecting: int = _var(
        "BUSBAR_ORIGIN_CONNECTING",
        4,
        parsers.integer(1, 10_000),
        "connections one worker process opens to one callback origin at once, at most "
        "(below a small server's accept backlog)",
    )
    connect_timeout: int = _var(
        "BUSBAR_CONNECT_TIMEOUT", 2, parsers.integer(1, 600), "seconds to connect to a callback"
    )
    timeout: int = _var(
        "BUSBAR_TIMEOUT", 20, parsers.integer(1, 3600), "seconds to wait for a callback's answer"
    )
    ssl_verify: bool = _var(
        "BUSBAR_SSL_VERIFY", True, parsers.boolean, "verify callbacks' TLS certificates"
    )
    ca_bundle: str | None = _var(
        "BUSBAR_CA_BUNDLE",
        None,
        parsers.readable_file,
        "PEM file of the CAs that callbacks' certificates are verified against "
        "(default: certifi's public CAs)",
    )
    client_cert: str | None = _var(
        "BUSBAR_CLIENT_CERT",
        None,
        parsers.readable_file,
        "PEM file of the TLS client certificate presented to https callbacks (mutual "
        "TLS) whose subscription has none of its own; with BUSBAR_CLIENT_KEY",
    )
    client_key: str | None = _var(
        "BUSBAR_CLIENT_KEY",
        None,
        parsers.readable_file,
        "PEM file of BUSBAR_CLIENT_CERT's private key",
    )
    callback_deny: tuple[parsers.Network, ...] = _var(
        "BUSBAR_CALLBACK_DENY",
        CALLBACK_DENY,
        parsers.networks,
        "address ranges callbacks may not point at or connect to (comma-separated, "
        "`none` for none)",
    )
    callback_allow: tuple[parsers.Network | str, ...] = _var(
        "BUSBAR_CALLBACK_ALLOW",
        (),
        parsers.allowlist,
        "internal address ranges and host names callbacks may point at (comma-separated "
        "CIDRs and names, `*.` for a domain's names); loopback, private, shared and "
        "unique-local addresses are refused otherwise. BUSBAR_CALLBACK_DENY wins over it",
    )
    retry_lone_ms: int = _var(
        "BUSBAR_RETRY_LONE_MS",
        100,
        parsers.integer(0, 86_400_000),
        "retry delay after a lone failure (the first after a success; jittered x1..1.5), so "
        "an endpoint that fails now and then keeps up; 0: BUSBAR_RETRY_FIRST_MS from the "
        "first failure",
    )
    retry_alive_ms: int = _var(
        "BUSBAR_RETRY_ALIVE_MS",
        10000,
        parsers.integer(0, 86_400_000),
        "a subscriber that answered 2xx within this long is taken for alive, not down: "
        "its failures in a row wait BUSBAR_RETRY_LONE_MS doubling (0.1, 0.2, 0.4 s...), "
        "so one that fails now and then keeps up; 0: never",
    )
    retry_first_ms: int = _var(
        "BUSBAR_RETRY_FIRST_MS",
        1000,
        parsers.integer(1, 86_400_000),
        "retry delay after the second failure in a row (the first too, with "
        "BUSBAR_RETRY_LONE_MS 0); it doubles with each more (jittered x1..1.5)",
    )
    max_backoff_ms: int = _var(
        "BUSBAR_MAX_BACKOFF_MS",
        60000,
        parsers.integer(1, 86_400_000),
        "longest retry delay while a subscriber's circuit is closed",
    )
    circuit_failures: int = _var(
        "BUSBAR_CIRCUIT_FAILURES",
        10,
        parsers.integer(1, 1_000_000),
        "failures in a row that open a subscriber's circuit (once they span "
        "BUSBAR_CIRCUIT_OUTAGE_MS)",
    )
    circuit_outage_ms: int = _var(
        "BUSBAR_CIRCUIT_OUTAGE_MS",
        5000,
        parsers.integer(0, 86_400_000),
        "the circuit opens on an outage, not a burst: its failures in a row must span at "
        "least this long with no 2xx between (at concurrency n they come n at a time)",
    )
    circuit_probe_ms: int = _var(
        "BUSBAR_CIRCUIT_PROBE_MS",
        30000,
        parsers.integer(1, 86_400_000),
        "while a circuit is open, one attempt (a probe) per this interval (jittered x1..1.5); "
        "probes do not count toward max_attempts",
    )
    failing_share: int = _var(
        "BUSBAR_FAILING_SHARE",
        20,
        parsers.integer(1, 100),
        "percent of BUSBAR_DELIVERY_CONCURRENCY that attempts of failing subscribers and "
        "slow attempts may hold together; beyond it they wait",
    )
    slow_after_s: int = _var(
        "BUSBAR_SLOW_AFTER_S",
        5,
        parsers.integer(1, 3600),
        "seconds after which an attempt in flight counts as slow (toward the failing share)",
    )
    max_retry_after_s: int = _var(
        "BUSBAR_MAX_RETRY_AFTER_S",
        600,
        parsers.integer(1, 86_400),
        "longest wait, s, that a 429/503 Retry-After is honoured for (longer asks wait this)",
    )
    hp_heal_rate: int = _var(
        "BUSBAR_HP_HEAL_RATE", 1, parsers.integer(0, 100), "health points gained per success"
    )
    hp_damage_rate: int = _var(
        "BUSBAR_HP_DAMAGE_RATE", -2, parsers.integer(-100, 0), "health points added per failure"
    )
    scrub_after_ms: int = _var(
        "BUSBAR_SCRUB_AFTER_MS",
        30000,
        parsers.integer(1000, 86_400_000),
        "silence after which a worker counts as dead and its jobs are requeued",
    )
    monitor_interval: int = _var(
        "BUSBAR_MONITOR_INTERVAL",
        10,
        parsers.integer(1, 86_400),
        "seconds between Monitor runs",
    )
    monitor_sink: str = _var(
        "BUSBAR_MONITOR_SINK",
        "print",
        parsers.choice("print", "none"),
        "where Monitor sends metrics: `print` logs one line per run",
    )
    expire_interval: int = _var(
        "BUSBAR_EXPIRE_INTERVAL", 10, parsers.integer(1, 86_400), "seconds between Expire runs"
    )
    payload_retention_s: int = _var(
        "BUSBAR_PAYLOAD_RETENTION_S",
        0,
        parsers.integer(0, 100 * 365 * 86_400),
        "seconds a delivered or dead-lettered event's payload is kept, for topics without "
        "a retention of their own; 0 = keep",
    )
    autodrop_interval: int = _var(
        "BUSBAR_AUTODROP_INTERVAL", 5, parsers.integer(1, 86_400), "seconds between Autodrop runs"
    )
    redis_max_mem: int = _var(
        "BUSBAR_REDIS_MAX_MEM",
        50 * MIB,
        parsers.integer(MIB),
        "bytes of Redis memory busbar may use",
    )
    redis_min_free: int = _var(
        "BUSBAR_REDIS_MIN_FREE",
        10 * MIB,
        parsers.integer(0),
        "Autodrop sheds load when fewer bytes than this are free",
    )
    default_ttl: int = _var(
        "BUSBAR_DEFAULT_TTL",
        0,
        parsers.integer(0),
        "seconds an event lives on a route without `ttl`; 0 = forever",
    )
    cleanup_entire_queue: bool = _var(
        "BUSBAR_CLEANUP_ENTIRE_QUEUE",
        False,
        parsers.boolean,
        "Expire scans every batch instead of each queue's head",
    )
    delivery_log: bool = _var(
        "BUSBAR_DELIVERY_LOG", True, parsers.boolean, "append acknowledged batches to the log"
    )
    delivery_log_maxlen: int = _var(
        "BUSBAR_DELIVERY_LOG_MAXLEN",
        100_000,
        parsers.integer(1),
        "approximate entries kept per delivery log stream (one per shard)",
    )
    delivery_log_partitions: int | None = _var(
        "BUSBAR_DELIVERY_LOG_PARTITIONS",
        None,
        parsers.integer(1, 1024),
        "delivery log streams: one per shard, so BUSBAR_SHARDS when set (it must match)",
    )
    auto_pause_s: int = _var(
        "BUSBAR_AUTO_PAUSE_S",
        86_400,
        parsers.integer(0),
        "seconds a subscriber's circuit stays open before the bus pauses it; 0 = never",
    )
    public_url: str = _var(
        "BUSBAR_PUBLIC_URL",
        "https://busbar.invalid",
        parsers.matching(r"https?://[^\s?#]*[^\s?#/]", "an http(s) URL, no query, no final /"),
        "where operators reach this bus: the urls of its operational events start with it",
    )
    attempt_log: int = _var(
        "BUSBAR_ATTEMPT_LOG",
        100,
        parsers.integer(0, 100_000),
        "delivery attempts kept per subscriber (GET /subscriber/attempts); 0 = none",
    )
    attempt_log_age_s: int = _var(
        "BUSBAR_ATTEMPT_LOG_AGE_S",
        7 * 86_400,
        parsers.integer(60),
        "seconds an attempt is kept in a subscriber's attempt log, at most",
    )
    attempt_stream_maxlen: int = _var(
        "BUSBAR_ATTEMPT_STREAM_MAXLEN",
        100_000,
        parsers.integer(0),
        "approximate attempts kept per shard attempt stream (the lake's); 0 = none",
    )
    publish_dedupe_s: int = _var(
        "BUSBAR_PUBLISH_DEDUPE_S",
        600,
        parsers.integer(1, 86_400),
        "seconds a publish's Idempotency-Key is remembered (a repeat is not queued again)",
    )
    auth_failures_per_minute: int = _var(
        "BUSBAR_AUTH_FAILURES_PER_MINUTE",
        60,
        parsers.integer(0, 1_000_000),
        "failed logins one source address may make in a minute, per web process, before "
        "its requests with credentials get 429 (0: no limit, e.g. behind a throttling proxy)",
    )
    publish_rate: int = _var(
        "BUSBAR_PUBLISH_RATE",
        10_000,
        parsers.integer(0, 100_000_000),
        "events a second each publisher may publish, averaged over BUSBAR_PUBLISH_BURST; "
        "beyond it a publish gets 429 with Retry-After (0: no limit)",
    )
    publish_burst: int = _var(
        "BUSBAR_PUBLISH_BURST",
        20_000,
        parsers.integer(1, 1_000_000_000),
        "events a publisher may publish at once above its rate (a token bucket of this "
        "size); at least BUSBAR_MAX_PUBLISH_EVENTS",
    )
    filter_max_bytes: int = _var(
        "BUSBAR_FILTER_MAX_BYTES",
        4096,
        parsers.integer(64, 65_536),
        "largest content filter, as compact JSON (400 beyond)",
    )
    filter_max_depth: int = _var(
        "BUSBAR_FILTER_MAX_DEPTH",
        8,
        parsers.integer(1, 32),
        "how deep a content filter's $and, $or and $not may nest (400 beyond)",
    )
    filter_max_conditions: int = _var(
        "BUSBAR_FILTER_MAX_CONDITIONS",
        64,
        parsers.integer(1, 1024),
        "most fields and operators one content filter may test (400 beyond)",
    )
    transform_max_bytes: int = _var(
        "BUSBAR_TRANSFORM_MAX_BYTES",
        4096,
        parsers.integer(64, 65_536),
        "longest transform (a JSONata expression), in bytes (400 beyond)",
    )
    transform_time_ms: int = _var(
        "BUSBAR_TRANSFORM_TIME_MS",
        50,
        parsers.integer(1, 10_000),
        "longest one evaluation of a transform may run; past it the evaluation fails",
    )
    transform_batch_ms: int = _var(
        "BUSBAR_TRANSFORM_BATCH_MS",
        500,
        parsers.integer(10, 60_000),
        "longest a batch's transforms run before it is sent: the events not reached by "
        "then stay queued for the next delivery",
    )
    transform_slow_ms: int = _var(
        "BUSBAR_TRANSFORM_SLOW_MS",
        20,
        parsers.integer(1, 1000),
        "CPU milliseconds a second the slow lane (transforms that ran out of time "
        "lately) may use per worker process; past it their batches wait",
    )
    transform_max_depth: int = _var(
        "BUSBAR_TRANSFORM_MAX_DEPTH",
        300,
        parsers.integer(10, 5_000),
        "deepest a transform's evaluation may nest (steps; about 3 a level of a "
        "recursive function); past it the evaluation fails",
    )
    schema_max_bytes: int = _var(
        "BUSBAR_SCHEMA_MAX_BYTES",
        65_536,
        parsers.integer(256, 1_048_576),
        "largest JSON Schema of an event type, as compact JSON (400 beyond)",
    )
    schema_max_depth: int = _var(
        "BUSBAR_SCHEMA_MAX_DEPTH",
        32,
        parsers.integer(1, 128),
        "how deep a JSON Schema's objects and arrays may nest (400 beyond)",
    )
    max_publish_events: int = _var(
        "BUSBAR_MAX_PUBLISH_EVENTS",
        1000,
        parsers.integer(1, 10_000),
        "most events one publish may hold (400 beyond): its topic step is one script that "
        "every other Redis client waits for",
    )
    max_body_bytes: int = _var(
        "BUSBAR_MAX_BODY_BYTES",
        MIB,
        parsers.integer(1024, 1024 * MIB),
        "largest request body; larger ones get 413 unread",
    )
    log_level: str = _var(
        "BUSBAR_LOG_LEVEL",
        "info",
        parsers.choice("debug", "info", "warning", "error"),
        "least severe log level written",
    )
    log_format: str = _var(
        "BUSBAR_LOG_FORMAT", "text", parsers.choice("text", "json"), "`json`: one object a line"
    )

    def __post_init__(self) -> None:
        if self.delivery_log_partitions not in (None, self.shards):
            raise ConfigError(
                "the delivery log has one stream per shard: BUSBAR_DELIVERY_LOG_PARTITIONS "
                f"({self.delivery_log_partitions}) must equal BUSBAR_SHARDS ({self.shards}) "
                "or be unset"
            )
        if self.ca_bundle and not self.ssl_verify:
            raise ConfigError(
                "BUSBAR_CA_BUNDLE is set but BUSBAR_SSL_VERIFY is off: "
                "unset one of them (a CA bundle is only used to verify)"
            )
        if bool(self.client_cert) != bool(self.client_key):
            raise ConfigError(
                "BUSBAR_CLIENT_CERT and BUSBAR_CLIENT_KEY go together: set both, or neither"
            )
        if self.publish_rate and self.publish_burst < self.max_publish_events:
            raise ConfigError(
                "BUSBAR_PUBLISH_BURST must be at least BUSBAR_MAX_PUBLISH_EVENTS "
                f"({self.publish_burst} < {self.max_publish_events}): a publish that size "
                "could never be taken"
            )
        if self.redis_min_free >= self.redis_max_mem:
            raise ConfigError(
                "BUSBAR_REDIS_MIN_FREE must be smaller than BUSBAR_REDIS_MAX_MEM "
                f"({self.redis_min_free} >= {self.redis_max_mem})"
            )

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, dev_var: Path | None = None
    ) -> Settings:
        """Read every variable, collecting all problems so one start shows them all.

        With `dev_var`, a `busbar dev` running with that var/ directory supplies the
        Redis URL when BUSBAR_REDIS_URL is unset (config/devstate.py)."""
        source = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        problems: list[str] = []
        for spec in fields(cls):
            name = spec.metadata["env"]
            raw = source.get(name)
            if raw is None or raw.strip() == "":
                continue
            try:
                values[spec.name] = spec.metadata["parse"](raw)
            except ValueError as exc:
                problems.append(f"{name}: {exc}")
        if problems:
            raise ConfigError("invalid configuration: " + "; ".join(problems))
        if "shards" not in values and values.get("delivery_log_partitions"):
            values["shards"] = values["delivery_log_partitions"]  # the older name
        if "redis_url" not in values and dev_var is not None:
            dev = devstate.running(dev_var)
            if dev and isinstance(dev.get("redis_url"), str):
                values["redis_url"] = dev["redis_url"]
                if dev.get("redis_cluster") is True and isinstance(dev.get("shards"), int):
                    values.setdefault("redis_cluster", True)
                    values.setdefault("shards", dev["shards"])
        return cls(**values)

    @property
    def signing_key(self) -> bytes:
        """What signing secrets are derived from: kept out of Redis, so a copy of Redis
        alone does not hold a single secret (app/services/signing.py)."""
        key = self.secret_key or self.root_key
        if not key:
            raise ConfigError(
                "neither BUSBAR_SECRET_KEY nor BUSBAR_ROOT_KEY is set: deliveries are signed "
                "with secrets derived from it; give every web and worker the same one"
            )
        return key.encode()

    @property
    def effective_redis_url(self) -> str:
        return self.redis_url or DEFAULT_REDIS_URL

    @property
    def callback_verify(self) -> bool | str:
        """How callbacks are verified (app/delivery/callback.py's tls_context): the CA
        bundle's path when set (BUSBAR_CA_BUNDLE alone: no variable of the environment
        such as SSL_CERT_FILE changes it), else whether to verify against the public
        CAs (certifi's)."""
        return self.ca_bundle or self.ssl_verify


def variables() -> list[tuple[str, Any, str]]:
    """(name, default, description) of every variable: docs/configuration.md, `busbar config`."""
    return [(f.metadata["env"], f.default, f.metadata["doc"]) for f in fields(Settings)]


def is_set(name: str) -> bool:
    """Whether the operator chose a value, for `busbar dev`'s friendlier defaults."""
    return bool(os.environ.get(name, "").strip())


def environment_with(overrides: Mapping[str, str]) -> dict[str, str]:
    """The current environment plus overrides, for child processes started by `busbar dev`."""
    env = dict(os.environ)
    env.update(overrides)
    return env
