"""What address a callback's host denotes, whatever its spelling, and which it hides.

A check on addresses is only as good as its reading of them. A resolver takes
127.0.0.1 also as `127.1`, `2130706433`, `0x7f000001` or `0177.0.0.1`, and an IPv6
address can carry an IPv4 one that the network delivers to: IPv4-mapped
(::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d),
NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48), 6to4 (2002::/16) and Teredo
(2001::/32, the client's address inverted). Each embedded address is judged as well as
the IPv6 one, so the metadata address written as NAT64 is the metadata address.

INTERNAL is what "the bus's own host and private network" means by default: loopback,
unspecified ("this host"), the private ranges (RFC 1918), shared address space
(100.64.0.0/10, carrier-grade NAT, often a cloud's internal network), unique-local and
site-local IPv6, and the ranges that are no single host's (multicast, reserved,
benchmarking, IETF protocol assignments).
"""

from __future__ import annotations

import ipaddress
import socket

from app.models.validate import digits
from config.parsers import Network, networks

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

INTERNAL: tuple[Network, ...] = networks(
    "0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 172.16.0.0/12, 192.0.0.0/24, "
    "192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4, "
    "::/128, ::1/128, fc00::/7, fec0::/10, ff00::/8"
)
# names that are loopback by definition (RFC 6761), whatever a resolver says
LOOPBACK_NAMES = ("localhost", ".localhost")
LOOPBACK = ipaddress.IPv4Address("127.0.0.1")

_LAST_32 = networks("::ffff:0:0/96, ::ffff:0:0:0/96, 64:ff9b::/96, 64:ff9b:1::/48, ::/96")


def literal(host: str) -> Address | None:
    """The address a host denotes by itself, or None for a name that needs DNS."""
    host = host.rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if not host or not digits(host[0]):
        return None
    try:  # what the resolver also takes as an address: 2852039166, 0xa9fea9fe, 169.254.1
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def is_loopback_name(host: str) -> bool:
    name = host.rstrip(".").lower()
    return name == LOOPBACK_NAMES[0] or name.endswith(LOOPBACK_NAMES[1])


def embedded(ip: Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries, by the forms the network routes."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ()
    found: list[ipaddress.IPv4Address] = []
    if int(ip) > 1 and any(ip in net for net in _LAST_32):  # :: and ::1 are themselves
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return tuple(found)


def spellings(ip: Address) -> tuple[Address, ...]:
    """The address and every one it embeds: what a check must judge."""
    return (ip, *embedded(ip))


def first_in(ip: Address, ranges: tuple[Network, ...]) -> Network | None:
    return next((net for net in ranges if ip.version == net.version and ip in net), None)
