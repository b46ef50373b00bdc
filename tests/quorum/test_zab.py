"""Zab leader and learner machines: scripted scenarios over an in-memory, instant network.

The harness wires one :class:`Leader` and some :class:`Learner` s by link id = sid, hands every
Ready through each side's :class:`~trizk.quorum.zab.applier.ReadyApplier` (the one the ensemble
shell and the simulation use: send, persist, apply, advance; a pipelined append is durable at
once unless its side is held) and records what each side persisted, sent and applied, so the
tests can check packet sequences byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from trizk.jute.records import QuorumPacket
from trizk.quorum.zab.applier import ReadyApplier
from trizk.quorum.zab.leader import Leader, sync_follower
from trizk.quorum.zab.learner import Learner
from trizk.quorum.zab.zab import Entry, LearnerType, Quorum, Ready, ServerState, SyncMode, Timing
from trizk.quorum.zab.zabwire import PacketType as P
from trizk.quorum.zab.zabwire import (
    SnapshotPayload,
    encode_ackepoch_data,
    encode_learner_info,
    make_zxid,
    packet,
)

TIMING = Timing(tick_ms=100, init_limit=10, sync_limit=5)
CONFIG = b"server.1=127.0.0.1:2888:3888:participant\nversion=0"


@dataclass
class Side:
    accepted: list[int] = field(default_factory=list)
    current: list[int] = field(default_factory=list)
    entries: list[int] = field(default_factory=list)
    applied: list[int] = field(default_factory=list)
    sent: list[QuorumPacket] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    serving: list[int] = field(default_factory=list)
    truncs: list[int] = field(default_factory=list)
    snaps: list[int] = field(default_factory=list)
    ready: list[Ready] = field(default_factory=list)


class Net:
    def __init__(
        self,
        voters: int = 3,
        observers: int = 0,
        *,
        leader_state: tuple[int, int, int] = (0, 0, 0),
        learner_state: dict[int, tuple[int, int, int]] | None = None,
        committed_log: list[Entry] | None = None,
        hold: set[int] | None = None,
    ) -> None:
        self.now = 0
        sids = list(range(1, voters + observers + 1))
        self.quorum = Quorum.majority_of(sids[:voters], CONFIG)
        acc, cur, last = leader_state
        self.leader = Leader(
            sid=1,
            quorum=self.quorum,
            timing=TIMING,
            accepted_epoch=acc,
            current_epoch=cur,
            last_zxid=last,
            now_ms=0,
            committed_log=committed_log or [],
        )
        self.learners: dict[int, Learner] = {}
        for s in sids[1:]:
            acc, cur, last = (learner_state or {}).get(s, (0, 0, 0))
            self.learners[s] = Learner(
                sid=s,
                leader=1,
                learner_type=LearnerType.PARTICIPANT if s <= voters else LearnerType.OBSERVER,
                timing=TIMING,
                accepted_epoch=acc,
                current_epoch=cur,
                last_logged_zxid=last,
                now_ms=0,
            )
        self.sides = {s: Side() for s in sids}
        #: each side's Ready applier, and how many appends it made (all durable unless held)
        self.appliers = {s: ReadyApplier() for s in sids}
        self.appliers[1].start(self.leader)
        for s, lr in self.learners.items():
            self.appliers[s].start(lr)
        self.appended = dict.fromkeys(sids, 0)
        #: sids whose Readies are taken but not advanced (fsync pending)
        self.hold = hold or set()
        #: by sid, called after the learner advanced past a Ready (a test's interference: the
        #: machines may be compiled, whose methods cannot be swapped on an instance)
        self.after_advance: dict[int, Callable[[Ready], None]] = {}

    def connect(self, *sids: int) -> None:
        for s in sids or tuple(self.learners):
            self.leader.connected(s)
            self.learners[s].connected(self.now)

    def _record(self, sid: int, rd: Ready) -> None:
        side = self.sides[sid]
        side.ready.append(rd)
        if rd.accepted_epoch is not None:
            side.accepted.append(rd.accepted_epoch)
        if rd.current_epoch is not None:
            side.current.append(rd.current_epoch)
        if rd.truncate_to is not None:
            side.truncs.append(rd.truncate_to)
        if rd.snapshot_in is not None:
            side.snaps.append(rd.snapshot_in.zxid)
        side.entries += [e.zxid for e in rd.entries]
        side.sent += [m.packet for m in rd.messages]
        if rd.role is not None:
            side.roles.append(rd.role.reason)
        if rd.serving is not None:
            side.serving.append(rd.serving)

    def _to_learners(self, rd: Ready) -> None:
        for m in rd.messages:
            lr = self.learners.get(m.link)
            if lr is None:
                continue
            lr.step(m.packet, self.now)
            if m.packet.type == P.SNAP:
                lr.step(SnapshotPayload(b"body"), self.now)

    def _to_leader(self, sid: int, rd: Ready) -> None:
        for m in rd.messages:
            self.leader.step(sid, m.packet, self.now)

    def _drain(self, sid: int, send: Callable[[Ready], None]) -> bool:
        """One side's Readies through its applier; the disk is instant (each step and append
        durable at once) except that a held side's appends stay undurable until released."""
        applier, busy = self.appliers[sid], False
        while (plan := applier.take()) is not None:
            busy = True
            rd = plan.ready
            self._record(sid, rd)
            send(rd)
            if plan.barrier:
                assert applier.appends_in_flight == 0, f"a barrier while {sid} holds appends"
                applier.persisted()
            elif plan.append:
                self.appended[sid] += 1
                applier.persisted(self.appended[sid])
            else:
                applier.persisted()
            if sid not in self.hold:
                applier.synced(self.appended[sid])
            self.sides[sid].applied += [e.zxid for e in applier.committed()]
            applier.finish()
            if sid in self.after_advance:
                self.after_advance[sid](rd)
        return busy

    def pump(self, rounds: int = 200) -> None:
        for _ in range(rounds):
            busy = self._drain(1, self._to_learners)
            for s in self.learners:
                busy = self._drain(s, lambda rd, s=s: self._to_leader(s, rd)) or busy
            if not busy:
                return
        raise AssertionError("did not quiesce")

    def release(self, sid: int) -> None:
        self.hold.discard(sid)
        self.appliers[sid].synced(self.appended[sid])
        self.pump()

    def tick(self, ms: int) -> None:
        self.now += ms
        self.leader.tick(self.now)
        for lr in self.learners.values():
            lr.tick(self.now)
        self.pump()


def kinds(packets: list[QuorumPacket]) -> list[str]:
    return [P(p.type).name for p in packets]


def established(voters: int = 3, observers: int = 0) -> Net:
    net = Net(voters, observers)
    net.connect()
    net.pump()
    assert net.leader.established
    return net


def test_fresh_ensemble_handshake_bytes_and_order() -> None:
    net = established(3, 1)
    e1 = make_zxid(1, 0)
    lead = net.sides[1]
    assert lead.accepted == [1] and lead.current == [1] and lead.serving == [e1]
    f = net.sides[2]
    assert f.accepted == [1] and f.current == [1]
    # follower: FOLLOWERINFO, ACKEPOCH, NEWLEADER-ACK, UPTODATE-ACK
    assert kinds(f.sent) == ["FOLLOWERINFO", "ACKEPOCH", "ACK", "ACK"]
    fi = f.sent[0]
    assert fi.encode() == (
        struct.pack(">iqi", 11, 0, 20) + struct.pack(">qiq", 2, 0x10000, 0) + b"\xff\xff\xff\xff"
    )
    assert f.sent[1] == QuorumPacket(int(P.ACKEPOCH), 0, struct.pack(">i", 0), None)
    assert f.sent[2] == QuorumPacket(int(P.ACK), e1, None, None)
    assert f.sent[3] == QuorumPacket(int(P.ACK), e1, None, None)
    assert kinds(net.sides[4].sent)[0] == "OBSERVERINFO"
    to2 = [m.packet for rd in lead.ready for m in rd.messages if m.link == 2]
    assert kinds(to2) == ["LEADERINFO", "DIFF", "NEWLEADER", "UPTODATE"]
    assert to2[0] == QuorumPacket(int(P.LEADERINFO), e1, struct.pack(">i", 0x10000), None)
    assert to2[1] == QuorumPacket(int(P.DIFF), 0, None, None)
    assert to2[2] == QuorumPacket(int(P.NEWLEADER), e1, CONFIG, None)
    assert to2[3] == QuorumPacket(int(P.UPTODATE), -1, None, None)
    for s in (2, 3, 4):
        assert net.learners[s].sync_mode is SyncMode.DIFF
        assert net.sides[s].serving == [e1]


def test_broadcast_proposal_ack_commit_inform() -> None:
    net = established(3, 1)
    z = make_zxid(1, 1)
    assert net.leader.propose(z, b"txn1")
    assert net.leader.propose(z + 1, b"txn2")
    net.pump()
    assert net.sides[1].applied == [z, z + 1]
    for s in (2, 3):
        assert net.sides[s].entries == [z, z + 1]
        assert net.sides[s].applied == [z, z + 1]
        assert kinds(net.sides[s].sent)[-2:] == ["ACK", "ACK"]
    obs = [m.packet for rd in net.sides[1].ready for m in rd.messages if m.link == 4]
    assert kinds(obs)[-2:] == ["INFORM", "INFORM"]
    assert obs[-2].data == b"txn1"
    assert net.sides[4].applied == [z, z + 1]
    assert kinds(net.sides[4].sent) == ["OBSERVERINFO", "ACKEPOCH", "ACK", "ACK"]


def test_leader_samples_acks_of_outstanding_proposals() -> None:
    # Leader.processAck: ACK_LATENCY for zxids divisible by ackLoggingFrequency, while the
    # proposal is outstanding (the ACK after its commit is not sampled)
    net = established(3)
    net.leader.ack_logging_frequency = 2
    z = make_zxid(1, 1)  # odd
    assert net.leader.propose(z, b"txn1")
    assert net.leader.propose(z + 1, b"txn2")
    net.pump()
    sampled = [a for rd in net.sides[1].ready for a in rd.acks]
    assert [data for _, data in sampled] == [b"txn2", b"txn2"]
    assert sampled[0][0] == 1 and sampled[1][0] in (2, 3)  # its own, then a quorum's worth


def test_learner_acks_only_after_its_log_is_durable() -> None:
    net = established(3)
    net.hold = {2, 3}
    z = make_zxid(1, 1)
    net.leader.propose(z, b"x")
    net.pump()
    for s in (2, 3):
        assert net.sides[s].entries == [z]
        assert kinds(net.sides[s].sent)[-1] == "ACK"  # the UPTODATE ack, no proposal ack
        assert net.sides[s].sent[-1].zxid == make_zxid(1, 0)
    assert net.sides[1].applied == []  # leader's own ack is not a quorum
    net.release(2)
    assert net.sides[2].sent[-1] == QuorumPacket(int(P.ACK), z, None, None)
    assert net.sides[1].applied == [z]


def test_ackepoch_minus_one_when_epoch_already_accepted() -> None:
    # 2 reconnects to the leader of epoch 1 whose epoch it already accepted
    net = Net(3, learner_state={2: (1, 0, 0)})
    net.connect(3)
    net.pump()
    assert net.leader.established and net.leader.epoch == 1
    net.connect(2)
    net.pump()
    f = net.sides[2]
    assert f.accepted == []  # nothing to persist
    assert f.sent[1] == QuorumPacket(int(P.ACKEPOCH), 0, struct.pack(">i", -1), None)


def test_learner_rejects_leader_with_lower_epoch() -> None:
    net = Net(3, learner_state={2: (5, 5, make_zxid(5, 3)), 3: (5, 5, make_zxid(5, 3))})
    net.connect()
    net.pump()
    # leader proposes epoch max(accepted)+1 = 6: both learners accept it
    assert net.sides[1].accepted == [6]
    lr = Learner(
        sid=9,
        leader=1,
        learner_type=LearnerType.PARTICIPANT,
        timing=TIMING,
        accepted_epoch=7,
        current_epoch=7,
        last_logged_zxid=0,
        now_ms=0,
    )
    lr.connected(0)
    lr.ready()
    lr.step(QuorumPacket(int(P.LEADERINFO), make_zxid(6, 0), struct.pack(">i", 0x10000), None), 0)
    rd = lr.ready()
    assert rd.role is not None and rd.role.state is ServerState.LOOKING
    assert "less than accepted epoch" in rd.role.reason


def test_leader_drops_learner_ahead_of_it() -> None:
    # learner 3 has a more recent history (currentEpoch 2) than the leader (currentEpoch 1)
    net = Net(3, leader_state=(1, 1, make_zxid(1, 4)), learner_state={3: (2, 2, make_zxid(2, 1))})
    net.connect(3)
    net.pump()
    assert not net.leader.established
    net.connect(2)
    net.pump()
    closes = [c for rd in net.sides[1].ready for c in rd.close]
    assert closes and closes[0][0] == 3 and "ahead of the leader" in closes[0][1]
    assert net.leader.established  # with 2, a quorum


def test_trunc_and_diff_and_snap_paths() -> None:
    log = [Entry(make_zxid(1, i), b"t%d" % i) for i in range(1, 6)]
    net = Net(
        4,
        leader_state=(1, 1, make_zxid(1, 5)),
        committed_log=log,
        learner_state={
            2: (1, 1, make_zxid(1, 3)),  # behind: DIFF 4,5
            3: (1, 1, make_zxid(1, 7)),  # ahead in the same epoch: TRUNC(1,5)
            4: (0, 0, 0),  # before the committed log: SNAP
        },
    )
    net.connect(2, 4)
    net.pump()
    # 3 is more recent than the leader: during discovery it would be dropped
    # (waitForEpochAck); joining an established leader it is truncated instead
    net.connect(3)
    net.pump()
    assert net.leader.established
    assert net.learners[2].sync_mode is SyncMode.DIFF
    assert net.sides[2].entries == [make_zxid(1, 4), make_zxid(1, 5)]
    assert net.sides[2].applied == [make_zxid(1, 4), make_zxid(1, 5)]
    assert net.learners[3].sync_mode is SyncMode.TRUNC
    assert net.sides[3].truncs == [make_zxid(1, 5)]
    assert net.learners[4].sync_mode is SyncMode.SNAP
    assert net.sides[4].snaps == [make_zxid(1, 5)]
    # NEWLEADER after a SNAP or TRUNC asks for a snapshot (Learner: snapshotNeeded)
    assert any(rd.take_snapshot for rd in net.sides[4].ready)
    assert any(rd.take_snapshot for rd in net.sides[3].ready)
    assert not any(rd.take_snapshot for rd in net.sides[2].ready)
    # currentEpoch is persisted in the same Ready as the logged diff, before the ACK
    rd = next(rd for rd in net.sides[2].ready if rd.current_epoch is not None)
    assert [e.zxid for e in rd.entries] == [make_zxid(1, 4), make_zxid(1, 5)]
    assert not any(m.packet.type == P.ACK for m in rd.messages)


def test_first_packet_after_newleader_must_be_ack() -> None:
    net = Net(3)
    net.leader.connected(2)
    net.learners[2].connected(0)
    net.leader.connected(3)
    net.learners[3].connected(0)
    # let 3 finish normally, but have 2 answer NEWLEADER with a PING

    def answer_with_ping(rd: Ready) -> None:
        if rd.current_epoch is not None:
            net.learners[2]._rd.messages.clear()
            net.leader.step(2, QuorumPacket(int(P.PING), 0, b"", None), 0)

    net.after_advance[2] = answer_with_ping
    net.pump()
    closes = [c for rd in net.sides[1].ready for c in rd.close]
    assert closes[0][0] == 2 and "supposed to be an ACK" in closes[0][1]


def test_commit_must_match_pending_head() -> None:
    net = established(3)
    lr = net.learners[2]
    lr.step(QuorumPacket(int(P.PROPOSAL), make_zxid(1, 1), b"a", None), 0)
    lr.step(QuorumPacket(int(P.COMMIT), make_zxid(1, 2), None, None), 0)
    rd = lr.ready()
    assert rd.role is not None and "next pending txn 0x100000001" in rd.role.reason


def test_ping_reply_carries_touches_and_is_never_null() -> None:
    net = established(3)
    lr = net.learners[2]
    auth = None
    lr.step(QuorumPacket(int(P.PING), 7, None, auth), 0)
    assert lr.ready().messages[0].packet == QuorumPacket(int(P.PING), 7, b"", None)
    lr.touch(0x1234, 3000)
    lr.touch(0x1234, 4000)
    lr.touch(5, 6000)
    lr.step(QuorumPacket(int(P.PING), 8, None, None), 0)
    data = lr.ready().messages[0].packet.data
    assert data == struct.pack(">qiqi", 0x1234, 4000, 5, 6000)
    net.leader.step(2, QuorumPacket(int(P.PING), 8, data, None), 0)
    assert net.leader.ready().touches == [(0x1234, 4000), (5, 6000)]


def test_leader_pings_every_half_tick_and_steps_down_without_quorum() -> None:
    net = established(3)
    n = len(net.sides[1].ready)
    net.tick(50)
    pings = [m for rd in net.sides[1].ready[n:] for m in rd.messages if m.packet.type == P.PING]
    assert sorted(m.link for m in pings) == [2, 3]
    assert pings[0].packet == QuorumPacket(int(P.PING), make_zxid(1, 0), None, None)
    # the followers answered (pump); now silence them
    net.learners.clear()
    for _ in range(40):
        net.now += 50
        net.leader.tick(net.now)
        if net.leader.done:
            break
    rd = net.leader.ready()
    assert rd.role is not None and "Not sufficient followers synced" in rd.role.reason
    # deadline = tick + syncLimit after the last packet, checked each whole tick
    assert TIMING.sync_ms <= net.now <= TIMING.sync_ms + 3 * TIMING.tick_ms


def test_learner_read_timeout() -> None:
    """syncLimit ticks of the learner's own ticker without a packet end the wait for the
    leader: between syncLimit and syncLimit + 1/2 ticks of time after its last packet."""
    net = established(3)
    lr = net.learners[2]
    half = TIMING.tick_ms // 2
    now = 0
    while not lr.done:
        now += half
        lr.tick(now)
    assert TIMING.sync_ms <= now <= TIMING.sync_ms + half
    assert "read timeout" in (lr.ready().role or pytest.fail()).reason


def test_learner_read_timeout_counts_from_the_last_bytes() -> None:
    """Bytes that are not yet a whole packet (a SNAP payload over many reads) keep the
    leader heard, as the socket's SO_TIMEOUT does; silence after them still ends the wait."""
    net = established(3)
    lr = net.learners[2]
    half = TIMING.tick_ms // 2
    now = 0
    for _ in range(6 * TIMING.sync_limit):
        now += half
        lr.tick(now)
        lr.bytes_arrived()
    assert not lr.done
    last = now
    while not lr.done:
        now += half
        lr.tick(now)
    assert TIMING.sync_ms <= now - last <= TIMING.sync_ms + half
    assert "read timeout" in (lr.ready().role or pytest.fail()).reason


def test_a_paused_learner_reads_what_queued_up_before_judging_its_leader() -> None:
    """ZooKeeper's learner reads with SO_TIMEOUT: after a SIGSTOP/SIGCONT (or a jump of the
    clock) the read returns at once with the PINGs queued meanwhile. A gap between two ticks
    is one pass, so the queued packets reach ``step`` before the learner can give up."""
    net = established(3)
    lr = net.learners[2]
    net.now += 16_000  # a 16 s pause of the whole ensemble
    lr.tick(net.now)  # the learner's ticker wakes first
    net.leader.tick(net.now)
    assert not lr.done and not net.leader.done
    net.pump()  # the queued (and the fresh) PINGs are read
    for _ in range(4 * TIMING.sync_limit):
        net.tick(TIMING.tick_ms // 2)
    assert not lr.done and not net.leader.done
    # a learner that really hears nothing after its pause still gives up, syncLimit ticks on
    net.now += 16_000
    passes = 0
    while not lr.done:
        lr.tick(net.now)
        net.now += TIMING.tick_ms // 2
        passes += 1
    assert passes == 2 * TIMING.sync_limit + 1


def test_a_paused_leader_keeps_learners_that_answer_and_leaves_without_them() -> None:
    """``Leader.lead`` runs one pass per wait: after a pause (or a clock step) the tick counter
    moves by one, not by the gap, so learners whose PINGs and ACKs queued up are still synced
    when they are read; learners that stay silent cost the leader its quorum after syncLimit
    passes, as ZooKeeper's ``Not sufficient followers synced``."""
    net = established(3)
    for _ in range(4):
        net.tick(TIMING.tick_ms // 2)
    ticks = net.leader.tick_count
    net.now += 16_000
    net.leader.tick(net.now)
    assert net.leader.tick_count <= ticks + 1 and not net.leader.done
    net.pump()
    for _ in range(4 * TIMING.sync_limit):
        net.tick(TIMING.tick_ms // 2)
    assert not net.leader.done and all(not lr.done for lr in net.learners.values())
    # now the learners are gone for good (their links still open): the leader steps down
    net.learners.clear()
    net.now += 16_000
    passes = 0
    while not net.leader.done:
        net.leader.tick(net.now)
        net.now += TIMING.tick_ms // 2
        passes += 1
    assert 2 * TIMING.sync_limit <= passes <= 2 * TIMING.sync_limit + 3
    rd = net.leader.ready()
    assert rd.role is not None and "Not sufficient followers synced" in rd.role.reason


def test_leader_gives_up_discovery_after_init_limit() -> None:
    net = Net(3)
    net.leader.tick(TIMING.init_ms - 1)
    assert not net.leader.done
    net.leader.tick(TIMING.init_ms)
    rd = net.leader.ready()
    assert rd.role is not None and "waiting for epoch from quorum" in rd.role.reason


def test_rollover_steps_down() -> None:
    net = established(3)
    assert net.leader.propose(make_zxid(1, 0xFFFFFFFE), b"last")
    assert not net.leader.propose(make_zxid(1, 0xFFFFFFFF), b"over")
    rd = net.leader.ready()
    assert rd.role is not None and "rolled over" in rd.role.reason


def test_sync_answered_after_last_proposed_commits() -> None:
    net = established(3)
    net.hold = {2, 3}
    z = make_zxid(1, 1)
    net.leader.propose(z, b"x")
    net.pump()
    net.leader.process_sync(2)
    net.pump()
    assert not any(
        p.type == P.SYNC for rd in net.sides[1].ready for p in [m.packet for m in rd.messages]
    )
    net.release(3)
    to2 = [m.packet for rd in net.sides[1].ready for m in rd.messages if m.link == 2]
    assert kinds(to2)[-2:] == ["COMMIT", "SYNC"]
    assert to2[-1] == QuorumPacket(int(P.SYNC), 0, None, None)
    assert any(rd.synced == 1 for rd in net.sides[2].ready)
    # nothing outstanding: answered at once
    net.leader.process_sync(3)
    assert net.leader.ready().messages[0].packet.type == P.SYNC


def test_revalidate_round_trip_and_requests() -> None:
    net = established(3)
    lr = net.learners[2]
    assert lr.revalidate(0x77, 5000)
    assert lr.forward_request(0x77, 3, 1, b"body")
    net.pump()
    rd = net.sides[1].ready[-1]
    assert rd.revalidate == [(2, 0x77, 5000)]
    assert rd.requests[0][1].data == struct.pack(">qii", 0x77, 3, 1) + b"body"
    net.leader.revalidated(2, 0x77, True)
    net.pump()
    assert any(r.revalidated == [(0x77, True)] for r in net.sides[2].ready)


# --------------------------------------------------------------------------------------------
# The sync choice, ported from ZooKeeper's LearnerHandlerTest (release-3.8.4).
# --------------------------------------------------------------------------------------------


def E(z: int) -> Entry:
    return Entry(z, b"")


def z(epoch: int, counter: int) -> int:
    return make_zxid(epoch, counter)


def mock_txnlog(entries: list[int]):  # type: ignore[no-untyped-def]
    log = [E(x) for x in entries]
    return lambda peer: log if log and peer >= log[0].zxid else []


def plan(peer, last, committed, txnlog=None):  # type: ignore[no-untyped-def]
    need_snap, current, out = sync_follower(peer, last, [E(x) for x in committed], txnlog)
    props = [p.zxid for p in out if p.type == P.PROPOSAL]
    op = (P(out[0].type).name, out[0].zxid) if out else None
    return need_snap, op, props, current, len(out)


def test_sync_empty_committed_log() -> None:
    assert plan(3, 1, []) == (False, ("TRUNC", 1), [], 1, 1)
    assert plan(1, 1, []) == (False, ("DIFF", 1), [], 1, 1)
    assert plan(0, 1, [])[0] is True  # txn log sync disabled -> SNAP


def test_sync_committed_log() -> None:
    c = [2, 3, 5]
    assert plan(4, 6, c) == (False, ("TRUNC", 3), [5], 5, 3)
    assert plan(2, 6, c) == (False, ("DIFF", 5), [3, 5], 5, 5)
    assert plan(1, 6, c)[0] is True


def test_sync_txn_log() -> None:
    t = mock_txnlog([2, 3, 5, 6, 7, 8, 9])
    c = [6, 7, 8]
    assert plan(4, 9, c, t) == (False, ("TRUNC", 3), [5, 6, 7, 8], 8, 9)
    assert plan(3, 9, c, t) == (False, ("DIFF", 8), [5, 6, 7, 8], 8, 9)
    assert plan(4, 7, [], lambda peer: [])[0] is True  # TxnLogProposalIteratorClosure


def test_sync_txn_log_only() -> None:
    t = mock_txnlog([2, 3, 5, 6, 7, 8])
    assert plan(4, 7, [], t) == (False, ("TRUNC", 3), [5, 6, 7], 7, 7)
    assert plan(2, 7, [], t) == (False, ("DIFF", 7), [3, 5, 6, 7], 7, 9)
    assert plan(1, 7, [], t)[0] is True


def test_sync_txn_log_with_negative_zxid() -> None:
    t = mock_txnlog([z(0xF, i) for i in (2, 3, 5, 6, 7, 8, 9)])
    c = [z(0xF, i) for i in (6, 7, 8)]
    want = [z(0xF, i) for i in (5, 6, 7, 8)]
    assert plan(z(0xF, 4), z(0xF, 9), c, t) == (False, ("TRUNC", z(0xF, 3)), want, c[-1], 9)
    assert plan(z(0xF, 3), z(0xF, 9), c, t) == (False, ("DIFF", c[-1]), want, c[-1], 9)


def test_sync_new_epoch_zxid() -> None:
    t = mock_txnlog([z(0, 1), z(1, 1), z(1, 2)])
    c = [z(1, 1), z(1, 2)]
    assert plan(z(0, 0), z(2, 0), c, t)[0] is True
    assert plan(z(1, 0), z(2, 0), c, t) == (False, ("DIFF", z(1, 2)), c, z(1, 2), 5)
    assert plan(z(2, 0), z(2, 0), c, t) == (False, ("DIFF", z(2, 0)), [], z(2, 0), 1)


def test_sync_duplicated_txn() -> None:
    t = mock_txnlog([z(0, 1), z(1, 1), z(1, 2), z(1, 1), z(1, 2)])
    c = [z(1, 1), z(1, 2), z(1, 1), z(1, 2)]
    assert plan(z(1, 0), z(2, 0), c, t) == (
        False,
        ("DIFF", z(1, 2)),
        [z(1, 1), z(1, 2)],
        z(1, 2),
        5,
    )


def test_sync_cross_epoch_trunc_is_snap() -> None:
    t = mock_txnlog([z(1, 1), z(2, 1), z(2, 2), z(4, 1)])
    assert plan(z(3, 1), z(6, 0), [], t) == (True, None, [], z(3, 1), 0)


def test_sync_txn_log_gap_is_snap() -> None:
    assert plan(3, 8, [7, 8], mock_txnlog([2, 3, 4]))[0] is True


def test_trunc_below_own_snapshot_wipes_and_rejoins() -> None:
    lr = Learner(
        sid=2,
        leader=1,
        learner_type=LearnerType.OBSERVER,
        timing=TIMING,
        accepted_epoch=3,
        current_epoch=3,
        last_logged_zxid=make_zxid(2, 14),
        now_ms=0,
        snapshot_zxid=make_zxid(2, 14),
    )
    lr.connected(0)
    lr.ready()
    lr.step(QuorumPacket(int(P.LEADERINFO), make_zxid(4, 0), struct.pack(">i", 0x10000), None), 0)
    lr.advance(lr.ready())
    lr.ready()
    lr.step(QuorumPacket(int(P.TRUNC), make_zxid(2, 11), None, None), 0)
    rd = lr.ready()
    assert rd.wipe and rd.truncate_to is None
    assert rd.role is not None and "wiped" in rd.role.reason
    # a TRUNC at or above the snapshot is an ordinary truncation
    lr = Learner(
        sid=2,
        leader=1,
        learner_type=LearnerType.PARTICIPANT,
        timing=TIMING,
        accepted_epoch=4,
        current_epoch=3,
        last_logged_zxid=make_zxid(2, 14),
        now_ms=0,
        snapshot_zxid=make_zxid(2, 3),
    )
    lr.connected(0)
    lr.step(QuorumPacket(int(P.LEADERINFO), make_zxid(4, 0), struct.pack(">i", 0x10000), None), 0)
    lr.step(QuorumPacket(int(P.TRUNC), make_zxid(2, 11), None, None), 0)
    rd = lr.ready()
    assert not rd.wipe and rd.truncate_to == make_zxid(2, 11) and rd.role is None


def test_resynced_learner_ack_counts_only_for_its_new_copy() -> None:
    """A learner that ACKed a proposal and then re-syncs (TRUNC to the leader's last commit,
    the proposal sent again) no longer holds that ACK's copy: the commit waits for its new ACK
    (found by the simulation with pipelined appends: seed 210 of "3-power")."""
    net = established(5)
    net.hold = {3, 4, 5}
    z = make_zxid(1, 1)
    assert net.leader.propose(z, b"x")
    net.pump()
    assert net.sides[2].sent[-1] == QuorumPacket(int(P.ACK), z, None, None)
    assert net.sides[1].applied == []  # {1, 2}: not a quorum of 5
    # 2's link breaks; it reconnects on link 7 (nothing routed back to it) with z logged
    net.leader.link_closed(2)
    del net.learners[2]
    net.leader.connected(7)
    net.leader.step(7, packet(P.FOLLOWERINFO, make_zxid(1, 0), encode_learner_info(2, 0)), 0)
    net.leader.step(7, packet(P.ACKEPOCH, z, encode_ackepoch_data(1)), 0)
    net.pump()
    to7 = [m.packet for rd in net.sides[1].ready for m in rd.messages if m.link == 7]
    assert kinds(to7)[-4:] == ["LEADERINFO", "TRUNC", "PROPOSAL", "NEWLEADER"]
    assert to7[-3].zxid == make_zxid(1, 0) and to7[-2].zxid == z
    net.release(3)
    assert net.sides[1].applied == []  # {1, 3}, and 2's old ACK no longer counts
    net.leader.step(7, packet(P.ACK, make_zxid(1, 0)), 0)  # NEWLEADER
    net.leader.step(7, packet(P.ACK, z), 0)  # its new copy is durable
    net.pump()
    assert net.sides[1].applied == [z]
