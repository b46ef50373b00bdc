"""The cross-check proxy (trizk.compat.oracle.xchk) driven by kazoo through real sockets.

* ZooKeeper against ZooKeeper through the proxy: a realistic mix (creates, sequentials, sets,
  gets, children, data/child/exist watches fired by another session, an ephemeral removed by
  its session's close, a committed and a failed multi, error answers) must give 0 divergences,
  while replies and events were actually compared (so the test cannot pass by comparing nothing).
* An injected divergence: the candidate is a second ZooKeeper pre-loaded with a node the oracle
  does not have; the client's create of that node must be reported as an error-code divergence
  naming the request, and the client must still see the oracle's answer.
* ZooKeeper against trizk, when trizk's server exists.
* The order-preserving zxid bijection (the pure core), directly.

Servers are started with the benchmark launcher (loopback, free ports, temp dirs, stopped by
PID). Waits are bounded (trio.fail_after, threading.Event.wait with a timeout).
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

from trizk.compat.bench.load import BlockingSession, close_frame, create_frame, get_frame, set_frame
from trizk.compat.oracle.xchk import Bijection, Checker, Proxy
from trizk.compat.procs.launcher import Server, start_server
from trizk.jute.framing import frame
from trizk.jute.records import GetDataResponse, ReplyHeader, RequestHeader, SetWatches, Stat

kazoo_client = pytest.importorskip("kazoo.client")
kazoo_exc = pytest.importorskip("kazoo.exceptions")

HAVE_ZK = shutil.which("java") is not None and os.path.exists("/usr/share/java/zookeeper.jar")
HAVE_TRIZK = importlib.util.find_spec("trizk.server.__main__") is not None
needs_zk = pytest.mark.skipif(not HAVE_ZK, reason="Apache ZooKeeper (java + jars) not installed")

WAIT = 10.0


@pytest.fixture
def zk_pair() -> Iterator[tuple[Server, Server]]:
    a = start_server("zookeeper", "oracle")
    try:
        b = start_server("zookeeper", "candidate")
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def _client(port: int) -> Any:
    zk = kazoo_client.KazooClient(hosts=f"127.0.0.1:{port}", timeout=10.0)
    zk.start(timeout=WAIT)
    return zk


def realistic_mix(port: int) -> dict[str, int]:
    """A kazoo workload through the proxy; returns what the client observed (for asserts)."""
    seen: dict[str, int] = {}
    a = _client(port)
    b = _client(port)
    try:
        a.ensure_path("/app/config")
        a.create("/app/config/x", b"v1")
        assert a.get("/app/config/x")[0] == b"v1"

        data_fired, child_fired, gone = threading.Event(), threading.Event(), threading.Event()
        a.get("/app/config/x", watch=lambda ev: data_fired.set())
        a.get_children("/app/config", watch=lambda ev: child_fired.set())

        b.set("/app/config/x", b"v2")
        b.create("/app/config/y", b"")
        assert data_fired.wait(WAIT) and child_fired.wait(WAIT)

        for _ in range(3):
            b.create("/app/q/item-", b"job", sequence=True, makepath=True)
        seen["children"] = len(a.get_children("/app/q"))
        assert a.exists("/app/nope") is None
        with pytest.raises(kazoo_exc.NodeExistsError):
            a.create("/app/config/x", b"again")
        with pytest.raises(kazoo_exc.BadVersionError):
            a.set("/app/config/x", b"v3", version=99)
        with pytest.raises(kazoo_exc.NoNodeError):
            a.get("/app/missing")

        tx = a.transaction()
        tx.create("/app/tx", b"t")
        tx.set_data("/app/config/x", b"v3")
        tx.check("/app/config/y", 0)
        assert all(r is not None and not isinstance(r, Exception) for r in tx.commit())
        bad = a.transaction()
        bad.create("/app/tx2", b"")
        bad.delete("/app/absent")
        results = bad.commit()
        assert any(isinstance(r, Exception) for r in results)

        # An ephemeral of session b, watched by a, removed when b closes.
        b.create("/app/lock", b"", ephemeral=True)
        assert a.exists("/app/lock", watch=lambda ev: gone.set()) is not None
        b.stop()
        b.close()
        assert gone.wait(WAIT)
        assert a.exists("/app/lock") is None

        a.delete("/app/q", recursive=True)
        seen["acl"] = len(a.get_acls("/app/config")[0])
        a.sync("/app")
    finally:
        for zk in (a, b):
            zk.stop()
            zk.close()
    return seen


async def _run_through_proxy(
    oracle: Server, candidate: Server | int, workload: Callable[[int], Any], **kw: Any
) -> tuple[Checker, Any]:
    """Run ``workload(proxy_port)`` in a thread through a proxy (``candidate``: a server, or
    the port of something in front of one)."""
    chk = Checker(compare_header_zxid=bool(kw.get("lockstep", True)))
    cport = candidate if isinstance(candidate, int) else candidate.port
    proxy = Proxy(("127.0.0.1", oracle.port), ("127.0.0.1", cport), chk, **kw)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(proxy.serve, "127.0.0.1", 0)
        with trio.fail_after(60):
            result = await trio.to_thread.run_sync(workload, port)
        # Sessions end asynchronously after kazoo closed them; wait (bounded) for the proxy.
        with trio.fail_after(WAIT):
            while proxy.active:
                await trio.sleep(0.02)
        proxy.all_done.set()
    return chk, result


@needs_zk
@pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "pipelined"])
async def test_zookeeper_vs_zookeeper_no_divergence(
    zk_pair: tuple[Server, Server], lockstep: bool
) -> None:
    oracle, candidate = zk_pair
    chk, seen = await _run_through_proxy(oracle, candidate, realistic_mix, lockstep=lockstep)
    assert seen == {"children": 3, "acl": 1}
    assert [(d.kind, d.request, d.detail) for d in chk.divergences] == []
    assert chk.compared >= 30  # replies really compared (40 on ZooKeeper 3.8 + kazoo 2.11)
    assert chk.events_compared >= 3  # data, child and ephemeral-deletion events


@needs_zk
async def test_injected_divergence_is_detected(zk_pair: tuple[Server, Server]) -> None:
    oracle, candidate = zk_pair
    pre = kazoo_client.KazooClient(hosts=candidate.address, timeout=10.0)
    pre.start(timeout=WAIT)
    pre.create("/only-on-candidate", b"extra")
    pre.stop()
    pre.close()

    def workload(port: int) -> bytes:
        zk = _client(port)
        try:
            zk.create("/only-on-candidate", b"from-client")  # oracle: OK, candidate: NodeExists
            return zk.get("/only-on-candidate")[0]  # the client sees the oracle's data
        finally:
            zk.stop()
            zk.close()

    chk, data = await _run_through_proxy(oracle, candidate, workload)
    assert data == b"from-client"
    errs = [d for d in chk.divergences if d.kind == "err"]
    assert errs, chk.divergences
    assert errs[0].request is not None
    assert errs[0].request["op"] == "create" and errs[0].request["path"] == "/only-on-candidate"
    assert "-110" in errs[0].detail  # NODEEXISTS from the candidate
    # The candidate's node holds other data: the get is reported as a data divergence too.
    assert any(d.kind == "reply" and "data" in d.detail for d in chk.divergences)


class _LateRequests:
    """A TCP forwarder in front of a server that delays what the second connection through it
    sends (the candidate receives that session's requests ``delay`` seconds late)."""

    def __init__(self, port: int, delay: float) -> None:
        self.port = port
        self.delay = delay
        self.accepted = 0

    async def serve(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        task_status.started(listeners[0].socket.getsockname()[1])
        await trio.serve_listeners(self._relay, listeners)

    async def _relay(self, down: trio.SocketStream) -> None:
        self.accepted += 1
        delay = self.delay if self.accepted == 2 else 0.0
        up = await trio.open_tcp_stream("127.0.0.1", self.port)

        async def pipe(a: trio.SocketStream, b: trio.SocketStream, late: float) -> None:
            try:
                while data := await a.receive_some(65536):
                    if late:
                        await trio.sleep(late)  # the delay under test, not a wait for an event
                    await b.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                await b.aclose()

        async with down, up, trio.open_nursery() as nursery:
            nursery.start_soon(pipe, down, up, delay)
            nursery.start_soon(pipe, up, down, 0.0)


@needs_zk
async def test_pipelined_reply_waits_for_the_candidate(zk_pair: tuple[Server, Server]) -> None:
    """Pipelined: the client gets a write's reply only once the candidate answered it too, so
    a read it then sends on another session finds the write on both servers. Here session
    b's requests reach the candidate 0.5 s late; were the oracle's reply to b's create
    forwarded at once, a's getChildren would reach the candidate before that create."""
    oracle, candidate = zk_pair
    late = _LateRequests(candidate.port, 0.5)

    def workload(port: int) -> list[str]:
        a = _client(port)
        b = _client(port)
        try:
            a.ensure_path("/ra")
            b.create("/ra/x", b"")
            return list(a.get_children("/ra"))
        finally:
            for zk in (a, b):
                zk.stop()
                zk.close()

    async with trio.open_nursery() as nursery:
        late_port = await nursery.start(late.serve)
        chk, children = await _run_through_proxy(oracle, late_port, workload, lockstep=False)
        nursery.cancel_scope.cancel()
    assert children == ["x"] and late.accepted == 2
    assert [(d.kind, d.request, d.detail) for d in chk.divergences] == []
    assert chk.compared >= 3


@needs_zk
@pytest.mark.skipif(not HAVE_TRIZK, reason="trizk.server is not written yet")
async def test_zookeeper_vs_trizk() -> None:
    oracle = start_server("zookeeper", "oracle")
    try:
        candidate = start_server("trizk", "trizk")
    except BaseException:
        oracle.stop()
        raise
    try:
        chk, _ = await _run_through_proxy(oracle, candidate, realistic_mix)
    finally:
        oracle.stop()
        candidate.stop()
    assert [(d.kind, d.request, d.detail) for d in chk.divergences] == []
    assert chk.compared >= 30


@needs_zk
async def test_reconnect_maps_session_password_and_zxid(zk_pair: tuple[Server, Server]) -> None:
    """A client re-attaches to its session on a new connection with the oracle's session id,
    password and last zxid: the candidate must get its own (else it refuses the session, or
    reports a different ephemeralOwner)."""
    oracle, candidate = zk_pair
    # An unmapped lastZxidSeen would be "from the future" for the candidate: ZooKeeper refuses.
    _warm_oracle(oracle)

    def workload(port: int) -> tuple[int, int]:
        s1 = BlockingSession("127.0.0.1", port, session_ms=20000)
        hdr, _ = ReplyHeader.decode_from(s1.request(create_frame(1, "/e", b"", flags=1)), 0)
        assert hdr.err == 0
        s1.sock.close()  # drop the connection, not the session
        s2 = BlockingSession(
            "127.0.0.1", port, session_id=s1.session_id, passwd=s1.passwd, last_zxid=s1.last_zxid
        )
        assert s2.session_id == s1.session_id
        reply = s2.request(get_frame(2, "/e"))
        hdr, pos = ReplyHeader.decode_from(reply, 0)
        owner = GetDataResponse.decode_from(reply, pos)[0].stat.ephemeralOwner
        s2.request(close_frame(3))
        s2.sock.close()
        return owner, s1.session_id

    chk, (owner, sid) = await _run_through_proxy(oracle, candidate, workload)
    assert owner == sid
    assert [(d.kind, d.request, d.detail) for d in chk.divergences] == []
    assert chk.compared == 3


def _warm_oracle(oracle: Server, n: int = 5) -> None:
    """Put the oracle's zxids ahead of the candidate's, so an unmapped zxid sent to the
    candidate would be wrong (from its future)."""
    pre = kazoo_client.KazooClient(hosts=oracle.address, timeout=10.0)
    pre.start(timeout=WAIT)
    for i in range(n):
        pre.create(f"/warm{i}")
        pre.delete(f"/warm{i}")
    pre.stop()
    pre.close()


@needs_zk
async def test_set_watches_after_reconnect_maps_relative_zxid(
    zk_pair: tuple[Server, Server],
) -> None:
    """A client re-attaching after a change it missed sends SetWatches with its last zxid; the
    server must fire the watch at once (node mzxid > relativeZxid). Unmapped, the oracle's
    larger zxid would make the candidate stay silent: an unpaired-event divergence."""
    oracle, candidate = zk_pair
    _warm_oracle(oracle)

    def workload(port: int) -> int:
        writer = BlockingSession("127.0.0.1", port)
        assert ReplyHeader.decode_from(writer.request(create_frame(1, "/w", b"0")), 0)[0].err == 0
        s1 = BlockingSession("127.0.0.1", port, session_ms=20000)
        s1.request(get_frame(1, "/w", watch=True))
        s1.sock.close()  # the connection (and its watches) is gone, the session is not
        assert ReplyHeader.decode_from(writer.request(set_frame(2, "/w", b"1")), 0)[0].err == 0
        s2 = BlockingSession(
            "127.0.0.1", port, session_id=s1.session_id, passwd=s1.passwd, last_zxid=s1.last_zxid
        )
        body = SetWatches(
            relativeZxid=s1.last_zxid, dataWatches=("/w",), existWatches=(), childWatches=()
        ).encode()
        s2.sock.sendall(frame(RequestHeader(xid=-8, type=101).encode() + body))
        frames = [s2.frame(), s2.frame()]  # the reply to SetWatches and the event, any order
        events = [f for f in frames if ReplyHeader.decode_from(f, 0)[0].xid == -1]
        s2.request(close_frame(3))
        writer.close()
        return len(events)

    chk, events = await _run_through_proxy(oracle, candidate, workload)
    assert events == 1
    assert [(d.kind, d.request, d.detail) for d in chk.divergences] == []
    assert chk.events_compared == 1


@needs_zk
async def test_four_letter_word_goes_to_the_oracle(zk_pair: tuple[Server, Server]) -> None:
    oracle, candidate = zk_pair

    def ruok(port: int) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
            s.sendall(b"ruok")
            out = b""
            while chunk := s.recv(100):
                out += chunk
            return out

    chk, answer = await _run_through_proxy(oracle, candidate, ruok)
    assert answer == b"imok"
    assert chk.divergences == []


@needs_zk
def test_command_line_summary_and_exit_status(zk_pair: tuple[Server, Server]) -> None:
    """``trizk-xchk ... --max-sessions 1``: serves one kazoo session, prints the summary,
    exits 0 (1 would mean divergences)."""
    oracle, candidate = zk_pair
    cmd = [
        sys.executable, "-m", "trizk.compat.oracle.xchk", "--listen", "127.0.0.1:0",
        "--oracle", oracle.address, "--candidate", candidate.address, "--max-sessions", "1",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], WAIT)
        assert ready, "xchk did not start listening in time"
        line = proc.stderr.readline()  # "xchk: listening on HOST:PORT"
        assert "listening on" in line, line
        port = int(line.rsplit(":", 1)[1])
        zk = _client(port)
        zk.create("/cli", b"x")
        assert zk.get("/cli")[0] == b"x"
        zk.stop()
        zk.close()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    summary = json.loads(out.split("xchk summary: ", 1)[1])
    assert summary["divergences"] == 0 and summary["sessions"] == 1
    assert summary["replies_compared"] >= 3


def test_zxid_bijection_is_order_preserving() -> None:
    m = Bijection(ordered=True)
    assert m.check(0x100, 0x500) is None
    assert m.check(0x105, 0x509) is None
    assert m.check(0x100, 0x500) is None  # consistent repeat
    assert m.check(0x100, 0x501) is not None  # same oracle zxid, other image
    assert m.check(0x101, 0x509) is not None  # image already taken
    assert m.check(0x102, 0x4FF) is not None  # would invert the order
    assert m.check(0x102, 0x505) is None  # fits between its neighbours
    assert m.check(-1, -1) is None and m.check(-1, 5) is not None  # constants
    assert m.to_candidate(0x104) == 0x505  # nearest known below
    assert m.to_candidate(0x50) == 0


def random_mix(port: int, seed: int, n: int = 300) -> int:
    """Three kazoo sessions issuing a seeded random mix over a few overlapping paths, so that
    errors (NoNode, NodeExists, BadVersion, NotEmpty), sequentials, ephemerals, multis and
    watches firing on other sessions all occur. Returns how many calls raised."""
    import random

    rng = random.Random(seed)
    clients = [_client(port) for _ in range(3)]
    paths = ["/r", "/r/a", "/r/b", "/r/a/x", "/r/c", "/r/a/y"]
    failed = 0
    try:
        for i in range(n):
            c, p, op = rng.choice(clients), rng.choice(paths), rng.randrange(12)
            try:
                if op == 0:
                    c.create(p, b"d%d" % i, ephemeral=rng.random() < 0.3)
                elif op == 1:
                    c.create(p + "/s-", b"", sequence=True, ephemeral=rng.random() < 0.5)
                elif op == 2:
                    c.set(p, b"v%d" % i, version=rng.choice([-1, 0, 1, 2]))
                elif op == 3:
                    c.delete(p, version=rng.choice([-1, 0, 1]))
                elif op == 4:
                    c.get(p, watch=lambda e: None)
                elif op == 5:
                    c.get_children(p, watch=lambda e: None)
                elif op == 6:
                    c.exists(p, watch=lambda e: None)
                elif op == 7:
                    t = c.transaction()
                    t.create(p + "/m", b"")
                    t.set_data(p, b"m")
                    t.commit()
                elif op == 8:
                    c.get_children(p, include_data=True)
                elif op == 9:
                    c.get_acls(p)
                elif op == 10:
                    c.delete(p, recursive=True)
                else:
                    c.sync(p)
            except kazoo_exc.KazooException:
                failed += 1
    finally:
        for c in clients:
            c.stop()
            c.close()
    return failed


@needs_zk
@pytest.mark.parametrize("kind", ["zookeeper", "trizk"])
async def test_seeded_random_mix(kind: str) -> None:
    if kind == "trizk" and not HAVE_TRIZK:
        pytest.skip("trizk.server is not written yet")
    oracle = start_server("zookeeper", "oracle")
    try:
        candidate = start_server(kind, "candidate")
    except BaseException:
        oracle.stop()
        raise
    try:
        chk, failed = await _run_through_proxy(
            oracle, candidate, lambda port: random_mix(port, seed=7)
        )
    finally:
        oracle.stop()
        candidate.stop()
    assert [(d.kind, d.request, d.detail) for d in chk.divergences] == []
    assert failed >= 20  # the mix really provoked error answers
    assert chk.compared >= 300 and chk.events_compared >= 3


def _stat(**kw: int) -> Stat:
    base = dict(czxid=0, mzxid=0, ctime=0, mtime=0, version=0, cversion=0, aversion=0,
                ephemeralOwner=0, dataLength=0, numChildren=0, pzxid=0)  # fmt: skip
    base.update(kw)
    return Stat(**base)


def _get_reply(zxid: int, data: bytes, **stat: int) -> bytes:
    hdr = ReplyHeader(xid=7, zxid=zxid, err=0).encode()
    return hdr + GetDataResponse(data=data, stat=_stat(**stat)).encode()


def test_checker_normalises_ids_and_times_but_not_data_or_versions() -> None:
    chk = Checker()
    chk.sessions.check(0x1111, 0x2222)  # as learned from the two handshakes
    req = {"xid": 7, "op": "getdata", "path": "/a"}
    o = _get_reply(0x10, b"d", czxid=0x0F, mzxid=0x10, ctime=111, mtime=222, ephemeralOwner=0x1111)
    c = _get_reply(0x90, b"d", czxid=0x8F, mzxid=0x90, ctime=333, mtime=444, ephemeralOwner=0x2222)
    chk.compare_reply("s", req, 4, o, c)
    assert chk.divergences == []
    # Same zxids again, but another version and other data: both reported, one record.
    c2 = _get_reply(0x90, b"e", czxid=0x8F, mzxid=0x90, ctime=1, mtime=1, version=1,
                    ephemeralOwner=0x2222)  # fmt: skip
    chk.compare_reply("s", req, 4, o, c2)
    assert [d.kind for d in chk.divergences] == ["reply"]
    assert "body.data" in chk.divergences[0].detail and "version" in chk.divergences[0].detail
    # An ephemeralOwner that is not the mapped session is a divergence.
    c3 = _get_reply(0x90, b"d", czxid=0x8F, mzxid=0x90, ctime=1, mtime=1, ephemeralOwner=0x3333)
    chk.compare_reply("s", req, 4, o, c3)
    assert "ephemeralOwner" in chk.divergences[-1].detail
    # Error codes: compared first, bodies ignored when they differ.
    e = ReplyHeader(xid=7, zxid=0x11, err=-101).encode()
    chk.compare_reply("s", req, 4, o, e)
    assert chk.divergences[-1].kind == "err"
    assert chk.compared == 4
