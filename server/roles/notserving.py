"""An ensemble member between roles: no client is served, committed txns are applied. Pure.

While a member is LOOKING, and while a new leader or learner synchronises (before
``Leader.startZkServer`` / ``Learner``'s UPTODATE), ZooKeeper has no ZooKeeperServer serving
clients: a handshake is refused ("not currently serving"; the client tries another member)
and a four-letter word still answers. Here that is a front end that is not serving, whose
write path refuses everything (:class:`NotServing`), and whose commit sink only applies: the
txns a leader commits while it establishes itself, or a learner receives with its DIFF, change
the replica and answer nobody.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trizk.server.common.coreconfig import CoreConfig, ServerStats
from trizk.server.frontend.core import FrontEnd
from trizk.server.writes.committer import Proposal
from trizk.server.writes.localsessions import LocalSessions
from trizk.server.writes.sequencer import WriteRequest
from trizk.storage.tree.replica import Replica

__all__ = ["NotServing", "NotServingRole"]


class NotServing:
    """The write path while no role serves clients: every handshake is refused."""

    forwards_sync = False
    local_sessions: LocalSessions | None = None

    def submit(self, req: WriteRequest, now: int, wall: int) -> int | None:
        raise AssertionError("no write path while not serving")

    def create_session(self, timeout: int, now: int, wall: int) -> int:
        raise AssertionError("no sessions while not serving")

    def touch(self, session_id: int, now: int, timeout: int | None = None) -> bool:
        return False

    def revalidate(
        self, session_id: int, timeout: int, now: int, done: Callable[[bool | None], None]
    ) -> None:
        done(None)


class NotServingRole:
    """The role of an ensemble member that serves no clients (LOOKING, or syncing)."""

    def __init__(self, config: CoreConfig, replica: Replica, stats: ServerStats) -> None:
        self.name = "not serving"
        self.replica = replica
        self.stats = stats
        self.sequencer = None
        self.expirer = None
        self.write_path = NotServing()
        self.front = FrontEnd(config, replica, self.write_path, stats)
        self.front.serving = False

    def commit(self, batch: Sequence[Proposal], now: int) -> None:
        """The commit sink: apply ``batch`` (in zxid order); nobody is waiting for it here."""
        replica = self.replica
        for p in batch:
            replica.apply(p.hdr, p.txn)
