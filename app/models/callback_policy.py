"""Which addresses busbar will not call back, and who may open which.

A callback is a URL a client chooses and the worker then POSTs to from inside the
operator's network, so without a policy any client could make the bus talk to the
bus's own host (Redis on 127.0.0.1:6379, an admin port), the private network behind
it, or a cloud's metadata service (instance credentials on 169.254.169.254): server-side
request forgery. Two kinds of range are refused by default:

- denied (BUSBAR_CALLBACK_DENY): link-local and every cloud's metadata address. Nothing
  opens them but BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS, which drops the deny list whole.
- internal (app/models/addresses.py's INTERNAL): loopback, unspecified, private,
  shared and unique-local. BUSBAR_CALLBACK_ALLOW opens them, by range (10.20.0.0/16)
  or by host name (orders.internal, *.svc.cluster.local) for deployments whose
  subscribers live inside; the deny list wins over it. `busbar dev` allows loopback.

An address is judged in every spelling a resolver takes and with every IPv4 address it
embeds. At subscribe time a host written as an address is judged as written, and
`localhost` names as loopback (a 400 naming the rule); other names are not resolved
then, since what they resolve to can change. At delivery time every address a name
resolves to is judged before anything connects, and only allowed ones are tried
(app/delivery/callback.py); a callback with none fails as `refused_address`, the same
whether the address behind it listens or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

from app.errors import InvalidInput
from app.models.addresses import (
    INTERNAL,
    LOOPBACK,
    Address,
    first_in,
    is_loopback_name,
    literal,
    spellings,
)
from config.parsers import Network, allowlist
from config.settings import CALLBACK_DENY, DEV_CALLBACK_ALLOW, Settings

REFUSED: tuple[Network, ...] = CALLBACK_DENY  # BUSBAR_CALLBACK_DENY's default
SETTING = "BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS"
__all__ = [
    "LOOPBACK_OPEN", "PRODUCTION", "REFUSED", "SETTING", "Network", "Policy", "Refusal",
    "check_callback", "literal",
]  # fmt: skip


class Refusal(NamedTuple):
    address: Address  # the one judged (an embedded IPv4 address, if that was refused)
    network: Network
    denied: bool  # in the deny list; else in an internal range the allowlist does not open

    def __str__(self) -> str:
        kind = "refused" if self.denied else "internal"
        return f"{self.address} is in the {kind} range {self.network}"


@dataclass(frozen=True)
class Policy:
    deny: tuple[Network, ...] = REFUSED
    internal: tuple[Network, ...] = INTERNAL
    allow: tuple[Network | str, ...] = ()  # BUSBAR_CALLBACK_ALLOW: ranges and host names

    @classmethod
    def of(cls, settings: Settings) -> Policy:
        deny = () if settings.allow_link_local_callbacks else settings.callback_deny
        return cls(deny=deny, allow=settings.callback_allow)

    def refusal(self, address: Address, host: str = "") -> Refusal | None:
        """Why a connection to `address` (reached by the name `host`) is refused, if it is."""
        for ip in spellings(address):
            denied = first_in(ip, self.deny)
            if denied is not None:
                return Refusal(ip, denied, True)
            internal = first_in(ip, self.internal)
            if internal is not None and not self._opens(ip, host):
                return Refusal(ip, internal, False)
        return None

    def written(self, host: str) -> Refusal | None:
        """The refusal of a host as written in a URL: an address, or a localhost name."""
        address = literal(host)
        if address is None and is_loopback_name(host):
            address = LOOPBACK
        return None if address is None else self.refusal(address, host)

    def _opens(self, ip: Address, host: str) -> bool:
        name = host.rstrip(".").lower()
        for allowed in self.allow:
            if isinstance(allowed, str):
                if name == allowed or (allowed[:2] == "*." and name.endswith(allowed[1:])):
                    return True
            elif ip.version == allowed.version and ip in allowed:
                return True
        return False


# the default: nothing internal opened, the default deny list
PRODUCTION = Policy()
# the policy `busbar dev` runs with (and tests that serve subscribers on this machine)
LOOPBACK_OPEN = Policy(allow=allowlist(DEV_CALLBACK_ALLOW))


def check_callback(url: str, field: str, policy: Policy) -> None:
    """Refuse a callback written with a refused address (HTTP 400 naming the rule)."""
    host = urlsplit(url).hostname or ""
    refusal = policy.written(host)
    if refusal is None:
        return
    if refusal.denied:
        raise InvalidInput(
            f"{field} must not point at a link-local or cloud metadata address "
            f"({host}: {refusal.address} is in {refusal.network}, refused by "
            f"BUSBAR_CALLBACK_DENY); {SETTING}=1 allows it"
        )
    raise InvalidInput(
        f"{field} must not point at the bus's own host or an internal network "
        f"({host}: {refusal.address} is in {refusal.network}); the operator can open "
        "internal ranges or host names with BUSBAR_CALLBACK_ALLOW"
    )
