"""The in-memory data tree and the deterministic application of transactions.

Theory
------
The tree is ZooKeeper's ``DataTree``: a map from path to :class:`DataNode`, the root stored under
both ``""`` and ``"/"`` (ZooKeeper's node map has the root at ``""``; a read of ``""`` finds it).
:meth:`DataTree.apply` takes a ``TxnHeader`` and its txn record and changes the tree exactly as
``DataTree.processTxn`` does. It is deterministic: every time and zxid comes from the header, and
it returns what happened (:class:`ApplyResult`: error code, path, Stat, and the watch
*triggers*) instead of firing watches itself. Applying the same txns in the same order to equal
trees gives equal trees, which makes fuzzy snapshots plus log replay correct: create and delete
tolerate replays the way ZooKeeper's do (``parentCVersion`` only moves forward, pzxid only up).

Quirks kept on purpose (each is what ZooKeeper 3.8 shows clients):

* A node stores ``cversion`` as the number of creates under it; clients see
  ``cversion * 2 - numChildren`` (``DataNode.copyStat``), so a fresh server shows the root with
  cversion -1 and ``/zookeeper`` with -2. The sequential suffix uses the stored count.
* Children iterate in Java ``HashSet`` order (:mod:`trizk.storage.tree.javahash`), initial capacity
  8;
  each session's ephemerals are another HashSet (capacity 16) whose order decides the order of
  deletions, hence of watch events, when the session closes.
* ``/zookeeper/config`` has ACL world:anyone READ and aversion -1 (``setACL(..., -1)`` at start).
* Data ``None`` (a null buffer) and ``b""`` are different; a null reads back as null.

Tree digest
-----------
:attr:`DataTree.digest` is ZooKeeper's tree digest (``DigestCalculator`` version 2, an AdHash:
the sum of every node's CRC32 digest, see :func:`node_digest`), kept up to date by every node
change :meth:`apply` makes (a node's old digest is subtracted before it changes, its new one
added after), as ``NodeHashMapImpl.preChange/postChange`` do. Each node caches its digest
until it changes. Whoever builds a tree by other means (snapshot loading) sets it with
:meth:`DataTree.recompute_digest`.

Digest log (``DataTree.logZxidDigest``, what ``hash`` and ``/commands/hash`` print): after
every txn whose zxid is a multiple of :data:`DIGEST_LOG_INTERVAL` (128), ``(zxid, tree
digest)`` is appended to :attr:`DataTree.digest_log`, which keeps the last
:data:`DIGEST_LOG_LIMIT` (1024). A multi counts once (its zxid), an error txn counts, a txn
replayed from the log at startup counts -- except while the tree is *fuzzy*
(:attr:`DataTree.log_digests` False: a loaded snapshot's digest is not reached yet, ZooKeeper's
``digestFromLoadedSnapshot != null``; the replay clears it, see
:func:`trizk.storage.formats.treeio.replay`).
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from trizk.jute import records as r
from trizk.jute.codes import CONTAINER_EPHEMERAL_OWNER, Code, EventType, KeeperError, OpCode
from trizk.jute.primitives import fixed_struct
from trizk.storage.formats.snapshot import calculate_digest, to_java_long
from trizk.storage.tree import quota
from trizk.storage.tree.javahash import JavaHashSet
from trizk.storage.tree.paths import split, watch_path

log = logging.getLogger("trizk.storage")

OPEN_ACL_UNSAFE: tuple[r.ACL, ...] = (r.ACL(31, r.Id("world", "anyone")),)
READ_ACL_UNSAFE: tuple[r.ACL, ...] = (r.ACL(1, r.Id("world", "anyone")),)

ZOOKEEPER_NODE = "/zookeeper"
QUOTA_NODE = "/zookeeper/quota"
CONFIG_NODE = "/zookeeper/config"
SPECIAL_PATHS = frozenset({"/", ZOOKEEPER_NODE, QUOTA_NODE, CONFIG_NODE})
#: DataTree.DIGEST_LOG_INTERVAL: the digest log takes the txns whose zxid is a multiple of it
DIGEST_LOG_INTERVAL: Final = 128
#: DataTree.DIGEST_LOG_LIMIT: the digest log keeps this many entries, the newest
DIGEST_LOG_LIMIT: Final = 1024

#: Watch tables a trigger applies to.
DATA = 1
CHILD = 2
BOTH = DATA | CHILD


# Enum members used per txn, as module constants: on Python 3.11 looking one up on its class
# costs ~0.1 us (EnumType.__getattr__ keeps the lookup off the fast path).
_NODECREATED, _NODEDELETED = EventType.NODECREATED, EventType.NODEDELETED
_NODEDATACHANGED, _NODECHILDRENCHANGED = EventType.NODEDATACHANGED, EventType.NODECHILDRENCHANGED
_CREATE, _CREATETTL, _CREATECONTAINER = OpCode.CREATE, OpCode.CREATETTL, OpCode.CREATECONTAINER

_STAT_WIRE: Final = fixed_struct(r.Stat)  # czxid ... pzxid, 68 bytes
_INT = struct.Struct(">i")
_NULL_BUFFER = _INT.pack(-1)  # a null Jute buffer
#: largest data whose getData reply body a node caches (DataNode.read_wire)
READ_CACHE_MAX = 4096


def java_int(v: int) -> int:
    """``v`` wrapped to a Java int (32-bit two's complement)."""
    return ((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def next_version(v: int) -> int:
    """``v + 1`` as Java computes it for an int counter: 2**31 - 1 wraps to -2**31.
    ZooKeeper's versions and cversion are ints bumped with a plain ``+ 1``
    (PrepRequestProcessor.checkAndIncVersion, the create's ``parentCVersion++``), so a node
    set 2**31 times goes on at a negative version; without the wrap its txn could not be
    encoded at all."""
    return v + 1 if v != 0x7FFFFFFF else -0x80000000


def node_digest(path: str, node: DataNode) -> int:
    """DigestCalculator.calculateDigest (version 2) of ``node`` at ``path``, cached on the node.

    CRC32 of the path's UTF-8 bytes, the data, then czxid mzxid pzxid ctime mtime (longs),
    version cversion aversion (ints), ephemeralOwner (long); the root is hashed as "" and
    nodes under ``/zookeeper/`` count 0 (``/zookeeper`` itself counts).
    """
    d = node._digest
    if d is None:
        d = calculate_digest(
            path,
            node.data,
            node.czxid,
            node.mzxid,
            node.pzxid,
            node.ctime,
            node.mtime,
            node.version,
            node.cversion,
            node.aversion,
            node.ephemeral_owner,
        )
        node._digest = d
    return d


class EphemeralKind:
    """EphemeralType.get(owner): VOID, NORMAL, CONTAINER or TTL."""

    VOID: Final = 0
    NORMAL: Final = 1
    CONTAINER: Final = 2
    TTL: Final = 3


def ephemeral_kind(owner: int, extended_types: bool) -> int:
    if owner == 0:
        return EphemeralKind.VOID
    if owner == CONTAINER_EPHEMERAL_OWNER:
        return EphemeralKind.CONTAINER
    if extended_types and (owner >> 56) & 0xFF == 0xFF:
        return EphemeralKind.TTL
    return EphemeralKind.NORMAL


class DataNode:
    """One znode. ``cversion`` is ZooKeeper's stored count of creates (see module docstring)."""

    __slots__ = (
        "_digest",
        "_kids",
        "_read",
        "_stat",
        "_wire",
        "_world",
        "acl",
        "aversion",
        "children",
        "client_owner",
        "ctime",
        "cversion",
        "czxid",
        "data",
        "ephemeral_owner",
        "mtime",
        "mzxid",
        "pzxid",
        "version",
    )

    def __init__(
        self,
        data: bytes | None,
        acl: tuple[r.ACL, ...],
        zxid: int = 0,
        time: int = 0,
        ephemeral_owner: int = 0,
        client_owner: int | None = None,
    ) -> None:
        self.data = data
        self.acl = acl
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = time
        self.version = self.cversion = self.aversion = 0
        self.ephemeral_owner = ephemeral_owner
        #: what clients see (DataNode.getClientEphemeralOwner: 0 unless a NORMAL ephemeral)
        self.client_owner = ephemeral_owner if client_owner is None else client_owner
        self.children: JavaHashSet | None = None
        # Caches, reset by touch() whenever the node changes: the Stat record, its 68 wire
        # bytes, a getData reply's body, the node digest; and by set_acl(): what world:anyone
        # is granted.
        self._stat: r.Stat | None = None
        self._wire: bytes | None = None
        self._read: bytes | None = None
        self._digest: int | None = None
        self._world = -1
        # The children as a getChildren reply encodes them, reset when a child comes or goes
        self._kids: tuple[bytes, int] | None = None

    def _stat_fields(self) -> tuple[int, ...]:
        """The client-visible Stat's fields, in its order (``DataNode.copyStat``)."""
        n = len(self.children) if self.children is not None else 0
        d = self.data
        return (
            self.czxid,
            self.mzxid,
            self.ctime,
            self.mtime,
            self.version,
            java_int(self.cversion * 2 - n),  # an int product in copyStat: wraps
            self.aversion,
            self.client_owner,
            len(d) if d is not None else 0,
            n,
            self.pzxid,
        )

    def stat(self) -> r.Stat:
        """The client-visible Stat (cached until the node changes)."""
        s = self._stat
        if s is None:
            s = self._stat = r.Stat(*self._stat_fields())
        return s

    def stat_wire(self) -> bytes:
        """The Stat as it goes on the wire (``Stat.serialize``: 68 bytes), cached."""
        w = self._wire
        if w is None:
            w = self._wire = _STAT_WIRE.pack(*self._stat_fields())
        return w

    def read_wire(self) -> bytes:
        """A GetDataResponse's body (data as a Jute buffer, then the Stat). Cached for data up
        to ``READ_CACHE_MAX`` bytes: the body holds a copy of the data, and a tree of large
        znodes read once must not double its memory (a large body costs its copy anyway)."""
        b = self._read
        if b is None:
            d = self.data
            if d is None:
                b = _NULL_BUFFER + self.stat_wire()
            else:
                b = _INT.pack(len(d)) + d + self.stat_wire()
                if len(d) > READ_CACHE_MAX:
                    return b
            self._read = b
        return b

    def world_perms(self) -> int:
        """The permissions the ACL grants ``world:anyone`` (to every client), cached: a check
        it passes needs no look at the client's ids."""
        w = self._world
        if w < 0:
            w = 0
            for a in self.acl:
                if a.id.scheme == "world" and a.id.id == "anyone":
                    w |= a.perms
            self._world = w
        return w

    def persisted_fields(self) -> tuple[int, int, int, int, int, int, int, int, int]:
        """The StatPersisted's fields, in its order (``DataNode.serialize`` writes them)."""
        return (
            self.czxid,
            self.mzxid,
            self.ctime,
            self.mtime,
            self.version,
            self.cversion,
            self.aversion,
            self.ephemeral_owner,
            self.pzxid,
        )

    def stat_persisted(self) -> r.StatPersisted:
        return r.StatPersisted(*self.persisted_fields())

    def child_names(self) -> list[str]:
        return list(self.children) if self.children is not None else []

    def num_children(self) -> int:
        return len(self.children) if self.children is not None else 0

    def children_wire(self) -> tuple[bytes, int]:
        """The children as a getChildren reply encodes them (``vector<ustring>``: the count,
        then each name as a Jute ustring, in HashSet order), and the number of characters of
        their names (what the read statistics count). Cached until a child is added or
        removed: a list of 10,000 names is walked and encoded once, not on every read."""
        k = self._kids
        if k is None:
            names = list(self.children) if self.children is not None else []
            parts = [_INT.pack(len(names))]
            chars = 0
            pack = _INT.pack
            for name in names:
                b = name.encode("utf-8")
                parts.append(pack(len(b)))
                parts.append(b)
                chars += len(name)
            k = self._kids = (b"".join(parts), chars)
        return k

    def add_child(self, name: str) -> None:
        if self.children is None:
            self.children = JavaHashSet(8)  # DataNode.addChild: new HashSet<>(8)
        self.children.add(name)
        self._kids = None
        self.touch()

    def remove_child(self, name: str) -> None:
        if self.children is not None:
            self.children.discard(name)
        self._kids = None
        self.touch()

    def touch(self) -> None:
        """The node changed: forget what was cached of it. (What world:anyone is granted
        depends on the ACL alone: :meth:`set_acl` forgets that.)"""
        self._stat = self._wire = self._read = self._digest = None

    def set_acl(self, acl: tuple[r.ACL, ...]) -> None:
        """Replace the ACL (the caller bumps ``aversion`` and calls :meth:`touch`)."""
        self.acl = acl
        self._world = -1


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class Trigger:
    """A watch trigger: fire ``event`` for ``path`` on the watch tables in ``tables``.

    ``acl`` is the ACL a watcher needs READ on to be told (CVE-2024-23944, in Debian's
    ZooKeeper 3.8.0-11+deb12u2 and upstream 3.8.4): the node's own for created, deleted and
    data-changed events, the parent's for NodeChildrenChanged. The watch is consumed either way.
    """

    path: str
    event: EventType
    tables: int
    acl: tuple[r.ACL, ...]
    #: bytes of data written (created or set): the server's ``write_per_namespace`` metric
    size: int

    def __init__(
        self,
        path: str,
        event: EventType,
        tables: int,
        acl: tuple[r.ACL, ...] = (),
        size: int = 0,
    ) -> None:
        self.path = path
        self.event = event
        self.tables = tables
        self.acl = acl
        self.size = size


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class ApplyResult:
    """What applying one txn did (ZooKeeper's ``ProcessTxnResult``)."""

    type: int
    zxid: int
    err: int
    path: str | None
    #: the node's Stat after the change, as its 68 wire bytes (the reply's Stat)
    stat: bytes | None
    triggers: list[Trigger]
    multi: list[ApplyResult] | None
    #: paths of ephemerals deleted by closeSession, in deletion order
    deleted: list[str] | None

    def __init__(
        self,
        type: int,
        zxid: int,
        err: int = 0,
        path: str | None = None,
        stat: bytes | None = None,
        triggers: list[Trigger] | None = None,
        multi: list[ApplyResult] | None = None,
        deleted: list[str] | None = None,
    ) -> None:
        self.type = type
        self.zxid = zxid
        self.err = err
        self.path = path
        self.stat = stat
        self.triggers = [] if triggers is None else triggers
        self.multi = multi
        self.deleted = deleted


class TxnError(KeeperError):
    """Raised when applying a txn fails (replays of txns already in a fuzzy snapshot)."""


_SUBTXN: dict[int, type[r.Record]] = {
    OpCode.CREATE: r.CreateTxn,
    OpCode.CREATE2: r.CreateTxn,
    OpCode.CREATETTL: r.CreateTTLTxn,
    OpCode.CREATECONTAINER: r.CreateContainerTxn,
    OpCode.DELETE: r.DeleteTxn,
    OpCode.DELETECONTAINER: r.DeleteTxn,
    OpCode.SETDATA: r.SetDataTxn,
    OpCode.ERROR: r.ErrorTxn,
    OpCode.CHECK: r.CheckVersionTxn,
}


class DataTree:
    """ZooKeeper's data tree. Mutated only through :meth:`apply` (and snapshot loading)."""

    def __init__(self, *, extended_types: bool = False) -> None:
        self.extended_types = extended_types
        self.nodes: dict[str, DataNode] = {}
        self.ephemerals: dict[int, JavaHashSet] = {}
        self.containers: set[str] = set()
        self.ttls: set[str] = set()
        self.last_processed_zxid = 0
        #: (zxid, tree digest) every DIGEST_LOG_INTERVAL zxids (see the module docstring)
        self.digest_log: deque[tuple[int, int]] = deque(maxlen=DIGEST_LOG_LIMIT)
        #: False while a loaded snapshot's digest is not reached (nothing is logged then)
        self.log_digests = True
        root = DataNode(b"", OPEN_ACL_UNSAFE)
        self.nodes[""] = root
        self.nodes["/"] = root
        zk = DataNode(b"", OPEN_ACL_UNSAFE)
        root.add_child("zookeeper")
        self.nodes[ZOOKEEPER_NODE] = zk
        zk.add_child("quota")
        self.nodes[QUOTA_NODE] = DataNode(b"", OPEN_ACL_UNSAFE)
        zk.add_child("config")
        config = DataNode(b"", READ_ACL_UNSAFE)
        config.aversion = -1  # DataTree.addConfigNode: setACL(CONFIG_NODE, READ_ACL_UNSAFE, -1)
        self.nodes[CONFIG_NODE] = config
        self._digest_sum = 0
        self.recompute_digest()
        #: the quota'd paths (DataTree.pTrie); see :mod:`trizk.storage.tree.quota`
        self.quota_trie = quota.PathTrie()
        self._data_size = 0
        self.reset_data_size()

    # ------------------------------------------------------------------ digest
    @property
    def digest(self) -> int:
        """The tree digest (DataTree.getTreeDigest) as a Java long."""
        return to_java_long(self._digest_sum)

    def set_loaded_sums(self, digest_sum: int, data_size: int) -> None:
        """The digest and approximate data size of a tree built node by node (a snapshot's
        loader), summed as it went: what :meth:`recompute_digest` and
        :meth:`reset_data_size` would find (each node's :func:`node_digest`, and the lengths
        of its path and data; the root counted once, as "/"), without another pass."""
        self._digest_sum = digest_sum
        self._data_size = data_size

    def recompute_digest(self) -> int:
        """Set the digest from scratch (after building the tree by hand); returns it."""
        self._digest_sum = sum(node_digest(p, n) for p, n in self.iter_nodes())
        return self.digest

    # ------------------------------------------------------------------ reads
    def get(self, path: str) -> DataNode | None:
        return self.nodes.get(path)

    def node_count(self) -> int:
        """``DataTree.getNodeCount``: ``nodes.size()``, where the root is there twice (``""``
        and ``"/"``), so a fresh tree reports 5 as ZooKeeper 3.8.0 does."""
        return len(self.nodes)

    def ephemerals_of(self, session_id: int) -> JavaHashSet:
        """``DataTree.getEphemerals(sessionId)``: a clone of the session's set (or a new one)."""
        s = self.ephemerals.get(session_id)
        return s.clone() if s is not None else JavaHashSet()

    def all_children_number(self, path: str) -> int:
        """``DataTree.getAllChildrenNumber``: ``nodes.size() - 2`` for "/", else the keys that
        start with ``path + "/"`` (so ``""`` counts the root's "/" key too)."""
        if path == "/":
            return len(self.nodes) - 2
        prefix = path + "/"
        return sum(1 for p in self.nodes if p.startswith(prefix))

    def iter_nodes(self) -> Iterator[tuple[str, DataNode]]:
        for p, n in self.nodes.items():
            if p != "":
                yield p, n

    def approximate_data_size(self) -> int:
        """``DataTree.cachedApproximateDataSize``: path lengths plus data lengths, counted
        when the tree is built and kept by create/delete/setData; quota stats updates do not
        move it (they bypass ZooKeeper's counter too)."""
        return self._data_size

    def reset_data_size(self) -> int:
        """``nodeDataSize.set(approximateDataSize())`` (after building the tree by hand)."""
        self._data_size = sum(len(p) + (len(n.data) if n.data else 0) for p, n in self.iter_nodes())
        return self._data_size

    def index_owner(self, path: str, owner: int, kind: int) -> None:
        """File a new node by its ephemeralOwner (``kind`` is :func:`ephemeral_kind` of it):
        containers, TTL nodes, or its session's ephemerals (a ``HashSet`` of capacity 16), as
        ``createNode`` and ``deserialize`` do."""
        if kind == EphemeralKind.CONTAINER:
            self.containers.add(path)
        elif kind == EphemeralKind.TTL:
            self.ttls.add(path)
        elif owner != 0:
            eph = self.ephemerals.get(owner)
            if eph is None:
                eph = self.ephemerals[owner] = JavaHashSet(16)
            eph.add(path)

    # ------------------------------------------------------------------ quotas
    def max_prefix_with_quota(self, path: str) -> str | None:
        """``getMaxPrefixWithQuota``: the deepest quota'd prefix of ``path`` (None if none)."""
        if not self.quota_trie.root.children:
            return None  # no quota anywhere (the common case): skip the walk
        prefix = self.quota_trie.max_prefix(path)
        return None if prefix == "/" or not prefix else prefix

    def setup_quota(self) -> None:
        """``DataTree.setupQuota`` after loading a snapshot: every leaf ``.../zookeeper_limits``
        under ``/zookeeper/quota`` gets its path into the trie and its stats recomputed."""
        end = "/" + quota.LIMIT_NODE
        for path, _data in self.quota_leaves():
            if path.endswith(end):
                real = path[len(quota.QUOTA_ZOOKEEPER) : path.index(end)]
                self._update_quota_for_path(real)
                try:
                    self.quota_trie.add(real)
                except ValueError as e:
                    log.error("quota limits node %s: %s", path, e)

    def quota_leaves(self) -> list[tuple[str, bytes | None]]:
        """The leaves of the ``/zookeeper/quota`` subtree (path, data) in tree order, as
        ``QuotaMetricsUtils`` walks them."""
        out: list[tuple[str, bytes | None]] = []
        stack = [quota.QUOTA_ZOOKEEPER]
        while stack:
            path = stack.pop()
            node = self.nodes.get(path)
            if node is None:
                continue
            names = node.child_names()
            if names:
                stack.extend(f"{path}/{c}" for c in reversed(names))
            else:
                out.append((path, node.data))
        return out

    def _subtree_usage(self, path: str) -> tuple[int, int]:
        """``DataTree.getCounts``: znodes and data bytes of ``path``'s subtree, itself included."""
        count = size = 0
        stack = [path]
        while stack:
            p = stack.pop()
            node = self.nodes.get(p)
            if node is None:
                continue
            count += 1
            size += len(node.data) if node.data else 0
            stack.extend(f"{p}/{c}" for c in node.child_names())
        return count, size

    def _update_quota_for_path(self, path: str) -> None:
        """``updateQuotaForPath``: the stats node of ``path`` gets its subtree's real usage."""
        count, size = self._subtree_usage(path)
        stat_path = quota.stat_path(path)
        node = self.nodes.get(stat_path)
        if node is None:
            log.warning("Missing quota stat node %s", stat_path)
            return
        # ZooKeeper wraps this in pre/postChange, but nodes under /zookeeper/ digest to 0.
        node.data = quota.StatsTrack({quota.COUNT: count, quota.BYTES: size}).encode()
        node.touch()

    def _update_quota_stat(self, prefix: str, bytes_diff: int, count_diff: int) -> None:
        """``updateQuotaStat``: add the differences to the stats node of quota ``prefix``. As in
        ZooKeeper the node's stat, version and digest do not change, and no txn records it."""
        stat_path = quota.stat_path(prefix)
        node = self.nodes.get(stat_path)
        if node is None:
            log.error("Missing node for stat %s", stat_path)
            return
        try:
            st = quota.StatsTrack.parse(node.data)
        except quota.StatsTrackError as e:
            # ZooKeeper's request processor thread dies on this and the server stops serving;
            # trizk leaves the stats alone and carries on.
            log.error("quota stats node %s is unreadable (%s); usage not updated", stat_path, e)
            return
        st.stats[quota.COUNT] = st.count + count_diff
        st.stats[quota.BYTES] = st.nbytes + bytes_diff
        node.data = st.encode()
        node.touch()  # a /zookeeper/ node: its digest is 0 either way

    def _quota_node_created(self, parent_name: str, child_name: str) -> None:
        try:
            if child_name == quota.LIMIT_NODE:
                self.quota_trie.add(quota.trim_quota_path(parent_name))
            elif child_name == quota.STAT_NODE:
                self._update_quota_for_path(quota.trim_quota_path(parent_name))
        except ValueError as e:
            # e.g. /zookeeper/quota/zookeeper_limits: ZooKeeper throws here and stops serving.
            log.error("quota node %s/%s not tracked: %s", parent_name, child_name, e)

    # ------------------------------------------------------------------ apply
    def apply(self, hdr: r.TxnHeader, txn: r.Record | None) -> ApplyResult:
        """Apply one txn as ``DataTree.processTxn`` does; returns the result and triggers."""
        rc = ApplyResult(type=hdr.type, zxid=hdr.zxid)
        try:
            handler = _APPLY.get(hdr.type)
            if handler is not None:
                handler(self, hdr, txn, rc)
        except TxnError as e:
            rc.err = e.code
        if hdr.zxid > self.last_processed_zxid:
            self.last_processed_zxid = hdr.zxid
        if self.log_digests and hdr.zxid % DIGEST_LOG_INTERVAL == 0:
            self.digest_log.append((hdr.zxid, self.digest))
        return rc

    def _create(self, hdr: r.TxnHeader, txn: Any, rc: ApplyResult) -> None:
        t = hdr.type
        if t == _CREATECONTAINER:
            owner = CONTAINER_EPHEMERAL_OWNER
        elif t == _CREATETTL:
            owner = ttl_to_ephemeral_owner(txn.ttl)
        elif txn.ephemeral:
            owner = hdr.clientId
        else:
            owner = 0
        rc.path = txn.path
        node = self.create_node(
            txn.path, txn.data, txn.acl, owner, txn.parentCVersion, hdr.zxid, hdr.time, rc
        )
        if t == _CREATE:
            rc.stat = None
        elif rc.stat is None:
            rc.stat = node.stat_wire()

    def create_node(
        self,
        path: str,
        data: bytes | None,
        acl: tuple[r.ACL, ...] | None,
        owner: int,
        parent_cversion: int,
        zxid: int,
        time: int,
        rc: ApplyResult | None = None,
    ) -> DataNode:
        parent_name, child_name = split(path)
        parent = self.nodes.get(parent_name)
        if parent is None:
            raise TxnError(Code.NONODE)
        if parent.children is not None and child_name in parent.children:
            raise TxnError(Code.NODEEXISTS)
        if parent_cversion == -1:
            parent_cversion = next_version(parent.cversion)
        dsum = self._digest_sum - node_digest(parent_name, parent)
        # A replayed create (fuzzy snapshot) must not move cversion/pzxid backwards.
        if parent_cversion > parent.cversion:
            parent.cversion = parent_cversion
            parent.pzxid = zxid
        kind = ephemeral_kind(owner, self.extended_types)
        node = DataNode(
            data,
            tuple(acl or ()),
            zxid,
            time,
            owner,
            owner if kind == EphemeralKind.NORMAL else 0,
        )
        parent.add_child(child_name)
        self.nodes[path] = node
        self._digest_sum = dsum + node_digest(parent_name, parent) + node_digest(path, node)
        self.index_owner(path, owner, kind)
        size = len(data) if data else 0
        self._data_size += len(path) + size
        if parent_name.startswith(quota.QUOTA_ZOOKEEPER):
            if rc is not None:
                # createNode copies the Stat out before updateQuotaForPath rewrites the data.
                rc.stat = node.stat_wire()
            self._quota_node_created(parent_name, child_name)
        prefix = self.max_prefix_with_quota(path)
        if prefix is not None:
            self._update_quota_stat(prefix, size, 1)
        if rc is not None:
            rc.triggers.append(Trigger(path, _NODECREATED, DATA, node.acl, size))
            rc.triggers.append(
                Trigger(watch_path(parent_name), _NODECHILDRENCHANGED, CHILD, parent.acl)
            )
        return node

    def _delete(self, hdr: r.TxnHeader, txn: Any, rc: ApplyResult) -> None:
        rc.path = txn.path
        self.delete_node(txn.path, hdr.zxid, rc)

    def delete_node(self, path: str, zxid: int, rc: ApplyResult | None = None) -> None:
        parent_name, child_name = split(path)
        parent = self.nodes.get(parent_name)
        if parent is None:
            raise TxnError(Code.NONODE)
        dsum = self._digest_sum - node_digest(parent_name, parent)
        parent.remove_child(child_name)
        # Only move pzxid up: a replayed delete must not undo a later create's pzxid.
        if zxid > parent.pzxid:
            parent.pzxid = zxid
        self._digest_sum = dsum + node_digest(parent_name, parent)
        node = self.nodes.pop(path, None)
        if node is None:
            raise TxnError(Code.NONODE)
        self._digest_sum -= node_digest(path, node)
        owner = node.ephemeral_owner
        kind = ephemeral_kind(owner, self.extended_types)
        if kind == EphemeralKind.CONTAINER:
            self.containers.discard(path)
        elif kind == EphemeralKind.TTL:
            self.ttls.discard(path)
        elif owner != 0:
            eph = self.ephemerals.get(owner)
            if eph is not None:
                eph.discard(path)
        size = len(node.data) if node.data else 0
        self._data_size -= len(path) + size
        if parent_name.startswith(quota.PROC_ZOOKEEPER) and child_name == quota.LIMIT_NODE:
            try:
                self.quota_trie.delete(quota.trim_quota_path(parent_name))
            except ValueError as e:
                # ZooKeeper's substring/PathTrie throws here and stops serving.
                log.error("quota limits node %s not untracked: %s", path, e)
        prefix = self.max_prefix_with_quota(path)
        if prefix is not None:
            self._update_quota_stat(prefix, -size, -1)
        if rc is not None:
            rc.triggers.append(Trigger(path, _NODEDELETED, BOTH, node.acl))
            rc.triggers.append(
                Trigger(watch_path(parent_name), _NODECHILDRENCHANGED, CHILD, parent.acl)
            )

    def set_config(self, data: bytes, time: int, version: int = 0) -> None:
        """``ZKDatabase.initConfigInZKDatabase``: an ensemble member writes its configuration
        (``QuorumVerifier.toString``) into ``/zookeeper/config`` without a txn -- at start-up
        and after every sync with a leader -- as ``DataTree.setData(CONFIG_NODE, data, -1,
        qv.getVersion(), now)``: version -1, mzxid the config version, mtime now. Nodes under
        ``/zookeeper/`` are outside the digest."""
        node = self.nodes[CONFIG_NODE]
        last = node.data
        node.data = data
        node.mtime = time
        node.mzxid = version
        node.version = -1
        node.touch()
        self._data_size += len(data) - (len(last) if last else 0)

    def _set_data(self, hdr: r.TxnHeader, txn: Any, rc: ApplyResult) -> None:
        rc.path = txn.path
        node = self.nodes.get(txn.path)
        if node is None:
            raise TxnError(Code.NONODE)
        dsum = self._digest_sum - node_digest(txn.path, node)
        last = node.data
        node.data = txn.data
        node.mtime = hdr.time
        node.mzxid = hdr.zxid
        node.version = txn.version
        node.touch()
        self._digest_sum = dsum + node_digest(txn.path, node)
        diff = (len(txn.data) if txn.data else 0) - (len(last) if last else 0)
        self._data_size += diff
        prefix = self.max_prefix_with_quota(txn.path)
        if prefix is not None:
            self._update_quota_stat(prefix, diff, 0)
        rc.stat = node.stat_wire()
        rc.triggers.append(
            Trigger(txn.path, _NODEDATACHANGED, DATA, node.acl, len(txn.data or b""))
        )

    def _set_acl(self, hdr: r.TxnHeader, txn: Any, rc: ApplyResult) -> None:
        rc.path = txn.path
        node = self.nodes.get(txn.path)
        if node is None:
            raise TxnError(Code.NONODE)
        dsum = self._digest_sum - node_digest(txn.path, node)
        node.aversion = txn.version
        node.set_acl(tuple(txn.acl or ()))
        node.touch()
        self._digest_sum = dsum + node_digest(txn.path, node)
        rc.stat = node.stat_wire()

    def _close_session(self, hdr: r.TxnHeader, txn: Any, rc: ApplyResult) -> None:
        session = hdr.clientId
        local = self.ephemerals.pop(session, None)
        deleted: list[str] = []
        rc.deleted = deleted
        in_txn = list(txn.paths2Delete or ()) if txn is not None else None
        order: list[str] = []
        if in_txn is not None:
            order.extend(in_txn)
            if local is not None:
                order.extend(p for p in local if p not in set(in_txn))
        elif local is not None:
            order.extend(local)
        for path in order:
            try:
                self.delete_node(path, hdr.zxid, rc)
                deleted.append(path)
            except TxnError:
                # ZooKeeper logs "Ignoring NoNodeException for path ... while removing ephemeral"
                pass

    def _error(self, hdr: r.TxnHeader, txn: Any, rc: ApplyResult) -> None:
        rc.err = txn.err

    def _check(self, hdr: r.TxnHeader, txn: Any, rc: ApplyResult) -> None:
        rc.path = txn.path

    def _multi(self, hdr: r.TxnHeader, txn: Any, rc: ApplyResult) -> None:
        subs: list[tuple[int, r.Record]] = []
        failed = False
        for sub in txn.txns or ():
            if sub.type == OpCode.ERROR:
                failed = True
            cls = _SUBTXN.get(sub.type)
            if cls is None:
                raise TxnError(Code.MARSHALLINGERROR)
            subs.append((sub.type, cls.decode(sub.data or b"")))
        rc.multi = []
        post_failed = False
        for typ, rec in subs:
            if typ == OpCode.ERROR:
                post_failed = True
            elif failed:
                # DataTree.processTxn(multi): ops before the failing one report OK, later ones
                # RUNTIMEINCONSISTENCY; nothing of a failed multi is applied.
                rec = r.ErrorTxn(Code.RUNTIMEINCONSISTENCY if post_failed else Code.OK)
                typ = OpCode.ERROR
            sub_hdr = r.TxnHeader(hdr.clientId, hdr.cxid, hdr.zxid, hdr.time, typ)
            sub_rc = self.apply(sub_hdr, rec)
            rc.multi.append(sub_rc)
            rc.triggers.extend(sub_rc.triggers)
            if sub_rc.err != 0 and rc.err == 0:
                rc.err = sub_rc.err


def ttl_to_ephemeral_owner(ttl: int) -> int:
    """EphemeralType.TTL.toEphemeralOwner: 0xFF in the top byte, the TTL in the low 40 bits."""
    return to_java_long((0xFF << 56) | ttl)


def ttl_of(owner: int) -> int:
    return owner & 0xFFFFFFFFFF


_APPLY: dict[int, Any] = {
    OpCode.CREATE: DataTree._create,
    OpCode.CREATE2: DataTree._create,
    OpCode.CREATETTL: DataTree._create,
    OpCode.CREATECONTAINER: DataTree._create,
    OpCode.DELETE: DataTree._delete,
    OpCode.DELETECONTAINER: DataTree._delete,
    OpCode.SETDATA: DataTree._set_data,
    OpCode.RECONFIG: DataTree._set_data,
    OpCode.SETACL: DataTree._set_acl,
    OpCode.CLOSESESSION: DataTree._close_session,
    OpCode.ERROR: DataTree._error,
    OpCode.CHECK: DataTree._check,
    OpCode.MULTI: DataTree._multi,
}
