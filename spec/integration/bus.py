"""A whole bus for end-to-end tests: `busbar web` and `busbar worker` as real processes."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import redis
import requests
from redis.cluster import RedisCluster

from app import codec
from app.models.keys import MAIN, Keys
from config.settings import DEV_CALLBACK_ALLOW
from spec.conftest import ROOT_KEY
from spec.integration.layouts import DEFAULT_SHARDS
from spec.integration.processes import busbar_env, free_port, running, wait_until, web_ready


@dataclass
class Bus:
    base: str
    env: dict[str, str]
    log_dir: Path
    stack: ExitStack
    workers: list[subprocess.Popen] = field(default_factory=list)
    http: requests.Session = field(default_factory=requests.Session)
    command: Sequence[str] = ()  # the busbar to run; () for this checkout's
    tree: Path | None = None  # another checkout's code to run instead (its root)

    def start_worker(self, prefix: Sequence[str] = (), **env: str) -> subprocess.Popen:
        name = f"worker{len(self.workers)}.log"
        process = self.stack.enter_context(
            running(["worker"], {**self.env, **env}, log=self.log_dir / name, prefix=prefix,
                    **self.installed())
        )  # fmt: skip
        self.workers.append(process)
        client = self.redis()
        marker = f".{process.pid}.".encode()

        def waiting() -> bool:
            indexes = [s.jobs_pending_index("main") for s in self.keys.all_shards()]
            return all(any(marker in w for w in client.smembers(i)) for i in indexes)

        wait_until(waiting, what="the worker's delivery threads to wait on every shard")
        client.close()
        return process

    def installed(self) -> dict[str, Sequence[str] | Path]:
        """running()'s arguments for an installed busbar: its command, run outside the
        checkout (whose packages a `python -m` would import first); for another tree,
        `python -m busbar` run in it, whose packages it then imports first."""
        if self.tree is not None:
            return {"cwd": self.tree}
        return {"command": self.command, "cwd": self.log_dir} if self.command else {}

    @property
    def keys(self) -> Keys:
        return Keys("busbar:", int(self.env.get("BUSBAR_SHARDS", DEFAULT_SHARDS)))

    def redis(self) -> redis.Redis:
        """A client for the bus's Redis, cluster or not, to look at its state."""
        if self.env.get("BUSBAR_REDIS_CLUSTER") == "1":
            return RedisCluster.from_url(self.env["BUSBAR_REDIS_URL"])  # type: ignore[return-value]
        return redis.Redis.from_url(self.env["BUSBAR_REDIS_URL"])

    def call(self, method: str, path: str, token: str, body: object = None) -> requests.Response:
        return self.http.request(
            method, f"{self.base}{path}", json=body, auth=(token, ""), timeout=10
        )

    def client(self, token: str) -> str:
        response = self.call("POST", "/api_tokens", ROOT_KEY, {"name": token, "token": token})
        assert response.status_code == 201, f"{response.status_code} {response.text}"
        return token

    def subscribe(self, token: str, callback: str, topics: list, **extra: object) -> None:
        body = {"topics": topics, "callback": callback, **extra}
        response = self.call("POST", "/subscription", token, body)
        assert response.status_code == 204, response.text

    def publish(self, token: str, topic: str, events: object) -> None:
        response = self.call("POST", f"/topics/{topic}", token, events)
        assert response.status_code == 204, response.text

    def subscription(self, token: str) -> dict:
        (entry,) = self.call("GET", "/subscriptions", token).json()
        return entry

    def job_settled(self, token: str, seconds: float = 30) -> None:
        """Return once the subscriber's delivery job is in no queue: a worker took it and
        settled it with nothing due (paused, or nothing to send). What a check that
        nothing was sent waits for after a publish (which queues the job), in place of
        a fixed sleep. Concurrency 1 only (a partition has a job of its own)."""
        client = self.redis()
        index = self.keys.queue_place(MAIN, self.keys.shard_of(token)).jobs_index(MAIN)
        job = codec.pack_job("batch", [token])
        try:
            wait_until(lambda: not client.sismember(index, job), seconds, "the job settled")  # type: ignore[arg-type]
        finally:
            client.close()


def web_env(redis_url: str, port: int, **extra: str) -> dict[str, str]:
    """The environment of a `busbar web` on loopback, with the tests' root key, on the
    layout (one Redis or a cluster) that `redis_url` belongs to. Subscribers serve on
    this machine, so loopback is opened as `busbar dev` opens it (the allowlist, not
    the check turned off); a test of the production policy passes its own."""
    return busbar_env(
        BUSBAR_REDIS_URL=redis_url,
        BUSBAR_ROOT_KEY=ROOT_KEY,
        PORT=str(port),
        BUSBAR_HOST="127.0.0.1",
        **{"BUSBAR_CALLBACK_ALLOW": DEV_CALLBACK_ALLOW, **extra},
    )


PORT_TRIES = 3  # web's port taken by another process between free_port() and the bind


@contextmanager
def bus(
    redis_url: str,
    log_dir: Path,
    workers: int = 1,
    command: Sequence[str] = (),
    **env: str,
) -> Iterator[Bus]:
    with ExitStack() as stack:
        web_log = log_dir / "web.log"
        for attempt in range(PORT_TRIES):
            port = free_port()
            base_env = web_env(
                redis_url, port, **{"BUSBAR_ALLOW_HTTP": "1", "BUSBAR_WEB_WORKERS": "1", **env}
            )
            the_bus = Bus(f"http://127.0.0.1:{port}", base_env, log_dir, stack, command=command)
            web = stack.enter_context(
                running(["web"], base_env, log=web_log, **the_bus.installed())
            )
            try:
                wait_until(lambda p=port: web_ready(web_log, p), what="busbar web to answer")
                break
            except AssertionError:
                # free_port() is free when asked, not when gunicorn binds: another
                # process may take it in between (seen once in make test); a new one
                if attempt + 1 == PORT_TRIES or "Connection in use" not in web_log.read_text():
                    raise
                web.kill()
                web.wait()
        for _ in range(workers):
            the_bus.start_worker()
        yield the_bus
        for worker in the_bus.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                assert worker.wait(60) == 0


def fast_scrub(scrub_after_ms: int, timeout_s: int = 1) -> dict[str, str]:
    """A short scrub window for tests that kill or pause workers, with the delivery
    timeouts it must outlast (busbar worker refuses a window shorter than 1.25 x
    connect + read timeout)."""
    return {
        "BUSBAR_SCRUB_AFTER_MS": str(scrub_after_ms),
        "BUSBAR_CONNECT_TIMEOUT": "1",
        "BUSBAR_TIMEOUT": str(timeout_s),
    }


def queued(base: str, token: str) -> int:
    """The events of a client's subscription not yet acknowledged, by a bus not started
    here (`busbar dev`, an installed package) at `base`."""
    (listed,) = requests.get(f"{base}/subscriptions", auth=(token, ""), timeout=30).json()
    return int(listed["events"]["queued"])


def events(n: int, start: int = 0, type_: str = "create") -> list[dict]:
    return [
        {"type": type_, "url": f"https://o.test/{i}", "data": {"i": i}}
        for i in range(start, start + n)
    ]
