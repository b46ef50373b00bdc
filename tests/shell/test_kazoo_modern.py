"""ZooKeeper 3.6+ features through kazoo, over real sockets.

What kazoo gives and what it does not
-------------------------------------
kazoo 2.11.0 (the newest release, and python-zk/kazoo master) has ``TreeCache`` and
``Transaction`` but no ``add_watch``/``AddWatchMode``, no ``remove_watches``, no
container/TTL ``create`` flags, no ``get_ephemerals``/``get_all_children_number``, and it sends
no SetWatches on reconnect (persistent-watch support, python-zk/kazoo PR #715, was never
merged). So the 3.6+ requests are driven here through kazoo's own transport: small request
objects (``type``, ``serialize()``, ``deserialize()`` -- the interface of
``kazoo.protocol.serialization``), written independently of trizk's codec and queued with
``KazooClient._call``. kazoo then owns the socket, xids, the reply matching and the reconnect
loop, exactly as for its own requests. Each reply body is checked to be exactly what ZooKeeper
sends (addWatch: ErrorResponse(0); removeWatches/checkWatches/setWatches2: header only).

Observing notifications
-----------------------
kazoo drops notifications it has no one-shot watcher for, so a ``Tap`` wraps the connection's
``_read_watch_event``: every WatchedEvent read from the socket is queued (type, state, path)
in wire order, then kazoo handles it as usual. Waits are ``queue.get`` with a deadline.

Determinism
-----------
* ZooKeeper sends a session every notification caused by a txn before the reply to any later
  request of that session, and triggers in zxid order. So after a session's own write returns,
  every notification caused by earlier txns (anyone's) is already in its Tap: ``fence`` ends a
  sequence with a write of our own and asserts nothing else arrived -- "no extra event" without
  waiting for a timeout.
* A connection loss is made with ``CuttableProxy``: a loopback relay kazoo connects through,
  which the test cuts (both sides shut down; new connections refused) and heals. Changes made
  while it is cut happen while the client is provably away.
* Every expected value was checked against Apache ZooKeeper 3.8 (Debian): run this module with
  ``TRIZK_KAZOO_ORACLE=zookeeper`` to point the same tests at a real ZooKeeper started by
  ``trizk.compat.procs.servers``. So the servers answer as 3.8.0 (:data:`RELEASE`, pinned:
  trizk's default is 3.9.3, which changed watch removal by type, ZOOKEEPER-4472, and a
  persistent watch beside a one-shot one, 4466; ``compat/scenarios/zookeeper39.json`` checks
  those against both releases).
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadArgumentsError,
    MarshallingError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NoWatcherError,
    UnimplementedError,
)
from kazoo.protocol.serialization import Create2, Watch
from kazoo.protocol.states import KazooState, ZnodeStat
from kazoo.recipe.cache import TreeCache, TreeEvent
from kazoo.security import OPEN_ACL_UNSAFE

from tests.conftest import ThreadedServer, make_config
from trizk.compat.procs import servers

DEADLINE = 10.0
ORACLE = os.environ.get("TRIZK_KAZOO_ORACLE", "") == "zookeeper"
#: the ZooKeeper release of the servers (trizk's ``trizk.zookeeperVersion``)
RELEASE = "3.8.0"
PINNED = {"trizk.zookeeperVersion": RELEASE}

# Watcher.Event.EventType / KeeperState / ZooDefs.AddWatchModes / WatcherType / CreateMode
CREATED, DELETED, CHANGED, CHILD = 1, 2, 3, 4
SYNC_CONNECTED = 3
PERSISTENT, PERSISTENT_RECURSIVE = 0, 1
W_CHILDREN, W_DATA, W_ANY = 1, 2, 3
M_CONTAINER, M_TTL, M_SEQ_TTL = 4, 5, 6
MAX_TTL = (1 << 40) - 1  # EphemeralType.TTL.maxValue()

_INT = struct.Struct("!i")
_LONG = struct.Struct("!q")
_STAT = struct.Struct("!qqqqiiiqiiq")


# ---------------------------------------------------------------------------- servers


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """host:port of a server with the default config (extended types off)."""
    if ORACLE:
        with servers.running("zookeeper", version=RELEASE) as zk:
            yield zk.address
        return
    srv = ThreadedServer(make_config(tmp_path, **PINNED)).start()
    yield srv.hosts
    srv.stop()


@pytest.fixture
def ext_server(tmp_path: Path) -> Iterator[str]:
    """host:port of a server with extendedTypesEnabled=true (TTL nodes)."""
    if ORACLE:
        with servers.running("zookeeper", {"extendedTypesEnabled": "true"}, version=RELEASE) as zk:
            yield zk.address
        return
    srv = ThreadedServer(make_config(tmp_path, extendedTypesEnabled="true", **PINNED)).start()
    yield srv.hosts
    srv.stop()


# ---------------------------------------------------------------------------- 3.6+ requests


def _ustring(s: str | None) -> bytes:
    if s is None:
        return _INT.pack(-1)
    b = s.encode()
    return _INT.pack(len(b)) + b


def _ustrings(items: Sequence[str]) -> bytes:
    return _INT.pack(len(items)) + b"".join(_ustring(s) for s in items)


def _acl(acl: Sequence[Any]) -> bytes:
    out = _INT.pack(len(acl))
    for a in acl:
        out += _INT.pack(a.perms) + _ustring(a.id.scheme) + _ustring(a.id.id)
    return out


def _read_ustring(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _INT.unpack_from(buf, pos)
    pos += 4
    return bytes(buf[pos : pos + n]).decode(), pos + n


def _no_body(name: str, buf: bytes, offset: int) -> None:
    # ZooKeeper's FinalRequestProcessor leaves rsp null for these: the reply is the header alone.
    if len(buf) != offset:
        raise AssertionError(f"{name} reply has a {len(buf) - offset}-byte body, expected none")


def _create2_response(buf: bytes, offset: int) -> tuple[str, ZnodeStat]:
    path, pos = _read_ustring(buf, offset)
    stat = ZnodeStat._make(_STAT.unpack_from(buf, pos))
    if len(buf) != pos + _STAT.size:
        raise AssertionError("trailing bytes after Create2Response")
    return path, stat


@dataclass(frozen=True)
class AddWatch:
    path: str
    mode: int
    type: ClassVar[int] = 106

    def serialize(self) -> bytes:
        return _ustring(self.path) + _INT.pack(self.mode)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> None:
        # FinalRequestProcessor answers addWatch with ErrorResponse(0): a 4-byte body.
        if len(buf) != offset + 4 or _INT.unpack_from(buf, offset)[0] != 0:
            raise AssertionError(f"addWatch reply body {bytes(buf[offset:])!r} != ErrorResponse(0)")


@dataclass(frozen=True)
class RemoveWatches:
    path: str
    watcher_type: int
    type: ClassVar[int] = 18

    def serialize(self) -> bytes:
        return _ustring(self.path) + _INT.pack(self.watcher_type)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> None:
        _no_body("removeWatches", buf, offset)


@dataclass(frozen=True)
class CheckWatches:
    path: str
    watcher_type: int
    type: ClassVar[int] = 17

    def serialize(self) -> bytes:
        return _ustring(self.path) + _INT.pack(self.watcher_type)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> None:
        _no_body("checkWatches", buf, offset)


@dataclass(frozen=True)
class CreateContainer:
    path: str
    data: bytes
    acl: Sequence[Any]
    flags: int = M_CONTAINER
    type: ClassVar[int] = 19

    def serialize(self) -> bytes:
        return (
            _ustring(self.path)
            + _INT.pack(len(self.data))
            + self.data
            + _acl(self.acl)
            + _INT.pack(self.flags)
        )

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> tuple[str, ZnodeStat]:
        return _create2_response(buf, offset)


@dataclass(frozen=True)
class CreateTTL:
    path: str
    data: bytes
    acl: Sequence[Any]
    flags: int
    ttl: int
    type: ClassVar[int] = 21

    def serialize(self) -> bytes:
        return (
            _ustring(self.path)
            + _INT.pack(len(self.data))
            + self.data
            + _acl(self.acl)
            + _INT.pack(self.flags)
            + _LONG.pack(self.ttl)
        )

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> tuple[str, ZnodeStat]:
        return _create2_response(buf, offset)


@dataclass(frozen=True)
class GetEphemerals:
    prefix: str
    type: ClassVar[int] = 103

    def serialize(self) -> bytes:
        return _ustring(self.prefix)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[str]:
        (n,) = _INT.unpack_from(buf, offset)
        pos, out = offset + 4, []
        for _ in range(n):
            s, pos = _read_ustring(buf, pos)
            out.append(s)
        if len(buf) != pos:
            raise AssertionError("trailing bytes after GetEphemeralsResponse")
        return out


@dataclass(frozen=True)
class GetAllChildrenNumber:
    path: str
    type: ClassVar[int] = 104

    def serialize(self) -> bytes:
        return _ustring(self.path)

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> int:
        if len(buf) != offset + 4:
            raise AssertionError("GetAllChildrenNumberResponse is not one int")
        return int(_INT.unpack_from(buf, offset)[0])


@dataclass(frozen=True)
class SetWatches:
    """SetWatches (101, three lists) or, with ``v2``, SetWatches2 (105, five lists): what the
    Java client sends first after a reconnect (ClientCnxn.primeConnection)."""

    relative_zxid: int
    data: Sequence[str] = ()
    exist: Sequence[str] = ()
    child: Sequence[str] = ()
    persistent: Sequence[str] = ()
    recursive: Sequence[str] = ()
    v2: bool = True

    @property
    def type(self) -> int:
        return 105 if self.v2 else 101

    def serialize(self) -> bytes:
        out = _LONG.pack(self.relative_zxid)
        out += _ustrings(self.data) + _ustrings(self.exist) + _ustrings(self.child)
        if self.v2:
            out += _ustrings(self.persistent) + _ustrings(self.recursive)
        elif self.persistent or self.recursive:
            raise ValueError("SetWatches (101) carries no persistent watches")
        return out

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> None:
        _no_body("setWatches", buf, offset)


def call(zk: KazooClient, request: Any) -> Any:
    """Send ``request`` through kazoo's connection and wait (bounded) for its result."""
    result = zk.handler.async_result()
    zk._call(request, result)
    return result.get(timeout=DEADLINE)


# ---------------------------------------------------------------------------- observing


Ev = tuple[int, str]


class Tap:
    """Every notification kazoo's connection reads, in wire order (see module docstring)."""

    def __init__(self, zk: KazooClient) -> None:
        self.events: queue.Queue[tuple[int, int, str]] = queue.Queue()
        conn = zk._connection
        original = conn._read_watch_event

        def tapped(buffer: bytes, offset: int) -> Any:
            watch, _ = Watch.deserialize(buffer, offset)
            self.events.put((watch.type, watch.state, watch.path))
            return original(buffer, offset)

        conn._read_watch_event = tapped

    def take(self, n: int) -> list[Ev]:
        out = []
        for i in range(n):
            try:
                typ, state, path = self.events.get(timeout=DEADLINE)
            except queue.Empty:
                raise AssertionError(f"only {i} of {n} notifications arrived: {out}") from None
            assert state == SYNC_CONNECTED, (typ, state, path)
            out.append((typ, path))
        return out

    def pending(self) -> list[Ev]:
        """What has already arrived (no waiting)."""
        out = []
        while True:
            try:
                typ, state, path = self.events.get_nowait()
            except queue.Empty:
                return out
            assert state == SYNC_CONNECTED, (typ, state, path)
            out.append((typ, path))

    def expect(self, *events: Ev) -> None:
        assert self.take(len(events)) == list(events)


def noop(_event: Any) -> None:
    pass


def fence(zk: KazooClient, tap: Tap, path: str) -> None:
    """Create ``path`` (watched) from this session; its NodeCreated must be the only
    notification still queued -- anything caused earlier would have come before it."""
    zk.exists(path, watch=noop)
    zk.create(path)
    assert tap.pending() == [(CREATED, path)]


class States:
    """kazoo connection-state transitions, as a queue (listeners run on kazoo's thread)."""

    def __init__(self, zk: KazooClient) -> None:
        self.q: queue.Queue[str] = queue.Queue()
        zk.add_listener(self.q.put)

    def expect(self, state: str) -> None:
        try:
            got = self.q.get(timeout=DEADLINE)
        except queue.Empty:
            raise AssertionError(f"kazoo never went {state}") from None
        assert got == state


class CuttableProxy:
    """A loopback TCP relay to ``upstream`` that a test can cut (every relayed connection is
    shut down both ways, and new ones are closed on accept) and heal."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.hosts = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._open = True
        self._closing = False
        self._live: list[socket.socket] = []
        self._all: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)
        self._acceptor.start()

    def _accept_loop(self) -> None:
        while True:
            try:
                down, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._closing:
                    down.close()
                    return
                if not self._open:
                    down.close()
                    continue
                try:
                    up = socket.create_connection(self._upstream, timeout=DEADLINE)
                except OSError:
                    down.close()
                    continue
                up.settimeout(None)
                self._live += [down, up]
                self._all += [down, up]
                for src, dst in ((down, up), (up, down)):
                    t = threading.Thread(target=self._pump, args=(src, dst), daemon=True)
                    self._threads.append(t)
                    t.start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            self._open = False
            live, self._live = self._live, []
        for s in live:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def heal(self) -> None:
        with self._lock:
            self._open = True

    def close(self) -> None:
        with self._lock:
            self._closing = True
        self.cut()
        with contextlib.suppress(OSError), socket.create_connection(self._listener.getsockname()):
            pass  # wakes accept(), which then sees _closing
        self._acceptor.join(DEADLINE)
        for t in self._threads:
            t.join(DEADLINE)
        for s in [*self._all, self._listener]:
            s.close()


@pytest.fixture
def kazoo() -> Iterator[Callable[..., tuple[KazooClient, Tap]]]:
    """Factory of started kazoo clients (with a Tap); all are stopped at teardown."""
    started: list[KazooClient] = []

    def connect(hosts: str, **kw: Any) -> tuple[KazooClient, Tap]:
        zk = KazooClient(hosts=hosts, timeout=10, **kw)
        tap = Tap(zk)
        zk.start(timeout=DEADLINE)
        started.append(zk)
        return zk, tap

    yield connect
    for zk in started:
        zk.stop()
        zk.close()


@pytest.fixture
def proxy(server: str) -> Iterator[CuttableProxy]:
    p = CuttableProxy(server)
    yield p
    p.close()


# kazoo retries a refused/dropped connection with backoff; keep it short so a healed proxy is
# found again quickly (this changes only how soon, never what is observed).
FAST_RECONNECT = {"max_tries": -1, "delay": 0.02, "backoff": 1, "max_jitter": 0.0}


# ---------------------------------------------------------------------------- persistent watches


def test_persistent_watch(server: str, kazoo: Any) -> None:
    """PERSISTENT: data + child events of the path itself, never consumed, not even by delete
    (WatchManager.triggerWatch keeps persistent watchers); nothing for grandchildren."""
    a, tap = kazoo(server)
    b, _ = kazoo(server)
    assert call(a, AddWatch("/p", PERSISTENT)) is None  # a watch on a missing node is fine
    b.create("/p", b"0")
    b.set("/p", b"1")
    b.create("/p/c")
    b.set("/p/c", b"x")  # a child's data: not the watched path
    b.create("/p/c/g")  # a grandchild: no NodeChildrenChanged for /p
    b.delete("/p/c", recursive=True)
    b.delete("/p")
    b.create("/p")
    tap.expect(
        (CREATED, "/p"),
        (CHANGED, "/p"),
        (CHILD, "/p"),
        (CHILD, "/p"),
        (DELETED, "/p"),  # once, though both the data and the child table hold the watch
        (CREATED, "/p"),
    )
    fence(a, tap, "/fence")


def test_persistent_recursive_watch(server: str, kazoo: Any) -> None:
    """PERSISTENT_RECURSIVE: every create/change/delete at or under the path, no
    NodeChildrenChanged; '/r' is a path prefix of '/rx' but not its ancestor."""
    a, tap = kazoo(server)
    b, _ = kazoo(server)
    call(a, AddWatch("/r", PERSISTENT_RECURSIVE))
    b.create("/r")
    b.create("/r/a")
    b.create("/r/a/b", b"0")
    b.set("/r/a/b", b"1")
    b.create("/rx")
    b.create("/rx/y")
    b.delete("/r/a/b")
    b.create("/r/e", ephemeral=True)
    b.stop()  # its ephemeral goes with the session: a NodeDeleted from the session close
    tap.expect(
        (CREATED, "/r"),
        (CREATED, "/r/a"),
        (CREATED, "/r/a/b"),
        (CHANGED, "/r/a/b"),
        (DELETED, "/r/a/b"),
        (CREATED, "/r/e"),
        (DELETED, "/r/e"),
    )
    a.set("/r", b"own")  # the session's own write notifies it too, before the reply
    assert tap.pending() == [(CHANGED, "/r")]
    fence(a, tap, "/fence")


def test_persistent_and_one_shot_watches_coexist(server: str, kazoo: Any) -> None:
    """A one-shot data watch and a recursive watch of the same session on one path: one
    notification per change (the session is one watcher), the one-shot consumed."""
    a, tap = kazoo(server)
    b, _ = kazoo(server)
    b.create("/s/n", b"0", makepath=True)
    call(a, AddWatch("/s", PERSISTENT_RECURSIVE))
    a.get("/s/n", watch=noop)
    b.set("/s/n", b"1")
    b.set("/s/n", b"2")
    tap.expect((CHANGED, "/s/n"), (CHANGED, "/s/n"))
    call(a, CheckWatches("/s", W_ANY))
    with pytest.raises(NoWatcherError):
        call(a, CheckWatches("/s/n", W_DATA))  # the one-shot is spent; recursive is on /s
    fence(a, tap, "/fence")


def test_remove_watches_by_type(server: str, kazoo: Any) -> None:
    """A persistent recursive watch is held in both the data and the child watch tables
    (DataTree.addWatch); removeWatches(CHILDREN/DATA) takes it out of one table only, and what
    is left keeps firing for the events that table triggers."""
    a, tap = kazoo(server)
    b, _ = kazoo(server)
    b.create("/w")
    call(a, AddWatch("/w", PERSISTENT_RECURSIVE))
    call(a, CheckWatches("/w", W_DATA))
    call(a, CheckWatches("/w", W_CHILDREN))

    assert call(a, RemoveWatches("/w", W_CHILDREN)) is None
    with pytest.raises(NoWatcherError):
        call(a, RemoveWatches("/w", W_CHILDREN))
    with pytest.raises(NoWatcherError):
        call(a, CheckWatches("/w", W_CHILDREN))
    b.create("/w/x", b"0")  # NodeCreated: the data table
    b.delete("/w/x")  # NodeDeleted: both tables, the data table still has it
    tap.expect((CREATED, "/w/x"), (DELETED, "/w/x"))

    call(a, AddWatch("/w", PERSISTENT_RECURSIVE))  # back in both tables
    call(a, RemoveWatches("/w", W_DATA))
    b.create("/w/y", b"0")  # data table only: nothing
    b.set("/w/y", b"1")  # data table only: nothing
    b.delete("/w/y")  # the child table triggers NodeDeleted too (DataTree.deleteNode)
    tap.expect((DELETED, "/w/y"))

    call(a, RemoveWatches("/w", W_ANY))
    with pytest.raises(NoWatcherError):
        call(a, RemoveWatches("/w", W_ANY))
    b.create("/w/z")
    b.delete("/w/z")
    b.delete("/w")
    fence(a, tap, "/fence")


def test_remove_watches_is_per_session(server: str, kazoo: Any) -> None:
    """removeWatches removes only the caller's watches; another session's stay and fire."""
    a, tap_a = kazoo(server)
    b, tap_b = kazoo(server)
    b.create("/q", b"0")
    call(a, AddWatch("/q", PERSISTENT))
    b.get("/q", watch=noop)
    with pytest.raises(NoWatcherError):
        call(b, RemoveWatches("/q", W_CHILDREN))  # b has only a data watch there
    # checkWatches is looser than removeWatches: WatchManager.containsWatcher answers yes when
    # the path has *any* watcher in the table, another session's included.
    b.create("/q2")
    b.get("/q2", watch=noop)
    c, _ = kazoo(server)
    call(c, CheckWatches("/q2", W_DATA))
    with pytest.raises(NoWatcherError):
        call(c, CheckWatches("/q2", W_CHILDREN))
    with pytest.raises(NoWatcherError):
        call(c, RemoveWatches("/q2", W_DATA))
    call(b, RemoveWatches("/q", W_DATA))
    a.set("/q", b"1")
    assert tap_a.pending() == [(CHANGED, "/q")]
    fence(b, tap_b, "/fence")  # b got nothing for /q


def test_remove_watches_takes_one_shot_and_persistent_of_a_table(server: str, kazoo: Any) -> None:
    """removeWatches(type) removes the session's watcher from that table whatever its mode: a
    one-shot and a persistent watch on one path are one entry per table."""
    a, tap = kazoo(server)
    b, _ = kazoo(server)
    b.create("/oc")
    a.get_children("/oc", watch=noop)
    call(a, AddWatch("/oc", PERSISTENT))
    call(a, RemoveWatches("/oc", W_CHILDREN))
    b.create("/oc/x")  # child table: gone
    b.set("/oc", b"1")  # data table: still there
    tap.expect((CHANGED, "/oc"))

    b.create("/od")
    a.get("/od", watch=noop)
    call(a, AddWatch("/od", PERSISTENT))
    call(a, RemoveWatches("/od", W_DATA))
    b.create("/od/x")
    b.set("/od", b"1")  # data table: gone
    b.delete("/od/x")
    b.delete("/od")  # NodeDeleted from the child table
    tap.expect((CHILD, "/od"), (CHILD, "/od"), (DELETED, "/od"))
    fence(a, tap, "/fence")


def test_add_watch_again_switches_mode(server: str, kazoo: Any) -> None:
    """A second addWatch on the same path replaces the mode (WatcherModeManager keeps one
    mode per watcher and path)."""
    a, tap = kazoo(server)
    b, _ = kazoo(server)
    call(a, AddWatch("/sw", PERSISTENT))
    call(a, AddWatch("/sw", PERSISTENT_RECURSIVE))
    b.create("/sw")
    b.create("/sw/c")
    b.create("/sw/c/d")
    tap.expect((CREATED, "/sw"), (CREATED, "/sw/c"), (CREATED, "/sw/c/d"))
    call(a, AddWatch("/sw", PERSISTENT))
    b.create("/sw/e")
    b.create("/sw/e/f")
    b.set("/sw", b"1")
    tap.expect((CHILD, "/sw"), (CHANGED, "/sw"))
    fence(a, tap, "/fence")


def test_recursive_watch_on_root_and_multi(server: str, kazoo: Any) -> None:
    """A recursive watch on '/' sees the whole tree; a multi notifies op by op in order, and a
    failed multi notifies nothing."""
    a, tap = kazoo(server)
    b, _ = kazoo(server)
    call(a, AddWatch("/", PERSISTENT_RECURSIVE))
    t = b.transaction()
    t.create("/m")
    t.create("/m/1", b"a")
    t.set_data("/m/1", b"b")
    t.create("/m/2")
    t.delete("/m/2")
    results = t.commit()
    assert results[:2] == ["/m", "/m/1"] and results[3:] == ["/m/2", True]
    assert isinstance(results[2], ZnodeStat) and results[2].version == 1
    tap.expect(
        (CREATED, "/m"),
        (CREATED, "/m/1"),
        (CHANGED, "/m/1"),
        (CREATED, "/m/2"),
        (DELETED, "/m/2"),
    )
    t = b.transaction()
    t.create("/m/3")
    t.create("/m/1")
    assert [type(r).__name__ for r in t.commit()] == ["RolledBackError", "NodeExistsError"]
    call(a, RemoveWatches("/", W_ANY))
    fence(a, tap, "/fence")


def test_bad_watch_arguments(server: str, kazoo: Any) -> None:
    """An unknown mode/type fails the request with MarshallingError (FinalRequestProcessor's
    catch-all); the connection stays up. addWatch does not validate its path."""
    a, _ = kazoo(server)
    states = States(a)
    with pytest.raises(MarshallingError):
        call(a, AddWatch("/x", 7))
    with pytest.raises(MarshallingError):
        call(a, RemoveWatches("/x", 9))
    with pytest.raises(MarshallingError):
        call(a, CheckWatches("/x", 9))
    assert call(a, AddWatch("relative", PERSISTENT)) is None
    with pytest.raises(NoWatcherError):
        call(a, CheckWatches("/nope", W_ANY))
    a.exists("/ex", watch=noop)  # an exist watch lives in the data table
    call(a, CheckWatches("/ex", W_DATA))
    with pytest.raises(NoWatcherError):
        call(a, CheckWatches("/ex", W_CHILDREN))
    assert states.q.empty()  # never disconnected


# ---------------------------------------------------------------------------- reconnect


@pytest.mark.parametrize("v2", [True, False], ids=["setWatches2", "setWatches"])
def test_watches_restored_after_reconnect(
    server: str, proxy: CuttableProxy, kazoo: Any, v2: bool
) -> None:
    """The client is cut off, others change the tree, the client comes back on the same session
    and re-registers its watches with SetWatches(2) relative to the last zxid it saw, as
    ClientCnxn.primeConnection does. DataTree.setWatches answers at once, before the reply, for
    one-shot watches whose node changed since -- data: NodeDeleted if gone, NodeDataChanged if
    mzxid > relativeZxid (a node deleted and re-created counts as changed); exist: NodeCreated
    if it exists now; child: NodeDeleted if gone, NodeChildrenChanged if pzxid >
    relativeZxid -- in list order, and re-arms the rest; persistent watches are re-armed with
    no catch-up for what happened while away."""
    a, tap = kazoo(proxy.hosts, connection_retry=FAST_RECONNECT)
    b, _ = kazoo(server)
    states = States(a)
    for path in ("/d1", "/keep", "/gone", "/again", "/c1", "/cgone", "/r", "/p"):
        b.create(path, b"0")
    recursive, persistent = (["/r"], ["/p"]) if v2 else ([], [])
    for path in recursive:
        call(a, AddWatch(path, PERSISTENT_RECURSIVE))
    for path in persistent:
        call(a, AddWatch(path, PERSISTENT))
    for path in ("/d1", "/keep", "/gone", "/again"):
        a.get(path, watch=noop)
    for path in ("/e1", "/e2", "/e3"):
        assert a.exists(path, watch=noop) is None
    for path in ("/c1", "/cgone"):
        a.get_children(path, watch=noop)
    session = a.client_id
    relative_zxid = a.last_zxid

    proxy.cut()
    states.expect(KazooState.SUSPENDED)
    b.set("/d1", b"1")
    b.delete("/gone")
    b.delete("/again")
    b.create("/again", b"0")
    b.create("/e1")
    b.create("/e3")
    b.delete("/e3")  # came and went: the exist watch is simply re-armed
    b.create("/c1/x")
    b.delete("/cgone")
    b.create("/r/away")
    b.set("/r", b"1")
    b.create("/p/away")
    proxy.heal()
    states.expect(KazooState.CONNECTED)
    assert a.client_id == session
    # The old connection's watches died with it: nothing until they are set again.
    a.exists("/nothing")
    assert tap.pending() == []

    sw = SetWatches(
        relative_zxid,
        data=["/d1", "/keep", "/gone", "/again"],
        exist=["/e1", "/e2", "/e3"],
        child=["/c1", "/cgone"],
        persistent=persistent,
        recursive=recursive,
        v2=v2,
    )
    call(a, sw)
    assert tap.pending() == [
        (CHANGED, "/d1"),
        (DELETED, "/gone"),
        (CHANGED, "/again"),
        (CREATED, "/e1"),
        (CHILD, "/c1"),
        (DELETED, "/cgone"),
    ]
    # The re-armed ones fire on the next change; the answered ones were consumed.
    b.create("/r/after")
    b.set("/keep", b"1")
    b.create("/e2")
    b.create("/e3")
    b.create("/p/after")
    b.set("/d1", b"2")
    b.set("/again", b"1")
    b.create("/c1/y")
    b.create("/e1/z")
    expected = [(CHANGED, "/keep"), (CREATED, "/e2"), (CREATED, "/e3")]
    if v2:
        expected = [(CREATED, "/r/after"), *expected, (CHILD, "/p")]
    tap.expect(*expected)
    fence(a, tap, "/fence")


def test_watches_not_carried_over_without_set_watches(
    server: str, proxy: CuttableProxy, kazoo: Any
) -> None:
    """Stock kazoo sends no SetWatches on reconnect: the server keeps watches per connection,
    so after a reconnect on the same session neither one-shot nor persistent watches fire."""
    a, tap = kazoo(proxy.hosts, connection_retry=FAST_RECONNECT)
    states = States(a)
    a.create("/s", b"0")
    a.create("/r")
    a.get("/s", watch=noop)
    call(a, AddWatch("/r", PERSISTENT_RECURSIVE))
    call(a, AddWatch("/s", PERSISTENT))
    session = a.client_id
    proxy.cut()
    states.expect(KazooState.SUSPENDED)
    proxy.heal()
    states.expect(KazooState.CONNECTED)
    assert a.client_id == session
    with pytest.raises(NoWatcherError):
        call(a, CheckWatches("/r", W_ANY))
    a.set("/s", b"1")
    a.create("/r/x")
    fence(a, tap, "/fence")


@pytest.fixture
def fast_server(tmp_path: Path) -> Iterator[str]:
    """A server whose 2 s maximum session timeout (20 ticks) lets a test wait for an expiry."""
    if ORACLE:
        with servers.running("zookeeper", {"maxSessionTimeout": "2000"}, version=RELEASE) as zk:
            yield zk.address
        return
    srv = ThreadedServer(make_config(tmp_path, tickTime=100, **PINNED)).start()
    yield srv.hosts
    srv.stop()


def test_session_expired_while_away(fast_server: str, kazoo: Any) -> None:
    """The client stays away past its session timeout: its ephemeral goes (seen by another
    session's watch, which is how the test knows the session expired), kazoo is told the
    session expired when it comes back (LOST), starts a new one, and nothing of the old
    session's watches is left."""
    proxy = CuttableProxy(fast_server)
    try:
        a, tap = kazoo(proxy.hosts, connection_retry=FAST_RECONNECT)
        b, tap_b = kazoo(fast_server)
        states = States(a)
        a.create("/eph", ephemeral=True)
        a.create("/r")
        call(a, AddWatch("/r", PERSISTENT_RECURSIVE))
        b.exists("/eph", watch=noop)
        session = a.client_id
        proxy.cut()
        states.expect(KazooState.SUSPENDED)
        tap_b.expect((DELETED, "/eph"))  # the expiry's closeSession deleted it
        proxy.heal()
        states.expect(KazooState.LOST)
        states.expect(KazooState.CONNECTED)
        assert a.client_id != session
        assert a.exists("/eph") is None
        with pytest.raises(NoWatcherError):
            call(a, CheckWatches("/r", W_ANY))
        b.create("/r/x")
        fence(a, tap, "/fence")
    finally:
        proxy.close()


# ---------------------------------------------------------------------------- TreeCache


def _cache_events(cache: TreeCache) -> queue.Queue[tuple[int, str | None]]:
    q: queue.Queue[tuple[int, str | None]] = queue.Queue()

    def listener(event: TreeEvent) -> None:
        data = event.event_data
        q.put((event.event_type, None if data is None else data.path))

    cache.listen(listener)
    return q


def _take(q: queue.Queue[Any], n: int) -> list[Any]:
    out = []
    for i in range(n):
        try:
            out.append(q.get(timeout=DEADLINE))
        except queue.Empty:
            raise AssertionError(f"only {i} of {n} cache events arrived: {out}") from None
    return out


def _assert_cache_matches(cache: TreeCache, zk: KazooClient, path: str) -> None:
    # TreeCache re-reads a node's data only on data events, so only the data half of its
    # cached Stat (mzxid, version) is current; cversion/numChildren may be stale by design.
    data, stat = zk.get(path)
    node = cache.get_data(path)
    assert node is not None, path
    assert (node.data, node.stat.mzxid, node.stat.version) == (data, stat.mzxid, stat.version)
    children = zk.get_children(path)
    assert cache.get_children(path) == frozenset(children), path
    for child in children:
        _assert_cache_matches(cache, zk, f"{path}/{child}")


def test_tree_cache(server: str, kazoo: Any) -> None:
    """kazoo's TreeCache (Curator's recipe) over trizk: initial load then add/update/remove.
    The load order follows from replies coming back in request order (get before
    get_children, children sorted)."""
    a, _ = kazoo(server)
    b, _ = kazoo(server)
    b.create("/tc/a", b"A", makepath=True)
    b.create("/tc/b/c", b"C", makepath=True)
    cache = TreeCache(a, "/tc")
    events = _cache_events(cache)
    cache.start()
    try:
        assert _take(events, 5) == [
            (TreeEvent.NODE_ADDED, "/tc"),
            (TreeEvent.NODE_ADDED, "/tc/a"),
            (TreeEvent.NODE_ADDED, "/tc/b"),
            (TreeEvent.NODE_ADDED, "/tc/b/c"),
            (TreeEvent.INITIALIZED, None),
        ]
        b.create("/tc/d", b"D")
        assert _take(events, 1) == [(TreeEvent.NODE_ADDED, "/tc/d")]
        b.set("/tc/a", b"A2")
        assert _take(events, 1) == [(TreeEvent.NODE_UPDATED, "/tc/a")]
        assert cache.get_data("/tc/a").data == b"A2"
        b.delete("/tc/b/c")
        assert _take(events, 1) == [(TreeEvent.NODE_REMOVED, "/tc/b/c")]
        b.create("/tc/b/e", b"", ephemeral=True)
        assert _take(events, 1) == [(TreeEvent.NODE_ADDED, "/tc/b/e")]
        b.stop()  # the ephemeral leaves with the session
        assert _take(events, 1) == [(TreeEvent.NODE_REMOVED, "/tc/b/e")]
        a.create("/tc/fence")  # nothing else was queued before it
        assert _take(events, 1) == [(TreeEvent.NODE_ADDED, "/tc/fence")]
        _assert_cache_matches(cache, a, "/tc")
        assert cache.get_data("/tc/b/c") is None
    finally:
        cache.close()


def test_tree_cache_resyncs_after_reconnect(server: str, proxy: CuttableProxy, kazoo: Any) -> None:
    """TreeCache refreshes the whole tree when kazoo reconnects; what changed while the client
    was cut off shows up as events, and the refreshed watches work."""
    a, _ = kazoo(proxy.hosts, connection_retry=FAST_RECONNECT)
    b, _ = kazoo(server)
    states = States(a)
    b.create("/tc/a", b"A", makepath=True)
    b.create("/tc/b/c", b"C", makepath=True)
    b.create("/tc/same", b"S")
    cache = TreeCache(a, "/tc")
    events = _cache_events(cache)
    cache.start()
    try:
        assert _take(events, 6)[-1] == (TreeEvent.INITIALIZED, None)
        proxy.cut()
        states.expect(KazooState.SUSPENDED)
        assert _take(events, 1) == [(TreeEvent.CONNECTION_SUSPENDED, None)]
        b.set("/tc/a", b"A2")
        b.delete("/tc/b/c")
        b.create("/tc/new", b"N")
        proxy.heal()
        states.expect(KazooState.CONNECTED)
        assert _take(events, 1) == [(TreeEvent.CONNECTION_RECONNECTED, None)]
        assert sorted(_take(events, 3)) == [
            (TreeEvent.NODE_ADDED, "/tc/new"),
            (TreeEvent.NODE_UPDATED, "/tc/a"),
            (TreeEvent.NODE_REMOVED, "/tc/b/c"),
        ]
        b.set("/tc/same", b"S2")  # a watch set by the refresh fires
        assert _take(events, 1) == [(TreeEvent.NODE_UPDATED, "/tc/same")]
        _assert_cache_matches(cache, a, "/tc")
    finally:
        cache.close()


# ---------------------------------------------------------------------------- ephemerals, counts


def test_get_ephemerals_and_all_children_number(server: str, kazoo: Any) -> None:
    """getEphemerals lists the caller's own ephemerals whose path *starts with* the prefix (a
    string prefix: '/x' matches '/xy/e2'); '', '/' mean all. getAllChildrenNumber counts every
    descendant ('/' counts all but the root, /zookeeper's three included)."""
    a, _ = kazoo(server)
    b, _ = kazoo(server)
    a.create("/x")
    a.create("/x/e1", ephemeral=True)
    a.create("/x/sub/e3", ephemeral=True, makepath=True)
    a.create("/xy")
    a.create("/xy/e2", ephemeral=True)
    b.create("/x/other", ephemeral=True)
    mine = ["/x/e1", "/x/sub/e3", "/xy/e2"]
    assert sorted(call(a, GetEphemerals("/x"))) == mine
    assert sorted(call(a, GetEphemerals("/"))) == mine
    assert sorted(call(a, GetEphemerals(""))) == mine
    assert sorted(call(a, GetEphemerals("/x/"))) == ["/x/e1", "/x/sub/e3"]
    assert call(a, GetEphemerals("/nope")) == []
    assert call(b, GetEphemerals("/")) == ["/x/other"]

    assert call(a, GetAllChildrenNumber("/x")) == 4
    assert call(a, GetAllChildrenNumber("/xy")) == 1
    assert call(a, GetAllChildrenNumber("/x/e1")) == 0
    assert call(a, GetAllChildrenNumber("/zookeeper")) == 2
    assert call(a, GetAllChildrenNumber("/")) == 3 + 7
    with pytest.raises(NoNodeError):
        call(a, GetAllChildrenNumber("/nope"))
    b.stop()
    assert call(a, GetAllChildrenNumber("/x")) == 3


# ---------------------------------------------------------------------------- containers, TTL


def test_container_nodes(server: str, kazoo: Any) -> None:
    """createContainer answers a Create2Response; clients see ephemeralOwner 0 for containers
    (DataNode.copyStat hides the marker), and containers take children, ephemeral ones too."""
    a, tap = kazoo(server)
    a.exists("/cont", watch=noop)
    path, stat = call(a, CreateContainer("/cont", b"d", OPEN_ACL_UNSAFE))
    assert tap.pending() == [(CREATED, "/cont")]
    assert path == "/cont"
    assert (stat.ephemeralOwner, stat.dataLength, stat.numChildren) == (0, 1, 0)
    assert stat.czxid == stat.mzxid == stat.pzxid and stat.version == 0
    with pytest.raises(NodeExistsError):
        call(a, CreateContainer("/cont", b"", OPEN_ACL_UNSAFE))
    with pytest.raises(NoNodeError):
        call(a, CreateContainer("/missing/c", b"", OPEN_ACL_UNSAFE))
    a.create("/cont/kid", ephemeral=True)
    data, st = a.get("/cont")
    assert data == b"d" and st.ephemeralOwner == 0 and st.numChildren == 1
    assert st.cversion == 1
    a.create("/eph", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        call(a, CreateContainer("/eph/c", b"", OPEN_ACL_UNSAFE))


def test_ttl_nodes(ext_server: str, kazoo: Any) -> None:
    """createTTL with extendedTypesEnabled: TTL in (0, 2**40-1] and a TTL mode, else
    BadArguments (EphemeralType.validateTTL); a TTL mode through plain create2 has ttl -1 and
    is refused the same way."""
    a, _ = kazoo(ext_server)
    path, stat = call(a, CreateTTL("/t", b"v", OPEN_ACL_UNSAFE, M_TTL, 600_000))
    assert path == "/t" and stat.ephemeralOwner == 0 and stat.dataLength == 1
    path, _ = call(a, CreateTTL("/t/s-", b"", OPEN_ACL_UNSAFE, M_SEQ_TTL, MAX_TTL))
    assert path == "/t/s-0000000000"
    _, st = a.get("/t")
    assert st.ephemeralOwner == 0 and st.numChildren == 1
    for flags, ttl in ((M_TTL, 0), (M_TTL, -5), (M_TTL, MAX_TTL + 1), (0, 1000), (1, 1000)):
        with pytest.raises(BadArgumentsError):
            call(a, CreateTTL("/bad", b"", OPEN_ACL_UNSAFE, flags, ttl))
    with pytest.raises(BadArgumentsError):
        call(a, Create2("/bad", b"", OPEN_ACL_UNSAFE, M_TTL))
    assert a.exists("/bad") is None


def test_ttl_needs_extended_types(server: str, kazoo: Any) -> None:
    a, _ = kazoo(server)
    with pytest.raises(UnimplementedError):
        call(a, CreateTTL("/t", b"", OPEN_ACL_UNSAFE, M_TTL, 1000))
    with pytest.raises(UnimplementedError):
        call(a, Create2("/t", b"", OPEN_ACL_UNSAFE, M_TTL))
    assert a.exists("/t") is None
