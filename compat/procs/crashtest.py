"""Crash loop: SIGKILL a durable trizk server under concurrent writes, restart, verify.

Usage::

    python -m trizk.compat.procs.crashtest                  # 100 rounds (the full run)
    python -m trizk.compat.procs.crashtest --rounds 5 -v    # a quick subset (what CI runs)

Theory
------
One server process (``python -m trizk.server zoo.cfg``, its own temp dir, a free loopback
port, small ``snapCount`` so snapshots and log rolls happen under load) and ``--writers``
client threads, each with its own session (raw protocol client, up to ``--depth`` requests in
flight, so many txns share one fsync). Each writer issues, in order:

* ``create /w<k>/r<round>-<i>`` with data ``<round>-<i>``;
* ``setData /w<k>/ctr`` to a value that only grows;
* ``multi(create /w<k>/a<round>-<i>, create /w<k>/b<round>-<i>, setData /w<k>/m)``.

A write is *acknowledged* when its OK reply arrives. At a random moment the server gets
SIGKILL (sometimes during its startup snapshot, sometimes while it snapshots under load). It
is restarted on the same data dir and must come up every time; then, for every writer:

* every acknowledged create is there with its data, and every node present after an earlier
  restart is still there;
* every node there is one the writer sent (nothing invented);
* ``ctr`` and ``m`` hold a value that was sent and is >= the last acknowledged one;
* a multi is all or nothing: ``a<x>`` exists exactly when ``b<x>`` does;
* the writer's session survived (it resumes with its id and password, its ephemeral is there)
  as long as its createSession was acknowledged, which it always is before the load starts.

Any violation stops the run with the round, the seed and the server log tail. Only the process
we started is ever signalled, by its PID.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from trizk.compat.oracle.rawclient import (
    ConnectionClosed,
    RawClient,
    Reply,
    WireTimeout,
)
from trizk.jute import records as R
from trizk.jute.codes import Code, OpCode
from trizk.testing.ports import free_port
from trizk.testing.probes import handshake_ok
from trizk.testing.processes import (
    kill_process,
    poll_ready,
    spawn,
    stop_process,
    trizk_command,
)

OPEN_ACL = (R.ACL(31, R.Id("world", "anyone")),)
SESSION_TIMEOUT_MS = 30000


class CrashTestFailure(AssertionError):
    pass


@dataclass
class WriterState:
    """What one writer sent and what was acknowledged, across rounds."""

    wid: int
    session: tuple[int, bytes] | None = None
    sent_creates: set[str] = field(default_factory=set)
    acked_creates: set[str] = field(default_factory=set)
    sent_multis: set[str] = field(default_factory=set)
    acked_multis: set[str] = field(default_factory=set)
    ctr_sent: int = 0  # the highest value sent
    ctr_acked: int = 0
    m_sent: int = 0
    m_acked: int = 0
    present: set[str] = field(default_factory=set)  # names seen after a restart
    errors: list[str] = field(default_factory=list)
    acked_total: int = 0

    @property
    def base(self) -> str:
        return f"/w{self.wid}"


class Writer(threading.Thread):
    """One session writing as fast as the server acknowledges, until the connection drops."""

    def __init__(self, port: int, state: WriterState, round_no: int, depth: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.st = state
        self.round = round_no
        self.depth = depth
        self.ready = threading.Event()
        self.client: RawClient | None = None

    def connect(self) -> None:
        c = RawClient("127.0.0.1", self.port, io_timeout=30)
        resp = c.connect(timeout_ms=SESSION_TIMEOUT_MS)
        if resp is None or resp.sessionId == 0:
            raise CrashTestFailure(f"writer {self.st.wid}: no session")
        self.st.session = (resp.sessionId, resp.passwd or b"")
        self.client = c
        # one ephemeral per session: it must survive a restart with the session
        self._sync(
            OpCode.CREATE, R.CreateRequest(f"{self.st.base}/eph-{self.round}", b"", OPEN_ACL, 1)
        )

    def _sync(self, op: int, rec: R.Record, ok: tuple[int, ...] = (0,)) -> Reply:
        assert self.client is not None
        xid = self.client.send(op, rec)
        _, reply = self.client.read_until_reply(xid)
        if reply.err not in ok:
            raise CrashTestFailure(f"writer {self.st.wid}: op {op} failed with {reply.err}")
        return reply

    def run(self) -> None:
        c = self.client
        assert c is not None
        st = self.st
        inflight: dict[int, tuple[str, object]] = {}
        i = 0
        try:
            while True:
                while len(inflight) < self.depth:
                    kind = i % 3
                    name = f"r{self.round}-{i}"
                    if kind == 0:
                        path = f"{st.base}/{name}"
                        st.sent_creates.add(name)
                        xid = c.send(
                            OpCode.CREATE,
                            R.CreateRequest(path, name.encode(), OPEN_ACL, 0),
                        )
                        inflight[xid] = ("create", name)
                    elif kind == 1:
                        st.ctr_sent += 1
                        v = st.ctr_sent
                        xid = c.send(
                            OpCode.SETDATA,
                            R.SetDataRequest(f"{st.base}/ctr", str(v).encode(), -1),
                        )
                        inflight[xid] = ("ctr", v)
                    else:
                        st.m_sent += 1
                        v = st.m_sent
                        st.sent_multis.add(name)
                        ops: list[tuple[int, R.Record]] = [
                            (
                                OpCode.CREATE,
                                R.CreateRequest(f"{st.base}/a{name}", b"", OPEN_ACL, 0),
                            ),
                            (
                                OpCode.CREATE,
                                R.CreateRequest(f"{st.base}/b{name}", b"", OPEN_ACL, 0),
                            ),
                            (OpCode.SETDATA, R.SetDataRequest(f"{st.base}/m", str(v).encode(), -1)),
                        ]
                        xid = c.send_multi(ops)
                        inflight[xid] = ("multi", (name, v))
                    i += 1
                self.ready.set()
                p = c.read_packet()
                if not isinstance(p, Reply) or p.xid not in inflight:
                    continue
                kind_s, what = inflight.pop(p.xid)
                if p.err != 0 or (kind_s == "multi" and _multi_failed(p)):
                    st.errors.append(f"{kind_s} {what!r}: error {p.err}")
                    continue
                st.acked_total += 1
                if kind_s == "create":
                    assert isinstance(what, str)
                    st.acked_creates.add(what)
                elif kind_s == "ctr":
                    assert isinstance(what, int)
                    st.ctr_acked = max(st.ctr_acked, what)
                else:
                    assert isinstance(what, tuple)
                    st.acked_multis.add(what[0])
                    st.m_acked = max(st.m_acked, what[1])
        except (ConnectionClosed, WireTimeout, OSError):
            pass
        finally:
            self.ready.set()
            c.close()


def _multi_failed(reply: Reply) -> bool:
    body = reply.body
    return not isinstance(body, list) or any(r.err != 0 for r in body)


# ---------------------------------------------------------------------------- server


@dataclass
class ServerProc:
    workdir: Path
    port: int
    cfg: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def start(self, timeout: float = 60.0) -> None:
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start {self.starts} =====\n".encode())
        self.proc = spawn(trizk_command(self.cfg), self.workdir, self.log_path)
        ready = partial(handshake_ok, "127.0.0.1", self.port, timeout=2.0)
        if poll_ready(self.proc, ready, timeout, 0.02):
            return
        if self.proc.poll() is not None:
            raise CrashTestFailure(
                f"the server exited with {self.proc.returncode} at start {self.starts}:\n"
                + self.log_tail()
            )
        raise CrashTestFailure(f"server not ready after {timeout}s\n{self.log_tail()}")

    def kill(self) -> None:
        if self.proc is not None:
            kill_process(self.proc, 30)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, 30)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def make_server(workdir: Path, snap_count: int, extra: dict[str, str] | None = None) -> ServerProc:
    port = free_port()
    cfg = {
        "tickTime": "2000",
        "dataDir": str(workdir / "data"),
        "clientPort": str(port),
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": "0",
        "snapCount": str(snap_count),
        "4lw.commands.whitelist": "*",
        **(extra or {}),
    }
    path = workdir / "zoo.cfg"
    path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
    return ServerProc(workdir, port, path)


# ---------------------------------------------------------------------------- verify


def _children(c: RawClient, path: str) -> set[str]:
    xid = c.send(OpCode.GETCHILDREN, R.GetChildrenRequest(path, False))
    _, r = c.read_until_reply(xid)
    if r.err != 0:
        raise CrashTestFailure(f"getChildren {path}: error {r.err}")
    return set(r.body.children or ())


def _data(c: RawClient, path: str) -> bytes | None:
    xid = c.send(OpCode.GETDATA, R.GetDataRequest(path, False))
    _, r = c.read_until_reply(xid)
    if r.err == Code.NONODE:
        return None
    if r.err != 0:
        raise CrashTestFailure(f"getData {path}: error {r.err}")
    return bytes(r.body.data or b"")


def verify(port: int, states: list[WriterState], round_no: int) -> list[str]:
    """Check every writer's invariants (module docstring); returns the problems found."""
    problems: list[str] = []
    for st in states:
        w = f"writer {st.wid}"
        problems += [f"{w}: {e}" for e in st.errors]
        # the session comes back with its ephemeral
        assert st.session is not None
        sid, pw = st.session
        c = RawClient("127.0.0.1", port, io_timeout=30)
        try:
            resp = c.connect(timeout_ms=SESSION_TIMEOUT_MS, session_id=sid, passwd=pw)
            if resp is None or resp.sessionId != sid or resp.timeOut <= 0:
                problems.append(f"{w}: session {sid:#x} did not survive the restart")
                c.close()
                c = RawClient("127.0.0.1", port, io_timeout=30)
                c.connect(timeout_ms=SESSION_TIMEOUT_MS)
            kids = _children(c, st.base)
            eph = f"eph-{round_no}"
            if resp is not None and resp.sessionId == sid and eph not in kids:
                problems.append(f"{w}: ephemeral {eph} of the surviving session is missing")
            creates = {k for k in kids if k.startswith("r")}
            a = {k[1:] for k in kids if k.startswith("a")}
            b = {k[1:] for k in kids if k.startswith("b")}
            for name in sorted(st.acked_creates - creates)[:5]:
                problems.append(f"{w}: acknowledged create {name} lost")
            for name in sorted(st.present - creates)[:5]:
                problems.append(f"{w}: {name} was there after an earlier restart, now lost")
            for name in sorted(creates - st.sent_creates)[:5]:
                problems.append(f"{w}: {name} exists but was never sent")
            for name in sorted(st.acked_multis - a)[:5]:
                problems.append(f"{w}: acknowledged multi {name} lost")
            for name in sorted(a ^ b)[:5]:
                problems.append(f"{w}: multi {name} half applied (a: {name in a}, b: {name in b})")
            for name in sorted(a - st.sent_multis)[:5]:
                problems.append(f"{w}: multi {name} exists but was never sent")
            for name in sorted(creates)[:3] + sorted(creates)[-3:]:
                if _data(c, f"{st.base}/{name}") != name.encode():
                    problems.append(f"{w}: {name} has the wrong data")
            for node, acked, sent in (
                ("ctr", st.ctr_acked, st.ctr_sent),
                ("m", st.m_acked, st.m_sent),
            ):
                raw = _data(c, f"{st.base}/{node}")
                v = int(raw or b"0")
                if not acked <= v <= sent:
                    problems.append(f"{w}: {node}={v}, acknowledged {acked}, sent {sent}")
                # what is there now is the floor for later rounds
                if node == "ctr":
                    st.ctr_acked = max(st.ctr_acked, v)
                else:
                    st.m_acked = max(st.m_acked, v)
            st.present |= creates
            st.acked_multis |= a
            st.errors.clear()
            # end the old session: its ephemeral goes, durably
            if resp is not None and resp.sessionId == sid:
                c.close_session()
        finally:
            c.close()
    return problems


# ---------------------------------------------------------------------------- loop


@dataclass
class Result:
    rounds: int
    acknowledged: int
    recovery_seconds: list[float]
    workdir: Path


_RECOVERED = re.compile(
    r"recovered (\d+) znodes, (\d+) sessions, last zxid (0x[0-9a-f]+) in ([0-9.]+) s"
)


def run(
    rounds: int = 100,
    *,
    writers: int = 4,
    depth: int = 16,
    seed: int | None = None,
    snap_count: int = 2000,
    max_load_seconds: float = 1.0,
    keep: bool = False,
    verbose: bool = False,
    out: Any = sys.stdout,
) -> Result:
    seed = random.randrange(2**32) if seed is None else seed
    rnd = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="trizk-crash-"))
    srv = make_server(workdir, snap_count)
    states = [WriterState(k) for k in range(writers)]
    acknowledged = 0
    recovery: list[float] = []

    def say(msg: str) -> None:
        if verbose:
            print(msg, file=out, flush=True)

    say(
        f"crash test: {rounds} rounds, {writers} writers x {depth} in flight, seed {seed}, "
        f"dir {workdir}"
    )
    ok = False
    try:
        srv.start()
        setup = RawClient("127.0.0.1", srv.port)
        setup.connect()
        for st in states:
            for path in (st.base, f"{st.base}/ctr", f"{st.base}/m"):
                xid = setup.send(OpCode.CREATE, R.CreateRequest(path, b"0", OPEN_ACL, 0))
                setup.read_until_reply(xid)
        setup.close_session()
        for round_no in range(1, rounds + 1):
            t0 = time.monotonic()
            ws = [Writer(srv.port, st, round_no, depth) for st in states]
            for w in ws:
                w.connect()
            before = sum(st.acked_total for st in states)
            for w in ws:
                w.start()
            for w in ws:
                w.ready.wait(30)
            how = rnd.random()
            delay = rnd.uniform(0.0, 0.05) if how < 0.1 else rnd.uniform(0.05, max_load_seconds)
            time.sleep(delay)  # the random moment of the crash (not a synchronisation)
            srv.kill()
            for w in ws:
                w.join(30)
                if w.is_alive():
                    raise CrashTestFailure(f"writer {w.st.wid} did not stop after the kill")
            acked = sum(st.acked_total for st in states) - before
            acknowledged += acked
            srv.start()
            found = _RECOVERED.findall(srv.log_path.read_text(errors="replace"))
            m = found[-1] if found else None
            if m is not None:
                recovery.append(float(m[3]))
            problems = verify(srv.port, states, round_no)
            if problems:
                raise CrashTestFailure(
                    f"round {round_no} (seed {seed}): "
                    + "; ".join(problems[:20])
                    + f"\n--- server log ---\n{srv.log_tail()}"
                )
            say(
                f"round {round_no}: killed after {delay:.3f}s, {acked} writes acknowledged, "
                f"restart ok"
                + (f", recovered {m[0]} znodes to {m[2]} in {m[3]} s" if m else "")
                + f" ({time.monotonic() - t0:.1f}s)"
            )
        ok = True
    finally:
        srv.kill()
        if not keep and ok:
            shutil.rmtree(workdir, ignore_errors=True)
        elif not ok:
            print(f"crash test failed; data dir and server log kept in {workdir}", file=sys.stderr)
    return Result(rounds, acknowledged, recovery, workdir)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m trizk.compat.procs.crashtest", description=__doc__.split("\n")[0]
    )
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--depth", type=int, default=16, help="requests in flight per writer")
    p.add_argument("--seed", type=int)
    p.add_argument("--snap-count", type=int, default=2000)
    p.add_argument("--max-load", type=float, default=1.0, help="longest load before a kill (s)")
    p.add_argument("--keep", action="store_true", help="keep the data dir")
    a = p.parse_args(argv)
    try:
        res = run(
            a.rounds,
            writers=a.writers,
            depth=a.depth,
            seed=a.seed,
            snap_count=a.snap_count,
            max_load_seconds=a.max_load,
            keep=a.keep,
            verbose=True,
        )
    except CrashTestFailure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    rec = sorted(res.recovery_seconds)
    med = rec[len(rec) // 2] if rec else 0.0
    print(
        f"OK: {res.rounds} SIGKILL rounds, {res.acknowledged} acknowledged writes all present; "
        f"recovery median {med:.3f} s, max {max(rec, default=0.0):.3f} s"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
