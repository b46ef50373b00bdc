"""Start Apache ZooKeeper quorum members, 3.9.3 or 3.8.0 (mixed ensembles, golden captures).

Theory
------
A quorum member is ``QuorumPeerMain zoo.cfg`` with ``server.N`` lines and ``dataDir/myid``. It
serves no session until an election *and* Zab synchronisation finished, so readiness is not a
session handshake (compat/procs/servers.py) but a log line: the member logs ``LOOKING`` /
``FOLLOWING`` / ``LEADING`` / ``OBSERVING`` at INFO on every state change (``QuorumPeer.run``),
and FastLeaderElection logs each notification it takes in. We run log4j at INFO for that.

Invariants
----------
* Every member listens on 127.0.0.1 only, on ports chosen free by binding port 0
  (trizk.testing.ports.allocate); its directory and zoo.cfg are written as every ensemble
  member's are (trizk.testing.processes.Member).
* We stop exactly the process we started, by its PID (compat.servers.Server.stop).
* Waiting for a log line is bounded and fails with the log's tail.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from trizk.compat.procs.servers import (
    BASE_CFG,
    DEFAULT_VERSION,
    Server,
    _command,
    zookeeper_available,
)
from trizk.testing.ports import MemberAddrs, server_lines
from trizk.testing.processes import Member, member_cfg, spawn

__all__ = [
    "LOG4J_INFO",
    "start_java_member",
    "wait_log",
    "zookeeper_available",
]

#: log4j at INFO on the console (the member's server.log): state changes and sync modes
LOG4J_INFO = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
"""


def start_java_member(
    sid: int,
    members: dict[int, MemberAddrs],
    extra: dict[str, str] | None = None,
    version: str = DEFAULT_VERSION,
) -> Server:
    """Start the Java member ``sid`` of ``members`` (not waiting for anything), ZooKeeper
    ``version`` (:data:`trizk.compat.procs.servers.ZK_VERSIONS`)."""
    m = Member(
        sid, "zookeeper", members[sid], Path(tempfile.mkdtemp(prefix=f"trizk-javaquorum-{sid}-"))
    )
    cfg = member_cfg(
        m.addrs, m.data_dir, server_lines(members), base=BASE_CFG, extra={"electionAlg": "3"}
    )
    cfg.update(extra or {})
    m.write(cfg)
    cmd = _command("zookeeper", m.cfg_path, m.workdir, version=version)
    (m.workdir / "log4j.properties").write_text(LOG4J_INFO)
    proc = spawn(cmd, m.workdir, m.log_path, append=False)
    return Server("zookeeper", m.addrs.client_port, m.workdir, proc, cfg, version=version)


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
