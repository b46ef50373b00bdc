"""Tree <-> snapshot, log replay and digests (storage/formats/treeio.py, prep's precalculated
digest),
and a simulated disk that loses what was not fsynced when the machine crashes.

Golden data: a data dir written by Apache ZooKeeper 3.8 (tests/data/zkdata/version-2),
whose txns carry ZooKeeper's own tree digests: replaying it must reproduce every one.
"""

from __future__ import annotations

import random
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import seeds
from tests.seeds import examples
from trizk.jute import records as r
from trizk.jute.codes import Code, CreateMode, OpCode
from trizk.jute.records import QuorumPacket
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    SnapshotPayload,
    encode_snapshot_payload,
)
from trizk.server.writes.prep import (
    PendingChanges,
    PrepContext,
    PrepError,
    prep_close_session,
    prep_create,
    prep_delete,
    prep_multi,
    prep_set_acl,
    prep_set_data,
)
from trizk.storage.disk import files
from trizk.storage.formats import snapshot, treeio, txnlog
from trizk.storage.formats.txnlog import TxnEntry
from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE, DataTree, node_digest
from trizk.storage.tree.replica import Replica

V2 = Path(__file__).parents[1] / "data" / "zkdata" / "version-2"

READ_ONLY = (r.ACL(1, r.Id("world", "anyone")),)
RW = (r.ACL(3, r.Id("world", "anyone")),)
ACLS = (OPEN_ACL_UNSAFE, READ_ONLY, RW)


def golden_entries() -> list[TxnEntry]:
    out: list[TxnEntry] = []
    for _, path in files.list_logs(V2):
        entries, stop = txnlog.scan(path.read_bytes())
        assert stop.reason.clean
        out += [e.entry for e in entries]
    return out


def full_digest(tree: DataTree) -> int:
    """The tree digest computed from scratch, by the snapshot module's own formula."""
    return snapshot.tree_digest((p, n.data, n.stat_persisted()) for p, n in tree.iter_nodes())


# ------------------------------------------------------------------------------ golden


def test_replaying_zookeepers_log_reproduces_every_logged_digest() -> None:
    c0 = snapshot.parse((V2 / "snapshot.0").read_bytes())
    tree = treeio.tree_from_snapshot(c0, 0, extended_types=True)
    sessions: dict[int, int] = {}
    entries = golden_entries()
    assert sum(1 for e in entries if e.digest is not None) == len(entries) == 70
    res = treeio.replay(Replica(tree, sessions), entries, snapshot_digest=c0.digest)
    assert res.applied == 70 and res.last_zxid == 70
    assert res.digest_checked == 70 and res.digest_mismatches == []
    assert tree.digest == full_digest(tree)
    # session c (left open by the scenario) is the only one still alive
    assert list(sessions.values()) == [30000]


def test_snapshot_plus_replay_equals_full_replay() -> None:
    rec = files.recover(V2, truncate=False)
    assert rec.snapshot is not None and rec.snapshot_zxid == 0x23
    tree = treeio.tree_from_snapshot(rec.snapshot, rec.snapshot_zxid, extended_types=True)
    assert tree.last_processed_zxid == 0x23
    sessions = dict(rec.snapshot.sessions)
    res = treeio.replay(Replica(tree, sessions), rec.txns, snapshot_digest=rec.snapshot.digest)
    assert res.digest_mismatches == [] and res.digest_checked == len(rec.txns) + 1

    c0 = snapshot.parse((V2 / "snapshot.0").read_bytes())
    full = treeio.tree_from_snapshot(c0, 0, extended_types=True)
    full_sessions: dict[int, int] = {}
    treeio.replay(Replica(full, full_sessions), golden_entries())
    assert treeio.canonical(tree) == treeio.canonical(full)
    assert sessions == full_sessions
    assert tree.ephemerals.keys() == full.ephemerals.keys()
    assert tree.containers == full.containers and tree.ttls == full.ttls


def test_our_snapshot_of_zookeepers_tree_loads_to_the_same_tree() -> None:
    raw = (V2 / "snapshot.23").read_bytes()
    c = snapshot.parse(raw)
    tree = treeio.tree_from_snapshot(c, 0x23, extended_types=True)
    ours = treeio.content_from_tree(tree, c.sessions)
    # same nodes in the same (HashSet) order, same sessions and digest; ACL refs may differ
    assert [n.path for n in ours.nodes] == [n.path for n in c.nodes]
    assert ours.sessions == c.sessions
    assert ours.digest == c.digest
    again = treeio.tree_from_snapshot(ours, 0x23, extended_types=True)
    assert treeio.canonical(again) == treeio.canonical(tree)
    # and our writer's bytes are exactly what snapshot.serialize makes of the same content
    assert snapshot.serialize(ours) == b"".join(_walk(tree, c.sessions).finish())


def _walk(tree: DataTree, sessions: dict[int, int], step: int = 3) -> treeio.FuzzySnapshot:
    fs = treeio.FuzzySnapshot(tree, sessions)
    while not fs.step(step):
        pass
    return fs


def test_fresh_tree_snapshot_matches_zookeepers_snapshot_0_tree() -> None:
    ours = treeio.content_from_tree(DataTree())
    zk = snapshot.initial_content()
    assert [(n.path, n.data, n.stat) for n in ours.nodes] == [
        (n.path, n.data, n.stat) for n in zk.nodes
    ]
    assert ours.acls == zk.acls  # /zookeeper/config's READ_ACL_UNSAFE is ref 1, as in ZooKeeper
    assert DataTree().digest == zk.tree_digest()


def test_node_digest_matches_snapshot_module() -> None:
    c = snapshot.parse((V2 / "snapshot.23").read_bytes())
    tree = treeio.tree_from_snapshot(c, 0x23, extended_types=True)
    for path, node in tree.iter_nodes():
        assert node_digest(path, node) == snapshot.node_digest(
            path, node.data, node.stat_persisted()
        )


def test_snapshot_load_errors() -> None:
    c = snapshot.initial_content()
    orphan = snapshot.SnapNode("/a/b", b"", -1, c.nodes[0].stat)
    with pytest.raises(treeio.SnapshotLoadError, match="parent"):
        treeio.tree_from_snapshot(
            snapshot.SnapshotContent(c.sessions, c.acls, [*c.nodes, orphan]), 0
        )
    bad_ref = snapshot.SnapNode("/a", b"", 99, c.nodes[0].stat)
    with pytest.raises(treeio.SnapshotLoadError, match="ACL ref 99"):
        treeio.tree_from_snapshot(
            snapshot.SnapshotContent(c.sessions, c.acls, [*c.nodes, bad_ref]), 0
        )


def _same_tree(a: DataTree, b: DataTree, loaded: bool = True) -> None:
    """Equal nodes, children in the same (HashSet) order, same digest; for two trees
    ``loaded`` from the same snapshot, the same node map and owner indexes (in order)."""
    assert treeio.canonical(a) == treeio.canonical(b)
    for path, node in a.iter_nodes():
        assert node.child_names() == b.nodes[path].child_names(), path
    assert a.digest == b.digest == full_digest(a)
    if not loaded:
        return
    assert list(a.nodes) == list(b.nodes)
    assert {k: list(v) for k, v in a.ephemerals.items()} == {
        k: list(v) for k, v in b.ephemerals.items()
    }
    assert a.containers == b.containers and a.ttls == b.ttls
    assert a.approximate_data_size() == b.approximate_data_size()
    assert a.last_processed_zxid == b.last_processed_zxid


def test_raw_nodes_load_zookeepers_snapshot_as_records_do() -> None:
    raw = (V2 / "snapshot.23").read_bytes()
    c = snapshot.parse(raw)
    lazy = snapshot.parse(raw, raw_nodes=True)
    assert lazy.nodes == [] and lazy.node_count == len(c.nodes)
    assert lazy == snapshot.SnapshotContent(c.sessions, c.acls, [], c.digest, c.dbid)
    _same_tree(
        treeio.tree_from_snapshot(lazy, 0x23, extended_types=True),
        treeio.tree_from_snapshot(c, 0x23, extended_types=True),
    )


def test_raw_nodes_load_errors() -> None:
    c = snapshot.initial_content()
    for extra, match in (
        (snapshot.SnapNode("/a/b", b"", -1, c.nodes[0].stat), "parent"),
        (snapshot.SnapNode("/a", b"", 99, c.nodes[0].stat), "ACL ref 99"),
    ):
        raw = snapshot.serialize(snapshot.SnapshotContent(c.sessions, c.acls, [*c.nodes, extra]))
        with pytest.raises(treeio.SnapshotLoadError, match=match):
            treeio.tree_from_snapshot(snapshot.parse(raw, raw_nodes=True), 0)
    no_root = snapshot.SnapshotContent(c.sessions, c.acls, [])
    with pytest.raises(treeio.SnapshotLoadError, match="no root"):
        treeio.tree_from_snapshot(snapshot.parse(snapshot.serialize(no_root), raw_nodes=True), 0)


def test_raw_nodes_digest_non_ascii_and_invalid_utf8_paths() -> None:
    """The loader hashes a node's path from its bytes as they came only when they are its
    UTF-8: a path with non-ASCII characters, or with bytes that are not UTF-8 (decoded with
    replacement characters, as Java's readString does, and hashed as their re-encoding),
    gets the digest the records path and the snapshot module's formula give."""
    c = snapshot.initial_content()
    st0 = c.nodes[0].stat
    extra = [
        snapshot.SnapNode("/\u00e9t\u00e9", b"a", -1, st0),
        snapshot.SnapNode("/\U0001f600", None, -1, st0),
        snapshot.SnapNode("/xx", b"b", -1, st0),
    ]
    raw = snapshot.serialize(snapshot.SnapshotContent(c.sessions, c.acls, [*c.nodes, *extra]))
    # the body (no seal to check): "/xx" becomes two bytes that are no UTF-8
    body = raw[16 : snapshot.parse(raw, raw_nodes=True).nodes_end + len(snapshot.NODES_END)]
    body = body.replace(b"\x00\x00\x00\x03/xx", b"\x00\x00\x00\x03/\xff\xfe", 1)
    records = treeio.tree_from_snapshot(snapshot.parse_body(body), 0)
    assert "/\ufffd\ufffd" in records.nodes
    fast = treeio.tree_from_snapshot(snapshot.parse_body(body, raw_nodes=True), 0)
    _same_tree(fast, records)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 150), wide=st.integers(0, 120))
def test_raw_nodes_load_equals_records_load(seed: int, steps: int, wide: int) -> None:
    """The loader's fast path (nodes decoded straight from the snapshot's bytes) builds the
    tree the records path builds: from a random workload's snapshot (ephemerals, containers,
    TTLs, ACLs, null data, sessions) with one parent of ``wide`` children (the presized
    children table past 48), node for node, children in the same order, same digest."""
    rnd = random.Random(seed)
    w = Workload()
    for _ in range(steps):
        w.request(rnd)
        w.commit(len(w.prepared))
    for i in range(wide):
        w.tree.apply(
            r.TxnHeader(0, 0, w.tree.last_processed_zxid + 1, 0, OpCode.CREATE),
            r.CreateTxn(
                f"/w{seed % 7}/k{rnd.randrange(1 << 20)}{i}", b"", OPEN_ACL_UNSAFE, False, -1
            )
            if i
            else r.CreateTxn(f"/w{seed % 7}", None, OPEN_ACL_UNSAFE, False, -1),
        )
    raw = b"".join(_walk(w.tree, w.sessions, 7).finish())
    zxid = w.tree.last_processed_zxid
    records = snapshot.parse(raw)
    lazy = snapshot.parse(raw, raw_nodes=True)
    assert lazy.node_count == len(records.nodes) and lazy.sessions == records.sessions
    fast = treeio.tree_from_snapshot(lazy, zxid, extended_types=True)
    _same_tree(fast, treeio.tree_from_snapshot(records, zxid, extended_types=True))
    # the tree it was taken from: the same content, though not always the same child order --
    # a children table that once grew past its threshold keeps its size (DataNode's
    # HashSet(8) never shrinks), a reloaded one is sized for what it holds, in ZooKeeper too
    assert treeio.canonical(fast) == treeio.canonical(w.tree)
    assert fast.digest == w.tree.digest == full_digest(fast)
    # and a SNAP body round-trips through the same path
    body = treeio.snapshot_body(Replica(fast, w.sessions))
    again = treeio.replica_from_snapshot_body(body, zxid, extended_types=True)
    # (walked in its own child order, which need not be the snapshot's: see above)
    _same_tree(again.tree, fast, loaded=False)
    assert again.sessions == w.sessions


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    steps=st.integers(1, 120),
    wide=st.integers(0, 80),
    twice=st.integers(0, 3),
)
def test_nodes_out_of_walk_order_load_as_records_do(
    seed: int, steps: int, wide: int, twice: int
) -> None:
    """The loader builds each parent's children table as the walk leaves its subtree (nodes
    come in pre-order); nodes in any other order that keeps parents first (a node of a
    parent already closed), and ``twice`` paths written twice, build the tree the records
    path builds (each parent's names added in snapshot order), from a file and from a SNAP
    body fed in pieces, digest and sizes included."""
    rnd = random.Random(seed)
    w = _wide_workload(seed, steps, wide)
    zxid = w.tree.last_processed_zxid
    walked = snapshot.parse(b"".join(_walk(w.tree, w.sessions, 7).finish()))
    # a random order with every parent before its children
    waiting = {n.path: n for n in walked.nodes[1:]}
    placed = {""}
    order = [walked.nodes[0]]
    while waiting:
        ready = [p for p in waiting if p[: p.rfind("/")] in placed]
        pick = waiting.pop(rnd.choice(ready))
        placed.add(pick.path)
        order.append(pick)
    for _ in range(twice):  # a path again, somewhere after its first place
        i = rnd.randrange(1, len(order))
        order.insert(rnd.randrange(i + 1, len(order) + 1), order[i])
    content = snapshot.SnapshotContent(walked.sessions, walked.acls, order, walked.digest)
    raw = snapshot.serialize(content)
    records = treeio.tree_from_snapshot(snapshot.parse(raw), zxid, extended_types=True)
    lazy = snapshot.parse(raw, raw_nodes=True)
    fast = treeio.tree_from_snapshot(lazy, zxid, extended_types=True)
    _same_tree(fast, records)
    if not twice:
        assert treeio.canonical(fast) == treeio.canonical(w.tree)
    body = raw[16 : lazy.nodes_end + len(snapshot.NODES_END)]
    payload = _decode_snap(body, rnd.choice([1, 50, 4096]))
    assert isinstance(payload.built, treeio.SnapshotBuilder)
    _same_tree(payload.built.finish(payload.body, zxid).replica.tree, records)


def _wide_workload(seed: int, steps: int, wide: int) -> Workload:
    """A random workload of ``steps`` committed requests, then ``/w`` (read-only ACL, null
    data) with ``wide`` children."""
    rnd = random.Random(seed)
    w = Workload()
    for _ in range(steps):
        w.request(rnd)
        w.commit(len(w.prepared))
    for i in range(wide):
        w.tree.apply(
            r.TxnHeader(0, 0, w.tree.last_processed_zxid + 1, 0, OpCode.CREATE),
            r.CreateTxn(f"/w/k{rnd.randrange(1 << 20)}{i}", b"d", RW, False, -1)
            if i
            else r.CreateTxn("/w", None, READ_ONLY, False, -1),
        )
    return w


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 120), wide=st.integers(0, 80))
def test_learner_snapshot_from_the_snap_body(seed: int, steps: int, wide: int) -> None:
    """A learner's snapshot at NEWLEADER written from the SNAP's bytes
    (``received_snapshot_parts``) is the file a walk of its tree writes: byte for byte when
    the leader's tree was itself loaded (the same child order), with ``/zookeeper/config``
    as the learner set it after the load (``initConfigInZKDatabase``), the tree's digest and
    3.9's last-zxid trailer; and none once a txn changed the tree."""
    w = _wide_workload(seed, steps, wide)
    zxid = w.tree.last_processed_zxid
    raw = b"".join(_walk(w.tree, w.sessions, 7).finish())
    leader = treeio.tree_from_snapshot(
        snapshot.parse(raw, raw_nodes=True), zxid, extended_types=True
    )
    body = treeio.snapshot_body(Replica(leader, w.sessions))
    got = treeio.load_snapshot_body(body, zxid, extended_types=True)
    tree = got.replica.tree
    _same_tree(tree, leader, loaded=False)
    tree.set_config(b"server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181", 1234, 1 << 32)
    for digest, last in ((True, False), (True, True), (False, False)):
        parts = treeio.received_snapshot_parts(got, digest=digest, last_zxid=last)
        assert parts is not None
        fs = treeio.FuzzySnapshot(tree, got.replica.sessions, digest=digest, last_zxid=last)
        while not fs.step(1 << 20):
            pass
        assert b"".join(parts) == b"".join(fs.finish())
    content = snapshot.parse(b"".join(parts))
    assert content.sessions == w.sessions
    again = treeio.tree_from_snapshot(content, zxid, extended_types=True)
    assert treeio.canonical(again) == treeio.canonical(tree)
    # a txn applied since: the body is no longer the tree
    tree.apply(
        r.TxnHeader(0, 0, zxid + 1, 0, OpCode.CREATE),
        r.CreateTxn("/after", b"", OPEN_ACL_UNSAFE, False, -1),
    )
    assert treeio.received_snapshot_parts(got) is None


def _streamed_body(tree: DataTree, sessions: dict[int, int], step: int) -> bytes:
    """A SNAP body as a streaming leader sends it: head first, then the walk's pieces."""
    fs = treeio.FuzzySnapshot(tree, sessions, digest=False)
    pieces = [fs.body_head()]
    while not fs.step(step):
        pieces += fs.take_chunks()
    pieces += fs.take_chunks()
    return b"".join([*pieces, snapshot.NODES_END])


def _decode_snap(body: bytes, chunk: int) -> SnapshotPayload:
    """The body after a SNAP packet through a learner's decoder (a tree builder as its
    sink), fed ``chunk`` bytes at a time."""
    data = QuorumPacket(int(PacketType.SNAP), 1, None, None).encode()
    data += encode_snapshot_payload(body)
    dec = QuorumStreamDecoder(
        snapshot_sink=lambda: treeio.SnapshotBuilder(extended_types=True), max_length=1 << 20
    )
    events = []
    for i in range(0, len(data), chunk):
        dec.feed(data[i : i + chunk])
        while (ev := dec.next_event()) is not None:
            events.append(ev)
    assert len(events) == 2 and isinstance(events[1], SnapshotPayload)
    return events[1]


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    steps=st.integers(1, 120),
    wide=st.integers(0, 80),
    chunk=st.sampled_from([1, 7, 200, 4096, 1 << 20]),
    walk=st.integers(1, 50),
)
def test_streamed_snap_is_built_as_it_comes(
    seed: int, steps: int, wide: int, chunk: int, walk: int
) -> None:
    """A leader's SNAP body streamed as it is walked (ACL cache first) describes its tree,
    and a learner that builds its tree from the pieces as they arrive (whatever their
    size) gets the replica, config node span and NEWLEADER snapshot file that loading the
    whole body gives."""
    w = _wide_workload(seed, steps, wide)
    zxid = w.tree.last_processed_zxid
    body = _streamed_body(w.tree, w.sessions, walk)
    whole = treeio.load_snapshot_body(body, zxid, extended_types=True)
    assert treeio.canonical(whole.replica.tree) == treeio.canonical(w.tree)
    assert whole.replica.sessions == w.sessions
    payload = _decode_snap(body, chunk)
    assert payload.body == body
    assert isinstance(payload.built, treeio.SnapshotBuilder) and payload.built.error is None
    built = payload.built.finish(payload.body, zxid)
    _same_tree(built.replica.tree, whole.replica.tree)
    assert built.replica.sessions == whole.replica.sessions
    assert built.config_span == whole.config_span is not None
    assert treeio.received_snapshot_parts(built, last_zxid=True) == (
        treeio.received_snapshot_parts(whole, last_zxid=True)
    )


def test_a_bad_streamed_snap_is_reported_when_loaded_whole() -> None:
    """A payload whose node names an ACL ref not in its cache is a valid stream: the builder
    keeps the error (the decoder goes on) and loading the whole body reports it."""
    body = _streamed_body(DataTree(), {}, 2)
    bad = body.replace(struct.pack(">q", -1), struct.pack(">q", 77), 1)
    payload = _decode_snap(bad, 3)
    assert isinstance(payload.built, treeio.SnapshotBuilder)
    assert isinstance(payload.built.error, treeio.SnapshotLoadError)
    with pytest.raises(treeio.SnapshotLoadError, match="ACL ref 77"):
        payload.built.finish(payload.body, 1)
    with pytest.raises(treeio.SnapshotLoadError, match="ACL ref 77"):
        treeio.load_snapshot_body(payload.body, 1)


def _fresh_acl_request(w: Workload, rnd: random.Random, n: int) -> None:
    """A create or setACL with an ACL no node had before (the head's cache lacks it)."""
    if not w.live:
        w.request(rnd)  # a session first
        return
    sid = rnd.choice(w.live)
    ctx = w._ctx(sid)
    acl = (r.ACL(31, r.Id("digest", f"user{n}:x")),)
    path = rnd.choice(["/a", "/b", "/a/x", "/c", "/a/x/q", "/"])
    try:
        if rnd.random() < 0.5:
            typ, txn = prep_set_acl(OpCode.SETACL, r.SetACLRequest(path, acl, -1), w.pv, ctx)
        else:
            req = r.CreateRequest(path, b"n", acl, rnd.choice([0, 1]))
            typ, txn = prep_create(OpCode.CREATE2, req, w.pv, ctx)
    except PrepError as e:
        typ, txn = OpCode.ERROR, r.ErrorTxn(e.code)
    w._submit(sid, typ, txn, ctx)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(4, 150), step=st.integers(1, 4))
def test_a_streamed_snap_walked_while_txns_apply_plus_their_replay_is_exact(
    seed: int, steps: int, step: int
) -> None:
    """A leader's SNAP body streamed across its pump's passes: the head (sessions, ACL cache)
    at the SNAP's zxid, then the walk in small steps while txns keep applying (new ACLs too:
    nodes created with one are left to their create, older nodes given one by setACL get a
    stand-in ref). A learner that builds its tree from the body as it arrives and applies
    every txn after the SNAP's zxid, as its leader queues them behind the body, ends with the
    leader's tree and sessions; every ref it meets is in the cache it was sent."""
    rnd = random.Random(seed)
    w = Workload()
    for _ in range(steps // 2):
        w.request(rnd)
        w.commit(len(w.prepared))
    fs = treeio.FuzzySnapshot(w.tree, w.sessions, digest=False)
    start = fs.zxid
    pieces = [fs.body_head()]
    fresh = 0
    while not fs.step(step):
        pieces += fs.take_chunks()
        for _ in range(rnd.randrange(4)):
            if rnd.random() < 0.3:
                fresh += 1
                _fresh_acl_request(w, rnd, fresh)
            else:
                w.request(rnd)
            w.commit(len(w.prepared))
    pieces += fs.take_chunks()
    body = b"".join([*pieces, snapshot.NODES_END])
    payload = _decode_snap(body, 4096)
    assert isinstance(payload.built, treeio.SnapshotBuilder) and payload.built.error is None
    built = payload.built.finish(payload.body, start)
    replica = built.replica
    for t in w.log:
        if t.hdr.zxid > start and t not in w.prepared:
            replica.apply(t.hdr, t.txn)
    assert treeio.canonical(replica.tree) == treeio.canonical(w.tree)
    assert replica.sessions == w.sessions
    assert replica.tree.digest == w.tree.digest


def test_a_node_given_an_acl_during_the_walk_gets_a_stand_in_until_its_replay() -> None:
    tree = DataTree()
    old = (r.ACL(1, r.Id("world", "anyone")),)
    new = (r.ACL(31, r.Id("digest", "u:x")),)
    tree.apply(r.TxnHeader(0, 0, 1, 0, OpCode.CREATE), r.CreateTxn("/a", b"", old, False, -1))
    fs = treeio.FuzzySnapshot(tree, {}, digest=False)
    head = fs.body_head()
    tree.apply(r.TxnHeader(0, 0, 2, 0, OpCode.SETACL), r.SetACLTxn("/a", new, 1))
    tree.apply(r.TxnHeader(0, 0, 3, 0, OpCode.CREATE), r.CreateTxn("/b", b"", new, False, -1))
    while not fs.step(1):
        pass
    body = b"".join([head, *fs.take_chunks(), snapshot.NODES_END])
    loaded = treeio.load_snapshot_body(body, 1).replica.tree
    assert loaded.nodes["/a"].acl == old  # the cache's only ACL, until setACL 2 is replayed
    assert loaded.nodes["/a"].aversion == 1
    assert "/b" not in loaded.nodes  # created after the head: create 3 makes it


def test_kill_dead_sessions_drops_orphan_ephemerals() -> None:
    tree = DataTree()
    tree.apply(
        r.TxnHeader(7, 0, 1, 0, OpCode.CREATE), r.CreateTxn("/e", b"", OPEN_ACL_UNSAFE, True, -1)
    )
    tree.apply(
        r.TxnHeader(8, 0, 2, 0, OpCode.CREATE), r.CreateTxn("/f", b"", OPEN_ACL_UNSAFE, True, -1)
    )
    assert Replica(tree, {8: 4000}).kill_dead_sessions() == [7]
    assert tree.get("/e") is None and tree.get("/f") is not None
    assert tree.digest == full_digest(tree)


# ------------------------------------------------------------------------------ workload


@dataclass
class Txn:
    hdr: r.TxnHeader
    txn: r.Record | None
    digest: int

    def entry(self) -> TxnEntry:
        return TxnEntry(self.hdr, self.txn, txnlog.make_digest(self.digest))


@dataclass
class Workload:
    """Requests -> prep (against the pending view) -> txns; commit applies the oldest ones.

    The same split as the server: prep never touches the tree, commit applies in zxid order.
    """

    tree: DataTree = field(default_factory=lambda: DataTree(extended_types=True))
    sessions: dict[int, int] = field(default_factory=dict)
    prepared: list[Txn] = field(default_factory=list)  # not yet applied
    log: list[Txn] = field(default_factory=list)  # every txn ever prepared, in zxid order
    time: int = 1_700_000_000_000

    def __post_init__(self) -> None:
        self.pv = PendingChanges(self.tree)
        self.zxid = self.tree.last_processed_zxid
        self.live: list[int] = []  # sessions created (prepared)

    def _ctx(self, sid: int) -> PrepContext:
        self.time += 1
        return PrepContext(sid, self.zxid + 1, self.time, [], extended_types=True)

    def _submit(self, sid: int, typ: int, txn: r.Record | None, ctx: PrepContext) -> Txn:
        self.zxid += 1
        t = Txn(r.TxnHeader(sid, 0, self.zxid, ctx.time, typ), txn, self.pv.digest)
        self.prepared.append(t)
        self.log.append(t)
        return t

    def request(self, rnd: random.Random) -> None:
        paths = ["/a", "/b", "/a/x", "/a/y", "/b/z", "/c", "/a/x/q"]
        kind = rnd.choice(
            ["create", "create", "create", "delete", "set", "acl", "multi", "session", "close"]
        )
        if kind == "session" or not self.live:
            sid = 0x100 + self.zxid
            self.live.append(sid)
            ctx = self._ctx(sid)
            self._submit(sid, OpCode.CREATESESSION, r.CreateSessionTxn(4000 + sid % 7), ctx)
            return
        sid = rnd.choice(self.live)
        ctx = self._ctx(sid)
        if kind == "close":
            self.live.remove(sid)
            typ, txn = prep_close_session(self.pv, ctx)
            self._submit(sid, typ, txn, ctx)
            return
        path = rnd.choice(paths)
        try:
            if kind == "create":
                mode = rnd.choice(
                    [
                        CreateMode.PERSISTENT,
                        CreateMode.EPHEMERAL,
                        CreateMode.PERSISTENT_SEQUENTIAL,
                        CreateMode.EPHEMERAL_SEQUENTIAL,
                        CreateMode.CONTAINER,
                        CreateMode.PERSISTENT_WITH_TTL,
                    ]
                )
                data = rnd.choice([None, b"", b"d", bytes(rnd.randrange(200))])
                acl = rnd.choice(ACLS)
                if mode == CreateMode.PERSISTENT_WITH_TTL:
                    op = OpCode.CREATETTL
                    req: r.Record = r.CreateTTLRequest(path, data, acl, mode, 1000)
                else:
                    op = OpCode.CREATECONTAINER if mode == CreateMode.CONTAINER else OpCode.CREATE2
                    req = r.CreateRequest(path, data, acl, mode)
                typ, txn = prep_create(op, req, self.pv, ctx)
            elif kind == "delete":
                typ, txn = prep_delete(OpCode.DELETE, r.DeleteRequest(path, -1), self.pv, ctx)
            elif kind == "set":
                req = r.SetDataRequest(rnd.choice([path, "/"]), bytes([rnd.randrange(256)]), -1)
                typ, txn = prep_set_data(OpCode.SETDATA, req, self.pv, ctx)
            elif kind == "acl":
                req = r.SetACLRequest(rnd.choice([path, "/"]), rnd.choice(ACLS), -1)
                typ, txn = prep_set_acl(OpCode.SETACL, req, self.pv, ctx)
            else:
                ops: list[tuple[int, r.Record]] = []
                for _ in range(rnd.randrange(1, 4)):
                    p = rnd.choice(paths)
                    c = rnd.randrange(3)
                    if c == 0:
                        ops.append((OpCode.CREATE, r.CreateRequest(p, b"m", OPEN_ACL_UNSAFE, 0)))
                    elif c == 1:
                        ops.append((OpCode.DELETE, r.DeleteRequest(p, -1)))
                    else:
                        ops.append((OpCode.SETDATA, r.SetDataRequest(p, b"s", -1)))
                multi, _ = prep_multi(ops, self.pv, ctx)
                typ, txn = OpCode.MULTI, multi
        except PrepError as e:
            typ, txn = OpCode.ERROR, r.ErrorTxn(e.code)
        self._submit(sid, typ, txn, ctx)

    def commit(self, n: int) -> list[Txn]:
        batch, self.prepared = self.prepared[:n], self.prepared[n:]
        for t in batch:
            self.tree.apply(t.hdr, t.txn)
            if t.hdr.type == OpCode.CREATESESSION:
                assert isinstance(t.txn, r.CreateSessionTxn)
                self.sessions[t.hdr.clientId] = t.txn.timeOut
            elif t.hdr.type == OpCode.CLOSESESSION:
                self.sessions.pop(t.hdr.clientId, None)
            self.pv.committed(t.hdr.zxid)
            assert self.tree.digest == snapshot.to_java_long(t.digest), t
        return batch


def reference(log: list[Txn], count: int) -> tuple[DataTree, dict[int, int]]:
    """The tree and sessions after applying the first ``count`` txns to a fresh tree."""
    tree = DataTree(extended_types=True)
    sessions: dict[int, int] = {}
    treeio.replay(Replica(tree, sessions), [t.entry() for t in log[:count]])
    return tree, sessions


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 120))
def test_prep_digest_equals_tree_digest_equals_full_recompute(seed: int, steps: int) -> None:
    """Pipelined prep (up to a few txns ahead of the tree) predicts every txn's digest: the
    tree after applying it has exactly that digest, which is also the from-scratch sum."""
    rnd = random.Random(seed)
    w = Workload()
    for _ in range(steps):
        w.request(rnd)
        if rnd.random() < 0.4:
            w.commit(rnd.randrange(len(w.prepared) + 1))
    w.commit(len(w.prepared))
    assert w.pv.digest_mismatches == 0
    assert w.tree.digest == full_digest(w.tree) == w.pv.digest
    # replay of the log on a fresh tree gives the same tree, checking every logged digest
    tree, sessions = reference(w.log, len(w.log))
    res = treeio.replay(Replica(DataTree(extended_types=True), {}), [t.entry() for t in w.log])
    assert res.digest_mismatches == []
    assert treeio.canonical(tree) == treeio.canonical(w.tree)
    assert sessions == w.sessions


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(20, 150), step=st.integers(1, 5))
def test_fuzzy_snapshot_plus_replay_is_exact(seed: int, steps: int, step: int) -> None:
    """A snapshot walked in small steps while txns keep applying, then loaded and the txns
    after its zxid replayed, gives the live tree (and all digests check out)."""
    rnd = random.Random(seed)
    w = Workload()
    for _ in range(steps // 2):
        w.request(rnd)
        w.commit(len(w.prepared))
    fs = treeio.FuzzySnapshot(w.tree, w.sessions)
    start = fs.zxid
    while not fs.step(step):
        for _ in range(rnd.randrange(3)):
            w.request(rnd)
            w.commit(len(w.prepared))
    for _ in range(steps // 2):
        w.request(rnd)
        w.commit(len(w.prepared))
    content = snapshot.parse(b"".join(fs.finish()))
    tree = treeio.tree_from_snapshot(content, start, extended_types=True)
    sessions = dict(content.sessions)
    later = [t.entry() for t in w.log if t.hdr.zxid > start]
    res = treeio.replay(Replica(tree, sessions), later, snapshot_digest=content.digest)
    assert res.digest_mismatches == []
    assert treeio.canonical(tree) == treeio.canonical(w.tree)
    assert sessions == w.sessions
    assert tree.digest == w.tree.digest


def test_failed_multi_carries_the_unchanged_digest() -> None:
    w = Workload()
    rnd = random.Random(1)
    w.request(rnd)  # a session
    w.commit(1)
    sid = w.live[0]
    ctx = w._ctx(sid)
    before = w.pv.digest
    multi, failure = prep_multi(
        [
            (OpCode.CREATE, r.CreateRequest("/ok", b"", OPEN_ACL_UNSAFE, 0)),
            (OpCode.DELETE, r.DeleteRequest("/missing", -1)),
        ],
        w.pv,
        ctx,
    )
    assert failure == Code.NONODE and w.pv.digest == before
    w._submit(sid, OpCode.MULTI, multi, ctx)
    w.commit(1)
    assert w.tree.get("/ok") is None and w.tree.digest == before


# ------------------------------------------------------------------------------ crash


class SimDisk:
    """What survives a crash: after every completed sync the files' bytes are recorded; a
    crash during the next sync keeps the last synced state plus an arbitrary prefix of what
    that sync was writing (the rest is lost or garbage), and may lose a file it created."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.synced: dict[str, bytes] = {}

    def state(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in self.root.iterdir() if p.is_file()}

    def mark_synced(self) -> None:
        self.synced = self.state()

    def crash(self, rnd: random.Random, target: Path) -> None:
        """Materialise a possible post-crash disk in ``target``, the crash hitting the sync
        in progress now (whose writes are in the live files)."""
        target.mkdir(parents=True)
        now = self.state()
        for name, data in now.items():
            old = self.synced.get(name)
            if old is None:
                if rnd.random() < 0.3:
                    continue  # never reached the disk
                old = b""
            same = 0
            while same < min(len(old), len(data)) and old[same] == data[same]:
                same += 1
            cut = rnd.randrange(same, len(data) + 1)
            tail = len(data) - cut
            junk = bytes(tail) if rnd.random() < 0.5 else rnd.randbytes(tail)
            (target / name).write_bytes(data[:cut] + junk)


@pytest.mark.parametrize("seed", range(seeds.count("TRIZK_DISK_CRASH_SEEDS", 12)))
def test_simulated_disk_crash_keeps_every_acknowledged_txn(tmp_path: Path, seed: int) -> None:
    """Group commit against a disk that loses unsynced bytes: after a crash at any sync,
    recovery yields exactly the first j txns for some j >= the acknowledged count."""
    rnd = random.Random(seed)
    disk = tmp_path / "disk"
    snap_dir = disk / "version-2"
    snap_dir.mkdir(parents=True)
    files.write_snapshot(snap_dir, 0, snapshot.serialize(snapshot.initial_content()))
    writer = files.TxnLogWriter(snap_dir, prealloc_size=4096, force_sync=False)
    sim = SimDisk(snap_dir)
    sim.mark_synced()
    w = Workload()
    acked = 0
    crash_at = rnd.randrange(3, 40)
    for round_no in range(crash_at + 1):
        for _ in range(rnd.randrange(1, 8)):
            w.request(rnd)
        new = w.prepared
        writer.append(t.entry() for t in new)
        if rnd.random() < 0.15:
            writer.roll()
        writer.sync()
        if round_no == crash_at:
            break  # the machine dies during this sync: nothing of it was acknowledged
        sim.mark_synced()
        acked += len(w.commit(len(new)))
        if rnd.random() < 0.2:
            # a snapshot (fuzzy: txns commit while it is walked), written atomically
            writer.roll()
            fs = treeio.FuzzySnapshot(w.tree, w.sessions)
            while not fs.step(2):
                pass
            files.write_snapshot(snap_dir, fs.zxid, b"".join(fs.finish()))
            sim.mark_synced()
    writer.close()
    after = tmp_path / "after"
    sim.crash(rnd, after / "version-2")
    rec = files.recover(after / "version-2")
    assert rec.snapshot is not None
    tree = treeio.tree_from_snapshot(rec.snapshot, rec.snapshot_zxid, extended_types=True)
    sessions = dict(rec.snapshot.sessions)
    res = treeio.replay(Replica(tree, sessions), rec.txns, snapshot_digest=rec.snapshot.digest)
    assert res.digest_mismatches == []
    durable = tree.last_processed_zxid
    j = sum(1 for t in w.log if t.hdr.zxid <= durable)
    assert j >= acked, f"acknowledged {acked} txns, only {j} survived"
    ref_tree, ref_sessions = reference(w.log, j)
    assert treeio.canonical(tree) == treeio.canonical(ref_tree)
    assert sessions == ref_sessions
    # a second recovery of the (now truncated) directory finds the same state
    again = files.recover(after / "version-2")
    assert again.last_zxid == rec.last_zxid and again.truncated == []
    shutil.rmtree(tmp_path)
