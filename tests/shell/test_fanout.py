"""Floods and fan-outs at a bounded scale (the issue's full scale: compat/bench/hostile.py).

* A flood of 2,000 connections from one address with ``maxClientCnxns=1500``: the first 1,500
  are kept, each one past the limit is closed at once ("Too many connections from /127.0.0.1"),
  a bystander session on another address (127.0.0.2) is answered throughout, and when the
  flood's sockets close the server is back to the bystander alone and accepts again.
* 100,000 watches on one session, then one write triggers exactly one of them; the rest stay
  registered until the session closes, which drops them all (``wchs``).
* A multi of 10,000 creates is applied whole; one of 10,000 ops whose last op fails changes
  nothing.

The biggest frame allowed and one byte over are a compat scenario, compared with ZooKeeper
(``biggest_frame_and_one_byte_over`` in compat/scenarios/load_bounds.json).
"""

from __future__ import annotations

import selectors
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ThreadedServer, make_config
from trizk.compat.oracle.rawclient import Event, RawClient, Reply
from trizk.jute import records as R
from trizk.jute.codes import Code, EventType, OpCode
from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE
from trizk.testing.probes import ask

DEADLINE = 30.0
_LEN = struct.Struct(">i")


def _fourlw(port: int, word: bytes) -> str:
    return ask(port, word, DEADLINE).decode()


def _alive_connections(port: int) -> int:
    for line in _fourlw(port, b"mntr").splitlines():
        if line.startswith("zk_num_alive_connections"):
            return int(line.split()[1])
    raise AssertionError("no zk_num_alive_connections in mntr")


def _frames(xid0: int, op: int, bodies: list[bytes]) -> bytes:
    out = bytearray()
    for i, body in enumerate(bodies):
        payload = R.RequestHeader(xid0 + i, op).encode() + body
        out += _LEN.pack(len(payload)) + payload
    return bytes(out)


def test_connection_flood_bounded_per_address(tmp_path: Path) -> None:
    limit, flood = 1500, 2000
    cfg = make_config(tmp_path, maxClientCnxns=limit, **{"nio.sessionlessCnxnTimeout": "120000"})
    srv = ThreadedServer(cfg).start()
    by = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE, source="127.0.0.2")
    socks: list[socket.socket] = []
    try:
        assert by.connect() is not None
        _, r = by.read_until_reply(
            by.send(OpCode.CREATE, R.CreateRequest("/by", b"b", tuple(OPEN_ACL_UNSAFE), 0))
        )
        assert r.err == 0
        lat: list[float] = []
        errors: list[str] = []
        done = threading.Event()

        def probe() -> None:
            end = time.monotonic() + DEADLINE
            while not done.is_set() and time.monotonic() < end:
                t0 = time.monotonic()
                try:
                    _, rep = by.read_until_reply(
                        by.send(OpCode.GETDATA, R.GetDataRequest("/by", False))
                    )
                except Exception as e:  # any failure is the finding
                    errors.append(repr(e))
                    return
                if rep.err != 0:
                    errors.append(f"err {rep.err}")
                lat.append(time.monotonic() - t0)

        t = threading.Thread(target=probe, daemon=True)
        t.start()
        for _ in range(flood):
            socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=DEADLINE))
        # every connection past the limit is closed at once; the others are kept
        sel = selectors.DefaultSelector()
        for s in socks:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        closed: set[socket.socket] = set()
        end = time.monotonic() + DEADLINE
        while len(closed) < flood - limit and time.monotonic() < end:
            for key, _ in sel.select(timeout=1.0):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                try:
                    data = s.recv(16)
                except ConnectionResetError:
                    data = b""
                assert data == b"", "the server wrote to a connection without a handshake"
                sel.unregister(s)
                closed.add(s)
        assert len(closed) == flood - limit
        assert not sel.select(timeout=0.2)  # the 1,500 kept: nothing more closed
        sel.close()
        done.set()
        t.join(DEADLINE)
        assert not errors, errors
        assert len(lat) >= 10 and max(lat) < 5.0, (len(lat), max(lat, default=0))
        for s in socks:
            s.close()
        socks.clear()
        end = time.monotonic() + DEADLINE
        alive = _alive_connections(srv.port)
        while alive > 2 and time.monotonic() < end:  # the bystander and this mntr
            alive = _alive_connections(srv.port)
        assert alive <= 2
        again = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
        assert again.connect() is not None  # accepted again from the flooding address
        again.close_session()
        _, rep = by.read_until_reply(by.send(OpCode.GETDATA, R.GetDataRequest("/by", False)))
        assert rep.err == 0
    finally:
        for s in socks:
            s.close()
        by.close()
        srv.stop()


@pytest.mark.slow
def test_100k_watches_one_trigger(tmp_path: Path) -> None:
    n, batch = 100_000, 5_000
    srv = ThreadedServer(make_config(tmp_path)).start()
    a = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
    b = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
    try:
        assert a.connect() is not None and b.connect() is not None
        acl = tuple(OPEN_ACL_UNSAFE)
        _, r = b.read_until_reply(b.send(OpCode.CREATE, R.CreateRequest("/w", b"", acl, 0)))
        assert r.err == 0
        for base in range(0, n, batch):
            bodies = [R.ExistsRequest(f"/w/{base + i}", True).encode() for i in range(batch)]
            a.send_raw(_frames(1, OpCode.EXISTS, bodies))
            for i in range(batch):
                p = a.read_packet()
                assert isinstance(p, Reply) and p.xid == i + 1 and p.err == Code.NONODE
        assert "Total watches:100000" in _fourlw(srv.port, b"wchs")
        target = "/w/77777"
        _, r = b.read_until_reply(b.send(OpCode.CREATE, R.CreateRequest(target, b"", acl, 0)))
        assert r.err == 0
        before, _pong = a.read_until_reply(a.ping())
        assert len(before) == 1 and isinstance(before[0], Event)
        ev = before[0].event
        assert ev is not None and ev.type == EventType.NODECREATED and ev.path == target
        assert f"Total watches:{n - 1}" in _fourlw(srv.port, b"wchs")
        assert a.close_session() is not None
        assert "Total watches:0" in _fourlw(srv.port, b"wchs")
    finally:
        a.close()
        b.close()
        srv.stop()


@pytest.mark.slow
def test_multi_of_10k_ops(tmp_path: Path) -> None:
    n = 10_000
    srv = ThreadedServer(make_config(tmp_path)).start()
    c = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
    try:
        assert c.connect() is not None
        acl = tuple(OPEN_ACL_UNSAFE)
        creates: list[tuple[int, R.Record]] = [
            (OpCode.CREATE, R.CreateRequest(f"/m{i}", b"x", acl, 0)) for i in range(n)
        ]
        _, r = c.read_until_reply(c.send_multi(creates))
        assert r.err == 0 and len(r.body) == n and all(x.err == 0 for x in r.body)
        _, r = c.read_until_reply(
            c.send(OpCode.GETALLCHILDRENNUMBER, R.GetAllChildrenNumberRequest("/"))
        )
        total = r.body.totalNumber
        # all but the last succeed alone: the multi fails as a whole and changes nothing
        ops: list[tuple[int, R.Record]] = [
            (OpCode.CREATE, R.CreateRequest(f"/n{i}", b"x", acl, 0)) for i in range(n - 1)
        ]
        ops.append((OpCode.DELETE, R.DeleteRequest("/missing", -1)))
        _, r = c.read_until_reply(c.send_multi(ops))
        assert r.err == 0 and len(r.body) == n and r.body[-1].err == Code.NONODE
        _, r = c.read_until_reply(
            c.send(OpCode.GETALLCHILDRENNUMBER, R.GetAllChildrenNumberRequest("/"))
        )
        assert r.body.totalNumber == total
        _, r = c.read_until_reply(c.send(OpCode.EXISTS, R.ExistsRequest("/n0", False)))
        assert r.err == Code.NONODE
    finally:
        c.close()
        srv.stop()
