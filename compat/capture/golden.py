"""Record golden Jute frames from real Apache ZooKeeper 3.8 traffic.

Theory
------
A recording TCP proxy sits on 127.0.0.1 between stock clients and a real ZooKeeper server we
start ourselves (in a temp dir, on a free port). Every byte is forwarded untouched; in each
direction the stream is split into frames (4-byte big-endian length + payload) and every payload
is recorded with a global sequence number taken *before* it is forwarded, so a request is always
recorded before the reply it causes.

The clients are

* kazoo (the Python client) driven through a session that touches every common operation,
  error replies, watches of each kind, a ping and a clean close;
* a hand-rolled raw socket client for what kazoo never sends: a ConnectRequest without the
  trailing ``readOnly`` byte (old clients), a reconnect to an existing session (with the right and
  a wrong password), null data, SetWatches/SetWatches2, multiRead, whoAmI, addWatch, containers,
  TTL nodes, getEphemerals, getAllChildrenNumber, checkWatches/removeWatches;
* the C client ``cli_mt`` when it is installed.

Afterwards each frame is annotated with the Jute records that make it up (``records``), found by
walking the payload with :mod:`trizk.jute` and checked to cover it exactly — a frame that cannot
be covered aborts the capture rather than producing a wrong golden file. The payloads themselves
are stored as captured: nothing is normalised (zxids, session ids, times and passwords are what
the server sent that day). The output is ``tests/data/golden_frames.json``.

Annotation rules (checked against the server, see ``_annotate``):

* first client frame of a connection: ``ConnectRequest``, then ``bool`` if the client sent the
  readOnly byte; first server frame: ``ConnectResponse`` then ``bool`` iff the client sent it
  (``ZooKeeperServer.finishSessionInit`` writes readOnly only for non-"old" clients);
* later client frames: ``RequestHeader`` then the request body by opcode (multi: a sequence of
  ``MultiHeader`` + op record, closed by ``MultiHeader(-1, true, -1)``);
* later server frames: ``ReplyHeader``; xid -1 is followed by a ``WatcherEvent``; otherwise a body
  follows only when bytes remain (ZooKeeper sends none when ``err != 0``), typed by the opcode of
  the request with that xid (multi: ``MultiHeader`` + result, error results as ``ErrorResponse``).

Usage: ``python -m trizk.compat.capture.golden [--out PATH]``. It needs java, the Debian
``zookeeper`` package and kazoo; it takes about half a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trizk.compat.oracle.rawclient import RESPONSE_TYPES
from trizk.jute import multi
from trizk.jute import records as R
from trizk.jute.codes import OpCode
from trizk.testing.ports import free_port
from trizk.testing.processes import stop_process

ZK_JARS = (
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
)
CLI_MT = "/usr/lib/zookeeper/bin/cli_mt"
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "golden_frames.json"

# --------------------------------------------------------------------------------- the server


def zk_version() -> str:
    """The installed ZooKeeper's version, as the Debian package reports it."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "zookeeper"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        out = "unknown"
    return f"Apache ZooKeeper {out} (Debian package)"


@contextmanager
def zookeeper_server(extra_cfg: str = "") -> Iterator[int]:
    """Start a standalone ZooKeeper in its own temp dir; yield its client port; stop it."""
    tmp = Path(tempfile.mkdtemp(prefix="trizk-golden-"))
    port = free_port()
    (tmp / "data").mkdir()
    (tmp / "zoo.cfg").write_text(
        f"tickTime=500\ndataDir={tmp / 'data'}\nclientPort={port}\n"
        "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
        "4lw.commands.whitelist=*\n" + extra_cfg
    )
    (tmp / "log4j.properties").write_text(
        "log4j.rootLogger=INFO, C\nlog4j.appender.C=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.C.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.C.layout.ConversionPattern=%d %p [%t] %c{1}: %m%n\n"
    )
    log = open(tmp / "server.log", "wb")  # closed in the finally below
    proc = subprocess.Popen(
        [
            "java",
            "-Dzookeeper.extendedTypesEnabled=true",
            f"-Dlog4j.configuration=file:{tmp / 'log4j.properties'}",
            "-cp",
            ":".join(ZK_JARS),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(tmp / "zoo.cfg"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_session(port, proc)
        yield port
    except BaseException:
        log.flush()
        tail = (tmp / "server.log").read_text(errors="replace").splitlines()[-40:]
        print("\n".join(["--- ZooKeeper log tail ---", *tail]), file=sys.stderr)
        raise
    finally:
        stop_process(proc, 10)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _wait_for_session(port: int, proc: subprocess.Popen[bytes]) -> None:
    # `ruok` answers before sessions are accepted; only a completed handshake proves readiness.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("ZooKeeper exited during startup")
        try:
            c = RawClient(("127.0.0.1", port))
            c.sock.close()  # abandon the session; it expires on its own
            return
        except (OSError, EOFError):
            time.sleep(0.2)
    raise RuntimeError("ZooKeeper did not accept a session within 60 s")


# ---------------------------------------------------------------------------------- the proxy


@dataclass
class Captured:
    seq: int
    conn: int
    client: str
    direction: str  # "c2s" | "s2c"
    payload: bytes
    note: str


class RecordingProxy:
    """Loopback TCP proxy that records every frame in both directions."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.addr: tuple[str, int] = self.lsock.getsockname()
        self.frames: list[Captured] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.client = "?"
        self.note = ""
        self._conns = 0
        self._threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()

    @property
    def hostport(self) -> str:
        return f"{self.addr[0]}:{self.addr[1]}"

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.lsock.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            with self.lock:
                self._conns += 1
                cid = self._conns
                label = self.client
            for src, dst, d in ((down, up, "c2s"), (up, down, "s2c")):
                t = threading.Thread(target=self._pump, args=(cid, label, src, dst, d), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, cid: int, label: str, src: socket.socket, dst: socket.socket, d: str) -> None:
        buf = bytearray()
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            buf += data
            while len(buf) >= 4:
                (n,) = struct.unpack_from(">i", buf)
                if len(buf) < 4 + n:
                    break
                with self.lock:
                    self.frames.append(
                        Captured(len(self.frames), cid, label, d, bytes(buf[4 : 4 + n]), self.note)
                    )
                    self.changed.notify_all()
                del buf[: 4 + n]
            try:
                dst.sendall(data)
            except OSError:
                break
        if buf:
            with self.lock:
                self.errors.append(f"conn {cid} {d}: {len(buf)} bytes left outside any frame")
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def wait_for(
        self, pred: Callable[[Captured], bool], what: str, timeout: float = 15
    ) -> Captured:
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                for f in self.frames:
                    if pred(f):
                        return f
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no frame for: {what}")
                self.changed.wait(left)

    def close(self) -> None:
        self.lsock.close()
        for t in self._threads:
            t.join(10)


# ----------------------------------------------------------------------------- raw encoding
# Requests the raw client sends are packed here with struct, independently of trizk.jute, so the
# client->server goldens do not depend on the codec they are meant to test.


def _i(v: int) -> bytes:
    return struct.pack(">i", v)


def _q(v: int) -> bytes:
    return struct.pack(">q", v)


def _b(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def _buf(v: bytes | None) -> bytes:
    return _i(-1) if v is None else _i(len(v)) + v


def _str(v: str | None) -> bytes:
    return _buf(None if v is None else v.encode())


def _strs(v: list[str] | None) -> bytes:
    return _i(-1) if v is None else _i(len(v)) + b"".join(_str(s) for s in v)


OPEN_ACL = _i(1) + _i(31) + _str("world") + _str("anyone")


def _create(path: str, data: bytes | None, flags: int, acl: bytes = OPEN_ACL) -> bytes:
    return _str(path) + _buf(data) + acl + _i(flags)


class RawClient:
    """A minimal blocking ZooKeeper client speaking hand-packed Jute."""

    def __init__(
        self,
        addr: tuple[str, int],
        *,
        read_only: bool | None = False,
        session_id: int = 0,
        passwd: bytes = bytes(16),
        last_zxid: int = 0,
        timeout_ms: int = 4000,
    ) -> None:
        self.sock = socket.create_connection(addr, timeout=10)
        self.buf = bytearray()
        self.xid = 0
        self.last_zxid = last_zxid
        self.events: list[bytes] = []
        req = _i(0) + _q(last_zxid) + _i(timeout_ms) + _q(session_id) + _buf(passwd)
        if read_only is not None:
            req += _b(read_only)
        self.send(req)
        resp = self.recv()
        _proto, self.timeout, self.session_id = struct.unpack_from(">iiq", resp)
        (n,) = struct.unpack_from(">i", resp, 16)
        self.passwd = resp[20 : 20 + n]

    def send(self, payload: bytes) -> None:
        self.sock.sendall(_i(len(payload)) + payload)

    def recv(self) -> bytes:
        while True:
            if len(self.buf) >= 4:
                (n,) = struct.unpack_from(">i", self.buf)
                if len(self.buf) >= 4 + n:
                    out = bytes(self.buf[4 : 4 + n])
                    del self.buf[: 4 + n]
                    return out
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("server closed the connection")
            self.buf += data

    def call(self, op: int, body: bytes = b"", xid: int | None = None) -> tuple[int, bytes]:
        """Send one request; return (err, body) of its reply, queueing notifications."""
        if xid is None:
            self.xid += 1
            xid = self.xid
        self.send(_i(xid) + _i(op) + body)
        while True:
            r = self.recv()
            rxid, zxid, err = struct.unpack_from(">iqi", r)
            if zxid > 0:
                self.last_zxid = zxid
            if rxid == -1:
                self.events.append(r)
                continue
            if rxid != xid:
                raise RuntimeError(f"reply xid {rxid} for request {xid}")
            return err, r[16:]

    def wait_event(self) -> bytes:
        if not self.events:
            r = self.recv()
            if struct.unpack_from(">i", r)[0] != -1:
                raise RuntimeError("expected a notification")
            self.events.append(r)
        return self.events.pop(0)

    def close_session(self) -> None:
        self.call(OpCode.CLOSESESSION)
        self.sock.close()


# ------------------------------------------------------------------------------- the drivers


def drive_kazoo(proxy: RecordingProxy) -> tuple[int, bytes]:
    """One kazoo session over every common operation; returns (session id, password)."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import (
        BadVersionError,
        NodeExistsError,
        NoNodeError,
        NotEmptyError,
    )
    from kazoo.security import OPEN_ACL_UNSAFE, make_acl, make_digest_acl

    def note(s: str) -> None:
        with proxy.lock:
            proxy.note = s

    proxy.client = "kazoo"
    zk = KazooClient(hosts=proxy.hostport, timeout=2.0)
    note("kazoo connect (sends readOnly byte)")
    zk.start(timeout=15)
    try:
        note("create persistent")
        zk.create("/golden", b"root")
        note("create persistent, data b''")
        zk.create("/golden/empty", b"")
        note("create persistent, data None")
        zk.create("/golden/null", None)
        note("create ephemeral")
        zk.create("/golden/eph", b"e", ephemeral=True)
        note("create persistent sequential")
        zk.create("/golden/seq-", b"s", sequence=True)
        note("create ephemeral sequential")
        zk.create("/golden/eseq-", b"es", ephemeral=True, sequence=True)
        note("create2 (include_data=True)")
        zk.create("/golden/c2", b"c2", include_data=True)
        note("create with non-ASCII path and binary data")
        zk.create("/golden/\u00e9t\u00e9", bytes(range(256)))
        note("create existing -> NodeExists")
        try:
            zk.create("/golden", b"")
        except NodeExistsError:
            pass
        note("create under missing parent -> NoNode")
        try:
            zk.create("/golden/missing/child", b"")
        except NoNodeError:
            pass
        note("exists hit")
        zk.exists("/golden")
        note("exists miss")
        zk.exists("/golden/nope")
        note("get")
        zk.get("/golden")
        note("get data None")
        zk.get("/golden/null")
        note("get miss -> NoNode")
        try:
            zk.get("/golden/nope")
        except NoNodeError:
            pass
        note("set")
        zk.set("/golden", b"root2")
        note("set with version")
        zk.set("/golden", b"root3", version=1)
        note("set bad version -> BadVersion")
        try:
            zk.set("/golden", b"x", version=99)
        except BadVersionError:
            pass
        note("get_children")
        zk.get_children("/golden")
        note("get_children of leaf (empty vector)")
        zk.get_children("/golden/empty")
        note("get_children include_data (GetChildren2)")
        zk.get_children("/golden", include_data=True)
        note("sync")
        zk.sync("/golden")
        note("multi ok (create, set, check, delete)")
        t = zk.transaction()
        t.create("/golden/t1", b"t1")
        t.set_data("/golden/empty", b"now")
        t.check("/golden", 2)
        t.delete("/golden/t1")
        t.commit()
        note("multi failing member")
        t = zk.transaction()
        t.create("/golden/t2", b"t2")
        t.check("/golden", 42)
        t.delete("/golden/nope")
        t.commit()
        note("get_acls")
        zk.get_acls("/golden")
        note("set_acls digest")
        digest = make_digest_acl("user", "pw", all=True)
        zk.set_acls("/golden/empty", [digest, make_acl("world", "anyone", read=True)])
        note("get_acls after set_acls")
        zk.get_acls("/golden/empty")
        note("set without auth -> NoAuth")
        try:
            zk.set("/golden/empty", b"x")
        except Exception:  # NoAuthError
            pass
        note("add_auth digest")
        zk.add_auth("digest", "user:pw")
        note("set with auth")
        zk.set("/golden/empty", b"authed")
        note("set_acls back to open")
        zk.set_acls("/golden/empty", OPEN_ACL_UNSAFE)

        # Watches: one of each kind, each awaited with a bound.
        fired: dict[str, threading.Event] = {
            k: threading.Event() for k in "data child new gone".split()
        }
        note("create /golden/w")
        zk.create("/golden/w", b"w")
        note("get with data watch")
        zk.get("/golden/w", watch=lambda e: fired["data"].set())
        note("get_children with child watch")
        zk.get_children("/golden", watch=lambda e: fired["child"].set())
        note("exists miss with watch")
        zk.exists("/golden/born", watch=lambda e: fired["new"].set())
        note("set -> NodeDataChanged")
        zk.set("/golden/w", b"w2")
        note("create -> NodeCreated + NodeChildrenChanged")
        zk.create("/golden/born", b"")
        note("exists hit with watch")
        zk.exists("/golden/born", watch=lambda e: fired["gone"].set())
        note("delete -> NodeDeleted")
        zk.delete("/golden/born")
        for k, ev in fired.items():
            if not ev.wait(10):
                raise TimeoutError(f"watch {k} did not fire")
        note("delete non-empty -> NotEmpty")
        try:
            zk.delete("/golden")
        except NotEmptyError:
            pass
        note("delete with version")
        zk.delete("/golden/w", version=1)
        note("delete miss -> NoNode")
        try:
            zk.delete("/golden/nope")
        except NoNodeError:
            pass
        note("idle: kazoo ping")
        proxy.wait_for(
            lambda f: f.client == "kazoo" and f.direction == "s2c" and f.payload[:4] == _i(-2),
            "kazoo ping reply",
        )
        sid, pw = zk.client_id
        note("close")
    finally:
        zk.stop()
        zk.close()
    return sid, pw


def drive_raw(proxy: RecordingProxy, kazoo_session: tuple[int, bytes]) -> None:
    """What kazoo never sends, with hand-packed requests."""

    def note(s: str) -> None:
        with proxy.lock:
            proxy.note = s

    def ok(err: int, what: str) -> None:
        if err != 0:
            raise RuntimeError(f"{what}: err {err}")

    proxy.client = "raw"
    note("connect without readOnly byte (old client)")
    a = RawClient(proxy.addr, read_only=None)
    note("create data null")
    ok(a.call(OpCode.CREATE, _create("/raw", None, 0))[0], "create /raw")
    note("create data empty")
    ok(a.call(OpCode.CREATE, _create("/raw/empty", b"", 0))[0], "create empty")
    note("getData of null data")
    ok(a.call(OpCode.GETDATA, _str("/raw") + _b(False))[0], "get /raw")
    note("getData of empty data")
    ok(a.call(OpCode.GETDATA, _str("/raw/empty") + _b(False))[0], "get empty")
    note("create2 ephemeral sequential")
    ok(a.call(OpCode.CREATE2, _create("/raw/e-", b"x", 3))[0], "create2")
    note("createContainer")
    ok(a.call(OpCode.CREATECONTAINER, _create("/raw/box", b"", 4))[0], "container")
    note("exists container (stored owner 0x8000000000000000; clients see 0)")
    ok(a.call(OpCode.EXISTS, _str("/raw/box") + _b(False))[0], "exists box")
    note("createTTL")
    ok(a.call(OpCode.CREATETTL, _create("/raw/ttl", b"t", 5) + _q(60000))[0], "ttl")
    note("exists TTL node (stored owner carries the TTL; clients see 0)")
    ok(a.call(OpCode.EXISTS, _str("/raw/ttl") + _b(False))[0], "exists ttl")
    note("createTTL with a non-TTL mode -> BadArguments")
    a.call(OpCode.CREATETTL, _create("/raw/ttl2", b"t", 0) + _q(60000))
    note("whoAmI")
    ok(a.call(OpCode.WHOAMI)[0], "whoami")
    note("getAllChildrenNumber")
    ok(a.call(OpCode.GETALLCHILDRENNUMBER, _str("/raw"))[0], "allchildren")
    note("getEphemerals")
    ok(a.call(OpCode.GETEPHEMERALS, _str("/raw"))[0], "ephemerals")
    note("multiRead (getData, getChildren, missing)")
    body = (
        _i(OpCode.GETDATA) + _b(False) + _i(-1) + _str("/raw/empty") + _b(False)
        + _i(OpCode.GETCHILDREN) + _b(False) + _i(-1) + _str("/raw") + _b(False)
        + _i(OpCode.GETDATA) + _b(False) + _i(-1) + _str("/raw/nope") + _b(False)
        + _i(-1) + _b(True) + _i(-1)
    )  # fmt: skip
    ok(a.call(OpCode.MULTIREAD, body)[0], "multiRead")
    note("multi with create2 and setData")
    body = (
        _i(OpCode.CREATE2) + _b(False) + _i(-1) + _create("/raw/m", b"m", 0)
        + _i(OpCode.SETDATA) + _b(False) + _i(-1) + _str("/raw/m") + _buf(b"m2") + _i(-1)
        + _i(-1) + _b(True) + _i(-1)
    )  # fmt: skip
    ok(a.call(OpCode.MULTI, body)[0], "multi")
    note("empty multi")
    ok(a.call(OpCode.MULTI, _i(-1) + _b(True) + _i(-1))[0], "empty multi")
    note("addWatch persistent")
    ok(a.call(OpCode.ADDWATCH, _str("/raw/empty") + _i(0))[0], "addWatch")
    note("addWatch persistent recursive")
    ok(a.call(OpCode.ADDWATCH, _str("/raw") + _i(1))[0], "addWatch rec")
    note("setData under persistent watches -> notifications")
    ok(a.call(OpCode.SETDATA, _str("/raw/empty") + _buf(b"pw") + _i(-1))[0], "set")
    while len(a.events) < 1:  # one connection is one watcher: a single event
        a.wait_event()
    note("checkWatches")
    ok(a.call(OpCode.CHECKWATCHES, _str("/raw/empty") + _i(3))[0], "checkWatches")
    note("removeWatches")
    ok(a.call(OpCode.REMOVEWATCHES, _str("/raw/empty") + _i(3))[0], "removeWatches")
    note("removeWatches with none -> NoWatcher")
    a.call(OpCode.REMOVEWATCHES, _str("/raw/m") + _i(1))
    note("getChildren2 with watch")
    ok(a.call(OpCode.GETCHILDREN2, _str("/raw") + _b(True))[0], "ls2")
    note("sync")
    ok(a.call(OpCode.SYNC, _str("/raw"))[0], "sync")
    note("ping")
    ok(a.call(OpCode.PING, xid=-2)[0], "ping")
    note("getACL")
    ok(a.call(OpCode.GETACL, _str("/raw"))[0], "getACL")
    note("setACL with two entries")
    acl = _i(2) + _i(1) + _str("world") + _str("anyone") + _i(31) + _str("ip") + _str("127.0.0.1")
    ok(a.call(OpCode.SETACL, _str("/raw/m") + acl + _i(-1))[0], "setACL")
    note("setACL with invalid ACL -> InvalidACL")
    acl = _i(1) + _i(31) + _str("digest") + _str("nocolon")
    a.call(OpCode.SETACL, _str("/raw/m") + acl + _i(-1))
    sid, pw, zxid = a.session_id, a.passwd, a.last_zxid
    note("connection drop (session stays)")
    a.sock.close()

    proxy.client = "raw-reconnect"
    note("reconnect to existing session with readOnly byte false")
    b = RawClient(proxy.addr, session_id=sid, passwd=pw, last_zxid=zxid)
    note("setWatches (xid -8)")
    ok(
        b.call(
            OpCode.SETWATCHES,
            _q(1) + _strs(["/raw/m"]) + _strs(["/raw/later"]) + _strs(["/raw"]),
            xid=-8,
        )[0],
        "setWatches",
    )
    note("setWatches2 with a null vector -> MarshallingError (server NPE)")
    b.call(
        OpCode.SETWATCHES2,
        _q(1) + _strs([]) + _strs([]) + _strs([]) + _strs(["/raw/empty"]) + _strs(None),
        xid=-8,
    )
    note("setWatches2 (xid -8)")
    ok(
        b.call(
            OpCode.SETWATCHES2,
            _q(1) + _strs([]) + _strs([]) + _strs([]) + _strs(["/raw/empty"]) + _strs([]),
            xid=-8,
        )[0],
        "setWatches2",
    )
    note("create -> NodeCreated, NodeChildrenChanged")
    ok(b.call(OpCode.CREATE, _create("/raw/later", b"", 0))[0], "create later")
    note("delete")
    ok(b.call(OpCode.DELETE, _str("/raw/later") + _i(-1))[0], "delete later")
    note("auth digest")
    ok(b.call(OpCode.AUTH, _i(0) + _str("digest") + _buf(b"u:p"), xid=-4)[0], "auth")
    note("closeSession")
    b.close_session()

    proxy.client = "raw-badpw"
    note("reconnect to kazoo's closed session -> expired (timeout 0, session 0)")
    try:
        RawClient(proxy.addr, session_id=kazoo_session[0], passwd=kazoo_session[1])
    except (EOFError, OSError):
        pass

    proxy.client = "raw-ro"
    note("connect with readOnly byte true")
    c = RawClient(proxy.addr, read_only=True)
    note("auth unknown scheme -> AuthFailed, then the server closes the connection")
    try:
        c.call(OpCode.AUTH, _i(0) + _str("nosuch") + _buf(b"x"), xid=-4)
        c.recv()
    except (EOFError, OSError):
        pass
    c.sock.close()

    proxy.client = "raw-victim"
    note("connect (session about to get a wrong-password reconnect)")
    e = RawClient(proxy.addr)
    proxy.client = "raw-badpw"
    note("wrong password for a live session -> timeout 0, session 0")
    # ZooKeeperServer.processConnectRequest closes the session's current connection
    # (DisconnectReason.CLIENT_RECONNECT) *before* checking the password.
    try:
        d = RawClient(proxy.addr, session_id=e.session_id, passwd=b"\x01" * 16)
        d.recv()
    except (EOFError, OSError):
        pass
    e.sock.close()


def drive_cli_mt(proxy: RecordingProxy) -> bool:
    """A few commands through the C client, one connection each. False if not installed."""
    if not os.access(CLI_MT, os.X_OK):
        return False
    cmds = [
        "create /cli",
        "create2 /cli/c2",
        "set /cli hello",
        "get /cli",
        "ls /cli",
        "ls2 /cli",
        "exists /cli/c2",
        "delete /cli/c2",
        "sync /cli",
    ]
    for cmd in cmds:
        with proxy.lock:
            proxy.client = "cli_mt"
            proxy.note = f"cli_mt -c {cmd!r}"
        try:
            subprocess.run(
                [CLI_MT, "-h", proxy.hostport, "-c", cmd],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=10,
                check=False,
            )
        except subprocess.TimeoutExpired:
            print(f"cli_mt -c {cmd!r} did not exit; killed", file=sys.stderr)
    return True


# ------------------------------------------------------------------------------ annotation

REQUEST_BODY: dict[int, type[R.Record] | None] = {
    OpCode.CREATE: R.CreateRequest,
    OpCode.CREATE2: R.CreateRequest,
    OpCode.CREATECONTAINER: R.CreateRequest,
    OpCode.CREATETTL: R.CreateTTLRequest,
    OpCode.DELETE: R.DeleteRequest,
    OpCode.EXISTS: R.ExistsRequest,
    OpCode.GETDATA: R.GetDataRequest,
    OpCode.SETDATA: R.SetDataRequest,
    OpCode.GETACL: R.GetACLRequest,
    OpCode.SETACL: R.SetACLRequest,
    OpCode.GETCHILDREN: R.GetChildrenRequest,
    OpCode.GETCHILDREN2: R.GetChildren2Request,
    OpCode.SYNC: R.SyncRequest,
    OpCode.PING: None,
    OpCode.CHECK: R.CheckVersionRequest,
    OpCode.AUTH: R.AuthPacket,
    OpCode.SETWATCHES: R.SetWatches,
    OpCode.SETWATCHES2: R.SetWatches2,
    OpCode.CLOSESESSION: None,
    OpCode.WHOAMI: None,
    OpCode.ADDWATCH: R.AddWatchRequest,
    OpCode.CHECKWATCHES: R.CheckWatchesRequest,
    OpCode.REMOVEWATCHES: R.RemoveWatchesRequest,
    OpCode.GETALLCHILDRENNUMBER: R.GetAllChildrenNumberRequest,
    OpCode.GETEPHEMERALS: R.GetEphemeralsRequest,
    OpCode.RECONFIG: R.ReconfigRequest,
}

#: The raw client's table (FinalRequestProcessor's response records), plus the ErrorResponse
#: that ends a failed multi op.
RESPONSE_BODY: dict[int, type[R.Record] | None] = {
    **RESPONSE_TYPES,
    OpCode.ERROR: R.ErrorResponse,
}


class AnnotationError(Exception):
    pass


def _walk(payload: bytes, names: list[str], pos: int, cls: type[R.Record]) -> tuple[Any, int]:
    rec, pos = cls.decode_from(payload, pos)
    names.append(cls.__name__)
    return rec, pos


def _walk_multi(payload: bytes, names: list[str], pos: int, table: dict[int, Any]) -> int:
    while True:
        typ, done, _, rec, pos = multi.read_op(payload, pos, table)
        names.append("MultiHeader")
        if done:
            return pos
        if typ not in table:
            raise AnnotationError(f"no record for multi op type {typ}")
        if rec is not None:
            names.append(type(rec).__name__)


@dataclass
class _ConnState:
    seen_c2s: bool = False
    seen_s2c: bool = False
    read_only_byte: bool = False
    xids: dict[int, int] = field(default_factory=dict)


def _walk_connect(p: bytes, names: list[str], out: dict[str, Any], record: type[R.Record]) -> int:
    """A connect frame: the ConnectRequest / ConnectResponse, then the optional trailing
    readOnly ``bool`` (named in ``names`` when present); returns the position after them."""
    _, pos = _walk(p, names, 0, record)
    out.update(op="connect", opcode=None)
    if len(p) - pos == 1:
        names.append("bool")
        pos += 1
    return pos


def _annotate(f: Captured, st: _ConnState) -> dict[str, Any]:
    p = f.payload
    names: list[str] = []
    out: dict[str, Any] = {}
    if f.direction == "c2s" and not st.seen_c2s:
        st.seen_c2s = True
        pos = _walk_connect(p, names, out, R.ConnectRequest)
        st.read_only_byte = len(names) == 2
    elif f.direction == "s2c" and not st.seen_s2c:
        st.seen_s2c = True
        pos = _walk_connect(p, names, out, R.ConnectResponse)
        if (len(names) == 2) != st.read_only_byte:
            raise AnnotationError("server readOnly byte does not mirror the client's")
    elif f.direction == "c2s":
        hdr, pos = _walk(p, names, 0, R.RequestHeader)
        st.xids[hdr.xid] = hdr.type
        out.update(op=OpCode(hdr.type).name, opcode=hdr.type, xid=hdr.xid)
        if hdr.type in (OpCode.MULTI, OpCode.MULTIREAD):
            pos = _walk_multi(p, names, pos, REQUEST_BODY)
        else:
            body = REQUEST_BODY[hdr.type]
            if body is not None:
                _, pos = _walk(p, names, pos, body)
    else:
        rh, pos = _walk(p, names, 0, R.ReplyHeader)
        out.update(xid=rh.xid, zxid=rh.zxid, err=rh.err)
        if rh.xid == -1:
            out.update(op="NOTIFICATION", opcode=OpCode.NOTIFICATION)
            _, pos = _walk(p, names, pos, R.WatcherEvent)
        else:
            op = st.xids.pop(rh.xid)
            out.update(op=OpCode(op).name, opcode=op)
            if pos < len(p):
                if op in (OpCode.MULTI, OpCode.MULTIREAD):
                    pos = _walk_multi(p, names, pos, RESPONSE_BODY)
                else:
                    body = RESPONSE_BODY[op]
                    if body is None:
                        raise AnnotationError(f"unexpected body after {OpCode(op).name} reply")
                    _, pos = _walk(p, names, pos, body)
    if pos != len(p):
        raise AnnotationError(f"{names} leave {len(p) - pos} bytes of {p.hex()}")
    out["records"] = names
    return out


def annotate(frames: list[Captured]) -> list[dict[str, Any]]:
    states: dict[int, _ConnState] = {}
    result = []
    for f in sorted(frames, key=lambda f: f.seq):
        st = states.setdefault(f.conn, _ConnState())
        try:
            ann = _annotate(f, st)
        except Exception as e:
            raise AnnotationError(
                f"frame {f.seq} conn {f.conn} {f.direction} ({f.note}): {e}: {f.payload.hex()}"
            ) from e
        result.append(
            {
                "seq": f.seq,
                "conn": f.conn,
                "client": f.client,
                "dir": f.direction,
                "note": f.note,
                **ann,
                "hex": f.payload.hex(),
            }
        )
    return result


# ------------------------------------------------------------------------------------ main


def capture(with_cli_mt: bool = True) -> dict[str, Any]:
    import kazoo

    with zookeeper_server() as port:
        proxy = RecordingProxy(port)
        try:
            sess = drive_kazoo(proxy)
            drive_raw(proxy, sess)
            cli = with_cli_mt and drive_cli_mt(proxy)
        finally:
            proxy.close()
        if proxy.errors:
            raise RuntimeError("; ".join(proxy.errors))
        frames = list(proxy.frames)
    return {
        "about": (
            "Frames captured by compat/capture/golden.py between stock clients and a real "
            "Apache ZooKeeper server, through a recording proxy. 'hex' is the frame payload "
            "without its 4-byte length prefix, exactly as sent (nothing normalised). "
            "'records' lists the Jute records that make up the payload, in order; 'bool' is "
            "the trailing readOnly byte of ConnectRequest/ConnectResponse."
        ),
        "server": zk_version(),
        "clients": {"kazoo": kazoo.__version__, "cli_mt": bool(cli)},
        "frames": annotate(frames),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--no-cli-mt", action="store_true")
    args = ap.parse_args(argv)
    data = capture(with_cli_mt=not args.no_cli_mt)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(data['frames'])} frames -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
