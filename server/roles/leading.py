"""An established leader's roles wired together: front end + sequencer + Zab + replica. Pure.

ZooKeeper's ``LeaderZooKeeperServer.setupRequestProcessors`` (Prep -> Proposal -> Commit ->
Final) in trizk's seams::

    FrontEnd --WriteRequest--> Sequencer --Proposal--> committer (Zab: PROPOSAL, quorum of ACKs)
        ^                                                  |
        +------ on_committed <-- Replica.apply <-- commit(batch) (COMMITs, in zxid order)

The committer is the ensemble shell's (``ZabCommitter``: each proposal goes to the
:class:`~trizk.quorum.zab.leader.Leader` machine); the shell's pump hands what a quorum acked to
:meth:`Leading.commit`, the same sink a standalone server has: the replica applies each txn,
the sequencer forgets its pending changes, the front end fires watches and answers. Learners'
REQUESTs enter :attr:`Leading.sequencer` beside the local clients' writes (the pump feeds them),
and the sequencer's tick expires every session of the ensemble.

Made when the leader is established (``Leader.startZkServer``): txns continue at the
established zxid (the new epoch << 32), and the replica's last processed zxid is set to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from trizk.server.common.coreconfig import CoreConfig, ServerStats
from trizk.server.frontend.core import FrontEnd
from trizk.server.roles.standalone import apply_commits
from trizk.server.writes.committer import Committer, Proposal
from trizk.server.writes.sequencer import Sequencer
from trizk.storage.tree.replica import Replica

__all__ = ["Leading"]


class Leading:
    """An established leader's pure core; the ensemble shell's pump feeds it commits."""

    def __init__(
        self,
        config: CoreConfig,
        replica: Replica,
        committer: Committer,
        stats: ServerStats,
        zxid: int,
        now: int,
        wall: int,
    ) -> None:
        self.config = config
        self.name = "leading"
        self.replica = replica
        self.stats = stats
        replica.tree.last_processed_zxid = zxid
        self.sequencer = Sequencer(config, replica, committer, stats, now, wall)
        self.sequencer.last_zxid = zxid
        self.write_path = self.sequencer
        self.expirer = self.sequencer
        self.front = FrontEnd(config, replica, self.sequencer, stats)
        # a local session's expiry has no txn: its connection is closed at once
        self.sequencer.local_session_ended = self.front.session_ended

    def commit(self, batch: Sequence[Proposal], now: int) -> None:
        """The commit sink: apply ``batch`` (committed by a quorum, in zxid order), answer it."""
        apply_commits(self.replica, self.sequencer, self.front, batch, now)
