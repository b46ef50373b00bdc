"""Quotas: StatsTrack, the quota PathTrie, the tree's usage bookkeeping, prep's enforcement,
the RateLogger and mntr's quota lines (storage/tree/quota.py, storage/tree/datatree.py,
server/writes/prep.py,
server/common/ratelog.py, server/ops/fourlw.py). Expected strings are ZooKeeper 3.8.0's, taken from
its
zkCli/server against the same operations (see compat/scenarios/quota.json for the wire side).
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trizk.jute import records as r
from trizk.jute.codes import Code, OpCode
from trizk.server.common.ratelog import RateLogger
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.ops import fourlw, status
from trizk.server.writes.prep import (
    PendingChanges,
    PrepContext,
    PrepError,
    prep_create,
    prep_multi,
    prep_set_data,
)
from trizk.storage.formats import treeio
from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE, DataTree
from trizk.storage.tree.quota import (
    PathTrie,
    StatsTrack,
    StatsTrackError,
    namespace_order,
    quota_gauges,
    top_namespace,
)

# -- StatsTrack ------------------------------------------------------------------------------


def test_statstrack_format_is_zookeepers() -> None:
    # SetQuotaCommand writes all four keys; count and bytes first, then "=" and sorted extras
    st_ = StatsTrack({"count": 2, "bytes": -1, "countHardLimit": 3, "byteHardLimit": -1})
    assert str(st_) == "count=2,bytes=-1=;byteHardLimit=-1;countHardLimit=3"
    assert str(StatsTrack({"count": 0, "bytes": 0})) == "count=0,bytes=0"
    assert str(StatsTrack()) == "count=-1,bytes=-1"
    assert str(StatsTrack({"bytes": 3})) == "count=-1,bytes=3"


def test_statstrack_parse() -> None:
    s = StatsTrack.parse(b"count=2,bytes=-1=;byteHardLimit=-1;countHardLimit=3")
    assert (s.count, s.nbytes, s.count_hard_limit, s.byte_hard_limit) == (2, -1, 3, -1)
    assert StatsTrack.parse(b"").stats == {}
    assert StatsTrack.parse(b"countHardLimit==9,bytes=+3").stats == {
        "countHardLimit": -1,
        "bytes": 3,
    }
    assert StatsTrack.parse(b"count=1;;bytes=2;,").stats == {"count": 1, "bytes": 2}
    assert StatsTrack.parse(b"count=1,count=5").count == 5
    # Pattern.split drops every trailing empty string: separators alone are no pairs at all
    assert StatsTrack.parse(b",").stats == {}
    assert StatsTrack.parse(b";;,").stats == {}


@pytest.mark.parametrize(
    "bad",
    [None, b"garbage", b"count=", b"count=abc", b",count=1", b"=", b"count=1.5",
     b"count=9223372036854775808", b"count= 1"],
)  # fmt: skip
def test_statstrack_parse_errors_where_java_throws(bad: bytes | None) -> None:
    with pytest.raises(StatsTrackError):
        StatsTrack.parse(bad)


_keys = st.sampled_from(["count", "bytes", "countHardLimit", "byteHardLimit", "x", "zz"])
_longs = st.integers(-(1 << 63), (1 << 63) - 1)


@given(st.dictionaries(_keys, _longs))
def test_statstrack_roundtrip(stats: dict[str, int]) -> None:
    text = str(StatsTrack(stats))
    again = StatsTrack.parse(text.encode())
    assert str(again) == text
    expected = dict(stats)
    if len(set(stats) - {"count", "bytes"}):
        expected.setdefault("count", -1)
        expected.setdefault("bytes", -1)
    else:
        expected = {"count": stats.get("count", -1), "bytes": stats.get("bytes", -1)}
    assert again.stats == expected


def test_top_namespace() -> None:
    assert top_namespace("/a/b") == "a"
    assert top_namespace("/a") == "a"
    assert top_namespace("/") is None
    assert top_namespace("") is None


# -- PathTrie --------------------------------------------------------------------------------


def test_path_trie() -> None:
    t = PathTrie()
    assert t.max_prefix("/a/b") == "/"
    t.add("/a")
    t.add("/a/b/c")
    assert t.max_prefix("/a") == "/a"
    assert t.max_prefix("/a/b") == "/a"
    assert t.max_prefix("/a/b/c/d") == "/a/b/c"
    assert t.max_prefix("/ab") == "/"
    t.delete("/a")  # keeps its child's branch
    assert t.max_prefix("/a/b") == "/"
    assert t.max_prefix("/a/b/c") == "/a/b/c"
    assert sorted(t.paths()) == ["/a/b/c"]
    t.delete("/nope")
    # PathTrie.split drops components that trim() to nothing
    t.add("/x/ /y")
    assert t.max_prefix("/x/y/z") == "/x/y"
    with pytest.raises(ValueError):
        t.add("")
    t.clear()
    assert list(t.paths()) == []


_component = st.sampled_from(["a", "b", "c"])
_paths = st.lists(_component, min_size=1, max_size=4).map(lambda c: "/" + "/".join(c))


@given(st.lists(st.tuples(st.booleans(), _paths), max_size=30), _paths)
def test_path_trie_matches_a_set_model(ops: list[tuple[bool, str]], probe: str) -> None:
    t = PathTrie()
    model: set[str] = set()
    for add, p in ops:
        if add:
            t.add(p)
            model.add(p)
        else:
            t.delete(p)
            model.discard(p)
    parts = probe.split("/")[1:]
    prefixes = ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    best = [p for p in prefixes if p in model]
    assert t.max_prefix(probe) == (best[-1] if best else "/")


# -- the tree's bookkeeping ------------------------------------------------------------------

_zxid = [100]


def _hdr(typ: int) -> r.TxnHeader:
    _zxid[0] += 1
    return r.TxnHeader(1, 1, _zxid[0], 1000, typ)


def create(tree: DataTree, path: str, data: bytes | None = b"") -> None:
    rc = tree.apply(_hdr(OpCode.CREATE), r.CreateTxn(path, data, OPEN_ACL_UNSAFE, False, -1))
    assert rc.err == 0, (path, rc.err)


def set_data(tree: DataTree, path: str, data: bytes | None) -> None:
    rc = tree.apply(_hdr(OpCode.SETDATA), r.SetDataTxn(path, data, 1))
    assert rc.err == 0


def delete(tree: DataTree, path: str) -> None:
    assert tree.apply(_hdr(OpCode.DELETE), r.DeleteTxn(path)).err == 0


def stats(tree: DataTree, path: str) -> bytes | None:
    node = tree.get(f"/zookeeper/quota{path}/zookeeper_stats")
    assert node is not None
    return node.data


def set_quota(tree: DataTree, path: str, limits: bytes) -> None:
    q = "/zookeeper/quota"
    for part in path.strip("/").split("/"):
        q += "/" + part
        if tree.get(q) is None:
            create(tree, q)
    create(tree, q + "/zookeeper_limits", limits)
    create(tree, q + "/zookeeper_stats", b"count=0,bytes=0")


def test_usage_follows_creates_sets_and_deletes() -> None:
    t = DataTree()
    create(t, "/q", b"root")
    create(t, "/q/a", b"12345")
    set_quota(t, "/q", b"count=10")
    assert stats(t, "/q") == b"count=2,bytes=9"
    create(t, "/q/a/b", None)
    assert stats(t, "/q") == b"count=3,bytes=9"
    set_data(t, "/q/a/b", b"abcdefgh")
    assert stats(t, "/q") == b"count=3,bytes=17"
    set_data(t, "/q/a", None)
    assert stats(t, "/q") == b"count=3,bytes=12"
    delete(t, "/q/a/b")
    assert stats(t, "/q") == b"count=2,bytes=4"
    create(t, "/other", b"not counted")
    assert stats(t, "/q") == b"count=2,bytes=4"
    # the stats node keeps version 0: no txn wrote it
    node = t.get("/zookeeper/quota/q/zookeeper_stats")
    assert node is not None and node.version == 0 and node.stat().dataLength == 15


def test_nested_quota_charges_the_deepest_prefix_only() -> None:
    t = DataTree()
    create(t, "/q")
    create(t, "/q/a")
    set_quota(t, "/q", b"count=10")
    set_quota(t, "/q/a", b"bytes=100")
    create(t, "/q/a/x", b"nested")
    assert stats(t, "/q/a") == b"count=2,bytes=6"
    assert stats(t, "/q") == b"count=2,bytes=0"  # /q's own count was taken before /q/a's
    delete(t, "/zookeeper/quota/q/a/zookeeper_limits")
    create(t, "/q/a/y", b"yy")
    assert stats(t, "/q") == b"count=3,bytes=2"
    assert stats(t, "/q/a") == b"count=2,bytes=6"


def test_unreadable_stats_are_left_alone_and_the_tree_carries_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t = DataTree()
    create(t, "/q")
    set_quota(t, "/q", b"count=1")
    set_data(t, "/zookeeper/quota/q/zookeeper_stats", b"count=abc")
    with caplog.at_level(logging.ERROR):
        create(t, "/q/x", b"1")  # ZooKeeper's SyncThread dies here
    assert "unreadable" in caplog.text
    assert t.get("/q/x") is not None
    assert stats(t, "/q") == b"count=abc"
    # /zookeeper/quota/zookeeper_limits: ZooKeeper's PathTrie throws and the server stops
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        create(t, "/zookeeper/quota/zookeeper_limits", b"count=1")
    assert "not tracked" in caplog.text
    assert t.max_prefix_with_quota("/other") is None
    assert t.max_prefix_with_quota("/q/x") == "/q"


def test_stats_node_under_quota_root_counts_the_whole_tree() -> None:
    t = DataTree()
    create(t, "/a", b"xyz")
    create(t, "/zookeeper/quota/zookeeper_stats", b"")
    # getCounts(""): the root, /zookeeper, /zookeeper/quota, /zookeeper/config, /a and
    # the stats node itself (data "" at that moment)
    assert stats(t, "") == b"count=6,bytes=3"


def test_snapshot_reload_recomputes_usage_and_the_trie() -> None:
    t = DataTree()
    create(t, "/q", b"root")
    set_quota(t, "/q", b"count=10")
    create(t, "/q/a", b"12345")
    # a client overwrote the stats: a reload recomputes them from the tree
    set_data(t, "/zookeeper/quota/q/zookeeper_stats", b"count=99,bytes=99")
    loaded = treeio.tree_from_snapshot(treeio.content_from_tree(t), _zxid[0])
    assert stats(loaded, "/q") == b"count=2,bytes=9"
    assert loaded.max_prefix_with_quota("/q/a") == "/q"
    create(loaded, "/q/b", b"1")
    assert stats(loaded, "/q") == b"count=3,bytes=10"


def test_approximate_data_size_ignores_quota_stats_updates() -> None:
    t = DataTree()
    assert t.approximate_data_size() == 44  # a fresh ZooKeeper 3.8 reports 44
    create(t, "/q", b"root")
    set_quota(t, "/q", b"count=10")
    before = t.approximate_data_size()
    for i in range(12):
        create(t, f"/q/n{i}", b"0123456789")
    grown = sum(len(f"/q/n{i}") + 10 for i in range(12))
    # the stats node grew from "count=..,bytes=.." digits, which ZooKeeper does not count
    assert t.approximate_data_size() == before + grown
    assert t.reset_data_size() > before + grown


# -- enforcement in prep ---------------------------------------------------------------------


def _ctx(pv: PendingChanges, *, enforce: bool = True) -> PrepContext:
    return PrepContext(1, pv.tree.last_processed_zxid + 1, 1000, [], enforce_quota=enforce)


def _req(path: str, data: bytes | None = b"") -> r.CreateRequest:
    return r.CreateRequest(path, data, OPEN_ACL_UNSAFE, 0)


def _quota_tree(limits: bytes) -> DataTree:
    t = DataTree()
    create(t, "/h", b"x")
    set_quota(t, "/h", limits)
    create(t, "/h/a", b"1234")
    return t


def test_hard_count_limit_refuses_and_soft_one_only_reports() -> None:
    t = _quota_tree(b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3")
    pv = PendingChanges(t)
    ctx = _ctx(pv)
    prep_create(OpCode.CREATE, _req("/h/b"), pv, ctx)  # count 3: at the limit
    assert ctx.quota_events == []
    create(t, "/h/b")
    pv = PendingChanges(t)
    ctx = _ctx(pv)
    with pytest.raises(PrepError) as e:
        prep_create(OpCode.CREATE, _req("/h/c"), pv, ctx)
    assert e.value.code == Code.QUOTAEXCEEDED
    [ev] = ctx.quota_events
    assert ev.message == "Quota exceeded: /h [current count=4, hardCountLimit=3]"
    assert (ev.namespace, ev.hard) == ("h", True)
    # not enforced: no check at all
    ctx = _ctx(pv, enforce=False)
    prep_create(OpCode.CREATE, _req("/h/c"), pv, ctx)
    assert ctx.quota_events == []

    soft = _quota_tree(b"count=2,bytes=4")
    pv = PendingChanges(soft)
    ctx = _ctx(pv)
    prep_create(OpCode.CREATE, _req("/h/b", b"12"), pv, ctx)
    assert [(e.message, e.hard) for e in ctx.quota_events] == [
        ("Quota exceeded: /h [current count=3, softCountLimit=2]", False),
        ("Quota exceeded: /h [current bytes=7, softByteLimit=4]", False),
    ]


def test_set_data_byte_limit_comes_before_the_version_check() -> None:
    t = _quota_tree(b"count=-1,bytes=-1=;byteHardLimit=6;countHardLimit=-1")
    pv = PendingChanges(t)
    ctx = _ctx(pv)
    with pytest.raises(PrepError) as e:
        prep_set_data(OpCode.SETDATA, r.SetDataRequest("/h/a", b"123456", 7), pv, ctx)
    assert e.value.code == Code.QUOTAEXCEEDED
    assert ctx.quota_events[0].message == ("Quota exceeded: /h [current bytes=7, hardByteLimit=6]")
    # shrinking data is always fine; same size is not checked at all
    prep_set_data(OpCode.SETDATA, r.SetDataRequest("/h/a", b"12", -1), pv, _ctx(pv))


def test_multi_creates_are_each_checked_against_the_committed_tree() -> None:
    t = _quota_tree(b"count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=4")
    pv = PendingChanges(t)
    ops = [(OpCode.CREATE, _req("/h/m1")), (OpCode.CREATE, _req("/h/m2"))]
    _multi, failure = prep_multi(ops, pv, _ctx(pv))
    assert failure is None  # each alone fits (count 4); ZooKeeper lets both through


def test_unreadable_limits_fail_the_request_and_roll_back_a_multi() -> None:
    t = _quota_tree(b"countHardLimit")
    pv = PendingChanges(t)
    with pytest.raises(ValueError):
        prep_create(OpCode.CREATE, _req("/h/b"), pv, _ctx(pv))
    digest = pv.digest
    ops = [(OpCode.SETDATA, r.SetDataRequest("/h", b"y", -1)), (OpCode.CREATE, _req("/h/m"))]
    with pytest.raises(ValueError):
        prep_multi(ops, pv, _ctx(pv))
    assert pv.digest == digest and not pv.ordered


# -- RateLogger ------------------------------------------------------------------------------


def test_rate_logger(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.ratelog")
    rl = RateLogger(log, interval=100)
    with caplog.at_level(logging.WARNING, logger="test.ratelog"):
        rl.rate_limit_log("A", 0)
        rl.rate_limit_log("A", 10)
        rl.rate_limit_log("A", 20)
        rl.rate_limit_log("A", 150)  # window over: the 3 repeats are written
        rl.rate_limit_log("B", 160)  # new message: pending count 0, nothing to flush
        rl.rate_limit_log("B", 170)
        rl.rate_limit_log("C", 180)  # flushes B's single repeat
    assert [r.getMessage() for r in caplog.records] == [
        "Message:A Value:null",
        "[3 times] Message: A",
        "Message:B Value:null",
        "Message: B",
        "Message:C Value:null",
    ]


# -- mntr ------------------------------------------------------------------------------------


def test_namespace_order_is_javas() -> None:
    # the order ZooKeeper 3.8.0's mntr printed for these namespaces
    assert namespace_order(["t", "abc", "zz", "a"]) == ["zz", "a", "abc", "t"]


def test_quota_gauges_and_their_place_in_mntr() -> None:
    t = DataTree()
    for ns in ("t", "abc"):
        create(t, f"/{ns}", b"x")
        create(t, f"/{ns}/sub", b"yy")
        set_quota(t, f"/{ns}/sub", b"count=1,bytes=-1=;byteHardLimit=-1;countHardLimit=5")
    gauges = quota_gauges(t.quota_leaves())
    assert gauges == [
        ("abc_quota_bytes_limit_per_namespace", -1),
        ("t_quota_bytes_limit_per_namespace", -1),
        ("abc_quota_count_usage_per_namespace", 1),
        ("t_quota_count_usage_per_namespace", 1),
        ("abc_quota_count_limit_per_namespace", 5),
        ("t_quota_count_limit_per_namespace", 5),
        ("abc_quota_bytes_usage_per_namespace", 2),
        ("t_quota_bytes_usage_per_namespace", 2),
    ]
    view = status.SimpleView(
        config=ServerConfig.create("/tmp", clientPort=2181),
        quota_gauges=gauges,
        quota_counters=[("t_quota_exceeded_error_per_namespace", 2)],
    )
    lines = fourlw.respond("mntr", view).decode().splitlines()
    names = [line.split("\t")[0] for line in lines]
    i = names.index("zk_non_mtls_local_conn_count")
    assert names[i + 1 : i + 9] == [f"zk_{k}" for k, _ in gauges]
    j = names.index("zk_revalidate_count")
    assert lines[j + 1] == "zk_t_quota_exceeded_error_per_namespace\t2"
