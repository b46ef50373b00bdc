"""Durability over real sockets: restarts keep data and sessions, and data directories move
between Apache ZooKeeper 3.8 and trizk in both directions with the same tree.

ZooKeeper runs from its Debian jars (tests/data/zkdata/zkrun.py); the tests that need it
are skipped when it is not installed. Trees are compared through the client API (data, Stat,
ACL, children of every node), as a client would see them.
"""

from __future__ import annotations

import importlib.util
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.conftest import ThreadedServer, make_config
from trizk.server.shell.persistence import DataDirError
from trizk.storage.disk import files
from trizk.storage.formats import snapshot, treeio, txnlog
from trizk.storage.tree.replica import Replica
from trizk.testing.probes import ask

ZKDATA = Path(__file__).resolve().parents[1] / "data" / "zkdata"
_spec = importlib.util.spec_from_file_location("zkrun", ZKDATA / "zkrun.py")
assert _spec is not None and _spec.loader is not None
zkrun = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zkrun)
needs_java = pytest.mark.skipif(not zkrun.java_available(), reason="Apache ZooKeeper not installed")

#: The session ZooKeeper's golden scenario leaves open, and its ephemeral.
GOLDEN_SESSION_TIMEOUT = 30000


def dump_tree(zk: KazooClient, path: str = "/") -> dict[str, Any]:
    """Every node as the client sees it: data, Stat, ACL, sorted children."""
    out: dict[str, Any] = {}
    data, stat = zk.get(path)
    acl, _ = zk.get_acls(path)
    kids = sorted(zk.get_children(path))
    out[path] = (data, tuple(stat), tuple((a.perms, a.id.scheme, a.id.id) for a in acl), kids)
    for k in kids:
        out.update(dump_tree(zk, (path.rstrip("/") + "/" + k)))
    return out


def four(port: int, word: bytes) -> str:
    return ask(port, word, 5).decode()


def client(hosts: str, **kw: Any) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=10, **kw)
    zk.start(timeout=15)
    return zk


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "data"


def start(
    tmp_path: Path, *, properties: dict[str, str] | None = None, **keys: Any
) -> ThreadedServer:
    config = make_config(tmp_path, **keys)
    if properties:
        config = config.replace(properties={**config.properties, **properties})
    return ThreadedServer(config).start()


# ------------------------------------------------------------------------------ restart


def test_restart_keeps_data_sessions_and_ephemerals(tmp_path: Path) -> None:
    keys: dict[str, Any] = {"snapCount": 50, "preAllocSize": 16}
    srv = start(tmp_path, **keys)
    zk = client(srv.hosts)
    try:
        zk.create("/app", b"v0")
        for i in range(120):  # past snapCount: at least one snapshot and a rolled log
            zk.set("/app", f"v{i + 1}".encode())
        zk.create("/app/eph", b"e", ephemeral=True)
        zk.create("/app/seq-", b"s", sequence=True)
        t = zk.transaction()
        t.create("/m1", b"1")
        t.create("/m2", b"2")
        t.commit()
        before = dump_tree(zk)
        sid, passwd = zk.client_id
        core = srv.server.core  # type: ignore[union-attr]
        zxid = srv.call(lambda: core.tree.last_processed_zxid)
        assert srv.call(lambda: srv.server.persistence.snapshots_taken) >= 1  # type: ignore[union-attr]
    finally:
        srv.stop()  # the session is still open: it and its ephemeral are in the log
        zk.stop()
        zk.close()
    srv = start(tmp_path, **keys)
    try:
        core = srv.server.core  # type: ignore[union-attr]
        assert srv.call(lambda: core.tree.last_processed_zxid) == zxid
        tracker = srv.server.sequencer.sessions  # type: ignore[union-attr]
        assert srv.call(lambda: tracker.sessions[sid].timeout) == 10000
        back = client(srv.hosts, client_id=(sid, passwd))
        assert back.client_id[0] == sid  # the same session, resumed
        assert dump_tree(back) == before
        assert back.exists("/app/eph").ephemeralOwner == sid
        back.stop()  # closeSession: the ephemeral goes, durably
        back.close()
        assert srv.call(lambda: core.tree.last_processed_zxid) == zxid + 1
    finally:
        srv.stop()
    srv = start(tmp_path, **keys)
    try:
        zk = client(srv.hosts)
        assert zk.exists("/app/eph") is None
        assert zk.get("/app")[0] == b"v120"
        assert sid not in srv.call(lambda: list(srv.server.sequencer.sessions.sessions))  # type: ignore[union-attr]
        zk.stop()
        zk.close()
    finally:
        srv.stop()


def test_group_commit_one_fsync_covers_many_txns(tmp_path: Path) -> None:
    """Pipelined writers: txns that arrive while a sync runs share the next one."""
    from trizk.compat.bench.load import close_sessions, create_frame, open_sessions, run_load

    srv = start(tmp_path)
    try:
        p = srv.server.persistence  # type: ignore[union-attr]
        socks = open_sessions("127.0.0.1", srv.port, 8)
        frames = [
            [create_frame(i + 1, f"/g{k}-{i}", b"x" * 100) for i in range(300)] for k in range(8)
        ]
        before = srv.call(lambda: (p.syncs, p.txns_logged))
        res = run_load(socks, frames, window=32, cycle=False)
        close_sessions(socks)
        assert res.errors == 0 and res.replies == 2400
        syncs, logged = srv.call(lambda: (p.syncs - before[0], p.txns_logged - before[1]))
        assert logged >= 2400
        assert syncs < logged / 4, f"{syncs} syncs for {logged} txns"
    finally:
        srv.stop()


def test_restored_session_expires_if_its_client_never_returns(tmp_path: Path) -> None:
    keys: dict[str, Any] = {"tickTime": 100, "maxSessionTimeout": 400}
    srv = start(tmp_path, **keys)
    try:
        zk = client(srv.hosts)
        zk.create("/eph", b"", ephemeral=True)
        sid = zk.client_id[0]
    finally:
        srv.stop()  # the client's session is not closed: it is in the log
        zk.stop()
        zk.close()
    srv = start(tmp_path, **keys)
    try:
        assert sid in srv.call(lambda: list(srv.server.sequencer.sessions.sessions))  # type: ignore[union-attr]
        other = client(srv.hosts)
        deadline = time.monotonic() + 10
        while other.exists("/eph") is not None:
            assert time.monotonic() < deadline, "restored session never expired"
            time.sleep(0.05)
        other.stop()
        other.close()
    finally:
        srv.stop()


def test_force_sync_off_and_gz_snapshots(tmp_path: Path) -> None:
    keys: dict[str, Any] = {"forceSync": "no", "snapCount": 20, "snapshot.compression.method": "gz"}
    srv = start(tmp_path, **keys)
    try:
        zk = client(srv.hosts)
        for i in range(60):
            zk.create(f"/n{i}", str(i).encode())
        before = dump_tree(zk)
        zk.stop()
        zk.close()
    finally:
        srv.stop()
    v2 = tmp_path / "data" / "version-2"
    gz = [p for p in v2.iterdir() if p.name.endswith(".gz")]
    assert gz, sorted(p.name for p in v2.iterdir())
    srv = start(tmp_path, **keys)
    try:
        zk = client(srv.hosts)
        after = dump_tree(zk)
        assert after["/n59"] == before["/n59"]
        assert after.keys() == before.keys()
        zk.stop()
        zk.close()
    finally:
        srv.stop()


@pytest.mark.oracle
@needs_java
def test_snappy_snapshots_load_in_trizk_and_zookeeper(tmp_path: Path) -> None:
    keys: dict[str, Any] = {"snapCount": 20, "snapshot.compression.method": "snappy"}
    srv = start(tmp_path, **keys)
    try:
        zk = client(srv.hosts)
        for i in range(60):
            zk.create(f"/s{i}", str(i).encode())
        expected = dump_tree(zk)
        zk.stop()
        zk.close()
    finally:
        srv.stop()
    v2 = tmp_path / "data" / "version-2"
    assert any(p.name.endswith(".snappy") for p in v2.iterdir())
    # only the snappy snapshots and the logs after the newest one: both servers must read it
    newest = files.list_snapshots(v2)[-1]
    assert newest[1].name.endswith(".snappy")
    for _z, p in files.list_snapshots(v2)[:-1]:
        p.unlink()
    with zkrun.running(tmp_path / "data") as zks:
        zk = client(zks.hosts)
        got = dump_tree(zk)
        assert got.keys() == expected.keys()
        assert all(got[p][0] == expected[p][0] for p in expected)
        zk.stop()
        zk.close()
        assert "Digests are not matching" not in zks.log_path.read_text()


@pytest.mark.slow
def test_digest_disabled_writes_no_digests(tmp_path: Path) -> None:
    keys: dict[str, Any] = {"digest.enabled": "false", "snapCount": 10}
    srv = start(tmp_path, **keys)
    try:
        zk = client(srv.hosts)
        for i in range(30):
            zk.create(f"/d{i}", b"x")
        zk.stop()
        zk.close()
    finally:
        srv.stop()
    v2 = tmp_path / "data" / "version-2"
    # every txn in every log file (recover() would give only those after the newest snapshot,
    # none at all when the fuzzy snapshot started after the last write was applied)
    logged = [
        s.entry for _, path in files.list_logs(v2) for s in txnlog.scan(files.read_bytes(path))[0]
    ]
    assert len(logged) == 32  # createSession, 30 creates, closeSession
    assert all(e.digest is None for e in logged)
    rec = files.recover(v2, truncate=False)
    assert rec.snapshot is not None and rec.snapshot.digest is None
    srv = start(tmp_path, **keys)
    try:
        zk = client(srv.hosts)
        assert len(zk.get_children("/")) == 31
        zk.stop()
        zk.close()
    finally:
        srv.stop()


def test_separate_data_log_dir_and_purge(tmp_path: Path) -> None:
    logs = tmp_path / "txnlogs"
    keys: dict[str, Any] = {"dataLogDir": str(logs), "snapCount": 10, "preAllocSize": 4}
    srv = start(tmp_path, **keys)
    try:
        zk = client(srv.hosts)
        for i in range(200):
            zk.create(f"/p{i}", b"x")
        zk.stop()
        zk.close()
        persistence = srv.server.persistence  # type: ignore[union-attr]
        snaps_before = files.list_snapshots(tmp_path / "data" / "version-2")
        assert len(snaps_before) > 3
        assert not files.list_logs(tmp_path / "data" / "version-2")
        assert len(files.list_logs(logs / "version-2")) > 3

        async def purge() -> list[Path]:
            return await persistence.purge()

        gone = srv.call_async(purge)
        # the newest three (at least) stay; everything older is gone, logs included
        assert gone and all(not p.exists() for _, p in snaps_before[:-3])
        assert len(files.list_snapshots(tmp_path / "data" / "version-2")) >= 3
        assert any(p.parent == logs / "version-2" for p in gone)
    finally:
        srv.stop()
    srv = start(tmp_path, **keys)
    try:
        zk = client(srv.hosts)
        assert len(zk.get_children("/")) == 201
        zk.stop()
        zk.close()
    finally:
        srv.stop()


def test_unrecoverable_data_dir_stops_the_server(tmp_path: Path) -> None:
    srv = start(tmp_path)
    try:
        zk = client(srv.hosts)
        for i in range(5):
            zk.create(f"/x{i}", b"x")
        zk.stop()
        zk.close()
    finally:
        srv.stop()
    v2 = tmp_path / "data" / "version-2"
    for _, snap in files.list_snapshots(v2):
        snap.write_bytes(b"not a snapshot")
    with pytest.raises(RuntimeError, match="did not start") as info:
        start(tmp_path)
    assert "DataDirError" in str(info.value) or "snapshot" in str(info.value)
    _ = DataDirError


# ------------------------------------------------------------------------------ interchange


def test_zookeeper_golden_data_dir_starts_trizk(tmp_path: Path) -> None:
    """The data dir ZooKeeper wrote (tests/data/zkdata): same tree, session, zxid."""
    data = tmp_path / "data"
    shutil.copytree(ZKDATA / "version-2", data / "version-2")
    rec = files.recover(ZKDATA / "version-2", truncate=False)
    assert rec.snapshot is not None
    ref = treeio.tree_from_snapshot(rec.snapshot, rec.snapshot_zxid, extended_types=True)
    ref_sessions = dict(rec.snapshot.sessions)
    treeio.replay(Replica(ref, ref_sessions), rec.txns)
    srv = start(tmp_path, extendedTypesEnabled="true")
    try:
        core = srv.server.core  # type: ignore[union-attr]
        assert srv.call(lambda: core.tree.last_processed_zxid) == 0x46
        assert srv.call(lambda: treeio.canonical(core.tree)) == treeio.canonical(ref)
        tracker = srv.server.sequencer.sessions  # type: ignore[union-attr]
        sessions = srv.call(lambda: {s.id: s.timeout for s in tracker.sessions.values()})
        assert sessions == ref_sessions
        assert list(sessions.values()) == [GOLDEN_SESSION_TIMEOUT]
        (sid,) = sessions
        assert "Zxid: 0x46" in four(srv.port, b"srvr")
        zk = client(srv.hosts)
        assert zk.get("/app")[0] == b"final"
        assert zk.exists("/c-eph").ephemeralOwner == sid
        zk.create("/after", b"trizk")  # the log goes on: 0x47 was the client's createSession
        assert zk.exists("/after").czxid == 0x48
        zk.stop()
        zk.close()
    finally:
        srv.stop()


@pytest.mark.oracle
@needs_java
def test_live_zookeeper_data_dir_starts_trizk_with_the_same_tree(tmp_path: Path) -> None:
    data = tmp_path / "zk"
    with zkrun.running(data, snap_count=40) as zks:
        c = zkrun.scenario(zks.hosts)
        zk = client(zks.hosts)
        expected = dump_tree(zk)
        zk.stop()
        zk.close()
        c_sid = c.client_id[0]
        zks.stop()  # the scenario's session c stays open in the data dir
        c.stop()
        c.close()
    dst = tmp_path / "data"
    shutil.copytree(data / "version-2", dst / "version-2")
    srv = start(tmp_path, extendedTypesEnabled="true")
    try:
        zk = client(srv.hosts)
        got = dump_tree(zk)
        assert got == expected
        assert c_sid in srv.call(lambda: list(srv.server.sequencer.sessions.sessions))  # type: ignore[union-attr]
        zk.stop()
        zk.close()
    finally:
        srv.stop()


@pytest.mark.oracle
@needs_java
def test_trizk_data_dir_starts_zookeeper_with_the_same_tree(tmp_path: Path) -> None:
    srv = start(
        tmp_path,
        extendedTypesEnabled="true",
        properties={"znode.container.checkIntervalMs": "200"},
        snapCount=40,
    )
    try:
        c = zkrun.scenario(srv.hosts)
        zk = client(srv.hosts)
        expected = dump_tree(zk)
        zk.stop()
        zk.close()
        zxid = srv.call(lambda: srv.server.replica.tree.last_processed_zxid)  # type: ignore[union-attr]
        c_sid = c.client_id[0]
    finally:
        srv.stop()
    c.stop()
    c.close()
    v2 = tmp_path / "data" / "version-2"
    assert len(files.list_snapshots(v2)) > 1 and len(files.list_logs(v2)) > 1
    with zkrun.running(tmp_path / "data") as zks:
        zk = client(zks.hosts)
        got = dump_tree(zk)
        assert got == expected
        dump = four(zks.port, b"dump")
        assert hex(c_sid) in dump and "/c-eph" in dump
        zk.stop()
        zk.close()
        log = zks.log_path.read_text()
        assert "Digests are not matching" not in log
        assert f"highest zxid is {hex(zxid)}," in log  # ZKDatabase: "Snapshot loaded in ..."
    # and back: trizk reads what ZooKeeper appended to the directory
    srv = start(tmp_path, extendedTypesEnabled="true")
    try:
        zk = client(srv.hosts)
        again = dump_tree(zk)
        assert again.keys() == got.keys()
        zk.stop()
        zk.close()
    finally:
        srv.stop()
    _ = snapshot


@pytest.mark.oracle
@needs_java
def test_quota_usage_after_restart_matches_zookeeper(tmp_path: Path) -> None:
    """Quota stats are derived state: a restart recomputes them from the tree (setupQuota) and
    replays the log's txns on top; trizk and ZooKeeper reach the same stats from one data dir."""
    stats = "/zookeeper/quota/q/zookeeper_stats"
    srv = start(tmp_path, snapCount=20, preAllocSize=16)
    try:
        zk = client(srv.hosts)
        zk.create("/q", b"root")
        zk.create("/zookeeper/quota/q")
        zk.create("/zookeeper/quota/q/zookeeper_limits", b"count=5,bytes=-1")
        zk.create(stats, b"count=0,bytes=0")
        zk.set(stats, b"count=100,bytes=100")  # a client's overwrite, then a snapshot
        for i in range(30):  # past 2 * snapCount: a snapshot after the overwrite is certain
            zk.create(f"/q/n{i}", b"x" * i)
            zk.set("/q", b"r" * (i % 7))
        zk.delete("/q/n3")
        live = zk.get(stats)[0]
        zk.stop()
        zk.close()
        assert srv.call(lambda: srv.server.persistence.snapshots_taken) >= 1  # type: ignore[union-attr]
    finally:
        srv.stop()
    assert live == b"count=129,bytes=529"  # 100 + 30 - 1 znodes; 100 + 435 - 3 - 3 bytes
    srv = start(tmp_path, snapCount=20, preAllocSize=16)
    try:
        zk = client(srv.hosts)
        ours = dump_tree(zk)
        zk.stop()
        zk.close()
    finally:
        srv.stop()
    # recomputed from the snapshot's tree, then the replayed txns after it: the real usage
    assert ours[stats][0] == b"count=30,bytes=433"  # /q "r", n0..n29 without n3
    with zkrun.running(tmp_path / "data") as zks:
        zk = client(zks.hosts)
        theirs = dump_tree(zk)
        zk.stop()
        zk.close()
    assert theirs == ours
