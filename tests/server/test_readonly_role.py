"""The read-only role without sockets (``ReadOnlyZooKeeperServer``), frame by frame.

What ZooKeeper 3.8.0 answered in the same situations (a member of a 3-member ensemble with
``-Dreadonlymode.enabled=true`` after its two peers stopped; raw frames captured with and
without ``localSessionsEnabled``) is pinned here on the pure role, whose front end the
real-socket tests (tests/shell/test_readonly.py) and the oracle comparison
(tests/compat/test_readonly.py) run too:

* a ConnectRequest whose readOnly byte is false, or missing (an "old" client), is closed
  unanswered; so is a reconnect of a global session (one the replica holds);
* a new session is local with ``localSessionsEnabled`` (ConnectResponse, readOnly byte true);
  without, the client gets a bare ReplyHeader (xid 0, the last zxid, NOTREADONLY) and the
  connection stays open, unread;
* every write and sync is answered NOTREADONLY (last zxid, no body) in session order; reads
  are answered; a local session's closeSession ends it.
"""

from __future__ import annotations

import struct

from trizk.jute import records as r
from trizk.jute.codes import Code, OpCode
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.frontend.connection import ClientConnection
from trizk.server.roles.factory import RoleFactory
from trizk.server.roles.readonly import ReadOnly
from trizk.server.writes.sessions import generate_password
from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE, DataTree
from trizk.storage.tree.replica import Replica

WALL = 1_700_000_000_000
ZXID = (1 << 32) + 7
#: a session created through the quorum (in the replica's session table)
GLOBAL = 0x0200000000000001


def role(local_sessions: bool) -> ReadOnly:
    replica = Replica(DataTree())
    replica.apply(
        r.TxnHeader(GLOBAL, 0, ZXID - 1, WALL, OpCode.CREATESESSION), r.CreateSessionTxn(9000)
    )
    replica.apply(
        r.TxnHeader(GLOBAL, 1, ZXID, WALL, OpCode.CREATE),
        r.CreateTxn("/a", b"x", tuple(OPEN_ACL_UNSAFE), False, 1),
    )
    roles = RoleFactory(CoreConfig(tick_time=200, server_id=3), replica)
    ro = roles.read_only(local_sessions, now=0, wall=WALL)
    assert ro.name == "read-only" and ro.sequencer is None and ro.front.serving
    return ro


_ids = iter(range(1, 1_000_000))


def connect(
    ro: ReadOnly, read_only: bool | None = True, sid: int = 0, now: int = 0
) -> ClientConnection:
    c = ClientConnection(next(_ids), ("127.0.0.1", 40000), 0xFFFFF)
    ro.front.connection_made(c)
    pw = generate_password(sid) if sid else bytes(16)
    body = r.ConnectRequest(0, 0, 10_000, sid, pw).encode()
    if read_only is not None:
        body += b"\x01" if read_only else b"\x00"
    send(ro, c, body, now)
    return c


def send(ro: ReadOnly, c: ClientConnection, body: bytes, now: int = 0) -> None:
    ro.front.data_received(c, struct.pack(">i", len(body)) + body, now, WALL + now)


def request(ro: ReadOnly, c: ClientConnection, xid: int, op: int, rec: r.Record | None) -> None:
    send(ro, c, r.RequestHeader(xid, op).encode() + (rec.encode() if rec else b""))


def frames(c: ClientConnection) -> list[bytes]:
    data = c.take_output()
    out = []
    while data:
        (n,) = struct.unpack_from(">i", data)
        out.append(data[4 : 4 + n])
        data = data[4 + n :]
    return out


def test_only_read_only_clients_are_served() -> None:
    ro = role(local_sessions=True)
    for flag in (False, None):  # readOnly false, and an old client without the byte
        c = connect(ro, flag)
        assert c.closed and frames(c) == []
    c = connect(ro)
    (rsp,) = frames(c)
    got, pos = r.ConnectResponse.decode_from(rsp, 0)
    assert rsp[pos:] == b"\x01"  # readOnly: true
    # negotiated as anywhere (tickTime 200: at most 4 s); a local session of member 3
    assert got.timeOut == 4000 and got.sessionId >> 56 == 3
    assert not c.closed


def test_writes_and_sync_are_answered_not_read_only_in_order_with_reads() -> None:
    ro = role(local_sessions=True)
    c = connect(ro)
    frames(c)
    request(ro, c, 1, OpCode.GETDATA, r.GetDataRequest("/a", False))
    request(ro, c, 2, OpCode.CREATE, r.CreateRequest("/b", b"", tuple(OPEN_ACL_UNSAFE), 0))
    request(ro, c, 3, OpCode.SETDATA, r.SetDataRequest("/a", b"y", -1))
    request(ro, c, 4, OpCode.DELETE, r.DeleteRequest("/a", -1))
    request(ro, c, 5, OpCode.SYNC, r.SyncRequest("/"))
    request(ro, c, 6, OpCode.SETACL, r.SetACLRequest("/a", tuple(OPEN_ACL_UNSAFE), -1))
    request(ro, c, 7, OpCode.EXISTS, r.ExistsRequest("/a", False))
    out = frames(c)
    heads = [struct.unpack_from(">iqi", f) for f in out]
    assert [(x, e) for x, _z, e in heads] == [
        (1, 0),
        *((x, Code.NOTREADONLY) for x in (2, 3, 4, 5, 6)),
        (7, 0),
    ]
    assert all(z == ZXID for _x, z, _e in heads)
    # refusals carry no body
    assert all(len(f) == 16 for f in out[1:6])
    assert not c.closed
    assert ro.replica.tree.get("/b") is None and ro.replica.last_zxid == ZXID


def test_a_local_session_closes_and_a_global_one_cannot_reconnect() -> None:
    ro = role(local_sessions=True)
    c = connect(ro)
    (rsp,) = frames(c)
    sid = r.ConnectResponse.decode_from(rsp, 0)[0].sessionId
    # a reconnect of the live local session is valid
    c2 = connect(ro, sid=sid, now=100)
    (rsp2,) = frames(c2)
    assert r.ConnectResponse.decode_from(rsp2, 0)[0].sessionId == sid
    assert c.closed  # the session's previous connection
    request(ro, c2, 1, OpCode.CLOSESESSION, None)
    (closed,) = frames(c2)
    assert struct.unpack_from(">iqi", closed) == (1, ZXID, 0) and c2.closed
    # once closed, a reconnect is invalid: timeout 0, session 0, then closed
    c3 = connect(ro, sid=sid, now=200)
    (rsp3,) = frames(c3)
    assert r.ConnectResponse.decode_from(rsp3, 0)[0].sessionId == 0 and c3.closed
    # a global session is refused without an answer (validateSession)
    g = connect(ro, sid=GLOBAL)
    assert g.closed and frames(g) == []


def test_local_sessions_expire_after_their_timeout() -> None:
    ro = role(local_sessions=True)
    c = connect(ro)
    sid = r.ConnectResponse.decode_from(frames(c)[0], 0)[0].sessionId
    ro.front.connection_lost(c)
    late = connect(ro, sid=sid, now=4000 + 400)
    assert r.ConnectResponse.decode_from(frames(late)[0], 0)[0].sessionId == 0


def test_without_local_sessions_a_new_session_is_refused_not_read_only() -> None:
    ro = role(local_sessions=False)
    c = connect(ro)
    (reply,) = frames(c)
    # ReadOnlyRequestProcessor's answer to the createSession request (xid 0)
    assert reply == struct.pack(">iqi", 0, ZXID, Code.NOTREADONLY)
    # ZooKeeper leaves the connection open and reads no more of it
    assert not c.closed and c.throttled
    # a reconnect of a session that is not global is valid (touchSession takes any)
    other = 0x0300000000000042
    c2 = connect(ro, sid=other)
    got, _pos = r.ConnectResponse.decode_from(frames(c2)[0], 0)
    assert got.sessionId == other and not c2.closed
    # ... whose closeSession is not local: refused too
    request(ro, c2, 1, OpCode.CLOSESESSION, None)
    assert struct.unpack_from(">iqi", frames(c2)[0]) == (1, ZXID, Code.NOTREADONLY)
    assert not c2.closed
