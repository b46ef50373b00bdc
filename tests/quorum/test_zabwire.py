"""The quorum packet stream codec: chunking-independence, bounds, one error type."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.jute.records import Id, QuorumPacket
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    QuorumStreamError,
    SnapshotPayload,
    StreamEvent,
    counter_of,
    encode_ackepoch_data,
    encode_snapshot_payload,
    epoch_of,
    make_zxid,
    packet_name,
)
from trizk.storage.formats.snapshot import SnapshotContent, initial_content, serialize


def snapshot_body(content: SnapshotContent) -> bytes:
    """A SNAP payload body from a snapshot file's bytes: no FileHeader, no seal, no digest."""
    content.digest = None
    raw = serialize(content)
    return raw[16 : len(raw) - 8 - 5]


def decode_all(data: bytes, chunk: int | None = None, **kw: int) -> list[StreamEvent]:
    dec = QuorumStreamDecoder(**kw)
    out: list[StreamEvent] = []
    step = chunk or max(len(data), 1)
    for i in range(0, len(data), step):
        dec.feed(data[i : i + step])
        while (ev := dec.next_event()) is not None:
            out.append(ev)
    assert dec.buffered == 0 or out is not None
    return out


ids = st.builds(Id, st.text(max_size=8), st.text(max_size=8))
packets = st.builds(
    QuorumPacket,
    st.sampled_from([t for t in PacketType if t != PacketType.SNAP]).map(int),
    st.integers(-(2**63), 2**63 - 1),
    st.none() | st.binary(max_size=64),
    st.none() | st.lists(ids, max_size=3).map(tuple),
)


def test_packet_table_matches_leader_java() -> None:
    assert [(t.name, t.value) for t in PacketType][:3] == [
        ("REQUEST", 1),
        ("PROPOSAL", 2),
        ("ACK", 3),
    ]
    assert PacketType.INFORMANDACTIVATE == 19 and PacketType.LEADERINFO == 17
    assert packet_name(42) == "UNKNOWN"


def test_zxid_utils() -> None:
    z = make_zxid(5, 0xFFFFFFFE)
    assert epoch_of(z) == 5 and counter_of(z) == 0xFFFFFFFE
    assert epoch_of(-1) == -1
    assert encode_ackepoch_data(-1) == b"\xff\xff\xff\xff"
    assert encode_ackepoch_data(7) == struct.pack(">i", 7)


def test_known_bytes() -> None:
    qp = QuorumPacket(int(PacketType.ACK), 0x100000001, None, None)
    raw = struct.pack(">iqii", 3, 0x100000001, -1, -1)
    assert qp.encode() == raw
    assert decode_all(raw) == [qp]


@given(st.lists(packets, max_size=6), st.integers(1, 7))
@settings(max_examples=examples(200), deadline=None)
def test_chunking_does_not_matter(pkts: list[QuorumPacket], chunk: int) -> None:
    data = b"".join(p.encode() for p in pkts)
    assert decode_all(data) == pkts
    assert decode_all(data, chunk) == pkts


def test_snap_payload_follows_snap_packet() -> None:
    body = snapshot_body(initial_content())
    snap = QuorumPacket(int(PacketType.SNAP), 0x500000003, None, None)
    after = QuorumPacket(int(PacketType.NEWLEADER), 0x600000000, b"version=0", None)
    data = snap.encode() + encode_snapshot_payload(body) + after.encode()
    want = [snap, SnapshotPayload(body), after]
    assert decode_all(data) == want
    assert decode_all(data, 1) == want


def test_bad_signature_and_oversize() -> None:
    body = snapshot_body(initial_content())
    snap = QuorumPacket(int(PacketType.SNAP), 1, None, None).encode()
    with pytest.raises(QuorumStreamError, match="signature"):
        decode_all(snap + body + struct.pack(">i", 3) + b"Ben")
    with pytest.raises(QuorumStreamError, match="snapshot over"):
        decode_all(snap + encode_snapshot_payload(body), max_snapshot=10)
    big = QuorumPacket(int(PacketType.PROPOSAL), 1, b"x" * 100, None).encode()
    with pytest.raises(QuorumStreamError):
        decode_all(big, max_packet=50)
    # the length is rejected before the payload arrives
    dec = QuorumStreamDecoder(max_packet=50)
    dec.feed(big[:16])
    with pytest.raises(QuorumStreamError):
        dec.next_event()
    with pytest.raises(QuorumStreamError):  # stays failed
        dec.next_event()


@given(st.binary(max_size=200), st.integers(1, 9))
@settings(max_examples=examples(300), deadline=None)
def test_garbage_parses_or_raises_the_one_error(junk: bytes, chunk: int) -> None:
    one: list[StreamEvent] | type[QuorumStreamError]
    try:
        one = decode_all(junk, max_packet=4096, max_length=4096, max_snapshot=1 << 16)
    except QuorumStreamError:
        one = QuorumStreamError
    try:
        many: list[StreamEvent] | type[QuorumStreamError] = decode_all(
            junk, chunk, max_packet=4096, max_length=4096, max_snapshot=1 << 16
        )
    except QuorumStreamError:
        many = QuorumStreamError
    assert one == many


snap_nodes = st.lists(
    st.tuples(
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7FF), min_size=1, max_size=8),
        st.none() | st.binary(max_size=300),
    ),
    max_size=40,
)


@given(snap_nodes, st.integers(1, 700), st.sampled_from([64, 4096, 1 << 20]))
@settings(max_examples=examples(200), deadline=None)
def test_snapshot_nodes_in_bulk_decode_as_one_by_one(
    nodes: list[tuple[str, bytes | None]], chunk: int, max_length: int
) -> None:
    """The payload's nodes are taken as many whole ones at a time as are buffered: whatever
    the chunking, the same body (or the same error, for a buffer over ``max_length``)."""
    from trizk.storage.formats.snapshot import SnapNode

    content = initial_content()
    stat = content.nodes[0].stat
    content.nodes += [
        SnapNode(f"/n{i}{name}", data, -1, stat) for i, (name, data) in enumerate(nodes)
    ]
    body = snapshot_body(content)
    snap = QuorumPacket(int(PacketType.SNAP), 1, None, None)
    after = QuorumPacket(int(PacketType.UPTODATE), 2, None, None)
    data = snap.encode() + encode_snapshot_payload(body) + after.encode()
    outcomes = []
    for step in (None, chunk, 1):
        try:
            outcomes.append(decode_all(data, step, max_length=max_length))
        except QuorumStreamError:
            outcomes.append(QuorumStreamError)  # type: ignore[arg-type]
    assert outcomes[0] == outcomes[1] == outcomes[2]
    if max_length == 1 << 20:
        assert outcomes[0] == [snap, SnapshotPayload(body), after]


@given(st.binary(max_size=300), st.integers(1, 9))
@settings(max_examples=examples(300), deadline=None)
def test_garbage_after_a_snap_packet_parses_or_raises_alike(junk: bytes, chunk: int) -> None:
    data = QuorumPacket(int(PacketType.SNAP), 1, None, None).encode() + junk
    got = []
    for step in (None, chunk):
        try:
            got.append(decode_all(data, step, max_length=64, max_snapshot=1 << 12))
        except QuorumStreamError:
            got.append(QuorumStreamError)  # type: ignore[arg-type]
    assert got[0] == got[1]
