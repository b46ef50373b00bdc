"""A standalone server's roles wired together: front end + sequencer + committer + replica. Pure.

ZooKeeper's standalone processor chain (Prep -> Sync -> Final) in trizk's seams::

    FrontEnd --WriteRequest--> Sequencer --Proposal--> Committer (txn log + fsync, or memory)
        ^                                                  |
        +------ on_committed <-- Replica.apply <-- commit(batch) (in zxid order)

:meth:`Standalone.commit` is the committer's sink: for each committed txn, in order, the
replica applies it (the only place a live commit changes state), the sequencer forgets its
pending changes, then the front end fires watches and answers the request it belongs to.
An ensemble member wires the same pieces differently (:mod:`.leading`, :mod:`.learning`); the
:class:`~trizk.server.roles.factory.RoleFactory` builds them all.
"""

from __future__ import annotations

from collections.abc import Sequence

from trizk.server.common.coreconfig import CoreConfig, ServerStats
from trizk.server.frontend.core import FrontEnd
from trizk.server.writes.committer import Committer, Proposal
from trizk.server.writes.sequencer import Sequencer
from trizk.storage.tree.replica import Replica

__all__ = ["Standalone", "apply_commits"]


def apply_commits(
    replica: Replica, sequencer: Sequencer, front: FrontEnd, batch: Sequence[Proposal], now: int
) -> None:
    """The commit sink of a server that sequences its own writes (standalone, leading): for
    each txn of ``batch`` (committed, in zxid order) the replica applies it, the sequencer
    forgets its pending changes, the front end fires watches and answers it."""
    for p in batch:
        rc = replica.apply(p.hdr, p.txn)
        sequencer.committed(p.hdr, p.txn, now)
        front.on_committed(p.hdr, rc, now)


class Standalone:
    """One standalone server's pure core; the shell feeds it bytes, times and commits."""

    def __init__(
        self, config: CoreConfig, replica: Replica, committer: Committer, now: int, wall: int
    ) -> None:
        self.name = "standalone"
        self.config = config
        self.replica = replica
        self.committer = committer
        self.stats = ServerStats(started=now)
        self.sequencer = Sequencer(config, replica, committer, self.stats, now, wall)
        self.write_path = self.sequencer
        self.expirer = self.sequencer
        self.front = FrontEnd(config, replica, self.sequencer, self.stats)
        # standalone ZooKeeper: every request passes the SyncRequestProcessor
        self.front.counts_sync = True

    def commit(self, batch: Sequence[Proposal], now: int) -> None:
        """The committer's sink: apply ``batch`` (committed, in zxid order) and answer it."""
        apply_commits(self.replica, self.sequencer, self.front, batch, now)
