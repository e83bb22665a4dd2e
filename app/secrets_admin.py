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

from app.lua import Scripts
from app.models.keys import keys_for
from app.models.subscribers import SubscriberStore
from app.redis_client import connect
from app.services.callback_headers import reseal, sealer_of
from config import devstate
from config import logging as busbar_logging
from config.settings import Settings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="busbar secrets",
        description="seal subscribers' secrets again under the current BUSBAR_SECRET_KEY",
    )
    parser.add_argument("action", choices=("reseal",))
    parser.parse_args(argv)
    settings = Settings.from_env(dev_var=devstate.VAR)
    busbar_logging.setup(settings, "secrets")
    sealer = sealer_of(settings)
    client = connect(settings)
    try:
        keys, scripts = keys_for(settings), Scripts(client)
        tokens = SubscriberStore(client, keys, scripts).tokens()
        changed, values = reseal(client, keys, scripts, sealer, tokens)
    finally:
        client.close()
    print(
        f"busbar secrets: {values} secrets in {changed} places sealed again under key "
        f"{sealer.current_id} ({len(tokens)} subscribers and the push keys looked at)"
    )
    return 0
