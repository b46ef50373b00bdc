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
    """``n`` hosts (1..n) on one bridge; see the module docstring. ``lab`` fixes the subnet
    (10.231.<lab>.0/24); by default the lowest free one is taken."""

    def __init__(self, n: int, lab: int | None = None) -> None:
        self.tag = secrets.token_hex(2)
        self.bridge = f"tzb{self.tag}"
        self.namespaces: dict[int, str] = {}
        self._veths: dict[int, str] = {}
        try:
            with open(LOCK_PATH, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                if lab is None:
                    free = sorted(set(range(256)) - labs_in_use())
                    if not free:
                        raise RuntimeError("every subnet 10.231.<0-255>.0/24 is in use")
                    lab = free[0]
                self.prefix = f"10.231.{lab}"
                _ip("link", "add", self.bridge, "type", "bridge")
                _ip("addr", "add", f"{self.prefix}.1/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i in range(1, n + 1):
                self._add(i)
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

    def host(self, i: int) -> str:
        return f"{self.prefix}.{10 + i}"

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

    def cut(self, i: int) -> None:
        _ip("link", "set", self._veths[i], "down")

    def heal(self, i: int) -> None:
        _ip("link", "set", self._veths[i], "up")

    def close(self) -> None:
        for outer in self._veths.values():
            subprocess.run(["ip", "link", "del", outer], capture_output=True)
        for ns in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        self._veths.clear()
        self.namespaces.clear()

    def __enter__(self) -> NetnsLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
