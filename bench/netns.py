"""Networks the cluster soak can cut: each Redis node and each worker in a network
namespace of its own, joined by one bridge, so that a link can be dropped between two
of them while both still reach everyone else.

The soak runs inside a fresh network namespace of its own (`unshare --net`, see
`inside`), so the bridge, the links and their filters exist only there and vanish with
it; the namespaces it makes are named `bb<pid>-<name>` and deleted when it ends. The
bridge holds BRIDGE_IP, where the soak itself, `busbar web` and the subscribers are;
the i-th host gets SUBNET.<10 + i>.

A cut is silent, as a real partition is: no reset, no refusal. Each link has an htb
queue on both ends whose class 1:99 is a pfifo of length 0, so a packet classified
there is dropped; a cut adds u32 filters (at CUT_PRIO) sending what crosses between the
host and the addresses cut off into that class, in both directions; healing deletes
them. (This kernel has neither netfilter nor tc's drop action; a zero-length queue
needs neither.) Needs root.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

SUBNET = "10.77.0"
BRIDGE = "bbr0"
BRIDGE_IP = f"{SUBNET}.1"
CUT_PRIO = "10"
INSIDE = "BUSBAR_SOAK_NETNS"  # set in the environment once re-executed inside


def sh(*args: str) -> None:
    """Run an `ip` or `tc` command; a failure is a set-up error worth its stderr."""
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")


def inside(argv: Sequence[str]) -> None:
    """Re-execute this process in a new network namespace, once: the soak's network
    then exists nowhere else (needs root and util-linux's unshare)."""
    if os.environ.get(INSIDE):
        return
    if os.geteuid() != 0:
        raise SystemExit("the cluster soak makes network namespaces: run it as root")
    env = {**os.environ, INSIDE: "1"}
    os.execvpe("unshare", ["unshare", "--net", "--", sys.executable, *argv], env)


def queues(dev: str, netns: str | None = None) -> None:
    """An htb root whose default class passes everything and whose class 1:99 drops."""
    at = ["ip", "netns", "exec", netns] if netns else []
    sh(*at, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10",
       "r2q", "1000000")  # fmt: skip
    for cls in ("1:10", "1:99"):
        sh(*at, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", cls, "htb",
           "rate", "100gbit")  # fmt: skip
    sh(*at, "tc", "qdisc", "add", "dev", dev, "parent", "1:99", "handle", "99:", "pfifo",
       "limit", "0")  # fmt: skip


@dataclass
class Host:
    """One namespace on the bridge: its name, its address, its end of the link."""

    name: str
    ip: str
    link: str  # the bridge's end of its veth
    cut_from: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> list[str]:
        """What runs a command in it."""
        return ["ip", "netns", "exec", self.name]

    def cut(self, others: Sequence[str]) -> None:
        """Drop every packet between this host and `others`, both ways."""
        for ip in others:
            sh(
                "tc",
                "filter",
                "add",
                "dev",
                self.link,
                "parent",
                "1:",
                "protocol",
                "ip",
                "prio",
                CUT_PRIO,
                "u32",
                "match",
                "ip",
                "src",
                f"{ip}/32",
                "classid",
                "1:99",
            )
            sh(*self.prefix, "tc", "filter", "add", "dev", "eth0", "parent", "1:", "protocol",
               "ip", "prio", CUT_PRIO, "u32", "match", "ip", "dst", f"{ip}/32",
               "classid", "1:99")  # fmt: skip
        self.cut_from += list(others)

    def heal(self) -> None:
        if not self.cut_from:
            return
        sh("tc", "filter", "del", "dev", self.link, "parent", "1:", "protocol", "ip",
           "prio", CUT_PRIO)  # fmt: skip
        sh(*self.prefix, "tc", "filter", "del", "dev", "eth0", "parent", "1:", "protocol",
           "ip", "prio", CUT_PRIO)  # fmt: skip
        self.cut_from = []


@dataclass
class Network:
    """The bridge and the hosts on it; `close` deletes the namespaces."""

    hosts: dict[str, Host] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sh("ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")

    def host(self, name: str) -> Host:
        i = len(self.hosts)
        netns, link = f"bb{os.getpid()}-{name}", f"bbv{i}"
        one = Host(netns, f"{SUBNET}.{10 + i}", link)
        sh("ip", "netns", "add", netns)
        self.hosts[name] = one  # from here on, close() deletes it
        sh("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", netns)
        sh("ip", "link", "set", link, "master", BRIDGE, "up")
        sh(*one.prefix, "ip", "addr", "add", f"{one.ip}/24", "dev", "eth0")
        sh(*one.prefix, "ip", "link", "set", "eth0", "up")
        sh(*one.prefix, "ip", "link", "set", "lo", "up")
        queues(link)
        queues("eth0", netns)
        return one

    def close(self) -> None:
        for one in self.hosts.values():
            subprocess.run(["ip", "netns", "del", one.name], capture_output=True)
        self.hosts.clear()
