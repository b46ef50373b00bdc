"""ZooKeeper's Prometheus metrics provider: ``/metrics`` with ZooKeeper 3.8's names and types.

Theory of operation
===================
With ``metricsProvider.className=org.apache.zookeeper.metrics.prometheus.
PrometheusMetricsProvider`` ZooKeeper 3.8 registers every metric of ``ServerMetrics`` and the
server's gauges in the Java ``simpleclient`` 0.9.0 and serves them on
``metricsProvider.httpHost:httpPort`` (0.0.0.0:7000) at ``/metrics``. Grafana dashboards and
alert rules key on those names, so trizk writes the same families, one per metric of the metric
registry (:mod:`trizk.server.common.metricregistry`), built by the status model
(:func:`trizk.server.ops.status.families`):

* gauges (``registerGauge``) and gauge sets (``registerGaugeSet``, label ``key``): TYPE gauge;
* counters (``getCounter``) and counter sets (label ``key``): TYPE counter, *no* ``_total``
  suffix (simpleclient 0.9.0 predates OpenMetrics naming);
* summaries (``getSummary``): quantile 0.5 (``DetailLevel.BASIC``) or 0.5/0.9/0.99
  (``ADVANCED``), then ``_count`` and ``_sum``; summary sets add the label ``key`` before
  ``quantile``. The quantiles cover the last 10 minutes (:mod:`trizk.server.common.quantiles`,
  fed by :mod:`trizk.server.common.servermetrics`); a summary without observations there has
  NaN ones.

Every family is written as simpleclient's ``TextFormat.write004``: ``# HELP name name`` (the
help text is the name), ``# TYPE``, samples ``name{label="v",} value`` (note the trailing
comma) with values as Java doubles (``5.0``, ``NaN``, ``+Inf``).

The values come from the same view the four-letter words print (the status model's
:func:`~trizk.server.ops.status.mntr_values`): no second copy of any statistic. This module is
the text format and the HTTP endpoint (:mod:`trizk.server.ops.http`). With the provider on,
``mntr`` (and the AdminServer's ``monitor``) change shape as ZooKeeper's do: ``version`` and
``server_state``, then one line per sample (``zk_fsynctime{quantile="0.5"}\\tNaN``,
``zk_znode_count\\t5.0``).

``exportJvmInfo`` (default true) adds simpleclient's process collector families
(``process_cpu_seconds_total``, ``process_open_fds``...) measured for this Python process; the
``jvm_*`` families have no Python counterpart and are not written.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from trizk.server.config.zoocfg import ServerConfig
from trizk.server.ops import http
from trizk.server.ops.javatext import go_double
from trizk.server.ops.status import (
    Family,
    StatusView,
    all_families,
    prometheus_configured,
    prometheus_exports_process,
)

__all__ = [
    "CONTENT_TYPE",
    "MetricsSettings",
    "respond",
    "serve_metrics",
    "text_format",
]

log = logging.getLogger("trizk.server.ops.metrics")

#: simpleclient's ``TextFormat.CONTENT_TYPE_004``.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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
            enabled=prometheus_configured(config),
            host=p.get("httpHost", "0.0.0.0"),
            port=port_n,
            export_jvm_info=prometheus_exports_process(config),
        )


# -- output ---------------------------------------------------------------------------------


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
                out.append(f"{name}{{{inner}}} {go_double(value)}\n")
            else:
                out.append(f"{name} {go_double(value)}\n")
    return "".join(out)


# -- the Trio shell -------------------------------------------------------------------------


def respond(
    method: str,
    target: str,
    view: StatusView | None,
    export_process: bool,
) -> http.HttpAnswer:
    """simpleclient's ``MetricsServlet`` at ``/metrics`` (GET, HEAD and POST alike; the
    ``name[]`` parameters select families); Jetty's 404/405 elsewhere."""
    raw_path, _, query = target.partition("?")
    path = urllib.parse.unquote(raw_path, errors="replace")
    if path != "/metrics":
        return http.error_page(404, path, "Not Found")
    if method not in ("GET", "HEAD", "POST"):
        return http.error_page(405, path, f"HTTP method {method} is not supported by this URL")
    fams = all_families(view, export_process) if view is not None else []
    wanted = {v for k, v in urllib.parse.parse_qsl(query) if k == "name[]"}
    if wanted:
        fams = [f for f in fams if f.name in wanted]
    body = text_format(fams).encode()
    return http.HttpAnswer(200, (("Content-Type", CONTENT_TYPE),), body)


async def serve_metrics(
    settings: MetricsSettings,
    view: Callable[[], StatusView | None],
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``/metrics`` until cancelled; ``task_status.started(port)``, or None when the
    provider is off or its port cannot be bound (ZooKeeper does not start then; trizk logs
    and carries on, as with the AdminServer)."""
    if not settings.enabled:
        task_status.started(None)
        return

    def answer(method: str, target: str) -> http.HttpAnswer:
        return respond(method, target, view(), settings.export_jvm_info)

    def started(port: int) -> None:
        log.info(
            "Starting /metrics HTTP endpoint at host: %s, port: %d, exportJvmInfo: %s",
            settings.host,
            port,
            "true" if settings.export_jvm_info else "false",
        )

    await http.serve_http(
        settings.host,
        settings.port,
        answer,
        http.DEFAULT_IDLE_TIMEOUT,
        on_error=f"Cannot start /metrics server on {settings.host}:{settings.port}",
        on_started=started,
        logger=log,
        task_status=task_status,
    )
