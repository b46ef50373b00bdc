"""The measured ServerMetrics move as ZooKeeper's do: the same kazoo session on a live
ZooKeeper 3.8.0 and on trizk, then mntr's counters and summary counts compared one by one
(Debian's ZooKeeper has no Prometheus provider: mntr is the oracle); then trizk with the
Prometheus provider, whose ``/metrics`` and mntr show the same figures with real quantiles."""

from __future__ import annotations

import math
import socket
import time
import urllib.request

from kazoo.client import KazooClient

from tests.compat.test_metrics_names import prometheus_trizk
from trizk.compat.procs import servers
from trizk.testing.probes import four_letter

#: where the connections counted against maxClientCnxns come from (mntr comes from 127.0.0.1)
SOURCE = ("127.0.0.2", 0)

#: mntr lines that must be equal after the same session (timings excluded: they differ)
EXACT = (
    "packets_received",
    "bytes_received_count",
    "response_bytes",
    "watch_bytes",
    "last_client_response_size",
    "min_client_response_size",
    "max_client_response_size",
    "connection_request_count",
    "connection_rejected",
    "prep_processor_request_queued",
    "outstanding_changes_queued",
    "outstanding_changes_removed",
    "local_sessions",
    "cnt_readlatency",
    "cnt_updatelatency",
    "cnt_propagation_latency",
    "cnt_node_created_watch_count",
    "sum_node_created_watch_count",
    "cnt_node_changed_watch_count",
    "sum_node_changed_watch_count",
    "cnt_node_deleted_watch_count",
    "sum_node_deleted_watch_count",
    "cnt_node_children_watch_count",
    "sum_node_children_watch_count",
    "cnt_app_read_per_namespace",
    "sum_app_read_per_namespace",
    "cnt_app_write_per_namespace",
    "sum_app_write_per_namespace",
    "cnt_connection_token_deficit",
    "cnt_dbinittime",
    "cnt_startup_snap_load_time",
    "cnt_startup_txns_loaded",
    "cnt_snapshottime",
    "cnt_fsynctime",
)


def _mntr(srv: servers.Server) -> dict[str, str]:
    lines = four_letter(srv.port, "mntr", timeout=10, host=srv.host).splitlines()
    return dict(line.removeprefix("zk_").split("\t", 1) for line in lines)


def _session(srv: servers.Server) -> None:
    """Writes, reads and every kind of watch, in the /app namespace. A long session timeout:
    no pings during the session (they would make the packet counts timing-dependent)."""
    zk = KazooClient(hosts=srv.address, timeout=30)
    zk.start(timeout=20)
    try:
        zk.create("/app", b"")
        zk.create("/app/a", b"x" * 10)
        zk.get("/app/a", watch=lambda e: None)
        zk.exists("/app/b", watch=lambda e: None)
        zk.get_children("/app", watch=lambda e: None)
        zk.exists("/app/a", watch=lambda e: None)
        zk.set("/app/a", b"y" * 20)  # NodeDataChanged: one watcher (the connection, once)
        zk.create("/app/b", b"z")  # NodeCreated, NodeChildrenChanged
        zk.get("/app/b", watch=lambda e: None)
        zk.get_children("/app/b", watch=lambda e: None)  # both tables: counted twice
        for _ in range(5):
            zk.get("/app/a")
            zk.get_children("/app")
        zk.delete("/app/b")  # NodeDeleted
        zk.create("/app/seq-", b"", sequence=True)
    finally:
        zk.stop()
        zk.close()


def test_mntr_counters_move_as_zookeepers(needs_zookeeper: None) -> None:
    cfg = {"4lw.commands.whitelist": "*"}
    with servers.running("zookeeper", cfg) as zk_srv:
        _session(zk_srv)
        zk = _mntr(zk_srv)
    with servers.running("trizk", cfg) as tz_srv:
        _session(tz_srv)
        tz = _mntr(tz_srv)
    assert int(zk["bytes_received_count"]) > 0 and int(zk["cnt_app_read_per_namespace"]) > 0
    diff = {k: (tz.get(k), zk.get(k)) for k in EXACT if tz.get(k) != zk.get(k)}
    assert not diff, f"(trizk, ZooKeeper): {diff}"
    assert int(tz["open_file_descriptor_count"]) > 0
    assert int(tz["max_file_descriptor_count"]) >= int(tz["open_file_descriptor_count"])


def test_prometheus_metrics_measured() -> None:
    with prometheus_trizk({"4lw.commands.whitelist": "*"}) as (srv, port):
        _session(srv)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        mntr = _mntr(srv)
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    # counters moved, without _total
    assert samples["bytes_received_count"] > 0 and samples["response_bytes"] > 0
    assert samples["outstanding_changes_queued"] == samples["outstanding_changes_removed"] > 0
    # summaries: quantiles over the window, count and sum
    assert samples["updatelatency_count"] >= 6
    for q in ("0.5", "0.9", "0.99"):
        assert not math.isnan(samples[f'updatelatency{{quantile="{q}",}}'])
    assert samples['node_changed_watch_count{quantile="0.5",}'] == 1.0
    assert samples['write_per_namespace_count{key="app",}'] == 6.0
    assert not math.isnan(samples['read_per_namespace{key="app",quantile="0.5",}'])
    # mntr with the provider: the same figures (scraped a moment earlier)
    assert float(mntr['write_per_namespace_count{key="app"}']) == 6.0
    assert float(mntr['node_changed_watch_count{quantile="0.5"}']) == 1.0


def _drops_and_rejections(srv: servers.Server) -> tuple[int, int]:
    """maxClientCnxns=2 from 127.0.0.2: two plain connections, a third refused, then the
    client closes the two (EOF: NIOServerCnxn.handleFailedRead). Returns how much
    connection_rejected and connection_drop_count moved (mntr from 127.0.0.1; a session
    closed by its client may race the server's close and count a drop too, so the drops are
    counted from just before the two closes, until both are seen: a bounded wait)."""
    conns = []
    for _ in range(2):
        s = socket.create_connection((srv.host, srv.port), timeout=10, source_address=SOURCE)
        conns.append(s)
    # ZooKeeper counts a connection once its selector thread registered it: wait for both
    deadline = time.monotonic() + 20
    while four_letter(srv.port, "cons", timeout=10, host=srv.host).count("/127.0.0.2:") < 2:
        assert time.monotonic() < deadline, "the connections were not registered"
        time.sleep(0.05)  # polling interval of a bounded wait
    before = _mntr(srv)
    try:
        with socket.create_connection((srv.host, srv.port), timeout=10, source_address=SOURCE) as s:
            assert s.recv(1) == b""  # refused: closed by the server
    except (ConnectionResetError, BrokenPipeError):
        pass  # ZooKeeper's fastCloseSock: SO_LINGER 0, a reset (even before connect returns)
    drops = int(before["connection_drop_count"])
    for s in conns:
        s.close()
    deadline = time.monotonic() + 20
    while True:
        got = _mntr(srv)
        if int(got["connection_drop_count"]) >= drops + 2 or time.monotonic() > deadline:
            rejected = int(got["connection_rejected"]) - int(before["connection_rejected"])
            return rejected, int(got["connection_drop_count"]) - drops
        time.sleep(0.05)  # polling interval of a bounded wait


def test_drops_and_rejections_count_as_zookeepers(needs_zookeeper: None) -> None:
    cfg = {"4lw.commands.whitelist": "*", "maxClientCnxns": "2"}
    with servers.running("zookeeper", cfg) as zk_srv:
        zk = _drops_and_rejections(zk_srv)
    with servers.running("trizk", cfg) as tz_srv:
        tz = _drops_and_rejections(tz_srv)
    assert zk == (1, 2)
    assert tz == zk
