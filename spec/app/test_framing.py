"""Differential fuzzing of busbar's two HTTP/1.1 readers against h11, a maintained
parser written independently: the web's request reader (app/web/request_headers.py and
app/web/chunked.py, as gevent's handler drives them) and the engine's answer reader
(app/delivery/answer.py), both on app/framing.py's rules.

Messages come from a grammar with mutations (spec/app/framing_grammar.py), pipelined,
cut short, with stray bytes. Whenever busbar accepts a message, h11 parses the same
message with the same framing: the same method, target, fields and body, and so the
same boundary before the next one; whatever h11 refuses, busbar never accepts. busbar
may refuse more (a bare LF, a fold, both framing headers, a length list: h11 takes
those), never less.

`make test` runs a fixed seed (BUSBAR_FUZZ_EXAMPLES examples each, 1,500 by default); the
long run is a command in docs/tests.md, e.g.
`BUSBAR_FUZZ_EXAMPLES=100000 BUSBAR_FUZZ_RANDOM=1 .venv/bin/python -m pytest
spec/app/test_framing.py -p no:randomly -s`, which prints what it ran.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from typing import NamedTuple

import h11
import pytest
from gevent.pywsgi import Input
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from app.delivery.answer import KEPT, AnswerReader
from app.errors import BadAnswer, BadFraming
from app.web.chunked import ChunkedBody
from app.web.request_headers import read_head
from spec.app.framing_grammar import answer, mutated, request
from spec.budget import MANY_EXAMPLES, examples

EXAMPLES = int(os.environ.get("BUSBAR_FUZZ_EXAMPLES") or examples(1500))
LONG = bool(os.environ.get("BUSBAR_FUZZ_RANDOM"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=not LONG,
    database=None,  # no example kept from an older grammar is replayed
    phases=[Phase.generate] if LONG else list(Phase),  # a long run reports the case it found
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAX_REQUEST_LINE = 8192  # what gevent's handler reads of a request line at most
TALLY: Counter[str] = Counter()


class Message(NamedTuple):
    method: bytes
    target: bytes
    fields: tuple[tuple[bytes, bytes], ...]  # names lowercased; framing values as h11 keeps
    body: bytes


def _normal(name: bytes, value: bytes) -> tuple[bytes, bytes]:
    """h11 lowercases names, and Transfer-Encoding's value."""
    name = name.lower()
    return name, value.lower() if name == b"transfer-encoding" else value


def busbar_requests(data: bytes) -> tuple[list[Message], str]:
    """What `busbar web` would serve of these bytes on one connection, in order, and how
    reading ended: 'end', 'closed' (the client said so), 'refused' or 'short'."""
    rfile = io.BufferedReader(io.BytesIO(data))  # type: ignore[arg-type]  # a raw stream
    served: list[Message] = []
    while line := rfile.readline(MAX_REQUEST_LINE):
        if len(line) >= MAX_REQUEST_LINE:
            return served, "refused"  # 414
        try:
            head = read_head(line.decode("latin-1"), rfile)
            if head.chunked:
                body = ChunkedBody(rfile, Input(rfile, None)).read()
            else:
                body = rfile.read(head.length or 0)
                if len(body) < (head.length or 0):
                    return served, "short"
        except BadFraming:
            return served, "refused"
        fields = tuple(
            _normal(n.encode("latin-1"), v.encode("latin-1")) for n, v in head.headers.fields
        )
        served.append(Message(head.method.encode(), head.target.encode(), fields, body))
        if head.close:
            return served, "closed"
    return served, "end"


def h11_requests(data: bytes) -> tuple[list[Message], str]:
    """What h11 parses of the same bytes: request after request, each on a fresh
    connection over what the last one left (so HTTP/1.0 keep-alive, which h11 does not
    do, is no difference), until it refuses or runs out."""
    parsed: list[Message] = []
    rest = data
    while rest:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=1 << 20)
        conn.receive_data(rest)
        conn.receive_data(b"")
        head: h11.Request | None = None
        body = b""
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                return parsed, "refused"
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # NEED_DATA, PAUSED, ConnectionClosed: nothing whole follows
                return parsed, "short"
        assert head is not None
        fields = tuple(_normal(n, v) for n, v in head.headers.raw_items())
        parsed.append(Message(head.method, head.target, fields, body))
        rest = conn.trailing_data[0]
    return parsed, "end"


@FUZZ
@MANY_EXAMPLES
@given(mutated(request()))
def test_every_request_busbar_serves_h11_parses_alike(data: bytes):
    served, how = busbar_requests(data)
    parsed, h11_how = h11_requests(data)
    TALLY[f"requests: busbar {how}, h11 {h11_how}"] += 1
    TALLY["requests served by busbar"] += len(served)
    assert len(served) <= len(parsed), (data, served, parsed, h11_how)
    for mine, theirs in zip(served, parsed, strict=False):
        assert mine == theirs, data


class Outcome(NamedTuple):
    whole: bool  # an answer was framed to its end
    status: int = 0
    body: bytes = b""
    reusable: bool = False  # the connection could carry the next request


def busbar_answer(data: bytes, split: int) -> Outcome:
    """The engine's reader fed the bytes `split` at a time, then the close."""
    reader = AnswerReader()
    fed = 0
    try:
        for fed in range(split, len(data) + split, split):
            if reader.feed(data[fed - split : fed]):
                break
        else:
            if not reader.eof():
                return Outcome(False)
    except BadAnswer:
        return Outcome(False)
    assert reader.answer is not None
    # bytes still to come after a whole answer close its connection (app/delivery/http1.py)
    reusable = reader.reusable and fed >= len(data)
    return Outcome(True, reader.answer.status, reader.answer.body, reusable)


def h11_answer(data: bytes) -> tuple[Outcome, bool]:
    """h11 as the client of one POST, reading these bytes and then the close; and
    whether it refused them."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=1 << 20)
    conn.send(
        h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "0")])
    )
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    status, body = 0, b""
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            return Outcome(False), True
        if event is h11.NEED_DATA:
            if conn.trailing_data[1]:
                return Outcome(False), False
            conn.receive_data(b"")
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            keeps = conn.their_state is h11.DONE and not conn.trailing_data[0]
            return Outcome(True, status, body[:KEPT], keeps), False
        elif not isinstance(event, h11.InformationalResponse):
            return Outcome(False), False


@FUZZ
@MANY_EXAMPLES
@given(mutated(answer()), st.integers(1, 64))
def test_every_answer_the_engine_takes_h11_reads_alike(data: bytes, split: int):
    mine = busbar_answer(data, split)
    theirs, refused = h11_answer(data)
    TALLY[f"answers: busbar {'took' if mine.whole else 'refused'}, h11 "
          f"{'refused' if refused else 'took' if theirs.whole else 'short'}"] += 1  # fmt: skip
    if refused:
        assert not mine.whole, data
    if mine.whole:
        assert theirs.whole and (mine.status, mine.body) == (theirs.status, theirs.body), data
        if mine.reusable:  # nothing after it, and h11 too would send the next request
            assert theirs.reusable, data


@pytest.fixture(scope="module", autouse=True)
def tally() -> object:
    """The long run's report: how many cases, and how each reader ended them."""
    yield None
    if LONG:
        print(f"\nframing fuzz, {EXAMPLES} examples a test:")
        for what, count in sorted(TALLY.items()):
            print(f"  {what}: {count}")
