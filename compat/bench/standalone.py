"""trizk vs Apache ZooKeeper benchmark: ``python -m trizk.compat.bench [--quick] [--json F]``.

Theory
------
Both servers run on the same machine in the same process tree, with the same zoo.cfg (see
:mod:`trizk.compat.procs.launcher`), and every measurement is run against both *interleaved*:
measurement *i* runs ZooKeeper first when *i* is even and the candidate first when it is odd
(an ABBA order), so slow drift of the machine (other users, thermal, page cache) spreads over
both. Each figure is printed with the ratio candidate/ZooKeeper and a note of which direction
is better. Running ZooKeeper in both slots (``--candidate-cmd zookeeper``) shows the noise floor
of the harness: ratios there should be ~1.

Repeats: with ``repeat`` > 1 (full mode: 3) each throughput, watch and session figure is the
median of that many rounds, every round itself in ABBA order (throughput cells also print the
min/max of the rounds); latency rounds pool their samples before taking percentiles.

Fair warm-up (the JVM compiles hot paths after a few thousand calls; CPython does not, but
gets the same treatment): before any timed figure, *each* server gets the same warm-up:
``warmup_s`` seconds of the 8-client 90 %-read pipelined load over the 1,000 znodes, then
``lat_samples`` untimed get/set calls. Each throughput cell also discards its first ``ramp_s``
seconds. Start-up and idle RSS are measured before any warm-up (they are cold figures by
definition).

Figures (one JSON line each with ``--json``):

* start-up: wall time from ``Popen`` to the first answered request (handshake + ``exists /``),
  median of ``startup_trials`` fresh starts;
* RSS idle (right after start-up plus a 1 s settle) and with 100,000 znodes of 100 bytes
  (``VmRSS`` from /proc/PID/statm; for the JVM this includes a heap that is not collected
  eagerly, with ``-Xmx1g``);
* **the headline: closed-loop throughput**, as applications load a server (kazoo and Curator
  mostly wait for each answer before the next request): 1, 8 and 32 sessions, each with *one*
  request in flight, at 100 %, 90 %, 0 % reads, each with the server's CPU per request (µs,
  from /proc/PID/stat over the same interval) and the generator's own CPU share;
* a watch fan-out as applications make it: 1,000 sessions each holding a data watch on one
  znode, one setData from another session; time from sending it to the 1,000th notification;
* sessions: open 1,000 one by one (each handshake waits for its answer), open 1,000 with 32
  handshakes in flight, then close those 1,000 (all closeSessions sent at once);
* single-client latency p50/p99 for get/set/create/delete (one request in flight);
* throughput with 1, 8, 32 pipelined clients (``window`` requests in flight per client) at
  100 %, 90 %, 0 % reads (getData / setData of 100 bytes over 1,000 znodes), each with the
  generator's own CPU share (fraction of one core) and the server's CPU seconds per 10,000
  requests (from /proc/PID/stat of the server process, same interval);
* time to deliver 1,000 watch notifications (1,000 data watches set by one session, then one
  other session pipelines 1,000 setData; clock from the first setData sent to the 1,000th
  notification received);
* time to open 1,000 sessions (32 handshakes in flight at most: ZooKeeper listens with Java's
  default backlog of 50, and an overflowing backlog costs a 1 s SYN retransmit).

Not a test: nothing here asserts a speed. Run by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trizk.compat.bench.load import (
    BlockingSession,
    LoadResult,
    close_sessions,
    create_frame,
    delete_frame,
    exists_frame,
    get_frame,
    open_many_sessions,
    open_sessions,
    run_load,
    set_frame,
    timed_calls,
)
from trizk.compat.procs.launcher import ZK_XMX, Server, start_server

NODES = 1000
DATA = b"x" * 100
ROOT = "/bench"


def node(i: int) -> str:
    return f"{ROOT}/n{i:04d}"


@dataclass
class Settings:
    quick: bool
    duration_s: float
    ramp_s: float
    warmup_s: float
    lat_samples: int
    sessions: int
    rss_znodes: int
    watches: int
    startup_trials: int
    window: int
    repeat: int
    clients: tuple[int, ...] = (1, 8, 32)
    reads: tuple[float, ...] = (1.0, 0.9, 0.0)

    @classmethod
    def make(cls, quick: bool, window: int, repeat: int | None = None) -> Settings:
        if quick:
            return cls(True, 1.0, 0.3, 2.0, 300, 200, 10_000, 1000, 1, window, repeat or 1)
        return cls(False, 3.0, 0.5, 10.0, 2000, 1000, 100_000, 1000, 3, window, repeat or 3)


def mix_frames(reads: float, offset: int) -> list[bytes]:
    """A 1,000-request cycle over the 1,000 znodes: ``reads`` of them getData, rest setData.

    Writes are spread evenly (request i is a write when ``i % 10 < round(10 * (1 - reads))``);
    ``offset`` rotates the node order so clients do not march in step over the same nodes.
    """
    writes_per_10 = round(10 * (1 - reads))
    out = []
    for i in range(NODES):
        path = node((i + offset) % NODES)
        xid = i + 1
        out.append(set_frame(xid, path, DATA) if i % 10 < writes_per_10 else get_frame(xid, path))
    return out


def loadavg() -> float:
    """1-minute load average: a run on a busy machine (load > cores) has a high noise floor."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def pct(samples: Sequence[int], q: float) -> float:
    s = sorted(samples)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[k] / 1e6  # ns -> ms


class Bench:
    def __init__(self, st: Settings, slots: Sequence[tuple[str, str]], json_out: Any) -> None:
        self.st = st
        self.slots = list(slots)  # (label, kind); slot 0 is the reference (ZooKeeper)
        self.json_out = json_out
        self.servers: dict[str, Server] = {}
        self.n_measure = 0

    # ------------------------------------------------------------------ output
    def emit(
        self,
        metric: str,
        unit: str,
        better: str,
        values: dict[str, float],
        extra: dict[str, dict[str, Any]] | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        labels = [lab for lab, _ in self.slots]
        ratio = None
        if len(labels) == 2 and values.get(labels[0]):
            ratio = values[labels[1]] / values[labels[0]]
        parts = []
        for lab in labels:
            v = values.get(lab)
            s = f"{lab}={v:.4g}" if isinstance(v, float | int) else f"{lab}=-"
            for k, x in (extra or {}).get(lab, {}).items():
                s += f" {k}={x:.3g}" if isinstance(x, float) else f" {k}={x}"
            parts.append(s)
        r = f"  ratio={ratio:.3f}" if ratio is not None else ""
        print(f"{metric:<34} [{unit}, {better} better]  " + "  |  ".join(parts) + r, flush=True)
        if self.json_out is not None:
            rec = {
                "metric": metric,
                "unit": unit,
                "better": better,
                "params": params or {},
                "values": values,
                "extra": extra or {},
                "ratio": ratio,
                "labels": labels,
                "kinds": dict(self.slots),
                "quick": self.st.quick,
                "time": time.time(),
                "loadavg": loadavg(),
            }
            self.json_out.write(json.dumps(rec) + "\n")
            self.json_out.flush()

    def order(self) -> list[tuple[str, Server]]:
        """ABBA interleaving: alternate which server goes first for each measurement."""
        items = [(lab, self.servers[lab]) for lab, _ in self.slots]
        self.n_measure += 1
        return items if self.n_measure % 2 else items[::-1]

    # ------------------------------------------------------------------ phases
    def startup(self) -> None:
        times: dict[str, list[float]] = {lab: [] for lab, _ in self.slots}
        for trial in range(self.st.startup_trials):
            slots = self.slots if trial % 2 == 0 else self.slots[::-1]
            for lab, kind in slots:
                srv = start_server(kind, lab)
                times[lab].append(srv.startup_s)
                srv.stop()
        self.emit(
            "startup_to_first_answer",
            "s",
            "lower",
            {lab: statistics.median(v) for lab, v in times.items()},
            params={"trials": self.st.startup_trials},
        )

    def start_main(self) -> None:
        for lab, kind in self.slots:
            self.servers[lab] = start_server(kind, lab)
        time.sleep(1.0)  # settle: idle RSS after start-up; a benchmark, not a test
        self.emit(
            "rss_idle",
            "MB",
            "lower",
            {lab: s.rss_bytes() / 1e6 for lab, s in self.servers.items()},
        )

    def setup_data(self, srv: Server) -> None:
        frames = [create_frame(1, ROOT, b"")]
        frames += [create_frame(i + 2, node(i), DATA) for i in range(NODES)]
        frames += [create_frame(NODES + 2, f"{ROOT}/lat", b"")]
        frames += [create_frame(NODES + 3, f"{ROOT}/rss", b"")]
        socks = open_sessions(srv.host, srv.port, 1)
        res = run_load(socks, [frames], window=100, cycle=False)
        close_sessions(socks)
        if res.errors:
            raise RuntimeError(f"{srv.label}: {res.errors} errors creating the data set")

    def durability(self) -> None:
        """After the data set was written, every server must have a txn log on disk."""
        vals = {lab: float(s.txn_log_bytes()) for lab, s in self.servers.items()}
        self.emit("txn_log_bytes_after_setup", "bytes", "info", vals)
        for lab, v in vals.items():
            if v == 0:
                print(
                    f"# WARNING: {lab} wrote no txn log: its write figures (set/create/delete, "
                    "0 %/90 % reads) are not comparable with a server that fsyncs",
                    flush=True,
                )

    def throughput_cell(
        self,
        srv: Server,
        clients: int,
        reads: float,
        ramp: float,
        dur: float,
        window: int | None = None,
    ) -> LoadResult:
        socks = open_sessions(srv.host, srv.port, clients)
        try:
            frames = [mix_frames(reads, 31 * k) for k in range(clients)]
            res = run_load(
                socks,
                frames,
                window=self.st.window if window is None else window,
                cycle=True,
                ramp_s=ramp,
                duration_s=dur,
                server_cpu=srv.cpu_seconds,
            )
        finally:
            close_sessions(socks)
        if res.errors:
            raise RuntimeError(f"{srv.label}: {res.errors} errors during load")
        return res

    def warmup(self) -> None:
        for _lab, srv in self.order():
            self.throughput_cell(srv, 8, 0.9, 0.0, self.st.warmup_s)
            sess = BlockingSession(srv.host, srv.port)
            n = self.st.lat_samples
            timed_calls(sess, [get_frame(i + 1, node(i % NODES)) for i in range(n)])
            timed_calls(sess, [set_frame(i + 1, node(i % NODES), DATA) for i in range(n)])
            sess.close()

    def latency(self) -> None:
        n = self.st.lat_samples
        lat = f"{ROOT}/lat"
        ops: list[tuple[str, Callable[[int], bytes]]] = [
            ("get", lambda i: get_frame(i + 1, node(i % NODES))),
            ("set", lambda i: set_frame(i + 1, node(i % NODES), DATA)),
            ("create", lambda i: create_frame(i + 1, f"{lat}/c{i:06d}", DATA)),
            ("delete", lambda i: delete_frame(i + 1, f"{lat}/c{i:06d}")),
        ]
        samples: dict[str, dict[str, list[int]]] = {name: {} for name, _ in ops}
        # create and delete must alternate (delete removes what create made): one round is
        # get, set, create, delete for both servers; rounds pool their samples.
        for _round in range(self.st.repeat):
            for name, make in ops:
                frames = [make(i) for i in range(n)]
                for lab, srv in self.order():
                    sess = BlockingSession(srv.host, srv.port)
                    got, errors = timed_calls(sess, frames)
                    sess.close()
                    if errors:
                        raise RuntimeError(f"{lab}: {errors} errors in latency {name}")
                    samples[name].setdefault(lab, []).extend(got)
        params = {"samples": n * self.st.repeat}
        for name, _ in ops:
            per = samples[name]
            for q, tag in ((0.5, "p50"), (0.99, "p99")):
                vals = {k: pct(v, q) for k, v in per.items()}
                self.emit(f"latency_{name}_{tag}", "ms", "lower", vals, params=params)

    def throughput(self, window: int | None = None, prefix: str = "throughput") -> None:
        """Every clients x reads cell, ``window`` requests in flight per client (default: the
        pipelined window; 1: closed loop, the headline)."""
        for clients in self.st.clients:
            for reads in self.st.reads:
                runs: dict[str, list[LoadResult]] = {}
                for _round in range(self.st.repeat):
                    for lab, srv in self.order():
                        r = self.throughput_cell(
                            srv, clients, reads, self.st.ramp_s, self.st.duration_s, window
                        )
                        runs.setdefault(lab, []).append(r)
                vals: dict[str, float] = {}
                extra: dict[str, dict[str, Any]] = {}
                cpu_us: dict[str, float] = {}
                for lab, rs in runs.items():
                    # The median round (by throughput) supplies every figure of the cell.
                    rs = sorted(rs, key=lambda r: r.ops_per_s)
                    med = rs[len(rs) // 2]
                    vals[lab] = med.ops_per_s
                    cpu_us[lab] = med.server_cpu_s / med.replies * 1e6 if med.replies else 0.0
                    extra[lab] = {
                        "cpu_us_per_req": cpu_us[lab],
                        "srv_cpu": med.server_cpu_s / med.wall_s,
                        "gen_cpu": med.gen_cpu_share,
                        "min": rs[0].ops_per_s,
                        "max": rs[-1].ops_per_s,
                    }
                params = {
                    "clients": clients,
                    "reads": reads,
                    "window": self.st.window if window is None else window,
                    "duration_s": self.st.duration_s,
                    "repeat": self.st.repeat,
                }
                tag = f"c{clients}_r{round(reads * 100)}"
                self.emit(f"{prefix}_{tag}", "ops/s", "higher", vals, extra, params)
                self.emit(f"{prefix}_cpu_us_per_req_{tag}", "us", "lower", cpu_us, params=params)

    def closed_loop(self) -> None:
        """The headline: one request in flight per session."""
        self.throughput(window=1, prefix="closed")

    def watch_fanout(self) -> None:
        """1,000 sessions each watching one znode; one setData; time to the last notification."""
        n = self.st.sessions
        target = node(0)
        got: dict[str, list[float]] = {}
        for _round in range(self.st.repeat):
            for lab, srv in self.order():
                _, watchers = open_many_sessions(srv.host, srv.port, n)
                setter = open_sessions(srv.host, srv.port, 1)
                try:
                    arm = [[exists_frame(1, target, watch=True)] for _ in watchers]
                    r = run_load(watchers, arm, window=1, cycle=False)
                    if r.errors:
                        raise RuntimeError(f"{lab}: {r.errors} errors arming {n} watches")
                    frames: list[list[bytes]] = [[] for _ in watchers]
                    frames.append([set_frame(1, target, DATA)])
                    r = run_load(
                        [*watchers, *setter], frames, window=1, cycle=False, expect_events=n
                    )
                    if r.events_done_s is None or r.errors:
                        raise RuntimeError(f"{lab}: fan-out: {r.events} events, {r.errors} errors")
                    got.setdefault(lab, []).append(r.events_done_s)
                finally:
                    close_sessions([*watchers, *setter])
        vals = {k: statistics.median(v) for k, v in got.items()}
        params = {"sessions": n, "repeat": self.st.repeat}
        self.emit(f"watch_fanout_{n}_sessions", "s", "lower", vals, params=params)

    def watches(self) -> None:
        n = self.st.watches
        got: dict[str, list[float]] = {}
        for _round in range(self.st.repeat):
            for lab, srv in self.order():
                watcher, setter = open_sessions(srv.host, srv.port, 2)
                arm = [exists_frame(i + 1, node(i % NODES), watch=True) for i in range(n)]
                run_load([watcher], [arm], window=100, cycle=False)
                sets = [set_frame(i + 1, node(i % NODES), DATA) for i in range(n)]
                r = run_load([watcher, setter], [[], sets], window=n, cycle=False, expect_events=n)
                close_sessions([watcher, setter])
                if r.events_done_s is None or r.errors:
                    raise RuntimeError(f"{lab}: watch run: {r.events} events, {r.errors} errors")
                got.setdefault(lab, []).append(r.events_done_s)
        vals = {k: statistics.median(v) for k, v in got.items()}
        params = {"watches": n, "repeat": self.st.repeat}
        self.emit(f"watch_{n}_notifications", "s", "lower", vals, params=params)

    def sessions(self) -> None:
        """Open ``sessions`` one by one, then with 32 handshakes in flight, then close those."""
        n = self.st.sessions
        got: dict[str, dict[str, list[float]]] = {}
        for _round in range(self.st.repeat):
            for lab, srv in self.order():
                per = got.setdefault(lab, {})
                elapsed, socks = open_many_sessions(srv.host, srv.port, n, concurrency=1)
                per.setdefault("serial", []).append(elapsed)
                close_sessions(socks)
                elapsed, socks = open_many_sessions(srv.host, srv.port, n, concurrency=32)
                per.setdefault("open32", []).append(elapsed)
                t0 = time.monotonic()
                close_sessions(socks)
                per.setdefault("close", []).append(time.monotonic() - t0)
        params = {"sessions": n, "repeat": self.st.repeat}
        for key, metric in (
            ("serial", f"open_{n}_sessions_one_by_one"),
            ("open32", f"open_{n}_sessions"),
            ("close", f"close_{n}_sessions"),
        ):
            vals = {lab: statistics.median(v[key]) for lab, v in got.items()}
            self.emit(metric, "s", "lower", vals, params=params)

    def rss_full(self) -> None:
        n = self.st.rss_znodes
        vals: dict[str, float] = {}
        per_client = 8
        for lab, srv in self.order():
            socks = open_sessions(srv.host, srv.port, per_client)
            frames = [
                [create_frame(i + 1, f"{ROOT}/rss/z{i:07d}", DATA) for i in range(k, n, per_client)]
                for k in range(per_client)
            ]
            r = run_load(socks, frames, window=64, cycle=False, deadline_s=600.0)
            close_sessions(socks)
            if r.errors:
                raise RuntimeError(f"{lab}: {r.errors} errors creating {n} znodes")
            time.sleep(1.0)  # let in-flight work settle before reading RSS
            vals[lab] = srv.rss_bytes() / 1e6
        self.emit(f"rss_with_{n}_znodes", "MB", "lower", vals, params={"znodes": n})

    def run(self) -> None:
        kinds = ", ".join(f"{lab}={kind}" for lab, kind in self.slots)
        print(
            f"# trizk bench ({'quick' if self.st.quick else 'full'}): {kinds}; "
            f"ZooKeeper -Xmx{ZK_XMX}; window={self.st.window}; repeat={self.st.repeat}; "
            f"ABBA interleaving; cores={os.cpu_count()} loadavg={loadavg():.2f}",
            flush=True,
        )
        self.startup()
        try:
            self.start_main()
            for srv in self.servers.values():
                self.setup_data(srv)
            self.durability()
            self.warmup()
            self.closed_loop()
            self.watch_fanout()
            self.sessions()
            self.latency()
            self.throughput()
            self.watches()
            self.rss_full()
        finally:
            for srv in self.servers.values():
                srv.stop()
            print(f"# done; loadavg={loadavg():.2f}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m trizk.compat.bench.standalone", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="~1 minute smoke run (scaled down)")
    ap.add_argument("--json", metavar="OUT.jsonl", help="append one JSON line per figure")
    ap.add_argument("--only", choices=["trizk", "zookeeper"], help="run one server only")
    ap.add_argument(
        "--candidate-cmd",
        default="trizk",
        help="candidate server: 'trizk' (python -m trizk.server CFG), 'zookeeper' (noise-floor "
        "run), or a command template where {cfg} is the zoo.cfg path",
    )
    ap.add_argument("--window", type=int, default=16, help="pipelined requests per client")
    ap.add_argument(
        "--repeat", type=int, default=None, help="rounds per figure (median); full 3, quick 1"
    )
    args = ap.parse_args(argv)
    cand_label = "trizk" if args.candidate_cmd == "trizk" else "candidate"
    slots = [("zookeeper", "zookeeper"), (cand_label, args.candidate_cmd)]
    if args.only == "zookeeper":
        slots = slots[:1]
    elif args.only == "trizk":
        slots = slots[1:]
    out = open(args.json, "a") if args.json else None
    try:
        Bench(Settings.make(args.quick, args.window, args.repeat), slots, out).run()
    finally:
        if out is not None:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
