"""A subscriber's last delivered event, read back from its shard's delivery log: what
the console tries a route's transform on (docs/transforms.md, Try it).

The log is one stream a shard, every subscriber of the shard in it, newest last, and
names subscribers by client name; it is read backwards a page at a time, at most SCAN
entries, so a subscriber quiet while its shard-mates were busy has none found (404)
rather than a slow answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import redis

from app import codec
from app.models.attempts import Entries
from app.models.keys import Keys

SCAN = 2_000  # delivery log entries read back at most
PAGE = 200


@dataclass(frozen=True)
class Delivered:
    published: codec.QueuedEvent  # as its publisher gave it: what a transform is given
    sent: codec.QueuedEvent  # as the subscriber received it
    delivered_at: int

    def describe(self) -> dict[str, Any]:
        return {
            "event": self.published.delivery(),
            "sent": self.sent.delivery(),
            "delivered_at": self.delivered_at,
        }


def last_delivered(
    client: redis.Redis, keys: Keys, token: str, name: str, scan: int = SCAN
) -> Delivered | None:
    """The last event delivered to the subscriber `token`, whose client is `name`."""
    log, end, read, wanted = keys.home(token).delivery_log, "+", 0, name.encode()
    while read < scan:
        page = cast(Entries, client.xrevrange(log, end, "-", count=PAGE))
        for _, fields in page:
            if fields.get(b"subscriber") == wanted:
                found = codec.last_logged(fields)
                if found is not None:
                    return Delivered(found[1], found[0], int(fields[b"delivered_at"]))
        if len(page) < PAGE:
            return None
        read += len(page)
        end = "(" + page[-1][0].decode()
    return None
