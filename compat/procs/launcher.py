"""A small server launcher for the benchmark and the cross-check proxy tests.

Theory
------
Each server (Apache ZooKeeper via ``java``, trizk via ``python -m trizk.server``, or any command
template) runs as a *direct* child process, so the PID we hold is the server's own PID and
``/proc/PID/stat`` / ``/proc/PID/status`` describe the server itself (CPU ticks, RSS), not a
wrapper shell. Every server gets its own temp directory (dataDir, zoo.cfg, log4j config, log),
listens on 127.0.0.1 on a port found by binding port 0, and is stopped by its PID only.

"Started" means *a real request was answered*: ZooKeeper answers ``ruok`` before it accepts
sessions, so readiness is a full session handshake followed by an ``exists /`` reply, polled
with a hard deadline. The wall time from ``Popen`` to that reply is the start-up figure.

zoo.cfg choices (identical for every server kind):

* ``clientPortAddress=127.0.0.1`` (loopback only), ``admin.enableServer=false`` (the admin
  server would otherwise bind 8080, shared with other people on the machine);
* ``maxClientCnxns=0`` (ZooKeeper's default of 60 per IP would refuse the 1,000-session
  benchmark: every client comes from 127.0.0.1);
* ``4lw.commands.whitelist=*``; ``forceSync`` left at its default (yes).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from trizk.jute.framing import frame
from trizk.jute.records import ConnectRequest, ConnectResponse, ExistsRequest, RequestHeader

ZK_CLASSPATH = ":".join(
    [
        "/usr/share/java/zookeeper.jar",
        "/usr/share/java/zookeeper-jute.jar",
        "/usr/share/java/slf4j-api.jar",
        "/usr/share/java/slf4j-log4j12.jar",
        "/usr/share/java/log4j-1.2.jar",
        "/usr/share/java/commons-cli.jar",
        "/usr/share/java/metrics-core.jar",
        "/usr/share/java/snappy-java.jar",
    ]
)
ZK_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
#: JVM heap cap for the ZooKeeper oracle (zkServer.sh's default is -Xmx1000m).
ZK_XMX = "1g"

_LOG4J = """\
log4j.rootLogger=WARN, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File={log}
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d %-5p [%t] %c{{1}} - %m%n
"""

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    """A loopback port that was free a moment ago (bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def zoo_cfg(data_dir: str, port: int, extra: dict[str, str] | None = None) -> str:
    lines = {
        "tickTime": "2000",
        "initLimit": "10",
        "syncLimit": "5",
        "dataDir": data_dir,
        "clientPort": str(port),
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": "0",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "*",
    }
    lines.update(extra or {})
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def zookeeper_cmd(cfg: str, workdir: str) -> list[str]:
    log4j = os.path.join(workdir, "log4j.properties")
    with open(log4j, "w") as f:
        f.write(_LOG4J.format(log=os.path.join(workdir, "zookeeper.log")))
    return [
        shutil.which("java") or "java",
        f"-Xmx{ZK_XMX}",
        f"-Dlog4j.configuration=file:{log4j}",
        "-Dzookeeper.admin.enableServer=false",
        "-cp",
        ZK_CLASSPATH,
        ZK_MAIN,
        cfg,
    ]


def trizk_cmd(cfg: str, workdir: str) -> list[str]:
    return [sys.executable, "-m", "trizk.server", cfg]


def template_cmd(template: str) -> object:
    """``--candidate-cmd 'prog --x {cfg}'``: a command template; ``{cfg}`` is the zoo.cfg path."""

    def build(cfg: str, workdir: str) -> list[str]:
        return [a.replace("{cfg}", cfg).replace("{dir}", workdir) for a in shlex.split(template)]

    return build


def command_for(kind: str) -> object:
    if kind == "zookeeper":
        return zookeeper_cmd
    if kind == "trizk":
        return trizk_cmd
    return template_cmd(kind)


def handshake_bytes(
    timeout_ms: int = 30000, session_id: int = 0, passwd: bytes = b"\0" * 16, last_zxid: int = 0
) -> bytes:
    """A ConnectRequest frame as ZooKeeper 3.8 clients send it (with the readOnly byte)."""
    req = ConnectRequest(
        protocolVersion=0,
        lastZxidSeen=last_zxid,
        timeOut=timeout_ms,
        sessionId=session_id,
        passwd=passwd,
    )
    return frame(req.encode() + b"\0")


def _recv_frame(sock: socket.socket) -> bytes:
    hdr = _recv_exact(sock, 4)
    (n,) = struct.unpack(">i", hdr)
    if n < 0 or n > 0xFFFFF:
        raise ConnectionError(f"bad frame length {n}")
    return _recv_exact(sock, n)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """One handshake + ``exists /``: True when the server answered both."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(handshake_bytes())
            resp = ConnectResponse.decode_from(_recv_frame(s), 0)[0]
            if resp.sessionId == 0:
                return False
            body = (
                RequestHeader(xid=1, type=3).encode()
                + ExistsRequest(path="/", watch=False).encode()
            )
            s.sendall(frame(body))
            reply = _recv_frame(s)
            ok = struct.unpack_from(">i", reply, 0)[0] == 1
            # closeSession so the probe session does not linger until its timeout
            s.sendall(frame(RequestHeader(xid=2, type=-11).encode()))
            try:
                _recv_frame(s)
            except (ConnectionError, OSError):
                pass
            return ok
    except (OSError, ConnectionError, ValueError):
        return False


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 on), None if ``pid`` is
    gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(")") + 2 :].split()


def child_pids(pid: int) -> list[int]:
    """The live child processes of ``pid`` (field 4 of /proc/*/stat is the parent's pid)."""
    out: list[int] = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat_fields(int(name))
            if fields is not None and int(fields[1]) == pid:
                out.append(int(name))
    return out


@dataclass
class Server:
    """One running server process (a direct child), its dir and port."""

    kind: str
    label: str
    proc: subprocess.Popen[bytes]
    port: int
    workdir: str
    cfg: str
    started_at: float
    startup_s: float = float("nan")
    host: str = "127.0.0.1"
    _log: object = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def wait_ready(self, deadline_s: float = 60.0) -> float:
        """Poll until a request is answered; return seconds since Popen. Fails loudly."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.label} exited with {self.proc.returncode}: {self.tail()}"
                )
            if probe(self.host, self.port, timeout=1.0):
                self.startup_s = time.monotonic() - self.started_at
                return self.startup_s
            time.sleep(0.01)
        raise TimeoutError(f"{self.label} did not answer within {deadline_s}s: {self.tail()}")

    def _pids(self) -> list[int]:
        """The server process and its child processes (trizk's fsync helper does part of
        every write's work and holds ~11 MB)."""
        return [self.pid, *child_pids(self.pid)]

    def cpu_seconds(self) -> float:
        """utime + stime (fields 14, 15 of /proc/PID/stat) of the server's processes."""
        ticks = 0
        for pid in self._pids():
            fields = _stat_fields(pid)
            if fields is not None:  # else exited since it was listed
                ticks += int(fields[11]) + int(fields[12])
        return ticks / CLK_TCK

    def rss_bytes(self) -> int:
        """Resident memory of the server's processes."""
        pages = 0
        for pid in self._pids():
            try:
                with open(f"/proc/{pid}/statm") as f:
                    pages += int(f.read().split()[1])
            except OSError:
                continue  # exited since it was listed
        return pages * PAGE

    def txn_log_bytes(self) -> int:
        """Bytes in ``dataDir/version-2/log.*``: 0 means the server persisted no txn at all
        (its write figures are then not comparable with a server that fsyncs every batch)."""
        d = os.path.join(self.workdir, "data", "version-2")
        if not os.path.isdir(d):
            return 0
        return sum(
            os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.startswith("log.")
        )

    def tail(self, n: int = 2000) -> str:
        out = ""
        for name in ("stdout.log", "zookeeper.log"):
            p = os.path.join(self.workdir, name)
            if os.path.exists(p):
                with open(p, "rb") as f:
                    out += f.read()[-n:].decode("utf-8", "replace")
        return out

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self._log is not None:
            self._log.close()  # type: ignore[attr-defined]
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_server(
    kind: str,
    label: str | None = None,
    extra_cfg: dict[str, str] | None = None,
    wait: bool = True,
    deadline_s: float = 60.0,
) -> Server:
    """Start a server of ``kind`` ("zookeeper", "trizk" or a command template with ``{cfg}``)."""
    workdir = tempfile.mkdtemp(prefix=f"trizk-bench-{label or 'srv'}-")
    data_dir = os.path.join(workdir, "data")
    os.mkdir(data_dir)
    port = free_port()
    cfg = os.path.join(workdir, "zoo.cfg")
    with open(cfg, "w") as f:
        f.write(zoo_cfg(data_dir, port, extra_cfg))
    build = command_for(kind)
    argv: Sequence[str] = build(cfg, workdir)  # type: ignore[operator]
    log = open(os.path.join(workdir, "stdout.log"), "wb")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir
    )
    srv = Server(kind, label or kind, proc, port, workdir, cfg, t0, _log=log)
    if wait:
        try:
            srv.wait_ready(deadline_s)
        except BaseException:
            srv.stop()
            raise
    return srv
