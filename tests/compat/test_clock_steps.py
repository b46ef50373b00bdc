"""Wall-clock steps of single members (an NTP step, a VM restored from a snapshot) with
libfaketime, on a ZooKeeper, a trizk and a mixed ensemble in the same test (issue 29).

Which clock each decision reads, in ZooKeeper 3.8's sources and in trizk:

=======================================  ==========================================  =========
decision                                 ZooKeeper                                   trizk
=======================================  ==========================================  =========
session and connection expiry            ``Time.currentElapsedTime`` (nanoTime)      monotonic
syncLimit, initLimit, election timeouts  nanoTime, socket timeouts                   monotonic
a txn's time (ctime, mtime)              the leader's ``Time.currentWallTime``       the same
a TTL node's expiry                      leader's wall clock - mtime > ttl           the same
when containers and TTLs are checked     ``java.util.Timer.scheduleAtFixedRate``:    monotonic
                                         the wall clock (``currentTimeMillis``)
=======================================  ==========================================  =========

So a step of the leader's wall clock moves the mtimes it stamps and the TTLs it judges, on both;
a step of a follower's changes nothing. Where they part: ZooKeeper's ContainerManager timer
waits for the wall clock, so after a step back of one hour it checks nothing for an hour (no
container nor TTL node is deleted meanwhile) and after a step forward it runs its missed checks
back to back; trizk's reaper keeps its interval on the monotonic clock (the issue: timeouts
never run on the wall clock). The test prints what each ensemble did and holds trizk's members
to ZooKeeper's on sessions, leader, epoch and the TTL decision itself.

``TRIZK_CLOCK_STEP_ENSEMBLES`` (default ``zookeeper,trizk,mixed``) names the ensembles run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState

from tests.compat.conftest import require_zookeeper
from trizk.compat.oracle.rawclient import RawClient
from trizk.compat.procs.clocksteps import WallClock, libfaketime
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.jute import records as R
from trizk.jute.codes import OpCode
from trizk.testing.probes import four_letter

pytestmark = pytest.mark.skipif(libfaketime() is None, reason="faketime is not installed")

HOUR_S = 3600
ACL = (R.ACL(31, R.Id("world", "anyone")),)
#: ZooKeeper's default tickTime: its members under libfaketime on a loaded machine (a JVM
#: preloaded runs slower) lose their quorum at 500 ms
TIMING = {"tickTime": "2000", "initLimit": "10", "syncLimit": "5", "extendedTypesEnabled": "true"}
#: ZooKeeper reads it as a system property only (ContainerManager); trizk the same way
PROPERTIES = {"znode.container.checkIntervalMs": "1000"}
ENSEMBLES: dict[str, dict[int, str]] = {
    "zookeeper": {1: "zookeeper", 2: "zookeeper", 3: "zookeeper"},
    "trizk": {1: "trizk", 2: "trizk", 3: "trizk"},
    "mixed": {1: "zookeeper", 2: "trizk", 3: "trizk"},
}
#: the members started under libfaketime: the leader (the highest sid, :func:`lead_from`) and
#: one follower. Not every member: a JVM preloaded with libfaketime 0.9.10 and
#: FAKETIME_DONT_FAKE_MONOTONIC spins (about 10 x the CPU to start, a quarter of a core while
#: idle), too much for three of them on a loaded machine
STEPPED = (1, 3)
CHOSEN = os.environ.get("TRIZK_CLOCK_STEP_ENSEMBLES", "zookeeper,trizk,mixed").split(",")
#: seconds to watch for the reaper after a step (checkIntervalMs 1 s, ttl 1 s)
WATCH_S = 6.0


def test_libfaketime_steps_the_wall_clock_of_a_python_process_and_not_its_monotonic(
    tmp_path: Path,
) -> None:
    """What an NTP step does to a trizk member's process: ``time.time`` jumps, Trio's clock
    (``perf_counter``) and ``time.monotonic`` run on."""
    clock = WallClock(tmp_path / "offset")
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "for _ in sys.stdin:\n"
            "    print(time.time(), time.monotonic(), time.perf_counter(), flush=True)\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **clock.env()},
    )
    assert child.stdin is not None and child.stdout is not None

    def ask() -> tuple[float, float, float, float, float]:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("\n")
        child.stdin.flush()
        wall, mono, perf = map(float, child.stdout.readline().split())
        return wall, mono, perf, time.time(), time.monotonic()

    try:
        w0, m0, p0, rw0, rm0 = ask()
        assert abs(w0 - rw0) < 1.0
        clock.step(HOUR_S)
        deadline = time.monotonic() + 10.0
        while True:  # bounded: libfaketime reads the file again within its cache duration
            w1, m1, p1, rw1, rm1 = ask()
            if w1 - rw1 > HOUR_S - 5:
                break
            assert time.monotonic() < deadline, "the step never reached the process"
            time.sleep(0.05)  # polling interval of a bounded wait
        elapsed = rm1 - rm0
        assert abs((m1 - m0) - elapsed) < 0.5, (m0, m1, elapsed)
        assert abs((p1 - p0) - elapsed) < 0.5, (p0, p1, elapsed)
        clock.step(-HOUR_S)
        deadline = time.monotonic() + 10.0
        while (w2 := ask())[0] - time.time() > -HOUR_S + 5:
            assert time.monotonic() < deadline, "the step back never reached the process"
            time.sleep(0.05)  # polling interval of a bounded wait
        assert w2[1] >= m1, "the monotonic clock went back"
    finally:
        child.stdin.close()
        child.wait(10)


def epoch(ens: ProcessEnsemble, sid: int) -> int:
    deadline = time.monotonic() + 30.0
    while (m := re.search(r"Zxid: (0x[0-9a-f]+)", four_letter(ens.port(sid), "srvr"))) is None:
        # a member between roles, or a loaded machine: srvr answers again soon (bounded)
        assert time.monotonic() < deadline, f"member {sid} answers no srvr\n" + ens.tails()
        time.sleep(0.1)  # polling interval of a bounded wait
    return int(m.group(1), 16) >> 32


def wait_for(what: str, ok: Callable[[], bool], ens: ProcessEnsemble, timeout: float) -> float:
    """Poll ``ok`` until true; seconds it took (bounded: fails with the members' logs)."""
    start = time.monotonic()
    while not ok():
        assert time.monotonic() - start < timeout, f"not {what} in {timeout} s\n" + ens.tails()
        time.sleep(0.1)  # polling interval of a bounded wait
    return time.monotonic() - start


def watch_gone(zk: KazooClient, paths: list[str], seconds: float) -> dict[str, float | None]:
    """For ``seconds``, when (s) each path disappeared, None if it stayed."""
    start = time.monotonic()
    gone: dict[str, float | None] = {p: None for p in paths}
    while time.monotonic() - start < seconds:
        for p in paths:
            if gone[p] is None and zk.exists(p) is None:
                gone[p] = round(time.monotonic() - start, 1)
        time.sleep(0.1)  # sampling interval of a bounded observation
    return gone


def wait_roles(ens: ProcessEnsemble, timeout: float) -> None:
    """Until every running member has a role, one of them the leader (``srvr``). Not a
    handshake per member as ``wait_serving``: a preloaded JVM on a loaded machine may take more
    than its 2 s to commit one; the test's own sessions wait longer."""

    def ok() -> bool:
        modes = [ens.mode(s) for s in ens.members if ens.running(s)]
        return all(modes) and modes.count("leader") == 1

    wait_for("serving", ok, ens, timeout)


def lead_from(ens: ProcessEnsemble, sid: int) -> int:
    """Serving, with ``sid`` (the highest sid) leading: a leader elected elsewhere (a quorum
    that finalized before ``sid`` was heard, on a loaded machine) is restarted as a follower,
    so that the others, with equal zxids, elect the highest sid (bounded: twice)."""
    for _ in range(3):
        wait_roles(ens, 400.0)
        leader = ens.leader()
        assert leader is not None
        if leader == sid:
            return leader
        ens.stop(leader)
        wait_for("a leader", lambda: ens.leader() is not None, ens, 400.0)
        ens.start(leader)
    raise AssertionError(f"member {sid} did not lead\n" + ens.tails())


def create(port: int, path: str, *, ttl: int = 0, container: bool = False) -> None:
    """A TTL node (``ttl`` ms) or a container, created through a raw session of its own
    (kazoo has neither)."""
    c = RawClient("127.0.0.1", port, io_timeout=30)
    try:
        assert c.connect(timeout_ms=10000) is not None
        if container:
            xid = c.send(OpCode.CREATECONTAINER, R.CreateRequest(path, b"", ACL, 4))
        else:
            xid = c.send(OpCode.CREATETTL, R.CreateTTLRequest(path, b"", ACL, 5, ttl))
        _, rep = c.read_until_reply(xid, time.monotonic() + 30)
        assert rep.err == 0, (path, rep.err)
    finally:
        c.close_session(time.monotonic() + 10)


def mtime_offset(zk: KazooClient) -> float:
    """The leader's wall clock minus ours (s), read from the mtime of a write."""
    stat = zk.set("/probe", b"x")
    return stat.mtime / 1000 - time.time()


def run_steps(name: str, kinds: dict[int, str], tmp: Path) -> dict[str, object]:
    """The leader's wall clock stepped +1 h (and a follower's -1 h), then the leader's to -1 h;
    what the ensemble did."""
    clocks = {sid: WallClock(tmp / f"{name}-{sid}.offset") for sid in STEPPED}
    out: dict[str, object] = {}
    with ProcessEnsemble(
        kinds,
        extra=TIMING,
        system_properties=PROPERTIES,
        env={sid: c.env() for sid, c in clocks.items()},
    ) as ens:
        leader = lead_from(ens, max(STEPPED))
        follower = min(STEPPED)
        out["leader kind"] = kinds[leader]
        zk = KazooClient(hosts=ens.hosts(), timeout=20)
        zk.start(timeout=60)
        try:
            session = zk.client_id
            zk.create("/held", b"x", ephemeral=True)
            zk.create("/probe", b"")
            # the epoch a write of this leader carries (a member's last zxid is in the epoch
            # before until it applies one)
            before = epoch(ens, leader)
            create(ens.port(leader), "/ttl-long", ttl=30 * 60 * 1000)  # 30 min: gone after +1 h
            create(ens.port(leader), "/box", container=True)
            zk.create("/box/c", b"")
            # ---- the leader +1 h, a follower -1 h
            clocks[leader].step(HOUR_S)
            clocks[follower].step(-HOUR_S)
            wait_for("stepped", lambda: mtime_offset(zk) > HOUR_S - 60, ens, 30.0)
            forward = watch_gone(zk, ["/ttl-long", "/box"], WATCH_S)
            out["+1h: /ttl-long (30 min) gone after s"] = forward["/ttl-long"]
            out["+1h: /box (has a child) gone"] = forward["/box"] is not None
            # ---- the leader back to -1 h (two hours back)
            clocks[leader].step(-HOUR_S)
            wait_for("stepped back", lambda: mtime_offset(zk) < -HOUR_S + 60, ens, 30.0)
            zk.delete("/box/c")  # an emptied container: deleted at the next check
            create(ens.port(leader), "/ttl-short", ttl=1000)  # stamped -1 h: 1 s to live
            back = watch_gone(zk, ["/box", "/ttl-short"], WATCH_S)
            out["-1h: emptied /box gone after s"] = back["/box"]
            out["-1h: /ttl-short (1 s) gone after s"] = back["/ttl-short"]
            # ---- what the clocks changed besides
            wait_roles(ens, 60.0)
            out["leader kept"] = ens.leader() == leader
            zk.sync("/")
            out["epochs kept"] = all(epoch(ens, s) == before for s in kinds)
            out["session kept"] = (
                zk.state == KazooState.CONNECTED
                and zk.client_id == session
                and zk.exists("/held") is not None
            )
            fresh = KazooClient(hosts=ens.hosts(), timeout=20)
            fresh.start(timeout=60)
            out["new session served"] = fresh.connected
            fresh.stop()
            fresh.close()
        finally:
            zk.stop()
            zk.close()
    return out


@pytest.mark.slow
def test_wall_clock_steps_decide_as_zookeepers_members_do(tmp_path: Path) -> None:
    if any(k == "zookeeper" for n in CHOSEN for k in ENSEMBLES[n].values()):
        require_zookeeper()
    seen = {name: run_steps(name, ENSEMBLES[name], tmp_path) for name in CHOSEN}
    keys = list(next(iter(seen.values())))
    rows = (f"{k}: " + ", ".join(f"{n} {v[k]}" for n, v in seen.items()) for k in keys)
    print("\n" + "\n".join(rows))
    for name, got in seen.items():
        # on both: nothing but the leader's txn times and TTL judgements sees the wall clock
        assert got["leader kept"] and got["epochs kept"], (name, got)
        assert got["session kept"] and got["new session served"], (name, got)
        # the TTL decision is the leader's wall clock against mtime, on both
        assert got["+1h: /ttl-long (30 min) gone after s"] is not None, (name, got)
        assert got["+1h: /box (has a child) gone"] is False, (name, got)
        if got["leader kind"] == "trizk":
            # trizk's reaper runs on the monotonic clock: after the step back it goes on
            # (ZooKeeper's timer waits an hour: printed above)
            assert got["-1h: emptied /box gone after s"] is not None, (name, got)
            assert got["-1h: /ttl-short (1 s) gone after s"] is not None, (name, got)
