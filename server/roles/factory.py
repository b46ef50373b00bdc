"""Every role a server can have, built in one place (ZooKeeper's
``*ZooKeeperServer.setupRequestProcessors``). Pure.

Theory of operation
-------------------
A server is a replica (the data tree, the committed sessions, the last applied zxid) and a
*role* around it: a front end (connections, reads, watches, replies), the write path the front
end sends state changes to, and the *commit sink* that hears of committed txns, applies them
to the replica and answers them. Which pieces a role has, and in which order a committed txn
passes them, is declared once per role:

================  ====================  =============================  ===========================
role              write path            what commits                   sink (per txn, zxid order)
================  ====================  =============================  ===========================
standalone        Sequencer (prep)      the txn log (append + fsync)   apply, sequencer, front end
leading           Sequencer (prep)      Zab: a quorum of ACKs          apply, sequencer, front end
following         LearnerWritePath      the leader's COMMITs           apply, closeSession, front
observing         LearnerWritePath      the leader's INFORMs           apply, closeSession, front
not serving       NotServing (refuses)  sync with a leader             apply
read-only         ReadOnlyWritePath     nothing (LOOKING)              apply
================  ====================  =============================  ===========================

The sequencer of a standalone server or a leader is also the session tracker: its ``tick``
expires sessions and :attr:`Role.expirer` is what the shell's ticker calls (None: the role
expires nothing, a learner's leader does; a learner with local sessions expires those). An
ensemble member serves through the not-serving role while it is LOOKING or syncing, and gets
a new role object each time it starts serving
(``Leader.startZkServer``, ``Learner.syncWithLeader``), as ZooKeeper makes a new
ZooKeeperServer. With ``readonlymode.enabled`` a member LOOKING for long enough serves the
read-only role (:mod:`.readonly`: reads for read-only clients, writes answered NOTREADONLY)
until its election ends.

The shell installs a role (its front end takes the connections; the previous role's are closed)
and hands it committed batches through :meth:`Role.commit`: the txn log's committer on a
standalone server, the Zab pump on an ensemble member. Times are passed in (``now`` monotonic
ms, ``wall`` wall-clock ms, from the shell's one clock); nothing here reads a clock or touches
a socket or a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from trizk.server.common.coreconfig import CoreConfig, ServerStats
from trizk.server.common.servermetrics import ServerMetrics
from trizk.server.frontend.core import FrontEnd, WritePath
from trizk.server.roles.leading import Leading
from trizk.server.roles.learning import Learning
from trizk.server.roles.notserving import NotServingRole
from trizk.server.roles.readonly import ReadOnly
from trizk.server.roles.standalone import Standalone
from trizk.server.writes.committer import Committer, Proposal
from trizk.server.writes.forwarder import LeaderLink, LearnerWritePath
from trizk.server.writes.sequencer import Sequencer
from trizk.storage.tree.datatree import DataTree
from trizk.storage.tree.replica import Replica

__all__ = ["Role", "RoleFactory", "SessionExpirer", "restore"]


class SessionExpirer(Protocol):
    """A session tracker the shell's ticker drives (the sequencer; a learner's local
    sessions)."""

    def tick(self, now: int, wall: int) -> None: ...

    def next_tick_in(self, now: int) -> int: ...


class Role(Protocol):
    """One role's chain: what the shell installs and feeds."""

    @property
    def name(self) -> str:
        """``standalone``, ``leading``, ``following``, ``observing``, ``not serving`` or
        ``read-only``."""
        ...

    @property
    def front(self) -> FrontEnd:
        """The front end: the shell hands it client bytes; it answers and fires watches."""
        ...

    @property
    def write_path(self) -> WritePath:
        """Where the front end sends writes, session creations, touches and revalidations."""
        ...

    @property
    def sequencer(self) -> Sequencer | None:
        """The sequencer (a standalone server's or a leader's), else None."""
        ...

    @property
    def expirer(self) -> SessionExpirer | None:
        """What the shell's session ticker calls (None: this role expires no session)."""
        ...

    def commit(self, batch: Sequence[Proposal], now: int) -> None:
        """The commit sink: ``batch`` is committed, in zxid order; apply it and answer it."""
        ...


class RoleFactory:
    """Builds the roles of one server around its replica, with one configuration and one
    ServerMetrics for all of them (ZooKeeper's metrics outlive a role)."""

    def __init__(
        self, config: CoreConfig, replica: Replica, metrics: ServerMetrics | None = None
    ) -> None:
        self.config = config
        self.replica = replica
        self.metrics = metrics if metrics is not None else ServerMetrics()

    def standalone(self, committer: Committer, now: int, wall: int) -> Standalone:
        """``ZooKeeperServer``: prep, then the txn log (``committer``), then apply and answer."""
        node = Standalone(self.config, self.replica, committer, now, wall)
        node.stats.metrics = self.metrics
        return node

    def leading(self, committer: Committer, zxid: int, now: int, wall: int) -> Leading:
        """``LeaderZooKeeperServer``, once established at ``zxid``: prep, then Zab
        (``committer`` proposes), then apply and answer what a quorum acked."""
        stats = ServerStats(started=now, metrics=self.metrics)
        return Leading(self.config, self.replica, committer, stats, zxid, now, wall)

    def following(self, link: LeaderLink, wall: int, now: int = 0) -> Learning:
        """``FollowerZooKeeperServer``, once synced: forward to the leader over ``link``, apply
        and answer its COMMITs."""
        return Learning(self.config, self.replica, link, self._stats(), False, wall, now)

    def observing(self, link: LeaderLink, wall: int, now: int = 0) -> Learning:
        """``ObserverZooKeeperServer``, once synced: as a follower, fed by INFORMs."""
        return Learning(self.config, self.replica, link, self._stats(), True, wall, now)

    def not_serving(self) -> NotServingRole:
        """An ensemble member that serves no clients (LOOKING, or syncing with a leader)."""
        return NotServingRole(self.config, self.replica, self._stats())

    def read_only(self, local_sessions: bool, now: int, wall: int) -> ReadOnly:
        """``ReadOnlyZooKeeperServer``: a member LOOKING for long enough serves read-only
        clients from its replica; local sessions with ``local_sessions``."""
        return ReadOnly(
            self.config,
            self.replica,
            ServerStats(started=now, metrics=self.metrics),
            local_sessions,
            now,
            wall,
        )

    def _stats(self) -> ServerStats:
        return ServerStats(metrics=self.metrics)


def restore(role: Role, tree: DataTree, sessions: dict[int, int], now: int, wall: int) -> None:
    """``ZooKeeperServer.restoreFromSnapshot`` once the snapshot is read (ZooKeeper 3.9's
    AdminServer ``restore``), on whatever role serves: the replica takes the restored tree and
    sessions in place (``setZKDatabase``: no txn, nothing written to disk; the txns committed
    afterwards apply to it), the front end loses every watch (they lived in the old tree) but
    keeps its connections, and the session tracker starts over from the snapshot's sessions
    (``createSessionTracker``): the sequencer's on a standalone server or a leader, a
    learner's own sessions filtered to those the snapshot holds. An ensemble member restores
    only itself, as ZooKeeper's command does (the other members keep their state)."""
    front = role.front
    front.replica.reset(tree, sessions)
    front.restored()
    sequencer = role.sequencer
    if sequencer is not None:
        sequencer.restored(now, wall)
    path = role.write_path
    if isinstance(path, LearnerWritePath):
        path.restored(sessions, now)
