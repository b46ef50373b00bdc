"""The sequencer: requests -> txns with zxids, for a standalone server or an ensemble leader. Pure.

ZooKeeper's ``PrepRequestProcessor`` plus the parts of ``ZooKeeperServer`` that decide on their
own: session ids and expiry (``SessionTrackerImpl``), container and TTL deletes
(``ContainerManager``). One sequencer exists per ensemble (the leader's, or the standalone
server's); learners forward their writes to it.

* :meth:`Sequencer.submit` prepares a write (:mod:`trizk.server.writes.prep`) against the committed
  tree
  plus the changes of the txns prepared but not yet committed (:class:`PendingChanges`), gives it
  the next zxid and hands it to the committer. A failed write is an ``ErrorTxn`` and still takes
  a zxid, as in ZooKeeper.
* zxid = ``epoch << 32 | counter``. A standalone server stays in epoch 0 (its counter continues
  from the last logged zxid); a leader starts a new epoch at counter 0 (``newEpoch << 32`` is the
  NEWLEADER zxid, never a txn's), so its first txn is ``newEpoch << 32 | 1``.
* Sessions: :meth:`create_session` allocates the id and tracks the session at once (as
  ``SessionTrackerImpl.createSession``); the createSession txn follows. Any request or learner
  ping touches a session (:meth:`touch`); :meth:`tick` proposes a ``closeSession`` for every
  session whose time has come. A closing session refuses further writes (SESSIONEXPIRED).
* :meth:`committed` is told of every commit, in zxid order: the pending change records up to
  that zxid are dropped and closed sessions leave the tracker.
* Local sessions (``localSessionsEnabled`` on a leader, :mod:`.localsessions`): new sessions of
  the leader's own clients are local (no txn; their closeSession and expiry neither); an
  ephemeral create from one first proposes its upgrade (a createSession txn, cxid 0) or fails
  with EPHEMERALONLOCALSESSION; writes of a learner's local sessions, unknown here, pass the
  session check (``LeaderSessionTracker.checkSession``) but an ephemeral create needs a global
  session (``checkGlobalSession``: SESSIONEXPIRED).

Invariants: zxids handed out strictly increase; every proposal reaches the committer in that
order; ``outstanding`` = proposals not yet committed.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trizk.jute import records as r
from trizk.jute.codes import Code, OpCode
from trizk.jute.primitives import JuteDecodeError
from trizk.quorum.reconfig import LeaderConfigView
from trizk.quorum.verifier import QuorumVerifier
from trizk.server.auth import acl as aclmod
from trizk.server.common.coreconfig import CoreConfig, ServerStats
from trizk.server.common.ratelog import RateLogger
from trizk.server.frontend.requests import decode_body, multi_fails_whole_39, parse_multi
from trizk.server.writes.committer import Committer, Proposal
from trizk.server.writes.localsessions import LocalSessions, creates_ephemeral, server_id_of
from trizk.server.writes.prep import (
    WRITE_OPS,
    PendingChanges,
    PrepContext,
    PrepError,
    fast_set_data,
    prep_close_session,
    prep_multi,
)
from trizk.server.writes.sessions import LOCAL, SessionTracker, initial_session_id
from trizk.storage.tree.replica import Replica

__all__ = ["Sequencer", "WriteRequest"]

log = logging.getLogger("trizk.server")

_REQUEST = struct.Struct(">qii")
_TIMEOUT = struct.Struct(">i")
_REQUEST_HEADER_LEN = 8  # RequestHeader: int xid, int type

# Enum members used per txn, as module constants: on Python 3.11 looking one up on its class
# costs ~0.1 us (EnumType.__getattr__ keeps the lookup off the fast path).
_SETDATA, _MULTI, _ERROR, _DELETECONTAINER = (
    OpCode.SETDATA,
    OpCode.MULTI,
    OpCode.ERROR,
    OpCode.DELETECONTAINER,
)
_CREATESESSION, _CLOSESESSION = OpCode.CREATESESSION, OpCode.CLOSESESSION
_RECONFIG = OpCode.RECONFIG
_SESSIONEXPIRED, _SESSIONMOVED = Code.SESSIONEXPIRED, Code.SESSIONMOVED
_EPHEMERALONLOCALSESSION = Code.EPHEMERALONLOCALSESSION
_UPGRADE_OPS = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.MULTI})
_CREATE_OPS = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.CREATETTL, OpCode.MULTI})


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class WriteRequest:
    """A client write on its way to the sequencer (``Request``; a learner's REQUEST packet)."""

    session_id: int
    cxid: int
    op: int
    #: the whole request frame, header included (``request.request``)
    frame: bytes
    #: the connection's authenticated ids, (scheme, id)
    auth: list[tuple[str, str]]
    #: the server the request came through (``Request.getOwner``): LOCAL, or a learner's sid
    owner: int

    def __init__(
        self,
        session_id: int,
        cxid: int,
        op: int,
        frame: bytes,
        auth: list[tuple[str, str]],
        owner: int = LOCAL,
    ) -> None:
        self.session_id = session_id
        self.cxid = cxid
        self.op = op
        self.frame = frame
        self.auth = auth
        self.owner = owner


class Sequencer:
    """See the module docstring."""

    #: the sequencer answers syncs itself, as reads in the session's order (WritePath)
    forwards_sync = False

    def __init__(
        self,
        config: CoreConfig,
        replica: Replica,
        committer: Committer,
        stats: ServerStats,
        now: int,
        wall: int,
    ) -> None:
        self.config = config
        self.replica = replica
        self.committer = committer
        self.stats = stats
        self.pending = PendingChanges(replica.tree, stats)
        self.sessions = SessionTracker(
            config.tick_time, now, initial_session_id(wall, config.server_id)
        )
        # Sessions recovered from the data dir expire as usual unless their clients come back.
        for sid, timeout in replica.sessions.items():
            self.sessions.add(sid, timeout, now)
        #: highest zxid handed out
        self.last_zxid = replica.last_zxid
        #: proposals handed to the committer and not yet committed
        self.outstanding = 0
        #: ZooKeeperServer's RATE_LOGGER, for "Quota exceeded" warnings
        self.quota_log = RateLogger(log)
        #: False: every setData takes the general path (a test holds the two paths equal)
        self.fast_set_data = True
        #: a reconfig-enabled leader's view of its configurations, asked for at each reconfig
        #: (None: reconfig disabled -- RECONFIGDISABLED)
        self.leader_config: Callable[[], LeaderConfigView] | None = None
        #: the leader's local sessions (``localSessionsEnabled``), else None
        self.local_sessions: LocalSessions | None = (
            LocalSessions(config.tick_time, now, config.local_sessions_upgrading)
            if config.local_sessions
            else None
        )
        #: told of a local session that ended without a txn (expired): the front end closes
        #: its connection (set by the role)
        self.local_session_ended: Callable[[int], None] | None = None

    # ------------------------------------------------------------------ sessions
    def create_session(self, timeout: int, now: int, wall: int) -> int:
        """A new session: its id, tracked from now; its createSession txn is proposed."""
        sid = self.sessions.allocate_id()
        local = self.local_sessions
        if local is not None:
            # LeaderSessionTracker.createSession: local, nothing proposed
            local.create(sid, timeout, now)
            return sid
        self.sessions.add(sid, timeout, now).owner = LOCAL
        self._propose(sid, 0, OpCode.CREATESESSION, r.CreateSessionTxn(timeout), wall)
        return sid

    def create_session_with_id(
        self, session_id: int, timeout: int, now: int, wall: int, owner: int = LOCAL, cxid: int = 0
    ) -> None:
        """A learner's new session (its id chosen by the learner): tracked here from now on,
        attached to that learner, its createSession txn proposed (PrepRequestProcessor:
        ``setOwner`` on createSession). ``cxid`` is 0 but for a client's createSession on its
        open session, which the learner's front end answers when the txn commits."""
        self.sessions.add(session_id, timeout, now).owner = owner
        self._propose(session_id, cxid, OpCode.CREATESESSION, r.CreateSessionTxn(timeout), wall)

    def submit_learner_request(
        self, data: bytes, authinfo: Sequence[r.Id] | None, now: int, wall: int, owner: int
    ) -> int:
        """A learner's REQUEST packet (``Learner.request``: long sessionId, int cxid, int type,
        then the request body). Returns its opcode: a sync is left to the caller, which orders
        it after the proposals made so far (``Leader.processSync``). Raises ``struct.error``
        on a packet too short for its header."""
        sid, cxid, op = _REQUEST.unpack_from(data)
        body = data[_REQUEST.size :]
        self.stats.metrics.prep_processor_request_queued += 1  # LeaderRequestProcessor → Prep
        if op == OpCode.CREATESESSION and len(body) >= _TIMEOUT.size:
            (timeout,) = _TIMEOUT.unpack_from(body)
            self.create_session_with_id(sid, timeout, now, wall, owner, cxid)
        elif op != OpCode.SYNC:
            # the ids with this server's providers (AuthInfo), as a local connection's: the
            # ACL checks ask them which providers exist (LearnerHandler hands the packet's
            # authinfo to a Request checked against the leader's ProviderRegistry); a plain
            # list would know only the default providers, and a sasl or x509 ACL created
            # through a follower would be INVALIDACL
            cfg = self.config.auth or aclmod.AuthConfig(super_digest=self.config.super_digest)
            auth = aclmod.AuthInfo(cfg, ((i.scheme or "", i.id or "") for i in authinfo or ()))
            frame = r.RequestHeader(cxid, op).encode() + body
            self.submit(WriteRequest(sid, cxid, op, frame, auth, owner), now, wall)
        return op

    def touch(self, session_id: int, now: int, timeout: int | None = None) -> bool:
        """A sign of life from ``session_id``; False if the session is unknown or closing."""
        local = self.local_sessions
        if local is not None and local.touch(session_id, now, timeout):
            return True
        return self.sessions.touch(session_id, now, timeout)

    def revalidate(
        self, session_id: int, timeout: int, now: int, done: Callable[[bool | None], None]
    ) -> None:
        """A client reconnects with ``session_id``: ``done(valid)`` (at once: sessions are ours;
        ``ZooKeeperServer.revalidateSession`` touches a local session as a global one)."""
        local = self.local_sessions
        if local is not None and local.touch(session_id, now, timeout):
            done(True)
            return
        done(self.revalidate_for(session_id, timeout, now, LOCAL))

    def revalidate_for(self, session_id: int, timeout: int, now: int, owner: int) -> bool:
        """``ZooKeeperServer.revalidateSession`` / ``Leader.revalidateSession``: the session is
        alive (touched) and now attached to ``owner``; later writes through any other server
        get SESSIONMOVED. A learner asks only about global sessions
        (``checkIfValidGlobalSession``): a local session cannot move."""
        valid = self.sessions.touch(session_id, now, timeout)
        if valid:
            self.sessions.sessions[session_id].owner = owner
        return valid

    def tick(self, now: int, wall: int) -> None:
        """Expire sessions whose time has come: each gets a closeSession txn."""
        for s in self.sessions.expired(now):
            log.info("Expiring session 0x%x, timeout of %dms exceeded", s.id, s.timeout)
            self.stats.metrics.stale_sessions_expired += 1  # SessionTrackerImpl.run
            self._close_expired(s.id, wall)
        local = self.local_sessions
        if local is not None:
            for s in local.expired(now):
                # a local session's closeSession is not logged: the connection is closed here
                log.info("Expiring session 0x%x, timeout of %dms exceeded", s.id, s.timeout)
                self.stats.metrics.stale_sessions_expired += 1
                self._local_ended(s.id)

    def _local_ended(self, session_id: int) -> None:
        if self.local_session_ended is not None:
            self.local_session_ended(session_id)

    def expire(self, session_id: int, wall: int) -> bool:
        """Expire ``session_id`` now, as :meth:`tick` does when its time has come (a test's
        ``expire_session``); False if the session is unknown or already closing."""
        local = self.local_sessions
        if local is not None and local.is_local(session_id):
            local.remove(session_id)
            log.info("Expiring session 0x%x on request", session_id)
            self.stats.metrics.stale_sessions_expired += 1
            self._local_ended(session_id)
            return True
        s = self.sessions.sessions.get(session_id)
        if s is None or s.closing:
            return False
        s.closing = True
        log.info("Expiring session 0x%x on request", s.id)
        self.stats.metrics.stale_sessions_expired += 1
        self._close_expired(s.id, wall)
        return True

    def _close_expired(self, session_id: int, wall: int) -> None:
        self.stats.metrics.prep_processor_request_queued += 1  # the closeSession request
        ctx = PrepContext(session_id, self.last_zxid + 1, wall, [])
        txn_type, txn = prep_close_session(self.pending, ctx)
        self._propose(session_id, 0, txn_type, txn, wall)

    def next_tick_in(self, now: int) -> int:
        local = self.local_sessions
        if local is not None:
            return min(self.sessions.wait_time(now), local.wait_time(now))
        return self.sessions.wait_time(now)

    def restored(self, now: int, wall: int) -> None:
        """The replica's state was replaced by a snapshot (the AdminServer's ``restore``):
        ``ZooKeeperServer.restoreFromSnapshot``'s ``createSessionTracker``. The session
        tracker starts over from the snapshot's sessions (each alive for its timeout from
        ``now``, ids allocated afresh from ``wall``); the sessions it does not hold are unknown
        from now on (their requests are dropped, their reconnects expired). Local sessions
        (``LeaderSessionTracker``'s local tracker) start over empty. The zxid counter goes on
        from the highest zxid handed out (``hzxid`` is not reset); the pending changes now
        sit over the restored tree.

        ZooKeeper 3.9.3 never starts the new tracker and leaves the old one running, so every
        session open at the restore expires at its timeout (restored or not) and no session
        expires afterwards until a restart; trizk's tracker keeps expiring the sessions it
        holds, on purpose (docs/compatibility.md)."""
        replica = self.replica
        self.pending.rebase(replica.tree)
        self.sessions = SessionTracker(
            self.config.tick_time, now, initial_session_id(wall, self.config.server_id)
        )
        for sid, timeout in replica.sessions.items():
            self.sessions.add(sid, timeout, now)
        if self.local_sessions is not None:
            self.local_sessions = LocalSessions(
                self.config.tick_time, now, self.config.local_sessions_upgrading
            )

    # ------------------------------------------------------------------ writes
    def submit(self, req: WriteRequest, now: int, wall: int) -> int | None:
        """Prepare ``req`` and propose its txn (or its ErrorTxn). None: its commit answers it;
        0: answered at once, without a txn (a local session's closeSession)."""
        sid, op, frame = req.session_id, req.op, req.frame
        ephemeral_error = 0
        local = self.local_sessions
        if local is not None:
            if op == _CLOSESESSION and local.is_local(sid):
                # setLocalSessionFlag: a local closeSession, no txn (PrepRequestProcessor)
                log.info("Submitting local closeSession request for session 0x%x", sid)
                local.remove(sid)
                return 0
            if op in _CREATE_OPS:
                ephemeral_error = self._check_upgrade(local, req, now, wall)
        if op == _SETDATA and self.fast_set_data and not self.config.enforce_quota:
            # the common setData (prep.fast_set_data) for a session in order (checkSession)
            s = self.sessions.sessions.get(sid)
            if s is not None and not s.closing and s.owner == req.owner:
                fast = fast_set_data(frame, self.pending, self.last_zxid + 1, wall)
                if fast is not None:
                    self._propose(sid, req.cxid, op, fast, wall)
                    return None
        ctx = PrepContext(
            sid,
            self.last_zxid + 1,
            wall,
            req.auth,
            extended_types=self.config.extended_types,
            enforce_quota=self.config.enforce_quota,
            ephemeral_error=ephemeral_error,
        )
        if op == _RECONFIG:
            if self.leader_config is not None:
                ctx.reconfig_enabled = True
                ctx.reconfig = self.leader_config()
            else:
                # standalone: with reconfigEnabled=true ZooKeeper answers UNIMPLEMENTED
                # (prep_reconfig), without it RECONFIGDISABLED
                ctx.reconfig_enabled = self.config.reconfig_enabled
        txn_type: int
        txn: r.Record | None
        try:
            if op == _CLOSESESSION:
                txn_type, txn = prep_close_session(self.pending, ctx)
                session = self.sessions.sessions.get(sid)
                if session is not None:
                    session.closing = True
            elif op == _MULTI:
                self._check_session(sid, req.owner)
                ops = parse_multi(frame, zk39=self.config.zk39)
                if self.config.zk39 and multi_fails_whole_39(ops):
                    raise PrepError(Code.MARSHALLINGERROR)
                multi, _failure = prep_multi(ops, self.pending, ctx)
                txn_type, txn = _MULTI, multi
            elif op == _CREATESESSION:
                # A client's createSession on its open session: PrepRequestProcessor takes the
                # body's int as the timeout, trackSession touches the session with it, and a
                # CreateSessionTxn is logged. A body too short for the int underflows after
                # the txn header was set: an error txn (MARSHALLINGERROR) with its zxid.
                if len(frame) < _REQUEST_HEADER_LEN + _TIMEOUT.size:
                    raise PrepError(Code.MARSHALLINGERROR)
                (timeout,) = _TIMEOUT.unpack_from(frame, _REQUEST_HEADER_LEN)
                self.sessions.touch(sid, now, timeout)
                txn_type, txn = _CREATESESSION, r.CreateSessionTxn(timeout)
            elif op == _DELETECONTAINER:
                if self.config.zk39:
                    # 3.9 decodes a DeleteContainerRequest (core answers one that does not
                    # decode, or has a null path, without a txn) and deletes any empty node
                    # it names, ACLs unchecked
                    # (DeleteContainerRequest is one ustring, as SyncRequest)
                    path = decode_body(r.SyncRequest, frame).path
                    dreq = r.DeleteRequest(path, -1)
                else:
                    # 3.8's PrepRequestProcessor reads the path as the whole request buffer,
                    # ``new String(request.request.array(), UTF_8)``, header bytes included.
                    dreq = r.DeleteRequest(frame.decode("utf-8", "replace"), -1)
                txn_type, txn = WRITE_OPS[op][1](op, dreq, self.pending, ctx)
            else:
                cls, fn = WRITE_OPS[op]
                rec = decode_body(cls, frame)
                self._check_session(sid, req.owner)
                txn_type, txn = fn(op, rec, self.pending, ctx)
        except PrepError as e:
            txn_type, txn = _ERROR, r.ErrorTxn(e.code)
        except (JuteDecodeError, ValueError) as bad:
            # (its own name: compiled by mypyc, ``e`` is typed PrepError by the clause above)
            log.error("session 0x%x: failed to process request type %d: %s", sid, op, bad)
            txn_type, txn = _ERROR, r.ErrorTxn(Code.MARSHALLINGERROR)
        for ev in ctx.quota_events:
            self.quota_log.rate_limit_log(ev.message, now)
            if ev.hard and ev.namespace is not None:
                counts = self.stats.quota_exceeded
                counts[ev.namespace] = counts.get(ev.namespace, 0) + 1
        config = ctx.proposed_config if txn_type == _RECONFIG else None
        self._propose(sid, req.cxid, txn_type, txn, wall, config)
        return None

    def _check_upgrade(self, local: LocalSessions, req: WriteRequest, now: int, wall: int) -> int:
        """``LeaderRequestProcessor``'s ``checkUpgradeSession`` for a create or multi, and what
        its ephemeral creates meet in prep (``validateCreateRequest``): the error an ephemeral
        create gets (0: none). The leader's own client's local session is upgraded first (a
        createSession txn, cxid 0, proposed ahead of the request) when upgrading is enabled,
        else its ephemeral creates fail EPHEMERALONLOCALSESSION; any other session not global
        here (a learner's local session) gets SESSIONEXPIRED (``checkGlobalSession``)."""
        sid = req.session_id
        if local.is_local(sid):
            if req.owner != LOCAL or req.op not in _UPGRADE_OPS:
                return _EPHEMERALONLOCALSESSION if req.owner == LOCAL else _SESSIONEXPIRED
            if not creates_ephemeral(req.op, req.frame, self.config.zk39):
                return _EPHEMERALONLOCALSESSION
            if not local.upgrading_enabled:
                return _EPHEMERALONLOCALSESSION
            timeout = local.upgrade(sid)
            assert timeout is not None
            log.info("Upgrading session 0x%x", sid)
            self.create_session_with_id(sid, timeout, now, wall, LOCAL, 0)
            return 0
        if sid not in self.sessions.sessions:
            return _SESSIONEXPIRED
        return 0

    def delete_container(self, path: str, wall: int) -> None:
        """ContainerManager's internal deleteContainer request (session 0, cxid 0)."""
        self.stats.metrics.prep_processor_request_queued += 1
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
        self._propose(0, 0, txn_type, txn, wall)

    def _check_session(self, sid: int, owner: int) -> None:
        """``SessionTrackerImpl.checkSession``: an unknown or closing session is expired; the
        first request attaches the session to its server; a request through another server
        than the session's is SESSIONMOVED (ZOOKEEPER-710). With local sessions
        (``LeaderSessionTracker.checkSession``) the leader's own local sessions are checked
        alike, and a session it does not know passes if its id carries another member's id
        (a learner's local session)."""
        local = self.local_sessions
        s = self.sessions.sessions.get(sid)
        if local is not None and s is None:
            s = local.get(sid)
            if s is None:
                if server_id_of(sid) != self.config.server_id:
                    return
                raise PrepError(_SESSIONEXPIRED)
        if s is None or s.closing:
            raise PrepError(_SESSIONEXPIRED)
        if s.owner is None:
            s.owner = owner
        elif s.owner != owner:
            raise PrepError(_SESSIONMOVED)

    def _propose(
        self,
        sid: int,
        cxid: int,
        txn_type: int,
        txn: r.Record | None,
        wall: int,
        config: QuorumVerifier | None = None,
    ) -> None:
        self.last_zxid += 1
        hdr = r.TxnHeader(sid, cxid, self.last_zxid, wall, txn_type)
        self.outstanding += 1
        self.committer.propose(Proposal(hdr, txn, self.pending.digest, config))

    # ------------------------------------------------------------------ commits
    def committed(self, hdr: r.TxnHeader, txn: r.Record | None, now: int) -> None:
        """``hdr``'s txn was applied to the replica (called in zxid order)."""
        self.outstanding -= 1
        self.pending.committed(hdr.zxid)
        if hdr.type == _CREATESESSION:
            # ZooKeeperServer.processTxnForSessionEvents: commitSession (re-tracks it from now)
            assert isinstance(txn, r.CreateSessionTxn)
            self.sessions.add(hdr.clientId, txn.timeOut, now)
            if self.local_sessions is not None:
                self.local_sessions.committed_global(hdr.clientId)
        elif hdr.type == _CLOSESESSION:
            self.sessions.remove(hdr.clientId)
            if self.local_sessions is not None:
                self.local_sessions.remove(hdr.clientId)
