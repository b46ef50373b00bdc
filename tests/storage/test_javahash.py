"""Java HashSet iteration order, against orders captured from Java 17 / ZooKeeper 3.8.0."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trizk.storage.tree.javahash import JavaHashSet, java_string_hash


def test_string_hash_matches_java() -> None:
    assert java_string_hash("/eph") == 1500814  # "/eph".hashCode()
    assert java_string_hash("") == 0
    assert java_string_hash("\U0001f600") == (31 * 0xD83D + 0xDE00)  # a surrogate pair


def test_children_order_as_zookeeper() -> None:
    s = JavaHashSet(8)  # DataNode.addChild: new HashSet<>(8)
    for n in ["b", "a", "c", "zz", "x1", "x2", "node10", "node2"]:
        s.add(n)
    # java: new HashSet<>(8) with the same adds prints this order (and ZooKeeper returns it)
    assert list(s) == ["zz", "a", "node10", "b", "node2", "c", "x1", "x2"]


def test_clone_rebuilds_the_table() -> None:
    s = JavaHashSet()
    for p in ["/eph", "/dir/e1", "/dir/e20000000001"]:
        s.add(p)
    assert list(s) == ["/dir/e20000000001", "/eph", "/dir/e1"]  # java HashSet order
    # HashSet.clone() re-inserts into a table of tableSizeFor(3 / 0.75 + 1) = 8 buckets;
    # ZooKeeper 3.8.0's getEphemerals answers exactly this order.
    assert list(s.clone()) == ["/eph", "/dir/e1", "/dir/e20000000001"]


@given(st.lists(st.text(max_size=6), max_size=60), st.lists(st.integers(0, 59), max_size=30))
def test_set_semantics(adds: list[str], removes: list[int]) -> None:
    s = JavaHashSet(8)
    ref: set[str] = set()
    for a in adds:
        assert s.add(a) == (a not in ref)
        ref.add(a)
    for i in removes:
        if i < len(adds):
            assert s.discard(adds[i]) == (adds[i] in ref)
            ref.discard(adds[i])
    assert sorted(s) == sorted(ref) and len(s) == len(ref)
    assert sorted(s.clone()) == sorted(ref)


@given(
    st.lists(st.text(min_size=1, max_size=8), max_size=400, unique=True),
    st.lists(st.integers(0, 399), max_size=40),
    st.lists(st.integers(0, 399), max_size=20),
)
def test_presized_iterates_as_adding_one_by_one(
    names: list[str], removes: list[int], twice: list[int]
) -> None:
    """The loader's one-pass build (``presized``) is a HashSet(8) that had the names added in
    order: same iteration order, and it goes on the same under later adds and removes. A
    name that comes again (``twice``: at the end) is added once."""
    names = names + [names[i] for i in twice if i < len(names)]
    built = JavaHashSet.presized(names)
    ref = JavaHashSet(8)
    for n in names:
        ref.add(n)
    assert list(built) == list(ref) and len(built) == len(ref)
    for i in removes:
        if i < len(names):
            assert built.discard(names[i]) == ref.discard(names[i])
        extra = f"x{i}"
        assert built.add(extra) == ref.add(extra)
    assert list(built) == list(ref)


def test_presized_many_children_as_zookeeper_loads_them() -> None:
    names = [f"n{i:06d}" for i in range(10_000)]
    ref = JavaHashSet(8)
    for n in names:
        ref.add(n)
    assert list(JavaHashSet.presized(names)) == list(ref)
