"""A small server launcher for the benchmark and the cross-check proxy tests.

Theory
------
Each server (Apache ZooKeeper via ``java``: kind ``zookeeper`` is the default release,
:data:`~trizk.compat.procs.servers.DEFAULT_VERSION` (3.9.3, the one trizk answers as by
default), ``zookeeper-3.9.3`` and ``zookeeper-3.8.0`` name a release; trizk via ``python -m
trizk.server``, or any command template) runs as a *direct*
child process, so the PID we hold is the server's own PID and
``/proc/PID/stat`` / ``/proc/PID/status`` describe the server itself (CPU ticks, RSS), not a
wrapper shell. Every server gets its own temp directory (dataDir, zoo.cfg, log4j config, log),
listens on 127.0.0.1 on a port found by binding port 0, and is stopped by its PID only.

"Started" means *a real request was answered*: ZooKeeper answers ``ruok`` before it accepts
sessions, so readiness is a full session handshake followed by an ``exists /`` reply, polled
with a hard deadline (trizk.testing.probes.probe). The wall time from ``Popen`` to that reply
is the start-up figure.

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
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from trizk.compat.procs.servers import DEFAULT_VERSION, ZK39_JARS
from trizk.testing.ports import free_port
from trizk.testing.probes import probe
from trizk.testing.processes import cfg_text, poll_ready, spawn, stop_process

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
    return cfg_text(lines)


def zookeeper_cmd(cfg: str, workdir: str, classpath: str = ZK_CLASSPATH) -> list[str]:
    log4j = os.path.join(workdir, "log4j.properties")
    with open(log4j, "w") as f:
        f.write(_LOG4J.format(log=os.path.join(workdir, "zookeeper.log")))
    return [
        shutil.which("java") or "java",
        f"-Xmx{ZK_XMX}",
        f"-Dlog4j.configuration=file:{log4j}",
        "-Dzookeeper.admin.enableServer=false",
        "-cp",
        classpath,
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


def zookeeper39_cmd(cfg: str, workdir: str) -> list[str]:
    """ZooKeeper 3.9.3 (``compat/install-zookeeper.sh`` unpacks it; see
    :data:`trizk.compat.procs.servers.ZK39_JARS`)."""
    return zookeeper_cmd(cfg, workdir, ":".join(ZK39_JARS))


def command_for(kind: str) -> object:
    if kind == "zookeeper":
        kind = f"zookeeper-{DEFAULT_VERSION}"
    if kind == "zookeeper-3.8.0":
        return zookeeper_cmd
    if kind == "zookeeper-3.9.3":
        return zookeeper39_cmd
    if kind == "trizk":
        return trizk_cmd
    return template_cmd(kind)


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

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def wait_ready(self, deadline_s: float = 60.0) -> float:
        """Poll until a request is answered; return seconds since Popen. Fails loudly."""
        if poll_ready(self.proc, partial(probe, self.host, self.port, 1.0), deadline_s, 0.01):
            self.startup_s = time.monotonic() - self.started_at
            return self.startup_s
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.label} exited with {self.proc.returncode}: {self.tail()}")
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
        stop_process(self.proc, timeout)
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
    t0 = time.monotonic()
    proc = spawn(list(argv), workdir, os.path.join(workdir, "stdout.log"), append=False)
    srv = Server(kind, label or kind, proc, port, workdir, cfg, t0)
    if wait:
        try:
            srv.wait_ready(deadline_s)
        except BaseException:
            srv.stop()
            raise
    return srv
