"""`busbar clients shared|rename`: find and mend names that clients made before a name
was one client's still share (docs/operating.md, Shared client names). `shared` lists
each such name with its clients, told apart by what they do and by a fingerprint, never
by a token; `rename CLIENT NAME` gives one of them a free name (CLIENT: its fingerprint,
or a token of it). Reads the settings as every other command does (the environment,
then a `busbar dev` running here).
"""

from __future__ import annotations

import argparse

from app.models.client_names import ClientNames, Namesake
from app.models.tokens import fingerprint
from app.operator_session import operator_session


def described(client: Namesake) -> str:
    subscribes = (
        f"subscribes to {', '.join(client.subscribes)} (callback {client.callback})"
        if client.subscribes or client.callback
        else "no subscription"
    )
    publishes = "publishes " + (", ".join(client.publishes) or "nothing")
    operator = "; operator" if client.operator else ""
    return f"  {client.fingerprint}  {subscribes}; {publishes}{operator}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="busbar clients", description="find and mend names several clients share"
    )
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("shared", help="list the names more than one client carries")
    rename = actions.add_parser("rename", help="give one client a new name")
    rename.add_argument("client", help="its fingerprint (fp_..., from `shared`) or a token of it")
    rename.add_argument("name", help="the new name: free text, one client's")
    args = parser.parse_args(argv)
    with operator_session("clients") as session:
        names = ClientNames(session.client, session.keys, session.scripts)
        if args.action == "shared":
            shared = names.shared()
            for name, namesakes in shared.items():
                print(f"{name}: {len(namesakes)} clients")
                for namesake in namesakes:
                    print(described(namesake))
            if not shared:
                print("no name is shared: every client has its own")
            return 0
        key = names.key_of(args.client)
        renamed = names.rename(key, args.name)
    named = fingerprint(key)  # never the token it may have been given by
    if renamed.changed:
        print(f"{renamed.old} ({named}) is now named {args.name}")
    else:
        print(f"{named} is named {args.name} already")
    return 0
