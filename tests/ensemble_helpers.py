"""Helpers for tests of process ensembles (any trizk.testing.processes.MemberSet, such as
compat's ProcessEnsemble): kazoo clients and whole-tree comparisons through every member."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from trizk.testing.processes import MemberSet

DEADLINE = 60.0


def client(hosts: str) -> KazooClient:
    zk = KazooClient(
        hosts=hosts,
        timeout=10,
        connection_retry=KazooRetry(max_tries=-1, delay=0.02, max_delay=0.3),
        command_retry=KazooRetry(max_tries=0),
    )
    zk.start(timeout=DEADLINE)
    return zk


def tree(zk: KazooClient, path: str = "/", config: bool = True) -> dict[str, tuple[bytes, object]]:
    """Every node under ``path``: (data, Stat); for /zookeeper/config the data only (each
    member writes it itself, with its own clock, at start-up and after each sync), or nothing
    without ``config`` (members behind link proxies each show their own view there)."""
    out: dict[str, tuple[bytes, object]] = {}
    stack = [path]
    while stack:
        p = stack.pop()
        data, st = zk.get(p)
        if p == "/zookeeper/config":
            out[p] = (data if config else b"", None)
        else:
            out[p] = (data, st)
        for c in zk.get_children(p):
            stack.append(("" if p == "/" else p) + "/" + c)
    return out


def views(ens: MemberSet) -> dict[int, dict[str, tuple[bytes, object]]]:
    out = {}
    for sid in ens.members:
        if not ens.running(sid):
            continue
        zk = client(ens.hosts([sid]))
        try:
            zk.sync("/")
            out[sid] = tree(zk, config=ens.links is None)
        finally:
            zk.stop()
            zk.close()
    return out


def assert_identical(ens: MemberSet) -> dict[str, tuple[bytes, object]]:
    v = views(ens)
    first = next(iter(v.values()))
    for sid, t in v.items():
        assert t == first, f"member {sid} differs"
    return first
