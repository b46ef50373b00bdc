"""Helpers for tests of process ensembles (any trizk.testing.processes.MemberSet, such as
compat's ProcessEnsemble): kazoo clients and whole-tree comparisons through every member."""

from __future__ import annotations

import time

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from trizk.testing.probes import four_letter
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


def last_zxid(ens: MemberSet, sid: int) -> int:
    """The last zxid member ``sid`` applied (``srvr``'s Zxid line, both kinds)."""
    for line in four_letter(ens.port(sid), "srvr", host=ens.host(sid)).splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16)
    raise AssertionError(f"member {sid} gave no Zxid in srvr")


def wait_caught_up(ens: MemberSet, timeout: float = DEADLINE) -> int:
    """Wait until every running member has applied the same last zxid; that zxid. Call it
    before stopping members that have just been written to: a ZooKeeper member still logging
    a txn when SIGTERM arrives can leave a torn record (its BufferedOutputStream writes a
    record of more than 8 KB in several write()s), and on its next start it refuses its own
    log ("CRC check failed") instead of truncating it."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {sid: last_zxid(ens, sid) for sid in ens.members if ens.running(sid)}
        if len(set(seen.values())) == 1:
            return next(iter(seen.values()))
        assert time.monotonic() < deadline, f"members not caught up: {seen}"
        time.sleep(0.05)  # polling interval of a bounded wait
