"""Quota observability against real ZooKeeper: mntr's per-namespace quota lines and the
"Quota exceeded" warning, after the same kazoo session on both servers (``enforceQuota=true``).
The request/reply side of quotas is in compat/scenarios/quota.json."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import QuotaExceededError

from trizk.compat.procs import servers
from trizk.testing.probes import ask

CFG = {"enforceQuota": "true", "4lw.commands.whitelist": "*"}


def _fourlw(srv: servers.Server, word: str) -> str:
    return ask(srv.port, word, 10, srv.host).decode()


def _session(srv: servers.Server) -> tuple[list[str], list[str]]:
    """Quotas on four namespaces, two hard-limit failures each; the quota lines of mntr."""
    zk = KazooClient(hosts=srv.address, timeout=10)
    zk.start(timeout=20)
    failures = []
    try:
        for ns in ("t", "abc", "zz", "a"):
            zk.create(f"/{ns}", b"x")
            zk.create(f"/{ns}/sub", b"yy")
            q = f"/zookeeper/quota/{ns}/sub"
            zk.create(q, makepath=True)
            limits = b"count=1,bytes=5=;byteHardLimit=-1;countHardLimit=2"
            zk.create(f"{q}/zookeeper_limits", limits)
            zk.create(f"{q}/zookeeper_stats", b"count=0,bytes=0")
            zk.create(f"/{ns}/sub/ok", b"1234")  # over the soft limits only
            for name in ("no1", "no2"):
                try:
                    zk.create(f"/{ns}/sub/{name}")
                except QuotaExceededError:
                    failures.append(f"/{ns}/sub/{name}")
    finally:
        zk.stop()
        zk.close()
    mntr = [line for line in _fourlw(srv, "mntr").splitlines() if "quota" in line]
    return mntr, failures


def test_quota_mntr_lines_and_warnings_match_zookeeper(needs_zookeeper: None) -> None:
    with servers.running("zookeeper", CFG) as zk_srv:
        zk_mntr, zk_failures = _session(zk_srv)
        zk_log = zk_srv.log_tail(5000)
    with servers.running("trizk", CFG) as tz_srv:
        tz_mntr, tz_failures = _session(tz_srv)
        tz_log = tz_srv.log_tail(5000)
    assert len(zk_failures) == 8
    assert tz_failures == zk_failures
    assert len(zk_mntr) == 4 * 4 + 4, zk_mntr  # 4 gauge sets + the error counter, per namespace
    assert tz_mntr == zk_mntr
    # the RateLogger's lines, in order: first sight, then the flushed repeat count
    zk_warnings = _warnings(zk_log)
    assert len(zk_warnings) == 4 * 3 - 1, zk_warnings  # the last repeat is still pending
    assert zk_warnings[:3] == [
        "Message:Quota exceeded: /t/sub [current bytes=6, softByteLimit=5] Value:null",
        "Message:Quota exceeded: /t/sub [current count=3, hardCountLimit=2] Value:null",
        "Message: Quota exceeded: /t/sub [current count=3, hardCountLimit=2]",
    ]
    assert _warnings(tz_log) == zk_warnings


def _warnings(log: str) -> list[str]:
    return [line[line.index("Message") :] for line in log.splitlines() if "Quota exceeded" in line]
