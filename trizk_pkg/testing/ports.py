"""Free loopback ports for test servers and ensembles (the one port allocator), and the
addresses of an ensemble's members as zoo.cfg writes them.

Theory
------
A port is found free by binding port 0 on 127.0.0.1 and reading what the kernel chose; the
socket is then closed so that the server (often another process) can bind it. Between the close
and the server's bind another program may take the port: callers that can, bind port 0
themselves and report what they got (``trizk-server --port 0``); the others retry on a port
refused (compat.procs.servers.start) or keep the sockets they must not lose
(:func:`listener_avoiding`).

:func:`free_ports` holds every socket it bound until it has all ``n`` ports, so the ports of
one call are distinct (``free_port()`` twice may return one port twice once the first is given
up). :func:`allocate` gives each member of an ensemble its quorum, election and client ports
that way (:class:`MemberAddrs`); :func:`server_lines` writes them as zoo.cfg's ``server.N``
lines, :func:`config_string` as ZooKeeper's QuorumMaj prints them.

Invariants
----------
* Loopback only (127.0.0.1) unless a caller names another local address.
* No socket outlives the call, except the listener :func:`listener_avoiding` returns.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "MemberAddrs",
    "allocate",
    "config_string",
    "free_port",
    "free_ports",
    "listener_avoiding",
    "server_lines",
]

LOOPBACK = "127.0.0.1"


def free_ports(n: int, host: str = LOOPBACK) -> list[int]:
    """``n`` distinct ports of ``host`` that were free a moment ago (bound to port 0 together,
    then given up)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((host, 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = LOOPBACK) -> int:
    """A port of ``host`` that was free a moment ago (bound to port 0, then given up)."""
    return free_ports(1, host)[0]


@dataclass(frozen=True)
class MemberAddrs:
    """Where an ensemble member listens: its ``server.N`` line's quorum and election ports and
    its client port, all on ``host``."""

    sid: int
    quorum_port: int
    election_port: int
    client_port: int
    observer: bool = False
    host: str = LOOPBACK

    @property
    def election(self) -> tuple[str, int]:
        return (self.host, self.election_port)


def allocate(sids: list[int], observers: frozenset[int] = frozenset()) -> dict[int, MemberAddrs]:
    """Free loopback ports (quorum, election, client) for each sid, all distinct."""
    ports = free_ports(3 * len(sids))
    return {
        sid: MemberAddrs(
            sid, ports[3 * i], ports[3 * i + 1], ports[3 * i + 2], observer=sid in observers
        )
        for i, sid in enumerate(sids)
    }


def server_lines(members: Mapping[int, MemberAddrs]) -> dict[str, str]:
    """The ``server.N`` zoo.cfg lines of ``members`` (``host:quorum:election[:observer];
    host:client``)."""
    out = {}
    for sid, m in sorted(members.items()):
        role = ":observer" if m.observer else ""
        out[f"server.{sid}"] = (
            f"{m.host}:{m.quorum_port}:{m.election_port}{role};{m.host}:{m.client_port}"
        )
    return out


def config_string(members: Mapping[int, MemberAddrs], version: int = 0) -> str:
    """QuorumMaj.toString for these members (what ZooKeeper embeds in notifications)."""
    parts = []
    for sid, m in sorted(members.items()):
        role = "observer" if m.observer else "participant"
        parts.append(
            f"server.{sid}={m.host}:{m.quorum_port}:{m.election_port}:{role};"
            f"{m.host}:{m.client_port}\n"
        )
    return "".join(parts) + f"version={version:x}"


#: attempts to find a listening port outside the ones to avoid
BIND_TRIES = 100


def listener_avoiding(
    host: str, avoid: set[int], set_aside: list[socket.socket], backlog: int = 64
) -> socket.socket:
    """A listening socket on a kernel-chosen port of ``host`` that is not in ``avoid`` (ports
    given to others and given up: the kernel may hand them out again). The sockets that got
    such a port are appended to ``set_aside``, still bound -- the kernel does not hand that
    port out again while they are held; the caller closes them once it has all its ports."""
    for _ in range(BIND_TRIES):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, 0))
        except BaseException:
            s.close()
            raise
        if s.getsockname()[1] in avoid:
            set_aside.append(s)
            continue
        s.listen(backlog)
        return s
    raise OSError(f"no free port on {host} outside the members' own in {BIND_TRIES} tries")
