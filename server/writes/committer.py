"""The committer seam: prepared txns go in, committed txns come out in zxid order.

Every role hands its sequencer's output to one :class:`Committer` and is told of commits through
one :data:`CommitSink`; what stands between the two is the committer's business:

* standalone: the txn log (:class:`trizk.server.shell.persistence.Persistence`): append, fsync, then
  commit -- a txn is durable before any client can see its effects;
* in memory (:class:`MemoryCommitter`): no durability, commits on :meth:`flush` (tests, the
  simulation, a server without a data dir);
* ensemble leader: Zab's propose -> quorum of ACKs (each after the follower's fsync) -> COMMIT;
* learner: there is no sequencer; the leader's PROPOSAL/COMMIT stream feeds the sink.

Contract: ``propose`` never blocks and never fails for a well-formed proposal (a committer whose
storage fails stops the server); the sink receives every proposed txn exactly once, in the order
proposed (which is zxid order), in batches of one or more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from trizk.jute import records as r
from trizk.quorum.verifier import QuorumVerifier

__all__ = ["CommitSink", "Committer", "MemoryCommitter", "Proposal"]


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False)
class Proposal:
    """A prepared txn on its way to be committed (``Request`` with its ``TxnHeader``)."""

    hdr: r.TxnHeader
    txn: r.Record | None
    #: tree digest after this txn, computed in prep (PrepRequestProcessor.setTxnDigest)
    digest: int
    #: a reconfig's new configuration (``Request.qv``): the leader counts both quorums
    config: QuorumVerifier | None

    def __init__(
        self,
        hdr: r.TxnHeader,
        txn: r.Record | None,
        digest: int = 0,
        config: QuorumVerifier | None = None,
    ) -> None:
        self.hdr = hdr
        self.txn = txn
        self.digest = digest
        self.config = config


#: Receives committed proposals, oldest first, with the monotonic time (ms) of their commit:
#: ``sink(batch, now)``. A role's sink applies them to the replica and answers them
#: (:mod:`trizk.server.roles`).
CommitSink = Callable[[Sequence[Proposal], int], None]


def _drop(batch: Sequence[Proposal], now: int) -> None:
    """The sink of a committer nobody listens to."""


class Committer(Protocol):
    def propose(self, p: Proposal) -> None:
        """Take ``p`` (the next zxid) towards commit; the sink hears of it once committed."""
        ...


class MemoryCommitter:
    """Commits without durability: every proposal is committed at the next :meth:`flush`."""

    def __init__(self, sink: CommitSink | None = None) -> None:
        self.sink: CommitSink = sink if sink is not None else _drop
        self.queue: list[Proposal] = []

    def propose(self, p: Proposal) -> None:
        self.queue.append(p)

    def flush(self, now: int = 0) -> int:
        """Commit everything proposed so far (and what committing it proposes in turn), at
        monotonic time ``now``."""
        n = 0
        while self.queue:
            batch, self.queue = self.queue, []
            n += len(batch)
            self.sink(batch, now)
        return n
