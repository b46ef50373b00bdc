"""Loads a hostile or careless client makes, side by side: Apache ZooKeeper 3.8 against trizk.

``python -m trizk.compat.bench_hostile [--sessions N] [--watches N] [--connections N]``
starts each server (compat/servers.py, fsync on, ``maxClientCnxns=0``), then for every load
below measures a *bystander* session (one getData at a time on its own connection) -- its p99
latency during the load against the same server idle -- and the server's RSS after the load:

* a flood of connections that never send a handshake (sessionless; the server closes them
  after ``nio.sessionlessCnxnTimeout``, set to 2 s here);
* many sessions opened and held;
* one session setting a great many watches (exists on paths that do not exist);
* one multi of 10,000 creates;
* the biggest frame allowed (setData of ``jute.maxbuffer`` minus room for the header);
* a slow reader: a session that pipelines reads of a 100 KB node and never reads its socket.

Machine-dependent and long: a tool for the notes, never run in CI (the bounds themselves are
tested in tests/wire/test_load.py).
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import socket
import struct
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient

from .bench_load import BlockingSession, get_frame, open_many_sessions, req
from .bench_servers import handshake_bytes
from .servers import Server, start

_OPEN_ACL = (
    struct.pack(">i", 1)
    + struct.pack(">i", 31)
    + (struct.pack(">i", 5) + b"world" + struct.pack(">i", 6) + b"anyone")
)
_MULTI_HDR = struct.Struct(">i?i")


def _rss_mb(srv: Server) -> float:
    try:
        with open(f"/proc/{srv.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _p99_during(srv: Server, load: Callable[[], object]) -> tuple[float, float]:
    """Bystander getData p99 (ms) while ``load`` runs, and the load's wall time (s)."""
    by = BlockingSession(srv.host, srv.port, timeout=60)
    fr = get_frame(1, "/by")
    lat: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            by.call(fr)
            lat.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.002)  # probe pace: ~400 probes/s, not a load of its own

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t0 = time.monotonic()
    try:
        load()
    finally:
        elapsed = time.monotonic() - t0
        done.set()
        t.join(30)
        by.close()
    lat.sort()
    return (lat[int(len(lat) * 0.99)] if lat else float("nan")), elapsed


def _create_frame(xid: int, path: str, data: bytes) -> bytes:
    p = path.encode()
    body = struct.pack(">i", len(p)) + p + struct.pack(">i", len(data)) + data + _OPEN_ACL
    return req(xid, 1, body + struct.pack(">i", 0))


def _loads(args: argparse.Namespace) -> dict[str, Callable[[Server], None]]:
    def idle(srv: Server) -> None:
        time.sleep(2.0)  # the idle baseline: the bystander alone for 2 s

    def flood(srv: Server) -> None:
        socks = []
        for _ in range(args.connections):
            socks.append(socket.create_connection((srv.host, srv.port), timeout=30))
        time.sleep(1.0)
        for s in socks:
            s.close()

    def sessions(srv: Server) -> None:
        _, socks = open_many_sessions(srv.host, srv.port, args.sessions, concurrency=64)
        for s in socks:
            s.close()

    def watches(srv: Server) -> None:
        sess = BlockingSession(srv.host, srv.port, timeout=120)
        batch = 1000
        for base in range(0, args.watches, batch):
            frames = b"".join(
                req(i + 1, 3, struct.pack(">i", len(p)) + p + b"\x01")
                for i in range(batch)
                for p in [f"/w/{base + i}".encode()]
            )
            sess.sock.sendall(frames)
            for _ in range(batch):
                sess.frame()
        sess.sock.close()  # closing: the server drops every watch of the connection

    def multi(srv: Server) -> None:
        sess = BlockingSession(srv.host, srv.port, timeout=120)
        body = b""
        for i in range(10_000):
            p = f"/m{i}".encode()
            body += _MULTI_HDR.pack(1, False, -1) + struct.pack(">i", len(p)) + p
            body += struct.pack(">i", 0) + _OPEN_ACL + struct.pack(">i", 0)
        body += _MULTI_HDR.pack(-1, True, -1)
        sess.call(req(1, 14, body))
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
        sent = 0
        while time.monotonic() < deadline:
            try:
                s.send(fr * 64)
                sent += 64
            except BlockingIOError:
                time.sleep(0.05)
            except OSError:
                break  # the server closed it: the bound worked
        s.close()

    return {
        "idle": idle,
        f"flood of {args.connections} sessionless connections": flood,
        f"{args.sessions} sessions opened": sessions,
        f"{args.watches} watches on one session": watches,
        "multi of 10,000 creates": multi,
        "biggest frame (setData ~1 MiB)": big_frame,
        "slow reader (never reads 100 KB replies)": slow_reader,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--sessions", type=int, default=5000)
    ap.add_argument("--watches", type=int, default=200_000)
    args = ap.parse_args(argv)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # children inherit it
    results: dict[str, dict[str, tuple[float, float, float]]] = {}
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for kind in ("zookeeper", "trizk"):
        srv = start(kind, {"maxClientCnxns": "0", "nio.sessionlessCnxnTimeout": "2000"})
        try:
            zk = KazooClient(hosts=srv.address, timeout=30)
            zk.start(timeout=60)
            zk.create("/by", b"x" * 100)
            zk.create("/fat", b"f" * 100_000)
            zk.create("/big", b"")
            zk.stop()
            zk.close()
            for name, load in _loads(args).items():
                p99, wall = _p99_during(srv, functools.partial(load, srv))
                results.setdefault(name, {})[kind] = (p99, wall, _rss_mb(srv))
                print(
                    f"{kind:9} {name:45} bystander p99 {p99:8.2f} ms  load {wall:6.2f} s"
                    f"  RSS {_rss_mb(srv):7.1f} MB  alive {srv.alive()}",
                    flush=True,
                )
        finally:
            srv.stop()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("\n| load | ZooKeeper p99 / RSS | trizk p99 / RSS |\n| --- | --- | --- |")
    for name, by in results.items():
        z, t = by["zookeeper"], by["trizk"]
        print(f"| {name} | {z[0]:.2f} ms / {z[2]:.0f} MB | {t[0]:.2f} ms / {t[2]:.0f} MB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
