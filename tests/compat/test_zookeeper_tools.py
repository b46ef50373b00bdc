"""ZooKeeper's own tools on trizk's data directory: ``TxnLogToolkit`` (zkTxnLogToolkit.sh),
``SnapshotFormatter`` (zkSnapShotToolkit.sh) and ``SnapshotComparer`` (zkSnapshotComparer.sh),
the classes of Debian's zookeeper.jar run with java as their scripts run them, print for
trizk's files what they print for ZooKeeper's after the same session (times and session ids
normalised)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.security import OPEN_ACL_UNSAFE

from trizk.compat.procs import servers

TXN_LOG_TOOLKIT = "org.apache.zookeeper.server.persistence.TxnLogToolkit"
SNAPSHOT_FORMATTER = "org.apache.zookeeper.server.SnapshotFormatter"
SNAPSHOT_COMPARER = "org.apache.zookeeper.server.SnapshotComparer"

#: the data directories (module fixture) are made once: under pytest-xdist (--dist loadgroup)
#: this module's tests run on one worker
pytestmark = pytest.mark.xdist_group("zookeeper_tools")


def _workload(srv: servers.Server) -> None:
    zk = KazooClient(hosts=srv.address, timeout=10)
    zk.start(timeout=20)
    try:
        zk.create("/a", b"hello")
        zk.create("/a/b", b"")
        zk.create("/a/seq-", b"s", sequence=True)
        zk.set("/a", b"world")
        zk.create("/e", b"eph", ephemeral=True)
        t = zk.transaction()
        t.create("/m1", b"1")
        t.create("/m2", b"2")
        t.check("/a", 1)
        t.commit()
        zk.delete("/m1")
        zk.set_acls("/m2", OPEN_ACL_UNSAFE)
        zk.create("/a/b/deep", b"\x00\xff binary")
    finally:
        zk.stop()
        zk.close()


def _data_dir(kind: str, root: Path) -> Path:
    """Run the workload, stop, restart (both servers snapshot the tree they load), stop; a
    copy of the data directory's version-2 under ``root``."""
    srv = servers.start(kind, keep_dir=True)
    try:
        _workload(srv)
        srv.stop()
        servers.restart(srv).stop()
        return Path(shutil.copytree(srv.workdir / "data" / "version-2", root / kind))
    finally:
        srv.stop()
        shutil.rmtree(srv.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def data_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not servers.zookeeper_available():  # as conftest's require_zookeeper (module scope)
        if os.environ.get("CI"):
            pytest.fail("ZooKeeper is not installed: run compat/install-zookeeper.sh")
        pytest.skip("ZooKeeper (Debian zookeeper package) is not installed")
    root = tmp_path_factory.mktemp("tools")
    return _data_dir("zookeeper", root), _data_dir("trizk", root)


def _java(cls: str, *args: str) -> str:
    out = subprocess.run(
        [shutil.which("java") or "java", "-cp", ":".join(servers.ZK_JARS), cls, *args],
        capture_output=True,
        timeout=120,
        check=False,
    )
    # the tools print to stdout; stderr has log4j's "no appenders" warnings
    return out.stdout.decode("latin-1")


_DATE = re.compile(r"\d+/\d+/\d+, \d+:\d+:\d+ [AP]M \w+ ")  # TxnLogToolkit's DateFormat
_JAVA_DATE = re.compile(r"\w{3} \w{3} \d\d \d\d:\d\d:\d\d \w+ \d{4}")  # Date.toString
_SESSION = re.compile(r"0x[1-9a-f][0-9a-f]{8,15}")  # session ids; zxids here are short or 0-padded


def _normalise(text: str) -> str:
    sessions: dict[str, str] = {}
    text = _DATE.sub("DATE ", text)
    text = re.sub(r"Thu Jan 01 00:00:00 UTC 1970", "EPOCH", text)
    text = _JAVA_DATE.sub("DATE", text)
    text = re.sub(r'"timestamp":\d+', '"timestamp":T', text)
    text = re.sub(r"in [0-9.E-]+ seconds", "in S seconds", text)
    return _SESSION.sub(lambda m: sessions.setdefault(m.group(0), f"SID{len(sessions)}"), text)


def _names(d: Path, prefix: str) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(prefix))


def test_txn_log_toolkit(data_dirs: tuple[Path, Path]) -> None:
    zk, tz = data_dirs
    assert _names(tz, "log.") == _names(zk, "log.")
    for name in _names(zk, "log."):
        want = _normalise(_java(TXN_LOG_TOOLKIT, str(zk / name)))
        got = _normalise(_java(TXN_LOG_TOOLKIT, str(tz / name)))
        assert "EOF reached after" in want
        assert got == want, name


@pytest.mark.parametrize("options", [(), ("-d",), ("-json",)])
def test_snapshot_formatter(data_dirs: tuple[Path, Path], options: tuple[str, ...]) -> None:
    zk, tz = data_dirs
    assert _names(tz, "snapshot.") == _names(zk, "snapshot.")
    for name in _names(zk, "snapshot."):
        want = _normalise(_java(SNAPSHOT_FORMATTER, *options, str(zk / name)))
        got = _normalise(_java(SNAPSHOT_FORMATTER, *options, str(tz / name)))
        assert ("deep" in want) == (name != "snapshot.0")
        assert got == want, name


def test_snapshot_comparer_finds_them_the_same(data_dirs: tuple[Path, Path]) -> None:
    zk, tz = data_dirs
    last = _names(zk, "snapshot.")[-1]
    args = ("-b", "0", "-n", "0", "-d")
    zk_vs_zk = _normalise(
        _java(SNAPSHOT_COMPARER, "-l", str(zk / last), "-r", str(zk / last), *args)
    )
    zk_vs_tz = _normalise(
        _java(SNAPSHOT_COMPARER, "-l", str(zk / last), "-r", str(tz / last), *args)
    )
    assert "All layers compared." in zk_vs_zk
    assert zk_vs_tz == zk_vs_zk
