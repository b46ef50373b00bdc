"""Start Apache ZooKeeper 3.8 quorum members (for mixed-ensemble tests and golden captures).

Theory
------
A quorum member is ``QuorumPeerMain zoo.cfg`` with ``server.N`` lines and ``dataDir/myid``. It
serves no session until an election *and* Zab synchronisation finished, so readiness is not a
session handshake (compat/procs/servers.py) but a log line: the member logs ``LOOKING`` /
``FOLLOWING`` / ``LEADING`` / ``OBSERVING`` at INFO on every state change (``QuorumPeer.run``),
and FastLeaderElection logs each notification it takes in. We run log4j at INFO for that.

Invariants
----------
* Every member listens on 127.0.0.1 only, on ports chosen free by binding port 0.
* We stop exactly the process we started, by its PID (compat.servers.Server.stop).
* Waiting for a log line is bounded and fails with the log's tail.
"""

from __future__ import annotations

import re
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from trizk.compat.procs.servers import BASE_CFG, Server, _command, zookeeper_available

__all__ = [
    "MemberAddrs",
    "allocate",
    "config_string",
    "server_lines",
    "start_java_member",
    "wait_log",
    "zookeeper_available",
]

_LOG4J_INFO = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
"""


@dataclass(frozen=True)
class MemberAddrs:
    sid: int
    quorum_port: int
    election_port: int
    client_port: int
    observer: bool = False
    host: str = "127.0.0.1"

    @property
    def election(self) -> tuple[str, int]:
        return (self.host, self.election_port)


def allocate(sids: list[int], observers: frozenset[int] = frozenset()) -> dict[int, MemberAddrs]:
    """Free loopback ports (quorum, election, client) for each sid."""
    socks = []
    for _ in range(3 * len(sids)):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return {
        sid: MemberAddrs(
            sid, ports[3 * i], ports[3 * i + 1], ports[3 * i + 2], observer=sid in observers
        )
        for i, sid in enumerate(sids)
    }


def server_lines(members: dict[int, MemberAddrs]) -> dict[str, str]:
    out = {}
    for sid, m in sorted(members.items()):
        role = ":observer" if m.observer else ""
        out[f"server.{sid}"] = (
            f"{m.host}:{m.quorum_port}:{m.election_port}{role};{m.host}:{m.client_port}"
        )
    return out


def config_string(members: dict[int, MemberAddrs], version: int = 0) -> str:
    """QuorumMaj.toString for these members (what Java embeds in notifications)."""
    parts = []
    for sid, m in sorted(members.items()):
        role = "observer" if m.observer else "participant"
        parts.append(
            f"server.{sid}={m.host}:{m.quorum_port}:{m.election_port}:{role};"
            f"{m.host}:{m.client_port}\n"
        )
    return "".join(parts) + f"version={version:x}"


def start_java_member(
    sid: int, members: dict[int, MemberAddrs], extra: dict[str, str] | None = None
) -> Server:
    """Start the Java member ``sid`` of ``members`` (not waiting for anything)."""
    m = members[sid]
    workdir = Path(tempfile.mkdtemp(prefix=f"trizk-javaquorum-{sid}-"))
    data = workdir / "data"
    data.mkdir()
    (data / "myid").write_text(f"{sid}\n")
    cfg = dict(BASE_CFG)
    cfg.update(
        {
            "dataDir": str(data),
            "clientPort": str(m.client_port),
            "clientPortAddress": m.host,
            "electionAlg": "3",
        }
    )
    if m.observer:
        cfg["peerType"] = "observer"
    cfg.update(server_lines(members))
    cfg.update(extra or {})
    cfg_path = workdir / "zoo.cfg"
    cfg_path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
    cmd = _command("zookeeper", cfg_path, workdir)
    (workdir / "log4j.properties").write_text(_LOG4J_INFO)
    log = open(workdir / "server.log", "wb")
    try:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=workdir
        )
    finally:
        log.close()
    return Server("zookeeper", m.client_port, workdir, proc, cfg)


def wait_log(srv: Server, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    """Block until ``pattern`` (a regex) appears in the member's log; bounded."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = srv.log_path.read_text(errors="replace")
        except OSError:
            text = ""
        found = rx.search(text)
        if found:
            return found
        if not srv.alive():
            break
        time.sleep(0.05)  # polling interval of a bounded wait for a log line
    raise TimeoutError(f"{pattern!r} not in the log of member {srv.port}:\n{srv.log_tail(60)}")
