"""Each job script's builder (app/models/job_calls.py) fills exactly the KEYS and ARGV its
header names, each in the place the header gives it: a slip in the order fails here,
not in production. The queue's own steps and the engine's settle and scrub both build
through these (app/models/queue.py, app/delivery/room.py)."""

from __future__ import annotations

from importlib import resources

from app.lua import header
from app.models import job_calls
from app.models.keys import Keys
from spec.app.delivery.test_calls import declared, place

KEYS = Keys("busbar:", 4)
HOME = KEYS.queue_place("main", 2)


def test_push_names_the_job_states_and_job_due_now():
    call = job_calls.push(HOME, "main", b"JOB", 200, 100)
    top_key, argv = declared("job_push")
    assert (len(call.keys), len(call.args)) == (top_key, max(argv))
    assert call.keys == HOME.job_states("main")
    assert argv[place(call, b"JOB")].startswith("job")
    assert "due" in argv[place(call, 200)] and "now" in argv[place(call, 100)]


def test_settle_names_the_worker_list_last_and_a_nack_time_or_minus_one():
    top_key, argv = declared("job_settle")
    ack = job_calls.settle(HOME, "main", "w.1.x/3", b"JOB", None, 100)
    nack = job_calls.settle(HOME, "main", "w.1.x/3", b"JOB", 500, 100)
    assert (len(ack.keys), len(ack.args)) == (top_key, max(argv))
    assert ack.keys[3] == HOME.jobs_pending("main", "w.1.x/3")
    assert "pending" in declared_key("job_settle", 4)
    assert "due time" in argv[place(nack, 500)] and ack.args[1] == -1
    assert "now" in argv[place(ack, 100)] and argv[place(ack, b"JOB")] == "job"


def test_scrub_names_holder_process_silence_and_forget():
    call = job_calls.scrub(HOME, "main", "w.1.x/3", "w.1.x", 3000, True)
    top_key, argv = declared("job_scrub")
    assert (len(call.keys), len(call.args)) == (top_key, max(argv))
    assert call.keys[0] == HOME.jobs_pending("main", "w.1.x/3") and call.keys[3] == HOME.workers
    assert "holder" in argv[place(call, "w.1.x/3")] and "process" in argv[place(call, "w.1.x")]
    assert "silence" in argv[place(call, 3000)] and call.args[3] == "1"


def test_scrub_many_chunks_holders_and_names_each_pending_list():
    holders = [f"w.1.x/{n}" for n in range(job_calls.SCRUB_CHUNK + 3)]
    calls = job_calls.scrub_many(HOME, "main", "w.1.x", holders, 0, False, (5, 6, 7))
    assert [len(c.keys) - 3 for c in calls] == [job_calls.SCRUB_CHUNK, 3]
    _, argv = declared("job_scrub_many")
    first = calls[0]
    assert first.keys[3] == HOME.jobs_pending("main", "w.1.x/0")
    assert "process" in argv[place(first, "w.1.x")] and "silence" in argv[2]
    assert first.args[3] == HOME.base  # main: a cut delivery is counted on its subscriber
    assert first.args[4:7] == [5, 6, 7] and first.args[7:] == holders[: job_calls.SCRUB_CHUNK]


def test_take_and_promote_name_each_place_in_turn():
    places = [(KEYS.queue_place("main", n), "main") for n in (1, 3)]
    take = job_calls.take(places, "w.1.x/0")
    assert take.keys[3:6] == [
        places[1][0].jobs_instant("main"),
        places[1][0].jobs_pending("main", "w.1.x/0"),
        places[1][0].jobs_pending_index("main"),
    ]
    assert "worker" in declared("job_take")[1][place(take, "w.1.x/0")]
    promote = job_calls.promote(places, 100, 50)
    _, argv = declared("job_promote")
    assert promote.keys[2:] == [
        places[1][0].jobs_scheduled("main"),
        places[1][0].jobs_instant("main"),
    ]
    assert "now" in argv[place(promote, 100)] and "most jobs" in argv[place(promote, 50)]


def declared_key(script: str, n: int) -> str:
    """The header's words for KEYS[n]."""
    text = resources.files("app.lua").joinpath(f"{script}.lua").read_text()
    line = next(line for line in header(text) if f"KEYS[{n}]" in line)
    return line.split(f"KEYS[{n}]", 1)[1].lower()
