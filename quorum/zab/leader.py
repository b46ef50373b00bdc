"""The Zab leader (``Leader`` + its ``LearnerHandler``s) as one pure state machine.

Theory
------
Each learner connection is a *link* (an int the shell chooses). Per link the leader walks
``LearnerHandler.run``::

    WAIT_INFO --FOLLOWERINFO/OBSERVERINFO--> WAIT_EPOCH --(epoch decided+durable)--> LEADERINFO
    WAIT_ACKEPOCH --ACKEPOCH--> WAIT_ELECTION --(quorum of epoch acks)--> sync:
        DIFF|TRUNC + PROPOSAL/COMMIT pairs, or SNAP + snapshot; then what startForwarding
        queues; then NEWLEADER(e<<32, config)
    WAIT_NEWLEADER_ACK --first packet must be ACK--> WAIT_STARTUP --(established)--> UPTODATE
    BROADCAST: ACK, PING (touches), REVALIDATE, REQUEST

and the leader itself (``Leader.lead``):

* DISCOVERY: ``epoch = max(acceptedEpoch of itself and every connecting learner) + 1``, decided
  once the leader and a quorum of participants have sent their acceptedEpoch
  (``getEpochToPropose``), then persisted as acceptedEpoch; ACKEPOCHs are collected until a
  quorum (leader included) of participants with epoch != -1 (``waitForEpochAck``); a learner
  whose (currentEpoch, lastZxid) is more recent than the leader's is dropped.
* SYNCHRONIZATION: currentEpoch := epoch (persisted); wait for a quorum of NEWLEADER ACKs.
  Each wait is bounded by initLimit ticks, after which the leader gives up (LOOKING).
* BROADCAST (``startZkServer``): the whole local history counts as committed;
  lastCommitted = lastProcessedZxid = epoch<<32; ``Ready.serving`` tells the sequencer to
  start at that zxid. Proposals go to the synced participants, COMMIT strictly in zxid order
  once a quorum (leader's own durable ACK included) acked, INFORM to observers.
  Every tickTime/2 all learners are PINGed; every tickTime the tick counter advances and the
  leader steps down unless a quorum is *synced* (each learner's deadline is tick+syncLimit
  from its last packet, initially tick+initLimit+syncLimit). A learner whose oldest un-ACKed
  proposal is older than syncLimit ticks (2 * syncLimit passes) is dropped (``SyncLimitCheck``).
  The ticks are passes of the loop, not time: a ``tick`` that finds half a tick (or much
  more) gone runs one pass and waits half a tick from then, as ``Leader.lead`` does after
  its ``wait`` returns. A pause of the process or a jump of its clock costs one tick, so the
  PINGs and ACKs that queued up meanwhile are read before a learner can look silent; a
  leader whose learners really went quiet still steps down after syncLimit passes.

Sync choice (``LearnerHandler.syncFollower`` / ``queueCommittedProposals``)
--------------------------------------------------------------------------
Over the committed log (the last ``commit_log_count`` + 1 committed entries, min/max; both =
lastProcessedZxid when empty), with ``peer`` = the ACKEPOCH zxid:

1. ``force_snap`` -> SNAP;  2. peer == lastProcessedZxid -> empty DIFF(peer);
3. peer > max and counter(peer) != 0 -> TRUNC(max);
4. min <= peer <= max -> walk the log: found -> DIFF(max); peer of a new epoch (counter 0) ->
   DIFF(max); first newer entry -> TRUNC(previous entry) unless the epochs differ -> SNAP;
   then PROPOSAL+COMMIT for everything after peer;
5. peer < min -> the on-disk log from peer (``txnlog`` input; the shell applies the
   ``snapshotSizeFactor`` limit) up to min, then the committed log; a gap -> SNAP;
6. otherwise SNAP (zxid = lastProcessedZxid).

Invariants
----------
* At most one epoch is established per leader term, and never without a quorum of
  acceptedEpoch promises and then of NEWLEADER ACKs.
* COMMIT zxids leave strictly increasing; a learner is never sent a COMMIT for a proposal it
  was not sent (proposals go to a link from startForwarding on, together with its sync).
* The first packet after ACKEPOCH is DIFF, TRUNC or SNAP (a Java learner exits otherwise).
* The largest counter used is 0xfffffffe: proposing 0xffffffff steps down (ZOOKEEPER-1277).
* A proposal commits on durable ACKs only: a learner's ACK counts for the copy it logged on
  the link it sent it on; re-syncing that learner (which re-sends it the proposal) drops it
  until the learner ACKs the new copy. (ZooKeeper keeps the old ACK, although a TRUNC may
  have cut the txn from that learner's log.)

Bounds on what a learner can make the leader hold
--------------------------------------------------
ZooKeeper's ``LearnerHandler`` hands every REQUEST straight to the leader's
``PrepRequestProcessor`` queue (``LeaderZooKeeperServer.submitLearnerRequest``, which skips the
``RequestThrottler``) and touches sessions as PINGs arrive, so a learner that floods REQUESTs
grows the leader's queues without limit. Here the leader bounds them instead:

* a link's REQUESTs not yet taken by the sequencer (handed out in ``Ready.requests``, and
  released by :meth:`Leader.request_done` when the shell feeds them to its sequencer, which it
  does only while fewer than the leader's globalOutstandingLimit proposals are outstanding)
  are capped at ``max_learner_requests`` packets and ``max_learner_request_bytes`` bytes;
* the session touches one link's PINGs add to a Ready are capped at ``max_touches``;
* packet sizes are the stream decoder's business (``zabwire.QuorumStreamDecoder``).

A learner past a cap has its link closed (``Ready.close``, with the reason the shell logs); it
can reconnect and sync again. The caps are far above what an honest learner, itself throttled
by its own globalOutstandingLimit, sends.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum, auto

from trizk.jute.primitives import JuteDecodeError
from trizk.jute.records import LearnerInfo, QuorumPacket
from trizk.quorum.verifier import QuorumVerifier, java_hashmap_long_order
from trizk.quorum.zab.zab import (
    Activation,
    Entry,
    LearnerType,
    Quorum,
    Ready,
    ReadyOutbox,
    RoleChange,
    Send,
    ServerState,
    SyncMode,
    Timing,
    ZabError,
    ZabState,
)
from trizk.quorum.zab.zabwire import (
    PROTOCOL_VERSION,
    PacketType,
    QuorumStreamError,
    counter_of,
    decode_int,
    decode_touches,
    encode_int,
    epoch_of,
    make_zxid,
    packet,
    packet_name,
)

P = PacketType

#: ``zookeeper.commitLogCount`` default (ZKDatabase.DEFAULT_COMMIT_LOG_COUNT).
COMMIT_LOG_COUNT = 500


def committed_log_capacity(commit_log_count: int) -> int:
    """How many txns ``ZKDatabase.committedLog`` holds: ``addCommittedProposal`` drops the
    oldest only while it holds *more* than commitLogCount, before adding, so it keeps
    commitLogCount + 1 (501 by default): a member 501 txns behind is still DIFFed from it."""
    return commit_log_count + 1


#: REQUESTs (and their bytes) one learner may have waiting for the sequencer (module docstring)
MAX_LEARNER_REQUESTS = 20_000
MAX_LEARNER_REQUEST_BYTES = 64 * 1024 * 1024
#: session touches one learner's PINGs may add to one Ready
MAX_TOUCHES = 500_000
MAX_COUNTER = 0xFFFFFFFF


class _Phase(Enum):
    WAIT_INFO = auto()
    WAIT_EPOCH = auto()
    WAIT_ACKEPOCH = auto()
    WAIT_ELECTION = auto()
    WAIT_NEWLEADER_ACK = auto()
    WAIT_STARTUP = auto()
    BROADCAST = auto()


@dataclass
class _SyncLimitCheck:
    """``LearnerHandler.SyncLimitCheck``: the oldest and the next un-ACKed proposal, each with
    the pass of the leader's loop it was proposed in (ZooKeeper notes System.nanoTime; passes
    make a pause of the process one pass old, like the tick deadlines)."""

    started: bool = False
    cur_zxid: int = 0
    cur_time: int | None = None
    next_zxid: int = 0
    next_time: int | None = None

    def proposal(self, zxid: int, now: int) -> None:
        if not self.started:
            return
        if self.cur_time is None:
            self.cur_zxid, self.cur_time = zxid, now
        else:
            self.next_zxid, self.next_time = zxid, now

    def ack(self, zxid: int) -> None:
        if self.cur_time is not None and self.cur_zxid == zxid:
            self.cur_zxid, self.cur_time = self.next_zxid, self.next_time
            self.next_zxid, self.next_time = 0, None
        elif self.next_time is not None and self.next_zxid == zxid:
            self.next_zxid, self.next_time = 0, None

    def ok(self, now: int, limit: int) -> bool:
        return self.cur_time is None or now - self.cur_time <= limit


@dataclass
class _Handler:
    link: int
    phase: _Phase = _Phase.WAIT_INFO
    sid: int = 0
    learner_type: LearnerType = LearnerType.PARTICIPANT
    accepted_epoch: int = -1
    peer_last_zxid: int = -1
    deadline_tick: int = 0
    sync_mode: SyncMode = SyncMode.NONE
    forwarding: bool = False
    newleader_sent: bool = False
    check: _SyncLimitCheck = field(default_factory=_SyncLimitCheck)
    #: REQUESTs handed out and not yet released by ``request_done``, and their bytes
    requests: int = 0
    request_bytes: int = 0
    #: touches this link's PINGs added to the Ready being built
    touches: int = 0


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(init=False)
class _Proposal:
    entry: Entry
    #: every participant handler's sid that ACKed it (each verifier counts its own voters)
    acks: set[int]
    #: proposed while a reconfig was in flight: it also needs a quorum of this (the last seen)
    #: configuration (``Proposal.addQuorumVerifier``, SyncedLearnerTracker)
    next_config: QuorumVerifier | None
    #: a reconfig: the configuration it commits
    config: QuorumVerifier | None

    def __init__(
        self,
        entry: Entry,
        acks: set[int] | None = None,
        next_config: QuorumVerifier | None = None,
        config: QuorumVerifier | None = None,
    ) -> None:
        self.entry = entry
        self.acks = set() if acks is None else acks
        self.next_config = next_config
        self.config = config


#: ``txnlog(peer_last_zxid)``: entries of the on-disk log starting at or below peer_last_zxid,
#: or nothing (not allowed by the size limit, or the log starts later). They may run past the
#: committed ones (what the leader logged and has not committed): the sync takes them only up
#: to its committed log's first zxid.
TxnLogSource = Callable[[int], Iterable[Entry]]


class Leader(ReadyOutbox):
    """Leads one epoch. Built after election decided LEADING; finished when ``role`` is set."""

    def __init__(
        self,
        *,
        sid: int,
        quorum: Quorum,
        timing: Timing,
        accepted_epoch: int,
        current_epoch: int,
        last_zxid: int,
        now_ms: int,
        committed_log: Iterable[Entry] = (),
        txnlog: TxnLogSource | None = None,
        commit_log_count: int = COMMIT_LOG_COUNT,
        force_snap: bool = False,
        config_version: int = 0,
        bump_config: QuorumVerifier | None = None,
        verifier: QuorumVerifier | None = None,
        ack_logging_frequency: int = 1000,
        max_learner_requests: int | None = None,
        max_learner_request_bytes: int | None = None,
        max_touches: int | None = None,
    ) -> None:
        self.sid = sid
        # the module's values when not given (read now, so tests can lower them)
        self.max_learner_requests = max_learner_requests or MAX_LEARNER_REQUESTS
        self.max_learner_request_bytes = max_learner_request_bytes or MAX_LEARNER_REQUEST_BYTES
        self.max_touches = max_touches or MAX_TOUCHES
        self.quorum = quorum
        self.timing = timing
        self.accepted_epoch = accepted_epoch
        self.current_epoch = current_epoch
        self.last_zxid = last_zxid
        self.txnlog = txnlog
        self.force_snap = force_snap
        self.config_version = config_version
        #: reconfig enabled, and the committed and last seen configurations are both the
        #: initial one (version 0): once the epoch is decided it becomes this configuration at
        #: version epoch<<32, sent with NEWLEADER (``Leader.lead``, ZOOKEEPER-1783)
        self.bump_config = bump_config
        #: NEWLEADER's data: the last seen configuration's string
        self.newleader_config = quorum.config
        #: dynamic reconfig: the committed configuration (``quorum`` counts with it) and the
        #: last seen one (a reconfig proposed, not committed, when its version is newer)
        self.verifier = verifier
        self.last_seen = verifier
        #: ``allowedToCommit``: false once a reconfig designated another leader
        self.allowed_to_commit = True
        #: ``zookeeper.leader.ackLoggingFrequency`` (<= 0: no ACK sampled)
        self.ack_logging_frequency = ack_logging_frequency
        self.state = ServerState.LEADING
        #: leaderStateSummary, taken when leading starts
        self._summary = (current_epoch, last_zxid)
        self.zab_state = ZabState.DISCOVERY
        self.tick_count = 0
        self._now = now_ms
        self._rd = Ready()
        self._links: dict[int, _Handler] = {}
        self._follower_counter = -1
        self._done = False
        # discovery (Leader.getEpochToPropose / waitForEpochAck / waitForNewLeaderAck)
        self.epoch = -1
        self._waiting_for_new_epoch = True
        self._epoch_durable = False
        self._connecting: set[int] = set()
        self._electing: set[int] = set()
        self._election_finished = False
        self._newleader_acks: set[int] = set()
        self._established = False
        self._deadline_ms = now_ms + timing.init_ms
        # history
        self._committed_log: deque[Entry] = deque(
            committed_log, maxlen=committed_log_capacity(commit_log_count)
        )
        self.applied_zxid = last_zxid  # ZKDatabase lastProcessedZxid as the replica sees it
        self._to_be_applied: list[Entry] = []  # committed, handed out, not yet advanced
        self.last_proposed = last_zxid
        self.last_committed = -1
        self._outstanding: dict[int, _Proposal] = {}
        self._pending_syncs: dict[int, list[int]] = {}
        self._revalidations: dict[tuple[int, int], QuorumPacket] = {}
        self._next_half_tick = 0
        self._tick_skip = True
        #: passes of the loop run (every tickTime/2): the SyncLimitCheck's time
        self._passes = 0
        # The leader is its own first connecting follower.
        self._get_epoch_to_propose(sid, accepted_epoch)

    # ------------------------------------------------------------------ queries

    @property
    def done(self) -> bool:
        return self._done

    @property
    def established(self) -> bool:
        return self._established

    def learners(self) -> list[tuple[int, int, LearnerType, bool]]:
        """(link, sid, type, synced) for every learner past FOLLOWERINFO."""
        return [
            (h.link, h.sid, h.learner_type, self._synced(h))
            for h in self._links.values()
            if h.phase is not _Phase.WAIT_INFO
        ]

    def quorum_synced(self, qv: QuorumVerifier) -> bool:
        """``Leader.isQuorumSynced``: this leader (if a voter of ``qv``) and the synced
        forwarding followers that are voters of ``qv`` contain a quorum of ``qv``."""
        ids = {self.sid} if self.sid in qv.voting_members else set()
        for h in self._links.values():
            if (
                h.forwarding
                and h.learner_type is LearnerType.PARTICIPANT
                and self._synced(h)
                and h.sid in qv.voting_members
            ):
                ids.add(h.sid)
        return qv.contains_quorum(ids)

    @property
    def pending_syncs(self) -> int:
        return sum(len(v) for v in self._pending_syncs.values())

    @property
    def outstanding(self) -> int:
        return len(self._outstanding)

    # ------------------------------------------------------------------ Ready

    def ready(self) -> Ready:
        for h in self._links.values():
            h.touches = 0
        return super().ready()

    def request_done(self, link: int, qp: QuorumPacket) -> None:
        """A REQUEST of ``link`` handed out in ``Ready.requests`` went into the sequencer."""
        h = self._links.get(link)
        if h is not None:
            h.requests -= 1
            h.request_bytes -= _request_size(qp)

    def advance(self, rd: Ready) -> None:
        """``rd``'s persistence is durable and its committed entries are applied."""
        if self._done:
            return
        n = len(rd.committed)
        if n:
            self.applied_zxid = rd.committed[-1].zxid
            del self._to_be_applied[:n]
        if rd.accepted_epoch is not None:
            self._epoch_durable = True
            self._on_epoch_durable()
        if rd.current_epoch is not None:
            self._wait_for_newleader_ack(self.sid, make_zxid(self.epoch, 0))
        for e in rd.entries:
            self._process_ack(self.sid, e.zxid)

    # ------------------------------------------------------------------ inputs: links

    def connected(self, link: int) -> None:
        """A learner's TCP connection was accepted (``LearnerCnxAcceptor``)."""
        if not self._done:
            t = self.timing
            self._links[link] = _Handler(
                link, deadline_tick=self.tick_count + t.init_limit + t.sync_limit
            )

    def link_closed(self, link: int) -> None:
        self._links.pop(link, None)
        # Its REQUESTs not yet handed out go too: their clients were dropped with the link,
        # and prepped later they could overtake the same sessions' newer writes (see
        # ``server/shell/ensemble/leading.py``'s LearnerRequests).
        if any(lk == link for lk, _ in self._rd.requests):
            self._rd.requests = [(lk, qp) for lk, qp in self._rd.requests if lk != link]

    def step(self, link: int, qp: QuorumPacket, now_ms: int) -> None:
        """One packet from a learner's link."""
        self._now = max(self._now, now_ms)
        if self._done:
            return
        h = self._links.get(link)
        if h is None:
            return
        try:
            self._on_packet(h, qp)
        except (ZabError, QuorumStreamError, JuteDecodeError, struct.error) as e:
            self._close(h, f"{type(e).__name__}: {e}")

    # ------------------------------------------------------------------ inputs: local

    def tick(self, now_ms: int) -> None:
        self._now = max(self._now, now_ms)
        if self._done:
            return
        if not self._established:
            if self._now >= self._deadline_ms:
                what = (
                    "Timeout while waiting for epoch from quorum"
                    if self._waiting_for_new_epoch
                    else "Timeout while waiting for epoch to be acked by quorum"
                    if not self._election_finished
                    else "Timeout while waiting for NEWLEADER to be acked by quorum"
                )
                self._finish(what)
            return
        # One pass of Leader.lead's loop per wake-up, never a catch-up: ZooKeeper's loop waits
        # tickTime/2 (Time.currentElapsedTime), then runs once and waits again from where it
        # is, so a pause of the process (SIGSTOP, a VM freeze) or a step of the clock costs
        # one tick, and the learners' deadlines (counted in ticks) still see the packets
        # queued for them during the pause when their readers get to them.
        if self._now >= self._next_half_tick:
            self._next_half_tick = self._now + max(self.timing.tick_ms // 2, 1)
            self._half_tick()

    def propose(self, zxid: int, data: bytes, config: QuorumVerifier | None = None) -> bool:
        """The sequencer's next txn (``Leader.propose``). False if the leader stepped down.
        ``config``: the txn is a reconfig to that configuration (prep's ``request.qv``)."""
        if self._done:
            return False
        if not self._established:
            raise RuntimeError("propose before the leader is established")
        if counter_of(zxid) == MAX_COUNTER:
            self._finish(
                "zxid lower 32 bits have rolled over, forcing re-election, "
                "and therefore new epoch start"
            )
            return False
        if zxid <= self.last_proposed or epoch_of(zxid) != self.epoch:
            raise ValueError(f"zxid {zxid:#x} does not follow {self.last_proposed:#x}")
        e = Entry(zxid, data)
        self.last_proposed = zxid
        p = self._outstanding[zxid] = _Proposal(e, config=config)
        if config is not None:
            # setLastSeenQuorumVerifier(request.qv, true); NEWLEADER carries it from now on
            self.last_seen = config
            self.newleader_config = config.to_string().encode("utf-8")
            self._rd.last_seen_config = self.newleader_config
        if self._reconfig_in_flight():
            p.next_config = self.last_seen
        self._rd.entries.append(e)
        qp = packet(P.PROPOSAL, zxid, data)
        for h in self._links.values():
            if h.forwarding and h.learner_type is LearnerType.PARTICIPANT:
                self._send(h, qp)
                h.check.proposal(zxid, self._passes)
        return True

    def process_sync(self, link: int) -> None:
        """A learner's sync reached this point of the pipeline (``Leader.processSync``)."""
        if not self._outstanding:
            self._send_sync(link)
        else:
            self._pending_syncs.setdefault(self.last_proposed, []).append(link)

    def revalidated(self, link: int, session_id: int, valid: bool) -> None:
        """The session tracker's answer to a REVALIDATE (``Leader.revalidateSession``)."""
        req = self._revalidations.pop((link, session_id), None)
        h = self._links.get(link)
        if req is None or h is None:
            return
        data = struct.pack(">q?", session_id, valid)
        self._send(h, QuorumPacket(int(P.REVALIDATE), req.zxid, data, req.authinfo))

    # ------------------------------------------------------------------ discovery

    def _get_epoch_to_propose(self, sid: int, accepted: int) -> None:
        if not self._waiting_for_new_epoch:
            return
        if accepted >= self.epoch:
            self.epoch = accepted + 1
        if self.quorum.is_participant(sid):
            self._connecting.add(sid)
        if self.sid in self._connecting and self.quorum.contains_quorum(self._connecting):
            self._waiting_for_new_epoch = False
            self.accepted_epoch = self.epoch
            self._rd.accepted_epoch = self.epoch
            self.last_proposed = make_zxid(self.epoch, 0)
            if self.bump_config is not None:
                # Leader.lead: the initial config takes the version of NEWLEADER's zxid, so
                # that it wins over configs never established; it becomes the last seen
                # config before any NEWLEADER leaves (activated once established)
                bumped = self.bump_config.with_version(self.last_proposed).to_string().encode()
                self.newleader_config = bumped
                self._rd.last_seen_config = bumped

    def _on_epoch_durable(self) -> None:
        for h in self._links.values():
            if h.phase is _Phase.WAIT_EPOCH:
                self._send_leaderinfo(h)
        # lead(): waitForEpochAck(myid, leaderStateSummary)
        self._electing.add(self.sid)
        self._deadline_ms = self._now + self.timing.init_ms
        self._check_election()

    def _send_leaderinfo(self, h: _Handler) -> None:
        self._send(h, packet(P.LEADERINFO, make_zxid(self.epoch, 0), encode_int(PROTOCOL_VERSION)))
        h.phase = _Phase.WAIT_ACKEPOCH

    def _more_recent_than_me(self, epoch: int, zxid: int) -> bool:
        # StateSummary.isMoreRecentThan(leaderStateSummary)
        me = self._summary
        return epoch > me[0] or (epoch == me[0] and zxid > me[1])

    def _check_election(self) -> None:
        if self._election_finished or self.sid not in self._electing:
            return
        if not self.quorum.contains_quorum(self._electing):
            return
        self._election_finished = True
        self.current_epoch = self.epoch
        self._rd.current_epoch = self.epoch
        self.zab_state = ZabState.SYNCHRONIZATION
        self._deadline_ms = self._now + self.timing.init_ms
        for h in list(self._links.values()):
            if h.phase is _Phase.WAIT_ELECTION:
                self._sync_learner(h)

    def _wait_for_newleader_ack(self, sid: int, zxid: int) -> None:
        if self._established:
            return
        if zxid != make_zxid(self.epoch, 0):
            return  # "NEWLEADER ACK from sid ... is from a different epoch"
        # Leader.lead: newLeaderProposal holds the committed verifier and, when newer, the last
        # seen one -- a reconfig this leader logged that nobody committed; the epoch's history
        # commits it, so a quorum of that configuration must be synced too (hasAllQuorums)
        seen = self.last_seen if self._reconfig_in_flight() else None
        if self.quorum.is_participant(sid) or (seen is not None and sid in seen.voting_members):
            self._newleader_acks.add(sid)
        if (
            self.current_epoch == self.epoch
            and self.sid in self._newleader_acks
            and self.quorum.contains_quorum(self._newleader_acks)
            and (seen is None or seen.contains_quorum(self._newleader_acks))
        ):
            self._start()

    def _start(self) -> None:
        """``Leader.startZkServer``: the history is committed, serve from epoch<<32."""
        z = make_zxid(self.epoch, 0)
        self._established = True
        self.zab_state = ZabState.BROADCAST
        self.last_committed = z
        self.applied_zxid = z
        self.last_proposed = z
        self._rd.serving = z
        self._next_half_tick = self._now + max(self.timing.tick_ms // 2, 1)
        for h in self._links.values():
            if h.phase is _Phase.WAIT_STARTUP:
                self._send_uptodate(h)

    def _send_uptodate(self, h: _Handler) -> None:
        self._send(h, packet(P.UPTODATE, -1))
        h.phase = _Phase.BROADCAST

    # ------------------------------------------------------------------ packets

    def _on_packet(self, h: _Handler, qp: QuorumPacket) -> None:
        ph = h.phase
        if ph is _Phase.WAIT_INFO:
            self._on_info(h, qp)
        elif ph is _Phase.WAIT_ACKEPOCH:
            self._on_ackepoch(h, qp)
        elif ph is _Phase.WAIT_NEWLEADER_ACK:
            if qp.type != P.ACK:
                raise ZabError(f"Next packet was supposed to be an ACK, got {packet_name(qp.type)}")
            h.check.started = True
            h.phase = _Phase.WAIT_STARTUP
            if self._established:
                self._send_uptodate(h)
            else:
                self._wait_for_newleader_ack(h.sid, qp.zxid)
        elif ph in (_Phase.WAIT_STARTUP, _Phase.BROADCAST):
            self._on_broadcast(h, qp)
        else:  # WAIT_EPOCH, WAIT_ELECTION: the Java handler is blocked, not reading
            raise ZabError(f"unexpected {packet_name(qp.type)} while waiting ({ph.name})")

    def _on_info(self, h: _Handler, qp: QuorumPacket) -> None:
        if qp.type not in (P.FOLLOWERINFO, P.OBSERVERINFO):
            raise ZabError(
                f"First packet {packet_name(qp.type)} is not FOLLOWERINFO or OBSERVERINFO"
            )
        d = qp.data
        if d is None:
            h.sid = self._follower_counter
            self._follower_counter -= 1
            version = 0
        else:
            if len(d) < 8:
                raise ZabError("short LearnerInfo")
            h.sid = struct.unpack_from(">q", d)[0]
            version = struct.unpack_from(">i", d, 8)[0] if len(d) >= 12 else 0
            if len(d) >= 20 and LearnerInfo.decode(d[:20]).configVersion > self.config_version:
                raise ZabError(
                    "Follower is ahead of the leader (has a later activated configuration)"
                )
        if version < PROTOCOL_VERSION:
            raise ZabError(f"learner protocol version {version:#x} (pre-Zab-1.0) not supported")
        if qp.type == P.OBSERVERINFO:
            # A FOLLOWERINFO from a non-voter is a PARTICIPANT handler whose ACKs do not count.
            h.learner_type = LearnerType.OBSERVER
        for other in list(self._links.values()):
            if other is not h and other.sid == h.sid and other.phase is not _Phase.WAIT_INFO:
                self._close(other, "superseded by a new connection from the same sid")
        h.accepted_epoch = epoch_of(qp.zxid)
        h.phase = _Phase.WAIT_EPOCH
        self._get_epoch_to_propose(h.sid, h.accepted_epoch)
        if not self._waiting_for_new_epoch and self._epoch_durable:
            self._send_leaderinfo(h)

    def _on_ackepoch(self, h: _Handler, qp: QuorumPacket) -> None:
        if qp.type != P.ACKEPOCH:
            raise ZabError(f"{packet_name(qp.type)} is not ACKEPOCH")
        epoch = decode_int(qp.data)
        h.peer_last_zxid = qp.zxid
        h.phase = _Phase.WAIT_ELECTION
        if self._election_finished:
            self._sync_learner(h)
            return
        if epoch != -1:
            if self._more_recent_than_me(epoch, qp.zxid):
                raise ZabError(
                    f"Follower is ahead of the leader, leader summary: {self.current_epoch} "
                    f"(current epoch), {self.last_zxid:#x} (last zxid)"
                )
            if qp.zxid != -1 and self.quorum.is_participant(h.sid):
                self._electing.add(h.sid)
        self._check_election()

    def _on_broadcast(self, h: _Handler, qp: QuorumPacket) -> None:
        h.deadline_tick = self.tick_count + self.timing.sync_limit
        t = qp.type
        if t == P.ACK:
            h.check.ack(qp.zxid)
            if h.phase is _Phase.BROADCAST or self._established:
                self._process_ack(h.sid, qp.zxid)
        elif t == P.PING:
            touches = decode_touches(qp.data)
            h.touches += len(touches)
            if h.touches > self.max_touches:
                raise ZabError(
                    f"learner {h.sid} sent {h.touches} session touches at once "
                    f"(over {self.max_touches})"
                )
            self._rd.touches.extend(touches)
        elif t == P.REVALIDATE:
            if qp.data is None or len(qp.data) < 12:
                raise ZabError("short REVALIDATE")
            session_id, timeout = struct.unpack_from(">qi", qp.data)
            self._revalidations[(h.link, session_id)] = qp
            self._rd.revalidate.append((h.link, session_id, timeout))
        elif t == P.REQUEST:
            if qp.data is None or len(qp.data) < 16:
                raise ZabError("short REQUEST")
            h.requests += 1
            h.request_bytes += _request_size(qp)
            if (
                h.requests > self.max_learner_requests
                or h.request_bytes > self.max_learner_request_bytes
            ):
                raise ZabError(
                    f"learner {h.sid} has {h.requests} REQUESTs ({h.request_bytes} bytes) "
                    f"waiting (over {self.max_learner_requests} or "
                    f"{self.max_learner_request_bytes} bytes)"
                )
            self._rd.requests.append((h.link, qp))
        # anything else: "unexpected quorum packet" (logged, ignored)

    # ------------------------------------------------------------------ sync

    def _sync_learner(self, h: _Handler) -> None:
        """``LearnerHandler.syncFollower`` + ``Leader.startForwarding`` + NEWLEADER."""
        need_snap, current, out = sync_follower(
            h.peer_last_zxid, self.applied_zxid, self._committed_log, self.txnlog, self.force_snap
        )
        if need_snap:
            h.sync_mode = SyncMode.SNAP
            current = self.applied_zxid
            out = [packet(P.SNAP, current)]
        else:
            h.sync_mode = SyncMode(packet_name(out[0].type))
        for qp in out:
            self._send(h, qp)
        # startForwarding
        if self.last_proposed > current:
            for e in self._to_be_applied:
                if e.zxid > current:
                    self._send(h, packet(P.PROPOSAL, e.zxid, e.data))
                    self._send(h, packet(P.COMMIT, e.zxid))
            if h.learner_type is LearnerType.PARTICIPANT:
                for z in sorted(self._outstanding):
                    if z > current:
                        p = self._outstanding[z]
                        # An ACK this learner gave the proposal before (an earlier link) no
                        # longer counts: a TRUNC (or SNAP) drops the txn from its log until it
                        # logs it again after NEWLEADER and ACKs it anew. Counting the old ACK
                        # lets a commit rest on a copy that is gone (found by the simulation
                        # with pipelined appends: seed 210 of "3-power").
                        p.acks.discard(h.sid)
                        self._send(h, packet(P.PROPOSAL, z, p.entry.data))
        h.forwarding = True
        self._send(h, packet(P.NEWLEADER, make_zxid(self.epoch, 0), self.newleader_config))
        h.newleader_sent = True
        h.phase = _Phase.WAIT_NEWLEADER_ACK

    # ------------------------------------------------------------------ broadcast

    def _process_ack(self, sid: int, zxid: int) -> None:
        if counter_of(zxid) == 0:
            return  # NEWLEADER / UPTODATE ACK
        if not self._outstanding or self.last_committed >= zxid:
            return
        p = self._outstanding.get(zxid)
        if p is None:
            return
        if self.ack_logging_frequency > 0 and zxid % self.ack_logging_frequency == 0:
            self._rd.acks.append((sid, p.entry.data))  # ACK_LATENCY, keyed by sid
        if not self.allowed_to_commit:
            return  # the last op committed was a leader change: the new leader commits
        if self.quorum.is_participant(sid) or (
            p.next_config is not None and sid in p.next_config.voting_members
        ):
            p.acks.add(sid)
        while p is not None and self._try_to_commit(p):
            p = self._outstanding.get(p.entry.zxid + 1)

    def _try_to_commit(self, p: _Proposal) -> bool:
        z = p.entry.zxid
        if z - 1 in self._outstanding:
            return False
        if self.sid not in p.acks or not self.quorum.contains_quorum(p.acks):
            return False
        if p.next_config is not None and not p.next_config.contains_quorum(p.acks):
            return False  # hasAllQuorums: the old and the new configuration
        del self._outstanding[z]
        self.last_committed = z
        self._committed_log.append(p.entry)
        self._to_be_applied.append(p.entry)
        self._rd.committed.append(p.entry)
        if p.config is not None:
            self._commit_and_activate(p)
            return True
        commit = packet(P.COMMIT, z)
        inform = packet(P.INFORM, z, p.entry.data)
        for h in self._links.values():
            if h.forwarding:
                self._send(h, commit if h.learner_type is LearnerType.PARTICIPANT else inform)
        for link in self._pending_syncs.pop(z, ()):
            self._send_sync(link)
        return True

    def _reconfig_in_flight(self) -> bool:
        v, s = self.verifier, self.last_seen
        return v is not None and s is not None and s.version > v.version

    def _commit_and_activate(self, p: _Proposal) -> None:
        """``tryToCommit`` of a reconfig: the new configuration is committed; the designated
        leader goes to every learner with it (COMMITANDACTIVATE, INFORMANDACTIVATE); if it is
        another member, this leader commits nothing more (``allowedToCommit = false``)."""
        new = p.config
        assert new is not None
        z = p.entry.zxid
        designated = self._designated_leader(p, z)
        self.verifier = new
        voters = frozenset(new.voting_members)
        self.quorum = Quorum(voters, new.contains_quorum, self.newleader_config)
        self.config_version = new.version
        data = new.to_string().encode("utf-8")
        self._rd.activated.append(Activation(z, data, designated))
        if designated != self.sid:
            self.allowed_to_commit = False
        lead = struct.pack(">q", designated)
        commit = packet(P.COMMITANDACTIVATE, z, lead)
        inform = packet(P.INFORMANDACTIVATE, z, lead + p.entry.data)
        for h in self._links.values():
            if h.forwarding:
                self._send(h, commit if h.learner_type is LearnerType.PARTICIPANT else inform)
        for link in self._pending_syncs.pop(z, ()):
            self._send_sync(link)

    def _designated_leader(self, p: _Proposal, zxid: int) -> int:
        """``Leader.getDesignatedLeader``: this leader if it is a voter of the new
        configuration at the same quorum address; else the voter of the new configuration that
        ACKed the reconfig and, of the proposals after it, the longest run (candidates in
        Java's HashSet order)."""
        new = p.config
        assert new is not None
        me = new.voting_members.get(self.sid)
        old = self.verifier.get(self.sid) if self.verifier is not None else None
        if me is not None and (old is None or me.addr == old.addr):
            return self.sid
        candidates = [s for s in p.acks if s in new.voting_members and s != self.sid]
        if not candidates:
            return self.sid
        order = java_hashmap_long_order(candidates)
        current = order[0]
        z = zxid + 1
        q = self._outstanding.get(z)
        while q is not None and order:
            for verifier in (self.verifier, q.next_config):
                if verifier is None:
                    continue
                acked = {s for s in q.acks if s in verifier.voting_members}
                order = [s for s in order if s in acked]
                if not order:
                    return current
                current = order[0]
                if len(order) == 1:
                    return current
            z += 1
            q = self._outstanding.get(z)
        return current

    def _send_sync(self, link: int) -> None:
        h = self._links.get(link)
        if h is not None:
            self._send(h, packet(P.SYNC, 0))

    def _synced(self, h: _Handler) -> bool:
        return self.tick_count <= h.deadline_tick

    def _half_tick(self) -> None:
        """One iteration of ``Leader.lead``'s loop (every tickTime/2)."""
        self._passes += 1
        if not self._tick_skip:
            self.tick_count += 1
            synced = {self.sid} | {
                h.sid
                for h in self._links.values()
                if h.phase is not _Phase.WAIT_INFO and self._synced(h)
            }
            seen = self.last_seen if self._reconfig_in_flight() else None
            if not self.quorum.contains_quorum(synced) or (
                seen is not None and not seen.contains_quorum(synced)
            ):
                self._finish(
                    "Not sufficient followers synced, only synced with sids: "
                    f"[ {','.join(str(s) for s in sorted(synced))} ]"
                )
                return
        self._tick_skip = not self._tick_skip
        ping = packet(P.PING, self.last_proposed)
        for h in list(self._links.values()):
            if not h.newleader_sent:
                continue
            if h.check.ok(self._passes, 2 * self.timing.sync_limit):
                self._send(h, ping)
            else:
                self._close(h, "Closing connection to peer due to transaction timeout.")

    # ------------------------------------------------------------------ helpers

    def _send(self, h: _Handler, qp: QuorumPacket) -> None:
        self._rd.messages.append(Send(h.link, qp))

    def _close(self, h: _Handler, reason: str) -> None:
        if self._links.pop(h.link, None) is not None:
            self._rd.close.append((h.link, reason))

    def _finish(self, reason: str) -> None:
        if self._done:
            return
        self._done = True
        self.state = ServerState.LOOKING
        self.zab_state = ZabState.ELECTION
        for h in list(self._links.values()):
            self._close(h, "leader shutting down")
        self._rd.role = RoleChange(ServerState.LOOKING, reason)


def _request_size(qp: QuorumPacket) -> int:
    """What a waiting REQUEST costs (``LearnerHandler.packetSize``'s estimate: 28 bytes, the
    data, each authinfo id)."""
    size = 28 + len(qp.data or b"")
    for i in qp.authinfo or ():
        size += len(i.scheme or "") + len(i.id or "")
    return size


def sync_follower(
    peer: int,
    last_processed: int,
    committed_log: Sequence[Entry],
    txnlog: TxnLogSource | None,
    force_snap: bool = False,
) -> tuple[bool, int, list[QuorumPacket]]:
    """``LearnerHandler.syncFollower``: (need SNAP, zxid queued up to, DIFF/TRUNC + pairs).

    ``last_processed`` is the leader's lastProcessedZxid; ``committed_log`` its committedLog
    (oldest first); ``txnlog`` None when on-disk sync is off (snapshotSizeFactor < 0).
    """
    out: list[QuorumPacket] = []
    new_epoch_peer = counter_of(peer) == 0
    if committed_log:
        min_log, max_log = committed_log[0].zxid, committed_log[-1].zxid
    else:
        min_log = max_log = last_processed
    if force_snap:
        return True, peer, []
    if last_processed == peer:
        return False, peer, [packet(P.DIFF, peer)]
    if peer > max_log and not new_epoch_peer:
        return False, max_log, [packet(P.TRUNC, max_log)]
    if min_log <= peer <= max_log:
        need_op, current = _queue_committed(iter(committed_log), peer, None, max_log, out, True)
        return need_op, current, out
    if peer < min_log and txnlog is not None:
        it = iter(txnlog(peer))
        first = next(it, None)
        if first is not None:
            need_op, current = _queue_committed(
                _chain_one(first, it), peer, min_log, max_log, out, True
            )
            if need_op or current < min_log:
                return True, peer, []  # "Detected gap between end of txnlog and committedLog"
            need_op, current = _queue_committed(
                iter(committed_log), current, None, max_log, out, False
            )
            return need_op, current, out
    return True, peer, []


def _queue_committed(
    it: Iterator[Entry],
    peer: int,
    max_zxid: int | None,
    last_committed: int,
    out: list[QuorumPacket],
    need_op: bool,
) -> tuple[bool, int]:
    """``queueCommittedProposals``: (still need an op packet -> SNAP, zxid queued up to)."""
    new_epoch_peer = counter_of(peer) == 0
    queued = peer
    prev = -1
    for e in it:
        z = e.zxid
        if max_zxid is not None and z > max_zxid:
            break
        if z < peer:
            prev = z
            continue
        if need_op:
            if z == peer:
                out.append(packet(P.DIFF, last_committed))
                need_op = False
                continue
            if new_epoch_peer:
                out.append(packet(P.DIFF, last_committed))
                need_op = False
            elif z > peer:
                if epoch_of(z) != epoch_of(peer):
                    # "Cannot send TRUNC to peer ... from different epoch" -> SNAP
                    return True, queued
                out.append(packet(P.TRUNC, prev))
                need_op = False
        if z <= queued:
            continue  # a duplicate txn, or already queued
        out.append(packet(P.PROPOSAL, z, e.data))
        out.append(packet(P.COMMIT, z))
        queued = z
    if need_op and new_epoch_peer:
        out.append(packet(P.DIFF, last_committed))
        need_op = False
    return need_op, queued


def _chain_one(first: Entry, rest: Iterator[Entry]) -> Iterator[Entry]:
    yield first
    yield from rest
