"""Quotas: ZooKeeper's ``StatsTrack`` format, the quota ``PathTrie`` and the quota metrics.

Theory
------
A quota on a path ``/p`` is two znodes that clients (zkCli.sh's ``setquota``) create:
``/zookeeper/quota/p/zookeeper_limits`` (the limits) and ``/zookeeper/quota/p/zookeeper_stats``
(the usage: how many znodes ``/p``'s subtree holds, ``/p`` included, and how many data bytes).
Both hold a :class:`StatsTrack` string such as
``count=2,bytes=-1=;byteHardLimit=-1;countHardLimit=3``.

The data tree keeps a :class:`PathTrie` of the quota'd paths (``DataTree.pTrie``): creating a
limits node adds its path, deleting one removes it. Creating a stats node sets its data to the
subtree's real usage (``DataTree.updateQuotaForPath``); after that every create, delete and
setData below the deepest quota'd prefix of a path adds its count and byte difference to that
quota's stats node, *without* a txn, a version change or a digest change (``updateQuotaStat``).
Loading a snapshot recomputes every quota's stats (``DataTree.setupQuota``).

Soft limits (``count``, ``bytes``) only log; hard limits (``countHardLimit``, ``byteHardLimit``)
refuse the write with QuotaExceeded, and both only when ``zookeeper.enforceQuota=true``
(``ZooKeeperServer.checkQuota``, in :mod:`trizk.server.writes.prep`).

Everything here is pure: strings in, strings out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from trizk.jute.javalang import java_split, parse_long
from trizk.storage.tree.javahash import JavaHashSet

QUOTA_ZOOKEEPER = "/zookeeper/quota"
PROC_ZOOKEEPER = "/zookeeper"
LIMIT_NODE = "zookeeper_limits"
STAT_NODE = "zookeeper_stats"

COUNT = "count"
BYTES = "bytes"
COUNT_HARD_LIMIT = "countHardLimit"
BYTE_HARD_LIMIT = "byteHardLimit"

_PAIRS_SEPARATOR = re.compile(r"[,;]+")
#: What ``String.trim()`` strips: every char up to U+0020.
_JAVA_WHITESPACE = "".join(chr(i) for i in range(33))


class StatsTrackError(ValueError):
    """A quota node's data that ``new StatsTrack(byte[])`` would throw on."""


def limit_path(path: str) -> str:
    """``Quotas.limitPath``."""
    return f"{QUOTA_ZOOKEEPER}{path}/{LIMIT_NODE}"


def stat_path(path: str) -> str:
    """``Quotas.statPath``."""
    return f"{QUOTA_ZOOKEEPER}{path}/{STAT_NODE}"


def trim_quota_path(quota_path: str) -> str:
    """``Quotas.trimQuotaPath``: ``quotaPath.substring(16)``; Java throws
    StringIndexOutOfBounds on a shorter string, reported here as ValueError."""
    if len(quota_path) < len(QUOTA_ZOOKEEPER):
        raise ValueError(f"not under {QUOTA_ZOOKEEPER}: {quota_path!r}")
    return quota_path[len(QUOTA_ZOOKEEPER) :]


def top_namespace(path: str) -> str | None:
    """``PathUtils.getTopNamespace``: the first component of ``path`` ("a" for "/a/b")."""
    parts = java_split(path, "/")
    return parts[1] if len(parts) > 1 else None


def _java_long(text: str) -> int:
    v = parse_long(text)
    if v is None:
        raise StatsTrackError(f"For input string: {text!r}")
    return v


class StatsTrack:
    """``org.apache.zookeeper.StatsTrack``: ``key=long`` pairs; a missing key reads as -1.

    ``str()`` writes ``count`` and ``bytes`` first (always), then, if there are other keys, an
    extra ``=`` (so 3.4-era parsers ignore them) and ``;key=value`` for each in sorted order.
    """

    __slots__ = ("stats",)

    def __init__(self, stats: dict[str, int] | None = None) -> None:
        self.stats: dict[str, int] = dict(stats or {})

    @classmethod
    def parse(cls, data: bytes | str | None) -> StatsTrack:
        """``new StatsTrack(byte[])``; raises :class:`StatsTrackError` where Java throws
        (null data, a pair without ``=value``, a value that is not a Java long)."""
        if data is None:
            raise StatsTrackError("null quota data")
        text = data if isinstance(data, str) else data.decode("utf-8", "replace")
        st = cls()
        if not text:
            return st
        for pair in java_split(text, _PAIRS_SEPARATOR):
            kv = java_split(pair, "=")
            if len(kv) < 2:
                raise StatsTrackError(f"malformed quota pair {pair!r}")
            st.stats[kv[0]] = -1 if kv[1] == "" else _java_long(kv[1])
        return st

    def get(self, key: str) -> int:
        return self.stats.get(key, -1)

    @property
    def count(self) -> int:
        return self.get(COUNT)

    @property
    def nbytes(self) -> int:
        return self.get(BYTES)

    @property
    def count_hard_limit(self) -> int:
        return self.get(COUNT_HARD_LIMIT)

    @property
    def byte_hard_limit(self) -> int:
        return self.get(BYTE_HARD_LIMIT)

    def __str__(self) -> str:
        out = f"count={self.count},bytes={self.nbytes}"
        rest = sorted(k for k in self.stats if k not in (COUNT, BYTES))
        if rest:
            out += "=" + "".join(f";{k}={self.stats[k]}" for k in rest)
        return out

    def encode(self) -> bytes:
        return str(self).encode("utf-8")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StatsTrack) and self.stats == other.stats

    def __repr__(self) -> str:
        return f"StatsTrack({str(self)!r})"


def _trie_split(path: str) -> list[str]:
    """``PathTrie.split``: the components, without those that ``trim()`` to nothing."""
    return [t for t in path.split("/") if t.strip(_JAVA_WHITESPACE)]


class _TrieNode:
    __slots__ = ("children", "parent", "prop", "value")

    def __init__(self, parent: _TrieNode | None, value: str) -> None:
        self.value = value
        self.parent = parent
        self.children: dict[str, _TrieNode] = {}
        self.prop = False


class PathTrie:
    """``org.apache.zookeeper.common.PathTrie``: the paths that carry a quota."""

    def __init__(self) -> None:
        self.root = _TrieNode(None, "/")

    def _walk(self, path: str, create: bool) -> _TrieNode | None:
        """The node of ``path``; a missing one is made (``create``) or ends the walk (None).
        An empty path is refused (IllegalArgumentException) with ValueError."""
        if not path:
            raise ValueError("Invalid path: ")
        node = self.root
        for part in _trie_split(path):
            child = node.children.get(part)
            if child is None:
                if not create:
                    return None
                child = node.children[part] = _TrieNode(node, part)
            node = child
        return node

    def add(self, path: str) -> None:
        """``addPath``: the node (made with its missing ancestors) gets the property."""
        node = self._walk(path, True)
        assert node is not None
        node.prop = True

    def delete(self, path: str) -> None:
        """``deletePath``: the node loses its property and goes if it is a leaf."""
        node = self._walk(path, False)
        if node is None:
            return
        parent = node.parent
        if parent is None:
            # Java dereferences the root's null parent (NullPointerException).
            raise ValueError(f"Invalid path: {path}")
        node.prop = False
        if not node.children:
            del parent.children[node.value]
            node.parent = None

    def max_prefix(self, path: str) -> str:
        """``findMaxPrefix``: the deepest quota'd prefix of ``path``, "/" if none."""
        node: _TrieNode | None = self.root
        deepest: _TrieNode | None = None
        for part in _trie_split(path):
            assert node is not None
            node = node.children.get(part)
            if node is None:
                break
            if node.prop:
                deepest = node
        if deepest is None:
            return "/"
        parts: list[str] = []
        n: _TrieNode | None = deepest
        while n is not None and n is not self.root:
            parts.append(n.value)
            n = n.parent
        return "/" + "/".join(reversed(parts))

    def clear(self) -> None:
        self.root.children.clear()

    def paths(self) -> Iterator[str]:
        """Every quota'd path (for tests and tools)."""
        stack = [(self.root, "")]
        while stack:
            node, prefix = stack.pop()
            for name, child in node.children.items():
                p = f"{prefix}/{name}"
                if child.prop:
                    yield p
                stack.append((child, p))


# -- mntr's quota gauge sets (QuotaMetricsUtils) --------------------------------------------

#: The four gauge sets in the order ZooKeeper 3.8.0's mntr prints them (the iteration order
#: of DefaultMetricsProvider's ConcurrentHashMap of gauge-set names), with what each reads.
GAUGE_SETS: tuple[tuple[str, str], ...] = (
    ("quota_bytes_limit_per_namespace", LIMIT_NODE),
    ("quota_count_usage_per_namespace", STAT_NODE),
    ("quota_count_limit_per_namespace", LIMIT_NODE),
    ("quota_bytes_usage_per_namespace", STAT_NODE),
)
QUOTA_EXCEEDED_ERROR_PER_NAMESPACE = "quota_exceeded_error_per_namespace"


def _gauge_value(name: str, st: StatsTrack) -> int:
    if name == "quota_bytes_limit_per_namespace":
        return st.byte_hard_limit if st.byte_hard_limit > -1 else st.nbytes
    if name == "quota_count_limit_per_namespace":
        return st.count_hard_limit if st.count_hard_limit > -1 else st.count
    if name == "quota_count_usage_per_namespace":
        return st.count
    return st.nbytes


def namespace_order(names: Iterable[str]) -> list[str]:
    """Namespaces in ``ConcurrentHashMap`` iteration order (Java hash order, as a HashMap of
    the same keys inserted in the same order)."""
    return list(JavaHashSet(16, names))


def quota_gauges(leaves: Iterable[tuple[str, bytes | None]]) -> list[tuple[str, int]]:
    """mntr's quota gauge-set lines (``<namespace>_<gauge set>``, value) from the leaves of the
    ``/zookeeper/quota`` subtree (path, data) in tree order, as ``QuotaMetricsUtils`` sums
    them per top namespace. Leaves whose data is null or unparsable are skipped."""
    found: list[tuple[str, str, StatsTrack]] = []
    for path, data in leaves:
        kind = LIMIT_NODE if path.endswith("/" + LIMIT_NODE) else None
        if kind is None and path.endswith("/" + STAT_NODE):
            kind = STAT_NODE
        if kind is None or data is None:
            continue
        ns = top_namespace(trim_quota_path(path))
        if ns is None:
            continue
        try:
            found.append((kind, ns, StatsTrack.parse(data)))
        except StatsTrackError:
            continue
    out: list[tuple[str, int]] = []
    for name, kind in GAUGE_SETS:
        sums: dict[str, int] = {}
        for k, ns, st in found:
            if k == kind:
                sums[ns] = sums.get(ns, 0) + _gauge_value(name, st)
        out += [(f"{ns}_{name}", sums[ns]) for ns in namespace_order(sums)]
    return out
