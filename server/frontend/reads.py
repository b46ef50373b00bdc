"""Read operations and other non-txn requests (``FinalRequestProcessor``'s read cases).

Each handler takes the request record and a :class:`ReadContext` and returns the response
record (``None`` for a header-only reply) or raises :class:`ReadError` with the code ZooKeeper
answers. Handlers may register watches and queue watch events (setWatches) through the context;
they never change the tree.

Facts kept from ZooKeeper 3.8:
* exists registers its data watch whether or not the node exists; NONODE is its normal answer
  for a missing node. A path containing NUL is BADARGUMENTS for exists only; other reads simply
  find no node.
* getData/getChildren check READ *before* registering the watch: a denied read sets no watch.
* getACL needs READ or ADMIN; without ADMIN, digest ids come back as ``user:x``.
* A read of ``""`` finds the root (ZooKeeper keys the root as ``""``).
* A null path (Jute length -1) is a NullPointerException where ZooKeeper first uses it
  (``getNode(null)`` on its ConcurrentHashMap, ``path.indexOf`` in exists): MARSHALLINGERROR
  (:class:`JavaRuntimeError`). sync answers its null path back, getEphemerals takes null as
  "all", addWatch/setWatches2 register a null-path watch that never fires, and a second one
  (or removing it) throws in ``WatcherModeManager`` (:func:`add_null_watch`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from trizk.jute import records as r
from trizk.jute.codes import (
    AddWatchMode,
    Code,
    EventType,
    JavaRuntimeError,
    KeeperError,
    OpCode,
    Perms,
    WatcherType,
)
from trizk.server.auth import acl as aclmod
from trizk.server.common.servermetrics import STAT_OVERHEAD_BYTES, SummarySet
from trizk.server.frontend.requests import parse_multi, run_multi_read
from trizk.server.frontend.watches import (
    PERSISTENT,
    PERSISTENT_RECURSIVE,
    STANDARD,
    WatchManager,
    WatchTable,
)
from trizk.storage.tree.datatree import DataNode, DataTree


class ReadError(KeeperError):
    """Raised when a read is answered with an error code."""


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class ReadContext:
    tree: DataTree
    watches: WatchManager
    watcher: Hashable
    session_id: int
    auth: list[tuple[str, str]]
    #: watch events to deliver to this connection before the reply: (type, path)
    events: list[tuple[EventType, str]]
    #: the server's ``read_per_namespace`` (DataTree.updateReadStat), if measured
    read_stats: SummarySet | None
    #: answer as ZooKeeper 3.9 (``CoreConfig.zk39``)
    zk39: bool

    def __init__(
        self,
        tree: DataTree,
        watches: WatchManager,
        watcher: Hashable,
        session_id: int,
        auth: list[tuple[str, str]],
        events: list[tuple[EventType, str]] | None = None,
        read_stats: SummarySet | None = None,
        zk39: bool = False,
    ) -> None:
        self.tree = tree
        self.watches = watches
        self.watcher = watcher
        self.session_id = session_id
        self.auth = auth
        self.events = [] if events is None else events
        self.read_stats = read_stats
        self.zk39 = zk39


def _read_stat(ctx: ReadContext, path: str, size: int) -> None:
    """``DataTree.updateReadStat``: path + bytes read + the Stat's fixed size, by namespace."""
    if ctx.read_stats is not None:
        ctx.read_stats.add_path(path, len(path) + size + STAT_OVERHEAD_BYTES)


def _null(path: str | None) -> str:
    if path is None:
        raise JavaRuntimeError("NullPointerException: null path")
    return path


def _node(ctx: ReadContext, path: str | None) -> DataNode:
    n = ctx.tree.get(_null(path))
    if n is None:
        raise ReadError(Code.NONODE)
    return n


def _check(ctx: ReadContext, n: DataNode, perm: int) -> None:
    if not n.world_perms() & int(perm) and not aclmod.check(n.acl, perm, ctx.auth):
        raise ReadError(Code.NOAUTH)


def read_exists(req: Any, ctx: ReadContext) -> r.Record:
    path = _null(req.path)
    if "\0" in path:
        raise ReadError(Code.BADARGUMENTS)
    if ctx.zk39:
        # 3.9 (ZOOKEEPER-2590): an existing node needs READ, checked before the watch is set
        found = ctx.tree.get(path)
        if found is not None:
            _check(ctx, found, Perms.READ)
    if req.watch:
        ctx.watches.data.add(path, ctx.watcher)
    n = _node(ctx, path)
    _read_stat(ctx, path, 0)  # statNode
    return r.ExistsResponse(n.stat())


def read_get_data(req: Any, ctx: ReadContext) -> r.Record:
    n = _node(ctx, req.path)
    _check(ctx, n, Perms.READ)
    if req.watch:
        ctx.watches.data.add(req.path, ctx.watcher)
    _read_stat(ctx, req.path, len(n.data) if n.data else 0)
    return r.GetDataResponse(n.data, n.stat())


_INT = struct.Struct(">i")
_PATH_AT = 12  # RequestHeader (xid, type), then GetDataRequest's path
_READ = int(Perms.READ)  # a plain int: int & IntFlag would run enum code


def _plain_node(frame: bytes, tree: DataTree) -> tuple[str, bool, DataNode] | None:
    """(path, watch, node) of a getData/exists request in its plain encoding for a node that
    exists, else None: a missing node, a null or truncated path, or a watch flag other than 0
    or 1 is left to the general path. The path decodes exactly as the record decoder decodes
    it."""
    if len(frame) <= _PATH_AT:
        return None
    (n,) = _INT.unpack_from(frame, 8)
    end = _PATH_AT + n
    if n < 0 or len(frame) <= end:
        return None
    watch = frame[end]
    if watch > 1:
        return None
    path = frame[_PATH_AT:end].decode("utf-8", "replace")
    node = tree.get(path)
    if node is None:
        return None
    return path, watch == 1, node


def fast_get_data(
    frame: bytes,
    tree: DataTree,
    watches: WatchManager,
    watcher: Hashable,
    read_stats: SummarySet | None,
) -> bytes | None:
    """The common getData, straight from its frame: a node every client may read. Returns the
    reply's body (the node's cached GetDataResponse), or None for the general path
    (:func:`read_get_data`) to answer -- a missing node, an ACL to check against the client's
    ids, a request not in its plain encoding. What it answers, it answers as the general path
    would: same watch, same read statistics."""
    req = _plain_node(frame, tree)
    if req is None:
        return None
    path, watch, node = req
    if not node.world_perms() & _READ:
        return None
    if watch:
        watches.data.add(path, watcher)
    if read_stats is not None:
        d = node.data
        read_stats.add_path(path, len(path) + (len(d) if d else 0) + STAT_OVERHEAD_BYTES)
    return node.read_wire()


def fast_exists(
    frame: bytes,
    tree: DataTree,
    watches: WatchManager,
    watcher: Hashable,
    read_stats: SummarySet | None,
) -> bytes | None:
    """The common exists, as :func:`fast_get_data`: a node that exists and every client may
    read (3.9 checks READ, 3.8 no ACL at all). Returns the reply's body (the node's Stat), or
    None for :func:`read_exists` to answer (a missing node registers its watch there, a path
    with NUL is BADARGUMENTS, and an ACL is checked against the client's ids)."""
    req = _plain_node(frame, tree)
    if req is None:
        return None
    path, watch, node = req
    if "\0" in path or not node.world_perms() & _READ:
        return None
    if watch:
        watches.data.add(path, watcher)
    if read_stats is not None:
        read_stats.add_path(path, len(path) + STAT_OVERHEAD_BYTES)  # statNode
    return node.stat_wire()


def _plain_children(
    frame: bytes,
    tree: DataTree,
    watches: WatchManager,
    watcher: Hashable,
    read_stats: SummarySet | None,
) -> tuple[DataNode, bytes] | None:
    """getChildren and getChildren2 (same request layout as getData) as
    :func:`fast_get_data` answers getData: a node every client may read; the node and its
    children as the reply encodes them (:meth:`DataNode.children_wire`, cached), after the
    same watch and read statistics as :func:`_get_children`."""
    req = _plain_node(frame, tree)
    if req is None:
        return None
    path, watch, node = req
    if not node.world_perms() & _READ:
        return None
    if watch:
        watches.child.add(path, watcher)
    wire, chars = node.children_wire()
    if read_stats is not None:
        read_stats.add_path(path, len(path) + chars + STAT_OVERHEAD_BYTES)
    return node, wire


def fast_get_children(
    frame: bytes,
    tree: DataTree,
    watches: WatchManager,
    watcher: Hashable,
    read_stats: SummarySet | None,
) -> bytes | None:
    """The common getChildren: a GetChildrenResponse's body, or None for
    :func:`read_get_children` to answer (see :func:`_plain_children`)."""
    got = _plain_children(frame, tree, watches, watcher, read_stats)
    return None if got is None else got[1]


def fast_get_children2(
    frame: bytes,
    tree: DataTree,
    watches: WatchManager,
    watcher: Hashable,
    read_stats: SummarySet | None,
) -> bytes | None:
    """The common getChildren2: a GetChildren2Response's body (the children, then the
    node's Stat), or None for :func:`read_get_children2` to answer."""
    got = _plain_children(frame, tree, watches, watcher, read_stats)
    return None if got is None else got[1] + got[0].stat_wire()


FastRead = Callable[[bytes, DataTree, WatchManager, Hashable, SummarySet | None], bytes | None]

#: reads answered straight from the frame when they can be (see fast_get_data)
FAST_READS: dict[int, FastRead] = {
    OpCode.GETDATA: fast_get_data,
    OpCode.EXISTS: fast_exists,
    OpCode.GETCHILDREN: fast_get_children,
    OpCode.GETCHILDREN2: fast_get_children2,
}


def _get_children(req: Any, ctx: ReadContext) -> tuple[DataNode, tuple[str, ...]]:
    """getChildren and getChildren2 alike: the node, checked for READ, watched if asked, and
    its children's names (counted in the read statistics)."""
    n = _node(ctx, req.path)
    _check(ctx, n, Perms.READ)
    if req.watch:
        ctx.watches.child.add(req.path, ctx.watcher)
    names = tuple(n.child_names())
    _read_stat(ctx, req.path, sum(map(len, names)))
    return n, names


def read_get_children(req: Any, ctx: ReadContext) -> r.Record:
    return r.GetChildrenResponse(_get_children(req, ctx)[1])


def read_get_children2(req: Any, ctx: ReadContext) -> r.Record:
    n, names = _get_children(req, ctx)
    return r.GetChildren2Response(names, n.stat())


def read_get_acl(req: Any, ctx: ReadContext) -> r.Record:
    n = _node(ctx, req.path)
    _check(ctx, n, Perms.READ | Perms.ADMIN)
    acl = n.acl
    if not aclmod.check(n.acl, Perms.ADMIN, ctx.auth):
        acl = tuple(aclmod.mask_digest(a) for a in acl)
    return r.GetACLResponse(acl, n.stat())


def read_sync(req: Any, ctx: ReadContext) -> r.Record:
    return r.SyncResponse(req.path)


def read_all_children_number(req: Any, ctx: ReadContext) -> r.Record:
    n = _node(ctx, req.path)
    _check(ctx, n, Perms.READ)
    return r.GetAllChildrenNumberResponse(ctx.tree.all_children_number(req.path))


def read_get_ephemerals(req: Any, ctx: ReadContext) -> r.Record:
    prefix = req.prefixPath
    eph = list(ctx.tree.ephemerals_of(ctx.session_id))
    if prefix is not None and prefix.strip() not in ("", "/"):
        eph = [p for p in eph if p.startswith(prefix)]
    return r.GetEphemeralsResponse(tuple(eph))


def _rewatch(
    ctx: ReadContext, entries: tuple[str | None, ...] | None, rel: int, children: bool
) -> None:
    """One data (``children`` False) or child watch list of setWatches: a node gone since the
    client's ``rel`` zxid gets NodeDeleted, one changed after it (``mzxid``, or ``pzxid`` for
    its children) gets NodeDataChanged / NodeChildrenChanged, any other is watched again."""
    tree, w = ctx.tree, ctx.watcher
    events = ctx.events
    for entry in entries or ():
        path = _null(entry)
        n = tree.get(path)
        if n is None:
            events.append((EventType.NODEDELETED, path))
        elif children and n.pzxid > rel:
            events.append((EventType.NODECHILDRENCHANGED, path))
        elif not children and n.mzxid > rel:
            events.append((EventType.NODEDATACHANGED, path))
        else:
            (ctx.watches.child if children else ctx.watches.data).add(path, w)


def _set_watches(
    ctx: ReadContext,
    rel: int,
    data: tuple[str | None, ...] | None,
    exist: tuple[str | None, ...] | None,
    child: tuple[str | None, ...] | None,
    persistent: Any = None,
    recursive: Any = None,
) -> None:
    tree, w = ctx.tree, ctx.watcher
    # DataTree.setWatches iterates each list in turn: a null one throws (NullPointerException)
    # after the lists before it took effect, and the client gets MARSHALLINGERROR.
    lists = [data, exist, child] + ([persistent, recursive] if persistent is not _V1 else [])
    first_null = next((i for i, v in enumerate(lists) if v is None), len(lists))
    if persistent is _V1:
        persistent = recursive = ()
    if first_null < len(lists):
        data, exist, child = (v if i < first_null else () for i, v in enumerate(lists[:3]))
        if len(lists) > 3:
            persistent = lists[3] if first_null > 3 else ()
            recursive = ()
    # A null entry of the data/exist/child lists: getNode(null) throws NullPointerException after
    # the entries before it took effect. A null entry of the persistent lists is a null-path
    # watch (add_null_watch: it never fires, and a second one throws).
    # (Entries of the lists are str | None, as a vector<ustring> decodes: a compiled loop
    # variable typed str would raise TypeError at a null.)
    _rewatch(ctx, data, rel, False)
    for entry in exist or ():
        path = _null(entry)
        if tree.get(path) is not None:
            ctx.events.append((EventType.NODECREATED, path))
        else:
            ctx.watches.data.add(path, w)
    _rewatch(ctx, child, rel, True)
    for entry in persistent or ():
        if entry is None and not ctx.zk39:  # 3.9's WatchStats takes a null path as any other
            add_null_watch(ctx.watches.child, w, PERSISTENT)
            add_null_watch(ctx.watches.data, w, PERSISTENT)
            continue
        ctx.watches.child.add(entry, w, PERSISTENT)
        ctx.watches.data.add(entry, w, PERSISTENT)
    for entry in recursive or ():
        if entry is None and not ctx.zk39:
            add_null_watch(ctx.watches.child, w, PERSISTENT_RECURSIVE)
            add_null_watch(ctx.watches.data, w, PERSISTENT_RECURSIVE)
            continue
        ctx.watches.data.add(entry, w, PERSISTENT_RECURSIVE)
    if first_null < len(lists):
        raise ReadError(Code.MARSHALLINGERROR)


_V1: Any = object()  # marks a SetWatches (v1) request: no persistent lists


def read_set_watches(req: Any, ctx: ReadContext) -> None:
    _set_watches(
        ctx, req.relativeZxid, req.dataWatches, req.existWatches, req.childWatches, _V1, _V1
    )


def read_set_watches2(req: Any, ctx: ReadContext) -> None:
    _set_watches(
        ctx,
        req.relativeZxid,
        req.dataWatches,
        req.existWatches,
        req.childWatches,
        req.persistentWatches,
        req.persistentRecursiveWatches,
    )


def add_null_watch(table: WatchTable, watcher: Hashable, mode: int) -> None:
    """``WatchManager.addWatch(null, watcher, mode)`` for a persistent mode: the null path goes
    into the watch table (a HashMap takes a null key), then ``watcherModes.put(Key(watcher,
    null))``; if that key is already there, ``Key.equals`` calls ``path.equals`` on the null
    path: NullPointerException (MARSHALLINGERROR), the table entry staying."""
    table.add(None, watcher, mode)
    if watcher in table.null_modes:
        raise JavaRuntimeError("NullPointerException: WatcherModeManager.Key(null).equals")
    table.null_modes.add(watcher)


def remove_null_watch(table: WatchTable, watcher: Hashable) -> bool:
    """``WatchManager.removeWatcher(null, watcher)``: False without a null-path watch; else the
    table entry goes, and removing its mode entry throws as in :func:`add_null_watch` (the mode
    entry stays, so the next add of a null watch throws too)."""
    if not table.remove(None, watcher):
        return False
    if watcher in table.null_modes:
        raise JavaRuntimeError("NullPointerException: WatcherModeManager.Key(null).equals")
    return True


def read_add_watch(req: Any, ctx: ReadContext) -> r.Record:
    # DataTree.addWatch (3.8.0) puts the watch in both tables whatever the mode; an unknown
    # mode throws in WatcherMode.fromZooDef (MARSHALLINGERROR).
    if req.mode not in (AddWatchMode.PERSISTENT, AddWatchMode.PERSISTENT_RECURSIVE):
        raise ReadError(Code.MARSHALLINGERROR)
    mode = PERSISTENT_RECURSIVE if req.mode == AddWatchMode.PERSISTENT_RECURSIVE else PERSISTENT
    if ctx.zk39:
        # 3.9 (ZOOKEEPER-4466/4472): a recursive watch goes into the data table only, and
        # WatchStats takes a null path like any other (no WatcherModeManager key to throw)
        ctx.watches.data.add(req.path, ctx.watcher, mode)
        if mode == PERSISTENT:
            ctx.watches.child.add(req.path, ctx.watcher, mode)
        return r.ErrorResponse(0)
    if req.path is None:  # data table first, then child (DataTree.addWatch)
        add_null_watch(ctx.watches.data, ctx.watcher, mode)
        add_null_watch(ctx.watches.child, ctx.watcher, mode)
        return r.ErrorResponse(0)
    ctx.watches.data.add(req.path, ctx.watcher, mode)
    ctx.watches.child.add(req.path, ctx.watcher, mode)
    return r.ErrorResponse(0)


def _watch_tables(ctx: ReadContext, typ: int) -> list[WatchTable]:
    # ZooKeeper 3.8.0's WatcherType.fromInt knows only Children(1), Data(2), Any(3).
    if typ not in (WatcherType.CHILDREN, WatcherType.DATA, WatcherType.ANY):
        raise ReadError(Code.MARSHALLINGERROR)
    if typ == WatcherType.CHILDREN:
        return [ctx.watches.child]
    if typ == WatcherType.DATA:
        return [ctx.watches.data]
    return [ctx.watches.data, ctx.watches.child]


#: 3.9's DataTree.containsWatcher / removeWatch by WatcherType: (table, mode) pairs, the mode
#: None for "any mode" (ZOOKEEPER-4472). Any tries the child table first.
_TYPE_MODES_39: dict[int, tuple[tuple[bool, int | None], ...]] = {
    WatcherType.CHILDREN: ((True, STANDARD),),
    WatcherType.DATA: ((False, STANDARD),),
    WatcherType.ANY: ((True, None), (False, None)),
    WatcherType.PERSISTENT: ((True, PERSISTENT), (False, PERSISTENT)),
    WatcherType.PERSISTENT_RECURSIVE: ((False, PERSISTENT_RECURSIVE),),
}


def _type_modes_39(typ: int) -> tuple[tuple[bool, int | None], ...]:
    # WatcherType.fromInt: an unknown type throws (MARSHALLINGERROR)
    found = _TYPE_MODES_39.get(typ)
    if found is None:
        raise ReadError(Code.MARSHALLINGERROR)
    return found


def _check_watches_39(req: Any, ctx: ReadContext) -> None:
    # WatchManager.containsWatcher looks the (watcher, path) stats up: no path iteration, so
    # a null or relative path is simply not watched (NOWATCHER)
    for child, mode in _type_modes_39(req.type):
        table = ctx.watches.child if child else ctx.watches.data
        if table.contains(req.path, ctx.watcher, mode):
            return
    raise ReadError(Code.NOWATCHER)


def _remove_watches_39(req: Any, ctx: ReadContext) -> None:
    removed = False
    for child, mode in _type_modes_39(req.type):
        table = ctx.watches.child if child else ctx.watches.data
        if mode is None:
            removed = table.remove(req.path, ctx.watcher) or removed
        else:
            removed = table.remove_mode(req.path, ctx.watcher, mode) or removed
    if not removed:
        raise ReadError(Code.NOWATCHER)


def read_check_watches(req: Any, ctx: ReadContext) -> None:
    if ctx.zk39:
        return _check_watches_39(req, ctx)
    # WatchManager.containsWatcher in 3.8.0 answers true when *any* watcher watches the path
    # (it checks watchTable.get(path) != null at the leaf), and its PathParentIterator throws
    # on a path without "/" (substring(0, -1)): MARSHALLINGERROR.
    # An empty path has no iteration at all (PathParentIterator.hasNext is false for ""):
    # NOWATCHER, whoever watches "".
    tables = _watch_tables(ctx, req.type)
    path = _null(req.path)
    if path and "/" not in path:
        raise ReadError(Code.MARSHALLINGERROR)
    if not path or not any(path in t.by_path for t in tables):
        raise ReadError(Code.NOWATCHER)


def read_remove_watches(req: Any, ctx: ReadContext) -> None:
    if ctx.zk39:
        return _remove_watches_39(req, ctx)
    removed = False
    if req.path is None:  # DataTree.removeWatch: Any tries the child table first
        for t in reversed(_watch_tables(ctx, req.type)):
            removed = remove_null_watch(t, ctx.watcher) or removed
        if not removed:
            raise ReadError(Code.NOWATCHER)
        return
    for t in _watch_tables(ctx, req.type):
        removed = t.remove(req.path, ctx.watcher) or removed
    if not removed:
        raise ReadError(Code.NOWATCHER)


def read_who_am_i(req: Any, ctx: ReadContext) -> r.Record:
    # AuthUtil.getClientInfos: every id of the connection, with its provider's user name
    return r.WhoAmIResponse(tuple(r.ClientInfo(s, u) for s, u in aclmod.who_am_i(ctx.auth)))


ReadFn = Callable[[Any, ReadContext], r.Record | None]

#: opcode -> (request record or None, handler)
READ_OPS: dict[int, tuple[type[r.Record] | None, ReadFn]] = {
    OpCode.EXISTS: (r.ExistsRequest, read_exists),
    OpCode.GETDATA: (r.GetDataRequest, read_get_data),
    OpCode.GETCHILDREN: (r.GetChildrenRequest, read_get_children),
    OpCode.GETCHILDREN2: (r.GetChildren2Request, read_get_children2),
    OpCode.GETACL: (r.GetACLRequest, read_get_acl),
    OpCode.SYNC: (r.SyncRequest, read_sync),
    OpCode.GETALLCHILDRENNUMBER: (r.GetAllChildrenNumberRequest, read_all_children_number),
    OpCode.GETEPHEMERALS: (r.GetEphemeralsRequest, read_get_ephemerals),
    OpCode.SETWATCHES: (r.SetWatches, read_set_watches),
    OpCode.SETWATCHES2: (r.SetWatches2, read_set_watches2),
    OpCode.ADDWATCH: (r.AddWatchRequest, read_add_watch),
    OpCode.CHECKWATCHES: (r.CheckWatchesRequest, read_check_watches),
    OpCode.REMOVEWATCHES: (r.RemoveWatchesRequest, read_remove_watches),
    OpCode.WHOAMI: (None, read_who_am_i),
}

#: multiRead sub-ops: opcode -> (request record, handler); watch flags are always false.
MULTI_READ_OPS: dict[int, tuple[type[r.Record], ReadFn]] = {
    OpCode.GETCHILDREN: (r.GetChildrenRequest, read_get_children),
    OpCode.GETDATA: (r.GetDataRequest, read_get_data),
}


def multi_read(frame: bytes, ctx: ReadContext) -> tuple[int, bytes]:
    """A multiRead: (reply error, MultiResponse); see :mod:`trizk.server.frontend.requests`. Raises
    JuteDecodeError when the record does not decode (MARSHALLINGERROR without a body)."""
    ops = parse_multi(frame)
    handlers = {op: (lambda req, fn=fn: fn(req, ctx)) for op, (_, fn) in MULTI_READ_OPS.items()}
    return run_multi_read(ops, handlers)
