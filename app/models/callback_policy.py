"""Which addresses busbar refuses to call back: link-local and cloud metadata ones.

A callback is a URL a client chooses and the worker then POSTs to from inside the
operator's network. On a cloud host, 169.254.169.254 (and its IPv6 twins) answers with
instance credentials, so a bus that calls any URL it is given hands a client a way to
reach them (server-side request forgery). Link-local addresses have no other use a
subscriber could need, so they are refused unless the operator says otherwise.

Two checks use this module. At subscribe time a host written as an address is judged
as written (including the legacy IPv4 spellings a resolver accepts, such as 2852039166
or 0xa9.0xfe.0xa9.0xfe); a host name is not resolved then, because what it resolves to
can change. At delivery time the worker judges the address it actually connected to,
whatever the name said (see app/delivery/callback.py).
Loopback and private ranges stay allowed by default: subscribers on the same network
are the norm, and limiting those is a job for the network. The ranges are the operator's
to choose (BUSBAR_CALLBACK_DENY); the default adds the metadata addresses of the clouds
that do not use 169.254.169.254 (Alibaba's 100.100.100.200, Azure's wire server
168.63.129.16) to the link-local ranges.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from app.errors import InvalidInput
from config.parsers import Network
from config.settings import CALLBACK_DENY

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

REFUSED: tuple[Network, ...] = CALLBACK_DENY  # BUSBAR_CALLBACK_DENY's default
SETTING = "BUSBAR_ALLOW_LINK_LOCAL_CALLBACKS"
__all__ = ["REFUSED", "SETTING", "Network", "check_callback", "literal_address", "refused_network"]


def literal_address(host: str) -> Address | None:
    """The address a host denotes by itself, or None for a name that needs DNS."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:  # what the resolver also takes as an address: 2852039166, 0xa9fea9fe, 169.254.1
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def refused_network(
    address: str | Address, refused: tuple[Network, ...] = REFUSED
) -> Network | None:
    """The refused range an address falls in, if any; IPv4-mapped IPv6 counts as IPv4."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return next((net for net in refused if ip in net), None)


def check_callback(
    url: str, field: str, *, allow_link_local: bool, refused: tuple[Network, ...] = REFUSED
) -> None:
    """Refuse a callback written with an address in the refused ranges (HTTP 400)."""
    if allow_link_local:
        return
    host = urlsplit(url).hostname or ""
    ip = literal_address(host)
    if ip is None:
        return
    network = refused_network(ip, refused)
    if network is not None:
        raise InvalidInput(
            f"{field} must not point at a link-local or cloud metadata address "
            f"({host} is in {network}, refused by BUSBAR_CALLBACK_DENY); {SETTING}=1 allows it"
        )
