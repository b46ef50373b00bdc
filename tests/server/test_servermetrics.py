"""ServerMetrics' update rules, each as ZooKeeper 3.8 applies it: the summaries of both
providers, srst, and the counters and summaries the front end, the sequencer and the watch
manager move (driven without sockets through the standalone roles' harness)."""

from __future__ import annotations

import math
import struct

from tests.server.test_roles import ACL, Harness, replies
from trizk.jute import records as r
from trizk.jute.codes import OpCode
from trizk.server.common.servermetrics import STAT_OVERHEAD_BYTES, ServerMetrics, Summary
from trizk.server.frontend.connection import ClientConnection
from trizk.server.writes.sessions import generate_password


def test_default_provider_summary() -> None:
    s = Summary(True, None)  # AvgMinMaxPercentileCounter
    for v in (1, 2, 2):
        s.add(v)
    got = dict(s.mntr_values("x"))
    # getAvg: BigDecimal(5 / 3).setScale(4, HALF_UP)
    assert got["avg_x"] == 1.6667
    assert (got["min_x"], got["max_x"], got["cnt_x"], got["sum_x"]) == (1, 2, 3, 5)
    assert got["p50_x"] == 2 and got["p999_x"] == 2
    assert all(math.isnan(q) for q in s.quantiles(0))  # no Prometheus window
    s.reset()
    assert dict(s.mntr_values("x"))["cnt_x"] == 0
    empty = dict(Summary(False, None).mntr_values("y"))
    assert empty == {"avg_y": 0.0, "min_y": 0, "max_y": 0, "cnt_y": 0, "sum_y": 0}


def test_prometheus_summary_and_srst() -> None:
    m = ServerMetrics(prometheus=True, now=0)
    m.clock.advance(1000)
    for v in range(1, 101):
        m.readlatency.add(v)
    assert m.quantiles(1000)["readlatency"] == (50.0, 90.0, 99.0)
    assert math.isnan(m.quantiles(1000)["fsynctime"][0])
    m.commit_count = 3
    m.reset()  # PrometheusMetricsProvider.resetAllValues: not supported
    assert m.commit_count == 3 and m.readlatency.count == 100
    # ten minutes later the window is empty; count and sum stay cumulative
    later = m.quantiles(1000 + 600_001)["readlatency"]
    assert all(math.isnan(q) for q in later) and m.readlatency.total == 5050

    d = ServerMetrics(prometheus=False)
    d.commit_count = 3
    d.readlatency.add(4)
    d.read_per_namespace.add("app", 9)
    d.reset()  # DefaultMetricsProvider.resetAllValues
    assert d.commit_count == 0 and d.readlatency.count == 0
    assert d.mntr_values()["cnt_app_read_per_namespace"] == 0


def test_summary_sets_by_namespace() -> None:
    m = ServerMetrics()
    m.write_per_namespace.add_path("/app/x", 10)
    m.write_per_namespace.add_path("/", 10)  # getTopNamespace("/") is null: not counted
    m.write_per_namespace.add_path("/zookeeper/quota", 3)
    values = m.mntr_values()
    assert values["cnt_app_write_per_namespace"] == 1
    assert values["sum_zookeeper_write_per_namespace"] == 3
    samples = ServerMetrics(prometheus=True).summary_set_samples(0)
    assert samples["read_per_namespace"] == []


def test_request_path_counters() -> None:
    h = Harness()
    m = h.node.stats.metrics
    c = h.connect()
    assert m.connection_request_count == 1
    # the ConnectRequest frame: its length prefix and body (ServerCnxn.packetReceived)
    connect_bytes = 4 + len(r.ConnectRequest(0, 0, 10_000, 0, bytes(16)).encode()) + 1
    assert m.bytes_received_count == connect_bytes
    # createSession went through Prep and Sync; its answer is a ConnectResponse (no bytes)
    assert (m.prep_processor_request_queued, m.sync_processor_request_queued) == (1, 1)
    assert m.response_bytes == 0 and h.node.stats.last_response_size == -1

    h.request(c, 1, OpCode.CREATE, r.CreateRequest("/app", b"abc", ACL, 0))
    h.commit()
    (create_reply,) = replies(c)
    h.request(c, 2, OpCode.GETDATA, r.GetDataRequest("/app", True))
    (get_reply,) = replies(c)
    assert m.response_bytes == len(create_reply) + len(get_reply)  # frames, no length
    assert h.node.stats.max_response_size == len(get_reply)
    assert (m.prep_processor_request_queued, m.sync_processor_request_queued) == (3, 3)
    # a create queues two change records (the parent's, the node's: pRequest2TxnCreate),
    # removed when its txn commits
    assert (m.outstanding_changes_queued, m.outstanding_changes_removed) == (2, 2)
    # DataTree.updateWriteStat / updateReadStat
    write = m.write_per_namespace.by_key["app"]
    assert (write.count, write.total) == (1, len("/app") + 3)
    read = m.read_per_namespace.by_key["app"]
    assert (read.count, read.total) == (1, len("/app") + 3 + STAT_OVERHEAD_BYTES)

    # a data watch fires: NODE_CHANGED_WATCHER gets the number of watchers, watch bytes count
    h.request(c, 3, OpCode.SETDATA, r.SetDataRequest("/app", b"x", -1))
    h.commit()
    event, _reply = replies(c)
    assert struct.unpack_from(">i", event)[0] == -1  # the notification comes first
    assert m.watch_bytes == len(event)
    assert (m.node_changed_watch_count.count, m.node_changed_watch_count.total) == (1, 1)
    assert m.node_created_watch_count.count == 0  # no watcher found: nothing added
    assert m.updatelatency.count == 3 and m.readlatency.count == 1
    assert m.propagation_latency.count == 3


def test_reconnect_and_expiry() -> None:
    h = Harness()
    m = h.node.stats.metrics
    sid = h.connect().session_id
    again = ClientConnection(99, ("127.0.0.1", 50000), 0xFFFFF)
    h.node.front.connection_made(again)
    h.send(again, r.ConnectRequest(0, 0, 10_000, sid, generate_password(sid)).encode() + b"\x00")
    # ZooKeeperServer.processConnectRequest: a request, and a reopened session
    assert m.connection_request_count == 2 and m.connection_revalidate_count == 1
    assert h.node.sequencer.expire(sid, 0)
    assert m.stale_sessions_expired == 1  # SessionTrackerImpl: one per session expired


def test_watch_counts_per_table_before_suppression() -> None:
    # DataTree.deleteNode: dataWatches.triggerWatch(path, NodeDeleted), then
    # childWatches.triggerWatch(path, NodeDeleted, processed): each call that finds watchers
    # adds how many it found, the ones already notified (suppressed) included
    h = Harness()
    m = h.node.stats.metrics
    c = h.connect()
    h.request(c, 1, OpCode.CREATE, r.CreateRequest("/x", b"", ACL, 0))
    h.commit()
    h.request(c, 2, OpCode.EXISTS, r.ExistsRequest("/x", True))
    h.request(c, 3, OpCode.GETCHILDREN, r.GetChildrenRequest("/x", True))
    h.request(c, 4, OpCode.GETCHILDREN, r.GetChildrenRequest("/", True))
    replies(c)
    h.request(c, 5, OpCode.DELETE, r.DeleteRequest("/x", -1))
    h.commit()
    frames = replies(c)
    events = [f for f in frames if struct.unpack_from(">i", f)[0] == -1]
    assert len(events) == 2  # NodeDeleted once (suppressed the second time), children of /
    deleted = m.node_deleted_watch_count
    assert (deleted.count, deleted.total) == (2, 2)
    assert (m.node_children_watch_count.count, m.node_children_watch_count.total) == (1, 1)
    assert m.watch_bytes == sum(len(f) for f in events)


def test_four_letter_word_is_a_packet_of_four_bytes() -> None:
    # NIOServerCnxn.checkFourLetterWord: packetReceived(4)
    h = Harness()
    m = h.node.stats.metrics
    front = h.node.front
    front.is_four_letter = lambda b: "ruok" if b[:4] == b"ruok" else None
    front.four_letter = lambda word, conn, arg: b"imok"
    c = ClientConnection(7, ("127.0.0.1", 4000), 0xFFFFF)
    front.connection_made(c)
    front.data_received(c, b"ruok", 0, 0)
    assert c.take_output() == b"imok" and c.closed
    assert (h.node.stats.packets_received, m.bytes_received_count) == (1, 4)
    assert m.connection_request_count == 0
