"""The server core: sessions, the request pipeline, commits, watches and replies. Pure.

Theory of operation
-------------------
The Trio shell hands the core bytes received on a connection (:meth:`ServerCore.data_received`)
together with the current times; the core parses frames and writes replies and watch events into
the output buffers of the connections concerned, listing them in :attr:`ServerCore.dirty` for the
shell to flush. Time enters only as arguments (``now`` monotonic ms for sessions and latency,
``wall`` ms for txn headers), so the core runs the same under a simulated clock.

Requests of a connection are answered strictly in order (ZooKeeper's per-session FIFO):

* A read is answered at once unless the connection has writes in flight; then it waits in the
  connection's FIFO behind them and is answered right after the write before it commits, against
  the tree as of that commit.
* A write is prepared at once (:mod:`trizk.server.prep`) against the pending-changes view, gets
  the next zxid and goes to the commit queue (:attr:`ServerCore.uncommitted`). The committer
  (standalone: this object itself, through :meth:`commit`; with a txn log the shell calls
  :meth:`commit` after the batch is durable) applies txns to the tree in zxid order, fires watches
  -- the notifications are queued *before* the reply of the write that caused them -- and
  answers the writer.

Every reply carries the zxid of the last txn applied to the tree when it is sent, as
``FinalRequestProcessor`` does; a failed write still consumes a zxid (an error txn).
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..jute import records as r
from ..jute.codes import Code, OpCode, Perms, Xid
from ..jute.framing import FrameTooLarge
from ..jute.primitives import JuteDecodeError
from ..storage.datatree import ApplyResult, DataTree
from . import acl as aclmod
from . import sasl as saslmod
from .connection import ClientConnection, State
from .prep import (
    WRITE_OPS,
    PendingChanges,
    PrepContext,
    PrepError,
    prep_close_session,
    prep_multi,
)
from .ratelog import RateLogger
from .reads import READ_OPS, ReadContext, ReadError, multi_read
from .requests import EMPTY_MULTI_RESPONSE, decode_body, multi_without_txn, parse_multi
from .sessions import SessionTracker, generate_password, initial_session_id
from .watches import WatchManager

log = logging.getLogger("trizk.server")

R = TypeVar("R", bound=r.Record)

_HDR = struct.Struct(">ii")
_MULTI_HDR = struct.Struct(">i?i")
_MULTI_END = _MULTI_HDR.pack(-1, True, -1)
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


@dataclass(slots=True)
class CoreConfig:
    tick_time: int = 2000
    min_session_timeout: int = -1
    max_session_timeout: int = -1
    max_buffer: int = 0xFFFFF
    #: top byte of session ids; a standalone ZooKeeperServer uses 1 (createSessionTrackerServerId)
    server_id: int = 1
    extended_types: bool = False
    #: ``zookeeper.enforceQuota``: check quotas on create/setData (warn, refuse hard limits)
    enforce_quota: bool = False
    super_digest: str | None = None
    global_outstanding_limit: int = 1000
    #: authentication providers (ProviderRegistry); None: ip + digest with ``super_digest``
    auth: aclmod.AuthConfig | None = None
    #: users of the JAAS Server section; None: no SASL login configured
    sasl: saslmod.SaslServerConfig | None = None

    @property
    def min_timeout(self) -> int:
        return self.min_session_timeout if self.min_session_timeout > 0 else 2 * self.tick_time

    @property
    def max_timeout(self) -> int:
        return self.max_session_timeout if self.max_session_timeout > 0 else 20 * self.tick_time


@dataclass(slots=True)
class PendingTxn:
    """A prepared txn waiting to be committed (made durable, then applied)."""

    hdr: r.TxnHeader
    txn: r.Record | None
    conn: ClientConnection | None
    #: the opcode of the request (the header type is ERROR for a failed one)
    op: int
    received: int
    #: tree digest after this txn, computed in prep (PrepRequestProcessor.setTxnDigest)
    digest: int = 0


@dataclass(slots=True)
class ServerStats:
    """Server-wide counters for the four-letter words."""

    packets_received: int = 0
    packets_sent: int = 0
    min_latency: int = -1
    max_latency: int = 0
    total_latency: int = 0
    latency_count: int = 0
    started: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    #: mntr's ``<namespace>_quota_exceeded_error_per_namespace`` counters, in insertion order
    quota_exceeded: dict[str, int] = field(default_factory=dict)

    def record(self, latency: int) -> None:
        if self.min_latency < 0 or latency < self.min_latency:
            self.min_latency = latency
        if latency > self.max_latency:
            self.max_latency = latency
        self.total_latency += latency
        self.latency_count += 1

    def reset(self) -> None:
        # ServerStats.reset -> ServerMetrics.resetAll: counter sets keep their keys at 0.
        for ns in self.quota_exceeded:
            self.quota_exceeded[ns] = 0
        self.packets_received = self.packets_sent = 0
        self.min_latency = -1
        self.max_latency = self.total_latency = self.latency_count = 0


class ServerCore:
    """ZooKeeper's request pipeline for one server (standalone)."""

    def __init__(
        self,
        config: CoreConfig,
        now: int,
        wall: int,
        tree: DataTree | None = None,
        sync_commit: bool = True,
    ) -> None:
        self.config = config
        self.tree = tree if tree is not None else DataTree(extended_types=config.extended_types)
        self.pending = PendingChanges(self.tree)
        self.sessions = SessionTracker(
            config.tick_time, now, initial_session_id(wall, config.server_id)
        )
        self.watches = WatchManager()
        self.last_zxid = self.tree.last_processed_zxid  # highest zxid handed out
        self.uncommitted: list[PendingTxn] = []
        #: commit each txn as soon as it is prepared (no txn log between prep and apply)
        self.sync_commit = sync_commit
        self.connections: dict[int, ClientConnection] = {}
        self.session_conn: dict[int, ClientConnection] = {}
        self.dirty: list[ClientConnection] = []
        self.stats = ServerStats(started=now)
        #: ZooKeeperServer's RATE_LOGGER, for "Quota exceeded" warnings
        self.quota_log = RateLogger(log)
        #: conn.id -> FIFO of ("w", zxid) markers and deferred reads
        self._fifo: dict[int, deque[tuple[Any, ...]]] = {}
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

    # ------------------------------------------------------------------ connections
    def connection_made(self, conn: ClientConnection) -> None:
        self.connections[conn.id] = conn
        conn.auth = aclmod.new_connection_ids(self.auth_config, conn.remote[0])

    def connection_lost(self, conn: ClientConnection) -> None:
        """The socket is gone: forget the connection and its watches (the session lives on)."""
        conn.close(conn.close_reason or "connection lost")
        self.connections.pop(conn.id, None)
        self._fifo.pop(conn.id, None)
        self.watches.remove_watcher(conn)
        if conn.session_id and self.session_conn.get(conn.session_id) is conn:
            del self.session_conn[conn.session_id]

    def _close(self, conn: ClientConnection, reason: str) -> None:
        if not conn.closed:
            log.info("closing connection %s: %s", conn, reason)
        conn.close(reason)
        self._mark(conn)

    def _mark(self, conn: ClientConnection) -> None:
        self.dirty.append(conn)

    @property
    def outstanding(self) -> int:
        return len(self.uncommitted)

    # ------------------------------------------------------------------ input
    def data_received(self, conn: ClientConnection, data: bytes, now: int, wall: int) -> None:
        conn.last_io = now
        conn.receive_data(data)
        self._mark(conn)
        while not conn.closed:
            if conn.state is State.HANDSHAKE and conn.decoder.buffered >= 4:
                word = self.is_four_letter(conn.decoder.peek(4))
                if word is not None:
                    if word == "stmk":  # SetTraceMaskCommand reads a long after the word
                        if conn.decoder.buffered < 12:
                            return
                        self._four_letter(conn, word, conn.decoder.peek(12)[4:])
                    else:
                        self._four_letter(conn, word, b"")
                    return
            try:
                frame = conn.next_frame()
            except FrameTooLarge as e:
                # NIOServerCnxn.readLength: "Len error" -> the connection is closed.
                log.warning("%s: %s, closing connection", conn, e)
                self._close(conn, str(e))
                return
            if frame is None:
                break
            conn.packets_received += 1
            self.stats.packets_received += 1
            if conn.state is State.HANDSHAKE:
                self._connect(conn, frame, now, wall)
            else:
                self._request(conn, frame, now, wall)
        if self.sync_commit and self.uncommitted:
            self.commit(len(self.uncommitted), now)

    def _four_letter(self, conn: ClientConnection, word: str, arg: bytes) -> None:
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
        # ZooKeeperServer.processConnectRequest: a client without the readOnly byte is "old".
        conn.old_client = pos >= len(frame)
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
            sid = self.sessions.allocate_id()
            conn.session_id = sid
            self.sessions.add(sid, timeout, now)
            self._submit(
                conn,
                0,
                OpCode.CREATESESSION,
                OpCode.CREATESESSION,
                r.CreateSessionTxn(timeout),
                sid,
                now,
                wall,
            )
            return
        sid = req.sessionId
        old = self.session_conn.get(sid)
        if old is not None and old is not conn:
            # ZooKeeper closes the session's previous connection (CLIENT_RECONNECT) first.
            self._close(old, "client reconnected elsewhere")
            self.connection_lost(old)
        conn.session_id = sid
        valid = (req.passwd or b"") == generate_password(sid) and self.sessions.touch(
            sid, now, timeout
        )
        self._finish_session_init(conn, valid)

    def _finish_session_init(self, conn: ClientConnection, valid: bool) -> None:
        sid = conn.session_id
        rsp = r.ConnectResponse(
            0,
            conn.session_timeout if valid else 0,
            sid if valid else 0,
            generate_password(sid) if valid else bytes(16),
        ).encode()
        if not conn.old_client:
            rsp += b"\x00"  # readOnly: false (not a read-only server)
        conn.send_frame(rsp)
        conn.packets_sent += 1
        self._mark(conn)
        if valid:
            conn.state = State.OPEN
            self.session_conn[sid] = conn
            log.info("session 0x%x established for %s, timeout %d", sid, conn, conn.session_timeout)
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
        self.sessions.touch(conn.session_id, now)
        if op == OpCode.AUTH:
            self._auth(conn, xid, frame)
            return
        if op == OpCode.SASL:
            self._sasl(conn, xid, frame)
            return
        if op not in VALID_OPS:
            # UnimplementedRequestProcessor: reply UNIMPLEMENTED with zxid -1, then close.
            log.warning("%s: received packet of unknown type %d", conn, op)
            conn.send_reply(xid, -1, Code.UNIMPLEMENTED)
            self._close(conn, f"unknown opcode {op}")
            return
        conn.outstanding += 1
        fifo = self._fifo.get(conn.id)
        if (
            op in READ_OPS
            or op in _NO_TXN_OPS
            or (op == OpCode.RECONFIG and _bad_reconfig(frame))
            or (op == OpCode.MULTI and multi_without_txn(frame))
        ):
            if fifo:
                fifo.append(("r", xid, op, frame, now))
            else:
                self._read(conn, xid, op, frame, now)
            return
        self._write(conn, xid, op, frame, now, wall)

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
            conn.send_reply(xid, 0, Code.AUTHFAILED)
            self._close(conn, "authentication failed")
            return
        for i in ids:
            conn.auth.add(i)
        log.info("Session 0x%x: auth success for scheme %s", conn.session_id, scheme)
        conn.send_reply(xid, 0, Code.OK)

    def _sasl(self, conn: ClientConnection, xid: int, frame: bytes) -> None:
        req = self._decode_or_close(conn, r.GetSASLRequest, frame)
        if req is None:
            return
        token: bytes | None = None
        sasl_cfg = self.config.sasl
        if sasl_cfg is None:
            # no login configured: cnxn.zooKeeperSaslServer is null, the NPE is caught and
            # the client gets OK with a null token
            log.error("cnxn.saslServer is null: no SASL login is configured")
        else:
            server = conn.sasl
            if not isinstance(server, saslmod.DigestMD5Server):
                server = conn.sasl = saslmod.DigestMD5Server(sasl_cfg, self.sasl_nonce())
            try:
                token = server.evaluate(req.token or b"")
                if server.complete and server.authorization_id is not None:
                    log.info(
                        "Session 0x%x: adding SASL authorization for authorizationID: %s",
                        conn.session_id,
                        server.authorization_id,
                    )
                    for i in aclmod.sasl_ids(self.auth_config, server.authorization_id):
                        conn.auth.add(i)
            except saslmod.SaslError as e:
                log.warning("Client %s failed to SASL authenticate: %s", conn, e)
                if not sasl_cfg.allow_failed_clients:
                    conn.send_reply(xid, 0, Code.AUTHFAILED, r.SetSASLResponse(None))
                    self._close(conn, "SASL authentication failed")
                    return
        conn.send_reply(xid, 0, Code.OK, r.SetSASLResponse(token))

    def _auth_ids(self, session_id: int, conn: ClientConnection) -> list[tuple[str, str]]:
        return conn.auth

    def _read(self, conn: ClientConnection, xid: int, op: int, frame: bytes, received: int) -> None:
        zxid = self.tree.last_processed_zxid
        conn.outstanding -= 1
        if op == OpCode.PING:
            conn.send_reply(Xid.PING, zxid, 0)
            self._replied(conn, op, xid, zxid, received)
            return
        ctx = ReadContext(
            self.tree, self.watches, conn, conn.session_id, self._auth_ids(conn.session_id, conn)
        )
        err = 0
        body: r.Record | None = None
        payload: bytes | None = None
        try:
            if op in (OpCode.CREATESESSION, OpCode.RECONFIG):
                # ZooKeeper 3.8.0 answers a client's createSession, and a reconfig whose body
                # does not decode (pRequestHelper decodes it before taking a zxid), with
                # MARSHALLINGERROR and no txn; the session carries on.
                raise ReadError(Code.MARSHALLINGERROR)
            if op == OpCode.MULTIREAD:
                err, payload = multi_read(frame, ctx)
            elif op == OpCode.MULTI:  # multi_without_txn: MARSHALLINGERROR with a body
                err, payload = Code.MARSHALLINGERROR, EMPTY_MULTI_RESPONSE
            else:
                cls, fn = READ_OPS[op]
                req = decode_body(cls, frame) if cls is not None else None
                body = fn(req, ctx)
        except ReadError as e:
            err = e.code
        except (JuteDecodeError, ValueError) as e:
            log.error("%s: failed to process request type %d: %s", conn, op, e)
            err = Code.MARSHALLINGERROR
        for etype, path in ctx.events:
            conn.send_event(etype, path)
        if payload is not None:
            conn.send_reply_bytes(xid, zxid, err, payload)
        else:
            conn.send_reply(xid, zxid, err, body if err == 0 else None)
        self._replied(conn, op, xid, zxid, received)

    def _write(
        self, conn: ClientConnection, xid: int, op: int, frame: bytes, now: int, wall: int
    ) -> None:
        sid = conn.session_id
        zxid = self.last_zxid + 1
        ctx = PrepContext(
            sid,
            zxid,
            wall,
            self._auth_ids(sid, conn),
            extended_types=self.config.extended_types,
            enforce_quota=self.config.enforce_quota,
        )
        txn_type: int
        txn: r.Record | None
        try:
            if op == OpCode.CLOSESESSION:
                txn_type, txn = prep_close_session(self.pending, ctx)
                session = self.sessions.sessions.get(sid)
                if session is not None:
                    session.closing = True
            elif op == OpCode.MULTI:
                ops = parse_multi(frame)
                multi, _failure = prep_multi(ops, self.pending, ctx)
                txn_type, txn = OpCode.MULTI, multi
            elif op == OpCode.DELETECONTAINER:
                # PrepRequestProcessor reads the path as the whole request buffer,
                # ``new String(request.request.array(), UTF_8)``, header bytes included.
                dreq = r.DeleteRequest(frame.decode("utf-8", "replace"), -1)
                txn_type, txn = WRITE_OPS[op][1](op, dreq, self.pending, ctx)
            else:
                cls, fn = WRITE_OPS[op]
                req = decode_body(cls, frame)
                self._check_session(sid)
                txn_type, txn = fn(op, req, self.pending, ctx)
        except PrepError as e:
            txn_type, txn = OpCode.ERROR, r.ErrorTxn(e.code)
        except (JuteDecodeError, ValueError) as e:
            log.error("%s: failed to process request type %d: %s", conn, op, e)
            txn_type, txn = OpCode.ERROR, r.ErrorTxn(Code.MARSHALLINGERROR)
        for ev in ctx.quota_events:
            self.quota_log.rate_limit_log(ev.message, now)
            if ev.hard and ev.namespace is not None:
                counts = self.stats.quota_exceeded
                counts[ev.namespace] = counts.get(ev.namespace, 0) + 1
        self._submit(conn, xid, op, txn_type, txn, sid, now, wall)

    def _check_session(self, sid: int) -> None:
        s = self.sessions.sessions.get(sid)
        if s is None or s.closing:
            raise PrepError(Code.SESSIONEXPIRED)

    def _submit(
        self,
        conn: ClientConnection | None,
        xid: int,
        op: int,
        txn_type: int,
        txn: r.Record | None,
        sid: int,
        now: int,
        wall: int,
    ) -> None:
        self.last_zxid += 1
        hdr = r.TxnHeader(sid, xid, self.last_zxid, wall, txn_type)
        self.uncommitted.append(PendingTxn(hdr, txn, conn, op, now, self.pending.digest))
        if conn is not None:
            fifo = self._fifo.get(conn.id)
            if fifo is None:
                fifo = self._fifo[conn.id] = deque()
            fifo.append(("w", hdr.zxid))

    # ------------------------------------------------------------------ commit
    def take_uncommitted(self) -> list[PendingTxn]:
        """The prepared txns not yet committed, oldest first (for the txn log writer)."""
        return list(self.uncommitted)

    def commit(self, count: int, now: int) -> None:
        """Apply the oldest ``count`` prepared txns (now durable) and answer their requests."""
        batch = self.uncommitted[:count]
        del self.uncommitted[:count]
        for p in batch:
            self._apply(p, now)

    def _apply(self, p: PendingTxn, now: int) -> None:
        hdr = p.hdr
        rc = self.tree.apply(hdr, p.txn)
        self.pending.committed(hdr.zxid)
        if hdr.type == OpCode.CREATESESSION:
            assert isinstance(p.txn, r.CreateSessionTxn)
            self.sessions.add(hdr.clientId, p.txn.timeOut, now)
        elif hdr.type == OpCode.CLOSESESSION:
            self.sessions.remove(hdr.clientId)
        for watcher, trig in self.watches.fire(rc.triggers):
            assert isinstance(watcher, ClientConnection)
            # ServerCnxn.process(event, znodeAcl): no READ on the node, no notification.
            if not watcher.closed and aclmod.check(trig.acl, Perms.READ, watcher.auth):
                watcher.send_event(trig.event, trig.path)
                self._mark(watcher)
        conn = p.conn
        if conn is None:
            if hdr.type == OpCode.CLOSESESSION:  # expiry: drop the session's connection
                c = self.session_conn.pop(hdr.clientId, None)
                if c is not None:
                    self._close(c, "session expired")
            return
        fifo = self._fifo.get(conn.id)
        if fifo:
            fifo.popleft()
        if conn.closed:
            return
        self._reply(conn, p, rc, now)
        while fifo and fifo[0][0] == "r":
            _, xid, op, frame, received = fifo.popleft()
            self._read(conn, xid, op, frame, received)
            if conn.closed:
                break

    def _reply(self, conn: ClientConnection, p: PendingTxn, rc: ApplyResult, now: int) -> None:
        zxid = self.tree.last_processed_zxid
        op = p.op
        xid = p.hdr.cxid
        conn.outstanding = max(0, conn.outstanding - 1)
        if op == OpCode.CREATESESSION:
            self._finish_session_init(conn, True)
            self._replied(conn, op, xid, zxid, p.received)
            return
        err = rc.err
        body: r.Record | None = None
        payload: bytes | None = None
        if p.hdr.type == OpCode.ERROR:
            pass
        elif op == OpCode.MULTI:
            payload = _multi_response(rc)
            err = 0  # a multi's header says OK; each op's result carries its error
        elif err == 0:
            if op == OpCode.CREATE:
                body = r.CreateResponse(rc.path or "")
            elif op in (OpCode.CREATE2, OpCode.CREATETTL, OpCode.CREATECONTAINER):
                assert rc.stat is not None
                body = r.Create2Response(rc.path or "", rc.stat)
            elif op == OpCode.SETDATA:
                assert rc.stat is not None
                body = r.SetDataResponse(rc.stat)
            elif op == OpCode.SETACL:
                assert rc.stat is not None
                body = r.SetACLResponse(rc.stat)
        if payload is not None:
            conn.send_reply_bytes(xid, zxid, err, payload)
        else:
            conn.send_reply(xid, zxid, err, body)
        self._replied(conn, op, xid, zxid, p.received)
        if op == OpCode.CLOSESESSION:
            self.session_conn.pop(conn.session_id, None)
            self._close(conn, "client closed session")

    def _replied(self, conn: ClientConnection, op: int, xid: int, zxid: int, received: int) -> None:
        self._mark(conn)
        self.stats.packets_sent += 1
        latency = 0  # replies are produced within the same tick as the request in-memory
        conn.record_latency(OP_NAMES.get(op, "NA"), xid, zxid, latency, received)
        self.stats.record(latency)

    def delete_container(self, path: str, now: int, wall: int) -> None:
        """ContainerManager's internal deleteContainer request (session 0, cxid 0)."""
        ctx = PrepContext(0, self.last_zxid + 1, wall, [], self.config.extended_types)
        txn_type: int
        txn: r.Record | None
        try:
            req = r.DeleteRequest(path, -1)
            txn_type, txn = WRITE_OPS[OpCode.DELETECONTAINER][1](
                OpCode.DELETECONTAINER, req, self.pending, ctx
            )
        except PrepError as e:
            txn_type, txn = OpCode.ERROR, r.ErrorTxn(e.code)
        self._submit(None, 0, OpCode.DELETECONTAINER, txn_type, txn, 0, now, wall)
        if self.sync_commit:
            self.commit(len(self.uncommitted), now)

    # ------------------------------------------------------------------ time
    def tick(self, now: int, wall: int) -> None:
        """Expire sessions whose time has come: each gets a closeSession txn."""
        for s in self.sessions.expired(now):
            log.info("Expiring session 0x%x, timeout of %dms exceeded", s.id, s.timeout)
            ctx = PrepContext(s.id, self.last_zxid + 1, wall, [])
            txn_type, txn = prep_close_session(self.pending, ctx)
            self._submit(None, 0, OpCode.CLOSESESSION, txn_type, txn, s.id, now, wall)
        if self.sync_commit and self.uncommitted:
            self.commit(len(self.uncommitted), now)

    def next_tick_in(self, now: int) -> int:
        return self.sessions.wait_time(now)


#: Requests answered without a txn besides the reads (through the same per-session FIFO).
_NO_TXN_OPS = frozenset({OpCode.PING, OpCode.MULTIREAD, OpCode.CREATESESSION})


def _bad_reconfig(frame: bytes) -> bool:
    try:
        decode_body(r.ReconfigRequest, frame)
    except JuteDecodeError:
        return True
    return False


# ---------------------------------------------------------------------- multi codec


def _multi_response(rc: ApplyResult) -> bytes:
    out: list[bytes] = []
    for sub in rc.multi or ():
        t = sub.type
        if t == OpCode.ERROR:
            out.append(_MULTI_HDR.pack(OpCode.ERROR, False, sub.err))
            out.append(struct.pack(">i", sub.err))
        elif t == OpCode.CREATE:
            out.append(_MULTI_HDR.pack(OpCode.CREATE, False, 0))
            r.CreateResponse(sub.path or "")._encode_into(out)
        elif t in (OpCode.CREATE2, OpCode.CREATETTL, OpCode.CREATECONTAINER):
            assert sub.stat is not None
            out.append(_MULTI_HDR.pack(OpCode.CREATE2, False, 0))
            r.Create2Response(sub.path or "", sub.stat)._encode_into(out)
        elif t in (OpCode.DELETE, OpCode.DELETECONTAINER):
            out.append(_MULTI_HDR.pack(OpCode.DELETE, False, 0))
        elif t == OpCode.SETDATA:
            assert sub.stat is not None
            out.append(_MULTI_HDR.pack(OpCode.SETDATA, False, 0))
            r.SetDataResponse(sub.stat)._encode_into(out)
        elif t == OpCode.CHECK:
            out.append(_MULTI_HDR.pack(OpCode.CHECK, False, 0))
    out.append(_MULTI_END)
    return b"".join(out)
