"""`busbar secrets reseal`: every subscriber's write-only secrets, and the private halves
of the push keys, sealed again under the current BUSBAR_SECRET_KEY, the end of a key
rotation (docs/callback-auth.md): set the new key, the former one in
BUSBAR_SECRET_KEY_PREVIOUS, restart web and workers, run this, then drop the former
key. Reads the settings as every other command does (the environment, then a `busbar
dev` running here); it needs the keys, never the secrets' owners, and prints counts
only.
"""

from __future__ import annotations

import argparse

from app.models.subscribers import SubscriberStore
from app.operator_session import operator_session
from app.services.sealed_headers import reseal, sealer_of


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="busbar secrets",
        description="seal subscribers' secrets again under the current BUSBAR_SECRET_KEY",
    )
    parser.add_argument("action", choices=("reseal",))
    parser.parse_args(argv)
    with operator_session("secrets") as session:
        sealer = sealer_of(session.settings)
        client, keys, scripts = session.client, session.keys, session.scripts
        tokens = SubscriberStore(client, keys, scripts).tokens()
        changed, values = reseal(client, keys, scripts, sealer, tokens)
    print(
        f"busbar secrets: {values} secrets in {changed} places sealed again under key "
        f"{sealer.current_id} ({len(tokens)} subscribers and the push keys looked at)"
    )
    return 0
