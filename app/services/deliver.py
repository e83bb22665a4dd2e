"""Delivering one subscriber's next batch: the `batch` job.

deliver.lua picks the batch and, after the HTTP answer, acknowledges or fails it and
settles the job in the same step. Between the two, the only state is in Redis (the job
in this worker's pending list, the batch marked in flight), so a crash at any point
delivers the batch again later, never zero times.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass

import redis
import requests

from app import codec
from app.errors import CallbackRefused
from app.lua import Scripts
from app.models.keys import Keys, log_partition
from app.models.queue import MAIN
from config.settings import Settings

log = logging.getLogger(__name__)
MAX_DEAD_LETTERS = 10_000
# last_status of a delivery the callback policy stopped (app/models/callback_policy.py)
REFUSED_STATUS = "refused_link_local"


@dataclass(frozen=True)
class Outcome:
    """What one run of the job did, for logs and tests."""

    kind: str  # delivered | failed | wait | idle | gone
    events: int = 0
    status: str = ""


def now_ms() -> int:
    return int(time.time() * 1000)


class Delivery:
    def __init__(
        self,
        client: redis.Redis,
        keys: Keys,
        scripts: Scripts,
        settings: Settings,
        session: requests.Session,
    ) -> None:
        self._keys = keys
        self._scripts = scripts
        self._settings = settings
        self._session = session

    def _call(self, op: str, token: str, worker: str, job: bytes, *extra: object) -> list:
        k = self._keys
        return self._scripts.deliver(
            keys=[
                k.subscriber(token),
                k.event_gauge,
                k.batch_gauge,
                k.counters,
                *k.job_states(MAIN),
                k.jobs_pending(MAIN, worker),
                k.deadletters(token),
                k.delivery_log(log_partition(token, self._settings.delivery_log_partitions)),
                k.tokens,
            ],
            args=[op, k.prefix, token, now_ms(), job, *extra],
        )

    def run(self, token: str, worker: str, job: bytes) -> Outcome:
        reply = self._call("begin", token, worker, job)
        kind = reply[0].decode()
        if kind != "deliver":
            return Outcome(kind)
        _, _lane, batch_id, _created, _attempts, callback, uuid, entries = reply
        body = json.dumps(
            [codec.unpack_entry(e).delivery() for e in entries], separators=(",", ":")
        )
        started = time.monotonic()
        status = self._post(callback.decode(), uuid.decode(), body)
        if status.isdigit() and 200 <= int(status) < 300:
            took_ms = int((time.monotonic() - started) * 1000)
            maxlen = self._settings.delivery_log_maxlen if self._settings.delivery_log else 0
            self._call(
                "ack", token, worker, job, batch_id, self._settings.hp_heal_rate, took_ms, maxlen
            )
            return Outcome("delivered", len(entries), status)
        backoff = self._settings.max_backoff_ms * random.uniform(1.0, 1.5)
        self._call(
            "fail", token, worker, job, batch_id, self._settings.hp_damage_rate, backoff, status,
            MAX_DEAD_LETTERS,
        )  # fmt: skip
        log.info("delivery to %s failed: %s", token, status)
        return Outcome("failed", len(entries), status)

    def _post(self, url: str, uuid: str, body: str) -> str:
        """The callback's status code as text, or the name of the error that stopped it."""
        try:
            response = self._session.post(
                url,
                data=body,
                headers={"Content-Type": "application/json"},
                auth=(uuid, "x"),
                timeout=(self._settings.connect_timeout, self._settings.timeout),
                verify=self._settings.ssl_verify,
                allow_redirects=False,
            )
            response.close()
            return str(response.status_code)
        except CallbackRefused as exc:
            log.warning("callback %s refused: %s", url, exc.message)
            return REFUSED_STATUS
        except requests.Timeout:
            return "timeout"
        except requests.ConnectionError:
            return "connection_error"
        except requests.RequestException as exc:
            return type(exc).__name__
