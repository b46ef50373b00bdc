"""trizk over real sockets: kazoo for the client's view, the raw client for exact bytes/order.

Expected values are what Apache ZooKeeper 3.8.0 answers (checked against the real server; the
compat suite re-checks them side by side)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.protocol.states import EventType as KEventType

from tests.conftest import ThreadedServer
from trizk.compat.oracle.rawclient import ConnectionClosed, Event, RawClient, Reply
from trizk.jute import records as R
from trizk.jute.codes import Code, EventType, OpCode

DEADLINE = 10.0


def kazoo(srv: ThreadedServer, **kw: object) -> KazooClient:
    zk = KazooClient(hosts=srv.hosts, timeout=10, **kw)  # type: ignore[arg-type]
    zk.start(timeout=10)
    return zk


def raw(srv: ThreadedServer, **kw: object) -> RawClient:
    c = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
    resp = c.connect(**kw)  # type: ignore[arg-type]
    assert resp is not None and resp.sessionId != 0
    return c


def call(c: RawClient, op: int, rec: R.Record | None) -> tuple[list[object], Reply]:
    xid = c.send(op, rec)
    return c.read_until_reply(xid)  # type: ignore[return-value]


# ---------------------------------------------------------------------------- initial tree


def test_initial_tree_matches_zookeeper(trizk_server: ThreadedServer) -> None:
    zk = kazoo(trizk_server)
    try:
        data, st = zk.get("/")
        assert data == b"" and st.cversion == -1 and st.numChildren == 1 and st.czxid == 0
        assert zk.get_children("/") == ["zookeeper"]
        _, st = zk.get("/zookeeper")
        assert st.cversion == -2 and st.numChildren == 2
        assert zk.get_children("/zookeeper") == ["config", "quota"]
        acl, st = zk.get_acls("/zookeeper/config")
        assert [(a.perms, a.id.scheme, a.id.id) for a in acl] == [(1, "world", "anyone")]
        assert st.aversion == -1
    finally:
        zk.stop()


# ---------------------------------------------------------------------------- operations


def test_crud_versions_and_errors(trizk_server: ThreadedServer) -> None:
    zk = kazoo(trizk_server)
    try:
        assert zk.create("/a", b"x") == "/a"
        with pytest.raises(NodeExistsError):
            zk.create("/a")
        with pytest.raises(NoNodeError):
            zk.create("/missing/child")
        data, st = zk.get("/a")
        assert data == b"x" and st.version == 0 and st.dataLength == 1
        st = zk.set("/a", b"yy", version=0)
        assert st.version == 1 and st.dataLength == 2 and st.mzxid > st.czxid
        with pytest.raises(BadVersionError):
            zk.set("/a", b"z", version=0)
        zk.create("/a/b")
        with pytest.raises(NotEmptyError):
            zk.delete("/a")
        with pytest.raises(BadVersionError):
            zk.delete("/a/b", version=3)
        zk.delete("/a/b", version=0)
        zk.delete("/a")
        assert zk.exists("/a") is None
        with pytest.raises(BadArgumentsError):
            zk.delete("/zookeeper")
        zk.create("/e", ephemeral=True)
        with pytest.raises(NoChildrenForEphemeralsError):
            zk.create("/e/c")
    finally:
        zk.stop()


def test_sequential_suffix_uses_stored_cversion(trizk_server: ThreadedServer) -> None:
    zk = kazoo(trizk_server)
    try:
        zk.create("/q")
        assert zk.create("/q/", sequence=True) == "/q/0000000000"
        assert zk.create("/q/x", sequence=True) == "/q/x0000000001"
        zk.delete("/q/x0000000001")
        assert zk.exists("/q").cversion == 3  # 2 creates * 2 - 1 child
        # the suffix counts creates only (ZooKeeper: 2, not 3)
        assert zk.create("/q/y", sequence=True, ephemeral=True) == "/q/y0000000002"
    finally:
        zk.stop()


def test_children_in_java_hashset_order(trizk_server: ThreadedServer) -> None:
    zk = kazoo(trizk_server)
    try:
        for n in ["b", "a", "c", "zz", "x1", "x2", "node10", "node2"]:
            zk.create("/p/" + n, makepath=True)
        # Order returned by Apache ZooKeeper 3.8.0 for the same inserts.
        assert zk.get_children("/p") == ["zz", "a", "node10", "b", "node2", "c", "x1", "x2"]
    finally:
        zk.stop()


def test_null_and_empty_data_differ(trizk_server: ThreadedServer) -> None:
    c = raw(trizk_server)
    try:
        acl = (R.ACL(31, R.Id("world", "anyone")),)
        _, rep = call(c, OpCode.CREATE, R.CreateRequest("/n", None, acl, 0))
        assert rep.err == 0
        _, rep = call(c, OpCode.CREATE, R.CreateRequest("/e", b"", acl, 0))
        assert rep.err == 0
        _, rep = call(c, OpCode.GETDATA, R.GetDataRequest("/n", False))
        assert rep.body.data is None
        _, rep = call(c, OpCode.GETDATA, R.GetDataRequest("/e", False))
        assert rep.body.data == b""
    finally:
        c.close()


def test_multi_success_and_failure(trizk_server: ThreadedServer) -> None:
    zk = kazoo(trizk_server)
    try:
        t = zk.transaction()
        t.create("/m1", b"1")
        t.create("/m2", b"2")
        t.set_data("/m1", b"11")
        assert t.commit()[:2] == ["/m1", "/m2"]
        t = zk.transaction()
        t.create("/m3")
        t.check("/m1", 5)
        t.delete("/m2")
        res = t.commit()
        # ops before the failing one report OK (0), the failing one its error, the rest
        # RUNTIMEINCONSISTENCY; nothing was applied.
        assert [type(x).__name__ for x in res] == [
            "RolledBackError",
            "BadVersionError",
            "RuntimeInconsistency",
        ]
        assert zk.exists("/m3") is None and zk.exists("/m2") is not None
    finally:
        zk.stop()


def test_failed_write_consumes_a_zxid(trizk_server: ThreadedServer) -> None:
    c = raw(trizk_server)
    try:
        acl = (R.ACL(31, R.Id("world", "anyone")),)
        _, ok = call(c, OpCode.CREATE, R.CreateRequest("/z", None, acl, 0))
        _, bad = call(c, OpCode.CREATE, R.CreateRequest("/z", None, acl, 0))
        assert bad.err == Code.NODEEXISTS and bad.zxid == ok.zxid + 1 and bad.body is None
        _, rd = call(c, OpCode.EXISTS, R.ExistsRequest("/nope", False))
        assert rd.err == Code.NONODE and rd.zxid == bad.zxid
    finally:
        c.close()


# ---------------------------------------------------------------------------- order


def test_replies_in_request_order_and_events_before_reply(trizk_server: ThreadedServer) -> None:
    watcher = raw(trizk_server)
    writer = raw(trizk_server)
    try:
        acl = (R.ACL(31, R.Id("world", "anyone")),)
        _, rep = call(watcher, OpCode.EXISTS, R.ExistsRequest("/w", True))
        assert rep.err == Code.NONODE
        # pipelined: create, read, set, read from one session, all sent before reading
        xs = [
            writer.send(OpCode.CREATE, R.CreateRequest("/w", b"0", acl, 0)),
            writer.send(OpCode.GETDATA, R.GetDataRequest("/w", True)),
            writer.send(OpCode.SETDATA, R.SetDataRequest("/w", b"1", -1)),
            writer.send(OpCode.GETDATA, R.GetDataRequest("/w", False)),
        ]
        got = [writer.read_packet(time.monotonic() + DEADLINE) for _ in range(5)]
        # the writer's own data watch (set by the 2nd request) fires before the setData reply
        assert isinstance(got[2], Event) and got[2].event.type == EventType.NODEDATACHANGED
        replies = [p for p in got if isinstance(p, Reply)]
        assert [p.xid for p in replies] == xs
        assert replies[1].body.data == b"0" and replies[3].body.data == b"1"
        ev = watcher.read_packet(time.monotonic() + DEADLINE)
        assert isinstance(ev, Event)
        assert (ev.event.type, ev.event.path) == (EventType.NODECREATED, "/w")
    finally:
        watcher.close()
        writer.close()


def test_delete_fires_one_event_per_watcher_then_parent_child_event(
    trizk_server: ThreadedServer,
) -> None:
    c = raw(trizk_server)
    try:
        acl = (R.ACL(31, R.Id("world", "anyone")),)
        call(c, OpCode.CREATE, R.CreateRequest("/d", None, acl, 0))
        call(c, OpCode.CREATE, R.CreateRequest("/d/x", None, acl, 0))
        call(c, OpCode.GETDATA, R.GetDataRequest("/d/x", True))
        call(c, OpCode.GETCHILDREN, R.GetChildrenRequest("/d/x", True))
        call(c, OpCode.GETCHILDREN, R.GetChildrenRequest("/d", True))
        before, rep = call(c, OpCode.DELETE, R.DeleteRequest("/d/x", -1))
        assert rep.err == 0
        assert [(e.event.type, e.event.path) for e in before] == [  # type: ignore[attr-defined]
            (EventType.NODEDELETED, "/d/x"),
            (EventType.NODECHILDRENCHANGED, "/d"),
        ]
    finally:
        c.close()


def test_kazoo_watches(trizk_server: ThreadedServer) -> None:
    a, b = kazoo(trizk_server), kazoo(trizk_server)
    try:
        import threading

        seen: list[tuple[str, str]] = []
        done = threading.Event()

        def w(event: object) -> None:
            seen.append((event.type, event.path))  # type: ignore[attr-defined]
            done.set()

        a.create("/kw", b"")
        a.get("/kw", watch=w)
        b.set("/kw", b"changed")
        assert done.wait(DEADLINE)
        assert seen == [(KEventType.CHANGED, "/kw")]
        done.clear()
        a.get_children("/kw", watch=w)
        b.create("/kw/c")
        assert done.wait(DEADLINE)
        assert seen[-1] == (KEventType.CHILD, "/kw")
    finally:
        a.stop()
        b.stop()


# ---------------------------------------------------------------------------- sessions


def test_reconnect_keeps_session_and_wrong_password_is_expired(
    trizk_server: ThreadedServer,
) -> None:
    c = raw(trizk_server, timeout_ms=10000)
    sid, pw = c.session_id, c.passwd
    acl = (R.ACL(31, R.Id("world", "anyone")),)
    call(c, OpCode.CREATE, R.CreateRequest("/eph", None, acl, 1))
    c.close()
    c2 = RawClient("127.0.0.1", trizk_server.port, io_timeout=DEADLINE)
    resp = c2.connect(session_id=sid, passwd=pw, timeout_ms=10000)
    assert resp is not None and resp.sessionId == sid and resp.timeOut == 10000
    _, rep = call(c2, OpCode.EXISTS, R.ExistsRequest("/eph", False))
    assert rep.err == 0 and rep.body.stat.ephemeralOwner == sid
    bad = RawClient("127.0.0.1", trizk_server.port, io_timeout=DEADLINE)
    resp = bad.connect(session_id=sid, passwd=b"\x01" * 16)
    assert resp is not None
    assert (resp.timeOut, resp.sessionId, resp.passwd) == (0, 0, bytes(16))
    assert bad.connect_tail == b"\x00"
    assert bad.read_raw_until_closed(time.monotonic() + DEADLINE)[1] == "closed"
    bad.close()
    c2.close()


def test_connect_without_readonly_byte_gets_reply_without_it(
    trizk_server: ThreadedServer,
) -> None:
    c = RawClient("127.0.0.1", trizk_server.port, io_timeout=DEADLINE)
    resp = c.connect(read_only=None, timeout_ms=1)
    assert resp is not None and c.connect_tail == b""
    assert resp.timeOut == 4000  # clamped to 2 * tickTime
    c.close()
    c = RawClient("127.0.0.1", trizk_server.port, io_timeout=DEADLINE)
    resp = c.connect(timeout_ms=10**9)
    assert resp is not None and resp.timeOut == 40000 and c.connect_tail == b"\x00"
    assert len(resp.passwd or b"") == 16
    c.close()


def test_session_expiry_deletes_ephemerals_and_fires_watches(
    fast_trizk_server: ThreadedServer,
) -> None:
    srv = fast_trizk_server
    owner = raw(srv, timeout_ms=200)
    observer = raw(srv, timeout_ms=20000)
    acl = (R.ACL(31, R.Id("world", "anyone")),)
    _, rep = call(owner, OpCode.CREATE, R.CreateRequest("/lease", None, acl, 1))
    assert rep.err == 0
    call(observer, OpCode.EXISTS, R.ExistsRequest("/lease", True))
    # the owner goes silent: no pings. The observer keeps pinging while it waits.
    deadline = time.monotonic() + DEADLINE
    event = None
    while event is None and time.monotonic() < deadline:
        observer.ping()
        try:
            p = observer.read_packet(time.monotonic() + 0.5)
        except Exception:
            continue
        if isinstance(p, Event):
            event = p
    assert event is not None, "no NodeDeleted event after the owner's session expired"
    assert (event.event.type, event.event.path) == (EventType.NODEDELETED, "/lease")
    # the expired session's connection was closed, and it cannot come back
    assert owner.read_raw_until_closed(time.monotonic() + DEADLINE)[1] == "closed"
    again = RawClient("127.0.0.1", srv.port, io_timeout=DEADLINE)
    resp = again.connect(session_id=owner.session_id, passwd=owner.passwd)
    assert resp is not None and resp.sessionId == 0 and resp.timeOut == 0
    again.close()
    observer.close()
    owner.close()


def test_close_session_deletes_ephemerals(trizk_server: ThreadedServer) -> None:
    a, b = kazoo(trizk_server), kazoo(trizk_server)
    try:
        a.create("/tmp1", ephemeral=True)
        a.create("/tmp2", ephemeral=True, sequence=True)
        a.stop()
        a.close()
        assert b.exists("/tmp1") is None and b.get_children("/") == ["zookeeper"]
    finally:
        b.stop()


# ---------------------------------------------------------------------------- bad input


def test_oversized_frame_closes_only_that_connection(trizk_server: ThreadedServer) -> None:
    good = kazoo(trizk_server)
    try:
        good.create("/keep", b"v")
        s = socket.create_connection(("127.0.0.1", trizk_server.port), timeout=DEADLINE)
        s.sendall(struct.pack(">i", 0xFFFFF + 1))
        assert s.recv(10) == b""  # closed without reading a payload
        s.close()
        assert good.get("/keep")[0] == b"v"
    finally:
        good.stop()


def test_bad_record_is_a_marshalling_error(trizk_server: ThreadedServer) -> None:
    c = raw(trizk_server)
    try:
        xid = c.send(OpCode.GETDATA, b"\x00\x00\x00\x10/ab")  # string length past the end
        _, rep = c.read_until_reply(xid)
        assert rep.err == Code.MARSHALLINGERROR
        _, rep = call(c, OpCode.EXISTS, R.ExistsRequest("/", False))
        assert rep.err == 0  # the session carries on
    finally:
        c.close()


def test_unknown_opcode_is_unimplemented_then_closed(trizk_server: ThreadedServer) -> None:
    c = raw(trizk_server)
    xid = c.send(77, b"")
    _, rep = c.read_until_reply(xid)
    assert (rep.err, rep.zxid) == (Code.UNIMPLEMENTED, -1)
    with pytest.raises(ConnectionClosed):
        c.read_packet(time.monotonic() + DEADLINE)
    c.close()


def test_four_letter_words(trizk_server: ThreadedServer) -> None:
    def word(w: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", trizk_server.port), timeout=DEADLINE) as s:
            s.sendall(w)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out

    assert word(b"ruok") == b"imok"
    assert b"Mode: standalone" in word(b"srvr")
    assert b"zookeeper.version=" in word(b"envi")
    assert b"zk_server_state\tstandalone" in word(b"mntr")
    zk = kazoo(trizk_server)
    try:
        assert zk.command(b"ruok") == "imok"
        assert zk.server_version()[:2] == (3, 9)  # the default release, 3.9.3
    finally:
        zk.stop()


def test_four_letter_word_whitelist(tmp_path: object) -> None:
    from tests.conftest import make_config

    srv = ThreadedServer(make_config(tmp_path, **{"4lw.commands.whitelist": "srvr"})).start()  # type: ignore[arg-type]
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=DEADLINE) as s:
            s.sendall(b"ruok")
            assert s.recv(1000) == b"ruok is not executed because it is not in the whitelist.\n"
    finally:
        srv.stop()


def test_set_watches_after_reconnect(trizk_server: ThreadedServer) -> None:
    """SetWatches (xid -8), as kazoo sends it on reconnect: what changed after relativeZxid
    fires at once (before the reply), the rest is registered and fires later."""
    a, b = raw(trizk_server), raw(trizk_server)
    try:
        acl = (R.ACL(31, R.Id("world", "anyone")),)
        call(a, OpCode.CREATE, R.CreateRequest("/sw", b"0", acl, 0))
        _, rep = call(a, OpCode.CREATE, R.CreateRequest("/steady", b"s", acl, 0))
        seen = rep.zxid
        call(b, OpCode.SETDATA, R.SetDataRequest("/sw", b"1", -1))
        call(b, OpCode.CREATE, R.CreateRequest("/later", None, acl, 0))  # root's pzxid > seen
        req = R.SetWatches(seen, ("/sw", "/steady", "/gone"), ("/nope", "/steady"), ("/",))
        xid = a.send(OpCode.SETWATCHES, req, xid=-8)
        before, rep = a.read_until_reply(xid)
        assert rep.err == 0 and rep.body is None
        assert [(e.event.type, e.event.path) for e in before] == [  # type: ignore[attr-defined]
            (EventType.NODEDATACHANGED, "/sw"),
            (EventType.NODEDELETED, "/gone"),
            (EventType.NODECREATED, "/steady"),
            (EventType.NODECHILDRENCHANGED, "/"),
        ]
        call(b, OpCode.SETDATA, R.SetDataRequest("/steady", b"t", -1))
        ev = a.read_packet(time.monotonic() + DEADLINE)
        assert isinstance(ev, Event)
        assert (ev.event.type, ev.event.path) == (EventType.NODEDATACHANGED, "/steady")
    finally:
        a.close()
        b.close()


def test_watch_needs_read_permission(trizk_server: ThreadedServer) -> None:
    """CVE-2024-23944 behaviour (Debian's 3.8.0-11+deb12u2, upstream 3.8.4): a watcher without
    READ on the node is not notified, and its one-time watch is consumed."""
    owner, other = raw(trizk_server), raw(trizk_server)
    try:
        owner.add_auth("digest", b"u:p")
        owner.read_packet(time.monotonic() + DEADLINE)
        only_u = (R.ACL(31, R.Id("digest", "u:Jq7wMyA/w2Vd5WIDAKdu4OIIFEQ=")),)  # u:p
        open_acl = (R.ACL(31, R.Id("world", "anyone")),)
        call(owner, OpCode.CREATE, R.CreateRequest("/sec", b"x", only_u, 0))
        call(other, OpCode.EXISTS, R.ExistsRequest("/sec", True))  # exists needs no READ
        call(other, OpCode.EXISTS, R.ExistsRequest("/pub", True))
        call(owner, OpCode.SETDATA, R.SetDataRequest("/sec", b"y", -1))
        call(owner, OpCode.CREATE, R.CreateRequest("/pub", b"", open_acl, 0))
        ev = other.read_packet(time.monotonic() + DEADLINE)
        assert isinstance(ev, Event)  # the first event it gets is /pub's: /sec's was withheld
        assert (ev.event.type, ev.event.path) == (EventType.NODECREATED, "/pub")
    finally:
        owner.close()
        other.close()


def test_crst_resets_every_connections_stats(trizk_server: ThreadedServer) -> None:
    def word(w: bytes) -> str:
        with socket.create_connection(("127.0.0.1", trizk_server.port), timeout=DEADLINE) as s:
            s.sendall(w)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out.decode()

    c = raw(trizk_server)  # a raw client never pings on its own: its counters stay put
    try:
        for _ in range(3):
            call(c, OpCode.EXISTS, R.ExistsRequest("/", False))
        sid = f"sid=0x{c.session_id:x}"
        [line] = [ln for ln in word(b"cons").splitlines() if sid in ln]
        assert "recved=4,sent=4" in line and "lcxid=0x3" in line and "avglat=" in line
        assert word(b"crst") == "Connection stats reset.\n"
        [line] = [ln for ln in word(b"cons").splitlines() if sid in ln]
        assert "recved=0,sent=0" in line and "minlat=0,avglat=0,maxlat=0" in line
    finally:
        c.close()
