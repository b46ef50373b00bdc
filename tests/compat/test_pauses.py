"""Whole-ensemble SIGSTOP/SIGCONT (a VM freeze, a host suspend, a container checkpoint) with
member processes, as issue 29 tried it: a kazoo session holding an ephemeral, every member
stopped for longer than syncLimit, then continued together, and a new session tried at once.

ZooKeeper's leader counts the ticks its loop actually ran (a pause is one tick) and its
followers' read timeouts return at once with the PINGs queued in their sockets, so the
ensemble keeps its leader and its epoch and serves new sessions straight away; trizk's Zab
machines count passes of their tickers the same way (quorum/zab/leader.py, learner.py).
``TRIZK_PAUSE_S`` sets the pause (default 6 s with tickTime 500, syncLimit 5: 2.4 x syncLimit;
the issue's runs used 16 s).

The single-member pauses (a follower below and past syncLimit, the leader until a new one was
elected) run on a ZooKeeper, a trizk and a mixed ensemble in the same test
(``TRIZK_PAUSE_ENSEMBLES``, default ``zookeeper,trizk,mixed``), print each one's figures side by
side and hold every ensemble to what ZooKeeper's does: the leader and the epoch kept and the
follower serving the writes made meanwhile, or a new epoch whose leader commits nothing of the
old one.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient, KazooState

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
    deadline = time.monotonic() + 30.0
    while (m := re.search(r"Zxid: (0x[0-9a-f]+)", four_letter(ens.port(sid), "srvr"))) is None:
        # a member between roles, or a loaded machine: srvr answers again soon (bounded)
        assert time.monotonic() < deadline, f"member {sid} answers no srvr\n" + ens.tails()
        time.sleep(0.1)  # polling interval of a bounded wait
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


#: the ensembles the single-member pause tests run, side by side (``TRIZK_PAUSE_ENSEMBLES``)
PAUSE_ENSEMBLES: dict[str, dict[int, str]] = {
    "zookeeper": {1: "zookeeper", 2: "zookeeper", 3: "zookeeper"},
    "trizk": {1: "trizk", 2: "trizk", 3: "trizk"},
    "mixed": {1: "zookeeper", 2: "trizk", 3: "trizk"},
}
CHOSEN = os.environ.get("TRIZK_PAUSE_ENSEMBLES", "zookeeper,trizk,mixed").split(",")
#: syncLimit in seconds (TIMING: 5 ticks of 500 ms)
SYNC_LIMIT_S = 2.5


def compared(seen: dict[str, dict[str, object]]) -> str:
    """One line per figure, each ensemble's value side by side (printed: the report)."""
    keys = list(next(iter(seen.values())))
    return "\n".join(f"{k}: " + ", ".join(f"{n} {v[k]}" for n, v in seen.items()) for k in keys)


def session_kept(zk: KazooClient, session: tuple[int, bytes]) -> bool:
    """The session is the same one and its ephemeral is still there (kazoo reconnects within
    the session timeout; bounded by it)."""
    deadline = time.monotonic() + 20.0
    while zk.state != KazooState.CONNECTED and time.monotonic() < deadline:
        time.sleep(0.1)  # polling interval of a bounded wait
    return zk.client_id == session and zk.exists("/held") is not None


def pause_follower(kinds: dict[int, str], pause_s: float) -> dict[str, object]:
    """A follower SIGSTOPped ``pause_s`` while the leader takes a write; what happened."""
    with ProcessEnsemble(kinds, extra=TIMING) as ens:
        ens.wait_serving(120.0)
        leader = ens.leader()
        assert leader is not None
        follower = min(s for s in ens.members if s != leader)
        before = {s: epoch(ens, s) for s in ens.members}
        proc = ens.members[follower].proc
        assert proc is not None
        zk = KazooClient(hosts=f"127.0.0.1:{ens.port(leader)}", timeout=20)
        zk.start(timeout=30)
        on_follower = KazooClient(hosts=f"127.0.0.1:{ens.port(follower)}", timeout=20)
        on_follower.start(timeout=30)
        try:
            on_follower.create("/held", b"x", ephemeral=True)
            session = on_follower.client_id
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                zk.create("/during", b"1")
                time.sleep(pause_s)  # the fault itself
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            resumed = time.monotonic()
            ens.wait_serving(60.0)
            served = time.monotonic() - resumed
            other = KazooClient(hosts=f"127.0.0.1:{ens.port(follower)}", timeout=20)
            other.start(timeout=30)
            try:
                other.sync("/")
                has_write = other.exists("/during") is not None
            finally:
                other.stop()
                other.close()
            return {
                "leader kept": ens.leader() == leader,
                "epochs kept": {s: epoch(ens, s) for s in ens.members} == before,
                "follower serves the write": has_write,
                "session on the follower kept": session_kept(on_follower, session),
                "all serving after s": round(served, 2),
            }
        finally:
            on_follower.stop()
            on_follower.close()
            zk.stop()
            zk.close()


@pytest.mark.parametrize("factor", [0.5, 2.4], ids=["below-syncLimit", "past-syncLimit"])
def test_a_paused_follower_rejoins_as_zookeepers_does(factor: float) -> None:
    """One follower SIGSTOPped for ``factor`` x syncLimit on a ZooKeeper, a trizk and a mixed
    ensemble: the leader keeps its quorum with the other follower (same epoch); the paused
    one, continued, reads what queued up (or finds its link closed by the leader's read
    timeout and syncs again) and serves every write made meanwhile; a session it held stays."""
    if any(k == "zookeeper" for n in CHOSEN for k in PAUSE_ENSEMBLES[n].values()):
        require_zookeeper()
    seen = {n: pause_follower(PAUSE_ENSEMBLES[n], factor * SYNC_LIMIT_S) for n in CHOSEN}
    print(f"\nfollower paused {factor} x syncLimit\n" + compared(seen))
    for name, got in seen.items():
        assert got["leader kept"] and got["epochs kept"], (name, got)
        assert got["follower serves the write"] and got["session on the follower kept"], (
            name,
            got,
        )


def pause_leader(kinds: dict[int, str]) -> dict[str, object]:
    """The leader SIGSTOPped until the others elected a new one and committed a write, a write
    queued at the old leader meanwhile; what happened once it was continued."""
    with ProcessEnsemble(kinds, extra=TIMING) as ens:
        ens.wait_serving(120.0)
        old = ens.leader()
        assert old is not None
        others = [s for s in ens.members if s != old]
        before = epoch(ens, old)
        proc = ens.members[old].proc
        assert proc is not None
        stale = KazooClient(hosts=f"127.0.0.1:{ens.port(old)}", timeout=30)
        stale.start(timeout=30)
        held = KazooClient(hosts=ens.hosts(), timeout=20)
        held.start(timeout=30)
        try:
            held.create("/held", b"x", ephemeral=True)
            session = held.client_id
            os.kill(proc.pid, signal.SIGSTOP)
            paused = time.monotonic()
            try:
                wait_until(
                    "a new leader", lambda: any(ens.mode(s) == "leader" for s in others), ens, 60
                )
                elected = time.monotonic() - paused
                new = next(s for s in others if ens.mode(s) == "leader")
                new_epoch = epoch(ens, new)
                fresh = KazooClient(hosts=f"127.0.0.1:{ens.port(new)}", timeout=20)
                fresh.start(timeout=30)
                fresh.create("/new-epoch", b"1")
                fresh.stop()
                fresh.close()
                attempt = stale.create_async("/old-epoch", b"1")  # queued at the old leader
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            resumed = time.monotonic()
            wait_until("the old leader following", lambda: ens.mode(old) == "follower", ens, 60)
            rejoined = time.monotonic() - resumed
            try:
                attempt.get(timeout=30)
            except Exception:  # refused or lost with the old role: either is fine
                pass
            ens.wait_serving(60.0)
            seen = set()
            old_epoch_txn = False
            for s in ens.members:
                c = KazooClient(hosts=f"127.0.0.1:{ens.port(s)}", timeout=20)
                c.start(timeout=30)
                try:
                    c.sync("/")
                    assert c.exists("/new-epoch") is not None, s
                    stat = c.exists("/old-epoch")
                    seen.add(stat is not None)
                    if stat is not None and stat.czxid >> 32 <= before:
                        old_epoch_txn = True
                finally:
                    c.stop()
                    c.close()
            return {
                "new leader elected after s": round(elected, 2),
                "new epoch": new_epoch > before,
                "new leader kept": ens.leader() == new,
                "old leader following after s": round(rejoined, 2),
                "members agree on /old-epoch": len(seen) == 1,
                "/old-epoch written": seen == {True},
                "old-epoch txn committed": old_epoch_txn,
                "session kept": session_kept(held, session),
            }
        finally:
            held.stop()
            held.close()
            stale.stop()
            stale.close()


def test_a_paused_leader_resumed_after_a_new_election_commits_nothing() -> None:
    """The leader SIGSTOPped until the two followers elected a new leader (a new epoch) and
    committed a write, on a ZooKeeper, a trizk and a mixed ensemble; continued, the old
    leader's queued work and a write sent to it at once commit nothing of the old epoch: every
    member ends with the same data, the new leader's; the old leader rejoins as a follower."""
    if any(k == "zookeeper" for n in CHOSEN for k in PAUSE_ENSEMBLES[n].values()):
        require_zookeeper()
    seen = {n: pause_leader(PAUSE_ENSEMBLES[n]) for n in CHOSEN}
    print("\nleader paused past a new election\n" + compared(seen))
    for name, got in seen.items():
        assert got["new epoch"] and got["new leader kept"], (name, got)
        assert got["members agree on /old-epoch"], (name, got)
        assert not got["old-epoch txn committed"], (name, got)
