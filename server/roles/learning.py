"""A synced learner's roles wired together: front end + forwarder + replica. Pure.

ZooKeeper's ``FollowerZooKeeperServer.setupRequestProcessors`` (FollowerRequest -> Commit ->
Final, the leader's PROPOSALs logged by Sync -> SendAckRequest) and
``ObserverZooKeeperServer``'s (the same, INFORMs instead of PROPOSAL + COMMIT) in trizk's
seams::

    FrontEnd --WriteRequest--> LearnerWritePath --REQUEST--> leader link (Zab Learner)
        ^                                                          |
        +--- on_committed <-- Replica.apply <-- commit(batch) (COMMIT / INFORM, zxid order)

A learner has no sequencer: every write, session creation, reconnect and sync goes to the
leader (:class:`~trizk.server.writes.forwarder.LearnerWritePath`), who also expires sessions.
:meth:`Learning.commit` is the sink the ensemble shell's pump hands committed txns to: the
replica applies each one, a closeSession ends the session here too, and the front end fires
watches and answers the request it belongs to (if one of this server's clients sent it).
Logging the PROPOSALs and acknowledging them is the shell's and the Zab machine's business.

Made once the learner has synced with its leader (``Learner.syncWithLeader``: UPTODATE).
"""

from __future__ import annotations

from collections.abc import Sequence

from trizk.jute.codes import OpCode
from trizk.server.common.coreconfig import CoreConfig, ServerStats
from trizk.server.frontend.core import FrontEnd
from trizk.server.writes.committer import Proposal
from trizk.server.writes.forwarder import LeaderLink, LearnerWritePath
from trizk.server.writes.localsessions import LocalSessions
from trizk.storage.tree.replica import Replica

__all__ = ["Learning"]

_CLOSESESSION, _CREATESESSION = int(OpCode.CLOSESESSION), int(OpCode.CREATESESSION)


class Learning:
    """A follower's or an observer's pure core; the ensemble shell's pump feeds it commits."""

    def __init__(
        self,
        config: CoreConfig,
        replica: Replica,
        link: LeaderLink,
        stats: ServerStats,
        observer: bool,
        wall: int,
        now: int = 0,
    ) -> None:
        self.name = "observing" if observer else "following"
        self.config = config
        self.replica = replica
        self.stats = stats
        #: a learner forwards; the leader's sequencer tracks and expires its sessions
        self.sequencer = None
        local = (
            LocalSessions(config.tick_time, now, config.local_sessions_upgrading)
            if config.local_sessions
            else None
        )
        self.path = LearnerWritePath(link, config.server_id, wall, local, config.zk39)
        self.write_path = self.path
        #: the local sessions (``localSessionsEnabled``) are tracked and expired here
        self.expirer = self.path if local is not None else None
        self.front = FrontEnd(config, replica, self.path, stats)
        self.path.local_session_ended = self._local_session_ended

    def commit(self, batch: Sequence[Proposal], now: int) -> None:
        """The commit sink: apply ``batch`` (the leader's commits, in zxid order), answer it."""
        replica, path, front = self.replica, self.path, self.front
        for p in batch:
            hdr = p.hdr
            rc = replica.apply(hdr, p.txn)
            if hdr.type == _CLOSESESSION:
                path.session_closed(hdr.clientId)
            elif hdr.type == _CREATESESSION:
                path.session_committed(hdr.clientId)
            front.on_committed(hdr, rc, now)

    def _local_session_ended(self, session_id: int) -> None:
        self.stats.metrics.stale_sessions_expired += 1  # LocalSessionTracker's run
        self.front.session_ended(session_id)
