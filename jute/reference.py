"""The reference codec: each Jute record as a ``construct`` Struct, built from its declaration.

``Record.construct``, ``Record.parse_reference`` and ``Record.build_reference`` (see
:mod:`trizk.jute.primitives`) come from here. It is easy to read against zookeeper.jute and
the golden-byte and property tests check the generated fast codec against it; the server itself
never uses it, so this module (and construct, a sizeable import) is loaded on first use only.

The rules are those of the fast codec: ``boolean`` is any non-zero byte (written 0/1); buffers
and strings are length-prefixed, -1 meaning null, capped by ``jute.maxbuffer`` (plus extrasize);
vectors are count-prefixed, -1 meaning null and any other negative count empty.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import construct as cs

from trizk.jute.limits import _LIMITS_VAR, JuteDecodeError

__all__ = ["Nullable", "NullableVector", "RecordAdapter", "build", "fixed", "parse", "struct_of"]


class JavaBool(cs.Adapter):
    """DataInputStream.readBoolean: any non-zero byte is true; we write 0/1."""

    def _decode(self, obj: int, context: Any, path: Any) -> bool:
        return obj != 0

    def _encode(self, obj: bool, context: Any, path: Any) -> int:
        return 1 if obj else 0


_FIXED: dict[str, cs.Construct] = {
    "int": cs.Int32sb,
    "long": cs.Int64sb,
    "boolean": JavaBool(cs.Int8ub),
}


def fixed(jute_name: str) -> cs.Construct:
    """The subcon of a fixed-width Jute type (``int``, ``long``, ``boolean``)."""
    return _FIXED[jute_name]


class Nullable(cs.Construct):
    """Length-prefixed bytes/str with -1 meaning null and the jute.maxbuffer cap."""

    def __init__(self, text: bool) -> None:
        super().__init__()
        self.text = text

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        n = cs.Int32sb._parsereport(stream, context, path)
        if n == -1:
            return None
        if n < 0 or n > _LIMITS_VAR.get().max_length:
            raise cs.ExplicitError(f"Unreasonable length = {n}")
        data = cs.stream_read(stream, n, path)
        return data.decode("utf-8", "replace") if self.text else bytes(data)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if obj is None:
            cs.Int32sb._build(-1, stream, context, path)
            return obj
        data = obj.encode("utf-8") if self.text else bytes(obj)
        cs.Int32sb._build(len(data), stream, context, path)
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context: Any, path: Any) -> int:
        raise cs.SizeofError(path=path)


class NullableVector(cs.Construct):
    def __init__(self, sub: cs.Construct) -> None:
        super().__init__()
        self.sub = sub

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        n = cs.Int32sb._parsereport(stream, context, path)
        if n == -1:
            return None
        # BinaryInputArchive.startVector: any count but -1 is a length, and done() is
        # ``nelems <= 0``, so a count below -1 is an empty vector. Counts are not capped.
        return [self.sub._parsereport(stream, context, path) for _ in range(max(n, 0))]

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if obj is None:
            cs.Int32sb._build(-1, stream, context, path)
            return obj
        cs.Int32sb._build(len(obj), stream, context, path)
        for item in obj:
            self.sub._build(item, stream, context, path)
        return obj

    def _sizeof(self, context: Any, path: Any) -> int:
        raise cs.SizeofError(path=path)


class Record(Protocol):
    """What this codec reads of a record (:class:`trizk.jute.primitives.Record`, which loads
    this module on first use): its declaration and its Struct."""

    #: (name, JuteType) in declaration order; each type gives its ``subcon()``
    FIELDS: ClassVar[Any]
    construct: ClassVar[Any]


class RecordAdapter(cs.Adapter):
    """A record's Struct, decoding to (and encoding from) the record's dataclass."""

    def __init__(self, cls: type[Record]) -> None:
        super().__init__(cls.construct)
        self.cls = cls

    def _decode(self, obj: Any, context: Any, path: Any) -> Any:
        return self.cls(**{name: _freeze(obj[name]) for name, _ in self.cls.FIELDS})

    def _encode(self, obj: Any, context: Any, path: Any) -> Any:
        return {name: getattr(obj, name) for name, _ in self.cls.FIELDS}


def _freeze(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def struct_of(cls: type[Record]) -> cs.Construct:
    """``cls.construct``: its fields' subcons in declaration order."""
    return cs.Struct(*(name / t.subcon() for name, t in cls.FIELDS))


def parse(cls: type[Record], b: bytes) -> Any:
    """Decode exactly one ``cls`` occupying all of ``b`` (JuteDecodeError otherwise)."""
    try:
        raw = cs.Sequence(cls.construct, cs.Terminated).parse(b)[0]
    except cs.ConstructError as e:
        raise JuteDecodeError(str(e)) from None
    return RecordAdapter(cls)._decode(raw, None, None)


def build(rec: Record) -> bytes:
    """Encode ``rec`` through its Struct."""
    cls = type(rec)
    return bytes(cls.construct.build(RecordAdapter(cls)._encode(rec, None, None)))
