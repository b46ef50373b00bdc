"""trizk's Prometheus ``/metrics`` against ZooKeeper's metric families as its sources register
them (3.8.0's, and the five more of 3.9.3, trizk answering as each release;
:mod:`trizk.compat.capture.zookeeper_metrics`; Debian's ZooKeeper does not ship the provider, so
there is no live oracle): every family, type, label and quantile; nothing extra; values equal
to what mntr (the same statistics) prints in the same state."""

from __future__ import annotations

import contextlib
import re
import urllib.request
from collections import defaultdict
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from trizk.compat.capture import zookeeper_metrics as zkm
from trizk.compat.procs import servers
from trizk.server.ops import status
from trizk.testing.ports import free_port
from trizk.testing.probes import ask

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",')


def _parse(
    text: str,
) -> tuple[dict[str, str], dict[str, str], list[tuple[str, dict[str, str], str]]]:
    helps: dict[str, str] = {}
    types: dict[str, str] = {}
    samples = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            helps[name] = help_text
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            types[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"not a 0.0.4 sample line: {line!r}"
            labels = dict(_LABEL.findall(m.group(2) or ""))
            if m.group(2):
                # simpleclient 0.9.0 ends every label with a comma
                assert m.group(2).endswith(","), line
            samples.append((m.group(1), labels, m.group(3)))
    return helps, types, samples


def _expected_types(version: str) -> dict[str, str]:
    want = {n: "gauge" for n in (*zkm.GAUGES, *zkm.GAUGE_SETS)}
    want.update({n: "counter" for n in (*_counters(version), *zkm.COUNTER_SETS)})
    want.update({n: "summary" for n in (*_summaries(version), *zkm.SUMMARY_SETS)})
    want.update(zkm.PROCESS)
    return want


def _counters(version: str) -> tuple[str, ...]:
    return zkm.COUNTERS + (zkm.COUNTERS_39 if version == "3.9.3" else ())


def _summaries(version: str) -> dict[str, str]:
    return {**zkm.SUMMARIES, **(zkm.SUMMARIES_39 if version == "3.9.3" else {})}


def _fourlw(srv: servers.Server, word: str) -> str:
    return ask(srv.port, word, 10, srv.host).decode()


@contextlib.contextmanager
def prometheus_trizk(
    extra: dict[str, str], version: str | None = None
) -> Iterator[tuple[servers.Server, int]]:
    """A trizk process with the Prometheus provider on a free loopback port, answering as
    ``version`` (default: trizk's): (server, port)."""
    port = free_port()
    cfg = {
        "metricsProvider.className": status.PROMETHEUS_PROVIDER,
        "metricsProvider.httpHost": "127.0.0.1",
        "metricsProvider.httpPort": str(port),
        **extra,
    }
    with servers.running("trizk", cfg, version=version) as srv:
        yield srv, port


@pytest.mark.parametrize("version", ["3.8.0", "3.9.3"])
def test_metrics_families_are_zookeepers(version: str) -> None:
    with prometheus_trizk({"enforceQuota": "true"}, version) as (srv, port):
        zk = KazooClient(hosts=srv.address, timeout=10)
        zk.start(timeout=20)
        try:
            zk.create("/ns/sub", b"12", makepath=True)
            q = "/zookeeper/quota/ns/sub"
            zk.create(q, makepath=True)
            zk.create(f"{q}/zookeeper_limits", b"count=-1,bytes=-1;countHardLimit=1")
            zk.create(f"{q}/zookeeper_stats", b"count=0,bytes=0")
            try:
                zk.create("/ns/sub/x")
                zk.create("/ns/sub/y")
            except Exception:
                pass
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
                text = r.read().decode()
            mntr = _fourlw(srv, "mntr")
        finally:
            zk.stop()
            zk.close()

    helps, types, samples = _parse(text)
    assert types == _expected_types(version)
    for name in types:
        if name not in zkm.PROCESS:
            assert helps[name] == name  # PrometheusMetricsProvider: build(name, name)
    by_family: dict[str, list[tuple[str, dict[str, str], str]]] = defaultdict(list)
    for name, labels, value in samples:
        family = re.sub(r"_(count|sum)$", "", name) if name not in types else name
        assert family in types, name
        by_family[family].append((name, labels, value))
    for name in (*zkm.GAUGES, *_counters(version)):
        assert [(n, lab) for n, lab, _ in by_family[name]] == [(name, {})], name
    for name, level in _summaries(version).items():
        got = by_family[name]
        quantiles = tuple(lab["quantile"] for n, lab, _ in got if n == name)
        assert quantiles == zkm.QUANTILES[level], name
        assert [n for n, _, _ in got if n != name] == [f"{name}_count", f"{name}_sum"]
    for name in (*zkm.GAUGE_SETS, *zkm.COUNTER_SETS):
        assert all(set(lab) == {"key"} for _, lab, _ in by_family[name]), name
    # the quota gauge sets and the exceeded counter carry the namespace
    assert ("quota_count_limit_per_namespace", {"key": "ns"}, "1.0") in samples
    assert ("quota_exceeded_error_per_namespace", {"key": "ns"}, "1.0") in samples

    # mntr with the provider on: version, server_state, then the same samples
    lines = mntr.splitlines()
    assert lines[1] == "zk_server_state\tstandalone"
    keys = [line.split("\t")[0] for line in lines[2:]]
    expected = []
    for name, labels, _ in samples:
        inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
        expected.append("zk_" + name + (f"{{{inner}}}" if labels else ""))
    assert keys == expected
    values = dict(line.split("\t") for line in lines)
    assert values["zk_znode_count"] == next(v for n, _, v in samples if n == "znode_count")
