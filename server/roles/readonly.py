"""A member cut off from its quorum, serving read-only clients (``ReadOnlyZooKeeperServer``). Pure.

Theory of operation
-------------------
With ``-Dreadonlymode.enabled=true`` a member that has been LOOKING for
``max(2000, tickTime)`` ms serves clients through this role until the election ends
(``QuorumPeer.run``'s LOOKING case; the shell, :mod:`trizk.server.shell.ensemble.readonly`,
decides when). Its replica is what the member last had: every txn it logged, committed or not
(the vote of its election). ZooKeeper's chain is ``ReadOnlyRequestProcessor`` -> Prep ->
Final, with a ``LearnerSessionTracker``; here it is a front end in read-only mode
(``FrontEnd.read_only``) over :class:`ReadOnlyWritePath`:

* **Handshake** (``ZooKeeperServer.processConnectRequest``): a client whose ConnectRequest did
  not end with ``readOnly`` true (an "old" client without the byte too) is refused, its
  connection closed unanswered. A reconnect of a *global* session (one the replica holds:
  created through a quorum) is refused the same way (``validateSession``). The ConnectResponse
  ends with ``readOnly`` true.
* **Sessions** (``LearnerSessionTracker``): a new session's id counts up from
  ``initializeNextSessionId(myid)``. With ``localSessionsEnabled`` it is a *local* session,
  tracked here only (touched by its requests, expired lazily: a reconnect after its timeout is
  invalid) and answered at once; without, its createSession is not local and
  ``ReadOnlyRequestProcessor`` answers it NOTREADONLY: a bare ReplyHeader (xid 0, the last
  zxid, -119) where the ConnectResponse should be, the connection left open and unread (as
  ZooKeeper 3.8.0 does; clients read it as a bad response and go elsewhere). A reconnect of a
  session that is not global is valid without local sessions (``touchSession`` accepts any),
  and valid with them only while the local session lives.
* **Requests** (``ReadOnlyRequestProcessor``, the first processor, so in session order):
  every write (create in all its forms, delete, deleteContainer, setData, setACL, reconfig,
  multi, check) and sync is answered NOTREADONLY with the last zxid and no body; a closeSession
  of a local session ends it (reply OK, connection closed), of another one NOTREADONLY. Reads,
  pings, watches and auth are answered as on any server.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trizk.server.common.coreconfig import CoreConfig, ServerStats
from trizk.server.frontend.core import FrontEnd
from trizk.server.writes.committer import Proposal
from trizk.server.writes.localsessions import LocalSessions
from trizk.server.writes.sequencer import WriteRequest
from trizk.server.writes.sessions import SessionTracker, initial_session_id
from trizk.storage.tree.replica import Replica

__all__ = ["ReadOnly", "ReadOnlyWritePath"]


class ReadOnlyWritePath:
    """A read-only member's sessions (``LearnerSessionTracker`` with its local tracker); no
    write reaches it (the front end answers them NOTREADONLY)."""

    forwards_sync = False
    #: the front end's own local-session path (``WritePath.local_sessions``) is not taken here:
    #: a read-only server's sessions go through ``FrontEnd.read_only`` (this class)
    local_sessions: LocalSessions | None = None

    def __init__(
        self,
        replica: Replica,
        server_id: int,
        tick_ms: int,
        local_sessions: bool,
        now: int,
        wall: int,
    ) -> None:
        self.replica = replica
        #: ``localSessionsEnabled``: new sessions are local (else refused NOTREADONLY)
        self.local_enabled = local_sessions
        #: the local sessions (LocalSessionTracker); its ids also number the refused ones
        self.sessions = SessionTracker(tick_ms, now, initial_session_id(wall, server_id))

    def _expire(self, now: int) -> None:
        """Forget the local sessions whose time has come (their connections, silent that
        long, are closed by the shell's connection expiry)."""
        for s in self.sessions.expired(now):
            self.sessions.remove(s.id)

    def submit(self, req: WriteRequest, now: int, wall: int) -> int | None:
        raise AssertionError("a read-only server takes no writes (answered NOTREADONLY)")

    def create_session(self, timeout: int, now: int, wall: int) -> int:
        """``LearnerSessionTracker.createSession``: a local session, or (without local
        sessions) the next id, untracked: its createSession is then refused."""
        self._expire(now)
        sid = self.sessions.allocate_id()
        if self.local_enabled:
            self.sessions.add(sid, timeout, now)
        return sid

    def touch(self, session_id: int, now: int, timeout: int | None = None) -> bool:
        """``LearnerSessionTracker.touchSession``: a live local session, or, without local
        sessions, any session."""
        self._expire(now)
        if not self.local_enabled:
            return True
        return self.sessions.touch(session_id, now, timeout)

    def revalidate(
        self, session_id: int, timeout: int, now: int, done: Callable[[bool | None], None]
    ) -> None:
        """``ZooKeeperServer.revalidateSession``: touched here (no leader to ask)."""
        done(self.touch(session_id, now, timeout))

    # -- what the front end asks in read-only mode (FrontEnd.read_only)
    def is_global(self, session_id: int) -> bool:
        """A session created through a quorum (``validateSession`` refuses its reconnect)."""
        return session_id in self.replica.sessions

    def is_local(self, session_id: int) -> bool:
        """A local session of this server (its createSession and closeSession go through)."""
        return self.local_enabled and session_id in self.sessions.sessions

    def close(self, session_id: int) -> None:
        """A local session's closeSession (``processTxnForSessionEvents``: removed)."""
        self.sessions.remove(session_id)


class ReadOnly:
    """The role of a member serving read-only clients while LOOKING; see the module docstring."""

    def __init__(
        self,
        config: CoreConfig,
        replica: Replica,
        stats: ServerStats,
        local_sessions: bool,
        now: int,
        wall: int,
    ) -> None:
        self.name = "read-only"
        self.replica = replica
        self.stats = stats
        #: no session tracker the shell ticks: local sessions expire lazily
        self.sequencer = None
        self.expirer = None
        self.path = ReadOnlyWritePath(
            replica, config.server_id, config.tick_time, local_sessions, now, wall
        )
        self.write_path = self.path
        self.front = FrontEnd(config, replica, self.path, stats)
        self.front.read_only = self.path

    def commit(self, batch: Sequence[Proposal], now: int) -> None:
        """The commit sink: nothing commits while LOOKING; apply what would (in zxid order)."""
        replica = self.replica
        for p in batch:
            replica.apply(p.hdr, p.txn)
