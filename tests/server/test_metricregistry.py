"""The metric registry (trizk.server.common.metricregistry): one row per metric, and the three
outputs made of it (mntr's order, the Prometheus families, ServerMetrics' attributes) agree."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from trizk.server.common import metricregistry as registry
from trizk.server.common.servermetrics import ServerMetrics, Summary, SummarySet
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.ops import status


def test_names_are_unique_and_kinds_are_in_their_tables() -> None:
    tables = {
        registry.GAUGE: registry.GAUGES,
        registry.GAUGE_SET: registry.GAUGE_SETS,
        registry.COUNTER: registry.COUNTERS,
        registry.COUNTER_SET: registry.COUNTER_SETS,
        registry.SUMMARY: registry.SUMMARIES,
        registry.SUMMARY_SET: registry.SUMMARY_SETS,
    }
    names = [m.name for table in tables.values() for m in table]
    assert len(names) == len(set(names))
    for kind, table in tables.items():
        assert all(m.kind == kind for m in table)
    assert not any(m.measured for m in registry.GAUGES)  # the status view reports gauges


def _assigned_fields() -> set[str]:
    """The attributes ``ServerMetrics.__init__`` assigns (read from the source: a compiled
    class keeps no ``__dict__`` to list), but for its settings and the auth-failure gauge."""
    source = Path(__file__).parents[2] / "server" / "common" / "servermetrics.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerMetrics"]
    (init,) = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
    return {
        t.attr
        for n in ast.walk(init)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    } - {"prometheus", "clock", "auth_failed_count"}


def test_server_metrics_holds_exactly_the_measured_metrics() -> None:
    m = ServerMetrics()
    assert _assigned_fields() == {
        *registry.MEASURED_COUNTERS,
        *(x.name for x in registry.MEASURED_SUMMARIES),
        *(x.name for x in registry.MEASURED_SUMMARY_SETS),
    }
    for name in registry.MEASURED_COUNTERS:
        assert getattr(m, name) == 0
    for row in registry.MEASURED_SUMMARIES:
        s = m.summary(row.name)
        assert isinstance(s, Summary) and s.advanced == row.advanced
    for row in registry.MEASURED_SUMMARY_SETS:
        ss = m.summary_set(row.name)
        assert isinstance(ss, SummarySet) and ss.advanced == row.advanced


def test_mntr_order_and_the_summary_sets_order() -> None:
    order = registry.MNTR_ORDER
    assert order[:3] == ("version", "server_state", "ephemerals_count")
    assert order.index("non_mtls_local_conn_count") + 1 == order.index("proposal_count")
    assert order[-1] == "p999_write_commitproc_time_ms"
    assert "p50_readlatency" in order and "p50_fsynctime" not in order
    # as a live ZooKeeper 3.8.0 leader prints them
    assert registry.SUMMARY_SET_MNTR_ORDER == (
        "learner_handler_qp_size",
        "read_per_namespace",
        "ack_latency",
        "write_per_namespace",
        "learner_handler_qp_time_ms",
    )


@pytest.mark.parametrize("version", ["3.9.3", "3.8.0"])
def test_families_follow_the_registry(tmp_path: Path, version: str) -> None:
    """(3.9.3, the default, adds its counters and summary after 3.8.0's.)"""
    cfg = ServerConfig.create(tmp_path, clientPort=2181, **{"trizk.zookeeperVersion": version})
    fams = status.families(status.SimpleView(config=cfg))
    zk39 = version == "3.9.3"
    rows = (
        *registry.GAUGES,
        *registry.GAUGE_SETS,
        *registry.COUNTERS,
        *(registry.COUNTERS_39 if zk39 else ()),
        *registry.COUNTER_SETS,
        *registry.SUMMARIES,
        *(registry.SUMMARIES_39 if zk39 else ()),
        *registry.SUMMARY_SETS,
    )
    assert [f.name for f in fams] == [m.name for m in rows]
    for f, m in zip(fams, rows, strict=True):
        assert f.type == m.kind.removesuffix("_set")
        if m.kind == registry.SUMMARY:
            quantiles = [s for s in f.samples if s[0] == m.name]
            assert len(quantiles) == len(registry.PROMETHEUS_QUANTILES[m.advanced])
