"""Side-by-side benchmark of 3-member ensembles: Apache ZooKeeper 3.8 against trizk.

``python -m trizk.compat.bench.ensemble [--seconds S]`` starts a 3-member ensemble of each kind
(compat/procs/ensemble.py, processes from zoo.cfg, fsync on), seeds 1,000 znodes of 100 bytes, and
measures, with the raw-socket generator of compat/bench/load.py:

* closed loop, the headline: 8 and 32 sessions spread over the three members, each with one
  request in flight, 100 % reads (getData) and 0 % reads (setData: forwarded to the leader,
  proposed, acked by a quorum, committed);
* pipelined: the same with 16 requests in flight per session;
* latency (``lat``): setData p50 and p90 through a follower, one request at a time (every hop
  of one write: forward, propose, log on two members, ack, commit, apply, reply);
* leader fail-over: a client holding every member's address writes in a loop; the leader gets
  SIGKILL; the time until the next write succeeds.

Both ensembles run all along and each cell is measured on one, then the other (``--rounds N``:
N times, the order alternating), so that a ratio compares figures taken under the same load of
a shared machine; ``--cells`` picks cells (``--cells w8,w32,lat`` for the write path). The
ZooKeeper release is compat/procs's default oracle (printed first).

Each figure is printed with the ensemble's CPU per request (the three members' CPU over the
interval, with their child processes: trizk's fsync helpers), the generator's own CPU share,
and the trizk/ZooKeeper ratio. Long-running and machine-dependent: a tool for the notes, never
run in CI.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from contextlib import ExitStack

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.retry import KazooRetry

from trizk.compat.bench.load import (
    BlockingSession,
    get_frame,
    open_sessions,
    run_load,
    set_frame,
    timed_calls,
)
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.launcher import CLK_TCK, _stat_fields, child_pids
from trizk.compat.procs.servers import DEFAULT_VERSION

NODES = 1000
DATA = b"x" * 100


def _cpu(pids: list[int]) -> Callable[[], float]:
    """The CPU seconds so far of the members ``pids`` and their child processes (a trizk
    member's fsync helper does part of every write's work, as ZooKeeper's SyncThread does
    inside its JVM), the helpers listed at each call (a member may respawn its helper)."""

    def total() -> float:
        ticks = 0
        for pid in pids:
            for p in (pid, *child_pids(pid)):
                fields = _stat_fields(p)
                if fields is not None:  # else exited since it was listed
                    ticks += int(fields[11]) + int(fields[12])
        return ticks / CLK_TCK

    return total


def _seed(ens: ProcessEnsemble) -> None:
    zk = KazooClient(hosts=ens.hosts(), timeout=20)
    zk.start(timeout=60)
    try:
        zk.create("/bench", b"")
        for i in range(NODES):
            zk.create(f"/bench/n{i}", DATA)
    finally:
        zk.stop()
        zk.close()


def _load(ens: ProcessEnsemble, sessions: int, reads: bool, window: int, seconds: float) -> str:
    sids = list(ens.members)
    socks = []
    for i in range(sessions):
        socks += open_sessions("127.0.0.1", ens.port(sids[i % len(sids)]), 1)
    frames = []
    for c in range(sessions):
        paths = [f"/bench/n{(c * 37 + k) % NODES}" for k in range(64)]
        if reads:
            frames.append([get_frame(k + 1, p) for k, p in enumerate(paths)])
        else:
            frames.append([set_frame(k + 1, p, DATA) for k, p in enumerate(paths)])
    pids = [m.proc.pid for m in ens.members.values() if m.proc is not None]
    res = run_load(
        socks,
        frames,
        window=window,
        cycle=True,
        ramp_s=1.0,
        duration_s=seconds,
        server_cpu=_cpu(pids),
    )
    for s in socks:
        s.close()
    per_req = res.server_cpu_s / max(res.replies, 1) * 1e6
    return (
        f"{res.ops_per_s:9.0f}/s  {per_req:6.0f} us CPU/req  gen {res.gen_cpu_share:.2f} core"
        f"  errors {res.errors}"
    )


def _failover(ens: ProcessEnsemble) -> float:
    leader = ens.leader()
    assert leader is not None
    others = [s for s in ens.members if s != leader]
    zk = KazooClient(
        hosts=ens.hosts(others),
        timeout=10,
        connection_retry=KazooRetry(max_tries=-1, delay=0.01, max_delay=0.1),
        command_retry=KazooRetry(max_tries=0),
    )
    zk.start(timeout=60)
    try:
        zk.create("/fo0", b"")
        t0 = time.monotonic()
        ens.kill(leader)
        i = 1
        while time.monotonic() - t0 < 60:
            try:
                zk.create(f"/fo{i}", b"")
                break
            except KazooException:
                time.sleep(0.005)  # retry pace of a bounded loop
            i += 1
        return time.monotonic() - t0
    finally:
        zk.stop()
        zk.close()


def _latency(ens: ProcessEnsemble, count: int) -> str:
    """setData p50 / p90 through a follower, one request at a time (the hops of one write)."""
    leader = ens.leader()
    follower = next(s for s in ens.members if s != leader)
    sess = BlockingSession("127.0.0.1", ens.port(follower))
    try:
        frames = [set_frame(k + 1, f"/bench/n{k % NODES}", DATA) for k in range(count)]
        timed_calls(sess, frames[: count // 10])  # warm-up
        ns, errors = timed_calls(sess, frames)
    finally:
        sess.close()
    ns.sort()
    p50, p90 = ns[len(ns) // 2] / 1000, ns[len(ns) * 9 // 10] / 1000
    return f"{p50:9.0f} us p50  {p90:6.0f} us p90  (member {follower})  errors {errors}"


#: the cells: name -> (sessions, reads, window); ``lat``: setData latency through a follower
CELLS: dict[str, tuple[int, bool, int]] = {
    "r8": (8, True, 1),
    "r32": (32, True, 1),
    "w8": (8, False, 1),
    "w32": (32, False, 1),
    "pr32": (32, True, 16),
    "pw32": (32, False, 16),
}


def _cell_name(cell: str) -> str:
    if cell == "lat":
        return "setData latency through a follower"
    sessions, reads, window = CELLS[cell]
    return f"{sessions} sessions, {'100' if reads else '0'}% reads, window {window}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="measured seconds per cell")
    ap.add_argument(
        "--cells",
        default="r8,r32,w8,w32,pr32,pw32,lat,failover",
        help="comma-separated cells: r8 r32 w8 w32 pr32 pw32 (reads/writes, sessions; p: 16 "
        "in flight), lat (setData p50 through a follower), failover",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="each cell this many times, ZooKeeper and trizk alternately (both ensembles run "
        "all along, so a ratio compares figures taken under the same machine load)",
    )
    ap.add_argument("--latency-count", type=int, default=2000, help="setData calls in 'lat'")
    args = ap.parse_args(argv)
    cells = [c for c in args.cells.split(",") if c]
    for c in cells:
        if c not in CELLS and c not in ("lat", "failover"):
            ap.error(f"unknown cell {c!r}")
    out: dict[str, dict[str, list[str]]] = {}
    fo: dict[str, float] = {}
    print(f"load average before: {os.getloadavg()[0]:.2f}  (oracle: ZooKeeper {DEFAULT_VERSION})")
    kinds = ("zookeeper", "trizk")
    with ExitStack() as stack:
        ensembles = {k: stack.enter_context(ProcessEnsemble({1: k, 2: k, 3: k})) for k in kinds}
        for ens in ensembles.values():
            ens.wait_serving()
            _seed(ens)
        for rnd in range(args.rounds):
            for cell in cells:
                if cell == "failover":
                    continue
                name = _cell_name(cell)
                for kind in kinds if rnd % 2 == 0 else kinds[::-1]:
                    ens = ensembles[kind]
                    if cell == "lat":
                        fig = _latency(ens, args.latency_count)
                    else:
                        sessions, reads, window = CELLS[cell]
                        fig = _load(ens, sessions, reads, window, args.seconds)
                    fig += f"  load {os.getloadavg()[0]:.2f}"
                    out.setdefault(name, {}).setdefault(kind, []).append(fig)
                    print(f"{kind:9} {name:40} {fig}", flush=True)
        if "failover" in cells:
            for kind in kinds:
                fo[kind] = _failover(ensembles[kind])
                print(f"{kind:9} leader fail-over {fo[kind]:.2f} s", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("\n| cell | ZooKeeper | trizk | ratio |\n| --- | --- | --- | --- |")
    for name, by in out.items():
        unit = " us p50" if name.startswith("setData") else "/s"
        for z_fig, t_fig in zip(by["zookeeper"], by["trizk"], strict=True):
            z, t = float(z_fig.split(unit)[0]), float(t_fig.split(unit)[0])
            print(f"| {name} | {z_fig} | {t_fig} | {t / z:.2f} |")
    if fo:
        print(
            f"| leader fail-over | {fo['zookeeper']:.2f} s | {fo['trizk']:.2f} s | "
            f"{fo['trizk'] / fo['zookeeper']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
