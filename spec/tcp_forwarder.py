"""A TCP forwarder between the bus and a server, that a test cuts and mends: cut, every
connection through it is reset and new ones are refused, as when a broker goes down;
mended, it listens again on the same port. For a server that keeps its state only in
memory (moto's SQS, spec/sqs_server.py), which a kill would empty. Silenced, the
connections open through it carry nothing more either way but stay open, as a path
gone silent (or a broker restarted behind a proxy that kept the old connection) looks
to a client; new ones work."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from dev.redis_server import free_port


class Forwarder:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._pairs: set[Pair] = set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def mend(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accept: close alone does not
            listener.close()
        with self._lock:
            sockets, self._open = self._open, set()
        for sock in sockets:
            with suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                sock.close()  # a reset, as a dead host's peer sees

    def silence(self) -> None:
        with self._lock:
            for pair in self._pairs:
                pair.silent = True

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                near, _ = listener.accept()
            except OSError:  # cut
                return
            try:
                far = socket.create_connection(self.target, 2)
            except OSError:
                near.close()
                continue
            far.settimeout(None)  # the 2 s was the connect's: a slow answer is no outage
            pair = Pair(near, far)
            with self._lock:
                self._open |= {near, far}
                self._pairs.add(pair)
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pipe, args=(a, b, pair), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, pair: Pair) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                if not pair.silent:  # silenced: read and dropped, the sockets kept open
                    sink.sendall(data)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
        if pair.done():  # both ways ended: the connection's sockets closed, not leaked
            with self._lock:
                self._open -= {pair.near, pair.far}
                self._pairs.discard(pair)
            pair.near.close()
            pair.far.close()


class Pair:
    """A connection's two sockets, and how many of its two directions have ended."""

    def __init__(self, near: socket.socket, far: socket.socket) -> None:
        self.near, self.far = near, far
        self.silent = False
        self._ended = 0
        self._lock = threading.Lock()

    def done(self) -> bool:
        with self._lock:
            self._ended += 1
            return self._ended == 2


@contextmanager
def forwarder(target: tuple[str, int]) -> Iterator[Forwarder]:
    made = Forwarder(target)
    made.mend()
    try:
        yield made
    finally:
        made.cut()
