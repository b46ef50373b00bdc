"""Jute primitives and the record machinery: one declaration, two codecs.

Theory
------
Jute (ZooKeeper's serialisation) is a big-endian, untagged format:

    int      = 4 bytes, signed            long   = 8 bytes, signed
    boolean  = 1 byte (0 false, any other value true; written as 0/1)
    buffer   = int length, then that many bytes; length -1 means null
    ustring  = int length, then UTF-8 bytes;     length -1 means null
    vector<T>= int count, then count T's;        count -1 means null
    record   = its fields in declaration order, nothing around them

A record is declared once (:func:`record`), as an ordered list of ``(name, JuteType)``. From
that single declaration we derive

* a frozen, slotted dataclass (the value type the rest of trizk uses);
* a ``construct`` Struct (``Record.construct``): the reference codec, easy to read and to
  check against zookeeper.jute (:mod:`trizk.jute.reference`, imported on first use: the
  server itself never needs it);
* a generated fast codec (``Record.decode_from`` / ``Record.encode``): Python source emitted from
  the same declaration, with runs of fixed-width fields merged into one precompiled
  ``struct.Struct``. It exists because construct's interpreted parser costs ~40 µs per request.
  A record of fixed-width fields also gives its ``struct.Struct`` (:func:`fixed_struct`) to
  code that packs it from values it already holds.

The golden-byte and property tests check that both codecs agree on every record.

Invariants
----------
* Decoding never reads past the buffer and raises only :class:`JuteDecodeError`.
* Buffers and strings longer than the configured ``jute.maxbuffer`` (default 0xfffff, as
  ``BinaryInputArchive.checkLength``) are rejected, as are negative lengths other than -1.
* Strings decode as Java's ``new String(bytes, UTF_8)`` does: malformed UTF-8 is replaced by
  U+FFFD rather than rejected.
* ``None`` and empty are different values for buffers, strings and vectors, as on the wire.
"""

from __future__ import annotations

import dataclasses
import inspect
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, dataclass_transform

from mypy_extensions import mypyc_attr

# the length caps and the decoding error live in their own module (the reference codec reads
# them too); importers of this module keep finding them here
from trizk.jute.limits import _LIMITS_VAR
from trizk.jute.limits import DEFAULT_MAX_BUFFER as DEFAULT_MAX_BUFFER
from trizk.jute.limits import LIMITS as LIMITS
from trizk.jute.limits import JuteDecodeError as JuteDecodeError
from trizk.jute.limits import JuteLimits as JuteLimits
from trizk.jute.limits import current_limits as current_limits
from trizk.jute.limits import reset_limits as reset_limits
from trizk.jute.limits import set_max_buffer as set_max_buffer

if TYPE_CHECKING:
    import construct as cs

# --------------------------------------------------------------------------------------------
# Types. Each knows its construct subcon (from .reference) and how to emit decode/encode
# source for itself.
# --------------------------------------------------------------------------------------------


class JuteType:
    """A Jute type: a construct subcon plus code generation for the fast path."""

    #: struct format character when the type is fixed width, else None.
    fixed: str | None = None
    jute_name: str = "?"

    def subcon(self) -> cs.Construct:  # pragma: no cover - abstract
        raise NotImplementedError

    def python_type(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    # Variable-width types generate statements that read from ``b`` at ``p`` into ``target``.
    def gen_decode(self, target: str, gen: _Gen) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def gen_encode(self, expr: str, gen: _Gen) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.jute_name


class _Fixed(JuteType):
    def __init__(self, fmt: str, name: str, pytype: type) -> None:
        self.fixed = fmt
        self._struct_fmt = ">" + fmt  # (``fixed`` as a str, not str | None)
        self.jute_name = name
        self._pytype = pytype

    def subcon(self) -> cs.Construct:
        from trizk.jute import reference

        return reference.fixed(self.jute_name)

    def python_type(self) -> Any:
        return self._pytype

    def gen_decode(self, target: str, gen: _Gen) -> None:
        st = gen.const(struct.Struct(self._struct_fmt), "st")
        gen.line(f"{target}, = {st}.unpack_from(b, p)")
        gen.line(f"p += {struct.calcsize(self._struct_fmt)}")

    def gen_encode(self, expr: str, gen: _Gen) -> None:
        st = gen.const(struct.Struct(self._struct_fmt), "st")
        gen.line(f"out.append({st}.pack({expr}))")


INT = _Fixed("i", "int", int)
LONG = _Fixed("q", "long", int)
BOOL = _Fixed("?", "boolean", bool)
# struct's "?" accepts any byte and yields bool(byte), which is Java's readBoolean rule.


class _Bytes(JuteType):
    def __init__(self, text: bool) -> None:
        self.text = text
        self.jute_name = "ustring" if text else "buffer"

    def subcon(self) -> cs.Construct:
        from trizk.jute import reference

        return reference.Nullable(self.text)

    def python_type(self) -> Any:
        return str | None if self.text else bytes | None

    def gen_decode(self, target: str, gen: _Gen) -> None:
        n = gen.tmp()
        gen.line(f"{n}, = _I.unpack_from(b, p)")
        gen.line("p += 4")
        gen.line(f"if {n} == -1:")
        gen.line(f"    {target} = None")
        gen.line("else:")
        gen.line(f"    if {n} < 0 or {n} > _limits().max_length or p + {n} > len(b):")
        gen.line(f"        raise _Err('bad length %d' % {n})")
        if self.text:
            gen.line(f"    {target} = bytes(b[p:p + {n}]).decode('utf-8', 'replace')")
        else:
            gen.line(f"    {target} = bytes(b[p:p + {n}])")
        gen.line(f"    p += {n}")

    def gen_encode(self, expr: str, gen: _Gen) -> None:
        v = gen.tmp()
        gen.line(f"{v} = {expr}")
        gen.line(f"if {v} is None:")
        gen.line("    out.append(_NULL)")
        gen.line("else:")
        if self.text:
            gen.line(f"    {v} = {v}.encode('utf-8')")
        gen.line(f"    out.append(_I.pack(len({v})))")
        gen.line(f"    out.append({v})")


BUFFER = _Bytes(text=False)
USTRING = _Bytes(text=True)


class Vector(JuteType):
    """``vector<T>``; decodes to a tuple (records are immutable) or None."""

    def __init__(self, item: JuteType) -> None:
        self.item = item
        self.jute_name = f"vector<{item.jute_name}>"

    def subcon(self) -> cs.Construct:
        from trizk.jute import reference

        return reference.NullableVector(self.item.subcon())

    def python_type(self) -> Any:
        return tuple[self.item.python_type(), ...] | None  # type: ignore[misc]

    def gen_decode(self, target: str, gen: _Gen) -> None:
        n, acc, i, item = gen.tmp(), gen.tmp(), gen.tmp(), gen.tmp()
        gen.line(f"{n}, = _I.unpack_from(b, p)")
        gen.line("p += 4")
        gen.line(f"if {n} == -1:")
        gen.line(f"    {target} = None")
        gen.line("else:")
        # A count below -1 is an empty vector (startVector/done() in Java). Every element takes
        # at least one byte, so a count beyond what is left cannot decode: fail fast.
        gen.line(f"    if {n} > len(b) - p:")
        gen.line(f"        raise _Err('bad vector length %d' % {n})")
        gen.line(f"    {acc} = []")
        gen.line(f"    for {i} in range({n}):")
        gen.indent += 2
        _gen_decode_value(self.item, item, gen)
        gen.line(f"{acc}.append({item})")
        gen.indent -= 2
        gen.line(f"    {target} = tuple({acc})")

    def gen_encode(self, expr: str, gen: _Gen) -> None:
        v, item = gen.tmp(), gen.tmp()
        gen.line(f"{v} = {expr}")
        gen.line(f"if {v} is None:")
        gen.line("    out.append(_NULL)")
        gen.line("else:")
        gen.line(f"    out.append(_I.pack(len({v})))")
        gen.line(f"    for {item} in {v}:")
        gen.indent += 2
        _gen_encode_value(self.item, item, gen)
        gen.indent -= 2


class RecordType(JuteType):
    """A nested record used as a field type."""

    def __init__(self, cls: type[Record]) -> None:
        self.cls = cls
        self.jute_name = cls.__name__

    def subcon(self) -> cs.Construct:
        from trizk.jute import reference

        return reference.RecordAdapter(self.cls)

    def python_type(self) -> Any:
        return self.cls

    def gen_decode(self, target: str, gen: _Gen) -> None:
        _compile(self.cls)  # the nested record's own codec, not its compile-on-first-use stub
        f = gen.const(self.cls.decode_from, "dec")
        gen.line(f"{target}, p = {f}(b, p)")

    def gen_encode(self, expr: str, gen: _Gen) -> None:
        _compile(self.cls)
        f = gen.const(self.cls._encode_into, "enc")
        gen.line(f"{f}({expr}, out)")


# --------------------------------------------------------------------------------------------
# Code generation
# --------------------------------------------------------------------------------------------


class _Gen:
    """Accumulates generated source lines and the constants they refer to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 1
        self.ns: dict[str, Any] = {
            "_I": struct.Struct(">i"),
            "_NULL": struct.pack(">i", -1),
            "_limits": _LIMITS_VAR.get,
            "_Err": JuteDecodeError,
        }
        self._n = 0

    def line(self, s: str) -> None:
        self.lines.append("    " * self.indent + s)

    def tmp(self) -> str:
        self._n += 1
        return f"_t{self._n}"

    def const(self, value: Any, hint: str) -> str:
        self._n += 1
        name = f"_{hint}{self._n}"
        self.ns[name] = value
        return name


def _gen_decode_value(t: JuteType, target: str, gen: _Gen) -> None:
    if t.fixed is not None:
        _Fixed.gen_decode(t, target, gen)  # type: ignore[arg-type]
    else:
        t.gen_decode(target, gen)


def _gen_encode_value(t: JuteType, expr: str, gen: _Gen) -> None:
    if t.fixed is not None:
        _Fixed.gen_encode(t, expr, gen)  # type: ignore[arg-type]
    else:
        t.gen_encode(expr, gen)


def _runs(fields: Sequence[tuple[str, JuteType]]) -> list[list[tuple[str, JuteType]]]:
    """Group consecutive fixed-width fields so each group is one struct call."""
    runs: list[list[tuple[str, JuteType]]] = []
    for name, t in fields:
        if t.fixed is not None and runs and runs[-1][0][1].fixed is not None:
            runs[-1].append((name, t))
        else:
            runs.append([(name, t)])
    return runs


def _compile(cls: type[Record]) -> None:
    """Generate ``cls``'s fast codec, once: on the first decode or encode of the record (about
    a millisecond per record, which a server that starts in a fraction of a second does not
    spend on the records it never sees), or when a record that nests it is compiled."""
    if "decode_from" in cls.__dict__:
        return
    fields = cls.FIELDS
    # decode_from(b, p) -> (record, p)
    gen = _Gen()
    names = [f"v_{name}" for name, _ in fields]
    for run in _runs(fields):
        if run[0][1].fixed is not None:
            fmt = ">" + "".join(t.fixed or "" for _, t in run)
            st = gen.const(struct.Struct(fmt), "st")
            targets = ", ".join(f"v_{name}" for name, _ in run)
            gen.line(f"{targets}, = {st}.unpack_from(b, p)")
            gen.line(f"p += {struct.calcsize(fmt)}")
        else:
            name, t = run[0]
            t.gen_decode(f"v_{name}", gen)
    gen.ns["_new"] = object.__new__
    gen.ns["_set"] = object.__setattr__
    gen.ns["_cls"] = cls
    gen.line("o = _new(_cls)")
    for (name, _), var in zip(fields, names, strict=True):
        gen.line(f"_set(o, {name!r}, {var})")
    gen.line("return o, p")
    body = "\n".join(gen.lines) or "    pass"
    src = (
        "def decode_from(b, p):\n"
        "    try:\n"
        + "\n".join("    " + ln for ln in body.splitlines())
        + "\n    except _Err:\n        raise\n"
        "    except Exception as e:\n"
        f"        raise _Err('cannot decode {cls.__name__}: %s' % (e,)) from None\n"
    )
    dec_ns = dict(gen.ns)
    exec(compile(src, f"<jute {cls.__name__}.decode_from>", "exec"), dec_ns)

    # _encode_into(self, out)
    gen = _Gen()
    for run in _runs(fields):
        if run[0][1].fixed is not None:
            fmt = ">" + "".join(t.fixed or "" for _, t in run)
            st = gen.const(struct.Struct(fmt), "st")
            args = ", ".join(f"self.{name}" for name, _ in run)
            gen.line(f"out.append({st}.pack({args}))")
        else:
            name, t = run[0]
            t.gen_encode(f"self.{name}", gen)
    if not gen.lines:
        gen.line("pass")
    src = "def _encode_into(self, out):\n" + "\n".join(gen.lines) + "\n"
    enc_ns = dict(gen.ns)
    exec(compile(src, f"<jute {cls.__name__}._encode_into>", "exec"), enc_ns)

    # _encode_into first: decode_from in the class dict is what marks it compiled
    cls._encode_into = enc_ns["_encode_into"]  # type: ignore[method-assign]
    cls.decode_from = staticmethod(dec_ns["decode_from"])  # type: ignore[method-assign]


class _ConstructOnFirstUse:
    """``Record.construct``: the reference Struct, built when first asked for (only the
    reference codec and the tests use it), then kept on the record class."""

    def __get__(self, obj: Any, owner: type[Record]) -> cs.Construct:
        from trizk.jute import reference

        built = reference.struct_of(owner)
        owner.construct = built
        return built


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------

R = TypeVar("R", bound="Record")


class _FieldSpec:
    __slots__ = ("jute",)

    def __init__(self, jute: JuteType) -> None:
        self.jute = jute


def field(jute: JuteType | type[Record]) -> Any:
    """Declare one record field by its Jute type (or a record class, for nested records)."""
    if isinstance(jute, type) and issubclass(jute, Record):
        jute = RecordType(jute)
    assert isinstance(jute, JuteType)
    return _FieldSpec(jute)


# A Python class when compiled too: the records are dataclasses made by a decorator (mypyc
# leaves such classes to Python, and they may not derive from a compiled class), and their
# codecs are generated at run time and set on each record class. The dataclass_transform is
# on this base (PEP 681 allows either), not on :func:`record`: a compiled function takes no
# attributes, and the decorator sets one.
@dataclass_transform(frozen_default=True, field_specifiers=(field,))
@mypyc_attr(native_class=False)
class Record:
    """Base of every declared record. Subclasses are frozen slotted dataclasses."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[tuple[str, JuteType], ...]] = ()
    #: Jute module the record belongs to (``data``, ``proto``, ``txn``, ...).
    MODULE: ClassVar[str] = ""
    construct: ClassVar[Any] = _ConstructOnFirstUse()

    # Until a record class is first used, these compile its codec (:func:`_compile`), which
    # then replaces them on the class.
    @classmethod
    def decode_from(cls, b: bytes | memoryview, p: int) -> tuple[Any, int]:
        _compile(cls)
        return cls.decode_from(b, p)

    def _encode_into(self, out: list[bytes]) -> None:
        _compile(type(self))
        type(self)._encode_into(self, out)

    @classmethod
    def decode(cls: type[R], b: bytes | memoryview) -> R:
        """Decode exactly one record occupying all of ``b``."""
        rec, p = cls.decode_from(b, 0)
        if p != len(b):
            raise JuteDecodeError(f"{cls.__name__}: {len(b) - p} trailing bytes")
        return rec

    def encode(self) -> bytes:
        out: list[bytes] = []
        self._encode_into(out)
        return b"".join(out)

    # Reference path (construct, :mod:`trizk.jute.reference`): cross-checks the generated codec.
    @classmethod
    def parse_reference(cls: type[R], b: bytes) -> R:
        from trizk.jute import reference

        return reference.parse(cls, b)

    def build_reference(self) -> bytes:
        from trizk.jute import reference

        return reference.build(self)


def fixed_struct(cls: type[Record]) -> struct.Struct:
    """The ``struct.Struct`` of a record whose fields are all fixed width (``Stat``,
    ``StatPersisted``), in declaration order: for a hot path that packs such a record straight
    from values it holds, without making the record. ValueError for any other record."""
    fmt = "".join(t.fixed or "" for _, t in cls.FIELDS)
    if not cls.FIELDS or any(t.fixed is None for _, t in cls.FIELDS):
        raise ValueError(f"{cls.__name__} has fields of variable width")
    return struct.Struct(">" + fmt)


def vector(item: JuteType | type[Record]) -> Vector:
    if isinstance(item, type) and issubclass(item, Record):
        item = RecordType(item)
    assert isinstance(item, JuteType)
    return Vector(item)


def record(module: str) -> Callable[[type[R]], type[R]]:
    """Class decorator: declare a Jute record from annotated ``Field`` class attributes.

    Usage::

        @record("proto")
        class GetDataRequest(Record):
            path: str = field(USTRING)
            watch: bool = field(BOOL)
    """

    def wrap(cls: type[R]) -> type[R]:
        jute_fields: list[tuple[str, JuteType]] = []
        for name in inspect.get_annotations(cls):
            spec = cls.__dict__.get(name)
            if not isinstance(spec, _FieldSpec):
                raise TypeError(f"{cls.__name__}.{name}: use field(JUTE_TYPE)")
            jute_fields.append((name, spec.jute))
            delattr(cls, name)
        dc = dataclasses.dataclass(frozen=True, slots=True)(cls)
        dc.FIELDS = tuple(jute_fields)
        dc.MODULE = module
        _fast_init(dc)
        return dc

    return wrap


def _fast_init(cls: type) -> None:
    """Give a frozen slotted dataclass an ``__init__`` that stores each field through its slot
    descriptor: the dataclass's own calls ``object.__setattr__`` per field (to get past the
    frozen ``__setattr__``), which made building a record ~2x slower -- and a request builds
    several (a txn's header, its body, the reply's Stat). Same signature, same instances."""
    fields = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or any(
        f.default_factory is not dataclasses.MISSING or not f.init for f in fields
    ):
        return  # (none of the Jute records; keep the dataclass's own)
    ns: dict[str, Any] = {}
    params, body = [], []
    for i, f in enumerate(fields):
        ns[f"_set{i}"] = getattr(cls, f.name).__set__
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            ns[f"_default{i}"] = f.default
            params.append(f"{f.name}=_default{i}")
        body.append(f"    _set{i}(self, {f.name})\n")
    src = f"def __init__(self, {', '.join(params)}):\n" + ("".join(body) or "    pass\n")
    exec(src, ns)  # generated from the class's own field names
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[misc]
