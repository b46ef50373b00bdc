"""Side-by-side benchmark of 3-member ensembles: Apache ZooKeeper 3.8 against trizk.

``python -m trizk.compat.bench.ensemble [--seconds S]`` starts a 3-member ensemble of each kind
(compat/procs/ensemble.py, processes from zoo.cfg, fsync on), seeds 1,000 znodes of 100 bytes, and
measures, with the raw-socket generator of compat/bench/load.py:

* closed loop, the headline: 8 and 32 sessions spread over the three members, each with one
  request in flight, 100 % reads (getData) and 0 % reads (setData: forwarded to the leader,
  proposed, acked by a quorum, committed);
* pipelined: the same with 16 requests in flight per session;
* leader fail-over: a client holding every member's address writes in a loop; the leader gets
  SIGKILL; the time until the next write succeeds.

Each figure is printed with the ensemble's CPU per request (the three members' CPU over the
interval) and the generator's own CPU share, and the trizk/ZooKeeper ratio. Long-running and
machine-dependent: a tool for the notes, never run in CI.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.retry import KazooRetry

from trizk.compat.bench.load import get_frame, open_sessions, run_load, set_frame
from trizk.compat.procs.ensemble import ProcessEnsemble

NODES = 1000
DATA = b"x" * 100


def _cpu(pids: list[int]) -> Callable[[], float]:
    tick = os.sysconf("SC_CLK_TCK")

    def total() -> float:
        s = 0.0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                s += (int(fields[11]) + int(fields[12])) / tick
            except OSError:
                pass
        return s

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args(argv)
    cells = [
        (8, True, 1),
        (32, True, 1),
        (8, False, 1),
        (32, False, 1),
        (32, True, 16),
        (32, False, 16),
    ]
    out: dict[str, dict[str, str]] = {}
    fo: dict[str, float] = {}
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for kind in ("zookeeper", "trizk"):
        with ProcessEnsemble({1: kind, 2: kind, 3: kind}) as ens:
            ens.wait_serving()
            _seed(ens)
            for sessions, reads, window in cells:
                name = f"{sessions} sessions, {'100' if reads else '0'}% reads, window {window}"
                out.setdefault(name, {})[kind] = _load(ens, sessions, reads, window, args.seconds)
                print(f"{kind:9} {name:40} {out[name][kind]}", flush=True)
            fo[kind] = _failover(ens)
            print(f"{kind:9} leader fail-over {fo[kind]:.2f} s", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("\n| cell | ZooKeeper | trizk | ratio |\n| --- | --- | --- | --- |")
    for name, by in out.items():
        z, t = float(by["zookeeper"].split("/s")[0]), float(by["trizk"].split("/s")[0])
        print(f"| {name} | {by['zookeeper']} | {by['trizk']} | {t / z:.2f} |")
    print(
        f"| leader fail-over | {fo['zookeeper']:.2f} s | {fo['trizk']:.2f} s | "
        f"{fo['trizk'] / fo['zookeeper']:.2f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
