"""A SNAP streamed while the leader keeps committing: member 1 rejoins by SNAP
(``forceSnapshotSync``) while a client writes through member 2 without pause (setData, creates,
deletes, and setACLs with ACLs no node had before), so the leader's walk runs while its tree
changes and the txns after the SNAP's zxid queue behind the body. Then every member holds the
same tree. Real processes (compat/procs/ensemble.py): a ZooKeeper 3.9.3 follower of a trizk
leader (a Java learner reading trizk's fuzzy body) and trizk alone.
"""

from __future__ import annotations

import threading
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.security import ACL, Id, Permissions

from tests.compat.conftest import require_zookeeper
from tests.ensemble_helpers import DEADLINE, assert_identical, client
from trizk.compat.procs.ensemble import ProcessEnsemble

pytestmark = pytest.mark.slow

KINDS = {
    "zookeeper-follower-of-trizk": {1: "zookeeper", 2: "trizk", 3: "trizk"},
    "trizk": {1: "trizk", 2: "trizk", 3: "trizk"},
}
NODES = 12_000  # three walk pieces of 4,096 nodes
EXTRA = {"forceSnapshotSync": "true", "tickTime": "500"}


def populate(zk: KazooClient) -> None:
    zk.create("/t", b"")
    for start in range(0, NODES, 500):
        tx = zk.transaction()
        for i in range(start, min(start + 500, NODES)):
            tx.create(f"/t/n{i:05d}", b"x" * 200)
        tx.commit()


def write_until(zk: KazooClient, stop: threading.Event, done: list[int]) -> None:
    """setData, create, delete and a setACL with a fresh ACL per round, until ``stop``."""
    i = 0
    while not stop.is_set():
        node = f"/t/n{i % NODES:05d}"
        zk.set(node, f"w{i}".encode())
        try:
            zk.create(f"/t/new{i}", b"n")
        except NodeExistsError:
            pass
        if i >= 5:
            try:
                zk.delete(f"/t/new{i - 5}")
            except NoNodeError:
                pass
        acl = [
            ACL(Permissions.READ, Id("world", "anyone")),
            ACL(Permissions.ALL, Id("digest", f"user{i}:aGFzaA==")),
        ]
        zk.set_acls(f"/t/n{NODES - 1 - i:05d}", acl)  # each node once: ADMIN is then gone
        i += 1
        done[0] = i


@pytest.mark.parametrize("name", list(KINDS))
def test_a_snap_streamed_under_writes_gives_every_member_the_same_tree(name: str) -> None:
    kinds = KINDS[name]
    if "zookeeper" in kinds.values():
        require_zookeeper()
    with ProcessEnsemble(kinds, extra=EXTRA) as ens:
        ens.wait_leader(3)
        zk = client(ens.hosts([3]))
        try:
            populate(zk)
        finally:
            zk.stop()
            zk.close()
        ens.kill(1)
        writer = client(ens.hosts([2]))
        stop = threading.Event()
        done = [0]
        t = threading.Thread(target=write_until, args=(writer, stop, done), daemon=True)
        t.start()
        try:
            deadline = time.monotonic() + DEADLINE
            while done[0] < 3:  # writes under way before member 1 asks for its SNAP
                assert time.monotonic() < deadline, "the writer made no progress"
                time.sleep(0.02)  # polling interval of a bounded wait
            before = done[0]
            ens.start(1)
            ens.wait_serving(timeout=DEADLINE)
            during = done[0] - before
        finally:
            stop.set()
            t.join(DEADLINE)
            writer.stop()
            writer.close()
        assert not t.is_alive()
        assert during > 0, "no write while member 1 synced"
        final = assert_identical(ens)
        assert f"/t/n{NODES - 1:05d}" in final
        leader_log = ens.members[3].log_path.read_text(errors="replace")
        assert "streamed as walked" in leader_log
        print(f"\n{name}: {during} write rounds while member 1 synced by SNAP")
