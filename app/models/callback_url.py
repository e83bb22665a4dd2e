"""A callback URL as POST /subscription takes it (and an OAuth2 token URL, held to the
same rules: app/models/oauth2.py): https unless allowed, no user:password@, and no host
the callback policy refuses as written (app/models/callback_policy.py); the published
schema leaves out the hosts the server refuses, so a client or a fuzzer reading it is not
told they are valid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.errors import InvalidInput
from app.models.callback_policy import check_callback
from app.models.fields import Doc, Rules, Url

# How refused hosts are written in a URL, for the published schema's `not`: the
# link-local ranges (fe80::/10 is a first group fe8x-febx), only while they are denied;
# the internal IPv4 ranges as dotted quads; every other numeric spelling of an IPv4
# address (127.1, 2130706433, 0x7f000001), public ones too (the schema errs on the side
# of calling them invalid); localhost names; and the IPv6 forms that are internal or may
# embed an internal IPv4 address. The server judges the address itself (callback_policy).
_LINK_LOCAL = (r"169\.254\.[0-9]+\.[0-9]+", r"\[[fF][eE][89aAbB][0-9a-fA-F]:[^\]]*\]")
_INTERNAL = (
    r"(?:0|10|127)\.[0-9]+\.[0-9]+\.[0-9]+",
    r"172\.(?:1[6-9]|2[0-9]|3[01])\.[0-9]+\.[0-9]+",
    r"192\.(?:168|0\.0)\.[0-9]+(?:\.[0-9]+)?",
    r"100\.(?:6[4-9]|[7-9][0-9]|1[01][0-9]|12[0-7])\.[0-9]+\.[0-9]+",
    r"198\.1[89]\.[0-9]+\.[0-9]+",
    r"(?:22[4-9]|2[3-5][0-9])\.[0-9]+\.[0-9]+\.[0-9]+",
    r"(?![0-9]{1,3}(?:\.[0-9]{1,3}){3}(?:[:/#]|$))[0-9][0-9a-fA-FxX.]*",
    r"(?:[lL][oO][cC][aA][lL][hH][oO][sS][tT]|[^/:#]*\.[lL][oO][cC][aA][lL][hH][oO][sS][tT])\.?",
    r"\[(?:[0:]|[fF](?:[cCdD][0-9a-fA-F]{2}|[eE][c-fC-F][0-9a-fA-F]|[fF][0-9a-fA-F]{2}):"
    r"|64:|2002:|2001:0*:)[^\]]*\]",
)


@dataclass(frozen=True)
class Callback(Url):
    userinfo: bool = False  # refused with its own message (check), absent from the schema
    description: str = (
        "where batches are POSTed; https (http with BUSBAR_ALLOW_HTTP), no query string, "
        "no user:password@; not the bus's own host or an internal network (loopback, "
        "private, shared, unique-local: BUSBAR_CALLBACK_ALLOW opens them), nor link-local "
        "or cloud metadata (BUSBAR_CALLBACK_DENY), in any spelling"
    )

    def check(self, value: Any, where: str, rules: Rules) -> str:
        url = super().check(value, where, rules)
        if "@" in urlsplit(url).netloc:
            # Refused, not stored: it would be shown in listings and logs, and then not
            # even be used, since the callback's Basic credentials are the uuid's.
            raise InvalidInput(
                f"{where} must not hold a user or password (user:password@host): busbar "
                "calls it with HTTP Basic, the user being the subscription's uuid"
            )
        check_callback(url, where, rules.callbacks)
        return url

    def shape(self, rules: Rules) -> Doc:
        """The URL rule, less the hosts the server refuses as written: a client (or a
        fuzzer) reading the schema is not told that those are valid."""
        doc = super().shape(rules)
        denied = rules.callbacks.deny
        link_local = list(_LINK_LOCAL) if denied else []
        doc["not"] = {"pattern": f"^https?://(?:{'|'.join([*link_local, *_INTERNAL])})(?:[:/#]|$)"}
        return doc
