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
from collections.abc import Callable

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


def wait_until(what: str, ok: Callable[[], bool], ens: ProcessEnsemble, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"not {what} within {timeout} s\n" + ens.tails()
        time.sleep(0.1)  # polling interval of a bounded wait


def test_a_follower_paused_past_sync_limit_rejoins() -> None:
    """One follower SIGSTOPped for 2.4 x syncLimit: the leader keeps its quorum with the other
    follower (same epoch); the paused one, continued, reads what queued up (or finds its link
    closed by the leader's read timeout) and serves again with every write made meanwhile."""
    with ProcessEnsemble({1: "trizk", 2: "trizk", 3: "trizk"}, extra=TIMING) as ens:
        ens.wait_serving()
        leader = ens.leader()
        assert leader is not None
        follower = min(s for s in ens.members if s != leader)
        before = epoch(ens, leader)
        proc = ens.members[follower].proc
        assert proc is not None
        zk = KazooClient(hosts=f"127.0.0.1:{ens.port(leader)}", timeout=20)
        zk.start(timeout=20)
        try:
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                zk.create("/during", b"1")
                time.sleep(PAUSE_S)  # the fault itself
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            ens.wait_serving(30.0)
            assert ens.leader() == leader and epoch(ens, leader) == before, ens.tails()
            other = KazooClient(hosts=f"127.0.0.1:{ens.port(follower)}", timeout=20)
            other.start(timeout=20)
            try:
                other.sync("/")
                assert other.exists("/during") is not None
            finally:
                other.stop()
                other.close()
        finally:
            zk.stop()
            zk.close()


def test_a_paused_leader_resumed_after_a_new_election_commits_nothing() -> None:
    """The leader SIGSTOPped until the two followers elected a new leader (a new epoch) and
    committed a write; continued, the old leader's queued work and a write sent to it at once
    commit nothing of the old epoch: every member ends with the same data, the new leader's."""
    with ProcessEnsemble({1: "trizk", 2: "trizk", 3: "trizk"}, extra=TIMING) as ens:
        ens.wait_serving()
        old = ens.leader()
        assert old is not None
        others = [s for s in ens.members if s != old]
        before = epoch(ens, old)
        proc = ens.members[old].proc
        assert proc is not None
        stale = KazooClient(hosts=f"127.0.0.1:{ens.port(old)}", timeout=30)
        stale.start(timeout=20)
        try:
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                wait_until(
                    "a new leader", lambda: any(ens.mode(s) == "leader" for s in others), ens, 30
                )
                new = next(s for s in others if ens.mode(s) == "leader")
                assert epoch(ens, new) > before
                fresh = KazooClient(hosts=f"127.0.0.1:{ens.port(new)}", timeout=20)
                fresh.start(timeout=20)
                fresh.create("/new-epoch", b"1")
                fresh.stop()
                fresh.close()
                attempt = stale.create_async("/old-epoch", b"1")  # queued at the old leader
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            try:
                attempt.get(timeout=30)
            except Exception:  # refused or lost with the old role: either is fine
                pass
            ens.wait_serving(30.0)
            assert ens.leader() == new, ens.tails()
            seen = set()
            for s in ens.members:
                c = KazooClient(hosts=f"127.0.0.1:{ens.port(s)}", timeout=20)
                c.start(timeout=20)
                try:
                    c.sync("/")
                    assert c.exists("/new-epoch") is not None
                    seen.add(c.exists("/old-epoch") is not None)
                    stat = c.exists("/old-epoch")
                    if stat is not None:  # only as a txn of the new leader's epoch
                        assert stat.czxid >> 32 > before, hex(stat.czxid)
                finally:
                    c.stop()
                    c.close()
            assert len(seen) == 1, "the members disagree on /old-epoch"
        finally:
            stale.stop()
            stale.close()
