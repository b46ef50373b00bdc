"""trizk.testing.Server: lifecycle and the test controls in both modes (in-process: inside the
server's loop; process: over the child's HTTP test controls), seen through kazoo."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from trizk.compat.oracle.rawclient import RawClient
from trizk.jute import records as R
from trizk.jute.codes import OpCode
from trizk.testing import Server

MODES = ["in-process", "process"]

WAIT = 10.0


def client(srv: Server, **kw: object) -> KazooClient:
    zk = KazooClient(hosts=srv.connect_string, timeout=10, **kw)  # type: ignore[arg-type]
    zk.start(timeout=WAIT)
    return zk


def create_raw(srv: Server, path: str, ttl: int | None) -> None:
    """A TTL node (``ttl``) or a container (None): this kazoo version creates neither."""
    raw = RawClient("127.0.0.1", srv.port)
    acl = (R.ACL(31, R.Id("world", "anyone")),)
    try:
        raw.connect()
        if ttl is None:
            xid = raw.send(OpCode.CREATECONTAINER, R.CreateRequest(path, b"", acl, 4))
        else:
            xid = raw.send(OpCode.CREATETTL, R.CreateTTLRequest(path, b"", acl, 5, ttl))
        _, reply = raw.read_until_reply(xid, time.monotonic() + WAIT)
        assert reply.err == 0
        raw.close_session(time.monotonic() + WAIT)
    finally:
        raw.close()


def states(zk: KazooClient) -> dict[KazooState, threading.Event]:
    seen = {s: threading.Event() for s in (KazooState.LOST, KazooState.SUSPENDED)}
    seen[KazooState.CONNECTED] = threading.Event()

    def listener(state: KazooState) -> None:
        seen[state].set()

    zk.add_listener(listener)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_lifecycle_restart_keeps_port_and_data(mode: str) -> None:
    with Server(mode=mode) as srv:
        root = srv.data_dir.parent
        port = srv.port
        assert port > 0
        zk = client(srv)
        try:
            zk.create("/kept", b"v1")
            srv.restart()
            assert srv.port == port
            assert zk.get("/kept")[0] == b"v1"  # kazoo reconnects on its own
            srv.kill()
            assert not srv.running
            srv.start()
            assert zk.get("/kept")[0] == b"v1"
            assert srv.dump()["tree"]["/kept"]["data"] == "v1"
        finally:
            zk.stop()
            zk.close()
    assert not srv.running
    assert not root.exists()


def test_nothing_left_when_start_fails() -> None:
    srv = Server(properties={"clientPortAddress": "256.0.0.1"}, start_timeout=5)
    with pytest.raises(Exception):  # noqa: B017 (whatever the bind error is)
        with srv:
            pass
    assert srv._root is None and not srv.running


@pytest.mark.parametrize("mode", MODES)
def test_expire_session_server_side(mode: str) -> None:
    with Server(mode=mode) as srv:
        zk = client(srv)
        other = client(srv)
        try:
            seen = states(zk)
            zk.create("/eph", b"", ephemeral=True)
            fired = threading.Event()
            other.exists("/eph", watch=lambda ev: fired.set())
            sid = zk.client_id[0]
            assert f"0x{sid:x}" in srv.dump()["sessions"]
            assert srv.dump()["watches"]["data"]["/eph"] == [f"0x{other.client_id[0]:x}"]
            assert srv.expire_session(sid)
            assert seen[KazooState.LOST].wait(WAIT)  # kazoo's state for EXPIRED_SESSION
            assert fired.wait(WAIT)
            assert other.exists("/eph") is None
            assert not srv.expire_session(sid)
        finally:
            for c in (zk, other):
                c.stop()
                c.close()


@pytest.mark.parametrize("mode", ["in-process"])  # process: test_async_server.py
def test_drop_connections_keeps_sessions(mode: str) -> None:
    with Server(mode=mode) as srv:
        zk = client(srv)
        try:
            seen = states(zk)
            sid = zk.client_id[0]
            zk.create("/eph", b"", ephemeral=True)
            assert srv.session_ids() == [sid]
            assert srv.drop_connections(sid + 1) == 0  # another session's: none
            assert srv.drop_connections(sid) == 1
            assert seen[KazooState.SUSPENDED].wait(WAIT)
            assert seen[KazooState.CONNECTED].wait(WAIT)
            assert zk.client_id[0] == sid
            assert zk.exists("/eph") is not None
        finally:
            zk.stop()
            zk.close()


@pytest.mark.parametrize("mode", ["in-process"])  # process: test_async_server.py
def test_advance_expires_sessions_without_sleeping(mode: str) -> None:
    with Server(mode=mode) as srv:
        zk = client(srv)
        try:
            seen = states(zk)
            zk.create("/eph", b"", ephemeral=True)
            srv.advance(60)
            assert seen[KazooState.LOST].wait(WAIT)
            assert "/eph" not in srv.dump()["tree"]
        finally:
            zk.stop()
            zk.close()


@pytest.mark.parametrize("mode", MODES)
def test_advance_reaps_ttl_nodes_and_containers(mode: str) -> None:
    with Server(mode=mode, properties={"extendedTypesEnabled": "true"}) as srv:
        zk = client(srv)
        try:
            create_raw(srv, "/ttl", 5000)
            create_raw(srv, "/box", None)
            zk.create("/box/child", b"")
            zk.delete("/box/child")
            srv.advance(1)
            assert zk.exists("/ttl") is not None
            # the container reaper looks every 60 s (znode.container.checkIntervalMs)
            srv.advance(61)
            zk2 = client(srv)  # zk's connection idled past its timeout on the server's clock
            try:
                for path in ("/ttl", "/box"):
                    ev = threading.Event()
                    if zk2.exists(path, watch=lambda e, ev=ev: ev.set()) is not None:
                        assert ev.wait(WAIT), path
                    with pytest.raises(NoNodeError):
                        zk2.get(path)
            finally:
                zk2.stop()
                zk2.close()
        finally:
            zk.stop()
            zk.close()


def test_load_and_dump_round_trip(tmp_path: Path) -> None:
    seed = {"/app/config": "x=1", "/app/bin": {"data_b64": "/wA="}, "/app/empty": None}
    with Server() as srv:
        assert srv.load(json.dumps(seed)) == 3
        tree = srv.dump()["tree"]
        assert tree["/app/config"]["data"] == "x=1"
        assert tree["/app/bin"]["data_b64"] == "/wA="
        assert "/app" in tree
        exported = srv.dump()
    with Server(mode="process") as srv2:
        assert srv2.load(exported) == 4  # /app included, / and /zookeeper skipped
        assert srv2.dump()["tree"]["/app/bin"]["data_b64"] == "/wA="


def test_connect_string_before_start_raises() -> None:
    from trizk.testing import ServerError

    srv = Server()
    with pytest.raises(ServerError, match="after start"):
        _ = srv.connect_string
    with srv:
        assert srv.connect_string == f"127.0.0.1:{srv.port}"


def test_no_per_address_connection_limit() -> None:
    """ZooKeeper's default maxClientCnxns (60 per address) is off on a test server, as in
    kazoo's and Curator's harnesses: a suite's clients all come from 127.0.0.1."""
    with Server() as srv:
        clients = [KazooClient(hosts=srv.connect_string, timeout=10) for _ in range(65)]
        try:
            for zk in clients:
                zk.start(timeout=WAIT)
            assert all(zk.connected for zk in clients)
        finally:
            for zk in clients:
                zk.stop()
                zk.close()
