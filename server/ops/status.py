"""The status model: what a server reports about itself, read by every way of asking.

Theory of operation
===================
An operator asks a ZooKeeper server how it is in three ways: the four-letter words on the
client port (:mod:`trizk.server.ops.fourlw`), the AdminServer's JSON commands
(:mod:`trizk.server.ops.admin`) and, with the Prometheus provider, ``/metrics``
(:mod:`trizk.server.ops.metrics`). All three read one snapshot of the server, a
:class:`StatusView`, which the server shell builds on request (``TrizkServer._view``;
:class:`SimpleView` is a ready dataclass), and the values derived from it here, once:

* :func:`mntr_values`: ``mntr``'s (name, typed value) pairs in ZooKeeper's order, which the
  4lw prints as ``zk_<name>\t<value>`` lines and the AdminServer's ``monitor`` as JSON
  members. With the default metrics provider: the server's gauges, then its gauge sets, its
  counters, its counter sets, the summaries' statistics and the summary sets, in the order of
  the metric registry (:mod:`trizk.server.common.metricregistry`), each metric at its idle
  value unless the view measures it. With the Prometheus provider, ``version`` and
  ``server_state`` then one pair per Prometheus sample (``PrometheusMetricsProvider.dump``);
* :func:`families`: the Prometheus families (``MetricFamilySamples``), one per registered
  metric in the registry's order, valued from the same pairs: a gauge, a counter and a summary
  print the same number in ``mntr`` and in ``/metrics``; the summaries' quantiles come from
  :class:`~trizk.server.common.servermetrics.ServerMetrics`' windows;
* :func:`watches_by_path`, :func:`watch_summary`: the data watches grouped by path and
  counted (``wchp``, ``wchs``, the AdminServer's ``watches_by_path`` and ``watch_summary``).

The view is a plain value: building it reads the server, formatting it reads nothing else.
The process facts (:func:`fd_gauges`, :func:`process_environment`, :func:`process_families`)
read this process and ``/proc``; the shell calls them.
"""

from __future__ import annotations

import math
import os
import platform
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Protocol

from trizk.jute.javalang import parse_boolean
from trizk.server.common import metricregistry as registry
from trizk.server.common import release
from trizk.server.ops.javatext import go_double

if TYPE_CHECKING:
    from trizk.server.common.servermetrics import ServerMetrics
    from trizk.server.config.zoocfg import ServerConfig

__all__ = [
    "CONNECTION_EXPIRY_INTERVAL_MS",
    "FULL_VERSION",
    "NOT_SERVING",
    "PROMETHEUS_PROVIDER",
    "ConnectionInfo",
    "Family",
    "LatencyStats",
    "SessionInfo",
    "SimpleView",
    "StatusView",
    "all_families",
    "dump_pairs",
    "expiry_bucket",
    "families",
    "fd_gauges",
    "mntr_values",
    "process_environment",
    "process_families",
    "prometheus_configured",
    "prometheus_exports_process",
    "server_version",
    "watch_summary",
    "watches_by_path",
]

#: "This ZooKeeper instance is not currently serving requests" (``ZK_NOT_SERVING``).
NOT_SERVING = "This ZooKeeper instance is not currently serving requests"

#: ``Version.getFullVersion()`` in ZooKeeper's shape ``<version>-<revision>, built on <date>``
#: (3.8.0 prints ``3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on 2022-02-25 08:49
#: UTC``) for trizk's default release (3.9.3); :func:`server_version` gives the configured one's.
#: Clients parse the leading ``\\d+(\\.\\d+)*`` (kazoo's ``server_version()``).
FULL_VERSION = release.full_version(release.DEFAULT_RELEASE)


def server_version(view: StatusView) -> str:
    """The full version of the release the server answers as (``trizk.zookeeperVersion``)."""
    return release.full_version(view.config.zookeeper_version)


#: ``zookeeper.nio.sessionlessCnxnTimeout`` (default 10000 ms): the connection expiry queue's
#: bucket interval, and the idle timeout of a connection without a session.
CONNECTION_EXPIRY_INTERVAL_MS = 10_000


def expiry_bucket(now_ms: int, timeout_ms: int, interval_ms: int) -> int:
    """``ExpiryQueue.update``: the bucket an element touched at ``now_ms`` expires in,
    ``roundToNextInterval(now + timeout) = ((now + timeout) / interval + 1) * interval``
    (sessions: interval = tickTime; connections: CONNECTION_EXPIRY_INTERVAL_MS). ZooKeeper
    computes it on its monotonic clock and converts to wall time when dumping."""
    return ((now_ms + timeout_ms) // interval_ms + 1) * interval_ms


# -- the metrics provider ---------------------------------------------------------------------

PROMETHEUS_PROVIDER = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"


def prometheus_configured(config: ServerConfig) -> bool:
    """``metricsProvider.className`` names ZooKeeper's Prometheus provider."""
    return config.metrics_provider.get("className") == PROMETHEUS_PROVIDER


def prometheus_exports_process(config: ServerConfig) -> bool:
    """``metricsProvider.exportJvmInfo`` (default true): the process families are exported."""
    return parse_boolean(config.metrics_provider.get("exportJvmInfo", "true"))


# -- the view ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Server request latency in ms (``ServerStats.requestLatency``, an AvgMinMaxCounter)."""

    count: int = 0
    total: int = 0
    #: Smallest latency seen; ignored while ``count == 0`` (ZooKeeper prints 0 then).
    min: int = 0
    max: int = 0

    @property
    def avg(self) -> float:
        """``BigDecimal(total / count).setScale(4, HALF_UP).doubleValue()``, 0.0 when empty."""
        if self.count <= 0:
            return 0.0
        exact = Decimal(self.total / self.count)  # Decimal(float) is exact, like BigDecimal(double)
        return float(exact.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))

    @property
    def shown_min(self) -> int:
        return self.min if self.count > 0 else 0


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """One client connection, as ``ServerCnxn.dumpConnectionInfo`` prints it.

    Session fields are printed (by ``cons``) only when ``session_id != 0``. ``lcxid`` is
    omitted while ``last_cxid < 0``. Latencies are the connection's own integer ms; ``avg_latency``
    is ``totalLatency / count`` in integer division (0 when no request yet).
    """

    host: str
    port: int
    #: ``[1]`` for an idle session (OP_READ), ``[0]`` for the 4lw connection being served;
    #: printed in hex. trizk: 1 normally, 0 for the connection asking.
    interest_ops: int = 1
    queued: int = 0  # outstanding requests
    received: int = 0  # packets received on this connection
    sent: int = 0  # packets sent on this connection
    session_id: int = 0
    #: Name of the last operation (LAST_OP_NAMES), "NA" before any.
    last_operation: str = "NA"
    established_ms: int = 0  # wall clock, ms since the epoch (Date.getTime())
    session_timeout: int = 0  # negotiated, ms
    last_cxid: int = -1
    last_zxid: int = -1
    last_response_ms: int = 0  # ZooKeeper uses its monotonic ms clock here
    last_latency: int = 0
    min_latency: int = 0
    avg_latency: int = 0
    max_latency: int = 0
    #: Wall-clock ms of the connection's idle-expiry bucket (``dump``'s "Connections dump").
    #: NIOServerCnxnFactory.touchCnxn on every I/O: ``expiry_bucket(now, timeout,
    #: CONNECTION_EXPIRY_INTERVAL_MS)`` where timeout is the session timeout, or
    #: CONNECTION_EXPIRY_INTERVAL_MS before a session exists.
    expire_at_ms: int = 0


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One live session for ``dump``."""

    session_id: int
    #: Wall-clock ms of the session's expiry bucket (SessionTrackerImpl rounds
    #: ``now + timeout`` up to a multiple of tickTime).
    expire_at_ms: int
    #: Ephemeral paths owned; ``None`` when the session never had one. ZooKeeper keeps an
    #: emptied set after the last ephemeral is deleted, so ``()`` still lists the session.
    ephemerals: Sequence[str] | None = None


class StatusView(Protocol):
    """What the four-letter words, the AdminServer and ``/metrics`` read from the server.
    Sequences are printed in the order given.

    Implement with plain attributes or properties; :class:`SimpleView` is a ready dataclass.
    """

    @property
    def serving(self) -> bool:
        """False while the server cannot serve (e.g. quorum not formed): words print NOT_SERVING."""

    @property
    def read_only(self) -> bool:
        """Read-only mode: ``isro`` says ``ro``; ``stat``/``srvr`` add a READ-ONLY line."""

    @property
    def server_state(self) -> str:
        """``Mode:`` / ``zk_server_state``: "standalone" (later leader/follower/observer)."""

    @property
    def latency(self) -> LatencyStats:
        """Request latency over all requests since start or ``srst``."""

    @property
    def packets_received(self) -> int: ...
    @property
    def packets_sent(self) -> int: ...
    @property
    def outstanding_requests(self) -> int: ...
    @property
    def last_zxid(self) -> int:
        """Last processed zxid (``Zxid: 0x...``)."""

    @property
    def node_count(self) -> int:
        """``DataTree.getNodeCount()``: ZooKeeper maps the root under both "" and "/", so this
        is the number of znodes + 1 (a fresh 3.8.0 tree: /, /zookeeper, /zookeeper/quota,
        /zookeeper/config → 5)."""

    @property
    def watch_count(self) -> int:
        """Data + child watches (mntr ``zk_watch_count``)."""

    @property
    def approximate_data_size(self) -> int:
        """Sum of path lengths + data lengths (mntr ``zk_approximate_data_size``)."""

    @property
    def uptime_ms(self) -> int: ...

    @property
    def connections(self) -> Sequence[ConnectionInfo]:
        """Every open client connection, including the one asking."""

    @property
    def sessions(self) -> Sequence[SessionInfo]:
        """Every live session (``dump``; mntr ``zk_global_sessions``, ``zk_ephemerals_count``)."""

    @property
    def local_sessions(self) -> Sequence[SessionInfo] | None:
        """The member's local sessions (``localSessionsEnabled``), else None: ``dump`` shows
        them first (``LeaderSessionTracker`` / ``LearnerSessionTracker.dumpSessions``)."""

    @property
    def learner_sessions(self) -> Sequence[tuple[int, int]] | None:
        """A learner's global sessions as (id, timeout ms), else None: its ``dump`` lists them
        instead of expiry sets (``LearnerSessionTracker.dumpSessions``: a learner expires no
        global session)."""

    @property
    def data_watches(self) -> Sequence[tuple[int, Sequence[str]]]:
        """Data watches as (session id, watched paths), in print order. ``wchp`` groups them by
        path in first-seen order; ``wchs`` counts them."""

    @property
    def config(self) -> ServerConfig:
        """``conf``: tickTime, maxClientCnxns, session timeouts."""

    @property
    def client_port(self) -> int:
        """The bound client port (``conf`` prints the real one, even after ``--port 0``)."""

    @property
    def snap_dir(self) -> str:
        """Absolute snapshot directory (``<dataDir>/version-2``)."""

    @property
    def log_dir(self) -> str:
        """Absolute txn log directory (``<dataLogDir>/version-2``)."""

    @property
    def data_dir_size(self) -> int:
        """Bytes in snap_dir's files (``dirs``, ``conf``)."""

    @property
    def log_dir_size(self) -> int:
        """Bytes in log_dir's files."""

    @property
    def environment(self) -> Sequence[tuple[str, str]]:
        """``envi`` lines after ``zookeeper.version`` (see :func:`process_environment`)."""

    @property
    def trace_mask(self) -> int:
        """``gtmk``/``stmk`` (ZooTrace default 306 = 0x132)."""

    @property
    def digest_log(self) -> Sequence[tuple[int, int]]:
        """``hash``: recent (zxid, tree digest) pairs; empty when digests are not kept."""

    @property
    def quota_gauges(self) -> Sequence[tuple[str, int]]:
        """mntr's quota gauge-set lines (``<ns>_quota_count_limit_per_namespace`` ...), in
        ZooKeeper's order (:func:`trizk.storage.tree.quota.quota_gauges`); printed after the
        gauges."""

    @property
    def quota_counters(self) -> Sequence[tuple[str, int]]:
        """mntr's ``<ns>_quota_exceeded_error_per_namespace`` lines, printed after the counters."""

    @property
    def metrics(self) -> Mapping[str, int | float | str]:
        """Extra/overriding mntr values by name without ``zk_`` (``"fsynctime"`` summaries as
        ``"avg_fsynctime"`` etc.). Unlisted known metrics print ZooKeeper's idle value; names
        ZooKeeper 3.8.0 does not print in standalone mode are appended in mapping order."""

    @property
    def role_metrics(self) -> Sequence[tuple[str, str, int | float | str]]:
        """An ensemble member's gauges: (name, the gauge it follows in mntr, value)."""

    @property
    def proposal_sizes(self) -> tuple[int, int, int]:
        """The leader's proposal sizes last/min/max (``srvr``/``stat``)."""

    @property
    def server_metrics(self) -> ServerMetrics | None:
        """The server's ServerMetrics: the Prometheus provider reads its summaries'
        quantiles and summary sets (None: every summary idle)."""

    @property
    def now_ms(self) -> int:
        """The server's monotonic ms now (the time the summaries' windows are read at)."""


@dataclass
class SimpleView:
    """A plain :class:`StatusView` (tests, and a template for the server's own)."""

    config: ServerConfig
    client_port: int = 2181
    serving: bool = True
    read_only: bool = False
    server_state: str = "standalone"
    latency: LatencyStats = field(default_factory=LatencyStats)
    packets_received: int = 0
    packets_sent: int = 0
    outstanding_requests: int = 0
    last_zxid: int = 0
    node_count: int = 5
    watch_count: int = 0
    approximate_data_size: int = 44
    uptime_ms: int = 0
    connections: Sequence[ConnectionInfo] = ()
    sessions: Sequence[SessionInfo] = ()
    local_sessions: Sequence[SessionInfo] | None = None
    learner_sessions: Sequence[tuple[int, int]] | None = None
    data_watches: Sequence[tuple[int, Sequence[str]]] = ()
    snap_dir: str = "/tmp/zookeeper/version-2"
    log_dir: str = "/tmp/zookeeper/version-2"
    data_dir_size: int = 0
    log_dir_size: int = 0
    environment: Sequence[tuple[str, str]] = ()
    trace_mask: int = 306
    digest_log: Sequence[tuple[int, int]] = ()
    quota_gauges: Sequence[tuple[str, int]] = ()
    quota_counters: Sequence[tuple[str, int]] = ()
    metrics: Mapping[str, int | float | str] = field(default_factory=dict)
    #: an ensemble member's role gauges: (name, the gauge it follows in mntr, value)
    role_metrics: Sequence[tuple[str, str, int | float | str]] = ()
    #: the leader's proposal sizes last/min/max (``BufferStats``; -1 before any proposal)
    proposal_sizes: tuple[int, int, int] = (-1, -1, -1)
    server_metrics: ServerMetrics | None = None
    now_ms: int = 0


# -- derived values ---------------------------------------------------------------------------


def watches_by_path(view: StatusView) -> dict[str, list[int]]:
    """The data watches as path -> watching session ids, paths in first-seen order."""
    by_path: dict[str, list[int]] = {}
    for sid, paths in view.data_watches:
        for p in paths:
            by_path.setdefault(p, []).append(sid)
    return by_path


def watch_summary(view: StatusView) -> tuple[int, int, int]:
    """``DataTree.getWatchesSummary`` (``wchs``): sessions watching data, distinct paths
    watched, data watches in all."""
    watchers = sum(1 for _, paths in view.data_watches if paths)
    paths = len({p for _, ps in view.data_watches for p in ps})
    total = sum(len(ps) for _, ps in view.data_watches)
    return watchers, paths, total


#: mntr values of an idle server: 0, except averages (0.0), the unset response sizes (-1)
#: and the drop probability (0.0).
_MNTR_IDLE: dict[str, int | float | str] = {
    name: 0.0 if name.startswith("avg_") else 0
    for name in (*registry.MNTR_ORDER[2:], *registry.MNTR_ORDER_39[2:])
}
_MNTR_IDLE.update(
    {
        "avg_latency": 0.0,
        "connection_drop_probability": 0.0,
        "last_client_response_size": -1,
        "max_client_response_size": -1,
        "min_client_response_size": -1,
    }
)


def mntr_values(
    view: StatusView, *, provider_dump: bool = True
) -> list[tuple[str, int | float | str]]:
    """mntr's (name without ``zk_``, typed value) pairs in ZooKeeper's order: the 4lw prints
    them as ``zk_<name>\t<value>`` lines, the AdminServer's ``monitor`` as JSON members.

    With the Prometheus metrics provider configured (and ``provider_dump``), the pairs after
    ``version`` and ``server_state`` are that provider's samples (``PrometheusMetricsProvider
    .dump``), as in ZooKeeper; ``provider_dump=False`` always gives the default provider's."""
    if provider_dump and prometheus_configured(view.config):
        head: list[tuple[str, int | float | str]] = [
            ("version", server_version(view)),
            ("server_state", view.server_state),
        ]
        export_process = prometheus_exports_process(view.config)
        return head + list(dump_pairs(all_families(view, export_process)))
    lat = view.latency
    values: dict[str, int | float | str] = dict(_MNTR_IDLE)
    values.update(
        {
            "version": server_version(view),
            "server_state": view.server_state,
            "ephemerals_count": sum(len(s.ephemerals or ()) for s in view.sessions),
            "num_alive_connections": len(view.connections),
            "avg_latency": lat.avg,
            "min_latency": lat.shown_min,
            "max_latency": lat.max,
            "outstanding_requests": view.outstanding_requests,
            "znode_count": view.node_count,
            "global_sessions": len(view.sessions),
            "packets_sent": view.packets_sent,
            "packets_received": view.packets_received,
            "watch_count": view.watch_count,
            "approximate_data_size": view.approximate_data_size,
            "uptime": view.uptime_ms,
        }
    )
    values.update(view.metrics)
    # DefaultMetricsProvider.dump: gauges, then gauge sets, then counters, then counter sets.
    extra = {_LAST_GAUGE: view.quota_gauges, _LAST_COUNTER: view.quota_counters}
    # An ensemble member's gauges sit among the others where ZooKeeper 3.8.0's gauge map puts
    # them (captured from a live leader and follower; the standalone names keep their order).
    after: dict[str, list[tuple[str, int | float | str]]] = {}
    for name, prev, value in view.role_metrics:
        after.setdefault(prev, []).append((name, value))
    out: list[tuple[str, int | float | str]] = []
    order = registry.mntr_order(release.is_39(view.config.zookeeper_version))
    last = order[-1]
    # the summary sets, kept by the server (namespaces, ack latency) or by a leader's role
    # (learner queues), come after every other line, in ZooKeeper's order of the sets
    sets = [(k, v) for k, v in view.metrics.items() if k not in _MNTR_NAMES]
    for name in order:
        out.append((name, values[name]))
        if name == last:
            sets[:0] = after.get(name, ())
        else:
            out.extend(after.get(name, ()))
        out.extend(extra.get(name, ()))
    sets.sort(key=lambda kv: _summary_set_rank(kv[0]))  # stable: keys keep their order
    return out + sets


#: Where mntr's gauge sets and counter sets go (after the last gauge, the last counter).
_LAST_GAUGE = registry.GAUGES[-1].name
_LAST_COUNTER = registry.COUNTERS[-1].name
_MNTR_NAMES = frozenset(registry.MNTR_ORDER) | frozenset(registry.MNTR_ORDER_39)


def _summary_set_rank(line: str) -> int:
    """Where a summary set's mntr line (``<stat>_<key>_<set>``) goes among the sets."""
    for i, name in enumerate(registry.SUMMARY_SET_MNTR_ORDER):
        if line.endswith("_" + name):
            return i
    return len(registry.SUMMARY_SET_MNTR_ORDER)


# -- the Prometheus families ------------------------------------------------------------------


Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Family:
    """One ``MetricFamilySamples``: samples are (name, labels, value)."""

    name: str
    type: str
    samples: tuple[tuple[str, Labels, float], ...]
    help: str = ""


def _summary(
    name: str,
    advanced: bool,
    count: float,
    total: float,
    key: str | None,
    values: Sequence[float] = (),
) -> list[tuple[str, Labels, float]]:
    labels: Labels = (("key", key),) if key is not None else ()
    quantiles = [q for q, _ in registry.PROMETHEUS_QUANTILES[advanced]]
    values = values or [math.nan] * len(quantiles)
    out: list[tuple[str, Labels, float]] = [
        (name, (*labels, ("quantile", go_double(q))), v)
        for q, v in zip(quantiles, values, strict=True)
    ]
    out.append((name + "_count", labels, float(count)))
    out.append((name + "_sum", labels, float(total)))
    return out


def _split_namespaced(pairs: Sequence[tuple[str, int]], suffix: str) -> list[tuple[str, int]]:
    """mntr's ``<ns>_<suffix>`` pairs as (ns, value)."""
    tail = "_" + suffix
    return [(k[: -len(tail)], v) for k, v in pairs if k.endswith(tail)]


def families(view: StatusView) -> list[Family]:
    """The ZooKeeper families in the registry's order (gauges, gauge sets, counters, counter
    sets, summaries, summary sets), valued from the default provider's mntr values. Answering
    as 3.9.3, the counters and summaries 3.9's ``ServerMetrics`` adds (its AdminServer's
    snapshot and restore commands: :data:`~registry.COUNTERS_39`, :data:`~registry.SUMMARIES_39`,
    as in mntr) follow those of 3.8.0."""
    values = dict(mntr_values(view, provider_dump=False))
    zk39 = release.is_39(view.config.zookeeper_version)
    out: list[Family] = []
    for m in registry.GAUGES:
        out.append(Family(m.name, "gauge", ((m.name, (), float(values.get(m.name, 0))),)))
    for m in registry.GAUGE_SETS:
        samples = tuple(
            (m.name, (("key", ns),), float(v))
            for ns, v in _split_namespaced(view.quota_gauges, m.name)
        )
        out.append(Family(m.name, "gauge", samples))
    for m in registry.COUNTERS + (registry.COUNTERS_39 if zk39 else ()):
        out.append(Family(m.name, "counter", ((m.name, (), float(values.get(m.name, 0))),)))
    for m in registry.COUNTER_SETS:
        samples = tuple(
            (m.name, (("key", ns),), float(v))
            for ns, v in _split_namespaced(view.quota_counters, m.name)
        )
        out.append(Family(m.name, "counter", samples))
    sm = view.server_metrics
    for m in registry.SUMMARIES + (registry.SUMMARIES_39 if zk39 else ()):
        count = float(values.get(f"cnt_{m.name}", 0))
        total = float(values.get(f"sum_{m.name}", 0))
        qs = sm.summary(m.name).quantiles(view.now_ms) if sm and m.measured else ()
        summary = _summary(m.name, m.advanced, count, total, None, qs)
        out.append(Family(m.name, "summary", tuple(summary)))
    sets = sm.summary_set_samples(view.now_ms) if sm is not None else {}
    for m in registry.SUMMARY_SETS:
        set_samples: list[tuple[str, Labels, float]] = []
        kept = sets.get(m.name) or ()
        for key, qs, count, total in kept:  # no key observed: no samples
            set_samples += _summary(m.name, m.advanced, count, total, key, qs)
        if not kept:
            # sets kept outside ServerMetrics (a leader's learner_handler_qp: one key per
            # learner sid), from mntr's values
            for key in _set_keys(values, m.name):
                count = float(values[f"cnt_{key}_{m.name}"])
                total = float(values[f"sum_{key}_{m.name}"])
                set_samples += _summary(m.name, m.advanced, count, total, key, ())
        out.append(Family(m.name, "summary", tuple(set_samples)))
    return out


def _set_keys(values: dict[str, int | float | str], name: str) -> list[str]:
    """The keys of summary set ``name`` in mntr's ``cnt_<key>_<name>`` pairs, in mntr order.
    The sets measured are keyed by server id (``cnt_quorum_ack_latency`` is a summary of its
    own, not the ``ack_latency`` set's key "quorum")."""
    head, tail = "cnt_", "_" + name
    keys = (k[len(head) : -len(tail)] for k in values if k.startswith(head) and k.endswith(tail))
    return [k for k in keys if k.isdigit()]


def process_families(
    *, read: Callable[[str], str] | None = None, now: float | None = None
) -> list[Family]:
    """``process_*`` families of simpleclient's ``StandardExports`` (Linux ``/proc``) for
    this process."""
    import resource  # POSIX only

    reader = read or _read_file
    out: list[Family] = []
    t = os.times()
    out.append(
        Family(
            "process_cpu_seconds_total",
            "counter",
            (("process_cpu_seconds_total", (), t.user + t.system),),
            "Total user and system CPU time spent in seconds.",
        )
    )
    try:
        stat = reader("/proc/self/stat").rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        start = (now if now is not None else time.time()) - uptime + int(stat[19]) / ticks
        vsize, rss = float(stat[20]), float(int(stat[21]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, IndexError, ValueError):
        start = vsize = rss = math.nan
    out.append(
        Family(
            "process_start_time_seconds",
            "gauge",
            (("process_start_time_seconds", (), start),),
            "Start time of the process since unix epoch in seconds.",
        )
    )
    try:
        fds = float(len(os.listdir("/proc/self/fd")))
    except OSError:
        fds = math.nan
    out.append(
        Family(
            "process_open_fds",
            "gauge",
            (("process_open_fds", (), fds),),
            "Number of open file descriptors.",
        )
    )
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    out.append(
        Family(
            "process_max_fds",
            "gauge",
            (("process_max_fds", (), float(soft) if soft >= 0 else math.inf),),
            "Maximum number of open file descriptors.",
        )
    )
    out.append(
        Family(
            "process_virtual_memory_bytes",
            "gauge",
            (("process_virtual_memory_bytes", (), vsize),),
            "Virtual memory size in bytes.",
        )
    )
    out.append(
        Family(
            "process_resident_memory_bytes",
            "gauge",
            (("process_resident_memory_bytes", (), rss),),
            "Resident memory size in bytes.",
        )
    )
    return out


def _read_file(path: str) -> str:
    with open(path) as f:
        return f.read()


def dump_pairs(fams: Sequence[Family]) -> list[tuple[str, float]]:
    """``PrometheusMetricsProvider.dump``: (``name{k="v",...}`` without a trailing comma,
    value) per sample: what mntr prints with the provider on."""
    out: list[tuple[str, float]] = []
    for f in fams:
        for name, labels, value in f.samples:
            key = name
            if labels:
                key += "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
            out.append((key, value))
    return out


def all_families(view: StatusView, export_process: bool) -> list[Family]:
    """:func:`families`, then (``export_process``) :func:`process_families`."""
    fams = families(view)
    if export_process:
        fams += process_families()
    return fams


# -- process facts (impure helpers: call them from the server shell) ------------------------


def fd_gauges() -> dict[str, int]:
    """``open_file_descriptor_count`` / ``max_file_descriptor_count`` (the JVM's
    ``UnixOperatingSystemMXBean``: descriptors open, the soft ``RLIMIT_NOFILE``) of this
    process; Linux ``/proc``, absent elsewhere."""
    try:
        import resource  # POSIX only

        open_fds = len(os.listdir("/proc/self/fd"))
    except (ImportError, OSError):
        return {}
    return {
        "open_file_descriptor_count": open_fds,
        "max_file_descriptor_count": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    }


_JAVA_ARCH = {"x86_64": "amd64", "AMD64": "amd64", "i686": "x86", "i386": "x86", "arm64": "aarch64"}


def process_environment() -> list[tuple[str, str]]:
    """``envi``'s keys after ``zookeeper.version``, in ZooKeeper's order, filled from this
    Python process (``java.*`` keys describe the Python runtime; ``os.memory.*`` the process
    RSS and the machine's RAM). Reads the host, the clock-free process state and ``/proc``."""
    try:
        host = socket.getfqdn()
    except OSError:
        host = "localhost"
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * page
    except (OSError, ValueError, IndexError):
        rss = 0
    try:
        phys = os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):
        phys = 0
    mb = 1024 * 1024
    try:
        user = os.getlogin()
    except OSError:
        import getpass

        user = getpass.getuser()
    machine = platform.machine()
    return [
        ("host.name", host),
        ("java.version", platform.python_version()),
        ("java.vendor", platform.python_implementation()),
        ("java.home", sys.prefix),
        ("java.class.path", os.pathsep.join(p for p in sys.path if p)),
        ("java.library.path", os.environ.get("LD_LIBRARY_PATH", "")),
        ("java.io.tmpdir", tempfile.gettempdir()),
        ("java.compiler", "<NA>"),
        ("os.name", platform.system()),
        ("os.arch", _JAVA_ARCH.get(machine, machine)),
        ("os.version", platform.release()),
        ("user.name", user),
        ("user.home", os.path.expanduser("~")),
        ("user.dir", os.getcwd()),
        ("os.memory.free", f"{max(phys - rss, 0) // mb}MB" if phys else "0MB"),
        ("os.memory.max", f"{phys // mb}MB"),
        ("os.memory.total", f"{rss // mb}MB"),
    ]
