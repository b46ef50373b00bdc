"""Ensembles of real processes started from zoo.cfg files: trizk alone, and mixed with Apache
ZooKeeper members (compat/procs/ensemble.py), used through kazoo.

* trizk ensembles of 3 and 5: the leader is killed with SIGKILL under a write load spread over
  the members; writes resume (the time is reported), every acknowledged write is on every
  member, and the killed member rejoins and catches up (DIFF); a member away for long rejoins
  by SNAP.
* Mixed ensembles, both ways round: a trizk member beside two ZooKeeper members, a ZooKeeper
  member beside two trizk members, observers of either kind: writes through every member are
  seen with identical data and Stat through every other after ``sync``; the leader (of either
  kind) is killed and the ensemble carries on; the whole tree compared through every member.
  ZooKeeper 3.9.3 members (the default release), and for a subset (``MIXED38``, ``REJOIN38``)
  3.8.0 members too; trizk members answer as the release of the ZooKeeper members.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from kazoo.exceptions import KazooException, NodeExistsError

from tests.compat.conftest import require_zookeeper
from tests.ensemble_helpers import DEADLINE, assert_identical, client
from trizk.compat.oracle.rawclient import ConnectionClosed, RawClient
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.servers import DEFAULT_VERSION, zookeeper_available
from trizk.jute import records as R
from trizk.jute.codes import Code, OpCode
from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE


class Writers:
    """Threads creating sequential znodes through kazoo clients spread over the members;
    ``acked`` holds every path a client got an OK for."""

    def __init__(self, ens: ProcessEnsemble, n: int = 3) -> None:
        self.acked: list[str] = []
        self.errors = 0
        self.stop = threading.Event()
        sids = list(ens.members)
        self.threads = [
            threading.Thread(
                target=self._run, args=(ens.hosts(sids[i:] + sids[:i]), i), daemon=True
            )
            for i in range(n)
        ]
        self.last_ok = time.monotonic()
        for t in self.threads:
            t.start()

    def _run(self, hosts: str, wid: int) -> None:
        zk = client(hosts)
        i = 0
        try:
            while not self.stop.is_set():
                path = f"/w{wid}-{i}"
                try:
                    zk.create(path, b"x")
                except NodeExistsError:
                    pass  # an earlier try that timed out did take effect
                except KazooException:
                    self.errors += 1
                    time.sleep(0.02)  # back off before retrying through another member
                    continue
                self.acked.append(path)
                self.last_ok = time.monotonic()
                i += 1
        finally:
            zk.stop()
            zk.close()

    def wait_for(self, n: int) -> None:
        deadline = time.monotonic() + DEADLINE
        while len(self.acked) < n:
            assert time.monotonic() < deadline, f"only {len(self.acked)} writes acknowledged"
            time.sleep(0.01)  # polling interval of a bounded wait

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(DEADLINE)
        assert not any(t.is_alive() for t in self.threads)


@pytest.mark.parametrize("size", [3, 5])
def test_kill_the_leader_under_load_loses_nothing(size: int) -> None:
    with ProcessEnsemble({i: "trizk" for i in range(1, size + 1)}) as ens:
        ens.wait_leader(size)  # equal histories: the highest sid leads
        first = size
        w = Writers(ens)
        try:
            w.wait_for(200)
            t_kill = time.monotonic()
            ens.kill(first)
            before = len(w.acked)
            w.wait_for(before + 200)  # writes resumed on the new leader
            resumed = w.last_ok - t_kill
        finally:
            w.finish()
        print(f"\n{size} members: writes resumed within {resumed:.2f} s of the SIGKILL")
        assert resumed < 15
        modes = ens.wait_serving()
        assert ens.leader() != first and first not in modes
        final = assert_identical(ens)
        missing = [p for p in w.acked if "/" + p.lstrip("/") not in final]
        assert missing == []
        ens.start(first)  # back with its data: DIFF from the new leader
        ens.wait_serving()
        assert "/" + w.acked[-1].lstrip("/") in assert_identical(ens)


def test_a_member_away_for_long_rejoins_by_snap() -> None:
    # snapshotSizeFactor -1: no sync from the txn log (ZKDatabase.isTxnLogSyncEnabled), which
    # would otherwise serve this DIFF (one log file counts 0 against the size limit, as
    # ZooKeeper's getStorageSize: tests/compat/test_sync_mode.py)
    with ProcessEnsemble(
        {1: "trizk", 2: "trizk", 3: "trizk"}, extra={"snapshotSizeFactor": "-1"}
    ) as ens:
        ens.wait_serving()
        away = 1
        ens.kill(away)
        zk = client(ens.hosts([2, 3]))
        try:
            # more than the leader's committed log holds (commitLogCount + 1 = 501 proposals)
            for i in range(700):
                zk.create(f"/s{i}", b"y")
        finally:
            zk.stop()
            zk.close()
        ens.start(away)
        ens.wait_serving()
        final = assert_identical(ens)
        assert "/s699" in final
        log = ens.members[away].log_path.read_text()
        assert "SNAP: loaded the leader's snapshot" in log


MIXED = {
    "trizk-follower-in-zookeeper": ({1: "zookeeper", 2: "zookeeper", 3: "trizk"}, ()),
    "zookeeper-follower-of-trizk": ({1: "trizk", 2: "trizk", 3: "zookeeper"}, ()),
    "zookeeper-observer-of-trizk": ({1: "trizk", 2: "trizk", 3: "trizk", 4: "zookeeper"}, (4,)),
    "trizk-observer-of-zookeeper": (
        {1: "zookeeper", 2: "zookeeper", 3: "zookeeper", 4: "trizk"},
        (4,),
    ),
}


#: The mixed ensembles CI also runs with ZooKeeper 3.8.0 members (a representative subset, for
#: CI time: a 3.8.0 leader with a trizk follower, a trizk leader with a 3.8.0 follower), the
#: trizk members answering as 3.8.0 too.
MIXED38 = ("trizk-follower-in-zookeeper", "zookeeper-follower-of-trizk")


def _releases(names: Iterable[str], with38: Iterable[str]) -> list[Any]:
    """(name, ZooKeeper release) params: every name at the default release, 3.9.3 (ids
    unchanged), those of ``with38`` at 3.8.0 too."""
    out = []
    for name in names:
        out.append(pytest.param(name, DEFAULT_VERSION, id=name))
        if name in with38:
            out.append(pytest.param(name, "3.8.0", id=f"{name}-3.8.0"))
    return out


def _java_versions(kinds: Mapping[int, str], release: str) -> dict[int, str]:
    """The release of every member: a ZooKeeper member's, the one a trizk member answers as
    (and skip, or fail under CI, when that ZooKeeper is absent)."""
    require_zookeeper(release)
    return dict.fromkeys(kinds, release)


@pytest.mark.skipif(not zookeeper_available(), reason="Apache ZooKeeper is not installed")
@pytest.mark.parametrize(("name", "release"), _releases(MIXED, MIXED38))
def test_mixed_ensemble(name: str, release: str) -> None:
    kinds, observers = MIXED[name]
    versions = _java_versions(kinds, release)
    with ProcessEnsemble(kinds, observers=observers, versions=versions) as ens:
        ens.wait_leader(3)  # the highest voter sid, whatever its kind
        for sid in kinds:
            zk = client(ens.hosts([sid]))
            try:
                zk.create(f"/n{sid}", f"{kinds[sid]}".encode())
                zk.create(f"/n{sid}/e", b"", ephemeral=True)
                zk.set(f"/n{sid}", b"again")
                zk.create(f"/n{sid}/q-", b"", sequence=True)
            finally:
                zk.stop()
                zk.close()
        first = assert_identical(ens)
        assert {f"/n{s}" for s in kinds} <= set(first)
        leader = ens.leader()
        assert leader is not None
        ens.kill(leader)  # a leader of either kind
        ens.wait_serving()
        zk = client(ens.hosts([s for s in kinds if s != leader]))
        try:
            zk.create("/after", b"z")
        finally:
            zk.stop()
            zk.close()
        ens.start(leader)
        ens.wait_serving()
        final = assert_identical(ens)
        assert "/after" in final and final["/n1"][0] == b"again"


REJOIN = {
    "zookeeper-rejoins-trizk": {1: "zookeeper", 2: "trizk", 3: "trizk"},  # a trizk leader
    "trizk-rejoins-zookeeper": {1: "trizk", 2: "zookeeper", 3: "zookeeper"},  # a Java leader
}
#: with 3.8.0 too: a trizk leader syncs a 3.8.0 follower (a subset, for CI time)
REJOIN38 = ("zookeeper-rejoins-trizk",)


@pytest.mark.skipif(not zookeeper_available(), reason="Apache ZooKeeper is not installed")
@pytest.mark.parametrize(("name", "release"), _releases(REJOIN, REJOIN38))
def test_mixed_rejoin_by_diff_and_by_snap(name: str, release: str) -> None:
    """Member 1 (the other kind than the leader, 3) leaves and comes back after a few writes:
    by DIFF; then, with ``forceSnapshotSync`` on every member, by SNAP."""
    kinds = REJOIN[name]
    versions = _java_versions(kinds, release)
    for force, mode in (("false", "DIFF"), ("true", "SNAP")):
        extra = {"forceSnapshotSync": force}
        with ProcessEnsemble(kinds, extra=extra, versions=versions) as ens:
            ens.wait_leader(3)
            ens.kill(1)
            zk = client(ens.hosts([2, 3]))
            try:
                for i in range(20):
                    zk.create(f"/r{i}", b"v")
            finally:
                zk.stop()
                zk.close()
            ens.start(1)
            ens.wait_serving()
            final = assert_identical(ens)
            assert "/r19" in final
            log = ens.members[1].log_path.read_text(errors="replace").splitlines()
            synced = [ln for ln in log if ln_sync(ln)]
            assert synced and mode in synced[-1].upper(), synced[-3:]


def ln_sync(line: str) -> bool:
    """A member's log line naming how it synced: trizk's "synced with the leader by X",
    ZooKeeper's "Getting a diff from the leader" / "Getting a snapshot from leader"."""
    return "synced with the leader by" in line or "Getting a " in line


@pytest.mark.parametrize("kind", ["trizk", "zookeeper"])
def test_session_moved_closes_the_old_connection(kind: str) -> None:
    """ZOOKEEPER-710: a session reattached to another member (revalidated there) makes a write
    still sent through its old member's connection a SESSIONMOVED error txn; that member closes
    the connection without a reply (FinalRequestProcessor), and the write never happens."""
    if kind == "zookeeper" and not zookeeper_available():
        pytest.skip("Apache ZooKeeper is not installed")
    with ProcessEnsemble({1: kind, 2: kind, 3: kind}) as ens:
        ens.wait_serving()
        a = RawClient(ens.host(1), ens.port(1), io_timeout=DEADLINE)
        ra = a.connect(timeout_ms=20000)
        assert ra is not None
        b = RawClient(ens.host(2), ens.port(2), io_timeout=DEADLINE)
        rb = b.connect(timeout_ms=20000, session_id=ra.sessionId, passwd=ra.passwd)
        assert rb is not None and rb.sessionId == ra.sessionId
        # Commits are matched to a member's pending requests by (session, cxid), in ZooKeeper
        # too: two connections of one session must not use the same xids here.
        b.next_xid = 1000
        acl = tuple(OPEN_ACL_UNSAFE)
        xid = a.send(OpCode.CREATE, R.CreateRequest("/old", b"", acl, 0))
        with pytest.raises(ConnectionClosed):
            a.read_until_reply(xid)
        xid = b.send(OpCode.CREATE, R.CreateRequest("/new", b"", acl, 0))
        assert b.read_until_reply(xid)[1].err == 0
        xid = b.send(OpCode.EXISTS, R.ExistsRequest("/old", False))
        assert b.read_until_reply(xid)[1].err == Code.NONODE
        b.close()
