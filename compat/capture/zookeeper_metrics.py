"""ZooKeeper 3.8.0's metric families as its Prometheus provider registers them, and what 3.9.3
adds: the oracle the compat tests check trizk's ``/metrics`` against (Debian's ZooKeeper does not
ship the provider).

Taken from ZooKeeper 3.8.0's sources (tag release-3.8.0-1): ``ServerMetrics`` (``getCounter``,
``getSummary`` with its ``DetailLevel``, ``getSummarySet``, ``getCounterSet``),
``ZooKeeperServer.registerMetrics`` (``registerGauge``, ``registerGaugeSet`` with
``QuotaMetricsUtils``' names) and ``PrometheusMetricsProvider`` (every counter/gauge/summary is
built with help = name; counter and gauge sets and summary sets carry the label ``key``;
BASIC summaries have the quantile 0.5, ADVANCED ones 0.5, 0.9 and 0.99). Quorum-only gauges
(``LeaderZooKeeperServer``, ``FollowerZooKeeperServer``, ``QuorumZooKeeperServer``) are listed
apart: a standalone server does not register them.
"""

from __future__ import annotations

#: ``ZooKeeperServer.registerMetrics``: TYPE gauge, no labels.
GAUGES: tuple[str, ...] = (
    "avg_latency",
    "max_latency",
    "min_latency",
    "packets_received",
    "packets_sent",
    "num_alive_connections",
    "outstanding_requests",
    "uptime",
    "znode_count",
    "watch_count",
    "ephemerals_count",
    "approximate_data_size",
    "global_sessions",
    "local_sessions",
    "open_file_descriptor_count",
    "max_file_descriptor_count",
    "connection_drop_probability",
    "last_client_response_size",
    "max_client_response_size",
    "min_client_response_size",
    "outstanding_tls_handshake",
    "auth_failed_count",
    "non_mtls_remote_conn_count",
    "non_mtls_local_conn_count",
)
#: ``registerGaugeSet`` (QuotaMetricsUtils): TYPE gauge, label ``key``.
GAUGE_SETS: tuple[str, ...] = (
    "quota_count_limit_per_namespace",
    "quota_bytes_limit_per_namespace",
    "quota_count_usage_per_namespace",
    "quota_bytes_usage_per_namespace",
)
#: ``ServerMetrics`` ``getCounter``: TYPE counter, no ``_total`` suffix (simpleclient 0.9.0).
COUNTERS: tuple[str, ...] = (
    "looking_count",
    "diff_count",
    "snap_count",
    "commit_count",
    "connection_request_count",
    "connection_rejected",
    "bytes_received_count",
    "unrecoverable_error_count",
    "add_dead_watcher_stall_time",
    "dead_watchers_queued",
    "dead_watchers_cleared",
    "response_packet_cache_hits",
    "response_packet_cache_misses",
    "response_packet_get_children_cache_hits",
    "response_packet_get_children_cache_misses",
    "ensemble_auth_success",
    "ensemble_auth_fail",
    "ensemble_auth_skip",
    "prep_processor_request_queued",
    "outstanding_changes_queued",
    "outstanding_changes_removed",
    "revalidate_count",
    "connection_drop_count",
    "connection_revalidate_count",
    "sessionless_connections_expired",
    "stale_sessions_expired",
    "request_commit_queued",
    "throttled_ops",
    "learner_proposal_received_count",
    "learner_commit_received_count",
    "sync_processor_request_queued",
    "proposal_count",
    "quit_leading_due_to_disloyal_voter",
    "stale_requests",
    "stale_requests_dropped",
    "stale_replies",
    "request_throttle_wait_count",
    "large_requests_rejected",
    "digest_mismatches_count",
    "unsuccessful_handshake",
    "insecure_admin_count",
    "tls_handshake_exceeded",
    "cnxn_closed_without_zk_server_running",
    "skip_learner_request_to_next_processor_count",
    "requests_not_forwarded_to_commit_processor",
    "response_bytes",
    "watch_bytes",
)
#: ``getCounterSet``: TYPE counter, label ``key``.
COUNTER_SETS: tuple[str, ...] = ("quota_exceeded_error_per_namespace",)
#: ``getSummary``: name -> DetailLevel.
SUMMARIES: dict[str, str] = {
    "fsynctime": "BASIC",
    "snapshottime": "BASIC",
    "dbinittime": "BASIC",
    "readlatency": "ADVANCED",
    "updatelatency": "ADVANCED",
    "propagation_latency": "ADVANCED",
    "follower_sync_time": "BASIC",
    "observer_sync_time": "BASIC",
    "election_time": "BASIC",
    "connection_token_deficit": "BASIC",
    "inflight_snap_count": "BASIC",
    "inflight_diff_count": "BASIC",
    "node_created_watch_count": "BASIC",
    "node_deleted_watch_count": "BASIC",
    "node_changed_watch_count": "BASIC",
    "node_children_watch_count": "BASIC",
    "dead_watchers_cleaner_latency": "ADVANCED",
    "prep_processor_queue_time_ms": "ADVANCED",
    "prep_processor_queue_size": "BASIC",
    "prep_process_time": "BASIC",
    "proposal_process_time": "BASIC",
    "close_session_prep_time": "ADVANCED",
    "unavailable_time": "BASIC",
    "leader_unavailable_time": "BASIC",
    "requests_in_session_queue": "BASIC",
    "pending_session_queue_size": "BASIC",
    "reads_after_write_in_session_queue": "BASIC",
    "reads_issued_from_session_queue": "BASIC",
    "session_queues_drained": "BASIC",
    "time_waiting_empty_pool_in_commit_processor_read_ms": "BASIC",
    "write_batch_time_in_commit_processor": "BASIC",
    "concurrent_request_processing_in_commit_processor": "BASIC",
    "read_commit_proc_req_queued": "BASIC",
    "write_commit_proc_req_queued": "BASIC",
    "commit_commit_proc_req_queued": "BASIC",
    "read_commit_proc_issued": "BASIC",
    "write_commit_proc_issued": "BASIC",
    "read_commitproc_time_ms": "ADVANCED",
    "write_commitproc_time_ms": "ADVANCED",
    "local_write_committed_time_ms": "ADVANCED",
    "server_write_committed_time_ms": "ADVANCED",
    "commit_process_time": "BASIC",
    "om_proposal_process_time_ms": "ADVANCED",
    "om_commit_process_time_ms": "ADVANCED",
    "read_final_proc_time_ms": "ADVANCED",
    "write_final_proc_time_ms": "ADVANCED",
    "proposal_latency": "ADVANCED",
    "proposal_ack_creation_latency": "ADVANCED",
    "commit_propagation_latency": "ADVANCED",
    "startup_txns_loaded": "BASIC",
    "startup_txns_load_time": "BASIC",
    "startup_snap_load_time": "BASIC",
    "sync_processor_queue_and_flush_time_ms": "ADVANCED",
    "sync_processor_queue_size": "BASIC",
    "sync_processor_queue_time_ms": "ADVANCED",
    "sync_processor_queue_flush_time_ms": "ADVANCED",
    "sync_process_time": "BASIC",
    "sync_processor_batch_size": "BASIC",
    "quorum_ack_latency": "ADVANCED",
    "request_throttle_queue_time_ms": "ADVANCED",
    "netty_queued_buffer_capacity": "BASIC",
    "learner_request_processor_queue_size": "BASIC",
    "socket_closing_time": "BASIC",
    "jvm_pause_time_ms": "ADVANCED",
}
#: ``getSummarySet``: name -> DetailLevel; label ``key`` (before ``quantile``).
SUMMARY_SETS: dict[str, str] = {
    "write_per_namespace": "BASIC",
    "read_per_namespace": "BASIC",
    "learner_handler_qp_size": "BASIC",
    "learner_handler_qp_time_ms": "ADVANCED",
    "ack_latency": "ADVANCED",
}
#: Gauges only an ensemble member registers.
QUORUM_GAUGES: tuple[str, ...] = (
    "last_proposal_size",
    "leader_uptime",
    "learners",
    "max_proposal_size",
    "min_proposal_size",
    "pending_syncs",
    "synced_followers",
    "synced_non_voting_followers",
    "synced_observers",
    "quorum_size",
)
#: What ZooKeeper 3.9.3's ``ServerMetrics`` adds to 3.8.0's (tag release-3.9.3; the metrics of
#: its AdminServer's snapshot and restore commands). Its gauges are 3.8.0's.
COUNTERS_39: tuple[str, ...] = (
    "snapshot_error_count",
    "snapshot_rate_limited_count",
    "restore_error_count",
    "restore_rate_limited_count",
)
SUMMARIES_39: dict[str, str] = {"restore_time": "BASIC"}
QUANTILES: dict[str, tuple[str, ...]] = {"BASIC": ("0.5",), "ADVANCED": ("0.5", "0.9", "0.99")}
#: simpleclient 0.9.0 ``StandardExports`` (exportJvmInfo=true): name -> type. The ``jvm_*``
#: families (MemoryPoolsExports, GarbageCollectorExports, ThreadExports...) have no Python
#: counterpart.
PROCESS: dict[str, str] = {
    "process_cpu_seconds_total": "counter",
    "process_start_time_seconds": "gauge",
    "process_open_fds": "gauge",
    "process_max_fds": "gauge",
    "process_virtual_memory_bytes": "gauge",
    "process_resident_memory_bytes": "gauge",
}
