"""The replica: the replicated state machine every server role holds. Pure.

A replica is the data tree, the committed session table (session id -> timeout, what a
snapshot records) and the zxid of the last txn applied. :meth:`Replica.apply` is the *only*
way committed txns change it, whatever brings them: a standalone server's txn log commit, a Zab
COMMIT on a learner, the leader's own commit, txn log replay at start-up, or the txns that
follow a SNAP. That is ``ZKDatabase.processTxn`` + ``FileTxnSnapLog.processTransaction``:

* ``createSession`` adds (id, timeout) to the session table, ``closeSession`` removes the id
  (and, through the tree, the session's ephemerals);
* every txn goes to :meth:`DataTree.apply`, which is deterministic (time comes from the txn
  header) and idempotent over a state that already contains it, so fuzzy snapshots plus replay
  are correct.

Invariants: ``last_zxid`` never decreases except through :meth:`reset` (TRUNC, SNAP); the
session table holds exactly the sessions created and not closed by the applied txns (plus those
of the snapshot it started from). Expiry is not here: only the sequencer (standalone server or
leader) decides when a session expires, and it does so by proposing a ``closeSession``.
"""

from __future__ import annotations

from trizk.jute import records as r
from trizk.jute.codes import OpCode
from trizk.storage.tree.datatree import ApplyResult, DataTree

__all__ = ["Replica"]

# Enum members used per txn, as module constants: on Python 3.11 looking one up on its class
# costs ~0.1 us (EnumType.__getattr__ keeps the lookup off the fast path).
_CREATESESSION, _CLOSESESSION = OpCode.CREATESESSION, OpCode.CLOSESESSION


class Replica:
    """Data tree + committed sessions + last applied zxid; see the module docstring."""

    __slots__ = ("sessions", "tree")

    def __init__(self, tree: DataTree, sessions: dict[int, int] | None = None) -> None:
        self.tree = tree
        #: committed session table: id -> negotiated timeout (ms)
        self.sessions: dict[int, int] = {} if sessions is None else sessions

    @property
    def last_zxid(self) -> int:
        """The zxid of the last txn applied (``DataTree.lastProcessedZxid``)."""
        return self.tree.last_processed_zxid

    def apply(self, hdr: r.TxnHeader, txn: r.Record | None) -> ApplyResult:
        """Apply one committed txn to the session table and the tree."""
        t = hdr.type
        if t == _CREATESESSION:
            assert isinstance(txn, r.CreateSessionTxn)
            self.sessions[hdr.clientId] = txn.timeOut
        elif t == _CLOSESESSION:
            self.sessions.pop(hdr.clientId, None)
        return self.tree.apply(hdr, txn)

    def kill_dead_sessions(self) -> list[int]:
        """Drop the ephemerals of owners that have no session (ZooKeeperServer.loadData's
        "Clean up dead sessions": killSession at the last zxid, no txn). Returns the sessions
        killed."""
        tree = self.tree
        dead = [sid for sid in tree.ephemerals if sid not in self.sessions]
        zxid = tree.last_processed_zxid
        # DataTree.killSession is no processTxn: nothing goes to the digest log
        was_logging = tree.log_digests
        tree.log_digests = False
        for sid in dead:
            tree.apply(r.TxnHeader(sid, 0, zxid, 0, OpCode.CLOSESESSION), None)
        tree.log_digests = was_logging
        return dead

    def reset(self, tree: DataTree, sessions: dict[int, int]) -> None:
        """Replace the whole state (a SNAP from the leader, or a reload after TRUNC)."""
        self.tree = tree
        self.sessions = sessions
