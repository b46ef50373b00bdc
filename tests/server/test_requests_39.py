"""The multi rules of ZooKeeper 3.9 (server/frontend/requests.py), checked on the live servers by
compat/scenarios/zookeeper39.json: which multis fail whole, which get no txn, and a create2
op that keeps its type."""

from __future__ import annotations

import struct

from trizk.jute import records as R
from trizk.jute.codes import OpCode
from trizk.jute.multi import encode_request
from trizk.server.frontend.requests import (
    multi_fails_whole_39,
    multi_without_txn,
    multi_without_txn_39,
    parse_multi,
)

OPEN = (R.ACL(31, R.Id("world", "anyone")),)


def _frame(ops: list[tuple[int, R.Record]]) -> bytes:
    return struct.pack(">ii", 1, OpCode.MULTI) + encode_request(ops)


def test_create2_keeps_its_type_in_39() -> None:
    frame = _frame([(OpCode.CREATE2, R.CreateRequest("/a", b"", OPEN, 0))])
    assert parse_multi(frame)[0][0] == OpCode.CREATE
    assert parse_multi(frame, zk39=True)[0][0] == OpCode.CREATE2
    container = _frame([(OpCode.CREATE2, R.CreateRequest("/a", b"", OPEN, 4))])
    assert parse_multi(container, zk39=True)[0][0] == OpCode.CREATECONTAINER


def test_multis_that_fail_whole_in_39() -> None:
    ok = R.CreateRequest("/a", b"", OPEN, 0)

    def whole(*ops: tuple[int, R.Record]) -> bool:
        return multi_fails_whole_39(parse_multi(_frame(list(ops)), zk39=True))

    assert not whole((OpCode.CREATE, ok))
    assert whole((OpCode.CREATE, ok), (OpCode.CREATE, R.CreateRequest("/b", b"", OPEN, 7)))
    assert whole((OpCode.CREATE, ok), (OpCode.CREATE, R.CreateRequest("/b", b"", OPEN, 5)))
    assert whole((OpCode.DELETE, R.DeleteRequest(None, -1)))
    assert whole((OpCode.CHECK, R.CheckVersionRequest(None, -1)))
    assert not whole((OpCode.CREATETTL, R.CreateTTLRequest("/t", b"", OPEN, 5, 100)))


def test_a_null_acl_list_takes_no_txn_in_39() -> None:
    null_acl = _frame([(OpCode.CREATE, R.CreateRequest("/a", b"", None, 0))])
    assert multi_without_txn_39(null_acl) and not multi_without_txn(null_acl)
    null_path = _frame([(OpCode.CREATE, R.CreateRequest(None, b"", OPEN, 0))])
    assert multi_without_txn(null_path) and not multi_without_txn_39(null_path)


def test_the_first_op_that_fails_to_read_decides_in_39() -> None:
    """3.9's MultiOperationRecord.deserialize reads the ops in order; for a create it checks
    the flags, then the ACL list (no txn when null), then the TTL: scenario
    zk39_multi_first_failing_op_decides, found by the random mode."""

    def create(path: str, acl: tuple[R.ACL, ...] | None, flags: int) -> tuple[int, R.Record]:
        return OpCode.CREATE, R.CreateRequest(path, b"", acl, flags)

    def no_txn(*ops: tuple[int, R.Record]) -> bool:
        return multi_without_txn_39(_frame(list(ops)))

    assert not no_txn(create("/a", None, 7))  # the flags first: a zxid taken
    assert no_txn(create("/a", None, 5))  # the ACL list before the TTL
    assert not no_txn(create("/a", OPEN, 5), create("/b", None, 0))
    assert not no_txn(create("/a", OPEN, 7), create("/b", None, 0))
    assert no_txn(create("/a", None, 0), create("/b", OPEN, 7))
    assert no_txn((OpCode.CREATE2, R.CreateRequest("/a", b"", None, 0)))
    assert no_txn((OpCode.CREATECONTAINER, R.CreateRequest("/a", b"", None, 4)))
    # a createTTL op takes a null ACL list (that op's INVALIDACL in prep, as in 3.8)
    assert not no_txn((OpCode.CREATETTL, R.CreateTTLRequest("/t", b"", None, 5, 100)))
    # a read op then a create of a null ACL list: the NullPointerException before the mix
    get = (OpCode.GETDATA, R.GetDataRequest("/m", False))
    assert no_txn(get, create("/a", None, 0))
    assert not no_txn(get, create("/a", OPEN, 0), create("/b", None, 0))
    # an op that does not decode after the null ACL list is never read
    assert multi_without_txn_39(_frame([create("/a", None, 0), create("/b", OPEN, 0)])[:-6])
    assert not multi_without_txn_39(_frame([create("/a", OPEN, 0), create("/b", None, 0)])[:-14])
