"""FastLeaderElection (ZooKeeper 3.8, electionAlg=3) as a pure state machine.

Theory of operation
-------------------
Every member keeps a *logical clock* (the election round, ``logicalclock``) and a *proposal*
(leader sid, that leader's last zxid, that leader's epoch). Starting an election
(``lookForLeader``) increments the clock and proposes itself: (myid, lastLoggedZxid,
currentEpoch); an observer proposes (MIN, MIN, MIN) and can never be proposed (not a voter).
The proposal is sent to every voter, itself included (QuorumCnxManager loops a message to self
back into the receive queue, so a member's own vote counts like any other).

Votes are ordered by ``totalOrderPredicate``: higher peer epoch, then higher zxid, then higher
sid; a non-voter never wins. On a LOOKING notification from a voter about a voter:

* a higher round: adopt that round, forget the votes of the old round (``recvset``), propose the
  better of the sender's vote and *our initial* vote, re-send;
* a lower round: drop it (the WorkerReceiver already answered the sender with our vote);
* the same round: adopt the sender's vote if it is better than ours, re-send;

then record the sender's vote. When a quorum of the votes of this round equal our proposal we
*finalize*: we wait until ``finalizeWait`` (200 ms) passes without a notification that beats our
proposal. Such a notification cancels the finalize and is processed as usual (Java re-queues it);
others are discarded. Silence decides: LEADING if the proposal is us, else FOLLOWING (OBSERVING
for an observer).

Members that already decided answer a LOOKING sender with their vote, the round that decided it
and their state (FOLLOWING/LEADING). A newcomer joins with ``receivedFollowingNotification``: a
notification of its own round counts in ``recvset``; every one counts in ``outofelection``; a
quorum of equal votes plus ``checkLeader`` (the leader itself said LEADING, or the leader is us
and the round is ours) decides, adopting the leader's round. Votes of decided members compare
only (leader, peerEpoch) (``Vote.equals``). OBSERVING notifications are ignored.

Without input the member waits ``notTimeout`` (200 ms, doubling on each silent poll up to 60 s)
and then re-sends its proposal to all voters. A notification from a sid that is not a voter is
answered at once with our current vote whatever our state (``WorkerReceiver``).

The machine takes time (ms) as an argument and never reads a clock: a shell calls
:meth:`FastLeaderElection.tick` when ``now >= deadline``. Outputs are :class:`Output` bundles:
notifications to send (by sid) and at most one :class:`Decision`.

Invariants
----------
* ``state`` is LOOKING exactly between :meth:`look` and a decision.
* The proposal only ever improves within a round (totalOrderPredicate) and a new round restarts
  from the initial vote.
* Memory is bounded by the voter count: recvset/outofelection are keyed by voter sid.

Interop notes (checked against ZooKeeper 3.8.0 members, tests/compat/test_java_election.py)
--------------------------------------------------------------------------------------------
* The embedded config must carry a version no higher than the receiver's (``version=0`` with
  static configs): a higher one makes a LOOKING Java member log "Received version" and, when
  the members differ too (``QuorumMaj.equals``), shut its election down ("restarting leader
  election"). The tests fail on either line in the Java log.
* During the finalize wait Java drops every notification that does not beat the proposal, even
  one of a higher round; only a better one is re-queued. We do the same.
* Which member leads is not a function of the votes alone: members that started a few hundred
  ms apart (JVM start-up) can finalize before the best vote reaches them. Only agreement is
  guaranteed, and safety comes from Zab's epochs.

Deviations from Java (documented): QuorumMaj.getWeight is 1 for any sid, so Java's
totalOrderPredicate alone would let a non-voter win; the main loop then ignores it
(``validVoter(n.leader)``). We give non-voters weight 0 (as hierarchical quorums do) so the
finalize wait is not cancelled by a vote for a non-voter. Dynamic reconfig (last-seen configs,
``processReconfig``) is not implemented: the voter set is static.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from mypy_extensions import mypyc_attr

from trizk.quorum.election.messages import NOTIFICATION_VERSION, Notification, ServerState

#: FastLeaderElection.finalizeWait / minNotificationInterval / maxNotificationInterval (ms).
FINALIZE_WAIT = 200
MIN_NOTIFICATION_INTERVAL = FINALIZE_WAIT
MAX_NOTIFICATION_INTERVAL = 60_000

LONG_MIN = -(1 << 63)

_STATES = {int(s): s for s in ServerState}


class QuorumPredicate(Protocol):
    """A verifier's quorum test and weights (QuorumMaj, QuorumHierarchical)."""

    def contains_quorum(self, sids: Iterable[int]) -> bool: ...

    def weight(self, sid: int) -> int: ...


class VerifierLike(QuorumPredicate, Protocol):
    """The part of a QuorumVerifier (quorum/verifier.py) the election reads."""

    @property
    def voting_members(self) -> Mapping[int, object]: ...

    @property
    def observing_members(self) -> Mapping[int, object]: ...

    def to_string(self) -> str: ...


@dataclass(frozen=True)
class ElectionView:
    """What the election needs of the quorum configuration (the lead plugs the QuorumVerifier in
    here): the voting members' sids and the config string embedded in every notification
    (``QuorumMaj.toString`` as UTF-8 bytes; ``version=0`` with static configs)."""

    voters: frozenset[int]
    config: bytes = b"version=0"
    #: the verifier's quorum test and weights (hierarchical quorums); None: a majority of
    #: ``voters``, each of weight 1
    verifier: QuorumPredicate | None = None
    #: the observers of the configuration; None: every non-voter is one (a static config).
    #: With dynamic reconfig a member in neither set is a non-voting *participant*
    #: (``QuorumPeer.updateLearnerType``): it decides FOLLOWING, not OBSERVING
    observers: frozenset[int] | None = None

    @classmethod
    def from_verifier(cls, qv: VerifierLike) -> ElectionView:
        """The voters of ``qv``, its ``toString`` (sent as UTF-8, as buildMsg), its quorums."""
        return cls(
            frozenset(qv.voting_members),
            qv.to_string().encode("utf-8"),
            qv,
            frozenset(qv.observing_members),
        )

    def quorum(self, acks: Iterable[int]) -> bool:
        """``containsQuorum`` over the voters among ``acks`` (SyncedLearnerTracker)."""
        if self.verifier is not None:
            return self.verifier.contains_quorum(self.voters.intersection(acks))
        return len(self.voters.intersection(acks)) > len(self.voters) // 2

    def weight(self, sid: int) -> int:
        """``getWeight``: 0 for a non-voter (see the module docstring), else the verifier's."""
        if sid not in self.voters:
            return 0
        return 1 if self.verifier is None else self.verifier.weight(sid)


@dataclass(frozen=True)
class Vote:
    """Q/Vote.java. ``version`` matters only to :meth:`matches` between non-LOOKING votes."""

    leader: int
    zxid: int
    election_epoch: int
    peer_epoch: int
    state: ServerState = ServerState.LOOKING
    version: int = 0

    def matches(self, other: Vote) -> bool:
        """Vote.equals: LOOKING on either side compares all four numbers; otherwise the leader
        and peer epoch, or only the leader when exactly one side has version 0."""
        if self.state == ServerState.LOOKING or other.state == ServerState.LOOKING:
            return (self.leader, self.zxid, self.election_epoch, self.peer_epoch) == (
                other.leader,
                other.zxid,
                other.election_epoch,
                other.peer_epoch,
            )
        if (self.version > 0) != (other.version > 0):
            return self.leader == other.leader
        return self.leader == other.leader and self.peer_epoch == other.peer_epoch


@dataclass(frozen=True)
class Send:
    to: int
    notification: Notification


@dataclass(frozen=True)
class Decision:
    """The end of an election: our new state and the vote (leader, zxid, round, peer epoch)."""

    state: ServerState
    vote: Vote


@dataclass
class Output:
    sends: list[Send] = field(default_factory=list)
    decision: Decision | None = None


# (Compiled, open to Python subclasses: the simulation's tests break it on purpose that way.)
@mypyc_attr(allow_interpreted_subclasses=True)
class FastLeaderElection:
    """One member's election. Inputs: :meth:`look`, :meth:`on_notification`, :meth:`tick`,
    :meth:`update_peer_epoch`; outputs: :class:`Output`. See the module docstring."""

    def __init__(self, myid: int, view: ElectionView) -> None:
        self.myid = myid
        self.view = view
        self.state = ServerState.LOOKING
        self.logicalclock = 0
        # the proposal (proposedLeader, proposedZxid, proposedEpoch)
        self.proposed = (-1, -1, -1)
        # QuorumPeer.currentVote: the last decided vote (what decided members answer)
        self.current_vote = Vote(myid, -1, -1, -1)
        self.looking = False  # inside lookForLeader
        self.finalizing = False
        self.not_timeout = MIN_NOTIFICATION_INTERVAL
        self.deadline: int | None = None
        self._last_zxid = -1
        self._epoch = -1
        self._started = False
        self._recvset: dict[int, Vote] = {}
        self._outofelection: dict[int, Vote] = {}

    # ------------------------------------------------------------------ helpers
    @property
    def participant(self) -> bool:
        return self.myid in self.view.voters

    def _init_vote(self) -> tuple[int, int, int]:
        # getInitId / getInitLastLoggedZxid / getPeerEpoch
        if self.participant:
            return (self.myid, self._last_zxid, self._epoch)
        return (LONG_MIN, LONG_MIN, LONG_MIN)

    def _weight(self, sid: int) -> int:
        return self.view.weight(sid)

    def beats(self, new: tuple[int, int, int], cur: tuple[int, int, int]) -> bool:
        """totalOrderPredicate(newId, newZxid, newEpoch, curId, curZxid, curEpoch) with votes
        given as (sid, zxid, epoch)."""
        if self._weight(new[0]) == 0:
            return False
        return (new[2], new[1], new[0]) > (cur[2], cur[1], cur[0])

    def _note(self, leader: int, zxid: int, epoch: int, peer_epoch: int) -> Notification:
        return Notification(int(self.state), leader, zxid, epoch, peer_epoch,
                            NOTIFICATION_VERSION, self.view.config)  # fmt: skip

    def _proposal_note(self) -> Notification:
        leader, zxid, epoch = self.proposed
        return Notification(int(ServerState.LOOKING), leader, zxid, self.logicalclock, epoch,
                            NOTIFICATION_VERSION, self.view.config)  # fmt: skip

    def _send_notifications(self, out: Output, loop: list[Notification]) -> None:
        """sendNotifications: to every voter; the one to self is looped back."""
        note = self._proposal_note()
        for sid in sorted(self.view.voters):
            if sid == self.myid:
                loop.append(note)
            else:
                out.sends.append(Send(sid, note))

    def _learning_state(self) -> ServerState:
        # learningState(): by the learner type, which only the observers' lines make OBSERVER
        observers = self.view.observers
        if self.participant or (observers is not None and self.myid not in observers):
            return ServerState.FOLLOWING
        return ServerState.OBSERVING

    def _decide(self, leader: int, zxid: int, epoch: int, peer_epoch: int, out: Output) -> None:
        state = ServerState.LEADING if leader == self.myid else self._learning_state()
        self.state = state
        self.looking = False
        self.finalizing = False
        self.deadline = None
        self._recvset.clear()  # leaveInstance clears the receive queue; the sets die with it
        self._outofelection.clear()
        vote = Vote(leader, zxid, epoch, peer_epoch)
        self.current_vote = vote  # QuorumPeer.setCurrentVote(lookForLeader())
        out.decision = Decision(state, vote)

    # ------------------------------------------------------------------ inputs
    def look(self, now: int, last_zxid: int, current_epoch: int) -> Output:
        """Start an election (QuorumPeer LOOKING -> lookForLeader) with our last logged zxid
        and currentEpoch."""
        out = Output()
        self.state = ServerState.LOOKING
        self.looking = True
        self.finalizing = False
        self._last_zxid = last_zxid
        self._epoch = current_epoch
        if not self._started:
            # QuorumPeer.startLeaderElection: the vote answered before any decision
            self.current_vote = Vote(self.myid, last_zxid, -1, current_epoch)
            self._started = True
        self._recvset = {}
        self._outofelection = {}
        self.not_timeout = MIN_NOTIFICATION_INTERVAL
        self.logicalclock += 1
        self.proposed = self._init_vote()
        loop: list[Notification] = []
        self._send_notifications(out, loop)
        self.deadline = now + self.not_timeout
        self._run_loopback(now, loop, out)
        return out

    def designate(self, leader: int, zxid: int) -> Decision:
        """A committed reconfig designated ``leader`` (``QuorumPeer.processReconfig`` ->
        ``updateVote``, then ``updateServerState`` when the role ends): no election; the vote
        becomes ``Vote(leader, zxid)`` (epochs -1, as Java's two-argument Vote) and the state
        follows from it -- LEADING if it is us, else FOLLOWING or OBSERVING."""
        self.state = ServerState.LEADING if leader == self.myid else self._learning_state()
        self.looking = False
        self.finalizing = False
        self.deadline = None
        self._recvset.clear()
        self._outofelection.clear()
        self.current_vote = Vote(leader, zxid, -1, -1)
        return Decision(self.state, self.current_vote)

    def update_peer_epoch(self, epoch: int) -> None:
        """QuorumPeer.updateElectionVote after sync: decided members answer with the new
        epoch."""
        v = self.current_vote
        self.current_vote = Vote(v.leader, v.zxid, v.election_epoch, epoch, v.state, v.version)

    def stop(self) -> None:
        """Leave the election without a decision (shutdown)."""
        self.looking = False
        self.finalizing = False
        self.deadline = None

    def tick(self, now: int) -> Output:
        """Time passed; acts when ``now >= deadline``."""
        out = Output()
        if not self.looking or self.deadline is None or now < self.deadline:
            return out
        if self.finalizing:
            leader, zxid, epoch = self.proposed
            self._decide(leader, zxid, self.logicalclock, epoch, out)
            return out
        # an empty poll: re-send (Java connects all instead when nothing was delivered)
        loop: list[Notification] = []
        self._send_notifications(out, loop)
        self.not_timeout = min(self.not_timeout * 2, MAX_NOTIFICATION_INTERVAL)
        self.deadline = now + self.not_timeout
        self._run_loopback(now, loop, out)
        return out

    def on_notification(self, now: int, sid: int, n: Notification) -> Output:
        """A decoded notification arrived from ``sid`` (WorkerReceiver, then lookForLeader)."""
        out = Output()
        loop: list[Notification] = []
        self._receive(now, sid, n, out, loop)
        self._run_loopback(now, loop, out)
        return out

    # ------------------------------------------------------------------ internals
    def _run_loopback(self, now: int, loop: list[Notification], out: Output) -> None:
        # bounded: each pass handles what the previous one queued; a vote to self can only
        # change the proposal once more per pass, and never when it equals the proposal
        for _ in range(8):
            # a reply addressed to ourselves is looped back too (QuorumCnxManager.toSend)
            loop += [s.notification for s in out.sends if s.to == self.myid]
            out.sends[:] = [s for s in out.sends if s.to != self.myid]
            if not loop:
                return
            batch, loop[:] = list(loop), []
            for note in batch:
                self._receive(now, self.myid, note, out, loop)

    def _receive(
        self, now: int, sid: int, n: Notification, out: Output, loop: list[Notification]
    ) -> None:
        state = _STATES.get(n.state)
        if sid not in self.view.voters:
            # answer a non-voter (an observer) at once with our current vote, whatever we are
            v = self.current_vote
            out.sends.append(
                Send(sid, self._note(v.leader, v.zxid, self.logicalclock, v.peer_epoch))
            )
            return
        if state is None:
            return  # WorkerReceiver: unknown state from a voter is dropped
        if self.state != ServerState.LOOKING or not self.looking:
            if self.state != ServerState.LOOKING and state == ServerState.LOOKING:
                v = self.current_vote
                out.sends.append(
                    Send(sid, self._note(v.leader, v.zxid, v.election_epoch, v.peer_epoch))
                )
            return
        if state == ServerState.LOOKING and n.election_epoch < self.logicalclock:
            leader, zxid, epoch = self.proposed
            out.sends.append(Send(sid, self._note(leader, zxid, self.logicalclock, epoch)))
        self._election_step(now, sid, n, state, out, loop)

    def _election_step(
        self,
        now: int,
        sid: int,
        n: Notification,
        state: ServerState,
        out: Output,
        loop: list[Notification],
    ) -> None:
        if self.finalizing:
            # the finalize poll: a better vote cancels it and is processed; others are dropped
            if not self.beats((n.leader, n.zxid, n.peer_epoch), self.proposed):
                self.deadline = now + FINALIZE_WAIT
                return
            self.finalizing = False
        self.deadline = now + self.not_timeout
        if n.leader not in self.view.voters:
            return  # "Ignoring notification for non-cluster member sid"
        if state == ServerState.LOOKING:
            self._looking(now, sid, n, out, loop)
        elif state in (ServerState.FOLLOWING, ServerState.LEADING):
            self._following(sid, n, state, out)
        # OBSERVING: ignored

    def _looking(
        self, now: int, sid: int, n: Notification, out: Output, loop: list[Notification]
    ) -> None:
        if self._init_vote()[1] == -1 or n.zxid == -1:
            return
        theirs = (n.leader, n.zxid, n.peer_epoch)
        if n.election_epoch > self.logicalclock:
            self.logicalclock = n.election_epoch
            self._recvset.clear()
            init = self._init_vote()
            self.proposed = theirs if self.beats(theirs, init) else init
            self._send_notifications(out, loop)
        elif n.election_epoch < self.logicalclock:
            return
        elif self.beats(theirs, self.proposed):
            self.proposed = theirs
            self._send_notifications(out, loop)
        self._recvset[sid] = Vote(n.leader, n.zxid, n.election_epoch, n.peer_epoch)
        leader, zxid, epoch = self.proposed
        mine = Vote(leader, zxid, self.logicalclock, epoch)
        acks = [s for s, v in self._recvset.items() if mine.matches(v)]
        if self.view.quorum(acks):
            self.finalizing = True
            self.deadline = now + FINALIZE_WAIT

    def _check_leader(self, votes: dict[int, Vote], leader: int, election_epoch: int) -> bool:
        if leader != self.myid:
            v = votes.get(leader)
            return v is not None and v.state == ServerState.LEADING
        return self.logicalclock == election_epoch

    def _following(self, sid: int, n: Notification, state: ServerState, out: Output) -> None:
        # receivedFollowingNotification (receivedLeadingNotification adds only the oracle)
        if n.election_epoch == self.logicalclock:
            self._recvset[sid] = Vote(n.leader, n.zxid, n.election_epoch, n.peer_epoch, state)
            theirs = Vote(n.leader, n.zxid, n.election_epoch, n.peer_epoch, state, n.version)
            acks = [s for s, v in self._recvset.items() if theirs.matches(v)]
            if self.view.quorum(acks) and self._check_leader(
                self._recvset, n.leader, n.election_epoch
            ):
                self._decide(n.leader, n.zxid, n.election_epoch, n.peer_epoch, out)
                return
        theirs = Vote(n.leader, n.zxid, n.election_epoch, n.peer_epoch, state, n.version)
        self._outofelection[sid] = theirs
        acks = [s for s, v in self._outofelection.items() if theirs.matches(v)]
        if self.view.quorum(acks) and self._check_leader(
            self._outofelection, n.leader, n.election_epoch
        ):
            self.logicalclock = n.election_epoch
            self._decide(n.leader, n.zxid, n.election_epoch, n.peer_epoch, out)
