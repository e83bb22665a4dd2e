"""`busbar erase`: ask for an erasure (docs/erasure.md) as root would, list them, show
one's receipt, and wait for it. Works on the store directly, as the other operator
commands do (the environment, then a `busbar dev` running here); the running workers
carry the erasure out (aux job `erase`), so `--wait` needs one.

    busbar erase --url https://people.example/alice [--topic T ...] [--before MS] [--wait]
    busbar erase --key customer-42 --wait
    busbar erase --list
    busbar erase --show er_0123456789abcdef [--wait]

Exit status: 0 when asked (or listed, shown); 1 when `--wait` timed out before the
erasure was done; 1 on bad input, with the same message as POST /erasures gives.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from app.clock import now_ms
from app.models.erasures import Erasures
from app.operator_session import operator_session

BY = "busbar erase"  # who asked, as the receipt names it


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="busbar erase", description="erase one url's or key's events from every store"
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--url", help="the url whose events go, as published")
    what.add_argument("--key", help="the ordering key whose events go, as published")
    what.add_argument("--list", action="store_true", help="the erasures, newest first")
    what.add_argument("--show", metavar="ID", help="one erasure's receipt")
    parser.add_argument(
        "--topic",
        action="append",
        dest="topics",
        metavar="TOPIC",
        help="only on this topic (repeat for several; default: every topic)",
    )
    parser.add_argument(
        "--before",
        type=int,
        metavar="MS",
        help="only events whose t is before this (ms; default: now)",
    )
    parser.add_argument(
        "--wait", action="store_true", help="until the workers have done it, then print its receipt"
    )
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds --wait waits at most (default 300)")  # fmt: skip
    return parser


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    with operator_session("erase") as session:
        erasures = Erasures(session.client, session.keys, session.scripts)
        if args.list:
            _print(erasures.listing(None))
            return 0
        if args.show:
            receipt = erasures.receipt(args.show)
        else:
            body: dict[str, Any] = {"url": args.url} if args.url is not None else {"key": args.key}
            if args.topics:
                body["topics"] = args.topics
            if args.before is not None:
                body["before"] = args.before
            receipt = erasures.ask(body, None, BY, now_ms())
        deadline = time.monotonic() + args.timeout
        while args.wait and receipt["state"] != "done" and time.monotonic() < deadline:
            time.sleep(0.5)
            receipt = erasures.receipt(receipt["id"])
        _print(receipt)
        if args.wait and receipt["state"] != "done":
            print(f"busbar erase: {receipt['id']} is not done after {args.timeout:.0f} s: "
                  "is a busbar worker running against this Redis?")  # fmt: skip
            return 1
        return 0
