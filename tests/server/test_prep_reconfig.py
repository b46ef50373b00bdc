"""prep of a reconfig request (server/writes/prep.py ``prep_reconfig``): the checks in
ZooKeeper's order, and the SetDataTxn on /zookeeper/config that a leader proposes."""

from __future__ import annotations

import pytest

from trizk.jute import records as r
from trizk.jute.codes import Code, OpCode
from trizk.quorum.reconfig import LeaderConfigView
from trizk.quorum.verifier import QuorumVerifier, parse_config_string
from trizk.server.writes.prep import PendingChanges, PrepContext, PrepError, prep_reconfig
from trizk.storage.tree.datatree import CONFIG_NODE, DataTree

THREE = parse_config_string(
    "server.1=127.0.0.1:2001:3001:participant;127.0.0.1:4001\n"
    "server.2=127.0.0.1:2002:3002:participant;127.0.0.1:4002\n"
    "server.3=127.0.0.1:2003:3003:participant;127.0.0.1:4003\n"
    "version=100000000"
)
ZXID = 0x100000005
SUPER = [("super", "")]


def prep(
    req: r.ReconfigRequest,
    *,
    auth: list[tuple[str, str]] = SUPER,
    enabled: bool = True,
    leader: bool = True,
    synced: frozenset[int] = frozenset({1, 2, 3}),
    committed: int = THREE.version,
) -> tuple[PrepContext, PendingChanges, tuple[int, r.Record | None]]:
    tree = DataTree()
    tree.set_config(THREE.to_string().encode(), 1, THREE.version)
    pv = PendingChanges(tree)

    def quorum_synced(qv: QuorumVerifier) -> bool:
        return qv.contains_quorum(set(synced) & set(qv.voting_members))

    view = LeaderConfigView(THREE, committed, quorum_synced) if leader else None
    ctx = PrepContext(7, ZXID, 1234, auth, reconfig_enabled=enabled, reconfig=view)
    return ctx, pv, prep_reconfig(OpCode.RECONFIG, req, pv, ctx)


def code(req: r.ReconfigRequest, **kw: object) -> int:
    with pytest.raises(PrepError) as err:
        prep(req, **kw)  # type: ignore[arg-type]
    return err.value.code


def test_reconfig_becomes_a_set_data_of_the_config_node() -> None:
    ctx, pv, (op, txn) = prep(r.ReconfigRequest(None, "3", None, -1))
    assert op == OpCode.RECONFIG and isinstance(txn, r.SetDataTxn)
    assert txn.path == CONFIG_NODE and txn.version == -1
    want = (
        "server.1=127.0.0.1:2001:3001:participant;127.0.0.1:4001\n"
        "server.2=127.0.0.1:2002:3002:participant;127.0.0.1:4002\n"
        "version=100000005"
    )
    assert txn.data == want.encode()
    assert ctx.proposed_config is not None and ctx.proposed_config.version == ZXID
    rec = pv.get(CONFIG_NODE)
    assert (rec.data, rec.version, rec.mzxid, rec.mtime) == (want.encode(), -1, ZXID, 1234)


def test_refusals_in_zookeepers_order() -> None:
    leave3 = r.ReconfigRequest(None, "3", None, -1)
    assert code(leave3, enabled=False) == Code.RECONFIGDISABLED
    assert code(leave3, leader=False) == Code.UNIMPLEMENTED
    assert code(leave3, committed=0) == Code.RECONFIGINPROGRESS
    assert code(r.ReconfigRequest(None, "3", None, 5)) == Code.BADVERSION
    # no synced quorum of the new configuration comes before the ACL check
    assert code(leave3, synced=frozenset({1}), auth=[]) == Code.NEWCONFIGNOQUORUM
    assert code(leave3, auth=[]) == Code.NOAUTH
    assert code(leave3, auth=[("digest", "bob:x")]) == Code.NOAUTH
    # a joiner that is not connected yet: 1, 2 and 3 are a quorum of the four
    _, _, (_, txn) = prep(r.ReconfigRequest("server.4=127.0.0.1:2004:3004;4004", None, None, -1))
    assert isinstance(txn, r.SetDataTxn) and b"server.4=" in (txn.data or b"")
    two_new = "server.4=127.0.0.1:2004:3004;4004,server.5=127.0.0.1:2005:3005;4005"
    assert code(r.ReconfigRequest(two_new, None, None, -1), synced=frozenset({1, 2})) == (
        Code.NEWCONFIGNOQUORUM
    )
