"""Watch tables (``WatchManager``): which connection watches which path, and event fan-out.

Watches belong to a *connection* (a ``ServerCnxn`` in ZooKeeper), not to a session: they vanish
when the connection closes, and a client that reconnects re-registers them with setWatches.

Two tables, as in ZooKeeper: data watches (set by getData, and by exists whether or not the node
exists) and child watches (set by getChildren/getChildren2). A trigger from
:mod:`trizk.storage.tree.datatree` names the tables it fires on. Standard watches are one-time:
firing
removes them. A trigger on both tables (NodeDeleted) delivers at most one event per watcher
(ZooKeeper passes the first table's watchers as ``supress`` to the second).

Persistent and recursive watches (addWatch) are kept here too: a persistent watch fires for its
own path like a data+child watch and is not consumed; a recursive one also fires for every
descendant, except for NodeChildrenChanged (``WatchManager.triggerWatch``).

Modes, by release (``CoreConfig.zookeeper_version``):

* 3.8.0 (``WatcherModeManager``): a watcher has *one* mode per path, the last one set; a
  one-shot watch set over a persistent one turns it one-shot again (and the firing consumes it:
  the persistent watch is gone, ZOOKEEPER-4466).
* 3.9 (``WatchStats``, ZOOKEEPER-4466): a watcher has a *set* of modes per path (stored as a bit
  mask, :func:`mode_bit`); firing the path removes only the standard mode, so a persistent watch
  survives a one-shot firing; a recursive watch fires for its own path's events of the tables it
  is in, and for its descendants'. removeWatches/checkWatches name a mode (ZOOKEEPER-4472).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

from trizk.jute.codes import EventType
from trizk.server.common.coreconfig import ServerStats
from trizk.storage.tree.datatree import CHILD, DATA, Trigger

W = TypeVar("W", bound=Hashable)

STANDARD = 0
PERSISTENT = 1
PERSISTENT_RECURSIVE = 2


def mode_bit(mode: int) -> int:
    """A mode's bit in a 3.9 table's mode set (``WatchStats``)."""
    return 1 << mode


_RECURSIVE_BIT = 1 << PERSISTENT_RECURSIVE
_STANDARD_BIT = 1 << STANDARD


class WatchTable:
    """path -> {watcher: mode}, with the reverse index watcher -> paths. With ``mode_sets``
    (3.9) the value is the set of modes as a bit mask (:func:`mode_bit`)."""

    __slots__ = ("by_path", "by_watcher", "found", "mode_sets", "null_modes", "recursive_count")

    def __init__(self, mode_sets: bool = False) -> None:
        #: 3.9's WatchStats: a set of modes per (path, watcher), not the last one set
        self.mode_sets = mode_sets
        self.found = 0  # watchers the last trigger found
        #: (a null path is a key too: see ``null_modes``)
        self.by_path: dict[str | None, dict[Hashable, int]] = {}
        self.by_watcher: dict[Hashable, set[str | None]] = {}
        self.recursive_count = 0
        #: watchers with a mode entry for the *null* path (a null path sent with addWatch or
        #: setWatches2): ZooKeeper's WatcherModeManager keys them Key(watcher, null), whose
        #: equals() throws on the next lookup of that key (see reads.add_null_watch)
        self.null_modes: set[Hashable] = set()

    def _recursive(self, value: int) -> bool:
        if self.mode_sets:
            return bool(value & _RECURSIVE_BIT)
        return value == PERSISTENT_RECURSIVE

    def add(self, path: str | None, watcher: Hashable, mode: int = STANDARD) -> None:
        d = self.by_path.setdefault(path, {})
        old = d.get(watcher)
        if self.mode_sets:  # WatchManager.addWatch: stats.addMode
            bits = (old or 0) | mode_bit(mode)
            if mode == PERSISTENT_RECURSIVE and bits != old:
                self.recursive_count += 1
            d[watcher] = bits
            self.by_watcher.setdefault(watcher, set()).add(path)
            return
        if old == PERSISTENT_RECURSIVE:
            self.recursive_count -= 1
        d[watcher] = mode
        if mode == PERSISTENT_RECURSIVE:
            self.recursive_count += 1
        self.by_watcher.setdefault(watcher, set()).add(path)

    def remove(self, path: str | None, watcher: Hashable) -> bool:
        d = self.by_path.get(path)
        if d is None or watcher not in d:
            return False
        if self._recursive(d.pop(watcher)):
            self.recursive_count -= 1
        if not d:
            del self.by_path[path]
        paths = self.by_watcher.get(watcher)
        if paths is not None:
            paths.discard(path)
            if not paths:
                del self.by_watcher[watcher]
        return True

    def remove_mode(self, path: str | None, watcher: Hashable, mode: int) -> bool:
        """3.9's ``removeWatcher(path, watcher, mode)``: drop one mode of the watch; the watch
        goes with its last mode. True when a mode was removed."""
        d = self.by_path.get(path)
        old = d.get(watcher) if d is not None else None
        if d is None or old is None or not old & mode_bit(mode):
            return False
        bits = old & ~mode_bit(mode)
        if not bits:
            return self.remove(path, watcher)
        d[watcher] = bits
        if mode == PERSISTENT_RECURSIVE:
            self.recursive_count -= 1
        return True

    def contains(self, path: str | None, watcher: Hashable, mode: int | None = None) -> bool:
        """The watcher watches ``path`` (3.9: in ``mode``, any mode when None)."""
        d = self.by_path.get(path)
        if d is None or watcher not in d:
            return False
        return mode is None or bool(d[watcher] & mode_bit(mode))

    def mode(self, path: str, watcher: Hashable) -> int | None:
        """The watcher's mode on ``path`` (with ``mode_sets``: the bit mask of its modes)."""
        d = self.by_path.get(path)
        return None if d is None else d.get(watcher)

    def remove_watcher(self, watcher: Hashable) -> None:
        self.null_modes.discard(watcher)
        for path in self.by_watcher.pop(watcher, ()):
            d = self.by_path.get(path)
            if d is not None:
                old = d.pop(watcher, None)
                if old is not None and self._recursive(old):
                    self.recursive_count -= 1
                if not d:
                    del self.by_path[path]

    def count(self) -> int:
        return sum(len(d) for d in self.by_path.values())

    def trigger(self, path: str, event: EventType, suppress: set[Hashable] | None) -> set[Hashable]:
        """Watchers to notify for ``event`` on ``path``; consumes the one-time watches."""
        if self.mode_sets:
            return self._trigger_sets(path, suppress)
        out: set[Hashable] = set()
        d = self.by_path.get(path)
        if d:
            for w, mode in list(d.items()):
                if mode == PERSISTENT_RECURSIVE:
                    if event != EventType.NODECHILDRENCHANGED:
                        out.add(w)
                    continue
                out.add(w)
                if mode == STANDARD:
                    self.remove(path, w)
        if self.recursive_count:
            p = path
            while p != "/":
                p = p[: p.rfind("/")] or "/"
                d = self.by_path.get(p)
                if d:
                    for w, mode in d.items():
                        if mode == PERSISTENT_RECURSIVE and event != EventType.NODECHILDRENCHANGED:
                            out.add(w)
        #: watchers found, suppressed ones included (WatchManager.triggerWatch's metric)
        self.found = len(out)
        if suppress:
            out -= suppress
        return out

    def _trigger_sets(self, path: str, suppress: set[Hashable] | None) -> set[Hashable]:
        """3.9's ``WatchManager.triggerWatch``: every watcher of the path itself (its standard
        mode consumed, the others kept), and the recursive watchers of its ancestors."""
        out: set[Hashable] = set()
        d = self.by_path.get(path)
        if d:
            for w, bits in list(d.items()):
                out.add(w)
                if bits & _STANDARD_BIT:
                    if bits == _STANDARD_BIT:
                        self.remove(path, w)
                    else:
                        d[w] = bits & ~_STANDARD_BIT
        if self.recursive_count:
            p = path
            while p != "/":
                p = p[: p.rfind("/")] or "/"
                d = self.by_path.get(p)
                if d:
                    for w, bits in d.items():
                        if bits & _RECURSIVE_BIT:
                            out.add(w)
        self.found = len(out)
        if suppress:
            out -= suppress
        return out


#: ServerMetrics summary per event type (WatchManager.triggerWatch)
_WATCH_COUNT: dict[EventType, str] = {
    EventType.NODECREATED: "node_created_watch_count",
    EventType.NODEDELETED: "node_deleted_watch_count",
    EventType.NODEDATACHANGED: "node_changed_watch_count",
    EventType.NODECHILDRENCHANGED: "node_children_watch_count",
}


class WatchManager:
    """Both tables, and the fan-out of tree triggers to watchers."""

    def __init__(self, mode_sets: bool = False) -> None:
        #: 3.9's per-mode watch stats (see the module docstring)
        self.mode_sets = mode_sets
        self.data = WatchTable(mode_sets)
        self.child = WatchTable(mode_sets)
        #: where the ``node_*_watch_count`` summaries are (the front end sets its own)
        self.stats: ServerStats | None = None

    def fire(self, triggers: Iterable[Trigger]) -> list[tuple[Hashable, Trigger]]:
        """(watcher, trigger) for each notification, in ZooKeeper's order. The caller delivers
        it only if the watcher may READ ``trigger.acl``; the watch is consumed regardless."""
        out: list[tuple[Hashable, Trigger]] = []
        data, child = self.data, self.child
        for t in triggers:
            seen: set[Hashable] | None = None
            # A table holds a watcher for the trigger only if the path is watched or a
            # recursive watch exists (then trigger() looks at the ancestors): most writes
            # touch nodes nobody watches.
            if t.tables & DATA and (t.path in data.by_path or data.recursive_count):
                seen = data.trigger(t.path, t.event, None)
                out.extend((w, t) for w in seen)
                self._count(t.event, data.found)
            if t.tables & CHILD and (t.path in child.by_path or child.recursive_count):
                ws = child.trigger(t.path, t.event, seen)
                out.extend((w, t) for w in ws)
                self._count(t.event, child.found)
        return out

    def _count(self, event: EventType, found: int) -> None:
        """``NODE_*_WATCHER.add(watchers.size())`` of a triggerWatch that found watchers."""
        if found and self.stats is not None:
            name = _WATCH_COUNT.get(event)
            if name is not None:
                self.stats.metrics.summary(name).add(found)

    def remove_watcher(self, watcher: Hashable) -> None:
        self.data.remove_watcher(watcher)
        self.child.remove_watcher(watcher)
