"""Test hosts in Linux network namespaces, for partitions of real ensembles (root only).

Theory
------
Each host is a network namespace with one veth interface whose other end sits on a bridge in
the root namespace; the bridge has an address too, so the test (kazoo, four-letter words) reaches
every host from the root namespace. Addresses are ``10.231.<lab>.<10+i>/24`` -- the project's own
test hosts, never anything outside the sandbox. Unless the caller names one, ``<lab>`` is the
lowest that no interface of the root namespace uses, chosen and taken (the bridge's address)
under an exclusive lock on :data:`LOCK_PATH`, so labs alive at the same time on one machine
(pytest-xdist workers, test runs of other checkouts) never share a subnet: two bridges on one
subnet would send one lab's traffic to the other's hosts. ``cut(i)`` takes host ``i``'s
bridge-side link down: the host can reach nobody and nobody reaches it (its open TCP connections
stall, as in a real partition: no RST); ``heal(i)`` brings it back. A process runs on a host
through ``ip netns exec``.

With ``links=2`` every host has a second interface on a second bridge and subnet (taken the
same way): ``host(i, 1)`` is its second address and ``cut(i, 1)`` takes only that link down, so
a member listed with both addresses (``server.N=a:q:e|b:q:e``) loses one of them.

Invariants: names are unique per lab (a random tag), every namespace, veth and bridge made is
removed by :meth:`NetnsLab.close`, even after a failure; interface names fit IFNAMSIZ (15).
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import subprocess
import sys

__all__ = ["LOCK_PATH", "NetnsLab", "available"]

#: held while a lab picks its subnet and puts it on its bridge (machine-wide, root only)
LOCK_PATH = "/tmp/trizk-netns.lock"


def available() -> bool:
    """Whether this process may create network namespaces (root, with ``ip``)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    name = f"tzprobe{secrets.token_hex(3)}"
    ok = subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0
    if ok:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return ok


def _ip(*args: str, ns: str | None = None) -> None:
    cmd = ["ip", "netns", "exec", ns, "ip", *args] if ns else ["ip", *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")


def labs_in_use() -> set[int]:
    """The ``<lab>`` numbers of the 10.231.<lab>.0/24 addresses in the root namespace."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True)
    return {int(x) for x in re.findall(r"\binet 10\.231\.(\d+)\.", out.stdout)}


class NetnsLab:
    """``n`` hosts (1..n) on one bridge (``links=2``: two bridges, two addresses per host);
    see the module docstring. ``lab`` fixes the (first) subnet (10.231.<lab>.0/24); by default
    the lowest free one is taken."""

    def __init__(self, n: int, lab: int | None = None, links: int = 1) -> None:
        self.tag = secrets.token_hex(2)
        self.bridge = f"tzb{self.tag}"
        #: every link's bridge and subnet prefix (the first are ``bridge`` and ``prefix``)
        self.bridges = [f"tzb{self.tag}", f"tzc{self.tag}"][:links]
        self.prefixes: list[str] = []
        self.namespaces: dict[int, str] = {}
        self._veths: dict[int, str] = {}
        self._more_veths: dict[tuple[int, int], str] = {}
        try:
            with open(LOCK_PATH, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                for k, bridge in enumerate(self.bridges):
                    if lab is None or k > 0:
                        free = sorted(set(range(256)) - labs_in_use())
                        if not free:
                            raise RuntimeError("every subnet 10.231.<0-255>.0/24 is in use")
                        lab = free[0]
                    self.prefixes.append(f"10.231.{lab}")
                    _ip("link", "add", bridge, "type", "bridge")
                    _ip("addr", "add", f"{self.prefixes[k]}.1/24", "dev", bridge)
            self.prefix = self.prefixes[0]
            for bridge in self.bridges:
                _ip("link", "set", bridge, "up")
            for i in range(1, n + 1):
                self._add(i)
                for k in range(1, links):
                    self._add_link(i, k)
        except Exception:
            self.close()
            raise

    def _add(self, i: int) -> None:
        ns = f"tzn{self.tag}{i}"
        outer, inner = f"tzv{self.tag}{i}", f"tzi{self.tag}{i}"
        _ip("netns", "add", ns)
        self.namespaces[i] = ns
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        self._veths[i] = outer
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", outer, "master", self.bridge)
        _ip("link", "set", outer, "up")
        _ip("addr", "add", f"{self.host(i)}/24", "dev", inner, ns=ns)
        _ip("link", "set", inner, "up", ns=ns)
        _ip("link", "set", "lo", "up", ns=ns)

    def _add_link(self, i: int, k: int) -> None:
        ns = self.namespaces[i]
        outer, inner = f"tzw{self.tag}{i}{k}", f"tzj{self.tag}{i}{k}"
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        self._more_veths[i, k] = outer
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", outer, "master", self.bridges[k])
        _ip("link", "set", outer, "up")
        _ip("addr", "add", f"{self.host(i, k)}/24", "dev", inner, ns=ns)
        _ip("link", "set", inner, "up", ns=ns)

    def host(self, i: int, link: int = 0) -> str:
        return f"{self.prefixes[link]}.{10 + i}"

    def command(self, i: int, argv: list[str]) -> list[str]:
        """``argv`` run on host ``i``."""
        return ["ip", "netns", "exec", self.namespaces[i], *argv]

    def run_python(self, i: int, code: str, timeout: float = 20.0) -> str:
        """Run a Python snippet on host ``i``; its stdout."""
        r = subprocess.run(
            self.command(i, [sys.executable, "-c", code]),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return r.stdout

    def _veth(self, i: int, link: int) -> str:
        return self._veths[i] if link == 0 else self._more_veths[i, link]

    def cut(self, i: int, link: int = 0) -> None:
        _ip("link", "set", self._veth(i, link), "down")

    def heal(self, i: int, link: int = 0) -> None:
        _ip("link", "set", self._veth(i, link), "up")

    def close(self) -> None:
        for outer in [*self._veths.values(), *self._more_veths.values()]:
            subprocess.run(["ip", "link", "del", outer], capture_output=True)
        for ns in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for bridge in self.bridges:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
        self._veths.clear()
        self._more_veths.clear()
        self.namespaces.clear()

    def __enter__(self) -> NetnsLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
