"""Loads a hostile or careless client makes, side by side: Apache ZooKeeper 3.8 against trizk.

``python -m trizk.compat.bench.hostile`` runs the issue's full scale (defaults below);
``--connections/--sessions/--watches/--multi`` scale it down. It starts each server
(compat/procs/servers.py, fsync on, ``maxClientCnxns=0``, ZooKeeper with ``-Xmx`` of ``--zk-heap``),
then for every load below measures a *bystander* session -- one getData at a time on its own
connection, in a process of its own so the load generator's Python never delays it -- its p99
latency during the load against the same server idle, and the server's RSS after the load:

* a flood of 10,000 connections that never send a handshake (sessionless; the server closes
  them after ``nio.sessionlessCnxnTimeout``, 2 s here), opened as fast as the kernel accepts;
* 1,000,000 watches on one session (exists on paths that do not exist, 1,000 pipelined at a
  time), then the connection closed (the server drops every one);
* one multi of 10,000 creates;
* the biggest frame allowed (setData of ``jute.maxbuffer`` minus room for the header);
* a slow reader: a session that pipelines reads of a 100 KB node and never reads its socket;
* 100,000 sessions opened (last: their expiry after the run is not measured), in waves of as
  many connections as the file descriptors allow; a session outlives its connection (timeout
  600 s, ``maxSessionTimeout`` raised to match), so all of them are alive in the server at the
  end of the load.

Limits the generator needs: file descriptors (raised with ``resource.setrlimit``: the soft limit
to the hard one, and the hard one too where allowed (CAP_SYS_RESOURCE); the servers, its
children, inherit them) and ephemeral ports (~28,000 per local address: connections are spread
over 127.0.0.2, .3 ...).

Machine-dependent and long (minutes): a tool for the notes, never run in CI (the bounds
themselves are tested in tests/shell/test_load.py and tests/shell/test_fanout.py).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import socket
import struct
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventT

from kazoo.client import KazooClient

from trizk.compat.bench.load import (
    OPEN_ACL_UNSAFE,
    BlockingSession,
    get_frame,
    open_many_sessions,
    req,
)
from trizk.compat.procs.servers import Server, start
from trizk.jute.codes import OpCode
from trizk.jute.multi import encode_request
from trizk.jute.records import CreateRequest
from trizk.testing.probes import handshake_bytes

#: local addresses the generator connects from, in turn (ephemeral ports per address)
SOURCES = tuple(f"127.0.0.{i}" for i in range(2, 10))
#: the file descriptors the generator (and the servers, its children) may hold
FD_LIMIT = 250_000
#: the sessions' timeout (and the servers' maxSessionTimeout): longer than the whole load, so
#: every session opened is alive at its end
SESSION_MS = 600_000


def raise_fd_limit(want: int = FD_LIMIT) -> int:
    """Raise RLIMIT_NOFILE to ``want`` (root may raise the hard limit), else to the hard limit;
    returns the soft limit now in force."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _rss_mb(srv: Server) -> float:
    try:
        with open(f"/proc/{srv.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _probe(host: str, port: int, stop: EventT, out: Connection) -> None:
    """The bystander (a process of its own): getData /by, one at a time, until ``stop``."""
    by = BlockingSession(host, port, timeout=60, session_ms=120_000)
    fr = get_frame(1, "/by")
    lat: list[float] = []
    out.send("ready")
    while not stop.is_set():
        t0 = time.perf_counter()
        by.call(fr)
        lat.append((time.perf_counter() - t0) * 1000)
        stop.wait(0.002)  # probe pace: ~400 probes/s, not a load of its own
    by.close()
    out.send(lat)


def _p99_during(srv: Server, load: Callable[[], object]) -> tuple[float, int, float]:
    """Bystander getData p99 (ms) and probe count while ``load`` runs, and the load's wall
    time (s)."""
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    mine, theirs = ctx.Pipe()
    p = ctx.Process(target=_probe, args=(srv.host, srv.port, stop, theirs), daemon=True)
    p.start()
    if not mine.poll(60) or mine.recv() != "ready":
        raise RuntimeError("bystander did not connect")
    t0 = time.monotonic()
    try:
        load()
    finally:
        elapsed = time.monotonic() - t0
        stop.set()
        lat: list[float] = mine.recv() if mine.poll(120) else []
        p.join(30)
        if p.is_alive():
            p.kill()
    lat.sort()
    return (lat[int(len(lat) * 0.99)] if lat else float("nan")), len(lat), elapsed


def _connect(srv: Server, i: int) -> socket.socket:
    src = (SOURCES[i % len(SOURCES)], 0)
    return socket.create_connection((srv.host, srv.port), timeout=60, source_address=src)


def _loads(args: argparse.Namespace, fd_limit: int) -> dict[str, Callable[[Server], None]]:
    def idle(srv: Server) -> None:
        time.sleep(2.0)  # the idle baseline: the bystander alone for 2 s

    def flood(srv: Server) -> None:
        socks = [_connect(srv, i) for i in range(args.connections)]
        for s in socks:
            s.close()

    def sessions(srv: Server) -> None:
        # In waves that fit the file descriptors: a session outlives its connection (until
        # its timeout), so every one of them is alive in the server at the end.
        wave = max(1000, min(args.sessions, (fd_limit - 2000) // 2))
        for first in range(0, args.sessions, wave):
            _, socks = open_many_sessions(
                srv.host,
                srv.port,
                min(wave, args.sessions - first),
                concurrency=64,
                deadline_s=600,
                sources=SOURCES,
                session_ms=SESSION_MS,
            )
            for s in socks:
                s.close()

    def watches(srv: Server) -> None:
        sess = BlockingSession(srv.host, srv.port, timeout=120, session_ms=120_000)
        batch = 1000
        for base in range(0, args.watches, batch):
            frames = b"".join(
                req(i + 1, 3, struct.pack(">i", len(p)) + p + b"\x01")
                for i in range(min(batch, args.watches - base))
                for p in [f"/w/{base + i}".encode()]
            )
            sess.sock.sendall(frames)
            for _ in range(min(batch, args.watches - base)):
                sess.frame()
        sess.sock.close()  # closing: the server drops every watch of the connection

    def multi(srv: Server) -> None:
        sess = BlockingSession(srv.host, srv.port, timeout=120, session_ms=120_000)
        body = encode_request(
            (OpCode.CREATE, CreateRequest(f"/m{i}", b"", OPEN_ACL_UNSAFE, 0))
            for i in range(args.multi)
        )
        sess.call(req(1, OpCode.MULTI, body))
        sess.close()

    def big_frame(srv: Server) -> None:
        sess = BlockingSession(srv.host, srv.port, timeout=120)
        data = b"b" * (0xFFFFF - 1024)
        p = b"/big"
        body = struct.pack(">i", len(p)) + p + struct.pack(">i", len(data)) + data
        sess.call(req(1, 5, body + struct.pack(">i", -1)))
        sess.close()

    def slow_reader(srv: Server) -> None:
        s = socket.create_connection((srv.host, srv.port), timeout=30)
        sess = BlockingSession.__new__(BlockingSession)
        sess.sock, sess.buf = s, bytearray()
        s.sendall(handshake_bytes())
        sess.frame()
        s.setblocking(False)
        fr = get_frame(1, "/fat")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                s.send(fr * 64)
            except BlockingIOError:
                time.sleep(0.05)
            except OSError:
                break  # the server closed it: the bound worked
        s.close()

    return {
        "idle": idle,
        f"flood of {args.connections:,} sessionless connections": flood,
        f"{args.watches:,} watches on one session": watches,
        f"multi of {args.multi:,} creates": multi,
        "biggest frame (setData ~1 MiB)": big_frame,
        "slow reader (never reads 100 KB replies)": slow_reader,
        f"{args.sessions:,} sessions opened": sessions,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=100_000)
    ap.add_argument("--watches", type=int, default=1_000_000)
    ap.add_argument("--multi", type=int, default=10_000)
    ap.add_argument("--zk-heap", default="4g", help="ZooKeeper's -Xmx (1M watches need ~1 GB)")
    ap.add_argument("--kinds", default="zookeeper,trizk")
    args = ap.parse_args(argv)
    fds = raise_fd_limit()
    results: dict[str, dict[str, tuple[float, int, float, float]]] = {}
    print(f"fd limit {fds}; load average before: {os.getloadavg()[0]:.2f}", flush=True)
    kinds = args.kinds.split(",")
    for kind in kinds:
        srv = start(
            kind,
            {
                "maxClientCnxns": "0",
                "nio.sessionlessCnxnTimeout": "2000",
                "maxSessionTimeout": str(SESSION_MS),
            },
            heap=args.zk_heap,
        )
        try:
            zk = KazooClient(hosts=srv.address, timeout=30)
            zk.start(timeout=60)
            zk.create("/by", b"x" * 100)
            zk.create("/fat", b"f" * 100_000)
            zk.create("/big", b"")
            zk.stop()
            zk.close()
            for name, load in _loads(args, fds).items():
                p99, n, wall = _p99_during(srv, lambda: load(srv))  # noqa: B023
                rss = _rss_mb(srv)
                results.setdefault(name, {})[kind] = (p99, n, wall, rss)
                print(
                    f"{kind:9} {name:45} bystander p99 {p99:8.2f} ms ({n} probes)  "
                    f"load {wall:6.2f} s  RSS {rss:7.1f} MB  alive {srv.alive()}",
                    flush=True,
                )
        finally:
            srv.stop(timeout=60)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    head = " | ".join(f"{k} p99 / RSS / load time" for k in kinds)
    print(f"\n| load | {head} |\n| --- |" + " --- |" * len(kinds))
    for name, by in results.items():
        cells = " | ".join(
            f"{by[k][0]:.2f} ms / {by[k][3]:.0f} MB / {by[k][2]:.1f} s" if k in by else "-"
            for k in kinds
        )
        print(f"| {name} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
