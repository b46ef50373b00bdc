"""Whole-ensemble SIGSTOP/SIGCONT (a VM freeze, a host suspend, a container checkpoint) with
member processes, as issue 29 tried it: a kazoo session holding an ephemeral, every member
stopped for longer than syncLimit, then continued together, and a new session tried at once.

ZooKeeper's leader counts the ticks its loop actually ran (a pause is one tick) and its
followers' read timeouts return at once with the PINGs queued in their sockets, so the
ensemble keeps its leader and its epoch and serves new sessions straight away; trizk's Zab
machines count passes of their tickers the same way (quorum/zab/leader.py, learner.py).
``TRIZK_PAUSE_S`` sets the pause (default 6 s with tickTime 500, syncLimit 5: 2.4 x syncLimit;
the issue's runs used 16 s).
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
from kazoo.client import KazooClient

from tests.compat.conftest import require_zookeeper
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.testing.probes import four_letter

pytestmark = pytest.mark.slow

PAUSE_S = float(os.environ.get("TRIZK_PAUSE_S", "6"))
TIMING = {"tickTime": "500", "initLimit": "10", "syncLimit": "5"}
#: what a new session may take after SIGCONT (the issue asks 0.2 s; this machine is shared)
SERVED_WITHIN_S = float(os.environ.get("TRIZK_PAUSE_SERVED_S", "1.0"))


def epoch(ens: ProcessEnsemble, sid: int) -> int:
    """The epoch of member ``sid``'s last zxid (srvr's ``Zxid:``)."""
    m = re.search(r"Zxid: (0x[0-9a-f]+)", four_letter(ens.port(sid), "srvr"))
    assert m is not None, f"member {sid} answers no srvr"
    return int(m.group(1), 16) >> 32


def new_session_after_resume(ens: ProcessEnsemble) -> float:
    """Seconds from SIGCONT until a new session is served by some member."""
    pids = [m.proc.pid for m in ens.members.values() if m.proc is not None]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(PAUSE_S)  # the fault itself: the whole ensemble stopped this long
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    start = time.monotonic()
    deadline = start + 30.0
    while True:
        zk = KazooClient(hosts=ens.hosts(), timeout=10)
        try:
            zk.start(timeout=2.0)
            return time.monotonic() - start
        except Exception:
            assert time.monotonic() < deadline, "no new session within 30 s\n" + ens.tails()
        finally:
            zk.stop()
            zk.close()


@pytest.mark.parametrize("kind", ["trizk", "zookeeper"])
def test_a_whole_ensemble_pause_keeps_leader_epoch_and_sessions(kind: str) -> None:
    if kind == "zookeeper":
        require_zookeeper()
    with ProcessEnsemble({1: kind, 2: kind, 3: kind}, extra=TIMING) as ens:
        ens.wait_serving()
        leader = ens.leader()
        zk = KazooClient(hosts=ens.hosts(), timeout=20)
        zk.start(timeout=20)
        try:
            zk.create("/held", b"x", ephemeral=True)
            before = {sid: epoch(ens, sid) for sid in ens.members}
            served = new_session_after_resume(ens)
            # followers that re-sync (ZooKeeper's sometimes do) serve again soon
            ens.wait_serving(30.0)
            after = {sid: epoch(ens, sid) for sid in ens.members}
            now_leader = ens.leader()
            print(
                f"{kind}: new session served {served:.3f} s after SIGCONT ({PAUSE_S} s pause); "
                f"leader {leader} -> {now_leader}, epochs {before} -> {after}"
            )
            assert zk.exists("/held") is not None
            if kind == "trizk":
                # ZooKeeper's members are measured beside (the report), trizk's held to it
                assert now_leader == leader, ens.tails()
                assert after == before, f"a new epoch: {before} -> {after}\n" + ens.tails()
                assert served < SERVED_WITHIN_S, f"served after {served:.3f} s"
        finally:
            zk.stop()
            zk.close()
