"""Election port codecs: golden bytes captured from Apache ZooKeeper 3.8.0 members
(``python -m trizk.compat.capture.election tests/data/election``) and properties."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trizk.quorum.election.messages import (
    MAX_INITIAL_ADDR,
    PACKETMAXSIZE,
    PROTOCOL_VERSION_V1,
    PROTOCOL_VERSION_V2,
    ElectionWireError,
    FrameDecoder,
    InitialMessage,
    Notification,
    ServerState,
    decode_notification,
    encode_frame,
    encode_initial_message,
    parse_initial_message,
)

DATA = Path(__file__).parents[1] / "data" / "election"
CAPTURE = json.loads((DATA / "capture.json").read_text())

longs = st.integers(-(1 << 63), (1 << 63) - 1)
ints = st.integers(-(1 << 31), (1 << 31) - 1)


# --------------------------------------------------------------------------- golden


@pytest.mark.parametrize("sid", [2, 3, 4])
def test_golden_initial_message(sid: int) -> None:
    raw = (DATA / f"initial_{sid}.bin").read_bytes()
    election_port = CAPTURE["ports"][str(sid)][1]
    assert parse_initial_message(raw) == (
        InitialMessage(sid, (("127.0.0.1", election_port),), PROTOCOL_VERSION_V1),
        len(raw),
    )
    assert encode_initial_message(sid, "127.0.0.1", election_port) == raw
    # every proper prefix asks for more
    for i in range(len(raw)):
        assert parse_initial_message(raw[:i]) is None


@pytest.mark.parametrize("sid", [2, 3])
def test_golden_notifications(sid: int) -> None:
    raw = (DATA / f"frames_{sid}.bin").read_bytes()
    frames = FrameDecoder().feed(raw)
    assert b"".join(encode_frame(f) for f in frames) == raw
    notes = [decode_notification(f) for f in frames]
    assert len(notes) == CAPTURE["frames"][str(sid)]
    for f, n in zip(frames, notes, strict=True):
        assert n.version == 2
        assert n.config == CAPTURE["config"].encode()
        assert n.encode() == f  # our encoder gives Java's bytes
    # the first is the member's own LOOKING vote for itself in round 1
    assert (notes[0].state, notes[0].leader, notes[0].election_epoch) == (0, sid, 1)
    # the last answers our LOOKING probe with the decided state: 3 leads, 2 follows
    last = notes[-1]
    want = ServerState.LEADING if sid == 3 else ServerState.FOLLOWING
    assert (last.state, last.leader) == (want, 3)


def test_golden_observer_votes_min_then_adopts() -> None:
    raw = (DATA / "frames_4.bin").read_bytes()
    notes = [decode_notification(f) for f in FrameDecoder().feed(raw)]
    assert len(notes) == CAPTURE["frames"]["4"]
    low = -(1 << 63)
    first = notes[0]
    assert (first.state, first.leader, first.zxid, first.peer_epoch) == (0, low, low, low)
    assert first.election_epoch == 1 and first.encode() == FrameDecoder().feed(raw)[0]
    assert notes[-1].leader == 3  # adopted from the voters' answers


def test_golden_answer_to_a_non_voter() -> None:
    raw = (DATA / "nonvoter_9_from_2.bin").read_bytes()
    (frame,) = FrameDecoder().feed(raw)
    n = decode_notification(frame)
    # a decided voter answers any non-voter with its vote, its logical clock and its state
    assert (n.state, n.leader, n.election_epoch) == (ServerState.FOLLOWING, 3, 1)
    assert n.config == CAPTURE["config"].encode() and n.encode() == frame


# --------------------------------------------------------------------------- legacy forms


def test_legacy_forms() -> None:
    head = struct.pack(">iqqq", 1, 7, (5 << 32) | 9, 3)
    n28 = decode_notification(head)
    assert (n28.peer_epoch, n28.version, n28.config) == (5, 0, None)
    neg = decode_notification(struct.pack(">iqqq", 0, 1, -1, 1))
    assert neg.peer_epoch == -1  # arithmetic shift of zxid -1
    n40 = decode_notification(head + struct.pack(">qi", 4, 1))
    assert (n40.peer_epoch, n40.version, n40.config) == (4, 0, None)  # version word not read
    n41 = decode_notification(head + struct.pack(">qi", 4, 1) + b"x")
    assert (n41.version, n41.config) == (1, None)
    for bad in range(29, 40):
        with pytest.raises(ElectionWireError):
            decode_notification(bytes(bad))
    with pytest.raises(ElectionWireError):  # version 2 without a configLen
        decode_notification(head + struct.pack(">qi", 4, 2) + b"xy")
    with pytest.raises(ElectionWireError):  # configLen beyond the frame
        decode_notification(head + struct.pack(">qii", 4, 2, 5) + b"abcd")
    with pytest.raises(ElectionWireError):
        decode_notification(head + struct.pack(">qii", 4, 2, -1))
    trailing = decode_notification(head + struct.pack(">qii", 4, 2, 2) + b"abXYZ")
    assert trailing.config == b"ab"


def test_initial_message_forms() -> None:
    assert parse_initial_message(struct.pack(">q", 42) + b"rest") == (
        InitialMessage(42, (), None),
        8,
    )
    with pytest.raises(ElectionWireError):
        parse_initial_message(struct.pack(">q", -3))
    for n in (0, -1, MAX_INITIAL_ADDR + 1):
        with pytest.raises(ElectionWireError):
            parse_initial_message(struct.pack(">qqi", PROTOCOL_VERSION_V1, 1, n))
    v2 = b"127.0.0.1:5|[::1]:6|0.0.0.0:7"
    msg, _used = parse_initial_message(
        struct.pack(">qqi", PROTOCOL_VERSION_V2, 9, len(v2)) + v2
    ) or (None, 0)
    assert msg == InitialMessage(9, (("127.0.0.1", 5), ("::1", 6)), PROTOCOL_VERSION_V2)
    for bad in (b"host", b"h:1:2", b"h:x", b"[::1", b"h:70000"):
        with pytest.raises(ElectionWireError):
            parse_initial_message(struct.pack(">qqi", PROTOCOL_VERSION_V1, 1, len(bad)) + bad)
    assert encode_initial_message(1, "::1", 5).endswith(b"[::1]:5")


def test_frame_bounds() -> None:
    with pytest.raises(ElectionWireError):
        FrameDecoder().feed(struct.pack(">i", 0))
    with pytest.raises(ElectionWireError):
        FrameDecoder().feed(struct.pack(">i", PACKETMAXSIZE + 1))
    d = FrameDecoder()
    assert d.feed(struct.pack(">i", PACKETMAXSIZE)) == []
    assert d.buffered == 4


# --------------------------------------------------------------------------- properties

notes = st.builds(
    Notification,
    state=st.integers(0, 3),
    leader=longs,
    zxid=longs,
    election_epoch=longs,
    peer_epoch=longs,
    config=st.binary(max_size=300),
)


@given(notes)
def test_roundtrip(n: Notification) -> None:
    assert decode_notification(n.encode()) == n


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise(b: bytes) -> None:
    for fn in (decode_notification, parse_initial_message):
        try:
            fn(b)
        except ElectionWireError:
            pass
    try:
        FrameDecoder().feed(b)
    except ElectionWireError:
        pass


@given(st.lists(st.binary(min_size=1, max_size=60), max_size=8), st.binary(max_size=12))
def test_bytewise_feed_equals_one_shot(payloads: list[bytes], tail: bytes) -> None:
    stream = b"".join(encode_frame(p) for p in payloads) + tail

    def run(chunks: list[bytes]) -> tuple[list[bytes], str | None]:
        d = FrameDecoder()
        out: list[bytes] = []
        try:
            for c in chunks:
                out += d.feed(c)
        except ElectionWireError as e:
            return out + e.frames, type(e).__name__
        return out, None

    one = run([stream])
    assert run([stream[i : i + 1] for i in range(len(stream))]) == one
    assert one[0][: len(payloads)] == payloads


@given(st.integers(0, (1 << 63) - 1), st.sampled_from(["127.0.0.1", "::1", "zk-1.example"]),
       st.integers(0, 65535))  # fmt: skip
def test_initial_roundtrip(sid: int, host: str, port: int) -> None:
    raw = encode_initial_message(sid, host, port)
    assert parse_initial_message(raw + b"more") == (
        InitialMessage(sid, ((host, port),), PROTOCOL_VERSION_V1),
        len(raw),
    )
