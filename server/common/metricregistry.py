"""The metric registry: every metric ZooKeeper 3.8.0 reports, declared once.

Theory of operation
===================
ZooKeeper registers its metrics with the configured metrics provider by name and kind
(``ServerMetrics`` and ``ZooKeeperServer.registerMetrics``): gauges, gauge sets, counters,
counter sets, summaries and summary sets, each summary at a ``DetailLevel`` (``BASIC``, or
``ADVANCED`` with percentiles). Three outputs are made of that list and must agree:

* ``mntr`` (and the AdminServer's ``monitor``) with the default provider: the gauges, then the
  counters, then the summaries (``avg_/min_/max_/cnt_/sum_<name>`` and for an ADVANCED one
  ``p50/p95/p99/p999_<name>``), then the summary sets, in the order of the provider's hash
  maps as captured from a live ZooKeeper 3.8.0 (:data:`MNTR_ORDER`);
* ``/metrics`` with the Prometheus provider: one family per metric, a summary with quantile
  0.5 (BASIC) or 0.5/0.9/0.99 (ADVANCED) (:data:`PROMETHEUS_QUANTILES`);
* :class:`trizk.server.common.servermetrics.ServerMetrics`: one attribute per metric that
  trizk measures (``measured``); the others are reported at their idle value.

So each metric is one :class:`Metric` below: its name, its kind, its level and whether trizk
measures it; the orders are the tables' orders. Adding a measured metric is one row here and
the typed attribute it is kept in (``ServerMetrics`` declares it; its constructor builds it
from this row).

The summary sets are listed in ``/metrics`` order (ServerMetrics' registration order); mntr
prints them in the iteration order of a ``ConcurrentHashMap`` of their names inserted in that
order (:data:`SUMMARY_SET_MNTR_ORDER`, computed: ``learner_handler_qp_size``,
``read_per_namespace``, ``ack_latency``, ``write_per_namespace``,
``learner_handler_qp_time_ms``, as seen on a live 3.8.0 leader).

Pure data, no clock, no I/O.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from trizk.storage.tree import quota
from trizk.storage.tree.javahash import JavaHashSet

__all__ = [
    "ADVANCED",
    "BASIC",
    "COUNTER",
    "COUNTERS",
    "COUNTER_SETS",
    "DEFAULT_PERCENTILES",
    "GAUGE",
    "GAUGES",
    "GAUGE_SETS",
    "LEARNER_HANDLER_QP_SIZE",
    "LEARNER_HANDLER_QP_TIME_MS",
    "MEASURED_COUNTERS",
    "MEASURED_SUMMARIES",
    "MEASURED_SUMMARY_SETS",
    "MNTR_ORDER",
    "MNTR_ORDER_39",
    "PROMETHEUS_QUANTILES",
    "SUMMARIES",
    "SUMMARY",
    "SUMMARY_SET",
    "SUMMARY_SETS",
    "SUMMARY_SET_MNTR_ORDER",
    "Metric",
    "mntr_order",
    "summary_stat_names",
]

GAUGE: Final = "gauge"
COUNTER: Final = "counter"
SUMMARY: Final = "summary"
GAUGE_SET: Final = "gauge_set"
COUNTER_SET: Final = "counter_set"
SUMMARY_SET: Final = "summary_set"
#: ``MetricsContext.DetailLevel`` of a summary: ADVANCED ones report percentiles
BASIC: Final = False
ADVANCED: Final = True


class Metric(NamedTuple):
    """One registered metric."""

    name: str
    kind: str
    #: summaries and summary sets: ``DetailLevel.ADVANCED``
    advanced: bool = BASIC
    #: kept in :class:`~trizk.server.common.servermetrics.ServerMetrics` (counters,
    #: summaries, summary sets); False: reported at its idle value (or kept elsewhere)
    measured: bool = False


def _gauge(name: str) -> Metric:
    return Metric(name, GAUGE)


def _counter(name: str, measured: bool = False) -> Metric:
    return Metric(name, COUNTER, BASIC, measured)


def _summary(name: str, advanced: bool = BASIC, measured: bool = False) -> Metric:
    return Metric(name, SUMMARY, advanced, measured)


_M: Final = True  # measured

#: ``registerGauge`` names of a standalone ZooKeeperServer, in mntr order (quorum members add
#: their role's gauges among these: the status view places them).
GAUGES: tuple[Metric, ...] = (
    _gauge("ephemerals_count"),
    _gauge("num_alive_connections"),
    _gauge("avg_latency"),
    _gauge("outstanding_requests"),
    _gauge("znode_count"),
    _gauge("global_sessions"),
    _gauge("non_mtls_remote_conn_count"),
    _gauge("last_client_response_size"),
    _gauge("packets_sent"),
    _gauge("packets_received"),
    _gauge("max_client_response_size"),
    _gauge("connection_drop_probability"),
    _gauge("watch_count"),
    _gauge("auth_failed_count"),
    _gauge("min_latency"),
    _gauge("max_file_descriptor_count"),
    _gauge("approximate_data_size"),
    _gauge("open_file_descriptor_count"),
    _gauge("local_sessions"),
    _gauge("uptime"),
    _gauge("max_latency"),
    _gauge("outstanding_tls_handshake"),
    _gauge("min_client_response_size"),
    _gauge("non_mtls_local_conn_count"),
)

#: ``registerGaugeSet`` names (``QuotaMetricsUtils``; label ``key`` = the quota namespace),
#: printed by mntr after the last gauge.
GAUGE_SETS: tuple[Metric, ...] = tuple(Metric(name, GAUGE_SET) for name, _ in quota.GAUGE_SETS)

#: ``getCounter`` names, in mntr order.
COUNTERS: tuple[Metric, ...] = (
    _counter("proposal_count", _M),
    _counter("watch_bytes", _M),
    _counter("outstanding_changes_removed", _M),
    _counter("throttled_ops"),
    _counter("stale_requests_dropped"),
    _counter("large_requests_rejected"),
    _counter("insecure_admin_count"),
    _counter("connection_rejected", _M),
    _counter("cnxn_closed_without_zk_server_running"),
    _counter("sessionless_connections_expired", _M),
    _counter("looking_count", _M),
    _counter("dead_watchers_queued"),
    _counter("stale_requests"),
    _counter("connection_drop_count", _M),
    _counter("learner_proposal_received_count", _M),
    _counter("digest_mismatches_count", _M),
    _counter("dead_watchers_cleared"),
    _counter("response_packet_cache_hits"),
    _counter("bytes_received_count", _M),
    _counter("add_dead_watcher_stall_time"),
    _counter("request_throttle_wait_count"),
    _counter("requests_not_forwarded_to_commit_processor"),
    _counter("response_packet_cache_misses"),
    _counter("ensemble_auth_success"),
    _counter("prep_processor_request_queued", _M),
    _counter("learner_commit_received_count", _M),
    _counter("stale_replies"),
    _counter("connection_request_count", _M),
    _counter("response_bytes", _M),
    _counter("ensemble_auth_fail"),
    _counter("diff_count", _M),
    _counter("response_packet_get_children_cache_misses"),
    _counter("connection_revalidate_count", _M),
    _counter("quit_leading_due_to_disloyal_voter"),
    _counter("snap_count", _M),
    _counter("unrecoverable_error_count", _M),
    _counter("unsuccessful_handshake", _M),
    _counter("commit_count", _M),
    _counter("stale_sessions_expired", _M),
    _counter("response_packet_get_children_cache_hits"),
    _counter("sync_processor_request_queued", _M),
    _counter("outstanding_changes_queued", _M),
    _counter("request_commit_queued"),
    _counter("ensemble_auth_skip"),
    _counter("skip_learner_request_to_next_processor_count"),
    _counter("tls_handshake_exceeded"),
    _counter("revalidate_count", _M),
)

#: ``getCounterSet`` names (label ``key``), printed by mntr after the last counter.
COUNTER_SETS: tuple[Metric, ...] = (Metric(quota.QUOTA_EXCEEDED_ERROR_PER_NAMESPACE, COUNTER_SET),)

#: ``getSummary`` names, in mntr order.
SUMMARIES: tuple[Metric, ...] = (
    _summary("socket_closing_time"),
    _summary("proposal_process_time"),
    _summary("leader_unavailable_time", BASIC, _M),
    _summary("node_created_watch_count", BASIC, _M),
    _summary("session_queues_drained"),
    _summary("write_commit_proc_req_queued"),
    _summary("connection_token_deficit", BASIC, _M),
    _summary("read_commit_proc_req_queued"),
    _summary("node_deleted_watch_count", BASIC, _M),
    _summary("startup_txns_load_time", BASIC, _M),
    _summary("sync_processor_queue_size"),
    _summary("follower_sync_time", BASIC, _M),
    _summary("prep_processor_queue_size"),
    _summary("fsynctime", BASIC, _M),
    _summary("inflight_snap_count"),
    _summary("reads_issued_from_session_queue"),
    _summary("learner_request_processor_queue_size"),
    _summary("snapshottime", BASIC, _M),
    _summary("unavailable_time", BASIC, _M),
    _summary("startup_txns_loaded", BASIC, _M),
    _summary("reads_after_write_in_session_queue"),
    _summary("requests_in_session_queue"),
    _summary("write_commit_proc_issued"),
    _summary("prep_process_time"),
    _summary("pending_session_queue_size"),
    _summary("time_waiting_empty_pool_in_commit_processor_read_ms"),
    _summary("commit_process_time"),
    _summary("dbinittime", BASIC, _M),
    _summary("inflight_diff_count"),
    _summary("netty_queued_buffer_capacity"),
    _summary("election_time", BASIC, _M),
    _summary("commit_commit_proc_req_queued"),
    _summary("sync_processor_batch_size"),
    _summary("node_children_watch_count", BASIC, _M),
    _summary("write_batch_time_in_commit_processor"),
    _summary("read_commit_proc_issued"),
    _summary("concurrent_request_processing_in_commit_processor"),
    _summary("observer_sync_time", BASIC, _M),
    _summary("node_changed_watch_count", BASIC, _M),
    _summary("sync_process_time"),
    _summary("startup_snap_load_time", BASIC, _M),
    _summary("prep_processor_queue_time_ms", ADVANCED),
    _summary("jvm_pause_time_ms", ADVANCED),
    _summary("close_session_prep_time", ADVANCED),
    _summary("read_commitproc_time_ms", ADVANCED),
    _summary("updatelatency", ADVANCED, _M),
    _summary("local_write_committed_time_ms", ADVANCED),
    _summary("request_throttle_queue_time_ms", ADVANCED),
    _summary("readlatency", ADVANCED, _M),
    _summary("quorum_ack_latency", ADVANCED, _M),
    _summary("om_commit_process_time_ms", ADVANCED),
    _summary("read_final_proc_time_ms", ADVANCED),
    _summary("commit_propagation_latency", ADVANCED, _M),
    _summary("dead_watchers_cleaner_latency", ADVANCED),
    _summary("write_final_proc_time_ms", ADVANCED),
    _summary("proposal_ack_creation_latency", ADVANCED),
    _summary("proposal_latency", ADVANCED, _M),
    _summary("om_proposal_process_time_ms", ADVANCED),
    _summary("sync_processor_queue_and_flush_time_ms", ADVANCED),
    _summary("propagation_latency", ADVANCED, _M),
    _summary("server_write_committed_time_ms", ADVANCED),
    _summary("sync_processor_queue_time_ms", ADVANCED),
    _summary("sync_processor_queue_flush_time_ms", ADVANCED),
    _summary("write_commitproc_time_ms", ADVANCED),
)

#: ``LEARNER_HANDLER_QP_SIZE`` / ``LEARNER_HANDLER_QP_TIME``: a leader's queue of packets to
#: each learner, keyed by learner sid; kept by the ensemble member (its learner handlers),
#: not in ServerMetrics.
LEARNER_HANDLER_QP_SIZE: Final = Metric("learner_handler_qp_size", SUMMARY_SET, BASIC)
LEARNER_HANDLER_QP_TIME_MS: Final = Metric("learner_handler_qp_time_ms", SUMMARY_SET, ADVANCED)

#: ``getSummarySet`` names (label ``key``), in registration (``/metrics``) order.
SUMMARY_SETS: tuple[Metric, ...] = (
    Metric("write_per_namespace", SUMMARY_SET, BASIC, _M),
    Metric("read_per_namespace", SUMMARY_SET, BASIC, _M),
    LEARNER_HANDLER_QP_SIZE,
    LEARNER_HANDLER_QP_TIME_MS,
    Metric("ack_latency", SUMMARY_SET, ADVANCED, _M),
)

#: The summary sets in mntr's order (see the module docstring).
SUMMARY_SET_MNTR_ORDER: tuple[str, ...] = tuple(JavaHashSet(16, (m.name for m in SUMMARY_SETS)))


#: The Prometheus provider's quantiles (quantile, allowed error) of a BASIC / ADVANCED summary
#: (``PrometheusMetricsProvider``: simpleclient ``Summary.quantile``), by ``advanced``.
PROMETHEUS_QUANTILES: dict[bool, tuple[tuple[float, float], ...]] = {
    BASIC: ((0.5, 0.05),),
    ADVANCED: ((0.5, 0.05), (0.9, 0.01), (0.99, 0.001)),
}

#: The default provider's percentiles of an ADVANCED summary (``AvgMinMaxPercentileCounter``):
#: (mntr prefix, quantile).
DEFAULT_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p999", 0.999),
)
_DEFAULT_STATS = ("avg", "min", "max", "cnt", "sum")


def summary_stat_names(name: str, advanced: bool) -> list[str]:
    """The default provider's mntr names of summary ``name`` (``avg_<name>`` ... ``sum_``,
    then the percentiles when ADVANCED), in the order it prints them."""
    out = [f"{stat}_{name}" for stat in _DEFAULT_STATS]
    if advanced:
        out += [f"{label}_{name}" for label, _ in DEFAULT_PERCENTILES]
    return out


def _mntr_order() -> tuple[str, ...]:
    names = ["version", "server_state"]
    names += [m.name for m in GAUGES]
    names += [m.name for m in COUNTERS]
    for m in SUMMARIES:
        names += summary_stat_names(m.name, m.advanced)
    return tuple(names)


#: mntr's own names with the default provider, in its order (without ``zk_``): ``version`` and
#: ``server_state`` (``MonitorCommand`` puts them first), the gauges, the counters and the
#: summaries' statistics. The gauge and counter sets follow the last gauge and the last counter;
#: the summary sets (and anything else) come after the last of these names.
MNTR_ORDER: tuple[str, ...] = _mntr_order()

# -- ZooKeeper 3.9 (trizk.zookeeperVersion=3.9.3) ---------------------------------------------

#: The metrics 3.9 registers that 3.8.0 does not (its AdminServer's snapshot and restore
#: commands: ``SNAPSHOT_*_COUNT``, ``RESTORE_*_COUNT``, ``RESTORE_TIME`` in 3.9.3's
#: ServerMetrics), measured (by :mod:`trizk.server.ops.admin`) whatever the release; only a
#: server answering as 3.9.3 shows them.
COUNTERS_39: tuple[Metric, ...] = (
    _counter("restore_error_count", _M),
    _counter("snapshot_rate_limited_count", _M),
    _counter("snapshot_error_count", _M),
    _counter("restore_rate_limited_count", _M),
)
SUMMARIES_39: tuple[Metric, ...] = (_summary("restore_time", BASIC, _M),)

#: What ServerMetrics keeps.
MEASURED_COUNTERS: tuple[str, ...] = tuple(m.name for m in COUNTERS + COUNTERS_39 if m.measured)
MEASURED_SUMMARIES: tuple[Metric, ...] = tuple(m for m in SUMMARIES + SUMMARIES_39 if m.measured)
MEASURED_SUMMARY_SETS: tuple[Metric, ...] = tuple(m for m in SUMMARY_SETS if m.measured)

#: 3.9.3's counters in its mntr order (captured from a live standalone 3.9.3: four more names
#: in the counters' hash map reorder them all).
_COUNTER_ORDER_39: tuple[str, ...] = (
    "watch_bytes", "stale_requests_dropped", "throttled_ops", "insecure_admin_count",
    "connection_rejected", "sessionless_connections_expired", "dead_watchers_queued",
    "stale_requests", "connection_drop_count", "response_packet_cache_hits",
    "bytes_received_count", "add_dead_watcher_stall_time", "request_throttle_wait_count",
    "requests_not_forwarded_to_commit_processor", "response_packet_cache_misses",
    "prep_processor_request_queued", "stale_replies", "response_bytes", "ensemble_auth_fail",
    "diff_count", "connection_revalidate_count", "quit_leading_due_to_disloyal_voter",
    "unrecoverable_error_count", "unsuccessful_handshake", "commit_count",
    "outstanding_changes_queued", "request_commit_queued", "ensemble_auth_skip",
    "skip_learner_request_to_next_processor_count", "proposal_count",
    "large_requests_rejected", "outstanding_changes_removed", "restore_error_count",
    "cnxn_closed_without_zk_server_running", "looking_count", "snapshot_rate_limited_count",
    "learner_proposal_received_count", "digest_mismatches_count", "dead_watchers_cleared",
    "ensemble_auth_success", "learner_commit_received_count", "snapshot_error_count",
    "connection_request_count", "response_packet_get_children_cache_misses", "snap_count",
    "stale_sessions_expired", "restore_rate_limited_count",
    "response_packet_get_children_cache_hits", "sync_processor_request_queued",
    "tls_handshake_exceeded", "revalidate_count",
)  # fmt: skip


def _mntr_order_39() -> tuple[str, ...]:
    names = ["version", "server_state"]
    names += [m.name for m in GAUGES]
    names += _COUNTER_ORDER_39
    for m in SUMMARIES:
        names += summary_stat_names(m.name, m.advanced)
        if m.name == "reads_issued_from_session_queue":  # where 3.9.3 prints restore_time
            names += summary_stat_names("restore_time", BASIC)
    return tuple(names)


#: :data:`MNTR_ORDER` of ZooKeeper 3.9.3 (captured from the live server; the gauges and the
#: summaries keep 3.8.0's order, restore_time among them).
MNTR_ORDER_39: tuple[str, ...] = _mntr_order_39()


def mntr_order(zk39: bool) -> tuple[str, ...]:
    """mntr's own names of the release the server answers as."""
    return MNTR_ORDER_39 if zk39 else MNTR_ORDER
