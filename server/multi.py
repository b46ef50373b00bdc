"""The multi request and response codec (``MultiOperationRecord`` / ``MultiResponse``).

A multi (or multiRead) body is a run of ``MultiHeader{type, done, err}`` + op record, closed by
a header with ``done`` true (``-1, true, -1``). Responses use the same framing; a failed op is
``MultiHeader{ERROR(-1), false, code}`` + ``ErrorResponse{code}``.
"""

from __future__ import annotations

import struct
from typing import Any

from ..jute import records as r
from ..jute.codes import CreateMode, OpCode
from ..jute.primitives import JuteDecodeError
from ..storage.datatree import ApplyResult
from .prep import MULTI_SUB_OPS, WRITE_OPS
from .reads import MULTI_READ_OPS

__all__ = ["MULTI_END", "MULTI_HDR", "multi_response", "parse_multi"]

MULTI_HDR = struct.Struct(">i?i")
MULTI_END = MULTI_HDR.pack(-1, True, -1)


def parse_multi(frame: bytes, *, read: bool) -> list[tuple[int, r.Record]]:
    """MultiOperationRecord.deserialize: (MultiHeader, op record)* until done."""
    buf = memoryview(frame)
    pos = 8
    ops: list[tuple[int, r.Record]] = []
    limit = len(buf)
    while True:
        if pos + 9 > limit:
            raise JuteDecodeError("truncated multi header")
        typ, done, _err = MULTI_HDR.unpack_from(buf, pos)
        pos += 9
        if done:
            break
        if read:
            if typ not in MULTI_READ_OPS:
                raise JuteDecodeError(f"Invalid type of op {typ} in multiRead")
            cls: type[r.Record] = MULTI_READ_OPS[typ][0]
            rec, pos = cls.decode_from(buf, pos)
            ops.append((typ, rec))
            continue
        if typ not in MULTI_SUB_OPS:
            raise JuteDecodeError(f"Invalid type of op {typ}")
        cls = WRITE_OPS[typ][0]
        rec, pos = cls.decode_from(buf, pos)
        ops.append((_multi_op_type(typ, rec), rec))
    return ops


def _multi_op_type(typ: int, rec: Any) -> int:
    """A create sub-op's opcode comes from its flags, as ``Op.create`` picks it
    (``CreateMode.fromFlag(flags, PERSISTENT)``): so a create2 inside a multi answers like a
    create, and TTL/container modes become createTTL/createContainer."""
    if typ not in (OpCode.CREATE, OpCode.CREATE2, OpCode.CREATECONTAINER, OpCode.CREATETTL):
        return typ
    try:
        mode = CreateMode(rec.flags)
    except ValueError:
        mode = CreateMode.PERSISTENT
    if mode.ttl:
        if not isinstance(rec, r.CreateTTLRequest):
            raise JuteDecodeError("TTL create mode without a TTL in a multi")
        return OpCode.CREATETTL
    if mode.container:
        return OpCode.CREATECONTAINER
    return OpCode.CREATE


def multi_response(rc: ApplyResult) -> bytes:
    out: list[bytes] = []
    for sub in rc.multi or ():
        t = sub.type
        if t == OpCode.ERROR:
            out.append(MULTI_HDR.pack(OpCode.ERROR, False, sub.err))
            out.append(struct.pack(">i", sub.err))
        elif t == OpCode.CREATE:
            out.append(MULTI_HDR.pack(OpCode.CREATE, False, 0))
            r.CreateResponse(sub.path or "")._encode_into(out)
        elif t in (OpCode.CREATE2, OpCode.CREATETTL, OpCode.CREATECONTAINER):
            assert sub.stat is not None
            out.append(MULTI_HDR.pack(OpCode.CREATE2, False, 0))
            r.Create2Response(sub.path or "", sub.stat)._encode_into(out)
        elif t in (OpCode.DELETE, OpCode.DELETECONTAINER):
            out.append(MULTI_HDR.pack(OpCode.DELETE, False, 0))
        elif t == OpCode.SETDATA:
            assert sub.stat is not None
            out.append(MULTI_HDR.pack(OpCode.SETDATA, False, 0))
            r.SetDataResponse(sub.stat)._encode_into(out)
        elif t == OpCode.CHECK:
            out.append(MULTI_HDR.pack(OpCode.CHECK, False, 0))
    out.append(MULTI_END)
    return b"".join(out)
