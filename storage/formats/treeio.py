"""DataTree <-> snapshot, and log replay: the pure half of durability.

Theory
------
A data directory holds a *fuzzy* snapshot (``snapshot.<Z>``) and the txn logs. ``Z`` is the
last txn applied when serialisation *started*; txns kept applying while it ran, so a node in
the file may already show txns after ``Z`` and a node serialised early may miss them. The
log holds every txn after ``Z`` (the log is rolled before the snapshot starts and a txn is
durable before it is applied), so loading is: build the tree from the snapshot
(:func:`tree_from_snapshot`), then apply every logged txn with zxid > ``Z`` in order
(:func:`replay`). Every txn is idempotent over a state that already contains it or later
txns (``DataTree.apply``: a create of an existing node fails without touching the parent, a
delete of a missing node still moves the parent's pzxid up, set* overwrite, parent cversion and
pzxid only move forward), so the result is the tree as of the last logged txn.

Digests. The snapshot's digest section records (zxid, tree digest) when serialisation
*ended*. Until replay reaches that zxid the tree is fuzzy and no digest can be compared;
at that zxid the tree must match the snapshot's digest, and from then on after every txn
it must match the digest logged with that txn (``DataTree.compareDigest``). A mismatch is
reported, not fatal (ZooKeeper logs "Digests are not matching" and carries on).

Writing (:class:`FuzzySnapshot`) walks the live tree the way ``DataTree.serializeNode`` does:
pre-order from the root (path ``""`` on disk), a node's bytes and its list of children taken
together, children in ``HashSet`` order, so a parent always precedes its children. The walk is
done in steps (:meth:`FuzzySnapshot.step`) between which the caller may apply txns: a child
listed by its parent but deleted before its turn is skipped, a child created after its parent
was written is left to the replay. ACL lists get cache refs in order of first use as the walk
meets them (OPEN_ACL_UNSAFE is ref -1 and never stored), so the ACL section, which precedes
the nodes in the file, is only known once the walk is over: :meth:`FuzzySnapshot.finish`
assembles header, sessions, ACL cache, the node bytes, the seal and the digest section, and
(``last_zxid=True``, ZooKeeper 3.9's ``serializeLastProcessedZxid``) the last processed zxid.
The head and the seals are written by the snapshot grammar's own encoders (``encode_head``,
``seal`` in :mod:`trizk.storage.formats.snapshot`, which
:func:`~trizk.storage.formats.snapshot.serialize` uses too); a node is written here in the
layout of ``encode_node`` (path, data, then ACL ref and StatPersisted as one
:data:`~trizk.storage.formats.snapshot.NODE_TAIL`), straight from the node's fields, so the
bytes are exactly what ``serialize`` produces for the same content (the tests compare them).

Loading is the mirror image: ``snapshot.parse(..., raw_nodes=True)`` checks the Nodes section
by its lengths and :func:`tree_from_snapshot` decodes each node once from the bytes into its
DataNode, with no SnapNode or StatPersisted record in between; each parent's children go
into their HashSet table in one pass (``JavaHashSet.presized``). A learner's SNAP body is
read the same way, as it came (``snapshot.parse_body``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from trizk.jute import records as r
from trizk.storage.formats import snapshot as snap
from trizk.storage.formats.snapshot import (
    ZOOKEEPER_SUBTREE,
    SnapshotContent,
    SnapshotDigest,
    encoded_digest,
)
from trizk.storage.formats.txnlog import TxnEntry
from trizk.storage.tree.datatree import (
    CONFIG_NODE,
    OPEN_ACL_UNSAFE,
    DataNode,
    DataTree,
    EphemeralKind,
    ephemeral_kind,
)
from trizk.storage.tree.javahash import JavaHashSet
from trizk.storage.tree.replica import Replica

__all__ = [
    "FuzzySnapshot",
    "ReceivedSnapshot",
    "ReplayResult",
    "SnapshotBuilder",
    "SnapshotLoadError",
    "TreeChangedError",
    "canonical",
    "content_from_tree",
    "current_txn",
    "load_snapshot_body",
    "received_snapshot_parts",
    "replay",
    "replica_from_snapshot_body",
    "restore_from_stream",
    "snapshot_body",
    "tree_from_snapshot",
]

_INT: Final = struct.Struct(">i")
_LONG: Final = struct.Struct(">q")
_NULL_BUFFER: Final = b"\xff\xff\xff\xff"  # a null Jute buffer
_FILE_HEADER_SIZE = 16  # FileHeader: magic, version, dbid


class SnapshotLoadError(ValueError):
    """A snapshot that parses but does not describe a tree (orphan node, unknown ACL ref)."""


class TreeChangedError(ValueError):
    """A streamed SNAP body's tree changed under its walk in a way it cannot carry."""


# ----------------------------------------------------------------------------- load


def tree_from_snapshot(
    content: SnapshotContent,
    zxid: int,
    *,
    extended_types: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> DataTree:
    """Build a DataTree from a parsed snapshot named ``snapshot.<zxid>`` (DataTree.deserialize).

    ``last_processed_zxid`` becomes ``zxid`` (the name, as FileSnap.deserialize sets it) and
    the digest is computed from the nodes. ``progress(done, total)`` is called every 64k nodes.
    Content parsed with ``raw_nodes=True`` is decoded here, each node straight into its
    DataNode (:func:`_nodes_from_raw`); the tree is the same either way.
    """
    tree = DataTree(extended_types=extended_types)
    tree.nodes.clear()
    tree.ephemerals.clear()
    acls: dict[int, tuple[r.ACL, ...]] = {snap.OPEN_UNSAFE_ACL_REF: OPEN_ACL_UNSAFE}
    acls.update(content.acls)
    if content.raw is not None:
        return _nodes_from_raw(tree, content, acls, progress).finish(zxid)
    kids = _nodes_from_records(tree, content, acls, progress)
    return _finish_tree(tree, kids, zxid)


def _node(
    tree: DataTree,
    path: str,
    data: bytes | None,
    acl: tuple[r.ACL, ...],
    owner: int,
) -> DataNode:
    """A loaded node, filed by its owner (its stat fields are the caller's to set)."""
    kind = ephemeral_kind(owner, tree.extended_types) if owner else EphemeralKind.VOID
    node = DataNode(data, acl, 0, 0, owner, owner if kind == EphemeralKind.NORMAL else 0)
    if owner and path:
        tree.index_owner(path, owner, kind)
    return node


def _nodes_from_raw(
    tree: DataTree,
    content: SnapshotContent,
    acls: dict[int, tuple[r.ACL, ...]],
    progress: Callable[[int, int], None] | None,
) -> _NodeLoader:
    """Decode the Nodes section that ``snap.parse(..., raw_nodes=True)`` checked, each node
    straight into ``tree.nodes`` (:class:`_NodeLoader`); :meth:`_NodeLoader.finish` then
    completes the tree."""
    raw = content.raw
    assert raw is not None
    loader = _NodeLoader(tree, acls)
    loader.load(raw, content.nodes_start, content.nodes_end, 0, content.node_count, progress)
    return loader


#: no path: what the loader's "last node" and "innermost open parent" start as
_NO_PATH: Final = "\0"


class _NodeLoader:
    """Decodes whole nodes of a Nodes section (the layout: ``path:ustring data:buffer`` then
    :data:`~trizk.storage.formats.snapshot.NODE_TAIL`) straight into ``tree.nodes``, in one
    piece or in several (a SNAP as it arrives), and builds the rest of the tree as they come.

    A snapshot's nodes come in the pre-order of its walk (``DataTree.serializeNode``, and
    trizk's :class:`FuzzySnapshot`): a parent, then its children's subtrees one after the
    other. So the loader keeps the chain of *open* parents, the ancestors of the last node
    loaded, each with the names of its children so far in snapshot order; a node whose
    parent is the innermost open one (the usual case: a sibling of the last node) adds its
    name there, the first child of the last node opens that node, and a node elsewhere
    closes the open parents it is not under: their subtrees are over, so their children
    are all in and their tables are built at once, into the table a ``HashSet(8)`` ends at
    (``JavaHashSet.presized``). A node whose parent is no longer open (a snapshot not in
    pre-order: none ZooKeeper or trizk writes) finds it in the node map and is added to its
    table (``DataNode.addChild``), which is what adding the names one by one in snapshot
    order gives. Each node's digest (:func:`~trizk.storage.tree.datatree.node_digest`, from
    the path's bytes as they came) and approximate size are summed as it comes;
    :meth:`finish` closes the parents still open and sets the tree's digest and size from
    the sums (from a pass over the tree if a path came twice)."""

    def __init__(self, tree: DataTree, acls: dict[int, tuple[r.ACL, ...]]) -> None:
        self.tree = tree
        self.acls = acls
        self.count = 0
        #: where ``/zookeeper/config`` lies, as offsets from the start of what was loaded
        self.config_span: tuple[int, int] | None = None
        #: the sums of the nodes' digests and approximate sizes (the root counted as "/",
        #: as :meth:`DataTree.recompute_digest` and :meth:`DataTree.reset_data_size` count)
        self.digest_sum = 0
        self.data_size = 0
        # the open parents, outermost first: paths, nodes, their child names so far
        self._paths: list[str] = []
        self._parents: list[DataNode] = []
        self._names: list[list[str]] = []
        # the last node loaded (opened when the next node is its first child)
        self._last_path = _NO_PATH
        self._last: DataNode | None = None

    def load(
        self,
        raw: bytes,
        p: int,
        end: int,
        base: int = 0,
        total: int = 0,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """The nodes of ``raw[p:end]`` (whole ones, lengths checked); ``base`` is the offset
        of ``raw`` in the section's stream (for :attr:`config_span`)."""
        tree = self.tree
        nodes = tree.nodes
        acls = self.acls
        unpack = _INT.unpack_from
        tail = snap.NODE_TAIL.unpack_from
        tail_size = snap.NODE_TAIL_SIZE
        paths = self._paths
        names = self._names
        # the innermost open parent's path and child names (None: no parent is open)
        top_path = paths[-1] if paths else _NO_PATH
        top_names = names[-1] if names else None
        last_path = self._last_path
        last = self._last
        dsum = self.digest_sum
        size = self.data_size
        i = self.count
        while p < end:
            start = p
            (n,) = unpack(raw, p)
            p += 4
            encoded = raw[p : p + n]
            path = encoded.decode("utf-8", "replace")
            p += n
            (n,) = unpack(raw, p)
            p += 4
            data: bytes | None = None
            if n >= 0:
                data = raw[p : p + n]
                p += n
                size += n
            (ref, czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid) = tail(
                raw, p
            )
            p += tail_size
            acl = acls.get(ref)
            if acl is None:
                raise SnapshotLoadError(f"node {path or '/'}: ACL ref {ref} is not in the cache")
            node = _node(tree, path, data, acl, owner)
            node.czxid = czxid
            node.mzxid = mzxid
            node.pzxid = pzxid
            node.ctime = ctime
            node.mtime = mtime
            node.version = version
            node.cversion = cversion
            node.aversion = aversion
            if path == "":
                nodes[""] = nodes["/"] = node
                size += 1  # counted as "/"
            else:
                k = path.rfind("/")
                if top_names is not None and k == len(top_path) and path.startswith(top_path):
                    top_names.append(path[k + 1 :])  # a sibling of the last node
                elif k == len(last_path) and path.startswith(last_path) and last is not None:
                    # the last node's first child: the last node is open
                    top_path = last_path
                    top_names = [path[k + 1 :]]
                    paths.append(top_path)
                    self._parents.append(last)
                    names.append(top_names)
                elif k < 0:
                    # DataTree.deserialize: "Invalid Datatree, unable to find parent".
                    raise SnapshotLoadError(f"snapshot node {path}: parent not found")
                else:
                    self._close_until(path[:k])
                    top_path = paths[-1] if paths else _NO_PATH
                    top_names = names[-1] if names else None
                    if top_names is not None and k == len(top_path) and path.startswith(top_path):
                        top_names.append(path[k + 1 :])
                    else:
                        parent = nodes.get(path[:k])
                        if parent is None:
                            raise SnapshotLoadError(f"snapshot node {path}: parent not found")
                        parent.add_child(path[k + 1 :])  # not in pre-order: added as it comes
                nodes[path] = node
                size += len(path)
                if path == CONFIG_NODE:
                    self.config_span = (base + start, base + p)
            # node_digest(path, node), from the path's bytes as they came when they are its
            # UTF-8 (decoding replaced nothing); /zookeeper/... nodes count 0
            if not path.startswith(ZOOKEEPER_SUBTREE):
                dsum += encoded_digest(
                    encoded if path.isascii() else path.encode("utf-8"),
                    data,
                    czxid,
                    mzxid,
                    pzxid,
                    ctime,
                    mtime,
                    version,
                    cversion,
                    aversion,
                    owner,
                )
            last_path = path
            last = node
            i += 1
            if progress is not None and i & 0xFFFF == 0:
                progress(i, total)
        self._last_path = last_path
        self._last = last
        self.digest_sum = dsum
        self.data_size = size
        self.count = i

    def _close_until(self, parent: str) -> None:
        """Close the open parents ``parent`` is not under (nor is): their children are in."""
        paths = self._paths
        while paths:
            top = paths[-1]
            if parent == top or parent.startswith(top + "/"):
                return
            paths.pop()
            _set_children(self._parents.pop(), self._names.pop())

    def finish(self, zxid: int) -> DataTree:
        """The tree once every node is in: the open parents' tables, digest, sizes, quotas."""
        tree = self.tree
        paths, parents, names = self._paths, self._parents, self._names
        while paths:
            paths.pop()
            _set_children(parents.pop(), names.pop())
        if "" not in tree.nodes:
            raise SnapshotLoadError("snapshot has no root node")
        if len(tree.nodes) == self.count + 1:  # every path once (the root is there twice)
            tree.set_loaded_sums(self.digest_sum, self.data_size)
        else:
            tree.recompute_digest()
            tree.reset_data_size()
        return _finish_quotas(tree, zxid)


def _set_children(parent: DataNode, names: list[str]) -> None:
    """A parent's children table from their names in snapshot order: ``DataNode.addChild``
    of each into a ``HashSet(8)`` (a name twice is one child). The node was loaded with no
    children: no cache to forget."""
    parent.children = JavaHashSet.presized(names)


def _finish_quotas(tree: DataTree, zxid: int) -> DataTree:
    # DataTree.deserialize: nodeDataSize.set(approximateDataSize()), then setupQuota().
    tree.setup_quota()
    tree.last_processed_zxid = zxid
    return tree


def _finish_tree(tree: DataTree, kids: dict[DataNode, list[str]], zxid: int) -> DataTree:
    """What loading SnapNode records does once every node is in: children tables, digest,
    sizes, quotas."""
    if "" not in tree.nodes:
        raise SnapshotLoadError("snapshot has no root node")
    for parent, names in kids.items():
        _set_children(parent, names)
    tree.recompute_digest()
    tree.reset_data_size()
    return _finish_quotas(tree, zxid)


def _nodes_from_records(
    tree: DataTree,
    content: SnapshotContent,
    acls: dict[int, tuple[r.ACL, ...]],
    progress: Callable[[int, int], None] | None,
) -> dict[DataNode, list[str]]:
    """:func:`_nodes_from_raw` for content whose nodes are SnapNode records."""
    nodes = tree.nodes
    total = len(content.nodes)
    kids: dict[DataNode, list[str]] = {}
    for i, sn in enumerate(content.nodes):
        path = sn.path
        acl = acls.get(sn.acl)
        if acl is None:
            raise SnapshotLoadError(f"node {path or '/'}: ACL ref {sn.acl} is not in the cache")
        st = sn.stat
        node = _node(tree, path, sn.data, acl, st.ephemeralOwner)
        node.czxid = st.czxid
        node.mzxid = st.mzxid
        node.pzxid = st.pzxid
        node.ctime = st.ctime
        node.mtime = st.mtime
        node.version = st.version
        node.cversion = st.cversion
        node.aversion = st.aversion
        if path == "":
            nodes[""] = nodes["/"] = node
        else:
            k = path.rfind("/")
            parent = nodes.get(path[:k]) if k >= 0 else None
            if parent is None:
                # DataTree.deserialize: "Invalid Datatree, unable to find parent".
                raise SnapshotLoadError(f"snapshot node {path}: parent not found")
            names = kids.get(parent)
            if names is None:
                names = kids[parent] = []
            names.append(path[k + 1 :])
            nodes[path] = node
        if progress is not None and i & 0xFFFF == 0xFFFF:
            progress(i + 1, total)
    return kids


@dataclass
class ReplayResult:
    """What :func:`replay` did."""

    applied: int = 0
    errors: int = 0  # txns whose apply reported an error (expected for fuzzy overlaps)
    digest_checked: int = 0
    digest_mismatches: list[int] = field(default_factory=list)  # zxids
    last_zxid: int | None = None


def current_txn(entry: TxnEntry) -> r.Record | None:
    """The txn record of a logged entry as it applies today (old formats upgraded)."""
    txn = entry.txn
    if isinstance(txn, r.CreateTxnV0):
        # SerializeUtils.deserializeTxn: a V0 create is a CreateTxn with parentCVersion -1.
        return r.CreateTxn(txn.path, txn.data, txn.acl, txn.ephemeral, -1)
    return txn


def replay(
    replica: Replica,
    entries: Iterable[TxnEntry],
    *,
    snapshot_digest: SnapshotDigest | None = None,
    check_digests: bool = True,
    progress: Callable[[int], None] | None = None,
) -> ReplayResult:
    """Apply logged txns in order to ``replica`` (tree and session table).

    FileTxnSnapLog.processTransaction, through :meth:`Replica.apply` as every commit goes.
    Digests are compared as the module docstring says. ``progress(applied)`` is called every
    16k txns.
    """
    tree = replica.tree
    res = ReplayResult()
    # DataTree.digestFromLoadedSnapshot: compare nothing until the snapshot's digest zxid.
    fuzzy = snapshot_digest if snapshot_digest is not None and snapshot_digest.zxid > 0 else None
    if fuzzy is not None and fuzzy.zxid <= tree.last_processed_zxid:
        _check(tree, fuzzy.digest, fuzzy.zxid, res, check_digests)
        fuzzy = None
    # ZooKeeper logs no digest while digestFromLoadedSnapshot is set: until the txn of the
    # snapshot's digest zxid (that one excluded); one it never meets keeps it set for good
    tree.log_digests = fuzzy is None
    for entry in entries:
        hdr = entry.header
        rc = replica.apply(hdr, current_txn(entry))
        if rc.err:
            res.errors += 1
        res.applied += 1
        res.last_zxid = hdr.zxid
        if fuzzy is not None:
            if hdr.zxid >= fuzzy.zxid:
                _check(tree, fuzzy.digest, fuzzy.zxid, res, check_digests)
                tree.log_digests = hdr.zxid == fuzzy.zxid
                fuzzy = None
        elif entry.digest is not None and entry.digest.version == snap.DIGEST_VERSION:
            _check(tree, entry.digest.treeDigest, hdr.zxid, res, check_digests)
        if progress is not None and res.applied & 0x3FFF == 0:
            progress(res.applied)
    return res


def _check(tree: DataTree, expected: int, zxid: int, res: ReplayResult, enabled: bool) -> None:
    if not enabled:
        return
    res.digest_checked += 1
    if snap.to_java_long(expected) != tree.digest:
        res.digest_mismatches.append(zxid)


# ----------------------------------------------------------------------------- write


class FuzzySnapshot:
    """An in-progress snapshot of a live tree; see the module docstring.

    Call :meth:`step` until it returns True (the tree may change between calls, never during
    one), then :meth:`finish` (pure over what the walk collected: safe in a worker thread).
    """

    def __init__(
        self,
        tree: DataTree,
        sessions: dict[int, int],
        *,
        digest: bool = True,
        last_zxid: bool = False,
    ) -> None:
        self.tree = tree
        self.sessions = dict(sessions)
        self.zxid = tree.last_processed_zxid  # the name: last txn applied at the start
        self.with_digest = digest
        self.digest: SnapshotDigest | None = None
        #: write ZooKeeper 3.9's last-processed-zxid section (needs the digest section)
        self.with_last_zxid = last_zxid and digest
        #: the tree's last processed zxid when the walk ended
        self.last_zxid: int | None = None
        self.nodes = 0
        self._stack: list[str] = [""]
        self._chunks: list[bytes] = []
        self._acl_refs: dict[tuple[r.ACL, ...], int] = {}
        self._acl_by_id: dict[int, tuple[tuple[r.ACL, ...], int]] = {}
        self._done = False
        self._acls_sent = False

    def body_head(self) -> bytes:
        """For a SNAP body sent while it is walked (``ZKDatabase.serializeSnapshot`` onto the
        socket): its Sessions and AclCache sections, before any node. Every ACL of the tree
        gets its ref now (in the order of a pass over the node map; any numbering is valid,
        the learner keeps it). The nodes follow from :meth:`step` and :meth:`take_chunks`,
        then :data:`~trizk.storage.formats.snapshot.NODES_END`.

        The tree may change between steps, as ZooKeeper's leader serialises its live tree
        while it commits (the body is fuzzy; the learner replays every txn after the SNAP's
        zxid, :attr:`zxid`, which its leader queues behind the body). A node met with an ACL
        the cache sent does not hold was changed after the head was made, and is written so
        that the replay makes it right: created after it (``czxid`` > :attr:`zxid`), it is
        left out with its subtree, for its create to make it; older, its ACL was set since
        (the ACL it had was in the cache), and it is written with a ref the cache holds
        (:meth:`_stand_in_ref`) until that setACL's replay, which writes the ACL and its
        version whole. A learner serves nothing before the replay, and a snapshot it writes
        of the body is named :attr:`zxid`, with that setACL in its log after it."""
        ref = self._ref
        last: tuple[r.ACL, ...] | None = None
        for node in self.tree.nodes.values():
            acl = node.acl
            if acl is not last:
                ref(acl)
                last = acl
        self._acls_sent = True
        acls = ((ref, acl) for acl, ref in self._acl_refs.items())
        return snap.encode_head(self.sessions, acls)[_FILE_HEADER_SIZE:]

    def take_chunks(self) -> list[bytes]:
        """The node bytes the steps made since the last call (then no longer kept here)."""
        chunks = self._chunks
        self._chunks = []
        return chunks

    def _stand_in_ref(self) -> int:
        """The ref written for a node whose ACL changed since :meth:`body_head` (see there):
        the first ACL of the sent cache, or OPEN_ACL_UNSAFE's when the cache is empty (every
        node had that ACL when the head was made, so this one too)."""
        return min(self._acl_refs.values(), default=snap.OPEN_UNSAFE_ACL_REF)

    def _ref(self, acl: tuple[r.ACL, ...]) -> int:
        hit = self._acl_by_id.get(id(acl))
        if hit is not None and hit[0] is acl:
            return hit[1]
        if acl == OPEN_ACL_UNSAFE:
            ref = snap.OPEN_UNSAFE_ACL_REF
        else:
            ref = self._acl_refs.get(acl, 0)
            if not ref:
                if self._acls_sent:
                    raise TreeChangedError("an ACL not in the ACL cache already sent")
                # ReferenceCountedACLCache.convertAcls: refs count up from 1.
                ref = self._acl_refs[acl] = len(self._acl_refs) + 1
        # Keep the tuple alive with its id so that the id cannot be reused during the walk.
        self._acl_by_id[id(acl)] = (acl, ref)
        return ref

    def step(self, max_nodes: int = 4096) -> bool:
        """Serialise up to ``max_nodes`` more nodes; True once the walk is complete.

        Each node is written as :func:`~trizk.storage.formats.snapshot.encode_node` writes
        it, its ACL ref and StatPersisted packed in one go
        (:data:`~trizk.storage.formats.snapshot.NODE_TAIL`), its pieces joined once per
        step; consecutive nodes with the same ACL tuple look its ref up once."""
        if self._done:
            return True
        nodes = self.tree.nodes
        stack = self._stack
        out: list[bytes] = []
        pack_len = _INT.pack
        pack_tail = snap.NODE_TAIL.pack
        null = _NULL_BUFFER
        last_acl: tuple[r.ACL, ...] | None = None
        ref = 0
        n = 0
        while stack and n < max_nodes:
            path = stack.pop()
            node = nodes.get(path)
            if node is None:
                continue  # deleted after its parent was written: the log has the delete
            acl = node.acl
            if acl is not last_acl:
                try:
                    ref = self._ref(acl)
                    last_acl = acl
                except TreeChangedError:  # only once the head was sent (body_head)
                    if node.czxid > self.zxid:
                        continue  # created since: its create (replayed) makes it
                    ref = self._stand_in_ref()
                    last_acl = None  # the next node with this ACL is judged again
            p = path.encode("utf-8")
            out.append(pack_len(len(p)))
            out.append(p)
            data = node.data
            if data is None:
                out.append(null)
            else:
                out.append(pack_len(len(data)))
                out.append(data)
            out.append(
                pack_tail(
                    ref,
                    node.czxid,
                    node.mzxid,
                    node.ctime,
                    node.mtime,
                    node.version,
                    node.cversion,
                    node.aversion,
                    node.ephemeral_owner,
                    node.pzxid,
                )
            )
            n += 1
            ch = node.children
            if ch:
                prefix = path + "/"
                stack.extend([prefix + c for c in ch][::-1])
        self.nodes += n
        if out:
            self._chunks.append(b"".join(out))
        if not stack:
            self._done = True
            if self.with_digest:
                # DataTree.lastProcessedZxidDigest at the end of serialisation.
                self.digest = SnapshotDigest(self.tree.last_processed_zxid, self.tree.digest)
            if self.with_last_zxid:
                self.last_zxid = self.tree.last_processed_zxid
        return self._done

    def finish(self) -> list[bytes]:
        """The uncompressed snapshot stream, as a list of byte strings to write in order."""
        assert self._done, "finish() before the walk is complete"
        acls = ((ref, acl) for acl, ref in self._acl_refs.items())
        head = snap.encode_head(self.sessions, acls)
        return snap.seal([head, *self._chunks, snap.NODES_END], self.digest, self.last_zxid)


def content_from_tree(
    tree: DataTree, sessions: dict[int, int] | None = None, *, digest: bool = True
) -> SnapshotContent:
    """A (non-fuzzy) snapshot of ``tree`` as parsed content (for tests and tools)."""
    fs = FuzzySnapshot(tree, sessions or {}, digest=digest)
    while not fs.step(1 << 30):
        pass
    return snap.parse(b"".join(fs.finish()))


# ----------------------------------------------------------------------------- compare


def canonical(tree: DataTree) -> dict[str, tuple[object, ...]]:
    """Path -> (data, acl, StatPersisted, sorted children) for every node: equal trees give
    equal dicts (the root under "/")."""
    out: dict[str, tuple[object, ...]] = {}
    for path, n in tree.iter_nodes():
        out[path] = (n.data, n.acl, n.stat_persisted(), tuple(sorted(n.child_names())))
    return out


# ----------------------------------------------------------------------------- SNAP body


def snapshot_body(replica: Replica) -> bytes:
    """A quorum SNAP payload's body (``ZKDatabase.serializeSnapshot``): Sessions AclCache Nodes,
    i.e. a snapshot file without its FileHeader, seal and digest section."""
    fs = FuzzySnapshot(replica.tree, replica.sessions, digest=False)
    while not fs.step(1 << 30):
        pass
    parts = fs.finish()  # header+sessions+acls, nodes..., "/", seal
    parts[0] = parts[0][_FILE_HEADER_SIZE:]
    return b"".join(parts[:-1])


def restore_from_stream(
    data: bytes, *, extended_types: bool = False
) -> tuple[DataTree, dict[int, int]]:
    """The tree and sessions the AdminServer's ``restore`` command reads from its input
    (``ZKDatabase.deserializeSnapshot(ia, cis)``: a whole snapshot stream, plain, as
    ``snapshot?streaming=true`` sends it; see :func:`~trizk.storage.formats.snapshot.parse`'s
    ``stream``). The tree's ``last_processed_zxid`` is the stream's 3.9 trailer, or 0 without
    one (a new ``DataTree``'s, which ``deserializeLastProcessedZxid`` leaves); the ephemerals
    of sessions the stream lacks stay (nothing kills dead sessions here, unlike
    ``loadData``). Raises :class:`~trizk.storage.formats.snapshot.SnapshotFormatError` or
    :class:`SnapshotLoadError`."""
    content = snap.parse(data, raw_nodes=True, stream=True)
    zxid = content.last_processed_zxid if content.last_processed_zxid is not None else 0
    tree = tree_from_snapshot(content, zxid, extended_types=extended_types)
    return tree, dict(content.sessions)


def replica_from_snapshot_body(body: bytes, zxid: int, *, extended_types: bool = False) -> Replica:
    """The replica a SNAP payload describes, at ``zxid`` (the SNAP packet's; the leader's
    snapshot may be fuzzy: the PROPOSAL/COMMITs after it replay idempotently). Raises
    :class:`~trizk.storage.formats.snapshot.SnapshotFormatError` or :class:`SnapshotLoadError`."""
    return load_snapshot_body(body, zxid, extended_types=extended_types).replica


@dataclass(frozen=True, slots=True)
class ReceivedSnapshot:
    """A SNAP payload and the replica loaded from it (:func:`load_snapshot_body`), kept until
    the learner's own snapshot at NEWLEADER, which is written from these bytes
    (:func:`received_snapshot_parts`)."""

    body: bytes
    zxid: int
    replica: Replica
    #: where the ``/zookeeper/config`` node lies in ``body`` (start, end), if it is there
    config_span: tuple[int, int] | None


def load_snapshot_body(body: bytes, zxid: int, *, extended_types: bool = False) -> ReceivedSnapshot:
    """:func:`replica_from_snapshot_body`, keeping the body and where its config node is."""
    # the body is read as it came: no file header and seal put around it to be checked
    content = snap.parse_body(body, raw_nodes=True)
    tree = tree_from_snapshot(content, zxid, extended_types=extended_types)
    span = snap.node_span(body, content.nodes_start, content.nodes_end, CONFIG_NODE)
    return ReceivedSnapshot(body, zxid, Replica(tree, dict(content.sessions)), span)


class SnapshotBuilder:
    """A learner's replica built from a SNAP payload while it arrives: the stream decoder
    (``zabwire.QuorumStreamDecoder``'s snapshot sink) hands it the Sessions and AclCache
    sections, then whole nodes as they come, checked by their lengths, which go straight
    into the tree (:class:`_NodeLoader`); :meth:`finish` completes it once the payload is
    whole. ZooKeeper's learner deserialises from the socket the same way
    (``Learner.syncWithLeader``: ``deserializeSnapshot(leaderIs)``), so a leader that streams
    its snapshot has the learner building while it still walks its tree.

    A bad node (unknown ACL ref, orphan) stops the building and is kept in :attr:`error`;
    never raised to the decoder (the bytes are a valid stream): the payload is then loaded
    whole (:func:`load_snapshot_body`), which reports it."""

    def __init__(self, *, extended_types: bool = False) -> None:
        self.extended_types = extended_types
        self.error: Exception | None = None
        self._loader: _NodeLoader | None = None
        self._sessions: dict[int, int] = {}
        self._offset = 0

    def head(self, head: bytes) -> None:
        """The payload's Sessions and AclCache sections."""
        try:
            content = snap.parse_body(head + snap.NODES_END, raw_nodes=True)
        except snap.SnapshotFormatError as e:
            self.error = e
            return
        tree = DataTree(extended_types=self.extended_types)
        tree.nodes.clear()
        tree.ephemerals.clear()
        acls: dict[int, tuple[r.ACL, ...]] = {snap.OPEN_UNSAFE_ACL_REF: OPEN_ACL_UNSAFE}
        acls.update(content.acls)
        self._loader = _NodeLoader(tree, acls)
        self._sessions = dict(content.sessions)
        self._offset = len(head)

    def nodes(self, chunk: bytes, end: int) -> None:
        """Whole nodes: ``chunk[:end]`` (their lengths checked by the decoder)."""
        loader = self._loader
        if self.error is None and loader is not None:
            try:
                loader.load(chunk, 0, end, self._offset)
            except (SnapshotLoadError, struct.error) as e:
                self.error = e
        elif self.error is None:
            self.error = SnapshotLoadError("snapshot nodes before its ACL cache")
        self._offset += end

    def finish(self, body: bytes, zxid: int) -> ReceivedSnapshot:
        """The replica of the whole payload ``body`` (what the decoder handed over, in
        order), at ``zxid``; raises what building met (:attr:`error`)."""
        loader = self._loader
        if self.error is not None:
            raise self.error
        if loader is None or self._offset + len(snap.NODES_END) != len(body):
            raise SnapshotLoadError("the snapshot was not built from this payload")
        tree = loader.finish(zxid)
        return ReceivedSnapshot(body, zxid, Replica(tree, self._sessions), loader.config_span)


def received_snapshot_parts(
    got: ReceivedSnapshot, *, digest: bool = True, last_zxid: bool = False
) -> list[bytes] | None:
    """The snapshot file (uncompressed, as :meth:`FuzzySnapshot.finish` gives it) of
    ``got.replica`` written from the SNAP body it was loaded from, or None when the replica
    changed since (a txn applied: its tree is no longer the body's).

    ``Learner.syncWithLeader`` snapshots the tree it deserialised at NEWLEADER; until then a
    learner only holds the leader's proposals, and the one change to its tree is
    ``initConfigInZKDatabase`` (``/zookeeper/config`` shows this member's configuration). So
    the file is the FileHeader, the body with that one node written anew from the tree (its
    ACL ref as the leader numbered it), the seal and the digest section (the tree's digest
    at ``zxid``; ``/zookeeper/`` nodes are outside it) -- the bytes a re-serialisation of the
    tree would give but for the order of siblings and the ACL refs, which keep the leader's
    (as ZooKeeper's ``ReferenceCountedACLCache.deserialize`` keeps them). Not walking the tree
    again saves the learner a serialisation of it (~40 % of its sync's CPU)."""
    tree = got.replica.tree
    span = got.config_span
    if span is None or tree.last_processed_zxid != got.zxid:
        return None
    node = tree.nodes.get(CONFIG_NODE)
    if node is None:
        return None
    start, end = span
    body = got.body
    (ref,) = _LONG.unpack_from(body, end - snap.NODE_TAIL_SIZE)
    path = CONFIG_NODE.encode("utf-8")
    data = node.data
    config = b"".join(
        (
            _INT.pack(len(path)),
            path,
            _NULL_BUFFER if data is None else _INT.pack(len(data)) + data,
            snap.NODE_TAIL.pack(
                ref,
                node.czxid,
                node.mzxid,
                node.ctime,
                node.mtime,
                node.version,
                node.cversion,
                node.aversion,
                node.ephemeral_owner,
                node.pzxid,
            ),
        )
    )
    head = r.FileHeader(snap.SNAP_MAGIC, snap.SNAP_VERSION, snap.SNAP_DBID).encode()
    parts = [head, body[:start], config, body[end:]]
    with_digest = SnapshotDigest(got.zxid, tree.digest) if digest else None
    return snap.seal(parts, with_digest, got.zxid if digest and last_zxid else None)
