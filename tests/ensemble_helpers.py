"""Helpers for tests of process ensembles (any trizk.testing.processes.MemberSet, such as
compat's ProcessEnsemble): kazoo clients and whole-tree comparisons through every member."""

from __future__ import annotations

import time

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from trizk.storage.formats.txnlog import scan, zxid_from_name
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


def mntr(ens: MemberSet, sid: int) -> dict[str, str]:
    """Member ``sid``'s ``mntr`` answer, key -> value."""
    out = {}
    for line in four_letter(ens.port(sid), "mntr", host=ens.host(sid)).splitlines():
        key, _, value = line.partition("\t")
        out[key] = value
    return out


def last_zxid(ens: MemberSet, sid: int) -> int:
    """The last zxid member ``sid`` applied (``srvr``'s Zxid line, both kinds)."""
    for line in four_letter(ens.port(sid), "srvr", host=ens.host(sid)).splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16)
    raise AssertionError(f"member {sid} gave no Zxid in srvr")


def durable_zxid(ens: MemberSet, sid: int) -> int | str:
    """The last zxid member ``sid`` holds on disk: the last whole txn of its txn logs (the
    newest file that holds one; a file just rolled holds only its header) or its newest
    snapshot's, whichever is higher (a learner synced by SNAP may log nothing after it);
    else, when the newest log file ends torn (still being written), why not."""
    version2 = ens.members[sid].data_dir / "version-2"
    logs = sorted((zxid_from_name(p.name, "log"), p) for p in version2.glob("log.*"))
    snaps = [zxid_from_name(p.name, "snapshot") for p in version2.glob("snapshot.*")]
    held = max(snaps, default=-1)
    for _, path in reversed(logs):
        _, stop = scan(path.read_bytes())
        if not stop.reason.clean:
            return f"{path.name}: {stop.reason} at {stop.good_end} ({stop.detail})"
        if stop.last_zxid is not None:
            return max(held, stop.last_zxid)
    return held


def wait_caught_up(ens: MemberSet, timeout: float = DEADLINE) -> int:
    """Wait until every running member has applied the same last zxid and holds it on disk,
    whole (:func:`durable_zxid`); that zxid. Call it before stopping members that have just
    been written to: a ZooKeeper follower applies a committed txn without waiting for its own
    log write, and one stopped while it writes a record of more than 8 KB (its
    BufferedOutputStream writes the header and the payload in two write()s) leaves a torn
    record, over which its next start fails ("CRC check failed") instead of truncating it."""
    deadline = time.monotonic() + timeout
    while True:
        running = [sid for sid in ens.members if ens.running(sid)]
        applied = {sid: last_zxid(ens, sid) for sid in running}
        held = {sid: durable_zxid(ens, sid) for sid in running}
        if len(set(applied.values())) == 1:
            zxid = next(iter(applied.values()))
            if all(isinstance(z, int) and z >= zxid for z in held.values()):
                return zxid
        assert time.monotonic() < deadline, f"members not caught up: {applied}, on disk {held}"
        time.sleep(0.05)  # polling interval of a bounded wait
