"""The second oracle, Apache ZooKeeper 3.9.3 (Debian trixie's jars, unpacked privately by
``compat/install-zookeeper.sh``), beside 3.8.0.

* ``test_both_releases_run_side_by_side``: :func:`trizk.compat.procs.servers.start` runs 3.9.3
  and 3.8.0 at once, each answering ``ruok``, ``srvr`` with its own version line, and serving a
  session.
* Data directories both ways. 3.9.3 writes one (a low ``snapCount``, so several snapshots, each
  ending in 3.9's last-processed-zxid trailer, and txn logs; an ACL, binary data, a sequential
  node, a multi, deletes; an ephemeral of a session that is still open when the server goes) and
  is stopped, or SIGKILLed; trizk starts on it and serves the same tree, stat for stat (the
  ephemeral included); so does ZooKeeper 3.8.0, which ignores the trailer. Then the other way:
  ZooKeeper 3.8.0 and 3.9.3 start on trizk's data directory as trizk wrote it answering as
  either release (3.9.3: every snapshot with the trailer, as 3.9.3 writes them; 3.8.0:
  without), after a stop or a SIGKILL, without "problem reading snap file" or a digest
  mismatch in their logs.

* ``test_mixed_ensemble_with_393_members``: :class:`trizk.compat.procs.ensemble.ProcessEnsemble`
  runs 3.9.3 members (``versions``) beside trizk and 3.8.0 ones; writes through every member
  reach every member.

Skipped (with the reason) when 3.9.3 is not installed; under CI a missing oracle fails.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from tests.ensemble_helpers import assert_identical, client
from trizk.compat.oracle.rawclient import RawClient
from trizk.compat.procs import servers
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.jute import records as R
from trizk.jute.codes import OpCode
from trizk.storage.disk import files
from trizk.storage.formats import snapshot
from trizk.testing.probes import four_letter

from .conftest import require_zookeeper

#: zoo.cfg for the data-directory tests: a snapshot every few txns (ZooKeeper takes one after
#: snapCount/2 + a random share of snapCount/2 txns), so the directory has several
CFG = {"snapCount": "6"}


def _kazoo(srv: servers.Server) -> KazooClient:
    zk = KazooClient(hosts=srv.address, timeout=10, auth_data=[("digest", "u:p")])
    zk.start(timeout=30)
    return zk


def test_unknown_version_is_refused() -> None:
    with pytest.raises(ValueError, match=r"3\.7\.1"):
        servers.start("zookeeper", version="3.7.1")


def test_both_releases_run_side_by_side(needs_zookeeper38: None, needs_zookeeper39: None) -> None:
    with (
        servers.running("zookeeper") as new,  # the default release
        servers.running("zookeeper", version="3.8.0") as old,
    ):
        assert new.version == "3.9.3" and old.version == "3.8.0"
        for srv, release in ((new, "3.9.3"), (old, "3.8.0")):
            assert four_letter(srv.port, "ruok") == "imok"
            assert four_letter(srv.port, "srvr").startswith(f"Zookeeper version: {release}-")
            zk = _kazoo(srv)
            try:
                zk.create("/side", release.encode())
                assert zk.get("/side")[0] == release.encode()
            finally:
                zk.stop()
                zk.close()


Tree = dict[str, tuple[bytes, tuple[int, ...], list[object]]]


def _tree(srv: servers.Server) -> Tree:
    """Every node outside /zookeeper: data, stat, ACL."""
    zk = _kazoo(srv)
    try:
        out: Tree = {}
        todo = ["/"]
        while todo:
            path = todo.pop()
            if path == "/zookeeper":
                continue
            data, stat = zk.get(path)
            acl, _ = zk.get_acls(path)
            out[path] = (data, tuple(stat), sorted(map(repr, acl)))
            todo.extend(f"{path.rstrip('/')}/{c}" for c in zk.get_children(path))
        return out
    finally:
        zk.stop()
        zk.close()


def _workload(srv: servers.Server) -> None:
    """Writes of every kind, then an ephemeral whose session stays open (the socket is just
    dropped: no closeSession)."""
    zk = _kazoo(srv)
    try:
        zk.create("/a", b"hello")
        zk.create("/a/b", b"\x00\xff binary")
        zk.create("/a/seq-", b"s", sequence=True)
        zk.create("/acl", b"x", acl=[make_digest_acl("u", "p", all=True)])
        for i in range(12):
            zk.create(f"/n{i}", str(i).encode())
        for i in range(0, 12, 3):
            zk.delete(f"/n{i}")
        zk.set("/a", b"world")
        t = zk.transaction()
        t.create("/m1", b"1")
        t.set_data("/a/b", b"")
        t.check("/a", 1)
        t.commit()
    finally:
        zk.stop()
        zk.close()
    raw = RawClient(srv.host, srv.port)
    raw.connect(timeout_ms=60000)
    xid = raw.send(
        OpCode.CREATE,
        R.CreateRequest("/eph", b"e", (R.ACL(31, R.Id("world", "anyone")),), 1),
    )
    _, reply = raw.read_until_reply(xid)
    assert reply.err == 0
    raw.close()  # no closeSession: the session outlives the server


def _on_the_other(srv: servers.Server, kind: str, version: str = "3.8.0") -> servers.Server:
    """Start ``kind`` on stopped ``srv``'s zoo.cfg, port and data directory."""
    assert not srv.alive()
    return servers.restart(dataclasses.replace(srv, kind=kind, version=version, keep_dir=True))


def _stop(srv: servers.Server, how: str) -> None:
    srv.keep_dir = True
    if how == "kill":
        srv.proc.kill()  # SIGKILL, our own process by its PID
        srv.proc.wait(10)
    else:
        srv.stop()


def _snapshots(srv: servers.Server) -> list[tuple[int, Path]]:
    return files.list_snapshots(srv.workdir / "data" / "version-2")


@pytest.mark.parametrize(
    ("how", "target"), [("terminate", "trizk"), ("kill", "trizk"), ("terminate", "3.8.0")]
)
def test_trizk_starts_on_a_data_dir_zookeeper_393_wrote(
    needs_zookeeper39: None, how: str, target: str
) -> None:
    """(And ZooKeeper 3.8.0 on it, which reads no further than the digest section.)"""
    zk = servers.start("zookeeper", CFG, version="3.9.3", keep_dir=True)
    try:
        _workload(zk)
        before = _tree(zk)
        assert "/eph" in before
        _stop(zk, how)
        snaps = _snapshots(zk)
        assert len(snaps) >= 2
        for _, path in snaps:  # every 3.9.3 snapshot carries the trailer
            content = snapshot.parse(path.read_bytes())
            assert content.last_processed_zxid is not None
            assert content.digest is not None
            assert content.last_processed_zxid == content.digest.zxid
        if target == "trizk":
            other = _on_the_other(zk, "trizk")
        else:
            require_zookeeper("3.8.0")
            other = _on_the_other(zk, "zookeeper", "3.8.0")
        try:
            assert _tree(other) == before
        finally:
            other.stop()
    finally:
        zk.stop()
        shutil.rmtree(zk.workdir, ignore_errors=True)


@pytest.mark.parametrize("release", ["3.8.0", "3.9.3"])
@pytest.mark.parametrize("target", ["3.8.0", "3.9.3"])
def test_zookeeper_starts_on_trizks_data_dir(
    needs_zookeeper: None, needs_zookeeper39: None, release: str, target: str
) -> None:
    """trizk answering as ``release`` writes its snapshots as that release does (3.9.3: with
    the last-processed-zxid trailer; 3.8.0: without); ZooKeeper ``target`` starts on them and
    serves the same tree, the open session's ephemeral included (trizk SIGKILLed when the
    two releases match, stopped otherwise)."""
    how = "kill" if release == target else "terminate"
    tz = servers.start(f"trizk@{release}", CFG, keep_dir=True)
    try:
        _workload(tz)
        before = _tree(tz)
        _stop(tz, how)
        snaps = _snapshots(tz)
        assert len(snaps) >= 2
        for _, path in snaps:
            content = snapshot.parse(path.read_bytes())
            assert content.digest is not None
            if release == "3.9.3":
                assert content.last_processed_zxid == content.digest.zxid
            else:
                assert content.last_processed_zxid is None
        zk = _on_the_other(tz, "zookeeper", target)
        try:
            assert _tree(zk) == before
            log = zk.log_path.read_text(errors="replace")
            assert "problem reading snap file" not in log
            assert "Digests are not matching" not in log
        finally:
            zk.stop()
    finally:
        tz.stop()
        shutil.rmtree(tz.workdir, ignore_errors=True)


def test_mixed_ensemble_with_393_members(needs_zookeeper38: None, needs_zookeeper39: None) -> None:
    kinds = {1: "zookeeper", 2: "trizk", 3: "zookeeper", 4: "zookeeper"}
    with ProcessEnsemble(kinds, observers=(4,), versions={1: "3.9.3", 3: "3.8.0"}) as ens:
        assert ens.versions[1] == "3.9.3" and ens.versions[3] == "3.8.0"
        ens.wait_leader(3)
        assert four_letter(ens.port(1), "srvr").startswith("Zookeeper version: 3.9.3-")
        for sid in kinds:
            zk = client(ens.hosts([sid]))
            try:
                zk.create(f"/n{sid}", kinds[sid].encode())
                zk.create(f"/n{sid}/e", b"", ephemeral=True)
            finally:
                zk.stop()
                zk.close()
        tree = assert_identical(ens)
        assert {f"/n{s}" for s in kinds} <= set(tree)
