"""The worker's thread group: one thread dying stops the others and is reported."""

from __future__ import annotations

import threading

from workers.process import ThreadGroup


def test_a_dying_thread_stops_the_group_and_is_named():
    group = ThreadGroup()
    stopped = threading.Event()

    def steady(stop: threading.Event) -> None:
        stop.wait(30)
        stopped.set()

    def broken(stop: threading.Event) -> None:
        raise RuntimeError("boom")

    group.add("steady", steady)
    group.add("broken", broken)
    group.start()
    assert group.stop.wait(5)
    group.join(5)
    assert stopped.is_set()
    assert group.failed == ["broken"]


def test_a_loop_returning_early_counts_as_a_failure():
    group = ThreadGroup()
    group.add("quitter", lambda _: None)
    group.start()
    assert group.stop.wait(5)
    group.join(5)
    assert group.failed == ["quitter"]
