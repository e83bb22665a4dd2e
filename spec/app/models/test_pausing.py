"""How often the bus looks for subscribers to pause (BUSBAR_AUTO_PAUSE_S), on a real
server: the look reads every subscriber, so the workers' Expire runs share one look a
hundredth of the limit, 5 minutes at most."""

from __future__ import annotations

import time

from app.models.pausing import Pausing


def test_one_look_a_hundredth_of_the_limit_among_every_run(redis_client, keys, scripts):
    first, second = Pausing(redis_client, keys, scripts), Pausing(redis_client, keys, scripts)
    assert first.stale_due(150)  # 150 s: a look every 1.5 s
    assert not second.stale_due(150)  # another worker's run just after: no second look
    assert 0 < redis_client.pttl(keys.auto_pause_looked) <= 1_500
    time.sleep(1.6)
    assert second.stale_due(150)


def test_a_days_limit_is_looked_at_every_five_minutes(redis_client, keys, scripts):
    pausing = Pausing(redis_client, keys, scripts)
    assert pausing.stale_due(86_400)
    assert not pausing.stale_due(86_400)
    assert 290_000 < redis_client.pttl(keys.auto_pause_looked) <= 300_000
