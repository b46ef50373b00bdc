"""A trizk leader chooses the sync mode a ZooKeeper 3.9.3 leader chooses for a member that was
away, with the default ``preAllocSize`` (64 MiB log files): real processes from zoo.cfg files
(compat/procs/ensemble.py), ZooKeeper alone as the reference.

The scene: 20,000 znodes, member 1 killed, 2,000 setData through the leader (more than its
in-memory committed log of ``commitLogCount`` + 1 = 501 txns holds), member 1 restarted on its
own data. The leader's txn log must serve (``LearnerHandler.syncFollower`` case 5), and its
size rule (``ZKDatabase.getProposalsFromTxnLog``) decides between DIFF and SNAP:

* ``one-file``: every txn is in one log file. ``FileTxnIterator.getStorageSize`` sums the files
  it has *not yet opened*: after ``init`` opened the file holding the first txn and read it,
  none are left, so the size is 0, never over the limit: DIFF. (trizk counted that file's
  preallocated 64 MiB against 0.33 x a ~2 MB snapshot and sent a SNAP.)
* ``rolled``: the leader and member 2 restart after the 2,000 txns (each starts a new, again
  preallocated, log file) and take 600 more txns, so the away member's zxid is in the older
  file and the committed log no longer reaches it: the newer file's 64 MiB counts: SNAP.

Which mode: the leader's ``zk_diff_count`` / ``zk_snap_count`` (mntr) before and after.
"""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient

from tests.compat.conftest import require_zookeeper
from tests.ensemble_helpers import DEADLINE, client, mntr, wait_caught_up
from trizk.compat.procs.ensemble import ProcessEnsemble

pytestmark = pytest.mark.slow

AWAY = 1
LEADER = 3
NODES = 20_000
AWAY_TXNS = 2_000
AFTER_ROLL_TXNS = 600  # more than the committed log (501) after the restart
#: tickTime 500 ms (not the harness's 200): a learner synced by a DIFF of 2,000 txns logs them
#: all before it ACKs; on a loaded machine that can outlast 5 x 200 ms
EXTRA = {"tickTime": "500"}

KINDS = {
    "zookeeper": {1: "zookeeper", 2: "zookeeper", 3: "zookeeper"},  # the reference
    "trizk": {1: "trizk", 2: "trizk", 3: "trizk"},
    "zookeeper-follower-of-trizk": {1: "zookeeper", 2: "trizk", 3: "trizk"},
}
#: what ZooKeeper 3.9.3's leader sends in each scene (checked by the reference case)
EXPECTED = {"one-file": "diff", "rolled": "snap"}


def pipelined(zk: KazooClient, calls: list[object], window: int = 500) -> None:
    """Every call (a function starting one async request), ``window`` in flight at a time."""
    for i in range(0, len(calls), window):
        for r in [c() for c in calls[i : i + window]]:  # type: ignore[operator]
            r.get(timeout=DEADLINE)


def set_all(zk: KazooClient, n: int, tag: str) -> None:
    pipelined(
        zk,
        [(lambda i=i: zk.set_async(f"/n{i % NODES:05d}", f"{tag}{i}".encode())) for i in range(n)],
    )


def wait_value(ens: ProcessEnsemble, sid: int, path: str, value: bytes) -> None:
    deadline = time.monotonic() + DEADLINE
    zk = client(ens.hosts([sid]))
    try:
        while True:
            zk.sync(path)
            if zk.get(path)[0] == value:
                return
            assert time.monotonic() < deadline, f"member {sid} never showed {path}={value!r}"
            time.sleep(0.1)  # polling interval of a bounded wait
    finally:
        zk.stop()
        zk.close()


@pytest.mark.parametrize("scene", list(EXPECTED))
@pytest.mark.parametrize("name", list(KINDS))
def test_the_leader_chooses_zookeepers_sync_mode(name: str, scene: str) -> None:
    kinds = KINDS[name]
    if "zookeeper" in kinds.values():
        require_zookeeper()
    with ProcessEnsemble(kinds, extra=EXTRA) as ens:
        ens.wait_leader(LEADER)
        zk = client(ens.hosts([LEADER]))
        try:
            pipelined(
                zk,
                [(lambda i=i: zk.create_async(f"/n{i:05d}", b"x" * 100)) for i in range(NODES)],
            )
        finally:
            zk.stop()
            zk.close()
        wait_value(ens, AWAY, f"/n{NODES - 1:05d}", b"x" * 100)
        ens.kill(AWAY)
        zk = client(ens.hosts([LEADER]))
        try:
            set_all(zk, AWAY_TXNS, "away")
        finally:
            zk.stop()
            zk.close()
        last = (f"/n{(AWAY_TXNS - 1) % NODES:05d}", f"away{AWAY_TXNS - 1}".encode())
        if scene == "rolled":
            # member 2 then 3: 3 comes up last and, with the others' zxid, leads again
            wait_caught_up(ens)  # nobody stopped in the middle of a log write
            ens.stop(2)
            ens.stop(LEADER)
            ens.start(2)
            ens.start(LEADER)
            ens.wait_serving(members=[2, LEADER])
            assert mntr(ens, LEADER)["zk_server_state"] == "leader", ens.tails()
            zk = client(ens.hosts([LEADER]))
            try:
                set_all(zk, AFTER_ROLL_TXNS, "rolled")
            finally:
                zk.stop()
                zk.close()
            last = (
                f"/n{(AFTER_ROLL_TXNS - 1) % NODES:05d}",
                f"rolled{AFTER_ROLL_TXNS - 1}".encode(),
            )
        before = mntr(ens, LEADER)
        ens.start(AWAY)
        ens.wait_serving()
        wait_value(ens, AWAY, *last)
        after = mntr(ens, LEADER)
        diffs = int(after["zk_diff_count"]) - int(before["zk_diff_count"])
        snaps = int(after["zk_snap_count"]) - int(before["zk_snap_count"])
        mode = "diff" if diffs and not snaps else "snap" if snaps and not diffs else None
        assert mode == EXPECTED[scene], (name, scene, diffs, snaps, ens.tails())
