"""A failing key steps aside (deliver_fail.lua's set_aside, lib/partitions.lua's aside
partition) on the real server: a subscriber of concurrency 2 (8 partitions and the
aside one), max 1, a clock the test sets. The failing key's events move aside in
order, its partition mates go on at once, what is published for it meanwhile queues
behind them, and once the aside partition is empty the key goes home (issue 53, defect
3: one url answering 500 forever held the events of the urls that hash with it)."""

from __future__ import annotations

from dataclasses import replace

from app import codec
from app.delivery.flight import Flight
from app.models import partitions
from app.models.attempt_result import answered
from app.models.event import Event
from app.models.queue import promote_all
from spec.app.lua.test_places import WORKERS, Line, distinct_keys, key_of

N = partitions.count(2)


def mates(count: int) -> list[str]:
    """`count` keys that fall in one partition of N."""
    found, i = [], 0
    while len(found) < count:
        if partitions.partition_of(f"k{i}", N) == partitions.partition_of("k0", N):
            found.append(f"k{i}")
        i += 1
    return found


def publish(line: Line, key: str, i: int) -> None:
    event = Event("update", f"https://o.test/{key}/{i}", line.now, None, key=key)
    line.ingest.publish("orders", "pub", [event], line.now)


def number(flight: Flight) -> int:
    return int(codec.unpack_entry(flight.entries[0]).url.rsplit("/", 1)[1])


def test_a_failing_key_steps_aside_and_its_partition_mates_go_on(
    redis_client, keys, scripts, settings
):  # fmt: skip
    line = Line(redis_client, keys, scripts, replace(settings, retry_lone_ms=1_000))
    poison, mate = mates(2)
    for i in range(3):
        publish(line, poison, i)
        publish(line, mate, i)
        line.now += 1
    first = line.take(WORKERS[0])
    assert first is not None and key_of(first) == poison
    assert line.delivery.finish(first, answered(500)).kind == "failed"  # a lone failure: in place
    aside = partitions.pid("sub", N, N)
    assert not redis_client.exists(keys.aside_keys(aside))
    line.now += 1_600
    (again,) = line.begin_all(WORKERS[0])
    assert key_of(again) == poison and number(again) == 0
    assert line.delivery.finish(again, answered(500)).kind == "failed"  # twice in a row: aside
    assert redis_client.hgetall(keys.aside_keys(aside)) == {poison.encode(): b"3"}
    # the mate goes on at once, all three, while the poisoned key waits its backoff
    got = []
    for _ in range(3):
        (flight,) = line.begin_all(WORKERS[1])
        got.append(key_of(flight))
        line.ack(flight)
    assert got == [mate] * 3
    publish(line, poison, 3)  # published while aside: queues behind the ones set aside
    assert redis_client.hget(keys.aside_keys(aside), poison) == b"4"
    assert line.begin_all(WORKERS[1]) == []  # nothing due before the backoff
    line.now += 3_200
    delivered = []
    while flights := line.begin_all(WORKERS[2]):
        for flight in flights:
            assert key_of(flight) == poison
            delivered.append(number(flight))
            line.ack(flight)
    assert delivered == [0, 1, 2, 3]  # the three set aside in order, then the later one
    assert not redis_client.exists(keys.aside_keys(aside))  # empty again: the key goes home
    publish(line, poison, 4)
    home = partitions.pid("sub", N, partitions.partition_of(poison, N))
    assert redis_client.llen(keys.lane(home, 10)) == 1
    assert int(redis_client.hget(keys.home("sub").event_gauge, "sub")) == 1


def test_an_outage_does_not_scatter_keys_aside(redis_client, keys, scripts, settings):
    """Failures in a row up to the circuit's count step aside; past it (the endpoint is
    failing every key, not one) partitions back off on their own as before."""
    slow = replace(settings, circuit_failures=3, retry_lone_ms=1, retry_first_ms=50_000)
    line = Line(redis_client, keys, scripts, slow)
    for key in mates(5):
        line.publish(key)
    aside = partitions.pid("sub", N, N)
    # failures in a row 1 (in place), 2 (its second: aside), 3 (the next key, in place),
    # then 4: past the circuit's count, the partition backs off as a whole
    for expected_aside in (0, 1, 1, 1):
        line.now += 10
        promote_all(line.queues, line.now)
        flight = line.take(WORKERS[0])
        assert flight is not None and flight.pid != aside
        assert line.delivery.finish(flight, answered(500)).kind == "failed"
        assert redis_client.hlen(keys.aside_keys(aside)) == expected_aside
    home = partitions.pid("sub", N, partitions.partition_of("k0", N))
    assert int(redis_client.hget(keys.flight(home), "next_attempt_at")) > line.now


def test_the_aside_partition_backs_off_alone_and_dead_letters_as_before(
    redis_client, keys, scripts, settings
):  # fmt: skip
    """Its failures are the key's own: they do not count toward the subscriber's
    failures in a row (nor open the circuit, though nothing else is queued), its delay
    grows with them, and with `max_attempts` the batch goes to the dead letters, the
    next one starting its count afresh."""
    line = Line(redis_client, keys, scripts,
                replace(settings, circuit_failures=3, circuit_outage_ms=0))  # fmt: skip
    redis_client.hset(keys.subscriber("sub"), "max_attempts", 3)  # home 2, aside 1
    (poison,) = mates(1)
    publish(line, poison, 0), publish(line, poison, 1)
    for _ in ("first", "second"):  # the second steps aside
        line.now += 3_000
        (flight,) = line.begin_all(WORKERS[0])
        assert line.delivery.finish(flight, answered(500)).kind == "failed"
    aside = partitions.pid("sub", N, N)
    assert redis_client.hexists(keys.aside_keys(aside), poison)
    for _ in ("third",):  # attempts
        line.now = int(redis_client.hget(keys.flight(aside), "next_attempt_at"))
        (flight,) = line.begin_all(WORKERS[1])
        assert number(flight) == 0 and flight.pid == aside
        assert line.delivery.finish(flight, answered(500)).kind == "failed"
        assert redis_client.hget(keys.subscriber("sub"), "streak") == b"2"  # the home ones only
        assert not redis_client.hexists(keys.subscriber("sub"), "circuit_at")
    assert redis_client.llen(keys.deadletters("sub")) == 1  # the third attempt: dead
    assert not redis_client.hexists(keys.flight(aside), "streak")  # counted afresh
    line.now = int(redis_client.hget(keys.flight(aside), "next_attempt_at"))
    (flight,) = line.begin_all(WORKERS[1])
    assert number(flight) == 1
    line.ack(flight)
    assert not redis_client.exists(keys.aside_keys(aside))


def test_partitions_failing_together_back_off_in_place(redis_client, keys, scripts, settings):
    """An outage, not a key: two partitions fail by turns with no 2xx between, so their
    failures are the endpoint's, and neither steps aside (it would pour every key into
    the one aside partition, to be delivered one batch at a time once the endpoint is
    back: `bench.blip`)."""
    line = Line(redis_client, keys, scripts, replace(settings, retry_lone_ms=1, retry_first_ms=1))
    for key in distinct_keys(2, N):
        line.publish(key)
    for _ in range(4):
        line.now += 10
        promote_all(line.queues, line.now)
        flight = line.take(WORKERS[0])
        assert flight is not None
        assert line.delivery.finish(flight, answered(500)).kind == "failed"
    assert not redis_client.exists(keys.aside_keys(partitions.pid("sub", N, N)))
