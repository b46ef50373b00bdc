"""The one applier of Zab Readies: what a host does with a machine's :class:`~.zab.Ready`.

Theory (the etcd-raft ``RawNode`` shape)
----------------------------------------
A Zab machine (:class:`~.leader.Leader`, :class:`~.learner.Learner`) only says what it wants
done, in a :class:`~.zab.Ready`; :class:`ReadyApplier` turns each Ready into a :class:`Plan`
and keeps the bookkeeping that connects the host's disk to the machine's ``advance``. Every
host hands Readies to the machines through it: the Trio pumps of a real member
(``server/shell/ensemble/``), the deterministic simulation (``tests/quorum/sim/cluster.py``)
and the scripted scenarios (``tests/quorum/test_zab.py``). A host owns only what is its own:
the disk steps (files, or a simulated disk), the links, the replica, metrics and time.

A Ready is one of two kinds (:meth:`Plan.barrier`):

* a **pipelined** append: txn entries and nothing else to persist (a leader's proposals, a
  following learner's PROPOSALs and an observer's INFORMs in broadcast). The host *appends*
  the entries to its log without waiting and reports the append's number
  (:meth:`ReadyApplier.persisted`); the rest of the Ready (messages, committed txns, the
  requests a leader takes in) goes on at once, and the next Ready may be taken while the sync
  runs. When the host's sync reaches that number (:meth:`ReadyApplier.synced`, in the order
  of the appends) the entries' ``advance`` follows: the ACKs that promise durability leave in
  zxid order, as ZooKeeper's ``SyncRequestProcessor`` acknowledges each group fsync while the
  proposal flow goes on;
* a **barrier**: anything else to persist (epoch files, wipe, TRUNC, SNAP install, a
  snapshot; with the entries logged during a sync). Before its steps, every append before it
  must be durable; its :attr:`Plan.steps` are performed whole, in order, and durable before
  the Ready is finished; its entries are advanced with the rest of the Ready (so a learner's
  ACK of NEWLEADER comes before the ACKs of the proposals synced with it, as a Java leader
  requires).

A Ready with nothing to persist is pipelined (nothing to wait for).

The host's order for each plan (:meth:`ReadyApplier.take` returns the next one, and no other
until :meth:`ReadyApplier.finish`)::

    plan = applier.take()
    send plan.ready.messages (none waits for persistence; after a SNAP packet write the
        replica's snapshot body), close plan.ready.close
    barrier:   wait until every earlier append is durable, then perform plan.steps in order
               (the last, LogEntries, appends and syncs), then applier.persisted()
    pipelined: n = append plan.append (when any, else n = None); applier.persisted(n)
    applier.synced(what the host knows durable)     earlier appends advance first
    for e in applier.committed(): apply e           (decode_entry: its header and txn)
    the Ready's other fields (serving, requests, touches, revalidate, synced, ...)
    applier.finish()                                the machine's advance

and, whenever a sync returns, ``applier.synced(n)``. A crash loses what was not durable; the
machine never acted on it (its ACKs come only from ``advance``).

Beside the plans the applier keeps what a member's history needs across its roles
(``ZKDatabase``): :attr:`ReadyApplier.committed_log`, the newest committed txns a leader
serves DIFFs from, and :attr:`ReadyApplier.unapplied`, the txns logged but not applied, which
:meth:`ReadyApplier.fast_forward` hands back in zxid order when a role that served ends
(``ZKDatabase.fastForwardDataBase``).

Invariants
----------
* ``advance`` of a Ready's entries only after the host reported them durable; appends are
  advanced in the order they were made.
* A barrier's steps start only after every earlier append was reported durable.
* Plans are handed out one at a time, in the machine's order; committed entries leave in that
  order, each recorded in the committed log as it is handed to the host to apply.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from trizk.jute.records import Record, TxnHeader
from trizk.quorum.zab.leader import COMMIT_LOG_COUNT, committed_log_capacity
from trizk.quorum.zab.zab import Entry, Ready, SnapshotIn
from trizk.storage.formats import treeio, txnlog

__all__ = [
    "AcceptedEpoch",
    "CurrentEpoch",
    "InstallSnapshot",
    "LogEntries",
    "Plan",
    "ReadyApplier",
    "Step",
    "TakeSnapshot",
    "Truncate",
    "Wipe",
    "ZabMachine",
    "decode_entry",
]


class ZabMachine(Protocol):
    """The Ready half of a Zab machine (:class:`~.leader.Leader`, :class:`~.learner.Learner`)."""

    def has_ready(self) -> bool: ...

    def ready(self) -> Ready: ...

    def advance(self, rd: Ready) -> None: ...


# ---------------------------------------------------------------------- persistence steps


@dataclass(frozen=True, slots=True)
class AcceptedEpoch:
    """Write the ``acceptedEpoch`` file (atomically, ``QuorumPeer.writeLongToFile``)."""

    epoch: int


@dataclass(frozen=True, slots=True)
class CurrentEpoch:
    """Write the ``currentEpoch`` file (atomically)."""

    epoch: int


@dataclass(frozen=True, slots=True)
class Wipe:
    """Delete every snapshot and txn log (the epoch files stay); the replica is empty."""


@dataclass(frozen=True, slots=True)
class Truncate:
    """Cut the txn log after ``zxid`` and reload the replica to it."""

    zxid: int


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """Load the replica from the leader's snapshot (it is then at ``snapshot.zxid``)."""

    snapshot: SnapshotIn


@dataclass(frozen=True, slots=True)
class TakeSnapshot:
    """Write a snapshot of the replica."""


@dataclass(frozen=True, slots=True)
class LogEntries:
    """Append ``entries`` to the txn log and sync them (durable when the step is done)."""

    entries: list[Entry]


Step = AcceptedEpoch | CurrentEpoch | Wipe | Truncate | InstallSnapshot | TakeSnapshot | LogEntries


def steps_of(rd: Ready) -> list[Step]:
    """A Ready's persistence, in the order of the Ready contract (``zab.py``)."""
    steps: list[Step] = []
    if rd.accepted_epoch is not None:
        steps.append(AcceptedEpoch(rd.accepted_epoch))
    if rd.current_epoch is not None:
        steps.append(CurrentEpoch(rd.current_epoch))
    if rd.wipe:
        steps.append(Wipe())
    if rd.truncate_to is not None:
        steps.append(Truncate(rd.truncate_to))
    if rd.snapshot_in is not None:
        steps.append(InstallSnapshot(rd.snapshot_in))
    if rd.take_snapshot:
        steps.append(TakeSnapshot())
    if rd.entries:
        steps.append(LogEntries(rd.entries))
    return steps


# its own __init__, compiled: see Entry in zab.py
@dataclass(slots=True, init=False)
class Plan:
    """One Ready and what its host does with it (see the module docstring for the order)."""

    ready: Ready
    #: barrier only: the persistence steps, in order (the last may be :class:`LogEntries`)
    steps: list[Step]
    #: pipelined only: the entries to append without waiting for their sync
    append: list[Entry]

    def __init__(
        self, ready: Ready, steps: list[Step] | None = None, append: list[Entry] | None = None
    ) -> None:
        self.ready = ready
        self.steps = [] if steps is None else steps
        self.append = [] if append is None else append

    @property
    def barrier(self) -> bool:
        """Every earlier append must be durable before :attr:`steps`, which run whole."""
        return bool(self.steps)


def plan_of(rd: Ready) -> Plan:
    """Classify a Ready: a pipelined append (entries, nothing else to persist), or a barrier."""
    if (
        rd.accepted_epoch is None
        and rd.current_epoch is None
        and not rd.wipe
        and rd.truncate_to is None
        and rd.snapshot_in is None
        and not rd.take_snapshot
    ):
        return Plan(rd, append=rd.entries)
    return Plan(rd, steps=steps_of(rd))


def decode_entry(data: bytes) -> tuple[TxnHeader, Record | None]:
    """A marshalled txn entry (``Util.marshallTxnEntry``) as the header and the txn a replica
    applies (a multi's sub-txns decoded)."""
    te = txnlog.decode_payload(data)
    return te.header, treeio.current_txn(te)


class ReadyApplier:
    """Hands one member's Zab machine's Readies to its host as :class:`Plan` s and advances
    the machine as the host reports them done (see the module docstring)."""

    def __init__(
        self, committed_log: Iterable[Entry] = (), commit_log_count: int = COMMIT_LOG_COUNT
    ) -> None:
        #: ZKDatabase.committedLog: the newest txns applied (or fast-forwarded), for DIFFs
        self.committed_log: deque[Entry] = deque(
            committed_log, maxlen=committed_log_capacity(commit_log_count)
        )
        #: txns logged by this member and not (yet) applied: zxid -> marshalled entry
        self.unapplied: dict[int, bytes] = {}
        self._machine: ZabMachine | None = None
        #: pipelined appends not yet known durable: (append number, their entries)
        self._undurable: deque[tuple[int, list[Entry]]] = deque()
        #: the plan handed out and not yet finished
        self._plan: Plan | None = None
        self._persisted = False

    # ------------------------------------------------------------------ roles

    def start(self, machine: ZabMachine) -> None:
        """A role begins: its machine's Readies go through this applier from now on."""
        self._machine = machine
        self._undurable.clear()
        self._plan = None

    def stop(self) -> None:
        """The role ended: its machine gets nothing more (appends still in flight are the
        host's to wait for before its vote)."""
        self._machine = None
        self._undurable.clear()
        self._plan = None

    @property
    def appends_in_flight(self) -> int:
        """Pipelined appends reported and not yet durable."""
        return len(self._undurable)

    # ------------------------------------------------------------------ plans

    def take(self) -> Plan | None:
        """The machine's next Ready as a plan; None if it has none, or while the plan taken
        before is not finished."""
        m = self._machine
        if m is None or self._plan is not None or not m.has_ready():
            return None
        plan = self._plan = plan_of(m.ready())
        self._persisted = False
        return plan

    def persisted(self, append: int | None = None) -> None:
        """The plan's persistence was done: a barrier's steps are durable, or a pipelined
        plan's entries were appended as the host's append number ``append`` (None: the
        plan had no entries)."""
        plan = self._plan
        assert plan is not None and not self._persisted, "persisted() without a plan"
        self._persisted = True
        entries = plan.ready.entries
        for e in entries:
            self.unapplied[e.zxid] = e.data
        if plan.barrier:
            return
        if entries:
            assert append is not None, "a pipelined append needs its number"
            self._undurable.append((append, entries))

    def synced(self, durable: int) -> None:
        """Appends up to number ``durable`` are durable: advance their entries, oldest first
        (their ACKs leave in zxid order)."""
        undurable, m = self._undurable, self._machine
        while undurable and undurable[0][0] <= durable:
            entries = undurable.popleft()[1]
            if m is not None:
                m.advance(Ready(entries=entries))

    def committed(self) -> list[Entry]:
        """The plan's committed entries, for the host to apply now, in order: each is no
        longer unapplied and joins the committed log."""
        plan = self._plan
        assert plan is not None and self._persisted, "committed() before persisted()"
        out = plan.ready.committed
        unapplied, log = self.unapplied, self.committed_log
        for e in out:
            unapplied.pop(e.zxid, None)
            log.append(e)
        return out

    def finish(self) -> None:
        """The plan is done (persisted, committed applied, the rest handled): the machine's
        ``advance`` -- of the whole Ready for a barrier, of all but the still undurable
        entries for a pipelined append."""
        plan = self._plan
        assert plan is not None and self._persisted, "finish() before persisted()"
        self._plan = None
        m = self._machine
        if m is None:
            return
        rd = plan.ready
        if plan.barrier or not rd.entries:
            m.advance(rd)
        else:
            m.advance(rd.without_entries())

    # ------------------------------------------------------------------ history

    def fast_forward(self, last_zxid: int) -> list[Entry]:
        """``ZKDatabase.fastForwardDataBase``: the txns logged and never applied beyond
        ``last_zxid``, in zxid order, for the host to apply; they join the committed log."""
        out = [Entry(z, self.unapplied[z]) for z in sorted(self.unapplied) if z > last_zxid]
        self.committed_log.extend(out)
        self.unapplied.clear()
        return out

    def reset(self, committed_log: Iterable[Entry]) -> None:
        """The replica was reloaded from the data directory: its newest logged txns are the
        committed log, nothing is unapplied."""
        self.committed_log.clear()
        self.committed_log.extend(committed_log)
        self.unapplied.clear()
