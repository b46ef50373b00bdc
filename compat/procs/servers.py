"""Start and stop the servers the compatibility suite compares.

Theory
------
Two kinds of server speak the ZooKeeper protocol here:

* ``zookeeper`` — real Apache ZooKeeper, started with a java command line we build ourselves
  (``QuorumPeerMain zoo.cfg``; ``zkServer.sh`` insists on /etc paths), in one of two releases
  (``version``): ``3.8.0``, Debian bookworm's package installed system-wide, or ``3.9.3`` (the
  default, :data:`DEFAULT_VERSION`: the release trizk answers as by default), Debian trixie's
  jars unpacked by ``compat/install-zookeeper.sh`` into :data:`ZK39_DIR` and run on
  bookworm's Java 17 with bookworm's dependency jars
  (``zookeeper-jute-3.9.3.jar`` first on the classpath: ``zookeeper-3.9.3.jar``'s manifest
  names bookworm's ``zookeeper-jute.jar``, the 3.8.0 one, which must not win);
* ``trizk`` — ``sys.executable -m trizk.server zoo.cfg``, answering as the release ``version``
  (the zoo.cfg key ``trizk.zookeeperVersion``, written only when asked for; without it trizk
  answers as its default, the same :data:`DEFAULT_VERSION`, so that a ``zookeeper`` and a
  ``trizk`` started without a version are always compared at one release).

A kind may carry its release after ``@`` (``zookeeper@3.9.3``, ``trizk@3.9.3``): the compat
runner and its server pools name a server by one string, so the oracle's release and the one
trizk answers as travel with it (:func:`split_kind`).

Both get the same generated ``zoo.cfg`` (:func:`make_cfg`): a free loopback port
(``clientPortAddress=127.0.0.1``), their own temporary ``dataDir``, the AdminServer off (the
product default is on, port 8080; a test turns it on with ``admin.serverPort`` free), every
four-letter word allowed, ``tickTime=200`` so a minimal session (2 ticks) expires in well under a
second, and a generous ``maxSessionTimeout`` so the suite's long-lived sessions never expire while
a scenario runs (the raw client never pings on its own). Extra keys (``extendedTypesEnabled``
...) are passed through.

Invariants
----------
* A server is *ready* when a real session handshake succeeds (the session is then closed
  cleanly, so it leaves no expiry behind); ZooKeeper answers ``ruok`` before it accepts
  sessions, so ``ruok`` is not readiness. Waiting is bounded by a deadline and fails loudly
  with the tail of the server's log.
* We stop exactly the process we started, by its PID: terminate, wait (bounded), then kill.
  Nothing here signals a process by name.
* The free port comes from binding port 0; if the server loses the race for it and exits before
  becoming ready, the start is retried on another port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from trizk.server.common import release
from trizk.testing.ports import free_port
from trizk.testing.probes import handshake_ok
from trizk.testing.processes import cfg_text, poll_ready, spawn, stop_process

ZK_JARS = (
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
)
#: Jetty (the AdminServer) comes through zookeeper.jar's manifest Class-Path; the servlet API
#: it needs does not (libservlet-api-java), so it is added when present.
ZK_ADMIN_JARS = ("/usr/share/java/servlet-api.jar",)
#: The Netty parts Debian's zookeeper.jar manifest leaves out (it names buffer, common, handler
#: and transport): without them 3.8.0's NettyServerCnxnFactory -- the secureClientPort's --
#: fails with ClassNotFoundException io.netty.handler.codec.ByteToMessageDecoder.
ZK_NETTY_JARS = ("/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar")
ZK_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
KINDS = ("zookeeper", "trizk")

#: The ZooKeeper releases :func:`start` can run, oldest first.
ZK_VERSIONS = ("3.8.0", "3.9.3")
#: The oracle started without a version, and the release trizk answers as without one:
#: trizk's default (:data:`trizk.server.common.release.DEFAULT_RELEASE`, the current line).
DEFAULT_VERSION = release.DEFAULT_RELEASE
#: Where ``compat/install-zookeeper.sh`` unpacks Debian trixie's ZooKeeper 3.9.3 packages
#: (``TRIZK_ZK39_DIR`` overrides it, for the script and for us alike).
ZK39_DIR = os.environ.get("TRIZK_ZK39_DIR", "/opt/trizk-oracles/zookeeper-3.9.3")
_ZK39_JAVA = f"{ZK39_DIR}/usr/share/java"
#: The 3.9.3 jars (jute first), then the bookworm jars it runs with: what its manifest's
#: Class-Path would bring (netty for the client port, jetty and jackson for the AdminServer,
#: metrics, snappy, commons-cli/io, slf4j) plus the log4j 1.2 binding ZK_JARS uses. Listed
#: explicitly so that the classpath, not the manifest, says what runs.
ZK39_JARS = (
    f"{_ZK39_JAVA}/zookeeper-jute-3.9.3.jar",
    f"{_ZK39_JAVA}/zookeeper-3.9.3.jar",
    *(
        f"/usr/share/java/{j}.jar"
        for j in (
            "slf4j-api",
            "metrics-core",
            "snappy-java",
            "commons-cli",
            "commons-io",
            "netty-buffer",
            "netty-common",
            "netty-handler",
            "netty-transport",
            "netty-transport-native-epoll",
            "netty-codec",
            "netty-resolver",
            "jetty9-server",
            "jetty9-servlet",
            "jetty9-security",
            "jetty9-http",
            "jetty9-io",
            "jetty9-util",
            "jackson-core",
            "jackson-databind",
            "jackson-annotations",
        )
    ),
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
)
#: 3.9.3's ``zkCli.sh`` (its own copy; the jars it needs are those of ZK39_JARS)
ZK39_ZKCLI = f"{ZK39_DIR}/usr/share/zookeeper/bin/zkCli.sh"

#: Defaults of the generated zoo.cfg (see the module docstring for why).
BASE_CFG: dict[str, str] = {
    "tickTime": "200",
    "initLimit": "10",
    "syncLimit": "5",
    "maxSessionTimeout": "120000",
    "admin.enableServer": "false",
    "4lw.commands.whitelist": "*",
    "maxClientCnxns": "0",
}

_LOG4J = """\
log4j.rootLogger=WARN, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
"""


class ServerStartError(RuntimeError):
    pass


def zookeeper_jars(version: str = DEFAULT_VERSION) -> tuple[str, ...]:
    """The classpath of ZooKeeper ``version`` (one of :data:`ZK_VERSIONS`)."""
    if version == "3.8.0":
        return ZK_JARS
    if version == "3.9.3":
        return ZK39_JARS
    raise ValueError(f"no ZooKeeper {version!r} here (only {', '.join(ZK_VERSIONS)})")


def zookeeper_available(version: str = DEFAULT_VERSION) -> bool:
    """Java and the jars of ZooKeeper ``version`` are installed (see install-zookeeper.sh)."""
    jars = zookeeper_jars(version)
    return all(os.path.exists(j) for j in jars) and shutil.which("java") is not None


def split_kind(kind: str, version: str | None = None) -> tuple[str, str | None]:
    """``kind[@version]`` as (kind, version); ``version`` is the default when the kind names
    none. An unknown kind or release is a ValueError."""
    base, sep, named = kind.partition("@")
    if base not in KINDS:
        raise ValueError(f"unknown server kind {kind!r}")
    if sep:
        if named not in ZK_VERSIONS:
            raise ValueError(f"no ZooKeeper {named!r} here (only {', '.join(ZK_VERSIONS)})")
        return base, named
    return base, version


def make_cfg(port: int, data_dir: str, extra: Mapping[str, str] | None = None) -> str:
    """The zoo.cfg text both kinds of server are started with."""
    cfg = dict(BASE_CFG)
    cfg["dataDir"] = data_dir
    cfg["clientPort"] = str(port)
    cfg["clientPortAddress"] = "127.0.0.1"
    for k, v in (extra or {}).items():
        cfg[k] = str(v)
    return cfg_text(cfg)


@dataclass
class Server:
    """A server process we started; :meth:`stop` ends it and removes its directory."""

    kind: str
    port: int
    workdir: Path
    proc: subprocess.Popen[bytes]
    cfg: dict[str, str] = field(default_factory=dict)
    keep_dir: bool = False
    #: the ZooKeeper release of a ``zookeeper`` server, or the one a ``trizk`` answers as
    #: (:data:`ZK_VERSIONS`)
    version: str = DEFAULT_VERSION

    host: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate our process by PID, wait bounded, then kill."""
        stop_process(self.proc, timeout)
        if not self.keep_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: ZooKeeper's JVM heap (``-Xmx``): ample for the suite; the load benchmark raises it
DEFAULT_HEAP = "256m"


def _command(
    kind: str,
    cfg_path: Path,
    workdir: Path,
    heap: str = DEFAULT_HEAP,
    version: str = DEFAULT_VERSION,
) -> list[str]:
    if kind == "zookeeper":
        extra = ZK_ADMIN_JARS + (ZK_NETTY_JARS if version == "3.8.0" else ())
        jars = (*zookeeper_jars(version), *(j for j in extra if os.path.exists(j)))
        log4j = workdir / "log4j.properties"
        log4j.write_text(_LOG4J)
        return [
            shutil.which("java") or "java",
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j.configuration=file:{log4j}",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            ":".join(jars),
            ZK_MAIN,
            str(cfg_path),
        ]
    if kind == "trizk":
        return [sys.executable, "-m", "trizk.server", str(cfg_path)]
    raise ValueError(f"unknown server kind {kind!r}")


def start(
    kind: str,
    extra_cfg: Mapping[str, str] | None = None,
    *,
    ready_timeout: float = 30.0,
    attempts: int = 3,
    keep_dir: bool = False,
    heap: str = DEFAULT_HEAP,
    version: str | None = None,
) -> Server:
    """Start a server of ``kind`` on a free loopback port and wait until a session works
    (``heap``: ZooKeeper's -Xmx; ``version``: which ZooKeeper release, :data:`ZK_VERSIONS`:
    the oracle's, or the one trizk answers as; ``kind@version`` says the same)."""
    kind, version = split_kind(kind, version)
    if kind == "zookeeper":
        version = version or DEFAULT_VERSION
        zookeeper_jars(version)  # an unknown version fails here, before any process
    elif version is not None:
        if version not in ZK_VERSIONS:
            raise ValueError(f"trizk does not answer as ZooKeeper {version!r}")
        extra_cfg = {**(extra_cfg or {}), "trizk.zookeeperVersion": version}
    last_err = ""
    for _ in range(attempts):
        workdir = Path(tempfile.mkdtemp(prefix=f"trizk-compat-{kind}-"))
        data_dir = workdir / "data"
        data_dir.mkdir()
        port = free_port()
        text = make_cfg(port, str(data_dir), extra_cfg)
        cfg_path = workdir / "zoo.cfg"
        cfg_path.write_text(text)
        proc = spawn(
            _command(kind, cfg_path, workdir, heap, version or DEFAULT_VERSION),
            workdir,
            workdir / "server.log",
        )
        cfg = dict(line.split("=", 1) for line in text.splitlines())
        srv = Server(kind, port, workdir, proc, cfg, keep_dir, version or DEFAULT_VERSION)
        if poll_ready(proc, partial(handshake_ok, srv.host, port, timeout=2.0), ready_timeout):
            return srv
        last_err = (
            f"{kind} on port {port} not ready within {ready_timeout}s "
            f"(exit={srv.proc.poll()})\n{srv.log_tail()}"
        )
        srv.keep_dir = False
        srv.stop()
    raise ServerStartError(last_err)


def restart(srv: Server, *, ready_timeout: float = 30.0) -> Server:
    """Start ``srv``'s kind again on its port, zoo.cfg and data directory (``srv`` must be
    stopped with ``keep_dir``); wait until a session works. The new server keeps the directory
    too (``keep_dir``): the caller removes it."""
    if srv.alive():
        raise ServerStartError(f"{srv.kind} on port {srv.port} is still running")
    cmd = _command(srv.kind, srv.workdir / "zoo.cfg", srv.workdir, version=srv.version)
    proc = spawn(cmd, srv.workdir, srv.workdir / "server.log")
    new = Server(
        srv.kind, srv.port, srv.workdir, proc, dict(srv.cfg), keep_dir=True, version=srv.version
    )
    if poll_ready(proc, partial(handshake_ok, new.host, new.port, timeout=2.0), ready_timeout):
        return new
    new.stop()
    raise ServerStartError(f"{srv.kind} did not restart on port {srv.port}\n{new.log_tail()}")


@contextlib.contextmanager
def running(
    kind: str, extra_cfg: Mapping[str, str] | None = None, **kw: object
) -> Iterator[Server]:
    srv = start(kind, extra_cfg, **kw)  # type: ignore[arg-type]
    try:
        yield srv
    finally:
        srv.stop()
