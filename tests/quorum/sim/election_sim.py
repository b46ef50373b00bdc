"""Deterministic discrete-event simulation of FastLeaderElection ensembles.

Theory
------
Each member is a pure :class:`~trizk.quorum.election.election.FastLeaderElection`. The simulator
owns time
(integer ms), the network and the faults, all drawn from one ``random.Random(seed)``, so a seed
is a complete, reproducible run: ``python -m tests.quorum.sim.election_sim SEED`` replays it and
prints
the trace.

Network: every notification is delivered after a random delay (so links reorder), may be lost,
and is lost when the link is cut by a partition at send or delivery time, or when the receiver
crashed since it was sent (its TCP connections died with it).

Zab stand-in: election is only half of ZooKeeper; a decided member then syncs with its leader.
We model just what the election needs: ``SYNC_MS`` after deciding, a leader that sees a quorum
of voters following it (alive, connected, FOLLOWING it) is *established* in a new epoch
``max(epochs of that quorum) + 1``, its followers take the new epoch and (some of) its zxids, and
the leader's and every syncing learner's election votes get the leader's epoch as peer epoch
(``updateElectionVote``, also when a learner joins an established leader); a leader that does
not see a quorum, or a follower/observer whose leader is gone, unreachable or not leading, goes
back to LOOKING with its current zxid/epoch, as QuorumPeer does.

Invariants checked after every step
-----------------------------------
* at most one established leader per epoch, and established epochs strictly increase;
* every LOOKING vote a voter sends is no less than its initial vote of that election
  (totalOrderPredicate only ever improves a proposal);
* a LEADING decision's vote is backed by a quorum of voters, each of which either sent
  exactly that vote while LOOKING or announced it, as a decided (leader, peerEpoch), to LOOKING
  members. That is what FastLeaderElection guarantees: termPredicate over a round's LOOKING
  votes, or the out-of-election quorum of decided votes equal by Vote.equals plus checkLeader.
  It is weaker than "the leader is the best of a quorum's *latest* initial votes", which Java
  breaks too: a restarted leader (round 1 again) leads on the stale answers of its old
  followers, and a vote proposed in an earlier election that reached the same round number
  still counts after its sender looked again with better numbers (see check_leader_vote).
  Members' *current* states are not the measure;
* in *synchronous* runs (all start together, no loss, crash or partition, every delay below
  the 200 ms finalize wait) all members that decide in a round choose the same leader, and it
  is the voter with the best initial (epoch, zxid, sid). FastLeaderElection does not promise
  more: with a staggered start or a lost notification a quorum can finalize before the best
  vote reaches it, and a later member then decides the better leader in the same round
  (e.g. ``Faults(loss=0, crash_rate=0, partition_rate=0)``, seed 20, 3 voters: 2 follows 3
  while 1 and 3 elect 1). ZooKeeper relies on Zab's epochs for safety, checked next;
* liveness: once faults stop, all members agree on one established leader within
  ``LIVENESS_MS`` of simulated time.
"""

from __future__ import annotations

import heapq
import random
import sys
from dataclasses import dataclass, field

from trizk.quorum.election.election import (
    FINALIZE_WAIT,
    Decision,
    ElectionView,
    FastLeaderElection,
    Output,
)
from trizk.quorum.election.messages import Notification, ServerState

SYNC_MS = 400  # ~ tickTime*initLimit of a fast test config
CHECK_MS = 1000
LIVENESS_MS = 150_000  # two maximal notification intervals (60 s) and change


@dataclass
class Faults:
    fault_ms: int = 8000  # faults happen in [0, fault_ms)
    loss: float = 0.1
    max_delay_ms: int = 150
    crash_rate: float = 0.0006  # per ms, ensemble-wide
    partition_rate: float = 0.0004
    duplicate: float = 0.05  # SendWorker re-sends the last message on reconnect
    start_jitter_ms: int = 300

    @property
    def synchronous(self) -> bool:
        """No loss, crash or partition, and every first vote reaches everyone within the
        finalize wait: then FLE alone must agree (see the module docstring)."""
        return (
            self.loss == 0
            and self.crash_rate == self.partition_rate == 0
            and self.start_jitter_ms == 0
            and self.max_delay_ms < FINALIZE_WAIT
        )


@dataclass
class Member:
    sid: int
    voter: bool
    fle: FastLeaderElection
    zxid: int
    epoch: int
    alive: bool = True
    incarnation: int = 0
    decided_at: int | None = None
    next_tick: int | None = None
    epoch0: int = 0
    zxid0: int = 0
    looked_with: tuple[int, int] = (0, 0)  # (epoch, zxid) of the latest initial vote
    synced: bool = False  # synced with its leader since it decided (Learner.syncWithLeader)

    def __post_init__(self) -> None:
        self.epoch0, self.zxid0 = self.epoch, self.zxid


class InvariantError(AssertionError):
    pass


@dataclass
class Sim:
    seed: int
    voters: int = 3
    observers: int = 0
    faults: Faults = field(default_factory=Faults)
    trace: list[str] | None = None
    #: the members' machine (a test's broken subclass shows that the invariants can fail)
    fle_cls: type[FastLeaderElection] = FastLeaderElection

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.now = 0
        self._seq = 0
        self._events: list[tuple[int, int, str, tuple[object, ...]]] = []
        voter_sids = list(range(1, self.voters + 1))
        observer_sids = list(range(100, 100 + self.observers))
        self.view = ElectionView(frozenset(voter_sids), b"version=0")
        self.members: dict[int, Member] = {}
        for sid in voter_sids + observer_sids:
            epoch = self.rng.randint(0, 2)
            zxid = (epoch << 32) | self.rng.randint(0, 3)
            self.members[sid] = Member(sid, sid in voter_sids, self.fle_cls(sid, self.view),
                                       zxid, epoch)  # fmt: skip
        self.cut: set[frozenset[int]] = set()
        self.established: dict[int, int] = {}  # epoch -> leader
        # (round, era) -> leaders; the era advances on every establishment, crash or abandoned
        # leadership, the events after which round numbers are legitimately reused
        self.round_leaders: dict[tuple[int, int], set[int]] = {}
        self.era = 0
        self.decisions = 0
        self.first_leader: int | None = None
        # (leader, peer epoch) -> voters whose decided vote ever said so: what a LOOKING member
        # can count in ``outofelection`` (stale answers may still be in flight)
        self.announced: dict[tuple[int, int], set[int]] = {}
        # (leader, zxid, round, peer epoch) -> voters that proposed it in a LOOKING
        # notification (what a recvset can count)
        self.proposals: dict[tuple[int, int, int, int], set[int]] = {}

    # ------------------------------------------------------------------ plumbing
    def log(self, msg: str) -> None:
        if self.trace is not None:
            self.trace.append(f"{self.now:>7} {msg}")

    def at(self, t: int, kind: str, *args: object) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, self._seq, kind, args))

    def faulty(self) -> bool:
        return self.now < self.faults.fault_ms

    def connected(self, a: int, b: int) -> bool:
        return frozenset((a, b)) not in self.cut

    def quorum(self, sids: set[int]) -> bool:
        return self.view.quorum(sids)

    # ------------------------------------------------------------------ members
    def apply(self, m: Member, out: Output) -> None:
        self.record_proposals(m, out)
        for send in out.sends:
            self.send(m.sid, send.to, send.notification)
        if out.decision is not None:
            self.decided(m, out.decision)
        d = m.fle.deadline
        if d is not None and m.next_tick != d:
            m.next_tick = d
            self.at(d, "tick", m.sid, m.incarnation)

    def send(self, frm: int, to: int, note: Notification) -> None:
        f = self.faults
        if not self.connected(frm, to):
            return
        if self.faulty() and self.rng.random() < f.loss:
            return
        copies = 2 if self.faulty() and self.rng.random() < f.duplicate else 1
        for _ in range(copies):
            delay = self.rng.randint(0, f.max_delay_ms if self.faulty() else 20)
            self.at(self.now + delay, "deliver", frm, to, self.members[to].incarnation, note)

    def announce(self, m: Member) -> None:
        """``m`` (decided) now answers LOOKING members with its current vote."""
        if m.voter:
            v = m.fle.current_vote
            self.announced.setdefault((v.leader, v.peer_epoch), set()).add(m.sid)

    def look(self, m: Member) -> None:
        m.decided_at = None
        m.synced = False
        m.looked_with = (m.epoch, m.zxid)
        self.log(f"{m.sid} LOOKING zxid={m.zxid:#x} epoch={m.epoch}")
        self.apply(m, m.fle.look(self.now, m.zxid, m.epoch))

    def decided(self, m: Member, d: Decision) -> None:
        self.decisions += 1
        m.decided_at = self.now
        v = d.vote
        self.log(f"{m.sid} {d.state.name} leader={v.leader} round={v.election_epoch}")
        self.round_leaders.setdefault((v.election_epoch, self.era), set()).add(v.leader)
        if d.state == ServerState.LEADING:
            self.check_leader_vote(m, d)
            if self.first_leader is None:
                self.first_leader = m.sid
        self.announce(m)
        self.at(self.now + SYNC_MS, "check", m.sid, m.incarnation)

    # ------------------------------------------------------------------ invariants
    def fail(self, msg: str) -> None:
        raise InvariantError(f"seed {self.seed} at {self.now} ms: {msg}")

    def check_leader_vote(self, m: Member, d: Decision) -> None:
        if d.vote.leader != m.sid:
            self.fail(f"LEADING for another leader: {d.vote}")
        # FLE decides LEADING on a quorum of votes equal to ours by Vote.equals: LOOKING votes
        # of the round (all four numbers; termPredicate, or the same-round recvset of
        # receivedFollowingNotification) or decided votes, equal in (leader, peerEpoch), in
        # ``outofelection`` plus checkLeader -- for the leader itself only ``logicalclock ==
        # electionEpoch`` (FastLeaderElection.lookForLeader, ZOOKEEPER-1732). So a restarted
        # leader (round 1 again) whose old followers still answer FOLLOWING it in round 1
        # leads again, though members that went LOOKING meanwhile hold better votes (seeds
        # 24528 and 41973 of 3v1o-faults, 4148 of 5v1o-faults); and a vote a member proposed
        # in an earlier election of the same round number still counts after it looked again
        # with better numbers (seed 77030). Each proposal was checked against its proposer's
        # initial vote when sent (``record_proposals``): the vote is the best of a quorum's
        # initial votes, or a quorum had decided for it.
        v = d.vote
        backing = self.proposals.get((v.leader, v.zxid, v.election_epoch, v.peer_epoch), set())
        backing = backing | self.announced.get((v.leader, v.peer_epoch), set())
        if not self.quorum(backing):
            self.fail(f"leader {m.sid} {v} is not the best of a quorum: {self.states()}")

    def record_proposals(self, m: Member, out: Output) -> None:
        """A voter's proposals (LOOKING notifications; its own vote loops back unsent) are
        never below its initial vote (totalOrderPredicate only improves them)."""
        if not m.voter:
            return
        votes = [
            (n.leader, n.zxid, n.election_epoch, n.peer_epoch)
            for n in (s.notification for s in out.sends if s.to in self.view.voters)
            if n.state == ServerState.LOOKING
        ]  # (a non-voter is answered with the current vote, which it never counts)
        if m.fle.looking:
            leader, zxid, epoch = m.fle.proposed
            votes.append((leader, zxid, m.fle.logicalclock, epoch))
        initial = (*m.looked_with, m.sid)
        for leader, zxid, rnd, epoch in votes:
            if (epoch, zxid, leader) < initial:
                self.fail(f"{m.sid} proposes {leader} {(epoch, zxid)} below its initial vote")
            self.proposals.setdefault((leader, zxid, rnd, epoch), set()).add(m.sid)

    def check_round_agreement(self) -> None:
        for (rnd, era), leaders in self.round_leaders.items():
            if len(leaders) > 1:
                self.fail(f"round {rnd} (era {era}) decided for several leaders {sorted(leaders)}")

    def states(self) -> str:
        return ", ".join(
            f"{s}:{'up' if m.alive else 'down'}/{m.fle.state.name}/e{m.epoch}/z{m.zxid:#x}"
            for s, m in sorted(self.members.items())
        )

    def settled(self) -> int | None:
        """The leader everyone alive follows, established, or None."""
        leaders = {m.fle.current_vote.leader for m in self.members.values() if m.alive}
        if len(leaders) != 1:
            return None
        (leader,) = leaders
        lm = self.members.get(leader)
        if lm is None or not lm.alive or lm.fle.state != ServerState.LEADING:
            return None
        if self.established.get(lm.epoch) != leader:
            return None
        for m in self.members.values():
            if m.alive and (m.fle.state == ServerState.LOOKING or m.decided_at is None):
                return None
        return leader

    # ------------------------------------------------------------------ Zab stand-in
    def check(self, m: Member) -> None:
        state = m.fle.state
        if state == ServerState.LOOKING:
            return
        leader = m.fle.current_vote.leader
        if state == ServerState.LEADING:
            followers = {
                s
                for s, o in self.members.items()
                if o.alive
                and o.voter
                and s != m.sid
                and o.fle.state == ServerState.FOLLOWING
                and o.fle.current_vote.leader == m.sid
                and self.connected(s, m.sid)
            }
            if not self.quorum(followers | {m.sid}):
                self.log(f"{m.sid} gives up leading (followers {sorted(followers)})")
                self.era += 1
                self.look(m)
                return
            if self.established.get(m.epoch) != m.sid:
                self.establish(m, followers)
        else:
            lm = self.members[leader]
            ok = (
                lm.alive
                and self.connected(m.sid, leader)
                and lm.fle.state == ServerState.LEADING
                and lm.fle.current_vote.leader == leader
            )
            if not ok:
                self.log(f"{m.sid} loses leader {leader}")
                self.look(m)
                return
            if self.established.get(lm.epoch) == leader and (not m.synced or m.epoch != lm.epoch):
                self.sync(m, lm)
        self.at(self.now + CHECK_MS, "check", m.sid, m.incarnation)

    def establish(self, lm: Member, followers: set[int]) -> None:
        group = [lm] + [self.members[s] for s in sorted(followers)]
        new_epoch = max(o.epoch for o in group) + 1
        if self.established and new_epoch <= max(self.established):
            self.fail(f"epoch {new_epoch} of leader {lm.sid} after {self.established}")
        if new_epoch in self.established:
            self.fail(f"two leaders in epoch {new_epoch}")
        self.established[new_epoch] = lm.sid
        self.era += 1
        lm.epoch = new_epoch
        lm.zxid = (new_epoch << 32) | self.rng.randint(0, 3)  # a few commits
        lm.fle.update_peer_epoch(new_epoch)
        self.announce(lm)
        self.log(f"{lm.sid} established epoch {new_epoch} with {sorted(followers)}")
        for o in group[1:]:
            self.sync(o, lm)

    def sync(self, o: Member, lm: Member) -> None:
        """Learner.syncWithLeader: every learner that joins a leader syncs once and then
        updates its election vote to the leader's epoch at UPTODATE (``updateElectionVote``,
        ZOOKEEPER-1732) -- also one whose currentEpoch already was the leader's. Skipping that
        left such a follower answering an older peerEpoch than its leader, so a newcomer never
        saw a quorum of equal votes and stayed LOOKING (seed 18268 of 3v1o-faults)."""
        o.epoch = lm.epoch
        o.synced = True
        # a follower may lag the leader's last commits (they were acked by others); one ahead
        # of the leader in the same epoch is truncated (TRUNC)
        o.zxid = lm.zxid if self.rng.random() < 0.7 else (lm.epoch << 32)
        o.fle.update_peer_epoch(lm.epoch)
        self.announce(o)

    # ------------------------------------------------------------------ faults
    def fault(self) -> None:
        if not self.faulty():
            return
        f = self.faults
        r = self.rng.random()
        if r < 0.5:
            sid = self.rng.choice(sorted(self.members))
            m = self.members[sid]
            if m.alive:
                m.alive = False
                m.incarnation += 1
                self.era += 1
                self.log(f"{sid} crashes")
                self.at(self.now + self.rng.randint(50, 3000), "restart", sid)
        else:
            sids = sorted(self.members)
            side = {s for s in sids if self.rng.random() < 0.5}
            cut = {frozenset((a, b)) for a in side for b in sids if b not in side}
            self.cut |= cut
            self.log(f"partition {sorted(side)} | rest")
            self.at(self.now + self.rng.randint(100, 4000), "heal", tuple(cut))
        rate = f.crash_rate + f.partition_rate
        self.at(self.now + int(self.rng.expovariate(rate)) + 1, "fault")

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        """Run to the liveness deadline; returns the settled leader."""
        f = self.faults
        for m in self.members.values():
            self.at(self.rng.randint(0, f.start_jitter_ms), "start", m.sid)
        if f.crash_rate + f.partition_rate > 0:
            self.at(int(self.rng.expovariate(f.crash_rate + f.partition_rate)), "fault")
        self.at(f.fault_ms, "calm")
        deadline = f.fault_ms + LIVENESS_MS
        settled_at: int | None = None
        while self._events:
            t, _, kind, args = heapq.heappop(self._events)
            if t > deadline:
                break
            self.now = t
            self.step(kind, args)
            if self.now >= f.fault_ms:
                leader = self.settled()
                if leader is not None:
                    if settled_at is None:
                        settled_at = self.now
                    elif self.now - settled_at >= 2 * CHECK_MS:
                        self.check_round_agreement_if_fast()
                        return leader
                else:
                    settled_at = None
        self.fail(f"no stable established leader {LIVENESS_MS} ms after faults: {self.states()}")
        raise AssertionError  # unreachable

    def check_round_agreement_if_fast(self) -> None:
        if self.faults.synchronous:
            self.check_round_agreement()
            best = max((m.epoch0, m.zxid0, s) for s, m in self.members.items() if m.voter)
            if self.first_leader != best[2]:
                self.fail(f"first leader {self.first_leader}, best initial vote {best}")

    def step(self, kind: str, args: tuple[object, ...]) -> None:
        if kind == "deliver":
            frm, to, inc, note = args
            assert isinstance(frm, int) and isinstance(to, int) and isinstance(note, Notification)
            m = self.members[to]
            if m.alive and m.incarnation == inc and self.connected(frm, to):
                self.apply(m, m.fle.on_notification(self.now, frm, note))
        elif kind == "tick":
            sid, inc = args
            m = self.members[sid]  # type: ignore[index]
            if m.alive and m.incarnation == inc and m.next_tick == self.now:
                m.next_tick = None
                self.apply(m, m.fle.tick(self.now))
        elif kind == "check":
            sid, inc = args
            m = self.members[sid]  # type: ignore[index]
            if m.alive and m.incarnation == inc:
                self.check(m)
        elif kind == "start":
            self.look(self.members[args[0]])  # type: ignore[index]
        elif kind == "restart":
            m = self.members[args[0]]  # type: ignore[index]
            if m.alive:
                return
            m.alive = True
            m.fle = self.fle_cls(m.sid, self.view)  # a fresh process
            m.next_tick = None
            self.log(f"{m.sid} restarts")
            self.look(m)
        elif kind == "heal":
            self.cut -= set(args[0])  # type: ignore[arg-type]
            self.log("heal")
        elif kind == "fault":
            self.fault()
        elif kind == "calm":
            self.cut.clear()
            self.log("calm: faults end, partitions healed")
            for m in self.members.values():
                if not m.alive:
                    self.at(self.now, "restart", m.sid)


def main() -> None:
    seed = int(sys.argv[1])
    voters = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    observers = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    sim = Sim(seed, voters, observers, trace=[])
    try:
        print("settled on", sim.run())
    finally:
        assert sim.trace is not None
        print("\n".join(sim.trace[-200:]))


if __name__ == "__main__":
    main()
