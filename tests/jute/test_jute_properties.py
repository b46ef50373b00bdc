"""Property tests for every Jute record, generated from the ``FIELDS`` declarations.

Strategies are derived from each field's JuteType (ints over their full range, Java booleans,
nullable buffers/strings with ``None`` and empty kept distinct, nullable vectors, nested records),
so a record added to ``jute/records.py`` is covered without touching this file. Properties:

* the generated fast path and the construct reference path agree: same bytes out of
  ``encode()``/``build_reference()``, same record out of ``decode``/``parse_reference``;
* ``decode(encode(r)) == r``, also at a nonzero offset inside a larger buffer;
* every strict prefix of an encoding is rejected with :class:`JuteDecodeError`;
* arbitrary bytes either decode or raise :class:`JuteDecodeError` -- nothing else -- and a
  successful decode never depends on bytes past the position it reports;
* the length cap (``set_max_buffer``: jute.maxbuffer + extrasize, as
  ``BinaryInputArchive.checkLength``) bounds every buffer and string;
* a Java boolean is any non-zero byte (``DataInputStream.readBoolean``).

The last group pins four ZooKeeper 3.8.0 behaviours these tests first found missing (length cap
with extrasize, vector counts below -1, no cap on vector counts, trailing bytes).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import construct as cs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.jute import DEFAULT_MAX_BUFFER, JuteDecodeError, set_max_buffer
from trizk.jute import records as R
from trizk.jute.primitives import (
    BOOL,
    INT,
    LIMITS,
    LONG,
    JuteType,
    Record,
    RecordType,
    Vector,
    _Bytes,
    fixed_struct,
)

RECORDS: list[type[Record]] = sorted(
    (
        c
        for c in vars(R).values()
        if isinstance(c, type) and issubclass(c, Record) and c is not Record
    ),
    key=lambda c: c.__name__,
)

FAST = settings(
    max_examples=examples(25),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def strategy_for(t: JuteType) -> st.SearchStrategy[Any]:
    if t is INT:
        return st.integers(-(2**31), 2**31 - 1)
    if t is LONG:
        return st.integers(-(2**63), 2**63 - 1)
    if t is BOOL:
        return st.booleans()
    if isinstance(t, _Bytes):
        if t.text:
            return st.one_of(st.none(), st.just(""), st.text(max_size=12))
        return st.one_of(st.none(), st.just(b""), st.binary(max_size=24))
    if isinstance(t, Vector):
        return st.one_of(
            st.none(), st.just(()), st.lists(strategy_for(t.item), max_size=3).map(tuple)
        )
    if isinstance(t, RecordType):
        return record_strategy(t.cls)
    raise AssertionError(f"no strategy for Jute type {t!r}")


def record_strategy(cls: type[Record]) -> st.SearchStrategy[Record]:
    return st.builds(cls, **{name: strategy_for(t) for name, t in cls.FIELDS})


def reference_decode_from(cls: type[Record], b: bytes, p: int) -> tuple[Record, int]:
    """The reference codec's equivalent of ``decode_from``: construct parses from a stream at
    ``p`` to find where the record ends, then ``parse_reference`` decodes exactly that slice."""
    stream = io.BytesIO(b)
    stream.seek(p)
    try:
        cls.construct.parse_stream(stream)
    except Exception as e:  # any construct error; anything else would be a codec bug
        if not isinstance(e, cs.ConstructError):
            raise
        raise JuteDecodeError(str(e)) from None
    end = stream.tell()
    return cls.parse_reference(b[p:end]), end


@contextmanager
def _max_buffer_restored() -> Iterator[None]:
    try:
        yield
    finally:
        set_max_buffer(DEFAULT_MAX_BUFFER)


@pytest.fixture
def max_buffer() -> Iterator[None]:
    """Tests that change jute.maxbuffer restore the default afterwards, whatever happens."""
    with _max_buffer_restored():
        yield
    assert LIMITS.max_buffer == DEFAULT_MAX_BUFFER


def test_every_record_declared() -> None:
    assert len(RECORDS) >= 70
    for cls in RECORDS:
        assert cls.FIELDS, cls
        assert cls.MODULE in {"data", "proto", "quorum", "persistence", "txn"}


# ------------------------------------------------------------------------ corner values
# Deterministic and per class (cheap): every record at its extremes, so each class is covered
# even where hypothesis happens not to draw it.

CORNERS = ("min", "max", "null", "empty", "typical")


def corner_value(t: JuteType, mode: str) -> Any:
    if t is INT or t is LONG:
        bits = 31 if t is INT else 63
        return {"min": -(2**bits), "max": 2**bits - 1, "typical": 7}.get(mode, 0)
    if t is BOOL:
        return mode in ("max", "typical")
    if isinstance(t, _Bytes):
        if mode in ("min", "null"):
            return None
        if mode == "empty":
            return "" if t.text else b""
        if mode == "max":
            return "/\u00e9\u20ac\U0001f600\x00z" if t.text else bytes(range(256))
        return "/a/b" if t.text else b"abc"
    if isinstance(t, Vector):
        if mode in ("min", "null"):
            return None
        if mode == "empty":
            return ()
        if mode == "max":
            return (corner_value(t.item, "max"), corner_value(t.item, "min"))
        return (corner_value(t.item, "typical"),)
    if isinstance(t, RecordType):
        return corner_record(t.cls, mode)
    raise AssertionError(f"no corner value for Jute type {t!r}")


def corner_record(cls: type[Record], mode: str) -> Record:
    return cls(**{name: corner_value(t, mode) for name, t in cls.FIELDS})


def check_agree_and_roundtrip(cls: type[Record], rec: Record, pre: bytes, post: bytes) -> None:
    enc = rec.encode()
    assert rec.build_reference() == enc
    assert cls.decode(enc) == rec
    assert cls.parse_reference(enc) == rec
    # At an offset inside a larger buffer, with bytes after it: reads exactly its own bytes.
    whole = pre + enc + post
    assert cls.decode_from(whole, len(pre)) == (rec, len(pre) + len(enc))
    assert cls.decode_from(memoryview(whole), len(pre)) == (rec, len(pre) + len(enc))
    assert reference_decode_from(cls, whole, len(pre)) == (rec, len(pre) + len(enc))
    if post:  # decode() wants the record to fill the buffer
        with pytest.raises(JuteDecodeError):
            cls.decode(enc + post)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_corners_agree_roundtrip_and_reject_prefixes(cls: type[Record]) -> None:
    for mode in CORNERS:
        rec = corner_record(cls, mode)
        check_agree_and_roundtrip(cls, rec, b"\xff" * 3, b"\x00\x01")
        enc = rec.encode()
        for cut in range(len(enc)):  # every strict prefix, on the fast path
            with pytest.raises(JuteDecodeError):
                cls.decode(enc[:cut])
        for cut in {0, len(enc) // 2, len(enc) - 1}:  # a few on the (slow) reference path
            with pytest.raises(JuteDecodeError):
                cls.parse_reference(enc[:cut])


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_null_and_empty_stay_distinct(cls: type[Record]) -> None:
    rec = corner_record(cls, "typical")
    for name, t in cls.FIELDS:
        if isinstance(t, _Bytes | Vector):
            empty: Any = () if isinstance(t, Vector) else ("" if t.text else b"")
            as_null = _replace(rec, name, None)
            as_empty = _replace(rec, name, empty)
            assert as_null.encode() != as_empty.encode()
            assert as_null.build_reference() == as_null.encode()
            assert as_empty.build_reference() == as_empty.encode()
            assert getattr(cls.decode(as_null.encode()), name) is None
            assert getattr(cls.parse_reference(as_null.encode()), name) is None
            assert getattr(cls.decode(as_empty.encode()), name) == empty
            assert getattr(cls.parse_reference(as_empty.encode()), name) == empty


def _replace(rec: Record, name: str, value: Any) -> Record:
    fields = {n: getattr(rec, n) for n, _ in type(rec).FIELDS}
    fields[name] = value
    return type(rec)(**fields)


# ------------------------------------------------------------------- random records (hypothesis)
# One test per property, drawing the record class: far cheaper than a hypothesis run per class.

ANY_RECORD = st.sampled_from(RECORDS).flatmap(record_strategy)


@pytest.mark.slow
@settings(FAST, max_examples=examples(200))
@given(rec=ANY_RECORD, pre=st.binary(max_size=8), post=st.binary(max_size=8))
def test_both_paths_agree_and_roundtrip(rec: Record, pre: bytes, post: bytes) -> None:
    check_agree_and_roundtrip(type(rec), rec, pre, post)


@settings(FAST, max_examples=examples(150))
@given(rec=ANY_RECORD, data=st.data())
def test_strict_prefixes_are_rejected(rec: Record, data: st.DataObject) -> None:
    enc = rec.encode()
    cut = data.draw(st.integers(0, len(enc) - 1))
    with pytest.raises(JuteDecodeError):
        type(rec).decode(enc[:cut])
    with pytest.raises(JuteDecodeError):
        type(rec).parse_reference(enc[:cut])


# -------------------------------------------------------------------------- arbitrary bytes


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except JuteDecodeError:
        return JuteDecodeError


def check_arbitrary(cls: type[Record], b: bytes) -> None:
    # Any exception other than JuteDecodeError propagates and fails the test.
    fast = _outcome(cls.decode_from, b, 0)
    assert fast == _outcome(reference_decode_from, cls, b, 0)
    whole = _outcome(cls.decode, b)
    if fast is JuteDecodeError:
        assert whole is JuteDecodeError
        assert _outcome(cls.parse_reference, b) is JuteDecodeError
        return
    rec, p = fast
    assert 0 <= p <= len(b)
    # Never read past the end: the same record comes out of exactly the bytes it claims.
    assert cls.decode(b[:p]) == rec
    if p == len(b):
        assert whole == rec == cls.parse_reference(b)
    else:
        assert whole is JuteDecodeError  # trailing bytes
    # Decoded values re-encode to something that decodes to the same record.
    assert cls.decode(rec.encode()) == rec


@settings(FAST, max_examples=examples(400))
@given(cls=st.sampled_from(RECORDS), b=st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_decode_error(cls: type[Record], b: bytes) -> None:
    check_arbitrary(cls, b)


@settings(FAST, max_examples=examples(200))
@given(rec=ANY_RECORD, data=st.data())
def test_mutated_encodings_decode_or_raise(rec: Record, data: st.DataObject) -> None:
    """Random bytes rarely get past the first length; corrupting real encodings does."""
    enc = bytearray(rec.encode())
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(enc) - 1))
        enc[i] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, enc[i] ^ 0x01]))
    check_arbitrary(type(rec), bytes(enc))


# -------------------------------------------------------------------------- jute.maxbuffer


def _bytes_fields(cls: type[Record]) -> list[tuple[str, _Bytes]]:
    return [(n, t) for n, t in cls.FIELDS if isinstance(t, _Bytes)]


CAPPED = [c for c in RECORDS if _bytes_fields(c)]


@settings(FAST, max_examples=examples(150))
@given(cls=st.sampled_from(CAPPED), data=st.data())
def test_max_buffer_cap(cls: type[Record], data: st.DataObject) -> None:
    with _max_buffer_restored():
        _check_max_buffer_cap(cls, data)


def _check_max_buffer_cap(cls: type[Record], data: st.DataObject) -> None:
    rec = data.draw(record_strategy(cls))
    name, t = data.draw(st.sampled_from(_bytes_fields(cls)))
    cap = data.draw(st.integers(1, 48))
    at_cap = _replace(rec, name, "x" * cap if t.text else b"\xab" * cap)
    over = _replace(rec, name, "x" * (cap + 1) if t.text else b"\xab" * (cap + 1))
    set_max_buffer(cap, extrasize=0)  # the field cap is maxbuffer + extrasize
    # Only the chosen field is known to be within the cap; shrink any others to fit.
    for other, _ in _bytes_fields(cls):
        if other != name:
            at_cap = _replace(at_cap, other, None)
            over = _replace(over, other, None)
    at_cap, over = _shrink_nested(at_cap), _shrink_nested(over)
    assert cls.decode(at_cap.encode()) == at_cap
    assert cls.parse_reference(at_cap.encode()) == at_cap
    with pytest.raises(JuteDecodeError):
        cls.decode(over.encode())
    with pytest.raises(JuteDecodeError):
        cls.parse_reference(over.encode())


def _shrink_nested(rec: Record) -> Record:
    """Null every buffer/string/vector inside nested records, so only top-level fields count."""
    for name, t in type(rec).FIELDS:
        if isinstance(t, Vector):
            rec = _replace(rec, name, None)
        elif isinstance(t, RecordType):
            rec = _replace(rec, name, _null_all(getattr(rec, name)))
    return rec


def _null_all(rec: Record) -> Record:
    for name, t in type(rec).FIELDS:
        if isinstance(t, _Bytes | Vector):
            rec = _replace(rec, name, None)
        elif isinstance(t, RecordType):
            rec = _replace(rec, name, _null_all(getattr(rec, name)))
    return rec


def test_max_buffer_applies_inside_vectors_and_nested_records(max_buffer: None) -> None:
    acl = R.ACL(perms=31, id=R.Id(scheme="world", id="anyone"))
    req = R.CreateRequest(path="/a", data=b"", acl=(acl,), flags=0)
    enc = req.encode()
    set_max_buffer(6, extrasize=0)  # "anyone" fits exactly
    assert R.CreateRequest.decode(enc) == req == R.CreateRequest.parse_reference(enc)
    set_max_buffer(5, extrasize=0)
    with pytest.raises(JuteDecodeError):
        R.CreateRequest.decode(enc)
    with pytest.raises(JuteDecodeError):
        R.CreateRequest.parse_reference(enc)


def test_negative_lengths_other_than_minus_one_are_rejected() -> None:
    for n in (-2, -100, -(2**31)):
        b = struct.pack(">i", n)
        for cls in (R.SyncRequest, R.GetSASLRequest):  # a ustring, a buffer
            with pytest.raises(JuteDecodeError):
                cls.decode(b)
            with pytest.raises(JuteDecodeError):
                cls.parse_reference(b)


def test_set_max_buffer_validates() -> None:
    for bad in (0, -1):
        with pytest.raises(ValueError):
            set_max_buffer(bad)
    assert LIMITS.max_buffer == DEFAULT_MAX_BUFFER


# ------------------------------------------------------------------------------ Java bool


def _bool_fields(cls: type[Record]) -> list[str]:
    return [n for n, t in cls.FIELDS if t is BOOL]


WITH_BOOL = [c for c in RECORDS if _bool_fields(c)]


@settings(FAST, max_examples=examples(150))
@given(cls=st.sampled_from(WITH_BOOL), data=st.data())
def test_java_bool_any_nonzero_byte_is_true(cls: type[Record], data: st.DataObject) -> None:
    rec = data.draw(record_strategy(cls))
    name = data.draw(st.sampled_from(_bool_fields(cls)))
    f, t = _replace(rec, name, False).encode(), _replace(rec, name, True).encode()
    diff = [i for i in range(len(f)) if f[i] != t[i]]
    assert len(f) == len(t) and len(diff) == 1 and t[diff[0]] == 1 and f[diff[0]] == 0
    byte = data.draw(st.integers(1, 255))
    b = f[: diff[0]] + bytes([byte]) + f[diff[0] + 1 :]
    want = _replace(rec, name, True)
    assert cls.decode(b) == want == cls.parse_reference(b)
    assert getattr(cls.decode(b), name) is True
    assert want.encode() == t  # written back as 1, like DataOutputStream.writeBoolean


def test_bool_decodes_to_python_bool() -> None:
    got = R.GetDataRequest.decode(b"\x00\x00\x00\x01/\x07")
    assert got.watch is True and type(got.watch) is bool
    got = R.GetDataRequest.parse_reference(b"\x00\x00\x00\x01/\x07")
    assert got.watch is True and type(got.watch) is bool


# --------------------------- ZooKeeper 3.8.0 behaviours (once pinned as strict xfails)


def test_java_cap_is_maxbuffer_plus_extrasize(max_buffer: None) -> None:
    set_max_buffer(2000)
    # checkLength: len < 0 || len > maxBufferSize + extraMaxBufferSize -> "Unreasonable length".
    # With jute.maxbuffer=2000 and no extrasize set, extraMaxBuffer = max(2000, 1024) = 2000.
    rec = R.GetSASLRequest(token=b"\x00" * 4000)
    assert R.GetSASLRequest.decode(rec.encode()) == rec
    assert R.GetSASLRequest.parse_reference(rec.encode()) == rec


def test_vector_count_below_minus_one_is_empty_in_java() -> None:
    b = struct.pack(">i", -2)
    assert R.GetChildrenResponse.decode(b) == R.GetChildrenResponse(children=())
    assert R.GetChildrenResponse.parse_reference(b) == R.GetChildrenResponse(children=())


def test_vector_count_is_not_capped_by_max_buffer(max_buffer: None) -> None:
    rec = R.GetChildrenResponse(children=("",) * 5)
    enc = rec.encode()
    set_max_buffer(4)
    assert R.GetChildrenResponse.decode(enc) == rec
    assert R.GetChildrenResponse.parse_reference(enc) == rec


def test_parse_reference_rejects_trailing_bytes_like_decode() -> None:
    enc = R.SyncRequest(path="/").encode() + b"\x00"
    with pytest.raises(JuteDecodeError):
        R.SyncRequest.decode(enc)
    with pytest.raises(JuteDecodeError):
        R.SyncRequest.parse_reference(enc)


# ---------------------------------------------------------------------- fixed_struct


FIXED_RECORDS = [c for c in RECORDS if all(t.fixed is not None for _, t in c.FIELDS)]


def test_fixed_struct_is_the_records_layout() -> None:
    assert {R.Stat, R.StatPersisted} <= set(FIXED_RECORDS)
    for cls in FIXED_RECORDS:
        for mode in CORNERS:
            rec = cls(**{name: corner_value(t, mode) for name, t in cls.FIELDS})
            values = [getattr(rec, name) for name, _ in cls.FIELDS]
            assert fixed_struct(cls).pack(*values) == rec.encode()
    with pytest.raises(ValueError, match="variable width"):
        fixed_struct(R.CreateRequest)
