"""A write whose reply is lost is never sent again: the caller sees the error instead.

Between busbar and a real server sits a TCP proxy that lets a command through and then
hangs up instead of passing the reply back, as a network cut or a failover does.
redis-py's default (three retries) would have run the publish four times.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest
import redis

from app.lua import Scripts
from app.models.event import Event
from app.models.keys import Keys
from app.models.tokens import TokenStore
from app.redis_client import connect
from app.services.ingest import Ingest
from config.settings import Settings


class ReplyDropper:
    """Forwards both ways until `drop` is set; then the next reply cuts the connection,
    or with `hold_s`, is held that long and passed on (a process paused, or a slow
    network, between a command and its reply). With `trigger`, the first request that
    contains it sets `drop` for its own connection only: the reply cut or held is that
    request's, whatever a client's other connections carry meanwhile. With `in_reply`,
    the first reply that contains it is held `hold_s` (a begin's reply, which carries
    its batch's events, whichever script began it)."""

    def __init__(
        self,
        upstream: tuple[str, int],
        trigger: bytes | None = None,
        hold_s: float = 0.0,
        in_reply: bytes | None = None,
    ) -> None:
        self.upstream = upstream
        self.trigger = trigger
        self.in_reply = in_reply
        self.per_connection = trigger is not None
        self.hold_s = hold_s
        self.drop = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            backend = socket.create_connection(self.upstream)
            drop = threading.Event() if self.per_connection else self.drop
            for args in ((client, backend, False, drop), (backend, client, True, drop)):
                threading.Thread(target=self._pump, args=args, daemon=True).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, replies: bool, drop: threading.Event
    ) -> None:
        try:
            while data := source.recv(65536):
                if not replies and self.trigger and self.trigger in data:
                    self.trigger = None
                    drop.set()
                if replies and self.in_reply and self.in_reply in data:
                    self.in_reply = None
                    time.sleep(self.hold_s)
                if replies and drop.is_set():
                    drop.clear()
                    if not self.hold_s:
                        break
                    time.sleep(self.hold_s)
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):  # shutdown wakes the other direction's blocked recv
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@contextmanager
def proxied(
    redis_url: str, trigger: bytes | None = None, hold_s: float = 0.0, in_reply: bytes | None = None
) -> Iterator[ReplyDropper]:
    url = urlsplit(redis_url)
    upstream = (url.hostname or "127.0.0.1", url.port or 6379)
    proxy = ReplyDropper(upstream, trigger, hold_s, in_reply)
    try:
        yield proxy
    finally:
        proxy.server.close()


def test_a_publish_whose_reply_is_lost_runs_once(redis_url: str, redis_client: redis.Redis):
    keys = Keys()
    TokenStore(redis_client, keys).create("pub", "pub")
    with proxied(redis_url) as proxy:
        client = connect(Settings(redis_url=f"redis://127.0.0.1:{proxy.port}/0"))
        ingest = Ingest(client, keys, Scripts(client), Settings())
        event = [Event("create", "https://o.test/1", 1, None)]
        ingest.publish("warmup", "pub", event)  # connected, script loaded
        proxy.drop.set()
        with pytest.raises(redis.ConnectionError):
            ingest.publish("orders", "pub", event)
        assert ingest.publish("orders", "pub", event).pairs == 0  # the next call reconnects
        client.close()
    assert int(redis_client.hget(keys.topic("orders"), "counter")) == 2  # once, then once
