"""Another host, as far as one machine allows: a network namespace of the test's own joined to
this one by a veth pair, with the servers' address on this side. A process started in it
(`prefix() + command`) reaches the servers through the pair only, so taking the pair's link
down partitions that process from them as a failed switch or a dropped route does: the
kernel drops its packets silently, closes nothing and answers nothing (this kernel has no
`netem`, but it has namespaces; the test runs as root)."""

from __future__ import annotations

import itertools
import os
import subprocess
import threading

_numbers = itertools.count(1)
_lock = threading.Lock()


def ip(*args: str, netns: str = "") -> str:
    command = ["ip", *(["-n", netns] if netns else []), *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


class ServerAddress:
    """An address of this machine's own (on lo) that the servers listen on and that every
    namespace routes to through its own link: one address for all, as a Kafka broker's
    advertised listener must be."""

    def __init__(self) -> None:
        # One per test process: runs of the suite side by side (pytest-xdist) do not share.
        self.host = f"10.199.{os.getpid() % 250 + 1}.1"
        ip("addr", "replace", f"{self.host}/32", "dev", "lo")

    def close(self) -> None:
        subprocess.run(["ip", "addr", "del", f"{self.host}/32", "dev", "lo"],
                       capture_output=True)


class Island:
    """A namespace with one link to this machine; partition() takes the link down on this
    side, heal() brings it up."""

    def __init__(self) -> None:
        with _lock:
            n = next(_numbers)
        tag = f"{os.getpid() % 10000}x{n}"
        self.name, self.link, inner = f"hx{tag}", f"hv{tag}", f"nv{tag}"
        # 10.200-255.x.y/30 pairs: the process and the number keep them apart.
        a = (os.getpid() % 50) + 200
        base = n % 64 * 4
        net = f"10.{a}.{n // 64 % 256}"
        gateway, own = f"{net}.{base + 1}", f"{net}.{base + 2}"
        ip("netns", "add", self.name)
        try:
            ip("link", "add", self.link, "type", "veth", "peer", "name", inner)
            ip("link", "set", inner, "netns", self.name)
            ip("addr", "add", f"{gateway}/30", "dev", self.link)
            ip("link", "set", self.link, "up")
            ip("link", "set", "lo", "up", netns=self.name)
            ip("addr", "add", f"{own}/30", "dev", inner, netns=self.name)
            ip("link", "set", inner, "up", netns=self.name)
            ip("route", "add", "default", "via", gateway, netns=self.name)
            # The gateway's hardware address fixed: with the link down, a connection attempt
            # then times out as across a real network, instead of failing at once because
            # the neighbour cannot be resolved ("No route to host").
            mac = ip("-o", "link", "show", self.link).split("link/ether ")[1].split()[0]
            ip("neigh", "replace", gateway, "lladdr", mac, "dev", inner, "nud", "permanent",
               netns=self.name)
        except BaseException:
            self.close()
            raise

    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def partition(self) -> None:
        ip("link", "set", self.link, "down")

    def heal(self) -> None:
        ip("link", "set", self.link, "up")

    def close(self) -> None:
        # Deleting the namespace deletes its end of the pair, and with it this end.
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
