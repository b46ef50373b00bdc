"""Zab (ZooKeeper Atomic Broadcast) as pure state machines: the shared vocabulary.

Theory
------
Zab orders every state change of the ensemble by zxid = epoch<<32 | counter. After leader
election (``quorum/election/election.py``) a prospective leader runs three phases with its learners
(names as in ZooKeeper's ``QuorumPeer.ZabState`` and its TLA+ spec):

1. DISCOVERY: learners send FOLLOWERINFO/OBSERVERINFO with their acceptedEpoch; once a quorum
   of participants (leader included) has reported within initLimit ticks, the leader picks
   ``epoch = max(acceptedEpoch) + 1``, persists it as acceptedEpoch and answers LEADERINFO;
   each learner persists acceptedEpoch and answers ACKEPOCH(currentEpoch, lastLoggedZxid).
   A quorum of ACKEPOCHs, none more recent than the leader's own history, ends discovery and
   the leader persists currentEpoch. No two leaders can establish the same epoch, because
   both would need a quorum of acceptedEpoch promises.
2. SYNCHRONIZATION: the leader brings each learner's history equal to its own with DIFF, TRUNC
   or SNAP (chosen as ``LearnerHandler.syncFollower``), then NEWLEADER; a learner persists
   currentEpoch and logs what it was sent before it ACKs NEWLEADER. A quorum of NEWLEADER ACKs
   establishes the leader: its whole history is committed, and it starts serving (UPTODATE).
3. BROADCAST: PROPOSAL -> (logged + fsynced) ACK -> COMMIT, committed strictly in zxid order
   once a quorum (leader included) has ACKed; observers get INFORM instead.

The machines in :mod:`trizk.quorum.zab.leader` and :mod:`trizk.quorum.zab.learner` take packets,
ticks and local calls as inputs and never touch sockets, files or clocks. Their outputs are
collected in a :class:`Ready` bundle, in the etcd-raft shape.

The Ready contract
------------------
``machine.ready()`` hands over everything produced since the last call. The shell:

1. **persists**, in this order: ``accepted_epoch`` / ``current_epoch`` files (atomically,
   ``QuorumPeer.writeLongToFile``), ``wipe`` (delete snapshots and txn logs), ``truncate_to``
   (cut the txn log after that zxid and reload the replica to it), ``snapshot_in`` (load the
   replica from the leader's snapshot; it is then at that zxid), ``take_snapshot`` (write a
   snapshot of the replica), ``entries`` (append to the txn log and fsync);
2. **sends** ``messages`` in order -- these never depend on (1) and may go out while (1) is in
   flight; right after a ``SNAP`` packet the shell writes the replica's snapshot body
   (``zabwire.encode_snapshot_payload(replica.snapshot_body())``) as applied so far: at least
   through the SNAP zxid, which holds when every earlier Ready was applied before this one is
   sent; newer (fuzzy) is fine, the txns queued after SNAP are replayed;
3. **applies** ``committed`` in order, once (1) is done (see pipelining below);
4. calls ``machine.advance(ready)``: this reports that (1) is durable and (3) applied. Every
   packet that promises durability -- a learner's ACK of a proposal or of NEWLEADER, its
   ACKEPOCH, the leader's own ACK, its LEADERINFO -- is produced by ``advance`` and so
   appears in a *later* Ready.

Every host does this through the one applier, :mod:`trizk.quorum.zab.applier` (the ensemble
shell's pumps, the simulation, the scripted tests). Readies are handled one after another, in
order; ``step``/``tick`` may be called meanwhile. A Ready whose only persistence is txn
entries (broadcast) is *pipelined*: its entries are appended without waiting for their sync,
(2)-(4) go on at once (``advance`` without those entries), and the entries' ``advance``
follows when their sync returns, in append order -- so several appends may be in flight, and
a learner applies a COMMIT before its own copy of the txn is durable (committed means a
quorum has it durable; ZooKeeper's followers do the same). Any other Ready is a *barrier*: its
persistence starts once every earlier append is durable, and is whole and durable before (3)
and (4). Snapshots a member writes on its own must cover committed txns only (the NEWLEADER
one is the exception, see the learner's TRUNC rule).

``role`` set means the machine is finished (back to LOOKING, with a reason); the shell closes
its links and returns to leader election. A crash before ``advance`` loses (1), and the
machine never acted on it.

Invariants (checked by ``tests/quorum/sim``)
-------------------------------------
* At most one leader is established per epoch.
* Replicas that serve agree on the committed prefix; equal zxid means equal state.
* A write committed (and so answerable to a client) is never lost by a later leader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass
from enum import StrEnum

from mypy_extensions import mypyc_attr

from trizk.jute.codes import OpCode
from trizk.jute.records import QuorumPacket, SetDataTxn
from trizk.storage.formats import txnlog


class ServerState(StrEnum):
    """``QuorumPeer.ServerState``."""

    LOOKING = "LOOKING"
    FOLLOWING = "FOLLOWING"
    LEADING = "LEADING"
    OBSERVING = "OBSERVING"


class ZabState(StrEnum):
    """``QuorumPeer.ZabState``."""

    ELECTION = "ELECTION"
    DISCOVERY = "DISCOVERY"
    SYNCHRONIZATION = "SYNCHRONIZATION"
    BROADCAST = "BROADCAST"


class LearnerType(StrEnum):
    """``QuorumPeer.LearnerType``."""

    PARTICIPANT = "PARTICIPANT"
    OBSERVER = "OBSERVER"


class SyncMode(StrEnum):
    """How a learner was brought up to date (``QuorumPeer.SyncMode``)."""

    NONE = "NONE"
    DIFF = "DIFF"
    TRUNC = "TRUNC"
    SNAP = "SNAP"


@dataclass(frozen=True, slots=True)
class Timing:
    """tickTime (ms), initLimit and syncLimit (ticks)."""

    tick_ms: int = 2000
    init_limit: int = 10
    sync_limit: int = 5

    @property
    def init_ms(self) -> int:
        return self.tick_ms * self.init_limit

    @property
    def sync_ms(self) -> int:
        return self.tick_ms * self.sync_limit


def majority(voters: Set[int]) -> Callable[[Set[int]], bool]:
    """``QuorumMaj.containsQuorum``: more than half of the voters."""
    vs = frozenset(voters)
    half = len(vs) // 2

    def check(sids: Set[int]) -> bool:
        return len(vs & frozenset(sids)) > half

    return check


@dataclass(frozen=True)
class Quorum:
    """The voting view: the voters and the quorum predicate (plug in the real verifier here)."""

    voters: frozenset[int]
    contains_quorum: Callable[[Set[int]], bool]
    #: ``QuorumVerifier.toString()`` bytes, sent with NEWLEADER.
    config: bytes = b"version=0"

    @classmethod
    def majority_of(cls, voters: Iterable[int], config: bytes = b"version=0") -> Quorum:
        vs = frozenset(voters)
        return cls(vs, majority(vs), config)

    def is_participant(self, sid: int) -> bool:
        return sid in self.voters


@dataclass(frozen=True, slots=True)
class Activation:
    """A reconfig committed (COMMITANDACTIVATE, INFORMANDACTIVATE, or the leader's own
    commit): activate ``config`` (the configuration string the reconfig txn set);
    ``leader`` is the designated leader of the new configuration (``getDesignatedLeader``)."""

    zxid: int
    config: bytes
    leader: int


# The classes made for every write (Entry, Send, Ready, and their kin in the applier, the
# leader, prep, the data tree and the txn log) are dataclasses for their eq and repr, with an
# ``__init__`` of their own: a compiled build (setup.py) compiles that one to C, where the
# dataclass-made ``__init__`` stays interpreted Python (a frozen one, through
# ``object.__setattr__``, costs 0.5-0.7 µs a call against 0.03-0.05). They are not frozen for
# the same reason; ``unsafe_hash`` keeps the hash of those that were, and nothing changes them
# after construction.


@dataclass(slots=True, init=False, unsafe_hash=True)
class Entry:
    """A txn as the log and the wire carry it: zxid and ``Util.marshallTxnEntry`` bytes."""

    zxid: int
    data: bytes

    def __init__(self, zxid: int, data: bytes) -> None:
        self.zxid = zxid
        self.data = data


@dataclass(slots=True, init=False, unsafe_hash=True)
class Send:
    """A packet for one link (the leader's link id; a learner's is its leader's)."""

    link: int
    packet: QuorumPacket

    def __init__(self, link: int, packet: QuorumPacket) -> None:
        self.link = link
        self.packet = packet


@dataclass(frozen=True, slots=True)
class RoleChange:
    state: ServerState
    reason: str


@dataclass(frozen=True, slots=True)
class SnapshotIn:
    """A snapshot received after SNAP: load the replica from ``body``; it is at ``zxid``."""

    zxid: int
    body: bytes


@dataclass(init=False)
class Ready:
    """What a machine wants done; see the module docstring for the order."""

    accepted_epoch: int | None
    current_epoch: int | None
    #: learner: delete every snapshot and txn log (keep the epoch files); the replica is
    #: empty at zxid 0. Comes with ``role`` (rejoin from scratch).
    wipe: bool
    truncate_to: int | None
    snapshot_in: SnapshotIn | None
    take_snapshot: bool
    entries: list[Entry]
    messages: list[Send]
    committed: list[Entry]
    #: links to close (leader: a learner handler failed), with the reason.
    close: list[tuple[int, str]]
    #: machine finished: go back to LOOKING.
    role: RoleChange | None
    #: leader: established at this zxid (epoch<<32): the sequencer starts here, serve clients.
    #: learner: UPTODATE seen, serve clients (the zxid of the new epoch).
    serving: int | None
    # ---- leader -> sequencer / session tracker
    #: REQUEST packets from learners, by link (the sequencer decodes them).
    requests: list[tuple[int, QuorumPacket]]
    #: session touches from learners' PING replies: (session id, timeout).
    touches: list[tuple[int, int]]
    #: REVALIDATE asks: (link, session id, timeout); answer with ``Leader.revalidated``.
    revalidate: list[tuple[int, int, int]]
    # ---- learner -> front end
    #: REVALIDATE answers: (session id, valid).
    revalidated: list[tuple[int, bool]]
    #: number of SYNC answers: complete that many pending client syncs, FIFO.
    synced: int
    # ---- leader -> metrics
    #: sampled ACKs of outstanding proposals (``Leader.processAck``: every
    #: ``zookeeper.leader.ackLoggingFrequency``-th zxid): (sid, the proposal's entry)
    acks: list[tuple[int, bytes]]
    # ---- dynamic reconfig -> the member's configuration
    #: a config string proposed but not activated, to keep as the last seen configuration
    #: (``QuorumPeer.setLastSeenQuorumVerifier(qv, true)``: the ``.dynamic.next`` file): the
    #: leader's version-bumped config (ZOOKEEPER-1783), a learner's NEWLEADER config
    last_seen_config: bytes | None
    #: reconfigs committed, in zxid order (after ``committed`` is applied): activate each
    #: (``QuorumPeer.processReconfig``); a learner whose leader or role changes with it
    #: finishes its role right after (``role``)
    activated: list[Activation]

    def __init__(
        self,
        *,
        accepted_epoch: int | None = None,
        current_epoch: int | None = None,
        wipe: bool = False,
        truncate_to: int | None = None,
        snapshot_in: SnapshotIn | None = None,
        take_snapshot: bool = False,
        entries: list[Entry] | None = None,
        messages: list[Send] | None = None,
        committed: list[Entry] | None = None,
        close: list[tuple[int, str]] | None = None,
        role: RoleChange | None = None,
        serving: int | None = None,
        requests: list[tuple[int, QuorumPacket]] | None = None,
        touches: list[tuple[int, int]] | None = None,
        revalidate: list[tuple[int, int, int]] | None = None,
        revalidated: list[tuple[int, bool]] | None = None,
        synced: int = 0,
        acks: list[tuple[int, bytes]] | None = None,
        last_seen_config: bytes | None = None,
        activated: list[Activation] | None = None,
    ) -> None:
        self.accepted_epoch = accepted_epoch
        self.current_epoch = current_epoch
        self.wipe = wipe
        self.truncate_to = truncate_to
        self.snapshot_in = snapshot_in
        self.take_snapshot = take_snapshot
        self.entries = [] if entries is None else entries
        self.messages = [] if messages is None else messages
        self.committed = [] if committed is None else committed
        self.close = [] if close is None else close
        self.role = role
        self.serving = serving
        self.requests = [] if requests is None else requests
        self.touches = [] if touches is None else touches
        self.revalidate = [] if revalidate is None else revalidate
        self.revalidated = [] if revalidated is None else revalidated
        self.synced = synced
        self.acks = [] if acks is None else acks
        self.last_seen_config = last_seen_config
        self.activated = [] if activated is None else activated

    def without_entries(self) -> Ready:
        """This Ready with no ``entries`` (the applier's ``advance`` of a pipelined append
        whose entries are not durable yet)."""
        return Ready(
            accepted_epoch=self.accepted_epoch,
            current_epoch=self.current_epoch,
            wipe=self.wipe,
            truncate_to=self.truncate_to,
            snapshot_in=self.snapshot_in,
            take_snapshot=self.take_snapshot,
            messages=self.messages,
            committed=self.committed,
            close=self.close,
            role=self.role,
            serving=self.serving,
            requests=self.requests,
            touches=self.touches,
            revalidate=self.revalidate,
            revalidated=self.revalidated,
            synced=self.synced,
            acks=self.acks,
            last_seen_config=self.last_seen_config,
            activated=self.activated,
        )

    def __bool__(self) -> bool:
        return bool(
            self.accepted_epoch is not None
            or self.current_epoch is not None
            or self.wipe
            or self.truncate_to is not None
            or self.snapshot_in is not None
            or self.take_snapshot
            or self.entries
            or self.messages
            or self.committed
            or self.close
            or self.role is not None
            or self.serving is not None
            or self.requests
            or self.touches
            or self.revalidate
            or self.revalidated
            or self.synced
            or self.acks
            or self.last_seen_config is not None
            or self.activated
        )


@mypyc_attr(allow_interpreted_subclasses=True)  # (as Learner, which extends it)
class ReadyOutbox:
    """What a Zab machine has produced since the shell last took it (the Ready half of the
    contract both machines share)."""

    _rd: Ready

    def has_ready(self) -> bool:
        return bool(self._rd)

    def ready(self) -> Ready:
        rd, self._rd = self._rd, Ready()
        return rd


class ZabError(Exception):
    """A protocol violation by the peer on one link (the link is closed)."""


def reconfig_config(data: bytes) -> bytes | None:
    """The configuration string a marshalled txn entry sets, if it is a reconfig (a
    SetDataTxn of ``/zookeeper/config``, type 16); None for any other txn or a bad entry."""
    if len(data) < 32 or int.from_bytes(data[28:32], "big", signed=True) != OpCode.RECONFIG:
        return None
    try:
        txn = txnlog.decode_payload(data).txn
    except ValueError:  # LogFormatError, JuteDecodeError
        return None
    return txn.data if isinstance(txn, SetDataTxn) and txn.data is not None else None
