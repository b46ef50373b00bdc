"""The one Ready applier (``quorum/zab/applier.py``): classification, the persistence steps in
the contract's order, pipelined appends advanced in append order when their sync returns,
barriers, and the committed-log / unapplied bookkeeping; with a recording machine and with
a real :class:`~trizk.quorum.zab.learner.Learner` in broadcast."""

from __future__ import annotations

import dataclasses
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.jute.records import QuorumPacket
from trizk.quorum.zab.applier import (
    AcceptedEpoch,
    CurrentEpoch,
    InstallSnapshot,
    LogEntries,
    ReadyApplier,
    TakeSnapshot,
    Truncate,
    Wipe,
    plan_of,
)
from trizk.quorum.zab.learner import Learner
from trizk.quorum.zab.zab import (
    Entry,
    LearnerType,
    Ready,
    RoleChange,
    ServerState,
    SnapshotIn,
    Timing,
)
from trizk.quorum.zab.zabwire import PacketType as P
from trizk.quorum.zab.zabwire import make_zxid

TIMING = Timing(tick_ms=100, init_limit=10, sync_limit=5)


class Recorder:
    """A Zab machine that hands out the Readies it is given and records every advance."""

    def __init__(self) -> None:
        self.queue: list[Ready] = []
        self.advanced: list[Ready] = []

    def has_ready(self) -> bool:
        return bool(self.queue)

    def ready(self) -> Ready:
        return self.queue.pop(0)

    def advance(self, rd: Ready) -> None:
        self.advanced.append(rd)


def E(counter: int) -> Entry:
    return Entry(make_zxid(1, counter), b"t%d" % counter)


def test_classification_and_step_order() -> None:
    # broadcast entries, or nothing to persist: pipelined
    assert not plan_of(Ready(entries=[E(1)])).barrier
    assert plan_of(Ready(entries=[E(1)])).append == [E(1)]
    assert not plan_of(Ready(committed=[E(1)])).barrier
    # anything else: a barrier whose steps follow the Ready contract's order
    snap = SnapshotIn(make_zxid(1, 3), b"body")
    rd = Ready(
        accepted_epoch=2,
        current_epoch=2,
        wipe=True,
        truncate_to=make_zxid(1, 2),
        snapshot_in=snap,
        take_snapshot=True,
        entries=[E(4)],
    )
    plan = plan_of(rd)
    assert plan.barrier and plan.append == []
    assert plan.steps == [
        AcceptedEpoch(2),
        CurrentEpoch(2),
        Wipe(),
        Truncate(make_zxid(1, 2)),
        InstallSnapshot(snap),
        TakeSnapshot(),
        LogEntries([E(4)]),
    ]
    assert plan_of(Ready(current_epoch=3)).steps == [CurrentEpoch(3)]


def test_without_entries_keeps_every_other_field() -> None:
    # Ready has a hand-written __init__ and copy (compiled builds): a field added to the class
    # and forgotten in either would be dropped between the applier and the machine; a field
    # missing here fails the test too. Values of each field's type (a compiled build checks).
    scalars: dict[str, object] = {
        "accepted_epoch": 5,
        "current_epoch": 6,
        "wipe": True,
        "truncate_to": 7,
        "snapshot_in": SnapshotIn(8, b"snap"),
        "take_snapshot": True,
        "role": RoleChange(ServerState.LOOKING, "why"),
        "serving": 9,
        "synced": 3,
        "last_seen_config": b"config",
    }
    values = {
        f.name: scalars[f.name] if f.name in scalars else [object()]
        for f in dataclasses.fields(Ready)
    }
    assert all(isinstance(getattr(Ready(), k), list) for k in values if k not in scalars)
    rd = Ready(**values)  # type: ignore[arg-type]
    assert all(getattr(rd, k) is v for k, v in values.items())
    out = rd.without_entries()
    assert out.entries == [] and rd.entries is values["entries"]
    assert all(getattr(out, k) is v for k, v in values.items() if k != "entries")


def test_one_plan_at_a_time_and_pipelined_appends_advance_in_order() -> None:
    m = Recorder()
    a = ReadyApplier()
    a.start(m)
    m.queue = [Ready(entries=[E(1)]), Ready(entries=[E(2)], committed=[E(1)]), Ready()]
    p1 = a.take()
    assert p1 is not None and a.take() is None  # not finished yet
    a.persisted(1)
    assert a.committed() == []
    a.finish()
    # the Ready was advanced without its undurable entries
    assert m.advanced[-1].entries == [] and p1.ready.entries == [E(1)]
    p2 = a.take()
    assert p2 is not None
    a.persisted(2)
    assert a.appends_in_flight == 2
    assert a.committed() == [E(1)]
    a.finish()
    assert list(a.committed_log) == [E(1)] and a.unapplied == {E(2).zxid: E(2).data}
    # the sync of append 1 returns: only its entries advance; then append 2
    a.synced(1)
    assert m.advanced[-1].entries == [E(1)]
    a.synced(2)
    assert m.advanced[-1].entries == [E(2)] and a.appends_in_flight == 0
    p3 = a.take()
    assert p3 is not None and not p3.barrier
    a.persisted()
    a.finish()
    assert m.advanced[-1] is p3.ready


def test_barrier_advances_whole_and_records_its_entries() -> None:
    m = Recorder()
    a = ReadyApplier()
    a.start(m)
    rd = Ready(current_epoch=1, entries=[E(1), E(2)], committed=[E(1)])
    m.queue = [rd]
    plan = a.take()
    assert plan is not None and plan.barrier
    with pytest.raises(AssertionError):
        a.committed()  # before persisted()
    a.persisted()
    assert a.committed() == [E(1)]
    a.finish()
    assert m.advanced == [rd]  # entries included: their ACKs follow NEWLEADER's
    assert a.unapplied == {E(2).zxid: E(2).data}


def test_fast_forward_reset_and_stop() -> None:
    a = ReadyApplier([E(1)], commit_log_count=3)
    a.unapplied = {E(4).zxid: E(4).data, E(2).zxid: E(2).data, E(3).zxid: E(3).data}
    assert a.fast_forward(E(2).zxid) == [E(3), E(4)]
    assert list(a.committed_log) == [E(1), E(3), E(4)] and a.unapplied == {}
    a.reset([E(9)])
    assert list(a.committed_log) == [E(9)]
    m = Recorder()
    a.start(m)
    m.queue = [Ready(entries=[E(10)])]
    assert a.take() is not None
    a.persisted(1)
    a.finish()
    a.stop()
    a.synced(1)  # the role ended: nothing more reaches its machine
    assert all(not rd.entries for rd in m.advanced)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=30), st.randoms())
def test_acks_leave_in_zxid_order_whatever_the_sync_points(
    batches: list[int], rnd: random.Random
) -> None:
    """A real follower in broadcast: PROPOSAL batches appended one after another, syncs
    returning at arbitrary points (never past what was appended): every proposal is ACKed
    exactly once, only after its append is durable, in zxid order."""
    lr = broadcasting_follower()
    a = ReadyApplier()
    a.start(lr)
    acks: list[int] = []
    appended = durable = 0
    durable_zxid = 0
    zxid_of: dict[int, int] = {}
    counter = 0
    for n in batches:
        for _ in range(n):
            counter += 1
            z = make_zxid(1, counter)
            lr.step(QuorumPacket(int(P.PROPOSAL), z, b"x", None), 0)
        plan = a.take()
        assert plan is not None and not plan.barrier
        appended += 1
        zxid_of[appended] = make_zxid(1, counter)
        a.persisted(appended)
        a.finish()
        if rnd.random() < 0.5:
            durable = rnd.randint(durable, appended)
            a.synced(durable)
            durable_zxid = zxid_of.get(durable, durable_zxid)
        acks += [m.packet.zxid for m in lr.ready().messages if m.packet.type == P.ACK]
        assert all(z <= durable_zxid for z in acks)
    a.synced(appended)
    acks += [m.packet.zxid for m in lr.ready().messages if m.packet.type == P.ACK]
    assert acks == [make_zxid(1, c) for c in range(1, counter + 1)]


def broadcasting_follower() -> Learner:
    """A follower synced by an empty DIFF to the leader of epoch 1, in broadcast."""
    lr = Learner(
        sid=2,
        leader=1,
        learner_type=LearnerType.PARTICIPANT,
        timing=TIMING,
        accepted_epoch=1,
        current_epoch=1,
        last_logged_zxid=make_zxid(1, 0),
        now_ms=0,
    )
    lr.connected(0)
    lr.step(QuorumPacket(int(P.LEADERINFO), make_zxid(1, 0), struct.pack(">i", 0x10000), None), 0)
    lr.step(QuorumPacket(int(P.DIFF), make_zxid(1, 0), None, None), 0)
    lr.step(QuorumPacket(int(P.NEWLEADER), make_zxid(1, 0), b"version=0", None), 0)
    lr.advance(lr.ready())
    lr.step(QuorumPacket(int(P.UPTODATE), -1, None, None), 0)
    lr.ready()
    return lr


def test_the_committed_log_keeps_commit_log_count_and_one_more() -> None:
    # ZKDatabase.addCommittedProposal drops the oldest only while it holds more than
    # commitLogCount, before adding: 501 txns by default
    a = ReadyApplier([E(z) for z in range(1, 601)], commit_log_count=500)
    assert len(a.committed_log) == 501 and a.committed_log[0] == E(100)
