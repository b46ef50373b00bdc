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
