"""The client shell's output bounds over real sockets (trizk.server.shell.poller).

* A client that pipelines more output than ``soft_limit`` and reads it only later is not read
  from meanwhile, and then gets every reply, in order, on the same connection.
* A client that never reads while its output passes ``hard_limit`` has its connection closed
  by the server (with a log line); another session is answered all along.
* A stopped server leaves no client connection open.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.conftest import ThreadedServer, make_config
from trizk.compat.oracle.rawclient import RawClient
from trizk.jute import records as R
from trizk.jute.codes import OpCode

DEADLINE = 20.0
BIG = b"b" * 500_000


def _get_frames(n: int, path: str, first_xid: int = 1) -> bytes:
    out = bytearray()
    for i in range(n):
        body = R.RequestHeader(first_xid + i, OpCode.GETDATA).encode()
        body += R.GetDataRequest(path, False).encode()
        out += struct.pack(">i", len(body)) + body
    return bytes(out)


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    srv = ThreadedServer(make_config(tmp_path)).start()
    try:
        assert srv.server is not None and srv.server.poller is not None, "selector shell in use"
        zk = KazooClient(hosts=f"127.0.0.1:{srv.port}", timeout=DEADLINE)
        zk.start(DEADLINE)
        zk.create("/big", BIG)
        yield srv, zk
        zk.stop()
        zk.close()
    finally:
        srv.stop()


def _peer_of(srv: ThreadedServer, session_id: int):  # type: ignore[no-untyped-def]
    return srv.call(
        lambda: next(p for p in srv.server.peers.values() if p.conn.session_id == session_id)
    )


def test_backlogged_client_is_not_read_then_gets_every_reply_in_order(  # type: ignore[no-untyped-def]
    server,
) -> None:
    srv, _zk = server
    poller = srv.server.poller
    srv.call(lambda: setattr(poller, "soft_limit", 1_000_000))
    c = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    rsp = c.connect()
    assert rsp is not None
    peer = _peer_of(srv, rsp.sessionId)
    n = 20  # ~10 MB of replies, ten times the soft limit
    c.send_raw(_get_frames(n, "/big"))
    wait_until = time.monotonic() + DEADLINE
    while not srv.call(lambda: peer.backlogged):
        assert time.monotonic() < wait_until, "the connection never became backlogged"
        time.sleep(0.01)
    received = srv.call(lambda: peer.conn.packets_received)
    c.send_raw(_get_frames(5, "/big", first_xid=n + 1))  # waits: the connection is not read
    assert srv.call(lambda: peer.conn.packets_received) == received
    got = []
    for i in range(n + 5):
        _events, reply = c.read_until_reply(i + 1)
        got.append((reply.xid, reply.err))
    assert got == [(i + 1, 0) for i in range(n + 5)]
    assert c.close_session() is not None
    c.close()


def test_client_that_never_reads_is_closed_past_the_hard_limit(  # type: ignore[no-untyped-def]
    server, caplog: pytest.LogCaptureFixture
) -> None:
    srv, zk = server
    poller = srv.server.poller
    srv.call(lambda: setattr(poller, "hard_limit", 4_000_000))
    raw = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
    assert raw.connect() is not None
    sock = raw.sock
    with caplog.at_level(logging.WARNING, logger="trizk.server"):
        # 20 x 500 KB asked for in one burst, nothing read: the core answers them all into the
        # connection's buffer (one read), far past the lowered hard limit
        sock.sendall(_get_frames(20, "/big"))
        assert zk.get("/big")[0] == BIG  # another session is answered meanwhile
        sock.settimeout(DEADLINE)
        closed = False
        try:
            while sock.recv(1 << 20):
                pass
            closed = True
        except ConnectionResetError:
            closed = True
        assert closed
    assert any("unsent output" in rec.getMessage() for rec in caplog.records)
    assert zk.exists("/big") is not None
    raw.close()


def test_stopped_server_closes_every_client_connection(tmp_path: Path) -> None:
    srv = ThreadedServer(make_config(tmp_path)).start()
    clients = []
    try:
        for _ in range(3):
            c = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
            assert c.connect() is not None
            clients.append(c)
    finally:
        srv.stop()
    for c in clients:
        c.sock.settimeout(DEADLINE)
        try:
            assert c.sock.recv(1) == b""
        except ConnectionResetError:
            pass
        c.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()


def _exists_frames(n: int, path: str) -> bytes:
    out = bytearray()
    for i in range(n):
        body = R.RequestHeader(i + 1, OpCode.EXISTS).encode()
        body += R.ExistsRequest(path, False).encode()
        out += struct.pack(">i", len(body)) + body
    return bytes(out)


def test_a_pipelining_client_takes_turns_with_the_others(tmp_path: Path) -> None:
    """The server's loop is held while client A pipelines 20,000 ``exists /b`` (the first
    ~100 KB before B's request is sent) and client B sends one getData; then it goes on. A is
    read first and served one turn's budget of frames, then B's request is taken in the same
    pass: when B's request is processed, one turn of A's frames has been. Serving each receive
    of A's whole before anyone else would have processed all the 3,000 frames buffered first
    (or more)."""
    import threading

    from trizk.server.shell.app import FRAME_BUDGET

    srv = ThreadedServer(make_config(tmp_path)).start()
    try:
        a = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
        b = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
        ra, rb = a.connect(), b.connect()
        assert ra is not None and rb is not None
        front = srv.server.core
        conn_a = srv.call(lambda: front.session_conn[ra.sessionId])
        seen: list[int] = []  # A's frames processed when B's request was
        # The poller hands each read to the shell's ``feed``; B's one read holds its one
        # request. (The shell, not the core: a core compiled by mypyc has no attributes
        # to swap.)
        shell = srv.server
        original = shell.feed

        def spy(peer, data):  # type: ignore[no-untyped-def]
            if data and peer.conn.session_id == rb.sessionId:
                seen.append(conn_a.packets_received)
            return original(peer, data)

        srv.call(lambda: setattr(shell, "feed", spy))
        n = 20_000
        burst = _exists_frames(n, "/b")
        size = len(burst) // n  # every frame is as long
        held, sent = threading.Event(), threading.Event()

        def hold() -> None:  # runs in the server's Trio thread: nothing is served meanwhile
            held.set()
            assert sent.wait(DEADLINE)

        holder = threading.Thread(target=srv.call, args=(hold,), daemon=True)
        holder.start()
        assert held.wait(DEADLINE)
        first = 3000 * size  # ~100 KB: in the socket buffers before B's request
        a.send_raw(burst[:first])
        # the rest (~600 KB) is more than the buffers take while the loop is held: a thread
        sender = threading.Thread(target=a.send_raw, args=(burst[first:],), daemon=True)
        sender.start()
        b.send_raw(_get_frames(1, "/"))
        sent.set()
        holder.join(DEADLINE)
        _events, got = b.read_until_reply(1)
        assert got.err == 0
        errs = [a.read_until_reply(i + 1)[1].err for i in range(n)]
        sender.join(DEADLINE)
        assert set(errs) == {-101}
        assert len(seen) == 1
        # the handshake counts as a packet; A had a turn (65 seen; 3,001-6,719 without turns)
        assert 1 <= seen[0] - 1 <= min(3 * FRAME_BUDGET, 1000), seen
        a.close()
        b.close()
    finally:
        srv.stop()
