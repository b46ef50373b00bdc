"""ZooKeeper's Prometheus metrics provider: ``/metrics`` with ZooKeeper 3.8's names and types.

Theory of operation
===================
With ``metricsProvider.className=org.apache.zookeeper.metrics.prometheus.
PrometheusMetricsProvider`` ZooKeeper 3.8 registers every metric of ``ServerMetrics`` and the
server's gauges in the Java ``simpleclient`` 0.9.0 and serves them on
``metricsProvider.httpHost:httpPort`` (0.0.0.0:7000) at ``/metrics``. Grafana dashboards and
alert rules key on those names, so trizk writes the same families from one table:

* gauges (``registerGauge``) and gauge sets (``registerGaugeSet``, label ``key``): TYPE gauge;
* counters (``getCounter``) and counter sets (label ``key``): TYPE counter, *no* ``_total``
  suffix (simpleclient 0.9.0 predates OpenMetrics naming);
* summaries (``getSummary``): quantile 0.5 (``DetailLevel.BASIC``) or 0.5/0.9/0.99
  (``ADVANCED``), then ``_count`` and ``_sum``; summary sets add the label ``key`` before
  ``quantile``. The quantiles cover the last 10 minutes (:mod:`trizk.server.common.quantiles`, fed
  by
  :mod:`trizk.server.common.servermetrics`); a summary without observations there has NaN ones.

Every family is written as simpleclient's ``TextFormat.write004``: ``# HELP name name`` (the
help text is the name), ``# TYPE``, samples ``name{label="v",} value`` (note the trailing
comma) with values as Java doubles (``5.0``, ``NaN``, ``+Inf``).

The values come from the same view the four-letter words print (:func:`fourlw.mntr_values`):
no second copy of any statistic. With the provider on, ``mntr`` (and the AdminServer's
``monitor``) change shape as ZooKeeper's do: ``version`` and ``server_state``, then one line per
sample (``zk_fsynctime{quantile="0.5"}\\tNaN``, ``zk_znode_count\\t5.0``).

``exportJvmInfo`` (default true) adds simpleclient's process collector families
(``process_cpu_seconds_total``, ``process_open_fds``...) measured for this Python process; the
``jvm_*`` families have no Python counterpart and are not written.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from trizk.server.common.servermetrics import SUMMARIES
from trizk.server.config.zoocfg import ServerConfig, java_boolean
from trizk.server.ops import admin, fourlw
from trizk.storage.tree import quota

__all__ = [
    "CONTENT_TYPE",
    "PROMETHEUS_PROVIDER",
    "Family",
    "MetricsSettings",
    "all_families",
    "dump_pairs",
    "families",
    "process_families",
    "prometheus_enabled",
    "respond",
    "serve_metrics",
    "text_format",
]

log = logging.getLogger("trizk.server.ops.metrics")

PROMETHEUS_PROVIDER = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"
#: simpleclient's ``TextFormat.CONTENT_TYPE_004``.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: ``registerGauge`` names of a standalone ZooKeeperServer (``registerMetrics``); mntr prints
#: them among its counters, in the order of fourlw's table.
GAUGES: frozenset[str] = frozenset(
    {
        "ephemerals_count", "num_alive_connections", "avg_latency", "outstanding_requests",
        "znode_count", "global_sessions", "non_mtls_remote_conn_count",
        "last_client_response_size", "packets_sent", "packets_received",
        "max_client_response_size", "connection_drop_probability", "watch_count",
        "auth_failed_count", "min_latency", "max_file_descriptor_count", "approximate_data_size",
        "open_file_descriptor_count", "local_sessions", "uptime", "max_latency",
        "outstanding_tls_handshake", "min_client_response_size", "non_mtls_local_conn_count",
    }
)  # fmt: skip
#: ``registerGaugeSet`` names (``QuotaMetricsUtils``), label ``key`` = the quota namespace.
GAUGE_SETS: tuple[str, ...] = tuple(name for name, _ in quota.GAUGE_SETS)
#: ``getCounterSet`` names.
COUNTER_SETS: tuple[str, ...] = (quota.QUOTA_EXCEEDED_ERROR_PER_NAMESPACE,)
#: ``getSummarySet`` names and whether they are ADVANCED (three quantiles).
SUMMARY_SETS: tuple[tuple[str, bool], ...] = (
    ("write_per_namespace", False),
    ("read_per_namespace", False),
    ("learner_handler_qp_size", False),
    ("learner_handler_qp_time_ms", True),
    ("ack_latency", True),
)
BASIC_QUANTILES = (0.5,)
ADVANCED_QUANTILES = (0.5, 0.9, 0.99)

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Family:
    """One ``MetricFamilySamples``: samples are (name, labels, value)."""

    name: str
    type: str
    samples: tuple[tuple[str, Labels, float], ...]
    help: str = ""


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """``metricsProvider.*`` (``PrometheusMetricsProvider.configure``)."""

    enabled: bool = False
    host: str = "0.0.0.0"
    port: int = 7000
    export_jvm_info: bool = True

    @classmethod
    def from_config(cls, config: ServerConfig) -> MetricsSettings:
        p = config.metrics_provider
        port = p.get("httpPort", "7000")
        try:
            port_n = int(port)
        except ValueError:
            port_n = 7000  # ZooKeeper: NumberFormatException, the server does not start
        return cls(
            enabled=prometheus_enabled(config),
            host=p.get("httpHost", "0.0.0.0"),
            port=port_n,
            export_jvm_info=java_boolean(p.get("exportJvmInfo", "true")),
        )


def prometheus_enabled(config: ServerConfig) -> bool:
    return fourlw.prometheus_configured(config)


# -- families from the view -----------------------------------------------------------------


def _summary(
    name: str,
    advanced: bool,
    count: float,
    total: float,
    key: str | None,
    values: Sequence[float] = (),
) -> list[tuple[str, Labels, float]]:
    labels: Labels = (("key", key),) if key is not None else ()
    quantiles = ADVANCED_QUANTILES if advanced else BASIC_QUANTILES
    values = values or [math.nan] * len(quantiles)
    out: list[tuple[str, Labels, float]] = [
        (name, (*labels, ("quantile", _go(q))), v) for q, v in zip(quantiles, values, strict=True)
    ]
    out.append((name + "_count", labels, float(count)))
    out.append((name + "_sum", labels, float(total)))
    return out


def _split_namespaced(pairs: Sequence[tuple[str, int]], suffix: str) -> list[tuple[str, int]]:
    """mntr's ``<ns>_<suffix>`` pairs as (ns, value)."""
    tail = "_" + suffix
    return [(k[: -len(tail)], v) for k, v in pairs if k.endswith(tail)]


def families(view: fourlw.FourLetterView) -> list[Family]:
    """The ZooKeeper families, valued from the four-letter words' view."""
    values = dict(fourlw.mntr_values(view, provider_dump=False))
    out: list[Family] = []
    counters: list[str] = []
    for name in fourlw.MNTR_GAUGES_AND_COUNTERS:
        if name in GAUGES:
            out.append(Family(name, "gauge", ((name, (), float(values.get(name, 0))),)))
        else:
            counters.append(name)
    for set_name in GAUGE_SETS:
        samples = tuple(
            (set_name, (("key", ns),), float(v))
            for ns, v in _split_namespaced(view.quota_gauges, set_name)
        )
        out.append(Family(set_name, "gauge", samples))
    for name in counters:
        out.append(Family(name, "counter", ((name, (), float(values.get(name, 0))),)))
    for set_name in COUNTER_SETS:
        samples = tuple(
            (set_name, (("key", ns),), float(v))
            for ns, v in _split_namespaced(view.quota_counters, set_name)
        )
        out.append(Family(set_name, "counter", samples))
    sm = view.server_metrics
    for name, advanced in fourlw.MNTR_SUMMARIES:
        count = float(values.get(f"cnt_{name}", 0))
        total = float(values.get(f"sum_{name}", 0))
        qs = sm.summary(name).quantiles(view.now_ms) if sm and name in SUMMARIES else ()
        out.append(Family(name, "summary", tuple(_summary(name, advanced, count, total, None, qs))))
    sets = sm.summary_set_samples(view.now_ms) if sm is not None else {}
    for name, advanced in SUMMARY_SETS:
        set_samples: list[tuple[str, Labels, float]] = []
        kept = sets.get(name) or ()
        for key, qs, count, total in kept:  # no key observed: no samples
            set_samples += _summary(name, advanced, count, total, key, qs)
        if not kept:
            # sets kept outside ServerMetrics (a leader's learner_handler_qp: one key per
            # learner sid), from mntr's values
            for key in _set_keys(values, name):
                count = float(values[f"cnt_{key}_{name}"])
                total = float(values[f"sum_{key}_{name}"])
                set_samples += _summary(name, advanced, count, total, key, ())
        out.append(Family(name, "summary", tuple(set_samples)))
    return out


def _set_keys(values: dict[str, int | float | str], name: str) -> list[str]:
    """The keys of summary set ``name`` in mntr's ``cnt_<key>_<name>`` pairs, in mntr order.
    The sets measured are keyed by server id (``cnt_quorum_ack_latency`` is a summary of its
    own, not the ``ack_latency`` set's key "quorum")."""
    head, tail = "cnt_", "_" + name
    keys = (k[len(head) : -len(tail)] for k in values if k.startswith(head) and k.endswith(tail))
    return [k for k in keys if k.isdigit()]


# -- process facts (simpleclient's StandardExports, for this process) -----------------------


def process_families(
    *, read: Callable[[str], str] | None = None, now: float | None = None
) -> list[Family]:
    """``process_*`` families of simpleclient's ``StandardExports`` (Linux ``/proc``)."""
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


# -- output ---------------------------------------------------------------------------------


def _go(x: float) -> str:
    """``Collector.doubleToGoString``: ``+Inf``, ``-Inf``, ``NaN``, else ``Double.toString``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return fourlw.java_double(float(x))


def _escape_help(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def text_format(fams: Sequence[Family]) -> str:
    """simpleclient 0.9.0's ``TextFormat.write004``."""
    out: list[str] = []
    for f in fams:
        out.append(f"# HELP {f.name} {_escape_help(f.help or f.name)}\n")
        out.append(f"# TYPE {f.name} {f.type}\n")
        for name, labels, value in f.samples:
            if labels:
                inner = "".join(f'{k}="{_escape_label(v)}",' for k, v in labels)
                out.append(f"{name}{{{inner}}} {_go(value)}\n")
            else:
                out.append(f"{name} {_go(value)}\n")
    return "".join(out)


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


def all_families(view: fourlw.FourLetterView, export_process: bool) -> list[Family]:
    fams = families(view)
    if export_process:
        fams += process_families()
    return fams


# -- the Trio shell -------------------------------------------------------------------------


def respond(
    method: str,
    target: str,
    view: fourlw.FourLetterView | None,
    export_process: bool,
) -> admin.HttpAnswer:
    """simpleclient's ``MetricsServlet`` at ``/metrics`` (GET, HEAD and POST alike; the
    ``name[]`` parameters select families); Jetty's 404/405 elsewhere."""
    raw_path, _, query = target.partition("?")
    path = urllib.parse.unquote(raw_path, errors="replace")
    if path != "/metrics":
        return admin.error_page(404, path, "Not Found")
    if method not in ("GET", "HEAD", "POST"):
        return admin.error_page(405, path, f"HTTP method {method} is not supported by this URL")
    fams = all_families(view, export_process) if view is not None else []
    wanted = {v for k, v in urllib.parse.parse_qsl(query) if k == "name[]"}
    if wanted:
        fams = [f for f in fams if f.name in wanted]
    body = text_format(fams).encode()
    return admin.HttpAnswer(200, (("Content-Type", CONTENT_TYPE),), body)


async def serve_metrics(
    settings: MetricsSettings,
    view: Callable[[], fourlw.FourLetterView | None],
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``/metrics`` until cancelled; ``task_status.started(port)``, or None when the
    provider is off or its port cannot be bound (ZooKeeper does not start then; trizk logs
    and carries on, as with the AdminServer)."""
    if not settings.enabled:
        task_status.started(None)
        return

    def answer(method: str, target: str) -> admin.HttpAnswer:
        return respond(method, target, view(), settings.export_jvm_info)

    def started(port: int) -> None:
        log.info(
            "Starting /metrics HTTP endpoint at host: %s, port: %d, exportJvmInfo: %s",
            settings.host,
            port,
            "true" if settings.export_jvm_info else "false",
        )

    await admin.serve_http(
        settings.host,
        settings.port,
        answer,
        admin.DEFAULT_IDLE_TIMEOUT,
        on_error=f"Cannot start /metrics server on {settings.host}:{settings.port}",
        on_started=started,
        task_status=task_status,
    )
