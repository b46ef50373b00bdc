"""Run a real Apache ZooKeeper 3.8 (the oracle) and drive it with kazoo; regenerate golden data.

Used by the storage tests (interchange with a live java server) and, run as a script, to
regenerate the golden files next to it::

    python tests/data/zkdata/zkrun.py     # rewrites tests/data/zkdata/version-2/

The tests pin facts of the committed files (txn counts, session ids, times in dumps); after
regenerating, update them. The server runs on 127.0.0.1, on a free port, in its own temp dir;
we stop it by its PID only. Readiness is "a kazoo session connects", never a sleep.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from trizk.testing.ports import free_port
from trizk.testing.processes import stop_process

if TYPE_CHECKING:
    from kazoo.client import KazooClient

HERE = Path(__file__).resolve().parent
CLASSPATH = ":".join(
    [
        "/usr/share/java/zookeeper.jar",
        "/usr/share/java/zookeeper-jute.jar",
        "/usr/share/java/slf4j-api.jar",
        "/usr/share/java/slf4j-log4j12.jar",
        "/usr/share/java/log4j-1.2.jar",
        "/usr/share/java/snappy-java.jar",
    ]
)
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")


def java_available() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


class ZkServer:
    """One real ZooKeeper process on a data dir (``data_dir/version-2`` holds the files)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        data_log_dir: Path | None = None,
        snap_count: int = 100000,
        pre_alloc_kb: int = 4,
        extra_props: dict[str, str] | None = None,
        extra_cfg: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.data_log_dir = data_log_dir
        self.port = free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="zkrun-"))
        self.log_path = self.workdir / "zookeeper.log"
        cfg = {
            "tickTime": "2000",
            "initLimit": "10",
            "syncLimit": "5",
            "dataDir": str(data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": "127.0.0.1",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            # Keys zoo.cfg does not know become zookeeper.<key> system properties.
            "snapCount": str(snap_count),
            "preAllocSize": str(pre_alloc_kb),
            "extendedTypesEnabled": "true",
            **(extra_cfg or {}),
        }
        if data_log_dir is not None:
            cfg["dataLogDir"] = str(data_log_dir)
        (self.workdir / "zoo.cfg").write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
        (self.workdir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, F\n"
            "log4j.appender.F=org.apache.log4j.FileAppender\n"
            f"log4j.appender.F.File={self.log_path}\n"
            "log4j.appender.F.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.F.layout.ConversionPattern=%d %p [%t] %c{1}: %m%n\n"
        )
        self.props = {
            "log4j.configuration": f"file:{self.workdir / 'log4j.properties'}",
            "znode.container.checkIntervalMs": "200",
            "zookeeper.jmx.log4j.disable": "true",
            **(extra_props or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
        cmd += [f"-D{k}={v}" for k, v in self.props.items()]
        cmd += ["-cp", CLASSPATH, "org.apache.zookeeper.server.quorum.QuorumPeerMain"]
        cmd += [str(self.workdir / "zoo.cfg")]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.workdir
        )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> None:
        from kazoo.client import KazooClient

        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited {self.proc.returncode}:\n{self.log_tail()}")
            zk = KazooClient(hosts=self.hosts, timeout=5)
            try:
                zk.start(timeout=2)
                zk.stop()
                zk.close()
                return
            except Exception:
                zk.close()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"zookeeper not ready:\n{self.log_tail()}") from None

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout)
        self.proc = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


@contextmanager
def running(data_dir: Path, **kw: object) -> Iterator[ZkServer]:
    srv = ZkServer(data_dir, **kw)  # type: ignore[arg-type]
    try:
        srv.start()
        yield srv
    finally:
        srv.cleanup()


def wait_until(cond: object, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def scenario(hosts: str) -> KazooClient:
    """Writes covering every txn type the log can hold (see the tests for what is checked)."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import BadVersionError
    from kazoo.protocol.serialization import Create2, int_struct, long_struct
    from kazoo.security import ACL, Id, make_digest_acl

    class CreateContainer(Create2):
        type = 19  # OpCode.createContainer

    class CreateTTL(Create2):
        type = 21  # OpCode.createTTL

        def serialize(self) -> bytearray:
            b = super().serialize()
            b.extend(long_struct.pack(3_600_000))
            return b

    _ = int_struct
    world_anyone = [ACL(31, Id("world", "anyone"))]
    a = KazooClient(hosts=hosts, timeout=10)
    a.start(timeout=15)
    a.create("/app", b"app-data")
    a.create("/app/seq-", b"s1", sequence=True)
    a.create("/app/seq-", b"s2", sequence=True)
    a.create("/app/eph", b"e", ephemeral=True)
    a.create("/app/ephseq-", b"", ephemeral=True, sequence=True)
    a.create("/app/empty", b"")
    a.create("/app/utf8-\u00e9\u4e2d", "d\u00e9j\u00e0 vu".encode())
    a.create("/app/created2", b"c2", include_data=True)

    def call(req: object) -> object:
        res = a.handler.async_result()
        a._call(req, res)
        return res.get(timeout=10)

    call(CreateContainer("/cont", b"c", world_anyone, 4))
    a.create("/cont/child", b"x")
    call(CreateTTL("/ttl", b"t", world_anyone, 5))
    a.add_auth("digest", "alice:secret")
    acl = [make_digest_acl("alice", "secret", all=True), ACL(1, Id("world", "anyone"))]
    a.create("/acl", b"secret", acl=acl)
    a.create("/acl/kid", b"", acl=acl)
    a.set_acls("/app/empty", [ACL(1 | 2, Id("world", "anyone"))])
    for i in range(40):
        a.set("/app", f"v{i}".encode())
    a.delete("/app/created2")
    t = a.transaction()
    t.create("/multi", b"m")
    t.set_data("/app", b"from-multi")
    t.check("/app/empty", 0)
    t.delete("/app/seq-0000000000")
    t.commit()
    t = a.transaction()  # fails: error txns inside the multi
    t.create("/never", b"n")
    t.check("/app", 12345)
    res = t.commit()
    assert isinstance(res[1], BadVersionError), res
    b = KazooClient(hosts=hosts, timeout=10)
    b.start(timeout=15)
    b.create("/app/b-eph", b"b", ephemeral=True)
    b.create("/b-eph-root", b"", ephemeral=True)
    b.stop()
    b.close()
    a.delete("/cont/child")
    wait_until(lambda: a.exists("/cont") is None, what="container deletion")
    a.set("/app", b"final")
    a.stop()  # closeSession: its ephemerals go
    a.close()
    c = KazooClient(hosts=hosts, timeout=30)
    c.start(timeout=15)
    c.create("/c-eph", b"c", ephemeral=True)
    # Session c stays open while the server stops: it and its ephemeral stay in the data dir.
    return c


def generate(target: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="zkgen-"))
    try:
        srv = ZkServer(tmp / "data", snap_count=40, pre_alloc_kb=4)
        srv.start()
        c = None
        try:
            c = scenario(srv.hosts)
        finally:
            srv.stop()
            if c is not None:
                c.stop()
                c.close()
        log = srv.log_tail(400)
        srv.cleanup()
        src = tmp / "data" / "version-2"
        out = target / "version-2"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for f in sorted(src.iterdir()):
            if f.name.startswith(("log.", "snapshot.")):
                shutil.copy2(f, out / f.name)
                print(f"{f.name}: {f.stat().st_size} bytes")
        _ = log
        for method in ("snappy", "gz"):
            _compressed_snapshot(target / "compressed", method)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_nodes(hosts: str, n: int = 30) -> None:
    from kazoo.client import KazooClient

    k = KazooClient(hosts=hosts, timeout=10)
    k.start(timeout=15)
    for i in range(n):
        k.create(f"/n{i}", b"x" * 200 + bytes([i]))
    k.stop()
    k.close()


def _compressed_snapshot(out: Path, method: str) -> None:
    """Keep the newest snapshot ZooKeeper writes with compression ``method`` (and its data)."""
    tmp = Path(tempfile.mkdtemp(prefix="zkgen-"))
    try:
        with running(
            tmp, snap_count=10, extra_props={"zookeeper.snapshot.compression.method": method}
        ) as srv:
            write_nodes(srv.hosts)
            srv.stop()
        snaps = sorted(
            (tmp / "version-2").glob("snapshot.*"), key=lambda p: int(p.name.split(".")[1], 16)
        )
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob(f"snapshot.*.{method}"):
            old.unlink()
        shutil.copy2(snaps[-1], out / snaps[-1].name)
        print(f"{snaps[-1].name}: {snaps[-1].stat().st_size} bytes")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
    os.sync()
