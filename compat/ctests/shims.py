"""The suite's server scripts, starting trizk instead of Java (``python -m ...ctests.shims``).

``zktest-mt`` starts its servers with two scripts, which these replace when the suite runs
against trizk (the binary is unchanged: it runs in a directory whose ``tests/zkServer.sh`` and
``$ZKROOT/bin/zkServer.sh`` call this module):

``single`` -- the suite's ``tests/zkServer.sh`` (``ZKSERVER_CMD``, relative to the binary's
working directory). ``startClean|start|startCleanReadOnly|startRequireSASLAuth [jaas]
[readOnly]|stop``, ``$ZOOPORT`` (22181), ``$ZKMAXCNXNS`` (100), ``$EXTRA_JVM_ARGS``. As the
original: first SIGKILL the server it started before (the pid file), then write zoo.cfg from
the suite's ``tests/zoo.cfg`` (TMPDIR, CERTDIR, MAXCLIENTCONNECTIONS and CLIENTPORT replaced;
the suite's stores made by its ``ssl/gencerts.sh`` in ``/tmp/certs``, where its TLS tests
read the client's certificate), three ``server.N`` lines and ``myid`` 1 for read-only mode
(one member of three started: no quorum), the same system properties (``-D`` for trizk, as
``java -D``; trizk answers as 3.8.0, the suite's release), and wait for the server: until a
session is established (the original's ``zkCli.sh ls /``), or a read-only session for the
read-only starts, or the port open for the SASL-required one (the original sleeps 4 s there,
too little on a loaded machine for ZooKeeper as for trizk: a member without quorum starts its
read-only server some seconds after it listens, and the test waits 1 s only). Data and log go
to ``$TRIZK_CTESTS_STATE`` (default ``/tmp/trizk-ctests``), not the original's ``/tmp/zkdata``.
Unlike the original, it never kills a process it did not start (the original kills whatever
listens on the port).

``wait-started`` -- run after the suite's own script on the ZooKeeper side, so that both sides
get the same readiness rule (:func:`wait_started`).

``ensemble`` -- ``$ZKROOT/bin/zkServer.sh start|stop|status CONFIG`` as the suite's
``ZooKeeperQuorumServer`` calls it (ZooKeeper's own ``bin/zkServer.sh``): ``start`` runs
trizk on CONFIG in the background (``$SERVER_JVMFLAGS``' ``-D`` properties, as the test's
superuser digest) with its pid in ``dataDir/zookeeper_server.pid``, ``stop`` terminates it,
``status`` prints ``Mode: leader|follower|...`` from the member's ``srvr`` answer (exit 1 when
it does not answer), the client address taken as ZooKeeper's script takes it: ``clientPort``,
else the member's own ``server.N`` line (in CONFIG or its ``dynamicConfigFile``).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from trizk.jute.codes import OpCode
from trizk.jute.framing import frame
from trizk.jute.records import ConnectRequest, ConnectResponse, RequestHeader
from trizk.testing.probes import four_letter, handshake_ok, read_frame
from trizk.testing.processes import trizk_command

#: the suite's default client port (``$ZOOPORT``)
ZOOPORT = 22181
#: ``single`` waits at most this long for a server (the original: 120 tries of ``zkCli ls /``)
READY_TIMEOUT = 120.0
CERTS_DIR = Path("/tmp/certs")
#: The release trizk answers as: the suite's and the oracle's (Debian bookworm's 3.8.0)
RELEASE_PROPERTY = ("-D", "trizk.zookeeperVersion=3.8.0")


def state_dir() -> Path:
    return Path(os.environ.get("TRIZK_CTESTS_STATE", "/tmp/trizk-ctests"))


def java_properties(flags: str) -> list[str]:
    """``-Dname=value`` words of a JVM flags string as trizk arguments (``-D name=value``);
    other JVM flags mean nothing to trizk."""
    args: list[str] = []
    for word in shlex.split(flags):
        if word.startswith("-D") and len(word) > 2:
            args += ["-D", word[2:]]
    return args


def _kill_pidfile(pidfile: Path) -> None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _wait_gone(pid, 10.0)
    pidfile.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of ours is gone for every purpose here
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)  # polling a process's end, bounded
    return not _alive(pid)


def _detach(cmd: list[str], cwd: Path, log: Path) -> int:
    """Start ``cmd`` in its own session (it outlives this script), output to ``log``."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc.pid


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def read_only_session_ok(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a client that allows read-only mode (the ConnectRequest's readOnly byte set, as
    the suite's ``ZOO_READONLY`` clients send it) gets a session: a member without a quorum
    accepts connections as soon as it listens, but gives sessions only once its read-only
    server runs (ZooKeeper starts it some seconds after the member started looking)."""
    req = ConnectRequest(
        protocolVersion=0, lastZxidSeen=0, timeOut=10000, sessionId=0, passwd=b"\0" * 16
    )
    try:
        with socket.create_connection((host, port), timeout=2.0) as s:
            s.sendall(frame(req.encode() + b"\1"))
            resp = ConnectResponse.decode_from(read_frame(s), 0)[0]
            if resp.sessionId == 0:
                return False
            s.sendall(frame(RequestHeader(xid=1, type=OpCode.CLOSESESSION).encode()))
            return True
    except (OSError, ValueError):
        return False


def _ready(cmd: str, argv: Sequence[str], port: int) -> bool:
    """The readiness rule of both sides: a plain session, or a read-only one for the read-only
    starts (where no plain session can be had), or an open port for the SASL-required start
    (whose sessions end at their first request)."""
    if cmd == "startCleanReadOnly" or (cmd == "startRequireSASLAuth" and len(argv) > 2 and argv[2]):
        return read_only_session_ok(port)
    if cmd == "startRequireSASLAuth":
        return _port_open(port)
    return handshake_ok("127.0.0.1", port)


def _gencerts(tests_dir: Path) -> None:
    if CERTS_DIR.exists():
        subprocess.run(["rm", "-rf", str(CERTS_DIR)], check=True)
    CERTS_DIR.mkdir(parents=True)
    script = CERTS_DIR / "gencerts.sh"
    script.write_bytes((tests_dir.parent / "ssl" / "gencerts.sh").read_bytes())
    script.chmod(0o755)
    with (
        open(CERTS_DIR / "gencerts.stdout", "wb") as out,
        open(CERTS_DIR / "gencerts.stderr", "wb") as err,
    ):
        subprocess.run(["./gencerts.sh"], cwd=CERTS_DIR, stdout=out, stderr=err, check=False)


def single(argv: Sequence[str], tests_dir: Path) -> int:
    """The suite's ``tests/zkServer.sh`` for trizk (module docstring)."""
    if not argv:
        print(
            "USAGE: zkServer.sh startClean|start|startCleanReadOnly|startRequireSASLAuth"
            " [jaasConf] [readOnly]|stop"
        )
        return 2
    cmd = argv[0]
    port = int(os.environ.get("ZOOPORT", str(ZOOPORT)))
    maxcnxns = os.environ.get("ZKMAXCNXNS", "100")
    tmp = state_dir()
    tmp.mkdir(parents=True, exist_ok=True)
    pidfile = tmp / "zk.pid"
    _kill_pidfile(pidfile)
    if cmd == "stop":
        return 0
    if cmd not in ("start", "startClean", "startRequireSASLAuth", "startCleanReadOnly"):
        print(f"Unknown command  + {cmd}")
        return 2
    props = ["zookeeper.extendedTypesEnabled=true", "znode.container.checkIntervalMs=100"]
    props = [
        w[2:] for w in shlex.split(os.environ.get("EXTRA_JVM_ARGS", "")) if w.startswith("-D")
    ] + props
    read_only = False
    if cmd == "startRequireSASLAuth":
        props = ["zookeeper.sessionRequireClientSASLAuth=true", *props]
        props.append(
            "zookeeper.authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
        )
        if len(argv) > 1 and argv[1]:
            props.append(f"java.security.auth.login.config={Path(argv[1]).resolve()}")
        if len(argv) > 2 and argv[2]:
            props = ["readonlymode.enabled=true", *props]
            read_only = True
    if cmd == "startCleanReadOnly":
        props = ["readonlymode.enabled=true", *props]
        read_only = True
    data = tmp / "zkdata"
    if cmd in ("startClean", "startCleanReadOnly"):
        subprocess.run(["rm", "-rf", str(data)], check=True)
    data.mkdir(parents=True, exist_ok=True)
    _gencerts(tests_dir)
    text = (tests_dir / "zoo.cfg").read_text()
    for key, value in (
        ("TMPDIR", str(tmp)),
        ("CERTDIR", str(CERTS_DIR)),
        ("MAXCLIENTCONNECTIONS", maxcnxns),
        ("CLIENTPORT", str(port)),
    ):
        text = text.replace(key, value)
    if read_only:
        text += "".join(f"server.{i}=localhost:2288{i}:3388{i}\n" for i in (1, 2, 3))
        (data / "myid").write_text("1\n")
    cfg = tmp / "zoo.cfg"
    cfg.write_text(text)
    args = [*trizk_command(cfg)[:3], *RELEASE_PROPERTY]
    for p in props:
        args += ["-D", p]
    args.append(str(cfg))
    pid = _detach(args, Path.cwd(), tmp / "zk.log")
    pidfile.write_text(str(pid))
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if not _alive(pid):
            print(" ZooKeeper server process failed", end="")
            return 0
        if _ready(cmd, argv, port):
            print(" ZooKeeper server started", end="")
            return 0
        time.sleep(0.1)  # polling the server's readiness, bounded by READY_TIMEOUT
    print(" ZooKeeper server NOT started", end="")
    return 0


# ---------------------------------------------------------------------------- ensemble members


def read_cfg(path: Path) -> dict[str, str]:
    keys: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        keys[k.strip()] = v.strip()
    return keys


def client_address(cfg_path: Path) -> tuple[str, int]:
    """Where a member of ``cfg_path`` serves clients, as ZooKeeper's ``zkServer.sh status``
    finds it: ``clientPort`` (with ``clientPortAddress``), else the ``;[host:]port`` of the
    member's own ``server.N`` line in the file or its ``dynamicConfigFile``."""
    keys = read_cfg(cfg_path)
    if "clientPort" in keys:
        return keys.get("clientPortAddress", "127.0.0.1"), int(keys["clientPort"])
    myid = (Path(keys["dataDir"]) / "myid").read_text().strip()
    lines = dict(keys)
    dyn = keys.get("dynamicConfigFile")
    if dyn and Path(dyn).exists():
        lines.update(read_cfg(Path(dyn)))
    spec = lines[f"server.{myid}"]
    client = spec.split(";", 1)[1]
    host, _, port = client.rpartition(":")
    if host in ("", "0.0.0.0", "localhost"):
        host = "127.0.0.1"
    return host, int(port)


def ensemble(argv: Sequence[str]) -> int:
    """``$ZKROOT/bin/zkServer.sh`` for trizk members (module docstring)."""
    if len(argv) != 2 or argv[0] not in ("start", "stop", "status"):
        print("Usage: zkServer.sh {start|stop|status} CONFIG", file=sys.stderr)
        return 1
    cmd, cfg = argv[0], Path(argv[1]).resolve()
    keys = read_cfg(cfg)
    data = Path(keys["dataDir"])
    pidfile = data / "zookeeper_server.pid"
    if cmd == "start":
        print(f"Using config: {cfg}", file=sys.stderr)
        logdir = Path(os.environ.get("ZOO_LOG_DIR", str(data)))
        logdir.mkdir(parents=True, exist_ok=True)
        flags = java_properties(os.environ.get("SERVER_JVMFLAGS", ""))
        args = [*trizk_command(cfg)[:3], *RELEASE_PROPERTY, *flags]
        args.append(str(cfg))
        pid = _detach(args, data, logdir / "trizk-server.log")
        pidfile.write_text(str(pid))
        print("Starting zookeeper ... STARTED", file=sys.stderr)
        return 0
    if cmd == "stop":
        try:
            pid = int(pidfile.read_text().strip())
        except (OSError, ValueError):
            print(f"no zookeeper to stop (could not find file {pidfile})", file=sys.stderr)
            return 0
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        if not _wait_gone(pid, 10.0):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 10.0)
        pidfile.unlink(missing_ok=True)
        print("Stopping zookeeper ... STOPPED", file=sys.stderr)
        return 0
    try:
        host, port = client_address(cfg)
        answer = four_letter(port, "srvr", host=host)
    except (OSError, KeyError, ValueError, IndexError):
        print("Error contacting service. It is probably not running.", file=sys.stderr)
        return 1
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            print(f"Client port found: {port}. Client address: {host}.")
            print(line)
            return 0
    print("Error contacting service. It is probably not running.", file=sys.stderr)
    return 1


def wait_started(argv: Sequence[str]) -> int:
    """After the suite's own script started ZooKeeper in read-only or SASL-required mode (where
    it only sleeps 4 s, too little for a JVM on a loaded machine: the test then finds the port
    closed, or open and not serving yet), wait as :func:`single` does for trizk (:func:`_ready`,
    bounded by READY_TIMEOUT)."""
    if argv[:1] not in (["startCleanReadOnly"], ["startRequireSASLAuth"]):
        return 0
    port = int(os.environ.get("ZOOPORT", str(ZOOPORT)))
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if _ready(argv[0], argv, port):
            return 0
        time.sleep(0.1)  # polling the server's readiness, bounded by READY_TIMEOUT
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["wait-started"]:
        return wait_started(args[1:])
    if args[:1] == ["single"] and len(args) >= 2:
        return single(args[2:], Path(args[1]))
    if args[:1] == ["ensemble"]:
        return ensemble(args[1:])
    print("usage: shims single TESTS_DIR ARGS... | shims ensemble start|stop|status CONFIG")
    return 2


if __name__ == "__main__":
    sys.exit(main())
