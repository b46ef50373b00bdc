"""Request bodies as ZooKeeper reads them, and the server side of multi / multiRead. Pure.

Theory
------
ZooKeeper decodes a request body with ``ByteBufferInputStream.byteBuffer2Record``: the record's
fields are read from the start of the body and *whatever follows them is ignored* (there is no
end-of-record check), so a request with trailing bytes is answered as if they were not there.
:func:`decode_body` does the same; a body too short for its record (or with a bad length) is a
:class:`JuteDecodeError`, answered MARSHALLINGERROR as ZooKeeper's IOException is.

A multi and a multiRead carry the same ``MultiOperationRecord``; :func:`parse_multi` reads it
with the one multi codec, :func:`trizk.jute.multi.decode_request` (the rules of
``MultiOperationRecord.deserialize`` are written there: known op types only, no mixing of read
and write ops, bytes after the end marker ignored, a create op's type from its flags, read ops
unwatched). A
createTTL op it makes from TTL flags has no TTL record, which prep then fails as ZooKeeper's
ClassCastException. The MultiResponse is written with the same codec's
:func:`~trizk.jute.multi.encode_result` / :func:`~trizk.jute.multi.encode_error`.

What ZooKeeper 3.8.0 answers (checked against the real server, ``compat/scenarios/malformed.json``):

* multi, undecodable: one MARSHALLINGERROR without a body; a zxid is consumed (the txn header
  is made before the exception, ``PrepRequestProcessor.pRequestHelper``).
* multi with a null path in *any* op: ``getPendingChanges`` throws a NullPointerException
  before the txn header exists, so no zxid is consumed, and ``FinalRequestProcessor`` then
  fails on the missing multi result after it made an empty ``MultiResponse``: the answer is
  MARSHALLINGERROR *with* that empty response (the end marker) as its body
  (:data:`EMPTY_MULTI_RESPONSE`, :func:`multi_without_txn`).
* multiRead, undecodable: MARSHALLINGERROR, no body. Decoded: the ops run in order; a
  KeeperException is that op's error result, but a write op ("Invalid type of readOp") or a
  null path (NullPointerException) stops there and the answer is MARSHALLINGERROR with the
  results so far as its body (:func:`run_multi_read`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from trizk.jute import multi
from trizk.jute import records as r
from trizk.jute.codes import Code, CreateMode, JavaRuntimeError, KeeperError, OpCode
from trizk.jute.primitives import JuteDecodeError
from trizk.storage.tree.datatree import ApplyResult

R = TypeVar("R", bound=r.Record)

_ERR = struct.Struct(">i")
_HEADER_LEN = 8  # RequestHeader: xid, type
#: a MultiResponse with no results: just the done header
EMPTY_MULTI_RESPONSE = multi.END


def decode_body(cls: type[R], frame: bytes) -> R:
    """The request record after the 8-byte header; trailing bytes are ignored (see above)."""
    rec, _ = cls.decode_from(memoryview(frame), _HEADER_LEN)
    return rec


MultiOp = multi.MultiOp


def parse_multi(frame: bytes, *, zk39: bool = False) -> list[MultiOp]:
    """A MultiOperationRecord after the request header (:func:`trizk.jute.multi.decode_request`);
    raises JuteDecodeError as ``MultiOperationRecord.deserialize`` throws IOException.
    ``zk39``: read as ZooKeeper 3.9 does (a create2 op stays create2, ZOOKEEPER-4026)."""
    return multi.decode_request(memoryview(frame), _HEADER_LEN, create2=zk39)


def multi_fails_whole_39(ops: list[MultiOp]) -> bool:
    """ZooKeeper 3.9 fails a write multi as a whole (MARSHALLINGERROR without a body, a zxid
    consumed: the txn header exists by then) when an op has a null path (3.8:
    :func:`multi_without_txn`) or a create op has flags no CreateMode has (3.9's
    ``CreateMode.fromFlag`` throws; 3.8 reads them as PERSISTENT and answers that op
    BADARGUMENTS), or a create op has TTL flags without a TTL (as measured on the live 3.9.3:
    whatever ops precede it)."""
    for op, rec in ops:
        if getattr(rec, "path", "") is None:
            return True
        if op in _CREATE_OPS:
            try:
                CreateMode(getattr(rec, "flags", 0))
            except ValueError:
                return True
            if op == OpCode.CREATETTL and not isinstance(rec, r.CreateTTLRequest):
                return True  # TTL flags under a create op (3.8: ClassCastException in prep)
    return False


_CREATE_OPS = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.CREATECONTAINER, OpCode.CREATETTL})


#: The create ops 3.9's ``MultiOperationRecord.deserialize`` builds ``CreateOptions`` for (a
#: createTTL op goes through ``Op.create(..., ttl)``, which takes a null ACL list).
_OPTIONS_CREATES = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.CREATECONTAINER})


def multi_without_txn_39(frame: bytes) -> bool:
    """True for a multi ZooKeeper 3.9 answers MARSHALLINGERROR without a txn and without a
    body: a create, create2 or createContainer op's ACL list is null (3.8: that op's
    INVALIDACL). 3.9's ``MultiOperationRecord.deserialize`` reads the ops in order and, for
    such a create, checks its flags (``CreateMode.fromFlag(flags, null)``: IOException) before
    ``CreateOptions.Builder``'s ``requireNonNull(acl)`` (NullPointerException) and its TTL
    (``validateTTL``: IllegalArgumentException); the prep processor sets a txn header (a zxid
    taken, :func:`multi_fails_whole_39`) for an IOException, none for the NullPointerException
    (measured on the live 3.9.3: no zxid is taken). So the first op that fails to read decides:
    an op that does not decode, a create of unknown flags, a mix of read and write ops or a TTL
    mode under a create before the null ACL list take a zxid; a null ACL list before them does
    not."""
    pos = _HEADER_LEN
    kind: bool | None = None  # True: read ops
    while True:
        try:
            typ, done, _err, rec, pos = multi.read_op(frame, pos, multi.REQUEST_RECORDS)
        except JuteDecodeError:
            return False
        if done or rec is None:
            return False
        if typ in _OPTIONS_CREATES:
            try:
                mode = CreateMode(getattr(rec, "flags", 0))
            except ValueError:
                return False  # "invalid flag ... for create mode": IOException first
            if getattr(rec, "acl", ()) is None:
                return True
            if mode.ttl:
                return False  # validateTTL(mode, -1) fails building the CreateOptions
        is_read = typ in multi.READ_KIND
        if kind is not None and kind != is_read:
            return False  # "Mixing different kind of ops"
        kind = is_read


def multi_without_txn(frame: bytes) -> bool:
    """True for a multi ZooKeeper 3.8 answers without a txn: it decodes, and an op has a null
    path (``getPendingChanges``' NullPointerException; answer: MARSHALLINGERROR with
    :data:`EMPTY_MULTI_RESPONSE`)."""
    try:
        ops = parse_multi(frame)
    except JuteDecodeError:
        return False
    return any(getattr(rec, "path", "") is None for _, rec in ops)


def _path(rc: ApplyResult) -> bytes:
    p = (rc.path or "").encode("utf-8")
    return _ERR.pack(len(p)) + p


def _stat(rc: ApplyResult) -> bytes:
    assert rc.stat is not None
    return rc.stat


def _path_stat(rc: ApplyResult) -> bytes:
    return _path(rc) + _stat(rc)


#: op -> (the op a MultiResponse's result names, the response body of its applied txn):
#: CreateResponse (path), Create2Response (path, Stat), SetDataResponse / SetACLResponse
#: (Stat); None: no body (delete, check).
WRITE_RESULTS: dict[int, tuple[int, Callable[[ApplyResult], bytes] | None]] = {
    OpCode.CREATE: (OpCode.CREATE, _path),
    OpCode.CREATE2: (OpCode.CREATE2, _path_stat),
    OpCode.CREATETTL: (OpCode.CREATE2, _path_stat),
    OpCode.CREATECONTAINER: (OpCode.CREATE2, _path_stat),
    OpCode.DELETE: (OpCode.DELETE, None),
    OpCode.DELETECONTAINER: (OpCode.DELETE, None),
    OpCode.SETDATA: (OpCode.SETDATA, _stat),
    OpCode.SETACL: (OpCode.SETACL, _stat),
    OpCode.CHECK: (OpCode.CHECK, None),
}


def multi_response(rc: ApplyResult) -> bytes:
    """The MultiResponse of an applied multi txn: each op's result, then the done header."""
    out: list[bytes] = []
    for sub in rc.multi or ():
        if sub.type == OpCode.ERROR:
            multi.encode_error(sub.err, out)
            continue
        result = WRITE_RESULTS.get(sub.type)
        if result is not None:
            op, body = result
            multi.encode_result(op, body(sub) if body is not None else None, out)
    out.append(EMPTY_MULTI_RESPONSE)
    return b"".join(out)


ReadHandler = Callable[[Any], r.Record | None]


def run_multi_read(ops: list[MultiOp], handlers: Mapping[int, ReadHandler]) -> tuple[int, bytes]:
    """FinalRequestProcessor's multiRead: (reply error, MultiResponse bytes). ``handlers`` maps
    getData/getChildren to a function of the request record that returns the response or
    raises KeeperError (that op's error result) or ValueError (stops: MARSHALLINGERROR)."""
    out: list[bytes] = []
    err = 0
    for op, req in ops:
        fn = handlers.get(op)
        if fn is None:  # IOException("Invalid type of readOp")
            err = Code.MARSHALLINGERROR
            break
        try:
            rsp = fn(req)
        except KeeperError as e:
            multi.encode_error(e.code, out)
            continue
        except (JavaRuntimeError, JuteDecodeError):
            err = Code.MARSHALLINGERROR
            break
        multi.encode_result(op, rsp, out)
    out.append(EMPTY_MULTI_RESPONSE)
    return err, b"".join(out)
