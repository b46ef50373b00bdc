"""Request -> txn: ZooKeeper's ``PrepRequestProcessor.pRequest2Txn``, as pure functions.

Theory
------
A write is validated against the *committed tree plus the changes of txns prepared but not yet
applied* (:class:`PendingChanges`, ZooKeeper's ``outstandingChanges``). Prep never touches the
tree: it returns a txn (type, record) and records the node states the txn will produce, so the
next write prepared before this one is applied sees them (two pipelined creates of the same path:
the second gets NODEEXISTS). A failing request becomes an ``ErrorTxn`` that still consumes a zxid,
as in ZooKeeper (its reply carries the new zxid).

Multi: every op is prepared with the same zxid; after the first failure the rest become
``ErrorTxn(RUNTIMEINCONSISTENCY)`` and the pending changes of the multi are rolled back. An op
that makes ZooKeeper throw something other than a KeeperException (:class:`JavaRuntimeError`:
a read op, a TTL create without a TTL, an ACL id that is null) fails the whole multi with
MARSHALLINGERROR instead -- unless an earlier op already failed, as the rest are then skipped.

Digest (``PrepRequestProcessor.precalculateDigest``): a txn is logged with the tree digest
*after* it, before it is applied, so the digest is computed here. A :class:`ChangeRecord`
carries the node's full persisted stat; :meth:`PendingChanges.add` subtracts the digest of
the path's previous state (pending record, else committed node) and adds the new one, so
:attr:`PendingChanges.digest` is the digest of the tree with every prepared txn applied. A
txn that adds no record (error, createSession, check) carries the current digest; a failed
multi rolls the digest back with its records. The root is keyed ``""`` whether a request
names it ``""`` or ``"/"`` (one pending state per node; ZooKeeper keys the two apart).

Quotas (``ZooKeeperServer.checkQuota``, only with ``zookeeper.enforceQuota=true``): create and
setData are checked against the quota of the deepest quota'd prefix, reading the limits and the
usage from the *committed tree*, not the pending changes, exactly as ZooKeeper does (so the
creates of one multi are each checked alone). Going over a soft limit is only a
:class:`QuotaEvent` for the shell to log; over a hard limit the write fails with QUOTAEXCEEDED
(before BADVERSION for setData). Unreadable limits or stats data make the request fail with
MARSHALLINGERROR, as ZooKeeper's NumberFormatException does.

Checks run in ZooKeeper's order, so the same bad request gets the same error code: e.g. create
checks flags, then the path's shape, then the ACL list (INVALIDACL), then the parent (NONODE), the
parent's CREATE permission, the sequential suffix, the full path (BADARGUMENTS), existence
(NODEEXISTS), then an ephemeral parent (NOCHILDRENFOREPHEMERALS).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trizk.jute import records as r
from trizk.jute.codes import (
    CONTAINER_EPHEMERAL_OWNER,
    Code,
    CreateMode,
    JavaRuntimeError,
    KeeperError,
    OpCode,
    Perms,
)
from trizk.quorum.reconfig import (
    LeaderConfigView,
    ReconfigError,
    ReconfigRequestView,
    next_config,
)
from trizk.quorum.verifier import QuorumVerifier
from trizk.server.auth import acl as aclmod
from trizk.server.common.coreconfig import ServerStats
from trizk.storage.formats.snapshot import calculate_digest, to_java_long
from trizk.storage.tree.datatree import (
    CONFIG_NODE,
    SPECIAL_PATHS,
    DataNode,
    DataTree,
    EphemeralKind,
    ephemeral_kind,
    next_version,
    node_digest,
)
from trizk.storage.tree.datatree import ttl_to_ephemeral_owner as _ttl_owner
from trizk.storage.tree.paths import InvalidPath, is_plain, validate_path
from trizk.storage.tree.quota import StatsTrack, limit_path, stat_path, top_namespace

log = logging.getLogger("trizk.server")

#: EphemeralType.MAX_EXTENDED_SERVER_ID-based TTL bound: the low 40 bits.
MAX_TTL = (1 << 40) - 1


class PrepError(KeeperError):
    """Raised when a write becomes an ErrorTxn."""


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class ChangeRecord:
    """The state a path will have once the pending txns are applied (None fields: deleted)."""

    zxid: int
    path: str
    exists: bool
    data: bytes | None
    acl: tuple[r.ACL, ...]
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    child_count: int
    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    #: the node digest of this state (0 when deleted), set by PendingChanges.add
    digest: int

    def __init__(
        self,
        zxid: int,
        path: str,
        exists: bool,
        data: bytes | None = None,
        acl: tuple[r.ACL, ...] = (),
        version: int = 0,
        cversion: int = 0,
        aversion: int = 0,
        ephemeral_owner: int = 0,
        child_count: int = 0,
        czxid: int = 0,
        mzxid: int = 0,
        pzxid: int = 0,
        ctime: int = 0,
        mtime: int = 0,
        digest: int = 0,
    ) -> None:
        self.zxid = zxid
        self.path = path
        self.exists = exists
        self.data = data
        self.acl = acl
        self.version = version
        self.cversion = cversion
        self.aversion = aversion
        self.ephemeral_owner = ephemeral_owner
        self.child_count = child_count
        self.czxid = czxid
        self.mzxid = mzxid
        self.pzxid = pzxid
        self.ctime = ctime
        self.mtime = mtime
        self.digest = digest

    def change(self, zxid: int) -> ChangeRecord:
        """The record to change for txn ``zxid``. A record fresh from the tree (zxid -1:
        :meth:`PendingChanges.get` builds one per call, nobody else holds it) is taken over;
        a pending one is copied, as it must stay what its own txn left."""
        if self.zxid < 0:
            self.zxid = zxid
            return self
        return ChangeRecord(
            zxid,
            self.path,
            self.exists,
            self.data,
            self.acl,
            self.version,
            self.cversion,
            self.aversion,
            self.ephemeral_owner,
            self.child_count,
            self.czxid,
            self.mzxid,
            self.pzxid,
            self.ctime,
            self.mtime,
            self.digest,
        )

    def node_digest(self) -> int:
        """DigestCalculator.calculateDigest of this state (as datatree.node_digest)."""
        if not self.exists:
            return 0
        return calculate_digest(
            self.path,
            self.data,
            self.czxid,
            self.mzxid,
            self.pzxid,
            self.ctime,
            self.mtime,
            self.version,
            self.cversion,
            self.aversion,
            self.ephemeral_owner,
        )


def _node_record(path: str, n: DataNode) -> ChangeRecord:
    """A record of the committed node ``n`` at ``path`` as it is (zxid -1: fresh from the
    tree, see :meth:`ChangeRecord.change`)."""
    return ChangeRecord(
        -1,
        path,
        True,
        n.data,
        n.acl,
        n.version,
        n.cversion,
        n.aversion,
        n.ephemeral_owner,
        n.num_children(),
        n.czxid,
        n.mzxid,
        n.pzxid,
        n.ctime,
        n.mtime,
    )


class PendingChanges:
    """The one pending-changes view over the committed tree."""

    def __init__(self, tree: DataTree, stats: ServerStats | None = None) -> None:
        self.tree = tree
        #: where ``outstanding_changes_queued/removed`` and digest mismatches are counted
        self.stats = stats if stats is not None else ServerStats()
        self.by_path: dict[str, ChangeRecord] = {}
        self.ordered: list[ChangeRecord] = []
        self._digest = tree.digest
        self.digest_mismatches = 0

    @property
    def digest(self) -> int:
        """The tree digest once every prepared txn is applied (a Java long)."""
        return to_java_long(self._digest)

    def get(self, path: str) -> ChangeRecord:
        if path == "/":
            path = ""
        rec = self.by_path.get(path)
        if rec is None:
            n = self.tree.get(path)
            if n is None:
                raise PrepError(Code.NONODE)
            return _node_record(path, n)
        if not rec.exists:
            raise PrepError(Code.NONODE)
        return rec

    def add(self, rec: ChangeRecord) -> None:
        path = rec.path
        prev = self.by_path.get(path)
        if prev is not None:
            old = prev.digest
        else:
            n = self.tree.get(path)
            old = node_digest(path, n) if n is not None else 0
        self.push(rec, old)

    def push(self, rec: ChangeRecord, old: int) -> None:
        """:meth:`add` ``rec``, whose path's digest so far (pending, else committed) is ``old``."""
        rec.digest = new = rec.node_digest()
        self._digest += new - old
        self.ordered.append(rec)
        self.by_path[rec.path] = rec
        # PrepRequestProcessor.addChangeRecord (also for records a failed multi rolls back)
        self.stats.metrics.outstanding_changes_queued += 1

    def rebase(self, tree: DataTree) -> None:
        """The committed tree was replaced (the AdminServer's ``restore``): look nodes up in
        ``tree`` from now on. The records still pending stay, as ZooKeeper's
        ``outstandingChanges`` survive ``ZooKeeperServer.restoreFromSnapshot``; the digest
        restarts from ``tree``'s plus their changes over it."""
        self.tree = tree
        digest = tree.digest
        for path, rec in self.by_path.items():
            n = tree.get(path)
            digest += rec.digest - (node_digest(path, n) if n is not None else 0)
        self._digest = digest

    def mark(self) -> tuple[int, dict[str, ChangeRecord], int]:
        return len(self.ordered), dict(self.by_path), self._digest

    def rollback(self, mark: tuple[int, dict[str, ChangeRecord], int]) -> None:
        n, saved, digest = mark
        del self.ordered[n:]
        self.by_path = saved
        self._digest = digest

    def committed(self, zxid: int) -> None:
        """Forget the records of txns up to ``zxid`` (they are in the tree now)."""
        i = 0
        ordered = self.ordered
        while i < len(ordered) and ordered[i].zxid <= zxid:
            rec = ordered[i]
            if self.by_path.get(rec.path) is rec:
                del self.by_path[rec.path]
            i += 1
        if i:
            del ordered[:i]
            # ZooKeeperServer.processTxn removes them from outstandingChanges one by one
            self.stats.metrics.outstanding_changes_removed += i
        if not ordered and self._digest != self.tree.digest:
            # Every prepared change is applied: both must agree (ZooKeeper would log
            # "Digests are not matching"). Resync so one bad txn does not taint the rest.
            log.error(
                "digest of the prepared txns %#x != tree digest %#x after zxid %#x",
                self.digest,
                self.tree.digest,
                zxid,
            )
            self.digest_mismatches += 1
            self.stats.metrics.digest_mismatches_count += 1  # DataTree.compareDigest
            self._digest = self.tree.digest


@dataclass(frozen=True, slots=True)
class QuotaEvent:
    """A write that went over a quota: ZooKeeper's rate-limited "Quota exceeded" warning; a
    hard one (the write failed) also counts in mntr's ``quota_exceeded_error_per_namespace``."""

    message: str
    namespace: str | None
    hard: bool


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class PrepContext:
    """What prep needs to know about the request beyond its record (and what it noticed)."""

    session_id: int
    zxid: int
    time: int
    auth: Sequence[tuple[str, str]]
    extended_types: bool
    reconfig_enabled: bool
    #: a leader's view of its configurations (None: not a leader, reconfig unimplemented)
    reconfig: LeaderConfigView | None
    #: the configuration a reconfig proposed (set by prep: ``request.qv``)
    proposed_config: QuorumVerifier | None
    enforce_quota: bool
    quota_events: list[QuotaEvent]
    #: the error an ephemeral create of this request gets in ``validateCreateRequest`` (0:
    #: none): a local session's, EPHEMERALONLOCALSESSION, or SESSIONEXPIRED for a session
    #: the leader does not know as global (``checkGlobalSession``; :mod:`.localsessions`)
    ephemeral_error: int

    def __init__(
        self,
        session_id: int,
        zxid: int,
        time: int,
        auth: Sequence[tuple[str, str]],
        extended_types: bool = False,
        reconfig_enabled: bool = False,
        reconfig: LeaderConfigView | None = None,
        proposed_config: QuorumVerifier | None = None,
        enforce_quota: bool = False,
        quota_events: list[QuotaEvent] | None = None,
        ephemeral_error: int = 0,
    ) -> None:
        self.session_id = session_id
        self.zxid = zxid
        self.time = time
        self.auth = auth
        self.extended_types = extended_types
        self.reconfig_enabled = reconfig_enabled
        self.reconfig = reconfig
        self.proposed_config = proposed_config
        self.enforce_quota = enforce_quota
        self.quota_events = [] if quota_events is None else quota_events
        self.ephemeral_error = ephemeral_error


def _validate(path: str | None) -> str:
    """``path`` if it is a valid znode path, else BADARGUMENTS (a null path too).

    Request fields are typed as what the wire may carry: a ustring may be null. (Compiled
    with mypyc, a null where the annotation says ``str`` would be a TypeError.)"""
    try:
        validate_path(path)
    except InvalidPath:
        raise PrepError(Code.BADARGUMENTS) from None
    assert path is not None  # validate_path refuses a null path
    return path


def _check_acl(rec: ChangeRecord, perm: int, ctx: PrepContext) -> None:
    if not aclmod.check(rec.acl, perm, ctx.auth):
        raise PrepError(Code.NOAUTH)


def _fixup(acl: Sequence[r.ACL] | None, ctx: PrepContext) -> tuple[r.ACL, ...]:
    try:
        return aclmod.fixup(acl, ctx.auth)
    except aclmod.ACLError as e:
        raise PrepError(e.code) from None


def _check_version(current: int, expected: int) -> int:
    if expected != -1 and expected != current:
        raise PrepError(Code.BADVERSION)
    return next_version(current)


def _check_quota(
    tree: DataTree,
    path: str,
    last_data: bytes | None,
    data: bytes | None,
    count_diff: int,
    ctx: PrepContext,
) -> None:
    """``ZooKeeperServer.checkQuota`` for a create (``count_diff`` 1) or a setData (0)."""
    if not ctx.enforce_quota:
        return
    prefix = tree.max_prefix_with_quota(path)
    if not prefix:
        return
    size = len(data) if data else 0
    bytes_diff = size if count_diff else size - (len(last_data) if last_data else 0)
    limit_node = tree.get(limit_path(prefix))
    if limit_node is None:
        log.error("Missing limit node for quota %s", limit_path(prefix))
        return
    limits = StatsTrack.parse(limit_node.data)  # StatsTrackError: MARSHALLINGERROR
    check_count = count_diff != 0 and (limits.count > -1 or limits.count_hard_limit > -1)
    check_bytes = bytes_diff != 0 and (limits.nbytes > -1 or limits.byte_hard_limit > -1)
    if not check_count and not check_bytes:
        return
    stat_node = tree.get(stat_path(prefix))
    if stat_node is None:
        log.error("Missing node for stat %s", stat_path(prefix))
        return
    usage = StatsTrack.parse(stat_node.data)
    checks = []
    if check_count:
        checks.append(
            ("count", "Count", usage.count + count_diff, limits.count_hard_limit, limits.count)
        )
    if check_bytes:
        checks.append(
            ("bytes", "Byte", usage.nbytes + bytes_diff, limits.byte_hard_limit, limits.nbytes)
        )
    for what, label, new, hard_limit, soft_limit in checks:
        new = to_java_long(new)
        hard = hard_limit > -1
        limit = hard_limit if hard else soft_limit
        if new > limit:
            kind = "hard" if hard else "soft"
            msg = f"Quota exceeded: {prefix} [current {what}={new}, {kind}{label}Limit={limit}]"
            ctx.quota_events.append(QuotaEvent(msg, top_namespace(path), hard))
            if hard:
                raise PrepError(Code.QUOTAEXCEEDED)


def _path_for_delete(path: str | None) -> tuple[str, str]:
    """getParentPathAndValidate: (``path``, its parent's path)."""
    if path is None:  # path.lastIndexOf on null
        raise JavaRuntimeError("NullPointerException: null path")
    i = path.rfind("/")
    if i == -1 or "\0" in path or path in SPECIAL_PATHS:
        raise PrepError(Code.BADARGUMENTS)
    return path, path[:i]


Txn = tuple[int, r.Record | None]


def prep_create(op: int, req: Any, pv: PendingChanges, ctx: PrepContext) -> Txn:
    if op == OpCode.CREATETTL and not isinstance(req, r.CreateTTLRequest):
        # A multi's create op with TTL flags but no TTL field: pRequest2TxnCreate's cast of
        # the CreateRequest to CreateTTLRequest throws ClassCastException.
        raise JavaRuntimeError("ClassCastException: CreateRequest is not a CreateTTLRequest")
    try:
        mode = CreateMode(req.flags)
    except ValueError:
        raise PrepError(Code.BADARGUMENTS) from None
    ttl = req.ttl if op == OpCode.CREATETTL else -1
    # validateCreateRequest
    if mode.ttl and not ctx.extended_types:
        raise PrepError(Code.UNIMPLEMENTED)
    if mode.ttl:
        if ttl <= 0 or ttl > MAX_TTL:
            raise PrepError(Code.BADARGUMENTS)
    elif ttl >= 0:
        raise PrepError(Code.BADARGUMENTS)
    if mode.ephemeral and ctx.ephemeral_error:
        raise PrepError(Code(ctx.ephemeral_error))
    path: str | None = req.path
    if path is None:
        raise PrepError(Code.MARSHALLINGERROR)
    # validatePathForCreate
    i = path.rfind("/")
    if i == -1 or "\0" in path:
        raise PrepError(Code.BADARGUMENTS)
    parent_path = path[:i]
    acl = _fixup(req.acl, ctx)
    parent = pv.get(parent_path)
    _check_acl(parent, Perms.CREATE, ctx)
    if mode.sequential:
        path = f"{path}{parent.cversion:010d}"
    _validate(path)
    try:
        pv.get(path)
        raise PrepError(Code.NODEEXISTS)
    except PrepError as e:
        if e.code != Code.NONODE:
            raise
    if ephemeral_kind(parent.ephemeral_owner, ctx.extended_types) == EphemeralKind.NORMAL:
        raise PrepError(Code.NOCHILDRENFOREPHEMERALS)
    new_cversion = next_version(parent.cversion)
    _check_quota(pv.tree, path, None, req.data, 1, ctx)
    txn: r.Record
    if op == OpCode.CREATECONTAINER:
        txn = r.CreateContainerTxn(path, req.data, acl, new_cversion)
        owner = CONTAINER_EPHEMERAL_OWNER
    elif op == OpCode.CREATETTL:
        txn = r.CreateTTLTxn(path, req.data, acl, new_cversion, ttl)
        owner = _ttl_owner(ttl)
    else:
        txn = r.CreateTxn(path, req.data, acl, mode.ephemeral, new_cversion)
        owner = ctx.session_id if mode.ephemeral else 0
    p2 = parent.change(ctx.zxid)
    p2.child_count += 1
    p2.cversion = new_cversion
    p2.pzxid = ctx.zxid
    pv.add(p2)
    z, t = ctx.zxid, ctx.time
    pv.add(ChangeRecord(z, path, True, req.data, acl, 0, 0, 0, owner, 0, z, z, z, t, t))
    return op, txn


def _stage_delete(
    parent: ChangeRecord, path: str, pv: PendingChanges, ctx: PrepContext
) -> r.DeleteTxn:
    """The pending changes of deleting ``path``: the parent loses a child, the node goes."""
    p2 = parent.change(ctx.zxid)
    p2.child_count -= 1
    p2.pzxid = ctx.zxid
    pv.add(p2)
    pv.add(ChangeRecord(ctx.zxid, path, False))
    return r.DeleteTxn(path)


def prep_delete(op: int, req: Any, pv: PendingChanges, ctx: PrepContext) -> Txn:
    path, parent_path = _path_for_delete(req.path)
    parent = pv.get(parent_path)
    _check_acl(parent, Perms.DELETE, ctx)
    node = pv.get(path)
    _check_version(node.version, req.version)
    if node.child_count > 0:
        raise PrepError(Code.NOTEMPTY)
    return op, _stage_delete(parent, path, pv, ctx)


def prep_delete_container(op: int, req: Any, pv: PendingChanges, ctx: PrepContext) -> Txn:
    path, parent_path = _path_for_delete(req.path)
    node = pv.get(path)
    if node.child_count > 0:
        raise PrepError(Code.NOTEMPTY)
    if ephemeral_kind(node.ephemeral_owner, ctx.extended_types) == EphemeralKind.NORMAL:
        raise PrepError(Code.BADVERSION)
    parent = pv.get(parent_path)
    return op, _stage_delete(parent, path, pv, ctx)


def prep_set_data(op: int, req: Any, pv: PendingChanges, ctx: PrepContext) -> Txn:
    path = _validate(req.path)
    node = pv.get(path)
    _check_acl(node, Perms.WRITE, ctx)
    _check_quota(pv.tree, path, node.data, req.data, 0, ctx)
    new_version = _check_version(node.version, req.version)
    pv.add(_set_data_record(node, ctx.zxid, ctx.time, req.data, new_version))
    return op, r.SetDataTxn(path, req.data, new_version)


def _set_data_record(
    node: ChangeRecord, zxid: int, time: int, data: bytes | None, version: int
) -> ChangeRecord:
    """The record of ``node`` after txn ``zxid`` set its data."""
    n2 = node.change(zxid)
    n2.version = version
    n2.data = data
    n2.mtime = time
    n2.mzxid = zxid
    return n2


_INT = struct.Struct(">i")
_WRITE = int(Perms.WRITE)  # a plain int: int & IntFlag would run enum code
#: where a SetDataRequest's path bytes start in its frame: after the RequestHeader (xid, type)
#: and the path's length
_SET_DATA_PATH_AT = 12


def fast_set_data(frame: bytes, pv: PendingChanges, zxid: int, time: int) -> r.SetDataTxn | None:
    """The common setData straight from its request frame: what :func:`prep_set_data` does for
    a request that succeeds, without the request record and the generic checks. Returns the
    txn, its change recorded in ``pv``; or None, changing nothing, for the general path to
    prepare -- unless all of the following hold, where each one stands for a check it makes:

    * the frame is a SetDataRequest in its plain encoding (a path of at least one byte, data
      not null, the version; bytes after it are ignored, as the decoder ignores them);
    * no change to the path is pending, and its node is in the committed tree, not the root,
      and its path is plain (:func:`is_plain`: so ``validate_path`` accepts it);
    * world:anyone may WRITE it (so does every client: the ACL check passes);
    * the expected version is -1 or the node's.

    The caller has checked the session (``checkSession``) and that quotas are not enforced
    (``enforceQuota=false``: ``checkQuota`` does nothing). A property test holds both paths
    to the same txn, records and digest."""
    n = len(frame)
    if n < _SET_DATA_PATH_AT + 9:
        return None
    (plen,) = _INT.unpack_from(frame, 8)
    at = _SET_DATA_PATH_AT + plen  # the data's length
    if plen <= 0 or at + 8 > n:
        return None
    (dlen,) = _INT.unpack_from(frame, at)
    end = at + 4 + dlen  # the version
    if dlen < 0 or end + 4 > n:
        return None
    path = frame[_SET_DATA_PATH_AT:at].decode("utf-8", "replace")
    if path in pv.by_path:
        return None
    node = pv.tree.nodes.get(path)
    if node is None or path == "/" or not is_plain(path) or not node.world_perms() & _WRITE:
        return None
    (expected,) = _INT.unpack_from(frame, end)
    version = node.version
    if expected != -1 and expected != version:
        return None
    data = frame[at + 4 : end]
    version = next_version(version)
    rec = _set_data_record(_node_record(path, node), zxid, time, data, version)
    pv.push(rec, node_digest(path, node))
    return r.SetDataTxn(path, data, version)


def prep_set_acl(op: int, req: Any, pv: PendingChanges, ctx: PrepContext) -> Txn:
    path = _validate(req.path)
    acl = _fixup(req.acl, ctx)
    node = pv.get(path)
    _check_acl(node, Perms.ADMIN, ctx)
    new_version = _check_version(node.aversion, req.version)
    n2 = node.change(ctx.zxid)
    n2.aversion = new_version
    n2.acl = acl
    pv.add(n2)
    return op, r.SetACLTxn(path, acl, new_version)


def prep_check(op: int, req: Any, pv: PendingChanges, ctx: PrepContext) -> Txn:
    path = _validate(req.path)
    node = pv.get(path)
    _check_acl(node, Perms.READ, ctx)
    return op, r.CheckVersionTxn(path, _check_version(node.version, req.version))


def prep_reconfig(op: int, req: Any, pv: PendingChanges, ctx: PrepContext) -> Txn:
    """``OpCode.reconfig`` (quorum/reconfig.py has the order of the checks): the new
    configuration's string is set on ``/zookeeper/config`` by a SetDataTxn of version -1."""
    if not ctx.reconfig_enabled:
        raise PrepError(Code.RECONFIGDISABLED)
    view = ctx.reconfig
    if view is None:
        raise PrepError(Code.UNIMPLEMENTED)  # standalone: "reconfiguration currently not supported"
    ask = ReconfigRequestView(
        req.joiningServers, req.leavingServers, req.newMembers, req.curConfigId
    )
    try:
        qv = next_config(
            view.last_seen,
            view.committed_version,
            ask,
            ctx.zxid,
            standalone_enabled=view.standalone_enabled,
            multi_address=view.multi_address,
        )
    except ReconfigError as e:
        raise PrepError(e.code) from None
    if not view.quorum_synced(qv):
        raise PrepError(Code.NEWCONFIGNOQUORUM)
    node = pv.get(CONFIG_NODE)
    _check_acl(node, Perms.WRITE, ctx)  # world:anyone READ (ZOOKEEPER-2014): super only
    data = qv.to_string().encode("utf-8")
    pv.add(_set_data_record(node, ctx.zxid, ctx.time, data, -1))
    ctx.proposed_config = qv
    return op, r.SetDataTxn(CONFIG_NODE, data, -1)


def prep_close_session(pv: PendingChanges, ctx: PrepContext) -> Txn:
    es = pv.tree.ephemerals_of(ctx.session_id)
    for c in pv.ordered:
        if not c.exists:
            es.discard(c.path)
        elif c.ephemeral_owner == ctx.session_id:
            es.add(c.path)
    for path in es:
        # As ZooKeeper with digests on: the parent's pzxid moves (and, unlike ZooKeeper's
        # record, its child count drops, so a delete of the parent prepared next succeeds).
        try:
            parent = pv.get(path[: path.rfind("/")])
        except PrepError:
            parent = None
        if parent is not None:
            p2 = parent.change(ctx.zxid)
            p2.child_count -= 1
            p2.pzxid = ctx.zxid
            pv.add(p2)
        pv.add(ChangeRecord(ctx.zxid, path, False))
    return OpCode.CLOSESESSION, r.CloseSessionTxn(tuple(es))


PrepFn = Callable[[int, Any, PendingChanges, PrepContext], Txn]

#: opcode -> (request record, prep function). Multi sub-ops use the same table.
WRITE_OPS: dict[int, tuple[type[r.Record], PrepFn]] = {
    OpCode.CREATE: (r.CreateRequest, prep_create),
    OpCode.CREATE2: (r.CreateRequest, prep_create),
    OpCode.CREATECONTAINER: (r.CreateRequest, prep_create),
    OpCode.CREATETTL: (r.CreateTTLRequest, prep_create),
    OpCode.DELETE: (r.DeleteRequest, prep_delete),
    OpCode.DELETECONTAINER: (r.DeleteRequest, prep_delete_container),
    OpCode.SETDATA: (r.SetDataRequest, prep_set_data),
    OpCode.SETACL: (r.SetACLRequest, prep_set_acl),
    OpCode.CHECK: (r.CheckVersionRequest, prep_check),
    OpCode.RECONFIG: (r.ReconfigRequest, prep_reconfig),
}

#: Sub-op types a multi may carry (MultiOperationRecord.deserialize).
MULTI_SUB_OPS = frozenset(
    {
        OpCode.CREATE,
        OpCode.CREATE2,
        OpCode.CREATETTL,
        OpCode.CREATECONTAINER,
        OpCode.DELETE,
        OpCode.SETDATA,
        OpCode.CHECK,
    }
)


def prep_multi(
    ops: Sequence[tuple[int, r.Record]], pv: PendingChanges, ctx: PrepContext
) -> tuple[r.MultiTxn, Code | None]:
    """Prepare a multi; returns the MultiTxn and the first error (None if all succeeded)."""
    mark = pv.mark()
    txns: list[r.Txn] = []
    failure: Code | None = None
    for op, req in ops:
        if failure is not None:
            txns.append(r.Txn(OpCode.ERROR, r.ErrorTxn(Code.RUNTIMEINCONSISTENCY).encode()))
            continue
        try:
            if op not in WRITE_OPS:
                # a getData/getChildren op: pRequest2Txn makes no txn, and serialising the
                # missing txn throws NullPointerException
                raise JavaRuntimeError(f"NullPointerException: no txn for op type {op}")
            typ, txn = WRITE_OPS[op][1](op, req, pv, ctx)
            assert txn is not None
            txns.append(r.Txn(typ, txn.encode()))
        except PrepError as e:
            failure = e.code
            txns.append(r.Txn(OpCode.ERROR, r.ErrorTxn(e.code).encode()))
            pv.rollback(mark)
        except ValueError:
            # Not a KeeperException (an unreadable quota node): ZooKeeper fails the whole multi
            # with MARSHALLINGERROR; the caller does that, the pending changes go first.
            pv.rollback(mark)
            raise
    return r.MultiTxn(tuple(txns)), failure
