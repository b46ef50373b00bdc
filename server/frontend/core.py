"""The front end: client connections, handshake, auth, reads, per-session FIFO, replies. Pure.

Every server role has one (standalone, leader, follower, observer); ZooKeeper's
``NIOServerCnxn`` + the ``ZooKeeperServer`` connection handling + ``FinalRequestProcessor``.

Theory of operation
-------------------
The Trio shell hands the front end bytes received on a connection
(:meth:`FrontEnd.data_received`) together with the current times; it parses frames and writes
replies and watch events into the output buffers of the connections concerned, listing them in
:attr:`FrontEnd.dirty` for the shell to flush. A connection is listed whenever the shell has
something to do with it: output queued, closed, throttled, or input left for a later turn (a
write read and submitted leaves it unlisted until its reply is queued). Time enters only as
arguments (``now`` monotonic ms for sessions and latency, ``wall`` ms for txn headers), so it
runs the same under a simulated clock.

What changes state goes to the :class:`WritePath` (the sequencer on a standalone server or
leader, a forwarder to the leader on a learner): writes, closeSession, new sessions, session
touches and revalidation on reconnect. The front end never applies a txn: the role applies each
committed txn to the :class:`~trizk.storage.tree.replica.Replica`, then calls
:meth:`FrontEnd.on_committed`, which fires the watches and answers the request *matched by
(session id, cxid)* at the head of that session's FIFO -- whichever server the txn came from.

Requests of a connection are answered strictly in order (ZooKeeper's per-session FIFO):

* A read is answered at once from the replica unless the connection has writes in flight; then
  it waits in the connection's FIFO behind them and is answered right after the write before it
  commits, against the tree as of that commit.
* A write is queued in the FIFO as a mark (cxid, opcode) and submitted to the write path; its
  reply goes out when its txn commits. Watch notifications of a txn are queued *before* the reply
  of the write that caused them.

Every reply carries the zxid of the last txn applied to the tree when it is sent, as
``FinalRequestProcessor`` does; a failed write still consumes a zxid (an error txn).

In read-only mode (:attr:`FrontEnd.read_only`, set by the read-only role,
:mod:`trizk.server.roles.readonly`) only clients that asked ``canBeReadOnly`` are served, the
ConnectResponse says ``readOnly``, and writes and syncs are answered NOTREADONLY in their
session's order (``ReadOnlyRequestProcessor``).
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from trizk.jute import records as r
from trizk.jute.codes import Code, EventType, OpCode, Perms, Xid
from trizk.jute.framing import FrameTooLarge
from trizk.jute.primitives import JuteDecodeError
from trizk.server.auth import acl as aclmod
from trizk.server.auth import sasl as saslmod
from trizk.server.common.coreconfig import CoreConfig, ServerStats
from trizk.server.frontend.connection import ClientConnection, State
from trizk.server.frontend.reads import FAST_READS, READ_OPS, ReadContext, ReadError, multi_read
from trizk.server.frontend.requests import (
    EMPTY_MULTI_RESPONSE,
    WRITE_RESULTS,
    decode_body,
    multi_response,
    multi_without_txn,
    multi_without_txn_39,
)
from trizk.server.frontend.watches import WatchManager
from trizk.server.writes.localsessions import LocalSessions
from trizk.server.writes.prep import WRITE_OPS
from trizk.server.writes.sequencer import WriteRequest
from trizk.server.writes.sessions import generate_password
from trizk.storage.tree.datatree import CONFIG_NODE, ApplyResult, DataTree
from trizk.storage.tree.replica import Replica

log = logging.getLogger("trizk.server")

R = TypeVar("R", bound=r.Record)

_HDR = struct.Struct(">ii")
#: a Jute buffer's length (GetDataResponse of a reconfig)
_BUFFER_LEN = struct.Struct(">i")

# Enum members the request path compares with, as module constants: on Python 3.11 looking
# one up on its class costs ~0.1 us (EnumType.__getattr__ keeps the lookup off the fast path).
_HANDSHAKE = State.HANDSHAKE
_AUTH, _SASL, _SYNC, _PING = OpCode.AUTH, OpCode.SASL, OpCode.SYNC, OpCode.PING
_MULTI, _MULTIREAD, _RECONFIG = OpCode.MULTI, OpCode.MULTIREAD, OpCode.RECONFIG
_CREATESESSION, _CLOSESESSION, _ERROR = OpCode.CREATESESSION, OpCode.CLOSESESSION, OpCode.ERROR
_READ_PERM = int(Perms.READ)
_CHECK = int(OpCode.CHECK)
_DELETECONTAINER = int(OpCode.DELETECONTAINER)
_PING_OK = struct.Struct(">iiqi")

#: Opcodes ``Request.isValid`` accepts; anything else is UNIMPLEMENTED and the connection closes.
VALID_OPS = frozenset(
    set(WRITE_OPS)
    | set(READ_OPS)
    | {
        OpCode.PING,
        OpCode.MULTI,
        OpCode.MULTIREAD,
        OpCode.CLOSESESSION,
        OpCode.CREATESESSION,
    }
)

#: ``lastOp`` names shown by ``cons`` (FinalRequestProcessor).
OP_NAMES: dict[int, str] = {
    OpCode.PING: "PING",
    OpCode.CREATESESSION: "SESS",
    OpCode.MULTI: "MULT",
    OpCode.MULTIREAD: "MLTR",
    OpCode.CREATE: "CREA",
    OpCode.CREATE2: "CREA",
    OpCode.CREATETTL: "CREA",
    OpCode.CREATECONTAINER: "CREA",
    OpCode.DELETE: "DELE",
    OpCode.DELETECONTAINER: "DELE",
    OpCode.SETDATA: "SETD",
    OpCode.RECONFIG: "RECO",
    OpCode.SETACL: "SETA",
    OpCode.CLOSESESSION: "CLOS",
    OpCode.SYNC: "SYNC",
    OpCode.CHECK: "CHEC",
    OpCode.EXISTS: "EXIS",
    OpCode.GETDATA: "GETD",
    OpCode.SETWATCHES: "SETW",
    OpCode.SETWATCHES2: "STW2",
    OpCode.ADDWATCH: "ADDW",
    OpCode.GETACL: "GETA",
    OpCode.GETCHILDREN: "GETC",
    OpCode.GETCHILDREN2: "GETC",
    OpCode.GETALLCHILDRENNUMBER: "GETACN",
    OpCode.CHECKWATCHES: "CHKW",
    OpCode.REMOVEWATCHES: "REMW",
    OpCode.GETEPHEMERALS: "GETE",
    OpCode.WHOAMI: "HOMI",
}


class WritePath(Protocol):
    """Where the front end sends what changes state: the
    :class:`~trizk.server.writes.sequencer.Sequencer`
    on a standalone server or leader; on a learner, a forwarder to the leader."""

    #: True on a learner: a client's sync goes to the leader and is answered when the leader's
    #: SYNC comes back (:meth:`FrontEnd.on_synced`); otherwise sync is answered as a read.
    forwards_sync: bool

    #: the member's local sessions (``localSessionsEnabled``), else None: a new session that
    #: is local is answered at once, without a txn
    local_sessions: LocalSessions | None

    def submit(self, req: WriteRequest, now: int, wall: int) -> int | None:
        """Send ``req`` on. None: the commit of its txn answers it; 0: answered without a txn,
        in its session's order (a local session's closeSession); another code: if its txn
        is an error txn, the answer carries this code instead (a learner's local session's
        ephemeral create: EPHEMERALONLOCALSESSION, ``FinalRequestProcessor``)."""
        ...

    def create_session(self, timeout: int, now: int, wall: int) -> int: ...

    def touch(self, session_id: int, now: int, timeout: int | None = None) -> bool: ...

    def revalidate(
        self, session_id: int, timeout: int, now: int, done: Callable[[bool | None], None]
    ) -> None:
        """Whether a reconnecting client's session is alive: ``done(True/False)``, or
        ``done(None)`` when it cannot be told now (the connection is closed unanswered)."""
        ...


class ReadOnlySessions(Protocol):
    """What a front end in read-only mode asks of its role's sessions
    (:class:`~trizk.server.roles.readonly.ReadOnlyWritePath`)."""

    def is_global(self, session_id: int) -> bool:
        """A session created through a quorum: its reconnect is refused."""
        ...

    def is_local(self, session_id: int) -> bool:
        """A local session: its createSession and closeSession are not refused."""
        ...

    def close(self, session_id: int) -> None:
        """A local session's closeSession."""
        ...


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class _WriteMark:
    """A write of a connection in flight, in its FIFO: answered when (session, cxid) commits."""

    cxid: int
    op: int
    received: int
    #: the write path's answer (WritePath.submit): None, 0 (answered without a txn) or the
    #: error code that replaces an error txn's
    answer: int | None

    def __init__(
        self,
        cxid: int,
        op: int,
        received: int,
        answer: int | None = None,
    ) -> None:
        self.cxid = cxid
        self.op = op
        self.received = received
        self.answer = answer


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class _SyncMark:
    """A sync forwarded to the leader, answered once the leader's SYNC for it arrives."""

    xid: int
    path: str
    received: int
    done: bool

    def __init__(
        self,
        xid: int,
        path: str,
        received: int,
        done: bool = False,
    ) -> None:
        self.xid = xid
        self.path = path
        self.received = received
        self.done = done


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class _DeferredRead:
    """A read waiting in its connection's FIFO behind a write."""

    xid: int
    op: int
    frame: bytes
    received: int

    def __init__(
        self,
        xid: int,
        op: int,
        frame: bytes,
        received: int,
    ) -> None:
        self.xid = xid
        self.op = op
        self.frame = frame
        self.received = received


class FrontEnd:
    """Client connections of one server, any role; see the module docstring."""

    def __init__(
        self,
        config: CoreConfig,
        replica: Replica,
        write_path: WritePath,
        stats: ServerStats,
    ) -> None:
        self.config = config
        self.replica = replica
        self.write_path = write_path
        self.watches = WatchManager(mode_sets=config.zk39)
        self.connections: dict[int, ClientConnection] = {}
        self.session_conn: dict[int, ClientConnection] = {}
        #: session id -> (connection, received) waiting for its createSession txn to commit
        self.handshaking: dict[int, tuple[ClientConnection, int]] = {}
        self.dirty: list[ClientConnection] = []
        self.stats = stats
        self.watches.stats = stats
        #: every request passes a SyncRequestProcessor (standalone), not only the txns
        self.counts_sync = False
        #: wall - monotonic ms as last given (PROPAGATION_LATENCY compares wall times)
        self._wall_offset = 0
        #: requests taken in and not answered yet, all connections (``getInProcess``); while
        #: over ``globalOutstandingLimit``, a connection with requests of its own in process
        #: stops being read (ServerCnxn.incrOutstandingAndCheckThrottle)
        self.in_process = 0
        #: False while the server has no role that serves clients (an ensemble member LOOKING):
        #: handshakes are refused, four-letter words still answered
        self.serving = True
        #: read-only mode (ReadOnlyZooKeeperServer): the role's sessions, or None
        self.read_only: ReadOnlySessions | None = None
        #: conn.id -> FIFO of writes in flight and deferred reads
        self._fifo: dict[int, deque[_WriteMark | _SyncMark | _DeferredRead]] = {}
        #: syncs forwarded to the leader, oldest first (FollowerZooKeeperServer.pendingSyncs)
        self._pending_syncs: deque[tuple[ClientConnection, _SyncMark]] = deque()
        #: answers a four-letter word on a fresh connection (set by the shell), or None
        self.four_letter: Callable[[str, ClientConnection, bytes], bytes | None] | None = None
        self.is_four_letter: Callable[[bytes], str | None] = lambda b: None
        self.auth_config = (
            config.auth
            if config.auth is not None
            else aclmod.AuthConfig(super_digest=config.super_digest)
        )
        #: DIGEST-MD5 nonces (randomness enters here; tests may replace it)
        self.sasl_nonce: Callable[[], str] = saslmod.random_nonce

    @property
    def tree(self) -> DataTree:
        return self.replica.tree

    def restored(self) -> None:
        """The replica's tree was replaced (the AdminServer's ``restore``): the watches lived
        in the old ``DataTree``'s watch managers, so none is left (no notification is sent
        for them, ever); connections and sessions stay."""
        self.watches = WatchManager(mode_sets=self.config.zk39)
        self.watches.stats = self.stats

    # ------------------------------------------------------------------ connections
    def connection_made(self, conn: ClientConnection) -> None:
        self.connections[conn.id] = conn
        conn.auth = aclmod.new_connection_ids(self.auth_config, conn.remote[0])

    def connection_lost(self, conn: ClientConnection) -> None:
        """The socket is gone: forget the connection and its watches (the session lives on)."""
        conn.close(conn.close_reason or "connection lost")
        self.in_process -= conn.outstanding
        conn.outstanding = 0
        self.connections.pop(conn.id, None)
        self._fifo.pop(conn.id, None)
        self.watches.remove_watcher(conn)
        sid = conn.session_id
        if sid and self.session_conn.get(sid) is conn:
            del self.session_conn[sid]
        if sid and self.handshaking.get(sid, (None,))[0] is conn:
            del self.handshaking[sid]

    def close(self, conn: ClientConnection, reason: str) -> None:
        """Close ``conn`` from outside (connection expiry, shutdown); its output is flushed."""
        self._close(conn, reason)

    def _close(self, conn: ClientConnection, reason: str) -> None:
        if not conn.closed:
            # ZooKeeper 3.8 logs a connection's close at DEBUG (NIOServerCnxn.close)
            log.debug("closing connection %s: %s", conn, reason)
        conn.close(reason)
        self._mark(conn)

    def _mark(self, conn: ClientConnection) -> None:
        dirty = self.dirty
        if not dirty or dirty[-1] is not conn:  # a request read, then its reply: once
            dirty.append(conn)

    # ------------------------------------------------------------------ input
    def data_received(
        self,
        conn: ClientConnection,
        data: bytes,
        now: int,
        wall: int,
        max_frames: int | None = None,
        max_output: int | None = None,
    ) -> bool:
        """Take ``data`` and process the complete frames buffered. With ``max_frames`` (a turn's
        budget) or ``max_output`` (the shell's soft output limit), stop after that many frames,
        or once that much output is queued; True means stopped so with input left, to be
        processed by a later call (with no data). The rest of the time: False."""
        conn.last_io = now
        m = self.stats.metrics
        m.clock.advance(now)
        self._wall_offset = wall - now
        conn.receive_data(data)
        budget = max_frames if max_frames is not None else -1
        while not conn.closed and not conn.throttled:
            if budget == 0 or (max_output is not None and len(conn.out) > max_output):
                self._mark(conn)  # the shell gives the rest a later turn
                return conn.decoder.buffered > 0
            if conn.state is _HANDSHAKE and conn.decoder.buffered >= 4:
                word = self.is_four_letter(conn.decoder.peek(4))
                if word is not None:
                    if word == "stmk":  # SetTraceMaskCommand reads a long after the word
                        if conn.decoder.buffered < 12:
                            return False
                        self._four_letter(conn, word, conn.decoder.peek(12)[4:])
                    else:
                        self._four_letter(conn, word, b"")
                    return False
            try:
                frame = conn.next_frame()
            except FrameTooLarge as e:
                # NIOServerCnxn.readLength: "Len error" -> the connection is closed.
                log.warning("%s: %s, closing connection", conn, e)
                self._close(conn, str(e))
                return False
            if frame is None:
                break
            budget -= 1
            conn.packets_received += 1
            self.stats.packets_received += 1
            m.bytes_received_count += 4 + len(frame)  # ServerCnxn.packetReceived
            if conn.state is _HANDSHAKE:
                self._connect(conn, frame, now, wall)
                if conn.state is _HANDSHAKE and not conn.closed:
                    # The session is being created or revalidated. ZooKeeper reads no more of
                    # the connection meanwhile (processConnectRequest: cnxn.disableRecv(), until
                    # finishSessionInit's enableRecv()): what follows the ConnectRequest is read
                    # as requests once the ConnectResponse is out; a second ConnectRequest is
                    # then a request of an unknown type (UNIMPLEMENTED, then closed).
                    conn.throttled = True
                    self._mark(conn)
                    return False
            else:
                self._request(conn, frame, now, wall)
                if self._should_throttle(conn):
                    # The rest stays buffered; the shell reads no more and calls again with
                    # no data once ``throttled`` is cleared.
                    conn.throttled = True
                    self._mark(conn)
                    return False
        if conn.out or conn.closed or conn.throttled:
            # Output to send, or a connection to close or to stop reading: the shell looks at
            # it. (A write waiting for its commit has given the shell nothing to do yet.)
            self._mark(conn)
        return False

    def _should_throttle(self, conn: ClientConnection) -> bool:
        # ZooKeeperServer.shouldThrottle(outstandingCount)
        return self.in_process > self.config.global_outstanding_limit and conn.outstanding > 0

    def _finished(self, conn: ClientConnection) -> None:
        """One of ``conn``'s requests was answered (decrOutstandingAndCheckThrottle)."""
        conn.outstanding -= 1
        self.in_process -= 1
        if conn.throttled and not self._should_throttle(conn):
            conn.throttled = False
            self._mark(conn)

    def _four_letter(self, conn: ClientConnection, word: str, arg: bytes) -> None:
        # NIOServerCnxn.checkFourLetterWord: packetReceived(4)
        self.stats.packets_received += 1
        self.stats.metrics.bytes_received_count += 4
        out = self.four_letter(word, conn, arg) if self.four_letter is not None else None
        if out:
            conn.send_raw(out)
        self._close(conn, f"four-letter word {word}")

    # ------------------------------------------------------------------ handshake
    def _connect(self, conn: ClientConnection, frame: bytes, now: int, wall: int) -> None:
        try:
            req, pos = r.ConnectRequest.decode_from(frame, 0)
        except JuteDecodeError as e:
            log.warning("%s: bad ConnectRequest (%s), closing connection", conn, e)
            self._close(conn, "bad ConnectRequest")
            return
        if not self.serving:
            # NIOServerCnxn: "ZooKeeperServer not running" -> the connection is closed
            log.info("refusing %s: this server is not serving clients (no quorum yet)", conn)
            self._close(conn, "ZooKeeperServer not running")
            return
        m = self.stats.metrics
        # ZooKeeperServer.processConnectRequest; no connection throttle: no token deficit
        m.connection_token_deficit.add(0)
        m.connection_request_count += 1
        # ZooKeeperServer.processConnectRequest: a client without the readOnly byte is "old".
        conn.old_client = pos >= len(frame)
        ro = self.read_only
        if ro is not None and (conn.old_client or frame[pos] == 0):
            log.info("Refusing session request for not-read-only client %s", conn)
            self._close(conn, "not a read-only client")
            return
        if req.lastZxidSeen > self.tree.last_processed_zxid:
            log.info(
                "Refusing session request for client %s as it has seen zxid 0x%x our last zxid "
                "is 0x%x client must try another server",
                conn,
                req.lastZxidSeen,
                self.tree.last_processed_zxid,
            )
            self._close(conn, "client has seen a newer zxid")
            return
        timeout = min(max(req.timeOut, self.config.min_timeout), self.config.max_timeout)
        conn.session_timeout = timeout
        if req.sessionId == 0:
            self._queued()  # the createSession request
            sid = self.write_path.create_session(timeout, now, wall)
            conn.session_id = sid
            local = self.write_path.local_sessions
            if local is not None and local.is_local(sid):
                # a local session: no txn, answered now (FinalRequestProcessor, hdr null)
                self._finish_session_init(conn, True)
                zxid = self.tree.last_processed_zxid
                self._replied(conn, _CREATESESSION, 0, zxid, now, now)
                return
            # answered when the createSession txn commits (on_committed)
            self.handshaking[sid] = (conn, now)
            if ro is not None:
                self._read_only_session(conn, ro, sid, now)
            return
        sid = req.sessionId
        if ro is not None and ro.is_global(sid):
            # ReadOnlyZooKeeperServer.validateSession
            log.info("Refusing global session reconnection in RO mode %s", conn)
            self._close(conn, "global session in read-only mode")
            return
        old = self.session_conn.get(sid)
        if old is not None and old is not conn:
            # ZooKeeper closes the session's previous connection (CLIENT_RECONNECT) first.
            self._close(old, "client reconnected elsewhere")
            self.connection_lost(old)
        conn.session_id = sid
        m.connection_revalidate_count += 1  # reopenSession
        if (req.passwd or b"") != generate_password(sid):
            self._finish_session_init(conn, False)
            return
        self.write_path.revalidate(
            sid, timeout, now, lambda valid: self._finish_session_init(conn, valid)
        )

    def _read_only_session(
        self, conn: ClientConnection, ro: ReadOnlySessions, sid: int, now: int
    ) -> None:
        """A read-only server's createSession, answered at once: a local session's
        ConnectResponse, or ``ReadOnlyRequestProcessor``'s NOTREADONLY reply (xid 0) where
        the ConnectResponse should be; the connection is then left open and unread (as
        ZooKeeper 3.8.0 leaves it)."""
        received = self.handshaking.pop(sid)[1]
        if ro.is_local(sid):
            self._finish_session_init(conn, True)
            self._replied(conn, _CREATESESSION, 0, self.tree.last_processed_zxid, received, now)
            return
        zxid = self.tree.last_processed_zxid
        size = conn.send_reply(0, zxid, Code.NOTREADONLY)
        self._replied(conn, _CREATESESSION, 0, zxid, received, now, size=size)

    def _finish_session_init(self, conn: ClientConnection, valid: bool | None) -> None:
        sid = conn.session_id
        if conn.closed:
            return
        if valid is None:
            self._close(conn, f"session 0x{sid:x} cannot be validated now (no leader)")
            return
        conn.throttled = False  # finishSessionInit: cnxn.enableRecv() (see data_received)
        rsp = r.ConnectResponse(
            0,
            conn.session_timeout if valid else 0,
            sid if valid else 0,
            generate_password(sid) if valid else bytes(16),
        ).encode()
        if not conn.old_client:
            rsp += b"\x01" if self.read_only is not None else b"\x00"  # readOnly
        conn.send_frame(rsp)
        conn.packets_sent += 1
        self._mark(conn)
        if valid:
            conn.state = State.OPEN
            self.session_conn[sid] = conn
            # ZooKeeperServer.finishSessionInit: "Established session" at DEBUG
            log.debug(
                "session 0x%x established for %s, timeout %d", sid, conn, conn.session_timeout
            )
        else:
            log.info("invalid session 0x%x for client %s, probably expired", sid, conn)
            self._close(conn, "session expired or bad password")

    # ------------------------------------------------------------------ requests
    def _request(self, conn: ClientConnection, frame: bytes, now: int, wall: int) -> None:
        try:
            xid, op = _HDR.unpack_from(frame, 0)
        except struct.error:
            log.warning("%s: request shorter than its header, closing connection", conn)
            self._close(conn, "truncated request header")
            return
        alive = self.write_path.touch(conn.session_id, now)
        if op == _AUTH:
            self._auth(conn, xid, frame)
            return
        if op == _SASL:
            self._sasl(conn, xid, frame)
            return
        if self.auth_config.enforced_on(conn.auth):
            self._refuse_unauthenticated(conn, xid)
            return
        if not alive:
            # ZooKeeperServer.submitRequestNow: touch() throws MissingSessionException for a
            # session its tracker does not hold (or is closing), and the request is dropped
            # unanswered -- pings too, so the client times out, reconnects and is told its
            # session expired (after the AdminServer's restore, every session the snapshot
            # lacks).
            log.debug("Dropping request: no session with sessionid 0x%x", conn.session_id)
            return
        if op not in VALID_OPS or (op == _CHECK and self.config.zk39):
            # UnimplementedRequestProcessor: reply UNIMPLEMENTED with zxid -1, then close.
            # 3.9's Request.isValid no longer takes a check on its own (3.8.0 answers a failing
            # one and never a successful one, which trizk answers OK: docs/compatibility.md).
            log.warning("%s: received packet of unknown type %d", conn, op)
            conn.send_reply(xid, -1, Code.UNIMPLEMENTED)
            self._close(conn, f"unknown opcode {op}")
            return
        conn.outstanding += 1
        self.in_process += 1
        self._queued()
        fifo = self._fifo.get(conn.id)
        if (
            op == _SYNC
            and self.write_path.forwards_sync
            and self._forward_sync(conn, xid, frame, now, wall)
        ):
            return
        if (
            op in READ_OPS
            or op in _NO_TXN_OPS
            or (self.read_only is not None and op in _NOT_READ_ONLY)
            or (op == _RECONFIG and _bad_reconfig(frame))
            or (op == _MULTI and not self.config.zk39 and multi_without_txn(frame))
            or (op == _MULTI and self.config.zk39 and multi_without_txn_39(frame))
            or (self.config.zk39 and _bad_write_39(op, frame))
        ):
            if fifo:
                fifo.append(_DeferredRead(xid, op, frame, now))
            else:
                self._read(conn, xid, op, frame, now, now)
            return
        self._write(conn, xid, op, frame, now, wall)

    def _queued(self) -> None:
        """A request enters the pipeline (``PrepRequestProcessor.processRequest``; a learner
        forwards it to its leader's instead; standalone, ``SyncRequestProcessor`` sees it too)."""
        if not self.write_path.forwards_sync:
            m = self.stats.metrics
            m.prep_processor_request_queued += 1
            if self.counts_sync:
                m.sync_processor_request_queued += 1

    # -- authentication (ZooKeeperServer.processPacket / processSasl): answered at once,
    # -- outside the pipeline, zxid 0; the ids belong to the connection (acl.AuthInfo).
    def _decode_or_close(self, conn: ClientConnection, cls: type[R], frame: bytes) -> R | None:
        """The body of an auth/sasl packet; one that does not decode closes the connection
        (ZooKeeperServer.processPacket's IOException)."""
        try:
            return decode_body(cls, frame)
        except JuteDecodeError as e:
            log.warning("%s: bad %s (%s), closing connection", conn, cls.__name__, e)
            self._close(conn, f"bad {cls.__name__}")
            return None

    def _auth(self, conn: ClientConnection, xid: int, frame: bytes) -> None:
        pkt = self._decode_or_close(conn, r.AuthPacket, frame)
        if pkt is None:
            return
        scheme = pkt.scheme or ""
        ids = aclmod.authenticate(
            scheme,
            pkt.auth,
            conn.remote[0],
            config=self.auth_config,
            x509_subject=conn.x509_subject,
        )
        if ids is None:
            if not self.auth_config.has_provider(scheme):
                log.warning(
                    "No authentication provider for scheme: %s has %s",
                    scheme,
                    " ".join(self.auth_config.providers()),
                )
            else:
                log.warning("Authentication failed for scheme: %s", scheme)
            self.stats.response_sent(conn.send_reply(xid, 0, Code.AUTHFAILED))
            self._close(conn, "authentication failed")
            return
        for i in ids:
            conn.auth.add(i)
        log.info("Session 0x%x: auth success for scheme %s", conn.session_id, scheme)
        self.stats.response_sent(conn.send_reply(xid, 0, Code.OK))

    def _refuse_unauthenticated(self, conn: ClientConnection, xid: int) -> None:
        """``AuthenticationHelper.enforceAuthentication``: a request (any but auth and sasl:
        pings and closeSession too) on a connection with no id of an enforced scheme is
        answered SESSIONCLOSEDREQUIRESASLAUTH (zxid 0, no body) and the connection closed
        (``sendCloseSession``; the session itself lives on until it expires)."""
        cfg = self.auth_config
        log.error(
            "Client authentication scheme(s) [%s] does not match with any of the expected "
            "authentication scheme [%s], closing session.",
            ", ".join(scheme for scheme, _ in conn.auth),
            ", ".join(cfg.enforce_schemes),
        )
        size = conn.send_reply(xid, 0, Code.SESSIONCLOSEDREQUIRESASLAUTH)
        self.stats.response_sent(size)
        self._close(conn, "authentication required (zookeeper.enforce.auth.schemes)")

    def _sasl(self, conn: ClientConnection, xid: int, frame: bytes) -> None:
        req = self._decode_or_close(conn, r.GetSASLRequest, frame)
        if req is None:
            return
        if req.token is None:
            # processSasl logs clientToken.length before its try: a null token's
            # NullPointerException escapes and the connection is closed.
            log.warning("%s: SASL packet with a null token, closing connection", conn)
            self._close(conn, "null SASL token")
            return
        token: bytes | None = None
        sasl_cfg = self.config.sasl
        if sasl_cfg is None:
            # no login configured: cnxn.zooKeeperSaslServer is null, the NPE is caught and
            # the client gets OK with a null token
            log.error("cnxn.saslServer is null: no SASL login is configured")
        else:
            server = conn.sasl
            if not isinstance(server, (saslmod.DigestMD5Server, saslmod.GssapiServer)):
                server = conn.sasl = self._new_sasl_server(sasl_cfg)
            try:
                if server is None:
                    # SecurityUtils.createSaslServer returned null: the NPE is caught, OK
                    log.error("cnxn.saslServer is null: no SASL server for this connection")
                    token = None
                else:
                    token = server.evaluate(req.token or b"")
                if server is not None and server.complete and server.authorization_id is not None:
                    log.info(
                        "Session 0x%x: adding SASL authorization for authorizationID: %s",
                        conn.session_id,
                        server.authorization_id,
                    )
                    for i in aclmod.sasl_ids(self.auth_config, server.authorization_id):
                        conn.auth.add(i)
            except saslmod.SaslError as e:
                log.warning("Client %s failed to SASL authenticate: %s", conn, e)
                required = self.auth_config.sasl_auth_required
                if required or not sasl_cfg.allow_failed_clients:
                    if required:
                        # (sic: ZooKeeper's spelling and missing blank)
                        log.warning(
                            "Closing client connection due to server requires client SASL "
                            "authenticaiton,but client SASL authentication has failed, or "
                            "client is not configured with SASL authentication."
                        )
                        err = Code.SESSIONCLOSEDREQUIRESASLAUTH
                    else:
                        log.warning("Closing client connection due to SASL authentication failure.")
                        err = Code.AUTHFAILED
                    size = conn.send_reply(xid, 0, err, r.SetSASLResponse(None))
                    self.stats.response_sent(size)
                    self._close(conn, "SASL authentication failed")
                    return
                log.warning("Maintaining client connection despite SASL authentication failure.")
        self.stats.response_sent(conn.send_reply(xid, 0, Code.OK, r.SetSASLResponse(token)))

    def _new_sasl_server(
        self, cfg: saslmod.SaslServerConfig
    ) -> saslmod.DigestMD5Server | saslmod.GssapiServer | None:
        """``SecurityUtils.createSaslServer``: GSSAPI when the login has a Kerberos principal
        (the shell's acceptor), else DIGEST-MD5."""
        if cfg.kerberos is None:
            return saslmod.DigestMD5Server(cfg, self.sasl_nonce())
        if cfg.acceptor is None:
            return None
        try:
            return saslmod.GssapiServer(cfg, cfg.acceptor())
        except saslmod.GssError as e:
            log.error(
                "Zookeeper Server failed to create a SaslServer to interact with a client "
                "during session initiation: %s",
                e,
            )
            return None

    def _auth_ids(self, session_id: int, conn: ClientConnection) -> list[tuple[str, str]]:
        return conn.auth

    def _read(
        self, conn: ClientConnection, xid: int, op: int, frame: bytes, received: int, now: int
    ) -> None:
        zxid = self.tree.last_processed_zxid
        self._finished(conn)
        if self.read_only is not None and op in _NOT_READ_ONLY:
            self._read_only_refusal(conn, xid, op, received, now)
            return
        if op == _PING:
            size = conn.send_reply(Xid.PING, zxid, 0)
            self._replied(conn, op, xid, zxid, received, now, size=size)
            return
        fast = FAST_READS.get(op)
        if fast is not None:
            answer = fast(
                frame, self.tree, self.watches, conn, self.stats.metrics.read_per_namespace
            )
            if answer is not None:
                size = conn.send_reply_bytes(xid, zxid, 0, answer)
                self._replied(conn, op, xid, zxid, received, now, size=size)
                return
        ctx = ReadContext(
            self.tree,
            self.watches,
            conn,
            conn.session_id,
            self._auth_ids(conn.session_id, conn),
            read_stats=self.stats.metrics.read_per_namespace,
            zk39=self.config.zk39,
        )
        err = 0
        body: r.Record | None = None
        payload: bytes | None = None
        try:
            if op in WRITE_OPS:
                # ZooKeeper 3.8.0 answers a reconfig whose body does not decode (pRequestHelper
                # decodes it before taking a zxid) with MARSHALLINGERROR and no txn; the
                # session carries on. 3.9 answers so every write whose record does not decode
                # (Request.readRequestRecord before the zxid) and a null deleteContainer.
                raise ReadError(Code.MARSHALLINGERROR)
            if op == _MULTIREAD:
                err, payload = multi_read(frame, ctx)
            elif op == _MULTI and self.config.zk39:  # multi_without_txn_39: no body
                err = Code.MARSHALLINGERROR
            elif op == _MULTI:  # multi_without_txn: MARSHALLINGERROR with a body
                err, payload = Code.MARSHALLINGERROR, EMPTY_MULTI_RESPONSE
            else:
                cls, fn = READ_OPS[op]
                req = decode_body(cls, frame) if cls is not None else None
                body = fn(req, ctx)
        except ReadError as e:
            err = e.code
        except (JuteDecodeError, ValueError) as bad:
            # (its own name: compiled by mypyc, ``e`` is typed ReadError by the clause above)
            log.error("%s: failed to process request type %d: %s", conn, op, bad)
            err = Code.MARSHALLINGERROR
        for etype, path in ctx.events:
            self._event_sent(conn.send_event(etype, path))
        if payload is not None:
            size = conn.send_reply_bytes(xid, zxid, err, payload)
        else:
            size = conn.send_reply(xid, zxid, err, body if err == 0 else None)
        self._replied(conn, op, xid, zxid, received, now, size=size)

    def _read_only_refusal(
        self, conn: ClientConnection, xid: int, op: int, received: int, now: int
    ) -> None:
        """``ReadOnlyRequestProcessor``: a write or a sync is answered NOTREADONLY (the last
        zxid, no body); a local session's closeSession ends it (OK, then the connection is
        closed, as FinalRequestProcessor does), another closeSession is refused too."""
        ro = self.read_only
        assert ro is not None
        zxid = self.tree.last_processed_zxid
        sid = conn.session_id
        if op == _CLOSESESSION and ro.is_local(sid):
            ro.close(sid)
            size = conn.send_reply(xid, zxid, Code.OK)
            self._replied(conn, op, xid, zxid, received, now, size=size)
            self.session_conn.pop(sid, None)
            self._close(conn, "client closed session")
            return
        size = conn.send_reply(xid, zxid, Code.NOTREADONLY)
        self._replied(conn, op, xid, zxid, received, now, size=size)

    def _queue(self, conn: ClientConnection) -> deque[_WriteMark | _SyncMark | _DeferredRead]:
        fifo = self._fifo.get(conn.id)
        if fifo is None:
            fifo = self._fifo[conn.id] = deque()
        return fifo

    def _write(
        self, conn: ClientConnection, xid: int, op: int, frame: bytes, now: int, wall: int
    ) -> None:
        mark = _WriteMark(xid, op, now)
        fifo = self._queue(conn)
        fifo.append(mark)
        sid = conn.session_id
        mark.answer = self.write_path.submit(
            WriteRequest(sid, xid, op, frame, self._auth_ids(sid, conn)), now, wall
        )
        if mark.answer == 0 and fifo[0] is mark:
            self._drain(conn, now)

    def _forward_sync(
        self, conn: ClientConnection, xid: int, frame: bytes, now: int, wall: int
    ) -> bool:
        """A learner's client sync (FollowerRequestProcessor): forwarded to the leader and
        queued in the session's FIFO. False if it does not decode (answered as a read then)."""
        try:
            req = decode_body(r.SyncRequest, frame)
        except JuteDecodeError:
            return False
        mark = _SyncMark(xid, req.path or "", now)
        self._queue(conn).append(mark)
        self._pending_syncs.append((conn, mark))
        sid = conn.session_id
        self.write_path.submit(
            WriteRequest(sid, xid, OpCode.SYNC, frame, self._auth_ids(sid, conn)), now, wall
        )
        return True

    def on_synced(self, now: int) -> None:
        """The leader answered the oldest forwarded sync (its SYNC packet): everything the
        leader had committed before it is applied here, so the sync is answered, in its
        session's order (FollowerZooKeeperServer.sync)."""
        if not self._pending_syncs:
            log.warning("SYNC from the leader with no sync pending")
            return
        conn, mark = self._pending_syncs.popleft()
        mark.done = True
        if not conn.closed:
            self._drain(conn, now)

    def _drain(self, conn: ClientConnection, now: int) -> None:
        """Answer what waits at the head of ``conn``'s FIFO: answered syncs, deferred reads."""
        fifo = self._fifo.get(conn.id)
        while fifo and not conn.closed:
            head = fifo[0]
            if isinstance(head, _DeferredRead):
                fifo.popleft()
                self._read(conn, head.xid, head.op, head.frame, head.received, now)
            elif isinstance(head, _SyncMark) and head.done:
                fifo.popleft()
                zxid = self.tree.last_processed_zxid
                self._finished(conn)
                size = conn.send_reply(head.xid, zxid, 0, r.SyncResponse(head.path))
                self._replied(conn, OpCode.SYNC, head.xid, zxid, head.received, now, size=size)
            elif isinstance(head, _WriteMark) and head.answer == 0:
                # a local session's closeSession: answered without a txn, then closed
                fifo.popleft()
                zxid = self.tree.last_processed_zxid
                self._finished(conn)
                size = conn.send_reply(head.cxid, zxid, 0)
                self._replied(conn, head.op, head.cxid, zxid, head.received, now, size=size)
                if head.op == _CLOSESESSION:
                    self.session_conn.pop(conn.session_id, None)
                    self._close(conn, "client closed session")
            else:
                return

    def session_ended(self, session_id: int) -> None:
        """A session ended without a txn (a local session expired): its connection is
        closed (FinalRequestProcessor's closeSession of an expired session)."""
        conn = self.session_conn.pop(session_id, None)
        if conn is not None:
            self._close(conn, "session expired")

    # ------------------------------------------------------------------ commit
    def on_committed(self, hdr: r.TxnHeader, rc: ApplyResult, now: int) -> None:
        """A txn was applied to the replica: fire its watches, answer its request if it is one
        of this server's (matched by session id and cxid, as ``CommitProcessor`` matches a
        committed request to the head of its session's queue), then the reads queued behind it.
        """
        m = self.stats.metrics
        writes = m.write_per_namespace
        for trig in rc.triggers:
            if trig.event in _WRITE_EVENTS:
                # DataTree.updateWriteStat: createNode/setData (path + data), deleteNode (path)
                writes.add_path(trig.path, len(trig.path) + trig.size)
        # 3.9 (ZOOKEEPER-4655): the notification carries the zxid of the txn that fired it
        event_zxid = hdr.zxid if self.config.zk39 else -1
        for watcher, trig in self.watches.fire(rc.triggers):
            assert isinstance(watcher, ClientConnection)
            # ServerCnxn.process(event, znodeAcl): no READ on the node, no notification.
            if not watcher.closed and aclmod.check(trig.acl, _READ_PERM, watcher.auth):
                self._event_sent(watcher.send_event(trig.event, trig.path, event_zxid))
                self._mark(watcher)
        # FinalRequestProcessor: a txn's wall-clock age when applied here (if not negative)
        age = now + self._wall_offset - hdr.time
        if age >= 0:
            m.propagation_latency.add(age)
        sid = hdr.clientId
        if hdr.type == _CREATESESSION:
            waiting = self.handshaking.pop(sid, None)
            if waiting is not None:
                hconn, received = waiting
                if not hconn.closed:
                    self._finish_session_init(hconn, True)
                    self._replied(hconn, _CREATESESSION, 0, rc.zxid, received, now, txn=True)
                return
            # else a client's createSession on its open session: answered below
        conn = self.session_conn.get(sid)
        fifo = self._fifo.get(conn.id) if conn is not None else None
        head = fifo[0] if fifo else None
        if conn is None or not isinstance(head, _WriteMark) or head.cxid != hdr.cxid:
            if hdr.type == _CLOSESESSION and conn is not None:
                # expiry (or a close through another server): drop the session's connection
                del self.session_conn[sid]
                self._close(conn, "session expired")
            return
        assert fifo is not None
        fifo.popleft()
        if conn.closed:
            return
        self._reply(conn, head, hdr, rc, now)
        self._drain(conn, now)

    def _reply(
        self,
        conn: ClientConnection,
        mark: _WriteMark,
        hdr: r.TxnHeader,
        rc: ApplyResult,
        now: int,
    ) -> None:
        zxid = self.tree.last_processed_zxid
        op = mark.op
        xid = mark.cxid
        self._finished(conn)
        err = rc.err
        if hdr.type == _CREATESESSION:
            # FinalRequestProcessor: finishSessionInit(cnxn, true), a ConnectResponse for the
            # connection's own session (its timeout, not the txn's) where a reply would be
            self._finish_session_init(conn, True)
            self._replied(conn, op, xid, zxid, mark.received, now, txn=True)
            return
        if hdr.type == _ERROR and mark.answer:
            # the request's own error wins over the leader's (FinalRequestProcessor)
            err = mark.answer
        if hdr.type == _ERROR and err == Code.SESSIONMOVED:
            # FinalRequestProcessor: "session moved is a connection level error, we need to
            # tear down the connection" (ZOOKEEPER-710): no reply, the connection is closed.
            self._close(conn, "session moved to another server")
            return
        payload: bytes | None = None
        if hdr.type == _ERROR:
            pass
        elif op == _MULTI:
            payload = multi_response(rc)
            err = 0  # a multi's header says OK; each op's result carries its error
        elif op == _RECONFIG and err == 0 and rc.stat is not None:
            # FinalRequestProcessor: GetDataResponse(the SetDataTxn's data, rc.stat)
            data = self.tree.nodes[CONFIG_NODE].data or b""
            payload = _BUFFER_LEN.pack(len(data)) + data + rc.stat
        elif err == 0:
            result = WRITE_RESULTS.get(op)
            if result is not None and result[1] is not None:
                payload = result[1](rc)
        if payload is not None:
            size = conn.send_reply_bytes(xid, zxid, err, payload)
        else:
            size = conn.send_reply(xid, zxid, err)
        self._replied(conn, op, xid, zxid, mark.received, now, txn=True, size=size)
        if op == _CLOSESESSION:
            self.session_conn.pop(conn.session_id, None)
            self._close(conn, "client closed session")

    def _replied(
        self,
        conn: ClientConnection,
        op: int,
        xid: int,
        zxid: int,
        received: int,
        now: int,
        *,
        txn: bool = False,
        size: int | None = None,
    ) -> None:
        """Statistics of one answered request: latency from its arrival to this reply, in ms
        (``ServerCnxn.updateStatsForResponse``: a write waits for its commit, a read queued
        behind writes for them); ``size``: the reply's length (None: no reply packet, as the
        createSession answered by a ConnectResponse)."""
        self._mark(conn)
        stats = self.stats
        stats.packets_sent += 1
        latency = max(0, now - received)
        conn.record_latency(OP_NAMES.get(op, "NA"), xid, zxid, latency, now)
        stats.latency.add(latency)
        m = stats.metrics
        # ServerStats.updateLatency: requests with a txn header are updates, the rest reads
        (m.updatelatency if txn else m.readlatency).add(latency)
        if size is not None:
            # FinalRequestProcessor's RESPONSE_BYTES; ServerCnxn.serialize's response size
            m.response_bytes += size
            stats.response_sent(size)

    def _event_sent(self, size: int) -> None:
        """A watch notification of ``size`` bytes went out (NIOServerCnxn.process)."""
        self.stats.packets_sent += 1
        self.stats.metrics.watch_bytes += size
        self.stats.response_sent(size)


#: Tree events of a write (createNode, setData, deleteNode): one per znode written.
_WRITE_EVENTS = frozenset({EventType.NODECREATED, EventType.NODEDATACHANGED, EventType.NODEDELETED})

#: What ``ReadOnlyRequestProcessor`` answers NOTREADONLY (closeSession: unless local; a
#: client's createSession on its open session always, where ZooKeeper lets a local one on).
_NOT_READ_ONLY = frozenset(
    {
        OpCode.SYNC,
        OpCode.CREATE,
        OpCode.CREATE2,
        OpCode.CREATETTL,
        OpCode.CREATECONTAINER,
        OpCode.DELETE,
        OpCode.DELETECONTAINER,
        OpCode.SETDATA,
        OpCode.RECONFIG,
        OpCode.SETACL,
        OpCode.MULTI,
        OpCode.CHECK,
        OpCode.CLOSESESSION,
        OpCode.CREATESESSION,
    }
)

#: Requests answered without a txn besides the reads (through the same per-session FIFO).
#: (A client's createSession on its open session is a write: see Sequencer.submit.)
_NO_TXN_OPS = frozenset({OpCode.PING, OpCode.MULTIREAD})


def _bad_write_39(op: int, frame: bytes) -> bool:
    """A write ZooKeeper 3.9 answers MARSHALLINGERROR without a txn (no zxid taken): its
    record does not decode (3.9 decodes it before taking the zxid; 3.8 after, logging an error
    txn), or a deleteContainer's path is null. Not multi: its header is made first in both."""
    if op == _DELETECONTAINER:
        return _bad_delete_container(frame)
    spec = WRITE_OPS.get(op)
    if spec is None or op == _CHECK:
        return False
    try:
        decode_body(spec[0], frame)
    except JuteDecodeError:
        return True
    return False


def _bad_delete_container(frame: bytes) -> bool:
    """A client's deleteContainer that ZooKeeper 3.9 answers MARSHALLINGERROR without a txn:
    its DeleteContainerRequest (one ustring, as SyncRequest's) does not decode, or its path is
    null (checked on the live 3.9.3 server)."""
    try:
        return decode_body(r.SyncRequest, frame).path is None
    except JuteDecodeError:
        return True


def _bad_reconfig(frame: bytes) -> bool:
    try:
        decode_body(r.ReconfigRequest, frame)
    except JuteDecodeError:
        return True
    return False
