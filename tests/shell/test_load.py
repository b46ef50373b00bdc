"""Load bounds over real sockets: globalOutstandingLimit, idle and sessionless connections.

* ``globalOutstandingLimit`` (ZooKeeper: ServerCnxn.incrOutstandingAndCheckThrottle): past the
  limit of requests in process, a connection with requests of its own in process is not read
  until they drain, so a client pipelining thousands of writes holds at most limit + 1 of
  them in the server; every one is still answered, in order.
* ``zookeeper.nio.sessionlessCnxnTimeout`` (NIOServerCnxnFactory's connection expiry queue): a
  connection that never completes its handshake, or stops half-way through a frame, is closed;
  sessions that ping carry on. A handshake that was read but whose createSession has not
  committed yet is held for the session's timeout, not the sessionless one
  (NIOServerCnxn.setSessionTimeout touches the connection).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.conftest import ThreadedServer, make_config
from trizk.compat.oracle.rawclient import RawClient
from trizk.jute import records as R
from trizk.jute.codes import OpCode
from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE
from trizk.testing.probes import handshake_bytes

DEADLINE = 20.0


@pytest.mark.parametrize("limit", [10, 100])
def test_global_outstanding_limit_bounds_requests_in_process(tmp_path: Path, limit: int) -> None:
    # 100: above a turn's FRAME_BUDGET, so a connection fed again when its throttle ends (by a
    # commit, outside the poller's pass) stops at the budget with input left and waits for a
    # turn: the poller must take it without any socket becoming ready
    srv = ThreadedServer(make_config(tmp_path, globalOutstandingLimit=limit)).start()
    try:
        c = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
        assert c.connect() is not None
        front = srv.server.core  # type: ignore[union-attr]
        n = 3000
        burst = bytearray()
        acl = tuple(OPEN_ACL_UNSAFE)
        for i in range(n):
            body = R.RequestHeader(i + 1, OpCode.CREATE).encode()
            body += R.CreateRequest(f"/n{i}", b"x" * 20, acl, 0).encode()
            burst += struct.pack(">i", len(body)) + body
        samples: list[int] = []
        done = threading.Event()

        def sample() -> None:
            deadline = time.monotonic() + DEADLINE
            while not done.is_set() and time.monotonic() < deadline:
                samples.append(srv.call(lambda: front.in_process))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        c.send_raw(bytes(burst))
        got = []
        for i in range(n):
            _events, reply = c.read_until_reply(i + 1)
            got.append((reply.xid, reply.err))
        done.set()
        sampler.join(DEADLINE)
        assert got == [(i + 1, 0) for i in range(n)]
        assert len(samples) > 10
        assert max(samples) <= limit + 1, max(samples)
        assert srv.call(lambda: front.in_process) == 0
        c.close()
    finally:
        srv.stop()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """True if the server closes ``sock`` (EOF or reset) within ``seconds``."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_connections_without_a_session_are_closed(tmp_path: Path) -> None:
    srv = ThreadedServer(make_config(tmp_path, **{"nio.sessionlessCnxnTimeout": "300"})).start()
    zk = KazooClient(hosts=srv.hosts, timeout=10)
    zk.start(timeout=10)
    try:
        silent = socket.create_connection(("127.0.0.1", srv.port))
        half = socket.create_connection(("127.0.0.1", srv.port))
        half.sendall(b"\x00\x00")  # half a frame length, then nothing
        try:
            t0 = time.monotonic()
            assert _closed_within(silent, 5.0)
            assert _closed_within(half, 5.0)
            # expired in the buckets of the sessionless timeout: 300..600 ms after the connect
            assert time.monotonic() - t0 < 3.0
        finally:
            silent.close()
            half.close()
        # a session that pings is not touched
        zk.create("/still-here", b"1")
        assert zk.get("/still-here")[0] == b"1"
    finally:
        zk.stop()
        zk.close()
        srv.stop()


def test_handshake_waiting_for_its_commit_is_not_sessionless(tmp_path: Path) -> None:
    srv = ThreadedServer(make_config(tmp_path, **{"nio.sessionlessCnxnTimeout": "300"})).start()
    pers = srv.server.persistence  # type: ignore[union-attr]
    held: list[Any] = []
    propose = pers.propose

    def hold_create_session(p: Any) -> None:
        if p.hdr.type == OpCode.CREATESESSION:
            held.append(p)
        else:
            propose(p)

    srv.call(setattr, pers, "propose", hold_create_session)
    s = socket.create_connection(("127.0.0.1", srv.port))
    try:
        s.sendall(handshake_bytes(30000))
        # three sessionless intervals pass while the createSession waits: still open
        assert not _closed_within(s, 1.0)
        assert srv.call(lambda: len(held)) == 1

        def release() -> None:
            pers.propose = propose
            for p in held:
                propose(p)

        srv.call(release)
        s.settimeout(DEADLINE)
        head = s.recv(4)
        assert len(head) == 4 and struct.unpack(">i", head)[0] in (36, 37)  # ConnectResponse
    finally:
        s.close()
        srv.stop()
