"""The multi codec: ``MultiOperationRecord`` (a multi or multiRead request) and ``MultiResponse``.

Grammar (``proto`` module of ``zookeeper.jute``; ``MultiOperationRecord`` / ``MultiResponse``
write it by hand, it is not a Jute record)::

    multi-request  = *( header(type, done=false, err=-1) op-record ) end
    multi-response = *( header(type, done=false, err) [result-record] ) end
    header         = MultiHeader{int type, boolean done, int err}      ; 9 bytes
    end            = MultiHeader{-1, true, -1}                          ; :data:`END`

Requests and responses share the header and the end marker. This module is the one place that
knows them, the op records each header type announces, and ZooKeeper's reading rules:

* :func:`decode_request` reads a request as ``MultiOperationRecord.deserialize`` does: the op
  types of :data:`REQUEST_RECORDS` only (``IOException("Invalid type of op")`` otherwise), no
  mixing of read (:data:`READ_KIND`) and write ops, nothing read after the end marker, a
  truncated record or a missing end marker an error. A create op's type comes from its flags,
  as ``Op.create(path, data, acl, flags)`` chooses it (create2 reads as create; flags 4 as
  createContainer; TTL flags as createTTL *without* a TTL record), and read ops carry
  ``watch = false`` whatever the wire says (``Op.getData(path)``). ZooKeeper 3.9 keeps a
  create2 op's type (``create2=True``; ZOOKEEPER-4026: its result then carries the Stat).
* :func:`decode_response` reads a ``MultiResponse`` for a client: each result is a
  :class:`MultiResult` whose body is the record :data:`RESULT_RECORDS` names for its type
  (an ``ErrorResponse`` for an error result). Unlike ZooKeeper's client, which throws on a type
  it does not know, it keeps such a result without a body and reads on: the oracle tools that
  use it must see what a server sent, not stop at it.
* :func:`encode_request` writes a request; :func:`encode_result`, :func:`encode_error` and
  :data:`END` write a response.

Every decoding failure is a :class:`JuteDecodeError`. :func:`read_op` is the step all decoders
take (one header and, when the table names one, the record after it); tools that walk a multi
their own way (annotating captures, describing requests in a log) use it too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from trizk.jute import records as r
from trizk.jute.codes import CreateMode, OpCode
from trizk.jute.primitives import JuteDecodeError, Record

__all__ = [
    "END",
    "HEADER",
    "READ_KIND",
    "REQUEST_RECORDS",
    "RESULT_RECORDS",
    "MultiOp",
    "MultiResult",
    "decode_request",
    "decode_response",
    "encode_error",
    "encode_request",
    "encode_result",
    "read_op",
]

#: ``MultiHeader{type, done, err}``
HEADER: Final = struct.Struct(">i?i")
#: The end marker of a request and of a response; alone, the empty MultiResponse.
END: Final = HEADER.pack(-1, True, -1)
_ERR: Final = struct.Struct(">i")

#: ``MultiOperationRecord.deserialize``: op type -> request record.
REQUEST_RECORDS: Final[dict[int, type[Record]]] = {
    OpCode.CREATE: r.CreateRequest,
    OpCode.CREATE2: r.CreateRequest,
    OpCode.CREATECONTAINER: r.CreateRequest,
    OpCode.CREATETTL: r.CreateTTLRequest,
    OpCode.DELETE: r.DeleteRequest,
    OpCode.SETDATA: r.SetDataRequest,
    OpCode.CHECK: r.CheckVersionRequest,
    OpCode.GETCHILDREN: r.GetChildrenRequest,
    OpCode.GETDATA: r.GetDataRequest,
}
#: ``Op.OpKind.READ``; every other op of :data:`REQUEST_RECORDS` is ``TRANSACTION``.
READ_KIND: Final = frozenset({OpCode.GETCHILDREN, OpCode.GETDATA})
#: ``MultiResponse.deserialize``: result type -> result record (``None``: no body). The
#: container and TTL creates (which a server answers as create2) read as create2 results.
RESULT_RECORDS: Final[dict[int, type[Record] | None]] = {
    OpCode.CREATE: r.CreateResponse,
    OpCode.CREATE2: r.Create2Response,
    OpCode.CREATECONTAINER: r.Create2Response,
    OpCode.CREATETTL: r.Create2Response,
    OpCode.DELETE: None,
    OpCode.SETDATA: r.SetDataResponse,
    OpCode.CHECK: None,
    OpCode.GETDATA: r.GetDataResponse,
    OpCode.GETCHILDREN: r.GetChildrenResponse,
    OpCode.ERROR: r.ErrorResponse,
}
_CREATES: Final = frozenset(
    {OpCode.CREATE, OpCode.CREATE2, OpCode.CREATECONTAINER, OpCode.CREATETTL}
)

#: One op of a request: (type, record).
MultiOp = tuple[int, Record]


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(init=False)
class MultiResult:
    """One result of a MultiResponse: its header's type and err, and its record (or None)."""

    type: int
    err: int
    body: Record | None

    def __init__(
        self,
        type: int,
        err: int,
        body: Record | None,
    ) -> None:
        self.type = type
        self.err = err
        self.body = body


def read_op(
    buf: bytes | memoryview, pos: int, records: Mapping[int, type[Record] | None]
) -> tuple[int, bool, int, Record | None, int]:
    """One header at ``pos`` and, unless it is done, the record ``records`` names for its type
    (None when it names none): ``(type, done, err, record, position after them)``."""
    if pos + 9 > len(buf):
        raise JuteDecodeError("truncated multi header")
    typ, done, err = HEADER.unpack_from(buf, pos)
    pos += 9
    rec: Record | None = None
    if not done:
        cls = records.get(typ)
        if cls is not None:
            rec, pos = cls.decode_from(buf, pos)
    return typ, done, err, rec, pos


def _op_type(typ: int, rec: Any, create2: bool = False) -> int:
    """The type ``Op.create`` gives a create op: from its flags (unknown flags: PERSISTENT);
    with ``create2`` a plain create2 stays create2 (3.9)."""
    if typ not in _CREATES:
        return typ
    try:
        mode = CreateMode(rec.flags)
    except ValueError:
        mode = CreateMode.PERSISTENT
    if mode.ttl:
        return OpCode.CREATETTL
    if mode.container:
        return OpCode.CREATECONTAINER
    return OpCode.CREATE2 if create2 and typ == OpCode.CREATE2 else OpCode.CREATE


def decode_request(buf: bytes | memoryview, pos: int, *, create2: bool = False) -> list[MultiOp]:
    """The ops of a MultiOperationRecord at ``pos``, as ``MultiOperationRecord.deserialize``
    reads them (see the module docstring); raises JuteDecodeError as it throws IOException.
    ``create2``: a create2 op keeps its type (ZooKeeper 3.9)."""
    ops: list[MultiOp] = []
    kind: bool | None = None  # True: read ops
    while True:
        typ, done, _err, rec, pos = read_op(buf, pos, REQUEST_RECORDS)
        if done:
            return ops
        if rec is None:
            raise JuteDecodeError(f"Invalid type of op {typ}")
        is_read = typ in READ_KIND
        if kind is not None and kind != is_read:
            raise JuteDecodeError("Mixing different kind of ops")
        kind = is_read
        op: Any = rec
        if is_read:
            op = type(op)(op.path, False)
        ops.append((_op_type(typ, op, create2), op))


def encode_request(ops: Iterable[MultiOp]) -> bytes:
    """A MultiOperationRecord: each op after a not-done header (err -1), then :data:`END`."""
    out: list[bytes] = []
    for typ, rec in ops:
        out.append(HEADER.pack(typ, False, -1))
        rec._encode_into(out)
    out.append(END)
    return b"".join(out)


def decode_response(
    buf: bytes | memoryview, pos: int, *, max_results: int | None = None
) -> tuple[list[MultiResult], int]:
    """The results of a MultiResponse at ``pos`` and the position after its end marker. More
    than ``max_results`` results is a JuteDecodeError."""
    results: list[MultiResult] = []
    while True:
        typ, done, err, rec, pos = read_op(buf, pos, RESULT_RECORDS)
        if done:
            return results, pos
        results.append(MultiResult(typ, err, rec))
        if max_results is not None and len(results) > max_results:
            raise JuteDecodeError("multi response too long")


def encode_result(op: int, rsp: Record | bytes | None, out: list[bytes]) -> None:
    """Append one result of a MultiResponse: its header (err 0) and record (or its bytes)."""
    out.append(HEADER.pack(op, False, 0))
    if isinstance(rsp, bytes):
        out.append(rsp)
    elif rsp is not None:
        rsp._encode_into(out)


def encode_error(code: int, out: list[bytes]) -> None:
    """Append an ErrorResult: its header (type error, err ``code``) and ErrorResponse."""
    out.append(HEADER.pack(OpCode.ERROR, False, code))
    out.append(_ERR.pack(code))
