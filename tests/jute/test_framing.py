"""FrameDecoder: the sans-IO splitter of ``int length`` + payload frames.

Properties (hypothesis, plus the golden capture as a real byte stream):

* any chunking of a byte stream yields the same frames as feeding it in one piece, and the
  frames are exactly the payloads that were framed;
* a declared length above ``max_frame``, or negative, raises :class:`FrameTooLarge` as soon as
  its 4 length bytes have arrived -- before any payload byte -- so a peer cannot make us buffer
  more than the cap (ZooKeeper: ``NIOServerCnxn.readLength`` rejects ``len < 0 || len >
  jute.maxbuffer`` with "Len error");
* a frame exactly at the cap passes.
"""

from __future__ import annotations

import itertools
import json
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.jute import JuteDecodeError
from trizk.jute.framing import FrameDecoder, FrameTooLarge, frame

FAST = settings(
    max_examples=examples(150),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

payloads = st.lists(st.binary(max_size=40), max_size=8)


def drain(dec: FrameDecoder) -> list[bytes]:
    out = []
    while (f := dec.next_frame()) is not None:
        out.append(f)
    return out


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def feed_chunks(chunks: list[bytes], max_frame: int) -> list[bytes]:
    dec = FrameDecoder(max_frame)
    out = []
    for c in chunks:
        dec.feed(c)
        out += drain(dec)
    assert dec.buffered == 0
    return out


@FAST
@given(ps=payloads, cuts=st.lists(st.integers(0, 400), max_size=20))
def test_any_chunking_yields_the_same_frames(ps: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in ps)
    one_shot = feed_chunks([stream], 40)
    assert one_shot == ps
    assert feed_chunks(split(stream, cuts), 40) == one_shot


@settings(FAST, max_examples=examples(40))
@given(ps=payloads)
def test_byte_by_byte_equals_one_shot(ps: list[bytes]) -> None:
    stream = b"".join(frame(p) for p in ps)
    assert feed_chunks([stream[i : i + 1] for i in range(len(stream))], 40) == ps


@settings(FAST, max_examples=examples(60))
@given(ps=payloads, cuts=st.lists(st.integers(0, 400), max_size=20))
def test_frames_come_out_only_when_complete(ps: list[bytes], cuts: list[int]) -> None:
    """After each chunk, exactly the frames wholly contained in the bytes so far are out."""
    stream = b"".join(frame(p) for p in ps)
    ends = []
    pos = 0
    for p in ps:
        pos += 4 + len(p)
        ends.append(pos)
    dec, got, fed = FrameDecoder(40), [], 0
    for c in split(stream, cuts):
        dec.feed(c)
        fed += len(c)
        got += drain(dec)
        assert len(got) == sum(1 for e in ends if e <= fed)
        assert dec.buffered == fed - (ends[len(got) - 1] if got else 0)
        start = fed - dec.buffered
        assert dec.peek(4) == stream[start : min(fed, start + 4)]


def test_golden_streams_in_odd_chunks() -> None:
    """The captured ZooKeeper conversations, re-framed, split at every 7th byte."""
    golden = json.loads((Path(__file__).parents[1] / "data" / "golden_frames.json").read_text())
    streams: dict[tuple[int, str], list[bytes]] = {}
    for f in golden["frames"]:
        streams.setdefault((f["conn"], f["dir"]), []).append(bytes.fromhex(f["hex"]))
    assert len(streams) > 10
    for ps in streams.values():
        stream = b"".join(frame(p) for p in ps)
        chunks = [stream[i : i + 7] for i in range(0, len(stream), 7)]
        assert feed_chunks(chunks, 0xFFFFF) == ps


def test_compaction_keeps_frames_intact() -> None:
    """Past 64 KiB of consumed bytes the decoder compacts its buffer; nothing may shift."""
    ps = [bytes([i]) * (20000 + i) for i in range(8)]
    stream = b"".join(frame(p) for p in ps)
    for sizes in ([1, 4098], [4099], [65537], [3, 70000], [len(stream)]):
        chunks, i, k = [], 0, 0
        while i < len(stream):
            n = sizes[k % len(sizes)]
            chunks.append(stream[i : i + n])
            i, k = i + n, k + 1
        assert feed_chunks(chunks, 30000) == ps


# -------------------------------------------------------------------------------- the cap


@FAST
@given(
    ps=st.lists(st.binary(max_size=16), max_size=4),
    limit=st.integers(0, 64),
    bad=st.one_of(st.integers(65, 2**31 - 1), st.integers(-(2**31), -1)),
    data=st.data(),
)
def test_bad_length_raises_as_soon_as_the_length_arrives(
    ps: list[bytes], limit: int, bad: int, data: st.DataObject
) -> None:
    ps = [p[:limit] for p in ps]
    bad = data.draw(st.sampled_from([bad, limit + 1])) if bad > 0 else bad
    good = b"".join(frame(p) for p in ps)
    header = struct.pack(">i", bad)
    junk = data.draw(st.binary(max_size=8))  # payload bytes that must never be needed
    dec = FrameDecoder(limit)
    dec.feed(good)
    assert drain(dec) == ps
    for i in range(3):  # 1..3 of the 4 length bytes: still waiting
        dec.feed(header[i : i + 1])
        assert dec.next_frame() is None
    dec.feed(header[3:])
    with pytest.raises(FrameTooLarge) as exc:
        dec.next_frame()
    assert exc.value.length == bad and exc.value.limit == limit
    assert isinstance(exc.value, JuteDecodeError)
    # Also when the length arrives together with payload bytes in one chunk.
    dec = FrameDecoder(limit)
    dec.feed(good + header + junk)
    assert [dec.next_frame() for _ in ps] == ps
    with pytest.raises(FrameTooLarge):
        dec.next_frame()


@FAST
@given(limit=st.integers(0, 300), before=st.lists(st.binary(max_size=20), max_size=3))
def test_frame_exactly_at_the_cap_passes(limit: int, before: list[bytes]) -> None:
    before = [b[:limit] for b in before]
    at_cap = bytes(range(256)) * (limit // 256) + bytes(range(limit % 256))
    assert len(at_cap) == limit
    assert feed_chunks([b"".join(frame(p) for p in [*before, at_cap])], limit) == [
        *before,
        at_cap,
    ]
    dec = FrameDecoder(limit)
    dec.feed(frame(at_cap + b"!"))
    with pytest.raises(FrameTooLarge):
        dec.next_frame()


def test_zookeeper_default_cap() -> None:
    dec = FrameDecoder(0xFFFFF)
    dec.feed(struct.pack(">i", 0xFFFFF))
    assert dec.next_frame() is None  # allowed: wait for the megabyte
    dec = FrameDecoder(0xFFFFF)
    dec.feed(struct.pack(">i", 0x100000))
    with pytest.raises(FrameTooLarge, match="Len error 1048576"):
        dec.next_frame()


def test_empty_frames_and_frame_helper() -> None:
    assert frame(b"") == b"\x00\x00\x00\x00"
    assert frame(b"ab") == b"\x00\x00\x00\x02ab"
    assert feed_chunks([frame(b"") * 3], 0) == [b"", b"", b""]
