"""Container and TTL node reaping (ZooKeeper's ``ContainerManager``), pure.

Every ``checkIntervalMs`` ZooKeeper collects candidates and posts one internal
``deleteContainer`` request per candidate (session 0, cxid 0), spaced ``60000 / maxPerMinute``
ms apart, through the normal request pipeline, so each deletion is a logged, watched txn:

* a container with no children whose cversion is > 0 (it had children once);
* a container that never had children, once ``maxNeverUsedIntervalMs`` (0 = never) has passed
  since its mtime;
* a TTL node with no children whose TTL has passed since its mtime (only while
  ``extendedTypesEnabled``, when such owners are TTLs at all).

Prep re-checks each candidate (NOTEMPTY if a child appeared meanwhile), so a stale candidate
list is harmless. The settings are JVM system properties in ZooKeeper, read without the
``zookeeper.`` prefix: ``znode.container.checkIntervalMs`` (default 60000),
``znode.container.maxPerMinute`` (10000), ``znode.container.maxNeverUsedIntervalMs`` (0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trizk.jute.javalang import get_integer, get_long
from trizk.storage.tree.datatree import DataTree, EphemeralKind, ephemeral_kind, ttl_of
from trizk.storage.tree.javahash import JavaHashSet


@dataclass(frozen=True, slots=True)
class ContainerSettings:
    check_interval_ms: int = 60_000
    max_per_minute: int = 10_000
    max_never_used_interval_ms: int = 0

    @property
    def min_interval_ms(self) -> int:
        return 60_000 // max(self.max_per_minute, 1)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ContainerSettings:
        # ZooKeeperServerMain: Integer.getInteger, Integer.getInteger, Long.getLong.
        return cls(
            get_integer(props, "znode.container.checkIntervalMs", 60_000),
            get_integer(props, "znode.container.maxPerMinute", 10_000),
            get_long(props, "znode.container.maxNeverUsedIntervalMs", 0),
        )


def candidates(tree: DataTree, now_wall: int, settings: ContainerSettings) -> list[str]:
    """Paths to post deleteContainer for, in the order ZooKeeper's HashSet yields them."""
    out = JavaHashSet()
    for path in tree.containers:
        node = tree.get(path)
        if node is None or node.num_children():
            continue
        if node.cversion > 0:
            out.add(path)
        elif (
            settings.max_never_used_interval_ms
            and now_wall - node.mtime > settings.max_never_used_interval_ms
        ):
            out.add(path)
    for path in tree.ttls:
        node = tree.get(path)
        if node is None or node.num_children():
            continue
        if ephemeral_kind(node.ephemeral_owner, tree.extended_types) == EphemeralKind.TTL:
            ttl = ttl_of(node.ephemeral_owner)
            if ttl and now_wall - node.mtime > ttl:
                out.add(path)
    return list(out)
