"""The watch tables' two mode models (server/frontend/watches.py): ZooKeeper 3.8.0's one mode
per (path, watcher), the last one set, and 3.9's set of modes (WatchStats, ZOOKEEPER-4466).
The live servers' answers are compared in tests/compat/test_zookeeper39_answers.py."""

from __future__ import annotations

from trizk.jute.codes import EventType
from trizk.server.frontend.watches import (
    PERSISTENT,
    PERSISTENT_RECURSIVE,
    STANDARD,
    WatchTable,
    mode_bit,
)

W, V = "w", "v"


def test_38_one_mode_the_last_set() -> None:
    t = WatchTable()
    t.add("/a", W, PERSISTENT)
    t.add("/a", W, STANDARD)  # the one-shot watch replaces the persistent one
    assert t.trigger("/a", EventType.NODEDATACHANGED, None) == {W}
    assert t.trigger("/a", EventType.NODEDATACHANGED, None) == set()  # both gone


def test_39_persistent_survives_a_one_shot_firing() -> None:
    t = WatchTable(mode_sets=True)
    t.add("/a", W, PERSISTENT)
    t.add("/a", W, STANDARD)
    assert t.mode("/a", W) == mode_bit(PERSISTENT) | mode_bit(STANDARD)
    assert t.trigger("/a", EventType.NODEDATACHANGED, None) == {W}
    assert t.mode("/a", W) == mode_bit(PERSISTENT)
    assert t.trigger("/a", EventType.NODEDATACHANGED, None) == {W}
    t.add("/b", V)
    assert t.trigger("/b", EventType.NODEDELETED, None) == {V}
    assert "/b" not in t.by_path and V not in t.by_watcher


def test_39_remove_and_contains_by_mode() -> None:
    t = WatchTable(mode_sets=True)
    t.add("/a", W, STANDARD)
    t.add("/a", W, PERSISTENT_RECURSIVE)
    assert t.recursive_count == 1
    assert t.contains("/a", W) and t.contains("/a", W, STANDARD)
    assert not t.contains("/a", W, PERSISTENT)
    assert not t.remove_mode("/a", W, PERSISTENT)
    assert t.remove_mode("/a", W, PERSISTENT_RECURSIVE)
    assert t.recursive_count == 0 and t.mode("/a", W) == mode_bit(STANDARD)
    assert t.remove_mode("/a", W, STANDARD)  # the last mode: the watch goes
    assert not t.contains("/a", W) and not t.by_path and not t.by_watcher
    t.add(None, W, PERSISTENT)  # a null path is a watch like any other
    assert t.contains(None, W, PERSISTENT) and t.remove(None, W)


def test_39_recursive_fires_for_descendants_and_its_own_path() -> None:
    t = WatchTable(mode_sets=True)
    t.add("/a", W, PERSISTENT_RECURSIVE)
    t.add("/a", W, PERSISTENT_RECURSIVE)  # again: counted once
    assert t.recursive_count == 1
    assert t.trigger("/a/b/c", EventType.NODECREATED, None) == {W}
    assert t.trigger("/a", EventType.NODEDATACHANGED, None) == {W}
    assert t.trigger("/other", EventType.NODECREATED, None) == set()
    t.remove_watcher(W)
    assert t.recursive_count == 0 and not t.by_path
