"""Containers, TTL nodes and the newer read/watch ops over real sockets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ThreadedServer, free_port
from tests.shell.test_server import DEADLINE, call, raw
from trizk.compat.oracle.rawclient import Event, RawClient
from trizk.jute import records as R
from trizk.jute.codes import Code, EventType, OpCode
from trizk.server.config.zoocfg import ServerConfig

ACL = (R.ACL(31, R.Id("world", "anyone")),)


@pytest.fixture
def reaping_server(tmp_path: Path) -> Iterator[ThreadedServer]:
    cfg = ServerConfig.create(
        tmp_path / "data",
        properties={"znode.container.checkIntervalMs": "50"},
        clientPort=free_port(),
        clientPortAddress="127.0.0.1",
        extendedTypesEnabled="true",
    )
    srv = ThreadedServer(cfg).start()
    yield srv
    srv.stop()


def wait_event(c: RawClient) -> Event:
    deadline = time.monotonic() + DEADLINE
    while True:
        p = c.read_packet(deadline)
        if isinstance(p, Event):
            return p


def test_container_is_reaped_after_its_last_child_goes(reaping_server: ThreadedServer) -> None:
    c = raw(reaping_server)
    try:
        _, rep = call(c, OpCode.CREATECONTAINER, R.CreateRequest("/c", b"", ACL, 4))
        assert rep.err == 0 and rep.body.path == "/c"
        assert rep.body.stat.ephemeralOwner == 0  # clients never see the container marker
        call(c, OpCode.CREATE, R.CreateRequest("/c/x", b"", ACL, 0))
        _, rep = call(c, OpCode.EXISTS, R.ExistsRequest("/c", True))
        assert rep.err == 0
        call(c, OpCode.DELETE, R.DeleteRequest("/c/x", -1))
        ev = wait_event(c)
        assert (ev.event.type, ev.event.path) == (EventType.NODEDELETED, "/c")
        # a container that never had a child stays (maxNeverUsedIntervalMs = 0)
        call(c, OpCode.CREATECONTAINER, R.CreateRequest("/unused", b"", ACL, 4))
        _, rep = call(c, OpCode.SYNC, R.SyncRequest("/"))
        _, rep = call(c, OpCode.EXISTS, R.ExistsRequest("/unused", False))
        assert rep.err == 0
    finally:
        c.close()


def test_ttl_node_expires(reaping_server: ThreadedServer) -> None:
    c = raw(reaping_server)
    try:
        _, rep = call(c, OpCode.CREATETTL, R.CreateTTLRequest("/t", b"", ACL, 5, 30))
        assert rep.err == 0 and rep.body.stat.ephemeralOwner == 0
        _, rep = call(c, OpCode.CREATETTL, R.CreateTTLRequest("/bad", b"", ACL, 5, 0))
        assert rep.err == Code.BADARGUMENTS
        _, rep = call(c, OpCode.CREATETTL, R.CreateTTLRequest("/bad", b"", ACL, 0, 10))
        assert rep.err == Code.BADARGUMENTS  # a TTL with a non-TTL mode
        call(c, OpCode.EXISTS, R.ExistsRequest("/t", True))
        ev = wait_event(c)
        assert (ev.event.type, ev.event.path) == (EventType.NODEDELETED, "/t")
    finally:
        c.close()


def test_ttl_needs_extended_types(trizk_server: ThreadedServer) -> None:
    c = raw(trizk_server)
    try:
        _, rep = call(c, OpCode.CREATETTL, R.CreateTTLRequest("/t", b"", ACL, 5, 1000))
        assert rep.err == Code.UNIMPLEMENTED
    finally:
        c.close()


def test_persistent_recursive_watch_and_remove(trizk_server: ThreadedServer) -> None:
    c = raw(trizk_server)
    w = raw(trizk_server)
    try:
        _, rep = call(w, OpCode.ADDWATCH, R.AddWatchRequest("/r", 1))
        assert rep.err == 0
        call(c, OpCode.CREATE, R.CreateRequest("/r", b"", ACL, 0))
        call(c, OpCode.CREATE, R.CreateRequest("/r/a", b"", ACL, 0))
        call(c, OpCode.SETDATA, R.SetDataRequest("/r/a", b"1", -1))
        got = [wait_event(w) for _ in range(3)]
        # recursive watches get no NodeChildrenChanged and are not consumed
        assert [(e.event.type, e.event.path) for e in got] == [
            (EventType.NODECREATED, "/r"),
            (EventType.NODECREATED, "/r/a"),
            (EventType.NODEDATACHANGED, "/r/a"),
        ]
        _, rep = call(w, OpCode.CHECKWATCHES, R.CheckWatchesRequest("/nope", 3))
        assert rep.err == Code.NOWATCHER
        _, rep = call(w, OpCode.GETDATA, R.GetDataRequest("/r/a", True))
        _, rep = call(w, OpCode.REMOVEWATCHES, R.RemoveWatchesRequest("/r/a", 2))
        assert rep.err == 0
        _, rep = call(w, OpCode.REMOVEWATCHES, R.RemoveWatchesRequest("/r/a", 2))
        assert rep.err == Code.NOWATCHER
    finally:
        c.close()
        w.close()


def test_ephemerals_children_number_and_multiread(trizk_server: ThreadedServer) -> None:
    c = raw(trizk_server)
    try:
        call(c, OpCode.CREATE, R.CreateRequest("/x", b"d", ACL, 0))
        call(c, OpCode.CREATE, R.CreateRequest("/x/e1", b"", ACL, 1))
        call(c, OpCode.CREATE, R.CreateRequest("/x/y", b"", ACL, 0))
        call(c, OpCode.CREATE, R.CreateRequest("/x/y/z", b"", ACL, 0))
        _, rep = call(c, OpCode.GETEPHEMERALS, R.GetEphemeralsRequest("/x"))
        assert rep.body.ephemerals == ("/x/e1",)
        _, rep = call(c, OpCode.GETALLCHILDRENNUMBER, R.GetAllChildrenNumberRequest("/x"))
        assert rep.body.totalNumber == 3
        xid = c.send_multi(
            [
                (OpCode.GETDATA, R.GetDataRequest("/x", False)),
                (OpCode.GETCHILDREN, R.GetChildrenRequest("/missing", False)),
            ],
            read=True,
        )
        _, rep = c.read_until_reply(xid)
        assert rep.err == 0
        assert rep.body[0].body.data == b"d"
        assert (rep.body[1].type, rep.body[1].err) == (-1, Code.NONODE)
    finally:
        c.close()
