"""The multi codec (:mod:`trizk.jute.multi`): MultiOperationRecord and MultiResponse.

Properties (hypothesis, records drawn from their declarations as in test_jute_properties):

* a request of write ops, or of read ops, decodes to the ops it was encoded from, at any
  offset and with any bytes after the end marker;
* every strict prefix of an encoding is a JuteDecodeError; arbitrary bytes decode or raise
  JuteDecodeError, nothing else (both decoders);
* a response written with encode_result / encode_error / END reads back as the results it was
  written from, and the reader reports the position after the end marker.

Then ZooKeeper's reading rules one by one, and the golden frames captured from ZooKeeper 3.8.0:
the codec reads them and writes the same bytes again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trizk.jute import JuteDecodeError, multi
from trizk.jute import records as R
from trizk.jute.codes import Code, CreateMode, OpCode
from trizk.jute.primitives import Record

from .test_jute_properties import record_strategy

FAST = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

PATHS = st.one_of(st.none(), st.text(max_size=8).map(lambda s: "/" + s))
FLAGS_BY_TYPE = {
    OpCode.CREATE: [int(CreateMode.PERSISTENT), int(CreateMode.EPHEMERAL_SEQUENTIAL)],
    OpCode.CREATECONTAINER: [int(CreateMode.CONTAINER)],
    OpCode.CREATETTL: [int(CreateMode.PERSISTENT_WITH_TTL)],
}


def _create(typ: int) -> st.SearchStrategy[multi.MultiOp]:
    cls = R.CreateTTLRequest if typ == OpCode.CREATETTL else R.CreateRequest
    recs = record_strategy(cls).flatmap(
        lambda rec: st.sampled_from(FLAGS_BY_TYPE[typ]).map(
            lambda flags: type(rec)(**{**_fields(rec), "flags": flags})
        )
    )
    return recs.map(lambda rec: (typ, rec))


def _fields(rec: Record) -> dict[str, Any]:
    return {name: getattr(rec, name) for name, _ in rec.FIELDS}


def _plain(typ: int) -> st.SearchStrategy[multi.MultiOp]:
    return record_strategy(multi.REQUEST_RECORDS[typ]).map(lambda rec: (typ, rec))


WRITE_OP = st.one_of(
    *(_create(t) for t in FLAGS_BY_TYPE),
    *(_plain(t) for t in (OpCode.DELETE, OpCode.SETDATA, OpCode.CHECK)),
)
READ_OP = st.one_of(
    PATHS.map(lambda p: (OpCode.GETDATA, R.GetDataRequest(p, False))),
    PATHS.map(lambda p: (OpCode.GETCHILDREN, R.GetChildrenRequest(p, False))),
)
OPS = st.one_of(st.lists(WRITE_OP, max_size=4), st.lists(READ_OP, max_size=4))


@FAST
@given(OPS, st.binary(max_size=4), st.binary(max_size=4))
def test_request_round_trip(ops: list[multi.MultiOp], head: bytes, tail: bytes) -> None:
    body = multi.encode_request(ops)
    assert multi.decode_request(head + body + tail, len(head)) == ops


@FAST
@given(OPS)
def test_every_prefix_of_a_request_is_a_decode_error(ops: list[multi.MultiOp]) -> None:
    body = multi.encode_request(ops)
    for n in range(len(body)):
        with pytest.raises(JuteDecodeError):
            multi.decode_request(body[:n], 0)


@FAST
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_the_decode_error(b: bytes) -> None:
    for decode in (multi.decode_request, multi.decode_response):
        try:
            decode(b, 0)
        except JuteDecodeError:
            pass


@st.composite
def results(draw: st.DrawFn) -> tuple[multi.MultiResult, list[bytes]]:
    """A result and its encoding: an error result, or a result of a known type."""
    out: list[bytes] = []
    typ = draw(st.sampled_from(sorted(multi.RESULT_RECORDS)))
    if typ == OpCode.ERROR:
        code = draw(st.sampled_from(sorted(int(c) for c in Code)))
        multi.encode_error(code, out)
        return multi.MultiResult(typ, code, R.ErrorResponse(code)), out
    cls = multi.RESULT_RECORDS[typ]
    body = None if cls is None else draw(record_strategy(cls))
    multi.encode_result(typ, body, out)
    return multi.MultiResult(typ, 0, body), out


@FAST
@given(st.data(), st.integers(0, 4), st.binary(max_size=4))
def test_response_round_trip(data: st.DataObject, n: int, tail: bytes) -> None:
    expected, chunks = [], []
    for _ in range(n):
        res, out = data.draw(results())
        expected.append(res)
        chunks += out
    body = b"".join(chunks) + multi.END
    assert multi.decode_response(body + tail, 0) == (expected, len(body))


@FAST
@given(st.data(), st.integers(1, 3))
def test_every_prefix_of_a_response_is_a_decode_error(data: st.DataObject, n: int) -> None:
    chunks = []
    for _ in range(n):
        chunks += data.draw(results())[1]
    body = b"".join(chunks) + multi.END
    for k in range(len(body)):
        with pytest.raises(JuteDecodeError):
            multi.decode_response(body[:k], 0)


# --------------------------------------------------------------- MultiOperationRecord's rules


def _req(*ops: multi.MultiOp) -> bytes:
    return multi.encode_request(ops)


ACL = (R.ACL(31, R.Id("world", "anyone")),)


def test_the_empty_multi_is_the_end_marker() -> None:
    assert multi.END == bytes.fromhex("ffffffff01ffffffff")
    assert multi.encode_request([]) == multi.END
    assert multi.decode_request(multi.END, 0) == []
    assert multi.decode_response(multi.END, 0) == ([], 9)


def test_an_unknown_op_type_is_a_decode_error() -> None:
    body = multi.HEADER.pack(OpCode.EXISTS, False, -1) + R.ExistsRequest("/a", False).encode()
    with pytest.raises(JuteDecodeError, match="Invalid type of op 3"):
        multi.decode_request(body + multi.END, 0)


def test_read_and_write_ops_do_not_mix() -> None:
    with pytest.raises(JuteDecodeError, match="Mixing"):
        multi.decode_request(
            _req(
                (OpCode.GETDATA, R.GetDataRequest("/a", False)),
                (OpCode.DELETE, R.DeleteRequest("/a", -1)),
            ),
            0,
        )


def test_a_missing_end_marker_is_a_decode_error() -> None:
    body = _req((OpCode.DELETE, R.DeleteRequest("/a", -1)))
    with pytest.raises(JuteDecodeError):
        multi.decode_request(body[: -len(multi.END)], 0)


def test_read_ops_are_unwatched_whatever_the_wire_says() -> None:
    ops = multi.decode_request(
        _req(
            (OpCode.GETDATA, R.GetDataRequest("/a", True)),
            (OpCode.GETCHILDREN, R.GetChildrenRequest("/", True)),
        ),
        0,
    )
    assert ops == [
        (OpCode.GETDATA, R.GetDataRequest("/a", False)),
        (OpCode.GETCHILDREN, R.GetChildrenRequest("/", False)),
    ]


@pytest.mark.parametrize(
    ("header", "flags", "typ"),
    [
        (OpCode.CREATE2, 0, OpCode.CREATE),
        (OpCode.CREATE, 4, OpCode.CREATECONTAINER),
        (OpCode.CREATECONTAINER, 0, OpCode.CREATE),
        (OpCode.CREATE, 5, OpCode.CREATETTL),  # a createTTL without a TTL record
        (OpCode.CREATE, 99, OpCode.CREATE),  # unknown flags: Op.create reads PERSISTENT
    ],
)
def test_a_create_ops_type_comes_from_its_flags(header: int, flags: int, typ: int) -> None:
    rec = R.CreateRequest("/a", b"", ACL, flags)
    assert multi.decode_request(_req((header, rec)), 0) == [(typ, rec)]


def test_a_response_result_of_an_unknown_type_is_kept_without_a_body() -> None:
    body = multi.HEADER.pack(OpCode.EXISTS, False, 0) + multi.END
    assert multi.decode_response(body, 0) == ([multi.MultiResult(OpCode.EXISTS, 0, None)], 18)


def test_a_response_longer_than_asked_for_is_a_decode_error() -> None:
    out: list[bytes] = []
    for _ in range(3):
        multi.encode_result(OpCode.DELETE, None, out)
    body = b"".join(out) + multi.END
    assert len(multi.decode_response(body, 0, max_results=3)[0]) == 3
    with pytest.raises(JuteDecodeError, match="too long"):
        multi.decode_response(body, 0, max_results=2)


# ------------------------------------------------------------------------------ golden frames

FRAMES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "data" / "golden_frames.json").read_text()
)["frames"]
MULTI_FRAMES = [f for f in FRAMES if f.get("op") in ("MULTI", "MULTIREAD")]


def test_golden_multi_frames_exist() -> None:
    dirs = {(f["op"], f["dir"]) for f in MULTI_FRAMES}
    assert {("MULTI", "c2s"), ("MULTI", "s2c"), ("MULTIREAD", "c2s"), ("MULTIREAD", "s2c")} <= dirs


@pytest.mark.parametrize("f", MULTI_FRAMES, ids=lambda f: f"{f['seq']}-{f['dir']}-{f['op']}")
def test_golden_multi_frames_read_and_write_back(f: dict[str, Any]) -> None:
    b = bytes.fromhex(f["hex"])
    if f["dir"] == "c2s":
        ops = multi.decode_request(b, 8)  # after the RequestHeader
        if all(t == h for (t, _), h in zip(ops, _header_types(b, 8), strict=True)):
            assert b[8:] == multi.encode_request(ops)
        return
    results, end = multi.decode_response(b, 16)  # after the ReplyHeader
    assert end == len(b)
    out: list[bytes] = []
    for res in results:
        if res.type == OpCode.ERROR:
            multi.encode_error(res.err, out)
        else:
            assert res.err == 0
            multi.encode_result(res.type, res.body, out)
    assert b[16:] == b"".join(out) + multi.END


def _header_types(b: bytes, pos: int) -> list[int]:
    types = []
    while True:
        typ, done, _, _, pos = multi.read_op(b, pos, multi.REQUEST_RECORDS)
        if done:
            return types
        types.append(typ)
