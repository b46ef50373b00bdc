"""Golden bytes of a real ZooKeeper 3.8.0 leader, captured by
``tests/quorum/capture_zab_golden.py``.

``diff.*``: a learner (sid 4, not a voter) joining epoch 1 with ACKEPOCH zxid 0x100000002
-> DIFF; ``snap.*``: the same with zxid 0 -> SNAP. ``*.leader.bin`` is everything the leader
sent, ``*.learner.bin`` everything we answered (and the leader accepted).
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from trizk.jute.records import FileHeader, QuorumPacket
from trizk.quorum.zab.leader import Leader
from trizk.quorum.zab.learner import Learner
from trizk.quorum.zab.zab import Entry, LearnerType, Quorum, Timing
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    SnapshotPayload,
    StreamEvent,
    make_zxid,
    packet_name,
)
from trizk.storage.formats import snapshot, txnlog

DATA = Path(__file__).parents[1] / "data" / "zab"
META = json.loads((DATA / "meta.json").read_text())
P = PacketType
TIMING = Timing(tick_ms=200, init_limit=20, sync_limit=10)


def events(name: str, chunk: int | None = None) -> list[StreamEvent]:
    raw = (DATA / name).read_bytes()
    dec = QuorumStreamDecoder()
    out: list[StreamEvent] = []
    step = chunk or len(raw)
    for i in range(0, len(raw), step):
        dec.feed(raw[i : i + step])
        while (ev := dec.next_event()) is not None:
            out.append(ev)
    assert dec.buffered == 0
    return out


def names(evs: list[StreamEvent]) -> list[str]:
    return ["SNAPSHOT" if isinstance(e, SnapshotPayload) else packet_name(e.type) for e in evs]


def test_streams_decode_in_any_chunking() -> None:
    for name in ("diff.leader.bin", "snap.leader.bin", "diff.learner.bin", "snap.learner.bin"):
        assert events(name, 1) == events(name) == events(name, 7)
    assert names(events("diff.leader.bin")) == [
        "LEADERINFO", "DIFF",
        "PROPOSAL", "COMMIT", "PROPOSAL", "COMMIT", "PROPOSAL", "COMMIT",
        "NEWLEADER", "UPTODATE", "PROPOSAL", "COMMIT", "PING", "PING",
    ]  # fmt: skip
    assert names(events("snap.leader.bin")) == [
        "LEADERINFO", "SNAP", "SNAPSHOT", "NEWLEADER", "UPTODATE", "PING", "PING",
    ]  # fmt: skip


def test_proposals_are_txn_log_entries() -> None:
    for ev in events("diff.leader.bin"):
        if isinstance(ev, QuorumPacket) and ev.type == P.PROPOSAL:
            assert ev.data is not None
            entry = txnlog.decode_payload(ev.data)
            assert entry.zxid == ev.zxid
            assert txnlog.encode_payload(entry) == ev.data


def test_snap_payload_is_a_snapshot_body() -> None:
    body = next(e for e in events("snap.leader.bin") if isinstance(e, SnapshotPayload)).body
    head = FileHeader(snapshot.SNAP_MAGIC, snapshot.SNAP_VERSION, snapshot.SNAP_DBID).encode()
    raw = head + body
    raw += struct.pack(">q", zlib.adler32(raw)) + struct.pack(">i", 1) + b"/"
    content = snapshot.parse(raw)
    paths = {n.path for n in content.nodes}
    assert {"", "/zookeeper", "/golden", "/golden/after"} <= paths
    assert len(content.sessions) == 1


def drive_learner(name: str, peer: int) -> tuple[Learner, bytes, list[Entry]]:
    """Feed the Java leader's stream to our learner; return what it would have sent."""
    lr = Learner(
        sid=4,
        leader=3,
        learner_type=LearnerType.PARTICIPANT,
        timing=TIMING,
        accepted_epoch=0,
        current_epoch=0,
        last_logged_zxid=peer,
        now_ms=0,
    )
    sent = bytearray()
    committed: list[Entry] = []

    def flush() -> None:
        while lr.has_ready():
            rd = lr.ready()
            sent.extend(b"".join(m.packet.encode() for m in rd.messages))
            committed.extend(rd.committed)
            lr.advance(rd)

    lr.connected(0)
    flush()
    for ev in events(name):
        lr.step(ev, 0)
        flush()
    return lr, bytes(sent), committed


def packets(raw: bytes) -> list[QuorumPacket]:
    dec = QuorumStreamDecoder()
    dec.feed(raw)
    out = []
    while (ev := dec.next_event()) is not None:
        assert isinstance(ev, QuorumPacket)
        out.append(ev)
    return out


def test_our_learner_follows_the_java_leader() -> None:
    """Our answers are those the Java leader accepted, plus what a Java follower adds.

    The capture client did not ACK the proposals logged at NEWLEADER and answered one PING;
    a Java follower ACKs every logged proposal (SendAckRequestProcessor) and every PING.
    """
    lr, sent, committed = drive_learner("diff.leader.bin", META["diff_peer_zxid"])
    assert not lr.done and lr.zab_state == "BROADCAST"
    ours = packets(sent)
    accepted = packets((DATA / "diff.learner.bin").read_bytes())
    e1 = make_zxid(1, 0)
    ack = [QuorumPacket(int(P.ACK), z, None, None) for z in (e1, *range(e1 + 3, e1 + 6))]
    ping = QuorumPacket(int(P.PING), e1 + 6, b"", None)
    assert ours == accepted[:2] + ack + accepted[3:5] + [ping, ping]
    assert [e.zxid for e in committed] == [e1 + i for i in (3, 4, 5, 6)]
    lr, sent, committed = drive_learner("snap.leader.bin", 0)
    assert not lr.done and lr.sync_mode == "SNAP"
    accepted = packets((DATA / "snap.learner.bin").read_bytes())
    assert packets(sent) == [*accepted, accepted[-1]]


def test_our_leader_sends_what_the_java_leader_sent() -> None:
    java = [e for e in events("diff.leader.bin") if isinstance(e, QuorumPacket)]
    config = java[8].data
    assert config is not None and config.endswith(b"\nversion=0")
    log = [Entry(make_zxid(1, 1), b"s"), Entry(make_zxid(1, 2), b"c")]
    log += [Entry(e.zxid, e.data or b"") for e in java[2:8:2]]
    # a one-voter view so that our leader establishes epoch 1 by itself
    ldr = Leader(
        sid=3,
        quorum=Quorum.majority_of([3], config),
        timing=TIMING,
        accepted_epoch=0,
        current_epoch=0,
        last_zxid=make_zxid(1, 5),
        now_ms=0,
        committed_log=log,
    )
    out: list[QuorumPacket] = []

    def flush() -> None:
        while ldr.has_ready():
            rd = ldr.ready()
            out.extend(m.packet for m in rd.messages)
            ldr.advance(rd)

    flush()
    assert ldr.established
    ldr.connected(4)
    learner = [e for e in events("diff.learner.bin") if isinstance(e, QuorumPacket)]
    for qp in learner[:4]:  # FOLLOWERINFO, ACKEPOCH, NEWLEADER-ACK, UPTODATE-ACK
        ldr.step(4, qp, 0)
        flush()
    assert b"".join(p.encode() for p in out) == b"".join(p.encode() for p in java[:10])


def test_our_observer_follows_the_java_leader() -> None:
    """OBSERVERINFO, in sync: empty DIFF, then the write arrives as INFORM (never PROPOSAL)."""
    assert names(events("observer.leader.bin")) == [
        "LEADERINFO", "DIFF", "NEWLEADER", "UPTODATE", "INFORM", "PING", "PING",
    ]  # fmt: skip
    peer = META["diff"]["late_zxid"]
    lr = Learner(
        sid=5,
        leader=3,
        learner_type=LearnerType.OBSERVER,
        timing=TIMING,
        accepted_epoch=0,
        current_epoch=0,
        last_logged_zxid=peer,
        now_ms=0,
    )
    sent: list[QuorumPacket] = []
    committed: list[Entry] = []

    def flush() -> None:
        while lr.has_ready():
            rd = lr.ready()
            sent.extend(m.packet for m in rd.messages)
            committed.extend(rd.committed)
            lr.advance(rd)

    lr.connected(0)
    flush()
    for ev in events("observer.leader.bin"):
        lr.step(ev, 0)
        flush()
    assert not lr.done and lr.zab_state == "BROADCAST"
    accepted = packets((DATA / "observer.learner.bin").read_bytes())
    assert sent == [*accepted, accepted[-1]]  # a Java observer answers both PINGs
    assert [e.zxid for e in committed] == [META["observer"]["inform_zxid"]]
    entry = txnlog.decode_payload(committed[0].data)
    assert entry.zxid == META["observer"]["inform_zxid"]
