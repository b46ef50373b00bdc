"""``ServerMetrics``: the counters and summaries ZooKeeper 3.8 updates where things happen.

Theory of operation
===================
ZooKeeper keeps one process-wide ``ServerMetrics`` (its counters, summaries and summary sets)
built by the configured metrics provider; code across the server adds to it at the moment an
event happens (``BYTES_RECEIVED_COUNT.add(n)`` per packet read, ``COMMIT_COUNT.add(1)`` per
leader commit...). trizk keeps one :class:`ServerMetrics` per server (``TrizkServer``; every
role of an ensemble member shares it, as ZooKeeper's outlives a role change) and the cores add
to it the same way. The hot path pays one attribute increment per counter event
(``m.commit_count += 1``) and, per summary observation, a few arithmetic updates and one
buffer append (the Prometheus window merges its buffer every 1024 observations); nothing
locks, and nothing is allocated per request beyond a buffer's amortized growth.

Which provider is configured decides what a summary keeps, as in ZooKeeper:

* the default provider (``AvgMinMaxCounter`` / ``AvgMinMaxPercentileCounter``): count, sum, min,
  max and, for ``DetailLevel.ADVANCED``, percentiles p50/p95/p99/p999 over the newest
  observations; mntr prints ``avg_/min_/max_/cnt_/sum_<name>``. ``srst`` (``ServerStats.reset``
  → ``ServerMetrics.resetAll``) zeroes everything;
* the Prometheus provider (simpleclient 0.9.0 ``Summary``): cumulative count and sum, and
  quantiles 0.5 (error 0.05) or 0.5/0.9/0.99 (0.05/0.01/0.001) over a sliding 10-minute window
  (:class:`trizk.server.common.quantiles.WindowQuantiles`). ``resetAllValues`` is a no-op there
  ("not supported on Prometheus"), so ``srst`` leaves them.

Time: summaries read it from :attr:`ServerMetrics.clock` (``now``, monotonic ms), which the
cores set from the times the shell passes them (``FrontEnd.data_received``, commits,
persistence); the quantile window is a function of those times only.

Summary sets (``read_per_namespace``...) keep one summary per key; the default provider prints
each as ``<avg|min|max|cnt|sum>_<key>_<name>`` after the plain summaries.

Which metrics a :class:`ServerMetrics` holds, and each summary's level (percentiles or not),
is the metric registry's (:mod:`trizk.server.common.metricregistry`, the rows marked
``measured``): the constructor assigns one attribute per row, at the row's level, and
``srst``, mntr and ``/metrics`` walk the rows in ZooKeeper's order.
"""

from __future__ import annotations

import math
from collections import deque
from decimal import ROUND_HALF_UP, Decimal

from trizk.server.common.metricregistry import (
    DEFAULT_PERCENTILES,
    MEASURED_COUNTERS,
    MEASURED_SUMMARIES,
    MEASURED_SUMMARY_SETS,
    PROMETHEUS_QUANTILES,
)
from trizk.server.common.quantiles import WindowQuantiles
from trizk.storage.tree.quota import top_namespace

__all__ = [
    "STAT_OVERHEAD_BYTES",
    "MetricsClock",
    "ServerMetrics",
    "Summary",
    "SummarySet",
]

#: DetailLevel.ADVANCED of each measured summary and summary set, by name
_LEVELS: dict[str, bool] = {
    m.name: m.advanced for m in (*MEASURED_SUMMARIES, *MEASURED_SUMMARY_SETS)
}
#: ``DataTree.STAT_OVERHEAD_BYTES``: what a read adds to ``read_per_namespace`` beyond the
#: path and data lengths (6 longs + 5 ints of the Stat).
STAT_OVERHEAD_BYTES = 6 * 8 + 5 * 4
#: observations the default provider's percentiles are taken over
_RECENT = 4096
#: paths whose namespace a summary set remembers
_PATH_CACHE = 4096


def _avg(total: int, count: int) -> float:
    """``AvgMinMaxCounter.getAvg``: ``BigDecimal(total / count).setScale(4, HALF_UP)``."""
    if count <= 0:
        return 0.0
    return float(Decimal(total / count).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


class MetricsClock:
    """The latest monotonic ms a core was given; summaries time their observations by it."""

    __slots__ = ("now",)

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def advance(self, now: int) -> None:
        if now > self.now:
            self.now = now


class Summary:
    """One ZooKeeper ``Summary``: see the module docstring for what each provider keeps."""

    __slots__ = ("advanced", "clock", "count", "high", "low", "recent", "total", "window")

    def __init__(self, advanced: bool, clock: MetricsClock | None) -> None:
        self.advanced = advanced
        #: set with the Prometheus provider: the window's time source
        self.clock = clock
        self.count = self.total = self.high = 0
        self.low = -1
        self.recent: deque[int] = deque(maxlen=_RECENT)
        self.window: WindowQuantiles | None = None
        if clock is not None:
            eps = min(e for _, e in PROMETHEUS_QUANTILES[advanced])
            self.window = WindowQuantiles(eps, clock.now)

    def add(self, value: int) -> None:
        self.count += 1
        self.total += value
        if value > self.high:
            self.high = value
        if self.low < 0 or value < self.low:
            self.low = value
        if self.window is not None:
            assert self.clock is not None
            self.window.insert(value, self.clock.now)
        elif self.advanced:
            self.recent.append(value)

    def reset(self) -> None:
        """``AvgMinMaxCounter.reset`` (the default provider's; Prometheus' cannot reset)."""
        if self.window is None:
            self.count = self.total = self.high = 0
            self.low = -1
            self.recent.clear()

    def mntr_values(self, name: str) -> list[tuple[str, int | float]]:
        """The default provider's ``avg_/min_/max_/cnt_/sum_<name>`` (and percentiles)."""
        out: list[tuple[str, int | float]] = [
            (f"avg_{name}", _avg(self.total, self.count)),
            (f"min_{name}", max(self.low, 0)),
            (f"max_{name}", self.high),
            (f"cnt_{name}", self.count),
            (f"sum_{name}", self.total),
        ]
        if self.advanced:
            ordered = sorted(self.recent)
            for label, q in DEFAULT_PERCENTILES:
                value = ordered[int(q * (len(ordered) - 1))] if ordered else 0
                out.append((f"{label}_{name}", value))
        return out

    def quantiles(self, now: int) -> tuple[float, ...]:
        """The Prometheus quantiles at ``now`` (NaN without observations in the window)."""
        qs = tuple(q for q, _ in PROMETHEUS_QUANTILES[self.advanced])
        if self.window is None:
            return tuple(math.nan for _ in qs)
        return self.window.get(qs, now)


class SummarySet:
    """``getSummarySet``: one :class:`Summary` per key, in first-seen order."""

    __slots__ = ("_by_path", "advanced", "by_key", "clock")

    def __init__(self, advanced: bool, clock: MetricsClock | None) -> None:
        self.advanced = advanced
        self.clock = clock
        self.by_key: dict[str, Summary] = {}
        #: path -> its namespace's summary (bounded), so a read finds it without splitting
        self._by_path: dict[str, Summary] = {}

    def _summary(self, key: str) -> Summary:
        s = self.by_key.get(key)
        if s is None:
            s = self.by_key[key] = Summary(self.advanced, self.clock)
        return s

    def add(self, key: str, value: int) -> None:
        self._summary(key).add(value)

    def add_path(self, path: str, value: int) -> None:
        """``DataTree.updateReadStat/updateWriteStat``: keyed by the path's top namespace."""
        s = self._by_path.get(path)
        if s is None:
            ns = top_namespace(path)
            if ns is None:
                return
            s = self._summary(ns)
            if len(self._by_path) >= _PATH_CACHE:
                self._by_path.clear()
            self._by_path[path] = s
        s.add(value)

    def reset(self) -> None:
        for s in self.by_key.values():
            s.reset()


class ServerMetrics:
    """The measured ``ServerMetrics`` of one server: one attribute per metric the registry
    marks ``measured`` (:mod:`trizk.server.common.metricregistry`; a test holds the two to the
    same names), each summary at its registered level. The cores update a counter with one
    attribute increment (``m.commit_count += 1``) and observe a summary through its attribute
    (``m.fsynctime.add(ms)``); every attribute is assigned here, so compiled code reads it
    without a check. ``prometheus``: built for the Prometheus provider."""

    def __init__(self, *, prometheus: bool = False, now: int = 0) -> None:
        self.prometheus = prometheus
        self.clock = MetricsClock(now)
        clock = self.clock if prometheus else None

        def summary(name: str) -> Summary:
            return Summary(_LEVELS[name], clock)

        def summary_set(name: str) -> SummarySet:
            return SummarySet(_LEVELS[name], clock)

        # -- counters (ServerMetrics.getCounter)
        self.bytes_received_count = 0
        self.response_bytes = 0
        self.watch_bytes = 0
        self.connection_request_count = 0
        self.connection_revalidate_count = 0
        self.connection_rejected = 0
        self.connection_drop_count = 0
        self.sessionless_connections_expired = 0
        self.stale_sessions_expired = 0
        self.prep_processor_request_queued = 0
        self.sync_processor_request_queued = 0
        self.outstanding_changes_queued = 0
        self.outstanding_changes_removed = 0
        self.proposal_count = 0
        self.commit_count = 0
        self.learner_proposal_received_count = 0
        self.learner_commit_received_count = 0
        self.snap_count = 0
        self.diff_count = 0
        self.looking_count = 0
        self.revalidate_count = 0
        self.unrecoverable_error_count = 0
        self.digest_mismatches_count = 0
        self.unsuccessful_handshake = 0
        # (3.9: the AdminServer's snapshot and restore commands)
        self.restore_error_count = 0
        self.snapshot_rate_limited_count = 0
        self.snapshot_error_count = 0
        self.restore_rate_limited_count = 0
        # -- summaries (getSummary)
        self.readlatency = summary("readlatency")
        self.updatelatency = summary("updatelatency")
        self.fsynctime = summary("fsynctime")
        self.snapshottime = summary("snapshottime")
        self.propagation_latency = summary("propagation_latency")
        self.node_created_watch_count = summary("node_created_watch_count")
        self.node_deleted_watch_count = summary("node_deleted_watch_count")
        self.node_changed_watch_count = summary("node_changed_watch_count")
        self.node_children_watch_count = summary("node_children_watch_count")
        self.proposal_latency = summary("proposal_latency")
        self.commit_propagation_latency = summary("commit_propagation_latency")
        self.quorum_ack_latency = summary("quorum_ack_latency")
        self.dbinittime = summary("dbinittime")
        self.startup_snap_load_time = summary("startup_snap_load_time")
        self.startup_txns_loaded = summary("startup_txns_loaded")
        self.startup_txns_load_time = summary("startup_txns_load_time")
        self.connection_token_deficit = summary("connection_token_deficit")
        self.election_time = summary("election_time")
        self.unavailable_time = summary("unavailable_time")
        self.leader_unavailable_time = summary("leader_unavailable_time")
        self.follower_sync_time = summary("follower_sync_time")
        self.observer_sync_time = summary("observer_sync_time")
        self.restore_time = summary("restore_time")
        # -- summary sets (getSummarySet)
        self.read_per_namespace = summary_set("read_per_namespace")
        self.write_per_namespace = summary_set("write_per_namespace")
        self.ack_latency = summary_set("ack_latency")
        #: ``ServerStats.authFailedCntr`` (a gauge; srst leaves it)
        self.auth_failed_count = 0

    def tls_handshake_failed(self) -> None:
        """``NettyServerCnxnFactory.CertificateVerifier``: a failed TLS handshake (a refused
        client certificate included) is an authentication failure and an unsuccessful
        handshake."""
        self.auth_failed_count += 1
        self.unsuccessful_handshake += 1

    def summary(self, name: str) -> Summary:
        s = getattr(self, name)
        assert isinstance(s, Summary)
        return s

    def summary_set(self, name: str) -> SummarySet:
        s = getattr(self, name)
        assert isinstance(s, SummarySet)
        return s

    def reset(self) -> None:
        """``ServerMetrics.resetAll`` (``srst``): the default provider zeroes every counter
        and summary; the Prometheus provider's ``resetAllValues`` does nothing."""
        if self.prometheus:
            return
        for name in MEASURED_COUNTERS:
            setattr(self, name, 0)
        for m in MEASURED_SUMMARIES:
            self.summary(m.name).reset()
        for m in MEASURED_SUMMARY_SETS:
            self.summary_set(m.name).reset()

    def mntr_values(self) -> dict[str, int | float]:
        """mntr's values of the measured metrics (default provider's names); the summary sets
        as ``<avg|min|max|cnt|sum>_<key>_<name>``, which mntr prints after the others."""
        out: dict[str, int | float] = {name: getattr(self, name) for name in MEASURED_COUNTERS}
        out["auth_failed_count"] = self.auth_failed_count
        for m in MEASURED_SUMMARIES:
            out.update(self.summary(m.name).mntr_values(m.name))
        for m in MEASURED_SUMMARY_SETS:
            for key, s in self.summary_set(m.name).by_key.items():
                out.update(s.mntr_values(f"{key}_{m.name}"))
        return out

    def quantiles(self, now: int) -> dict[str, tuple[float, ...]]:
        """Each measured summary's Prometheus quantiles at ``now``."""
        self.clock.advance(now)
        return {m.name: self.summary(m.name).quantiles(now) for m in MEASURED_SUMMARIES}

    def summary_set_samples(
        self, now: int
    ) -> dict[str, list[tuple[str, tuple[float, ...], int, int]]]:
        """Per summary set: (key, quantiles at ``now``, count, sum) for each key seen."""
        self.clock.advance(now)
        return {
            m.name: [
                (key, s.quantiles(now), s.count, s.total)
                for key, s in self.summary_set(m.name).by_key.items()
            ]
            for m in MEASURED_SUMMARY_SETS
        }
