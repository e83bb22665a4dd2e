"""`busbar subscriber pause|resume NAME`: an operator's hand on one subscriber, without
HTTP or the root key (whoever can reach Redis with the bus's settings can already do
more). The subscriber is named by its client's name, as root names it in the API; the
pause is recorded as by `<user>@<host>`. Reads the settings as every other command does
(the environment, then a `busbar dev` running here).
"""

from __future__ import annotations

import argparse
import getpass
import socket
from datetime import UTC, datetime

from app.clock import now_ms
from app.models.pausing import Pausing
from app.models.subscribers import SubscriberStore, subscriber_named
from app.models.tokens import TokenStore
from app.operator_session import operator_session


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="busbar subscriber", description="pause or resume a subscriber's deliveries"
    )
    parser.add_argument("action", choices=("pause", "resume"))
    parser.add_argument("name", help="the subscriber's client name")
    args = parser.parse_args(argv)
    with operator_session("subscriber") as session:
        client, keys, scripts = session.client, session.keys, session.scripts
        subscribers = SubscriberStore(client, keys, scripts)
        token = subscriber_named(TokenStore(client, keys), subscribers, args.name)
        pausing, by = Pausing(client, keys, scripts), f"{getpass.getuser()}@{socket.gethostname()}"
        if args.action == "pause":
            state = pausing.pause(token, by, now_ms())
        else:
            state = pausing.resume(token, by, now_ms())
    if state is None:
        print(f"{args.name}: delivering")
    else:
        since = datetime.fromtimestamp(state["at"] / 1000, UTC).isoformat(timespec="seconds")
        print(f"{args.name}: paused since {since} by {state['by']}")
    return 0
