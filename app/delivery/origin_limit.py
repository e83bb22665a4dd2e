"""How many connections one callback origin is asked to take from this worker, learnt
from how it takes them (app/delivery/gate.py enforces it, app/delivery/origins.py
feeds it).

A fixed bound either drowns a small server or starves a gateway: 64 connections let a
threaded server with an accept backlog of 5 live, but held 10,000 subscribers behind
one capable load balancer to 64 answers at a time (5,063 of them reached in 180 s). So
the bound starts at BUSBAR_ORIGIN_CONNECTIONS and moves, the way TCP's congestion
window does, on what the origin shows:

- **Grow while deliveries wait and the origin copes.** Only while some delivery waits
  for a connection (demand beyond the limit; an origin asked for less has nothing to
  show). Before the first sign of trouble, fast: +1 for every connect the origin takes
  promptly and every answer that comes back in time (the limit doubles each round
  trip, and connects come BUSBAR_ORIGIN_CONNECTING at a time, so a capable origin is
  met in about a second). After it, slow: +1 a round trip (+1/limit an answer), until
  deliveries next wait for it after a pause (RESTART_ROUNDS round trips, at least
  RESTART_S): fast again from there.
- **Cut on a sign of trouble,** once a round trip at most (a burst of refusals is one
  sign, as TCP counts one loss a window): a connect refused or not accepted in time
  while others are open (its accept queue is full: to what is open, the origin's own
  answer). No growth then for a round trip; refused again at the same level (within
  one), for PROBE_S, doubled at each refusal there, up to PROBE_MOST_S (probing a
  refusing origin every round trip was a refusal every 50 ms; PROBE_S after the first
  refusal too held a threaded server's cold fan-out of 1,000 at its first cut, 11, for
  half a second). A connect taken past that level later shows the refusal was a
  shallow accept queue met by a burst, not a limit (a server that accepts 4 at once
  from a backlog of 1 refuses the 5th, then takes 30): the growth goes on as before
  it, and a refusal past that level again is the same burst: no cut, a round trip
  without growth.
  Answers of 429, 502, 503 or 504, or none within BUSBAR_TIMEOUT, once they
  are more than TROUBLE of the recent ones (to half: one subscriber down behind a
  gateway that answers for many is its own circuit's business, not the origin's);
  answers slower as more are asked at once (an origin slowing under load): each answer's
  time is averaged by how many connections were open when its request was written (in
  powers of two), and when the answers at the current load take over
  LATENCY_TOLERANCE times those at the lightest load measured, the limit goes back to
  the most connections whose answers did not (never below half). By load, not by time:
  subscribers behind one gateway answer in their own times (50 ms and 1 s side by
  side), the fast ones come back first, and an average over time took that for a
  slowdown; the same mix at every load is no sign.
- Never below FLOOR nor above the ceiling, BUSBAR_ORIGIN_CONNECTIONS_MAX.

Each change keeps its reason and time, for GET /metrics and the console's origins.
The rule is pure (a clock passed in), so it is tested on a simulated origin
(spec/app/delivery/test_origin_limit.py); the figures that chose it are in
docs/delivery.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLOOR = 2  # connections an origin is always allowed: one answering, one opening
LATENCY_TOLERANCE = 2.0  # answers this many times slower than at light load: too many
SMOOTHING = 0.05  # a new answer's weight in its load's average time
MIN_ROUND_S = 0.05  # the shortest round trip counted between two cuts
SAMPLES = 32  # answers at a load before its average counts
RESTART_S = 0.5  # nobody waiting this long (and RESTART_ROUNDS round trips): a new burst
RESTART_ROUNDS = 4  # grows fast again, as TCP's slow start after an idle RTO
PROBE_S = 0.5  # refused again at one level: how long before the limit grows again
PROBE_MOST_S = 10.0  # the longest, after refusals again and again at one level
TROUBLE = 0.25  # the share of recent answers that may be 429/502/503/504 or timeouts
TROUBLE_WEIGHT = 0.02  # a new answer's weight in that share
CONGESTED = frozenset({429, 502, 503, 504})


def load_of(open_: int) -> int:
    """The load an answer is averaged under: its request's open connections, in powers
    of two (1, 2-3, 4-7, ...)."""
    return max(1, open_).bit_length()


@dataclass
class OriginLimit:
    limit: float
    ceiling: int
    reason: str = "start"
    changed_at: float = 0.0
    fast: bool = True  # growing fast: no sign of trouble yet
    trouble: float = 0.0  # the share of recent answers that were signs of trouble
    round_s: float = 0.0  # an answer's time lately, averaged: one round trip
    by_load: dict[int, tuple[float, int]] = field(default_factory=dict)  # time, answers
    _cut_at: float = -1e9
    _quiet_until: float = 0.0  # no growth before: a connect was refused
    _waited_at: float = -1e9  # when deliveries last waited in line (for the limit or not)
    _line: bool = False  # deliveries waited in line at the last connect or answer
    _quiet_s: float = 0.0
    _refused_at: int = 0  # the open connections at the last refusal, 0: none since
    _refused_when: float = -1e9  # when that refusal was counted
    _fast_before: bool = True  # growing fast before that refusal
    _shallow_at: int = 0  # a refusal's level later passed: the origin's queue is shallow

    @property
    def connections(self) -> int:
        return int(self.limit)

    def connected(self, now: float, pressed: bool, open_: int, waiting: bool | None = None) -> None:
        """A connect the origin took promptly, now `open_` open; `pressed`: deliveries
        wait for the limit; `waiting`: deliveries wait in line at all (`pressed` when
        not given)."""
        if self._refused_at and open_ > self._refused_at:  # a shallow queue, not a limit
            self._shallow_at = self._refused_at
            self._refused_at, self._quiet_s, self._quiet_until = 0, 0.0, 0.0
            self.fast = self._fast_before
        self._pressed(now, pressed, pressed if waiting is None else waiting)
        if pressed and self.fast:
            self._grow(1.0, now, "connects taken promptly")

    def busy(self, now: float, open_: int) -> None:
        """A connect refused, or not taken in time, while `open_` others are open. The
        refusals of one burst (connects begun together, given up together) are one sign:
        counted each, four at once doubled the quiet three times, to 4 s, and held a
        threaded server's fan-out of 1,000 at its cut limit for the rest of the round and
        the whole of the next."""
        if self._refused_at and now - self._refused_when < max(MIN_ROUND_S, self.round_s):
            return
        self._refused_when = now
        again = self._refused_at and abs(open_ - self._refused_at) <= 1  # its limit again
        burst = not again and self._shallow_at and open_ > self._shallow_at + 1
        if again:
            self._quiet_s = min(PROBE_MOST_S, max(PROBE_S, self._quiet_s * 2))
        else:
            self._quiet_s = max(MIN_ROUND_S, self.round_s)
        if not self._refused_at:
            self._fast_before = self.fast
        self._refused_at = open_
        self._quiet_until = now + self._quiet_s
        if not burst:
            self._cut(max(FLOOR, open_), now, f"a connect refused at {open_} open")

    def answered(
        self,
        now: float,
        seconds: float,
        status: int,
        pressed: bool,
        open_: int,
        waiting: bool | None = None,
    ) -> None:
        """An answer, `seconds` after its request was written with `open_` connections
        open; `pressed`, `waiting`: as connected() says."""
        self._pressed(now, pressed, pressed if waiting is None else waiting)
        if self._troubled(status in CONGESTED):
            self._cut(self.limit / 2, now, f"answered {status}")
            return
        if status in CONGESTED:
            return
        slower = self._timed(seconds, load_of(open_))
        if slower is not None:
            fits, ratio = slower
            self._cut(max(self.limit / 2, fits), now, f"answers {ratio:.1f}x slower under load")
        elif pressed:
            self._grow(1.0 if self.fast else 1.0 / self.limit, now, "answers in time")

    def _pressed(self, now: float, pressed: bool, waiting: bool) -> None:
        """Pressed after a pause of RESTART_ROUNDS round trips (RESTART_S at least) with
        nobody waiting: a new burst, fast growth again from where the limit is (TCP's
        slow start after idle). A sign of trouble in one fan-out held the next to +1 a
        round trip: 10,000 deliveries of 1 s met a limit of 500 learnt on 1,000 of 50
        ms, and took 20 s. A fixed 5 s pause was too long: fan-outs a second or two
        apart (bench.fanout's rounds) never grew fast again, and 10,000 deliveries right
        after 1,000 took 32 s. The pause is one without deliveries waiting, not one
        without the limit reached: within a burst, a limit growing faster than
        connections open leaves the line waiting below it, and taking that for a new
        burst forgot the answer times by load mid-burst (an origin slowing past 40
        connections was then pushed to 264). And it follows a connect or answer with
        nobody in line (a burst's last answers come so): the same gap with the line
        waiting on both sides is the worker's own loop stopped (a long collection, a
        starved core), and taken for a new burst it opened 1,000 connections to that
        origin."""
        paused = not self._line and now - self._waited_at > max(
            RESTART_S, RESTART_ROUNDS * self.round_s
        )
        if pressed and paused:
            # a new burst is a new mix of subscribers: answer times by load are learnt
            # again (1 s answers measured against 50 ms ones a burst before looked 20x
            # slower under load, and held 10,000 deliveries to 256 at once)
            self.by_load.clear()
            if now >= self._quiet_until:
                self.fast = True
        self._line = waiting
        if waiting:
            self._waited_at = now

    def timed_out(self, now: float) -> None:
        """No answer within BUSBAR_TIMEOUT."""
        if self._troubled(True):
            self._cut(self.limit / 2, now, "answers timed out")

    def _troubled(self, sign: bool) -> bool:
        self.trouble += (float(sign) - self.trouble) * TROUBLE_WEIGHT
        return sign and self.trouble > TROUBLE

    def _timed(self, seconds: float, load: int) -> tuple[float, float] | None:
        """Count an answer's time under its load. When answers at this load are too
        slow beside those at the lightest load measured: the most connections whose
        answers were not, and how much slower these are."""
        self.round_s += (seconds - self.round_s) * (SMOOTHING if self.round_s else 1.0)
        average, count = self.by_load.get(load, (seconds, 0))
        average += (seconds - average) * max(SMOOTHING, 1.0 / (count + 1))
        self.by_load[load] = (average, count + 1)
        if count + 1 < SAMPLES:
            return None
        measured = sorted((b, t) for b, (t, n) in self.by_load.items() if n >= SAMPLES)
        light = max(measured[0][1], 0.002)  # a loopback's answers: 1 ms against 3 is none
        if average <= LATENCY_TOLERANCE * light:
            return None
        fits = max((b for b, t in measured if t <= LATENCY_TOLERANCE * light), default=1)
        return float(1 << fits), average / light

    def _grow(self, by: float, now: float, reason: str) -> None:
        if now < self._quiet_until:
            return
        grown = min(float(self.ceiling), self.limit + by)
        if int(grown) != int(self.limit):
            self.reason, self.changed_at = reason, now
        self.limit = grown

    def _cut(self, to: float, now: float, reason: str) -> None:
        """One cut a round trip; the first ends the fast growth."""
        if now - self._cut_at < max(MIN_ROUND_S, self.round_s):
            return
        self._cut_at, self.fast = now, False
        self.limit = max(float(FLOOR), min(self.limit, to))
        self.reason, self.changed_at = reason, now
