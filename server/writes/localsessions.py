"""Local sessions (``localSessionsEnabled``): sessions that live on one ensemble member. Pure.

ZooKeeper's ``UpgradeableSessionTracker`` + ``LocalSessionTracker`` (the local half that
``LeaderSessionTracker`` and ``LearnerSessionTracker`` share) and
``QuorumZooKeeperServer.checkUpgradeSession``. Every method takes ``now`` from the caller.

Theory
------
With ``localSessionsEnabled=true`` every new session of an ensemble member (leader, follower or
observer; a standalone server ignores the key, as ``ZooKeeperServerMain`` does) is *local*: the
member tracks and expires it alone, no createSession or closeSession txn is proposed or logged,
and nothing of it reaches the leader but its writes (``QuorumZooKeeperServer.setLocalSessionFlag``,
``FollowerRequestProcessor``: local createSession/closeSession are not forwarded). Its id has
the usual shape, ``(myid << 56) | ((now_ms << 24) >>> 8)`` counting up
(``SessionTrackerImpl.initializeNextSessionId``). Its clients' pings touch it here only (learners
send no touch for it), and mntr's ``local_sessions`` gauge counts these sessions.

* An ephemeral create (``create``/``create2``, or a ``multi`` with one) from a local session
  needs a global session: with ``localSessionsUpgradingEnabled=true`` the session is *upgraded*
  (:meth:`LocalSessions.upgrade`: it leaves the local tracker, and a createSession request
  with cxid 0 and its timeout goes to the leader ahead of the write: the createSession txn is
  logged before the create); without it the create fails with EPHEMERALONLOCALSESSION (-120).
  The leader logs an error txn for it (its own local session: -120; a learner's, which it does
  not know: SESSIONEXPIRED, as ``checkGlobalSession``), and the learner answers -120 anyway
  (``FinalRequestProcessor`` prefers the request's own exception).
* While upgrading a session is in :attr:`LocalSessions.upgrading` until its createSession
  commits (``finishedUpgrading``): its touches go to the leader as a global session's do.
* A local session cannot move: a reconnect to another member is revalidated by the leader,
  which knows only global sessions (``LeaderZooKeeperServer.checkIfValidGlobalSession``):
  SESSIONEXPIRED (timeout 0, session 0). Its member's role change ends it too (a new tracker).
* The leader lets through the writes of sessions it does not know whose id carries another
  member's id (``LeaderSessionTracker.checkSession``: a learner's local session) and refuses
  those that carry its own id (SESSIONEXPIRED).

Invariants: a session id is in at most one of the local tracker and :attr:`upgrading`; a local
session is never in the replica's session table (nothing of it is logged).
"""

from __future__ import annotations

from trizk.jute import records as r
from trizk.jute.codes import CreateMode, OpCode
from trizk.jute.primitives import JuteDecodeError
from trizk.server.frontend.requests import decode_body, parse_multi
from trizk.server.writes.sessions import LOCAL, Session, SessionTracker

__all__ = ["LocalSessions", "creates_ephemeral", "server_id_of"]

_CREATE, _CREATE2, _MULTI = int(OpCode.CREATE), int(OpCode.CREATE2), int(OpCode.MULTI)


def server_id_of(session_id: int) -> int:
    """``LeaderSessionTracker.getServerIdFromSessionId``: the id's top byte, sign-extended
    (``sessionId >> 56`` on a Java long)."""
    return session_id >> 56


def _ephemeral_flags(flags: int) -> bool:
    try:
        return CreateMode(flags).ephemeral
    except ValueError:  # CreateMode.fromFlag throws: checkUpgradeSession gives up
        return False


def creates_ephemeral(op: int, frame: bytes, zk39: bool = False) -> bool:
    """Whether the request ``frame`` (header included) is a ``create``/``create2`` of an
    ephemeral node or a ``multi`` with one among its create/create2 ops (what
    ``checkUpgradeSession`` looks for; a body that does not decode is not one)."""
    try:
        if op == _CREATE or op == _CREATE2:
            return _ephemeral_flags(decode_body(r.CreateRequest, frame).flags)
        if op == _MULTI:
            for sub, rec in parse_multi(frame, zk39=zk39):
                if (sub == _CREATE or sub == _CREATE2) and _ephemeral_flags(
                    getattr(rec, "flags", 0)
                ):
                    return True
    except (JuteDecodeError, ValueError):
        return False
    return False


class LocalSessions:
    """One member's local sessions (``LocalSessionTracker``) and the sessions being upgraded."""

    def __init__(self, tick_ms: int, now: int, upgrading_enabled: bool) -> None:
        #: ``localSessionsUpgradingEnabled``
        self.upgrading_enabled = upgrading_enabled
        # ids come from the member's own allocator (create), so the tracker's stays unused
        self.tracker = SessionTracker(tick_ms, now, 0)
        #: sessions upgraded and not yet committed as global: id -> timeout
        self.upgrading: dict[int, int] = {}

    def __len__(self) -> int:
        """mntr's ``local_sessions`` (``getLocalSessionCount``)."""
        return len(self.tracker.sessions)

    def create(self, session_id: int, timeout: int, now: int) -> None:
        """A new local session, tracked from now (``LocalSessionTracker.createSession``)."""
        self.tracker.add(session_id, timeout, now).owner = LOCAL

    def get(self, session_id: int) -> Session | None:
        return self.tracker.sessions.get(session_id)

    def is_local(self, session_id: int) -> bool:
        return session_id in self.tracker.sessions

    def touch(self, session_id: int, now: int, timeout: int | None = None) -> bool:
        return self.tracker.touch(session_id, now, timeout)

    def upgrade(self, session_id: int) -> int | None:
        """``UpgradeableSessionTracker.upgradeSession``: the session leaves the local tracker
        and is upgrading; its timeout (for the createSession request), or None if it is not a
        local session (any more)."""
        s = self.tracker.sessions.get(session_id)
        if s is None:
            return None
        self.tracker.remove(session_id)
        self.upgrading[session_id] = s.timeout
        return s.timeout

    def committed_global(self, session_id: int) -> None:
        """A createSession txn of ``session_id`` was applied: it is global now
        (``commitSession``: ``removeLocalSession`` + ``finishedUpgrading``)."""
        self.tracker.remove(session_id)
        self.upgrading.pop(session_id, None)

    def remove(self, session_id: int) -> None:
        """The session is closed (``removeSession``)."""
        self.tracker.remove(session_id)
        self.upgrading.pop(session_id, None)

    def expired(self, now: int) -> list[Session]:
        """Local sessions whose time has come; they leave the tracker (their expiry is a
        closeSession that no one logs: the member drops them and closes their connections)."""
        out = self.tracker.expired(now)
        for s in out:
            self.tracker.remove(s.id)
        return out

    def wait_time(self, now: int) -> int:
        return self.tracker.wait_time(now)
