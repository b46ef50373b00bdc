"""Java ``HashSet<String>`` iteration order, reproduced.

ZooKeeper answers ``getChildren`` with ``new ArrayList<>(node.getChildren())`` where the children
are a ``java.util.HashSet<String>``, and it deletes a closed session's ephemerals in the order of
another HashSet. Clients see that order, so trizk keeps the same order by mirroring what
``java.util.HashMap`` does with the same insertions and removals:

* ``String.hashCode`` over UTF-16 code units (s[0]*31^(n-1) + ...), 32-bit wrap-around;
  ``HashMap.hash`` spreads it: ``h ^ (h >>> 16)``; bin index = ``hash & (capacity - 1)``.
* The table is allocated on first insert with the initial capacity (rounded to a power of two);
  it doubles when size exceeds 0.75 * capacity; a resize splits each bin into a "lo" and a "hi"
  list, each keeping its relative order.
* A new key is appended at the tail of its bin; removal unlinks it in place.
* A bin that would hold more than 8 keys while the table is smaller than 64 triggers a resize
  (``treeifyBin``). Known limit: a bin that grows past 8 keys in a table of 64 or more becomes a
  red-black tree in Java, whose order we do not reproduce; this needs nine colliding names under
  one parent and is vanishingly rare for real names.

``clone()`` rebuilds the table (see :meth:`JavaHashSet.clone`), which can change the order.

Membership is kept in a Python set as well, so ``in`` is O(1).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def java_string_hash(s: str) -> int:
    h = 0
    for ch in s:
        o = ord(ch)
        if o > 0xFFFF:  # a surrogate pair in Java
            o -= 0x10000
            h = (31 * h + (0xD800 + (o >> 10))) & 0xFFFFFFFF
            h = (31 * h + (0xDC00 + (o & 0x3FF))) & 0xFFFFFFFF
        else:
            h = (31 * h + o) & 0xFFFFFFFF
    return h


def _spread(s: str) -> int:
    h = java_string_hash(s)
    return h ^ (h >> 16)


def _table_size_for(cap: int) -> int:
    n = 1
    while n < cap:
        n <<= 1
    return max(n, 1)


def _keys(bins: list[list[str]]) -> Iterator[str]:
    """The keys bin by bin, lazily. (A generator function: mypyc would compile a generator
    expression with two ``for`` into a list made at once, blind to later changes.)"""
    for b in bins:
        yield from b


class JavaHashSet:
    """A set of strings that iterates in the order ``java.util.HashSet<String>`` would."""

    __slots__ = ("_bins", "_hashes", "_initial", "_members")

    def __init__(self, initial_capacity: int = 16, items: Iterable[str] = ()) -> None:
        self._initial = _table_size_for(initial_capacity)
        self._bins: list[list[str]] | None = None
        self._members: set[str] = set()
        self._hashes: dict[str, int] = {}
        for it in items:
            self.add(it)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, item: object) -> bool:
        return item in self._members

    def __iter__(self) -> Iterator[str]:
        if self._bins is None:
            return iter(())
        return _keys(self._bins)

    def __repr__(self) -> str:
        return f"JavaHashSet({list(self)!r})"

    def clone(self) -> JavaHashSet:
        """``HashSet.clone()``. It does *not* copy the table: ``HashMap.clone`` re-inserts the
        entries, in this set's iteration order, into a new table pre-sized by ``putMapEntries``
        to ``tableSizeFor((int)(size / 0.75f + 1))``. So a clone can iterate in a different
        order than its original (ZooKeeper's getEphemerals and closeSession iterate a clone)."""
        return JavaHashSet(int(len(self._members) / 0.75 + 1.0), self)

    @staticmethod
    def presized(names: list[str]) -> JavaHashSet:
        """A set of ``names`` iterating as a ``HashSet(8)`` into which they were added in
        order (a name twice is added once), built in one pass. With more than 48 names such a
        set's table ends at the load-factor capacity (>= 128) whatever happened on the way (a
        small table's treeify resize never goes past 64, and within a bin the keys keep their
        order of insertion through every split), so the names go straight into a table of
        that size; 48 names or fewer are added one by one (their table's size depends on the
        order of the bins that overflowed)."""
        n = len(names)
        members: set[str] = set()
        if n > 48:
            members = set(names)
            if len(members) != n:  # a name twice: its first place counts, as add() keeps it
                names = list(dict.fromkeys(names))
                n = len(names)
        if n <= 48:
            s = JavaHashSet(8)
            for name in names:
                s.add(name)
            return s
        cap = 128
        while n > cap * 3 // 4:
            cap <<= 1
        s = JavaHashSet(cap)
        bins: list[list[str]] = [[] for _ in range(cap)]
        mask = cap - 1
        hashes = s._hashes
        for name in names:
            h = _spread(name)
            hashes[name] = h
            bins[h & mask].append(name)
        s._bins = bins
        s._members = members
        return s

    def add(self, item: str) -> bool:
        if item in self._members:
            return False
        if self._bins is None:
            self._bins = [[] for _ in range(self._initial)]
        h = _spread(item)
        self._hashes[item] = h
        b = self._bins[h & (len(self._bins) - 1)]
        b.append(item)
        self._members.add(item)
        if len(b) > 8 and len(self._bins) < 64:
            # HashMap.treeifyBin on a small table resizes instead of treeifying.
            self._resize()
        if len(self._members) > (len(self._bins) * 3) // 4:
            self._resize()
        return True

    def discard(self, item: str) -> bool:
        if item not in self._members:
            return False
        assert self._bins is not None
        h = self._hashes.pop(item)
        self._bins[h & (len(self._bins) - 1)].remove(item)
        self._members.discard(item)
        return True

    def _resize(self) -> None:
        assert self._bins is not None
        old = self._bins
        cap = len(old)
        new: list[list[str]] = [[] for _ in range(cap * 2)]
        hashes = self._hashes
        for j, b in enumerate(old):
            for k in b:
                if hashes[k] & cap:
                    new[j + cap].append(k)
                else:
                    new[j].append(k)
        self._bins = new
