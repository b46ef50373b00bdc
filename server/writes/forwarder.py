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

What the leader link does with these is the Zab learner's business
(:class:`LeaderLink`, implemented by ``trizk.quorum.zab.learner.Learner``).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Protocol

from trizk.jute import records as r
from trizk.jute.codes import OpCode
from trizk.server.writes.sequencer import WriteRequest
from trizk.server.writes.sessions import initial_session_id

__all__ = ["LeaderLink", "LearnerWritePath"]

log = logging.getLogger("trizk.server")

_TIMEOUT = struct.Struct(">i")


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

    def __init__(self, link: LeaderLink, server_id: int, wall: int) -> None:
        self.link = link
        self._next_id = initial_session_id(wall, server_id)
        #: sessions of this server's clients: id -> timeout (for the touches in PING replies)
        self.sessions: dict[int, int] = {}
        #: session id -> callbacks waiting for the leader's REVALIDATE answer
        self._revalidating: dict[int, list[Callable[[bool | None], None]]] = {}

    def submit(self, req: WriteRequest, now: int, wall: int) -> None:
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

    def create_session(self, timeout: int, now: int, wall: int) -> int:
        sid = self._next_id
        self._next_id += 1
        self.sessions[sid] = timeout
        self.link.forward_request(sid, 0, OpCode.CREATESESSION, _TIMEOUT.pack(timeout))
        return sid

    def touch(self, session_id: int, now: int, timeout: int | None = None) -> bool:
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
