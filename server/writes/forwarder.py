"""The write path of a learner (follower or observer): everything that changes state goes to the
leader. Pure.

ZooKeeper's ``FollowerRequestProcessor`` + ``LearnerSessionTracker`` + ``Learner.request`` /
``validateSession``, behind the front end's :class:`~trizk.server.frontend.core.WritePath`:

* a write (and a closeSession) is forwarded as a REQUEST; the front end answers it when the
  leader's COMMIT of the txn with that (session id, cxid) is applied here;
* a client's sync is forwarded too (REQUEST type sync); the leader's SYNC answer completes the
  oldest pending one (:meth:`FrontEnd.on_synced`);
* a new session gets its id here, ``(myid << 56) | ((now_ms << 24) >>> 8)`` counting up
  (``SessionTrackerImpl.initializeNextSessionId``), and a createSession REQUEST (cxid 0, body
  int timeout) goes to the leader, who tracks and expires it; the client is answered when the
  createSession txn commits;
* every request touches its session; the touches go to the leader with the next PING reply
  (the leader owns expiry);
* a client reconnecting with an existing session is revalidated by the leader (REVALIDATE);
  the front end answers the handshake when the answer comes back (:meth:`revalidated`).
* with local sessions (``localSessionsEnabled``, :mod:`.localsessions`) a new session is
  local: tracked and expired here (:meth:`LearnerWritePath.tick`), its createSession and
  closeSession never forwarded, its reconnects to this member revalidated here, its touches
  kept here. An ephemeral create from it forwards its upgrade (a createSession REQUEST, cxid
  0) ahead of the write, or, without upgrading, is forwarded as it is and answered
  EPHEMERALONLOCALSESSION whatever the leader logged for it (``FollowerRequestProcessor``,
  ``FinalRequestProcessor``).

What the leader link does with these is the Zab learner's business
(:class:`LeaderLink`, implemented by ``trizk.quorum.zab.learner.Learner``).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from typing import Protocol

from trizk.jute import records as r
from trizk.jute.codes import Code, OpCode
from trizk.server.writes.localsessions import LocalSessions, creates_ephemeral
from trizk.server.writes.sequencer import WriteRequest
from trizk.server.writes.sessions import initial_session_id

__all__ = ["LeaderLink", "LearnerWritePath"]

log = logging.getLogger("trizk.server")

_TIMEOUT = struct.Struct(">i")
_CLOSESESSION = int(OpCode.CLOSESESSION)
_UPGRADE_OPS = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.MULTI})


class LeaderLink(Protocol):
    """The learner's side of its leader connection (what the write path needs of it)."""

    def forward_request(
        self,
        session_id: int,
        cxid: int,
        op: int,
        body: bytes,
        authinfo: tuple[r.Id, ...] | None = None,
    ) -> bool:
        """Send a REQUEST; False if the link is not serving (no leader)."""
        ...

    def touch(self, session_id: int, timeout: int) -> None: ...

    def revalidate(self, session_id: int, timeout: int) -> bool: ...


class LearnerWritePath:
    """A learner's :class:`~trizk.server.frontend.core.WritePath`; see the module docstring."""

    forwards_sync = True

    def __init__(
        self,
        link: LeaderLink,
        server_id: int,
        wall: int,
        local_sessions: LocalSessions | None = None,
        zk39: bool = False,
    ) -> None:
        self.link = link
        #: this member's local sessions (``localSessionsEnabled``), else None
        self.local_sessions = local_sessions
        #: told of a local session that expired (no txn): the front end closes its connection
        self.local_session_ended: Callable[[int], None] | None = None
        self._zk39 = zk39
        self._next_id = initial_session_id(wall, server_id)
        #: sessions of this server's clients: id -> timeout (for the touches in PING replies)
        self.sessions: dict[int, int] = {}
        #: session id -> callbacks waiting for the leader's REVALIDATE answer
        self._revalidating: dict[int, list[Callable[[bool | None], None]]] = {}

    def submit(self, req: WriteRequest, now: int, wall: int) -> int | None:
        """Forward ``req``. None: the leader's commit answers it; 0: answered at once (a
        local session's closeSession); an error code: the commit answers it with that code
        if it is an error txn (EPHEMERALONLOCALSESSION)."""
        answer: int | None = None
        local = self.local_sessions
        sid = req.session_id
        if local is not None and local.is_local(sid):
            if req.op == _CLOSESESSION:
                log.info("Submitting local closeSession request for session 0x%x", sid)
                local.remove(sid)
                return 0
            if req.op in _UPGRADE_OPS and creates_ephemeral(req.op, req.frame, self._zk39):
                if local.upgrading_enabled:
                    timeout = local.upgrade(sid)
                    assert timeout is not None
                    log.info("Upgrading session 0x%x", sid)
                    self.sessions[sid] = timeout
                    self.link.forward_request(sid, 0, OpCode.CREATESESSION, _TIMEOUT.pack(timeout))
                else:
                    answer = Code.EPHEMERALONLOCALSESSION
        body = req.frame[8:]
        auth = tuple(r.Id(scheme, ident) for scheme, ident in req.auth)
        if not self.link.forward_request(req.session_id, req.cxid, req.op, body, auth):
            # Only while the link goes down: the learner is about to drop every client.
            log.warning(
                "no leader to forward request 0x%x:%d (type %d) to",
                req.session_id,
                req.cxid,
                req.op,
            )
        return answer

    def create_session(self, timeout: int, now: int, wall: int) -> int:
        sid = self._next_id
        self._next_id += 1
        if self.local_sessions is not None:
            # LearnerSessionTracker.createSession: local, not forwarded
            self.local_sessions.create(sid, timeout, now)
            return sid
        self.sessions[sid] = timeout
        self.link.forward_request(sid, 0, OpCode.CREATESESSION, _TIMEOUT.pack(timeout))
        return sid

    def touch(self, session_id: int, now: int, timeout: int | None = None) -> bool:
        local = self.local_sessions
        if local is not None and local.touch(session_id, now, timeout):
            return True  # a local session's touches stay here
        if timeout is not None:
            self.sessions[session_id] = timeout
        t = self.sessions.get(session_id)
        if t is None:
            return False
        self.link.touch(session_id, t)
        return True

    def revalidate(
        self, session_id: int, timeout: int, now: int, done: Callable[[bool | None], None]
    ) -> None:
        local = self.local_sessions
        if local is not None and local.touch(session_id, now, timeout):
            # LearnerZooKeeperServer.revalidateSession: a local session is revalidated here
            done(True)
            return
        waiting = self._revalidating.get(session_id)
        if waiting is not None:
            waiting.append(done)
            return
        if not self.link.revalidate(session_id, timeout):
            # No leader to ask (the link is going down): close the client's connection
            # without an answer, as Learner.validateSession's IOException does; the client
            # tries another member. Answering "expired" would end a live session.
            done(None)
            return
        self._revalidating[session_id] = [done]
        self.sessions[session_id] = timeout

    def revalidated(self, session_id: int, valid: bool) -> None:
        """The leader's REVALIDATE answer (``Learner.revalidate``)."""
        if not valid:
            self.sessions.pop(session_id, None)
        for done in self._revalidating.pop(session_id, ()):
            done(valid)

    def session_closed(self, session_id: int) -> None:
        """A closeSession txn was applied: the session is no longer this server's."""
        self.sessions.pop(session_id, None)
        if self.local_sessions is not None:
            self.local_sessions.remove(session_id)

    def restored(self, sessions: Mapping[int, int], now: int) -> None:
        """The replica was replaced by a snapshot holding ``sessions`` (the AdminServer's
        ``restore``; ``restoreFromSnapshot``'s new ``LearnerSessionTracker``): this server's
        sessions that the snapshot lacks are unknown from now on (no touch goes to the leader
        for them; their requests are dropped), and local sessions start over empty."""
        self.sessions = {s: t for s, t in self.sessions.items() if s in sessions}
        local = self.local_sessions
        if local is not None:
            self.local_sessions = LocalSessions(
                local.tracker.interval, now, local.upgrading_enabled
            )

    def session_committed(self, session_id: int) -> None:
        """A createSession txn was applied: an upgrading session is global now
        (``LearnerSessionTracker.commitSession``)."""
        if self.local_sessions is not None:
            self.local_sessions.committed_global(session_id)

    # -- the local sessions' expiry (the shell's session ticker; a learner's global sessions
    # -- are expired by the leader)
    def tick(self, now: int, wall: int) -> None:
        """Expire the local sessions whose time has come: no txn, their connections close."""
        local = self.local_sessions
        if local is None:
            return
        for s in local.expired(now):
            log.info("Expiring session 0x%x, timeout of %dms exceeded", s.id, s.timeout)
            if self.local_session_ended is not None:
                self.local_session_ended(s.id)

    def next_tick_in(self, now: int) -> int:
        local = self.local_sessions
        return local.wait_time(now) if local is not None else 1 << 30
