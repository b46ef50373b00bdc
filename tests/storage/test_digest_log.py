"""The tree's digest log (``DataTree.logZxidDigest``: what ``hash`` and ``/commands/hash``
print): every 128th zxid's tree digest, the last 1024 of them, nothing while a loaded fuzzy
snapshot's digest is not reached (ZooKeeper 3.8.0 answers ``hash`` from it; trizk had it
empty)."""

from __future__ import annotations

from trizk.jute import records as r
from trizk.jute.codes import OpCode
from trizk.storage.formats import snapshot, treeio
from trizk.storage.formats.txnlog import TxnEntry
from trizk.storage.tree.datatree import (
    DIGEST_LOG_INTERVAL,
    DIGEST_LOG_LIMIT,
    OPEN_ACL_UNSAFE,
    DataTree,
)
from trizk.storage.tree.replica import Replica


def _create(zxid: int, path: str) -> TxnEntry:
    hdr = r.TxnHeader(1, zxid, zxid, 1_700_000_000_000 + zxid, OpCode.CREATE)
    return TxnEntry(hdr, r.CreateTxn(path, b"x", OPEN_ACL_UNSAFE, False, zxid))


def test_every_128th_zxid_is_logged_with_the_digest_after_it() -> None:
    tree = DataTree()
    expected = []
    for z in range(1, 300):
        e = _create(z, f"/n{z}")
        tree.apply(e.header, e.txn)
        if z % DIGEST_LOG_INTERVAL == 0:
            expected.append((z, tree.digest))
    assert list(tree.digest_log) == expected and [z for z, _ in expected] == [128, 256]
    # an error txn counts too (ZooKeeper logs after every txn, whatever its result)
    e = _create(384, "/n1")  # NODEEXISTS
    assert tree.apply(e.header, e.txn).err
    assert tree.digest_log[-1] == (384, tree.digest)


def test_the_log_keeps_the_newest_1024() -> None:
    tree = DataTree()
    for k in range(1, DIGEST_LOG_LIMIT + 6):
        e = _create(k * DIGEST_LOG_INTERVAL, f"/n{k}")
        tree.apply(e.header, e.txn)
    assert len(tree.digest_log) == DIGEST_LOG_LIMIT
    assert tree.digest_log[0][0] == 6 * DIGEST_LOG_INTERVAL
    assert tree.digest_log[-1][0] == (DIGEST_LOG_LIMIT + 5) * DIGEST_LOG_INTERVAL


def test_replay_logs_nothing_until_the_snapshots_digest_zxid() -> None:
    # a fuzzy snapshot named 100 whose digest was taken at 260: txns 101..260 are replayed
    # over a tree that may already hold some of them; ZooKeeper compares at 260 and logs from
    # the next txn on (so 128 and 256 are missing, 384 is there)
    source = DataTree()
    for z in range(1, 261):
        e = _create(z, f"/n{z}")
        source.apply(e.header, e.txn)
    content = treeio.content_from_tree(source)
    assert content.digest == snapshot.SnapshotDigest(260, source.digest)
    tree = treeio.tree_from_snapshot(content, 100)
    assert tree.log_digests
    res = treeio.replay(
        Replica(tree, {}),
        [_create(z, f"/n{z}") for z in range(101, 400)],
        snapshot_digest=content.digest,
    )
    assert res.digest_mismatches == []
    assert [z for z, _ in tree.digest_log] == [384]
    # a snapshot whose digest is at or before its name compares at once: logging from the start
    tree = treeio.tree_from_snapshot(content, 260)
    treeio.replay(
        Replica(tree, {}),
        [_create(z, f"/n{z}") for z in range(261, 400)],
        snapshot_digest=content.digest,
    )
    assert [z for z, _ in tree.digest_log] == [384]
    tree = treeio.tree_from_snapshot(content, 260)
    e = _create(256 + 128 * 2, "/late")
    treeio.replay(Replica(tree, {}), [], snapshot_digest=content.digest)
    tree.apply(e.header, e.txn)
    assert [z for z, _ in tree.digest_log] == [512]


def test_killing_dead_sessions_at_load_logs_nothing() -> None:
    # ZooKeeperServer.loadData's "Clean up dead sessions" calls DataTree.killSession directly
    tree = DataTree()
    for z in range(1, 129):
        e = _create(z, f"/n{z}")
        tree.apply(e.header, e.txn)
    hdr = r.TxnHeader(7, 1, 129, 0, OpCode.CREATE)
    tree.apply(hdr, r.CreateTxn("/eph", b"", OPEN_ACL_UNSAFE, True, 129))
    hdr = r.TxnHeader(7, 2, 256, 0, OpCode.CREATE)
    tree.apply(hdr, r.CreateTxn("/eph2", b"", OPEN_ACL_UNSAFE, True, 130))
    before = list(tree.digest_log)
    assert [z for z, _ in before] == [128, 256]
    assert Replica(tree, {}).kill_dead_sessions() == [7]
    assert list(tree.digest_log) == before and tree.log_digests
