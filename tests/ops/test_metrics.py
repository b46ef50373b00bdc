"""The Prometheus provider's pure parts: simpleclient 0.9.0's text format, the families built
from the four-letter words' view, and mntr's shape with the provider on."""

from __future__ import annotations

import math
from pathlib import Path

from trizk.quorum.zab.zabwire import PacketType
from trizk.server.common.metricregistry import MNTR_ORDER
from trizk.server.common.servermetrics import Summary
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.ops import admin, fourlw, metrics, status
from trizk.server.shell.ensemble import QueueMeter

PROM = {"metricsProvider.className": status.PROMETHEUS_PROVIDER}


def _view(tmp_path: Path, **kw: object) -> status.SimpleView:
    cfg = ServerConfig.create(tmp_path, clientPort=2181, **PROM)
    return status.SimpleView(config=cfg, **kw)  # type: ignore[arg-type]


def test_text_format_is_simpleclient_004() -> None:
    fams = [
        status.Family("c", "counter", (("c", (), 3.0),)),
        status.Family(
            "s",
            "summary",
            (
                ("s", (("key", 'a"b'), ("quantile", "0.5")), math.nan),
                ("s_count", (("key", 'a"b'),), 0.0),
            ),
        ),
        status.Family("g", "gauge", (("g", (), 4.3220992e7),), "Some\nhelp"),
    ]
    assert metrics.text_format(fams) == (
        "# HELP c c\n# TYPE c counter\nc 3.0\n"
        "# HELP s s\n# TYPE s summary\n"
        's{key="a\\"b",quantile="0.5",} NaN\n'
        's_count{key="a\\"b",} 0.0\n'
        "# HELP g Some\\nhelp\n# TYPE g gauge\ng 4.3220992E7\n"
    )
    assert status.dump_pairs(fams)[1][0] == 's{key="a"b",quantile="0.5"}'


def test_families_from_the_view(tmp_path: Path) -> None:
    v = _view(
        tmp_path,
        node_count=7,
        quota_gauges=[("abc_quota_count_limit_per_namespace", 3)],
        quota_counters=[("abc_quota_exceeded_error_per_namespace", 2)],
    )
    fams = {f.name: f for f in status.families(v)}
    assert fams["znode_count"].type == "gauge"
    assert fams["znode_count"].samples == (("znode_count", (), 7.0),)
    assert fams["proposal_count"].type == "counter"
    assert not any(n.endswith("_total") for n in fams)
    assert fams["quota_count_limit_per_namespace"].samples == (
        ("quota_count_limit_per_namespace", (("key", "abc"),), 3.0),
    )
    assert fams["quota_exceeded_error_per_namespace"].type == "counter"
    assert fams["quota_exceeded_error_per_namespace"].samples[0][2] == 2.0
    fsync = fams["fsynctime"].samples  # BASIC: one quantile
    assert [s[0] for s in fsync] == ["fsynctime", "fsynctime_count", "fsynctime_sum"]
    read = fams["readlatency"].samples  # ADVANCED: three
    assert [dict(s[1]).get("quantile") for s in read[:3]] == ["0.5", "0.9", "0.99"]
    assert fams["read_per_namespace"].samples == ()


def test_families_of_the_release(tmp_path: Path) -> None:
    """Answering as 3.9.3 (the default), /metrics has the counters and the summary 3.9's
    ServerMetrics adds for the AdminServer's snapshot and restore commands (mntr has them
    too); answering as 3.8.0 it has none of them."""
    names39 = {"restore_error_count", "snapshot_rate_limited_count", "snapshot_error_count"}
    names39 |= {"restore_rate_limited_count", "restore_time"}
    fams = {f.name: f for f in status.families(_view(tmp_path))}
    assert names39 <= set(fams)
    assert fams["snapshot_error_count"].type == "counter"
    assert fams["snapshot_error_count"].samples == (("snapshot_error_count", (), 0.0),)
    restore = fams["restore_time"]  # DetailLevel.BASIC: one quantile, NaN while idle
    assert restore.type == "summary"
    assert [s[0] for s in restore.samples] == [
        "restore_time",
        "restore_time_count",
        "restore_time_sum",
    ]
    assert math.isnan(restore.samples[0][2]) and restore.samples[1][2] == 0.0
    mntr = fourlw.respond("mntr", _view(tmp_path)).decode().splitlines()
    assert "zk_restore_error_count\t0.0" in mntr and 'zk_restore_time{quantile="0.5"}\tNaN' in mntr
    cfg = ServerConfig.create(
        tmp_path, clientPort=2181, **PROM, **{"trizk.zookeeperVersion": "3.8.0"}
    )
    fams38 = {f.name for f in status.families(status.SimpleView(config=cfg))}
    assert not names39 & fams38 and len(fams38) == len(fams) - len(names39)


def test_mntr_changes_shape_with_the_provider(tmp_path: Path) -> None:
    v = _view(tmp_path, node_count=5)
    lines = fourlw.respond("mntr", v).decode().splitlines()
    assert lines[0].startswith("zk_version\t") and lines[1] == "zk_server_state\tstandalone"
    assert "zk_znode_count\t5.0" in lines
    assert 'zk_fsynctime{quantile="0.5"}\tNaN' in lines
    assert "zk_fsynctime_count\t0.0" in lines
    assert any(line.startswith("zk_process_open_fds\t") for line in lines)
    assert not any(line.startswith("zk_avg_fsynctime") for line in lines)
    mon = admin.run_command("monitor", v, admin.AdminContext())
    assert mon["znode_count"] == 5.0 and isinstance(mon["znode_count"], float)
    # without the provider: the default provider's shape
    plain = status.SimpleView(config=ServerConfig.create(tmp_path, clientPort=2181))
    assert "zk_znode_count\t5" in fourlw.respond("mntr", plain).decode().splitlines()


def test_no_process_families_without_export_jvm_info(tmp_path: Path) -> None:
    cfg = ServerConfig.create(
        tmp_path, clientPort=2181, **PROM, **{"metricsProvider.exportJvmInfo": "false"}
    )
    v = status.SimpleView(config=cfg)
    assert not metrics.MetricsSettings.from_config(cfg).export_jvm_info
    mntr = fourlw.respond("mntr", v).decode().splitlines()
    assert not any(line.startswith("zk_process_") for line in mntr)


def test_route() -> None:
    assert metrics.respond("GET", "/other", None, False).status == 404
    assert metrics.respond("PUT", "/metrics", None, False).status == 405
    ok = metrics.respond("POST", "/metrics", None, False)
    assert ok.status == 200 and dict(ok.headers)["Content-Type"] == metrics.CONTENT_TYPE


def test_learner_queue_summary_sets_from_the_view(tmp_path: Path) -> None:
    """A leader's learner_handler_qp sets: one key label per learner sid; the
    ``quorum_ack_latency`` summary is not mistaken for a key of the ``ack_latency`` set."""
    sizes, times = Summary(False, None), Summary(True, None)
    for n in (3, 1, 0):
        sizes.add(n)
    times.add(7)
    last = MNTR_ORDER[-1]
    role = [(k, last, v) for k, v in sizes.mntr_values("2_learner_handler_qp_size")]
    role += [(k, last, v) for k, v in times.mntr_values("2_learner_handler_qp_time_ms")]
    v = _view(tmp_path, role_metrics=role)
    assert [k for k, _ in status.mntr_values(v, provider_dump=False)][-14:] == [
        k for k, _, _ in role
    ]
    fams = {f.name: f for f in status.families(v)}
    qp = fams["learner_handler_qp_size"].samples
    assert [(s[0], dict(s[1]).get("key"), s[2]) for s in qp[1:]] == [
        ("learner_handler_qp_size_count", "2", 3.0),
        ("learner_handler_qp_size_sum", "2", 4.0),
    ]
    assert len(fams["learner_handler_qp_time_ms"].samples) == 5  # three quantiles, count, sum
    assert fams["ack_latency"].samples == ()


def test_queue_meter_samples_like_learner_handler() -> None:
    """Every item taken adds the queue's remaining size; a marker follows the first of every
    1000 packets queued through queuePacket (not NEWLEADER/UPTODATE; LEADERINFO and SNAP are
    written outside the queue) and its wait is a time sample."""
    sizes, times = Summary(True, None), Summary(True, None)  # both keep their samples
    m = QueueMeter(sizes, times)
    m.queued(PacketType.LEADERINFO, 0)
    m.queued(PacketType.DIFF, 10)  # packet 0: + marker
    m.queued(PacketType.NEWLEADER, 10)
    m.queued(PacketType.PING, 11)
    m.taken(25)
    assert list(sizes.recent) == [3, 2, 1, 0]
    assert list(times.recent) == [15]
    for _ in range(999):
        m.queued(PacketType.PROPOSAL, 30)  # packets 2..1000: the 1000th gets a marker
    m.taken(40)
    assert times.count == 2 and list(times.recent)[-1] == 10
    assert sizes.count == 4 + 1000
