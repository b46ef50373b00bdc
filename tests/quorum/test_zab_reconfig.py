"""Reconfig in the Zab machines (quorum/zab/leader.py, learner.py), scripted with the test
network of test_zab.py: a reconfig proposal and every proposal after it, until it commits,
need a quorum of the old *and* of the new configuration (``SyncedLearnerTracker``); its
commit goes out as COMMITANDACTIVATE (followers) / INFORMANDACTIVATE (observers) with the
designated leader, and every member's Ready carries the activation."""

from __future__ import annotations

import struct

from tests.quorum.test_zab import Net, kinds
from trizk.jute.codes import OpCode
from trizk.jute.records import SetDataTxn, TxnHeader
from trizk.quorum.verifier import QuorumVerifier, parse_config_string
from trizk.quorum.zab.zab import Activation, reconfig_config
from trizk.quorum.zab.zabwire import make_zxid
from trizk.storage.formats.txnlog import encode_txn

LINES = {
    s: f"server.{s}=127.0.0.1:{2000 + s}:{3000 + s}:participant;127.0.0.1:{4000 + s}"
    for s in (1, 2, 3)
}
OBSERVER = "server.4=127.0.0.1:2004:3004:observer;127.0.0.1:4004"


def config(sids: tuple[int, ...], version: int, observer: bool = True) -> QuorumVerifier:
    lines = [LINES[s] for s in sids] + ([OBSERVER] if observer else [])
    return parse_config_string("\n".join([*lines, f"version={version:x}"]))


def reconfig_entry(zxid: int, qv: QuorumVerifier) -> bytes:
    hdr = TxnHeader(7, 1, zxid, 1000, OpCode.RECONFIG)
    return encode_txn(hdr, SetDataTxn("/zookeeper/config", qv.to_string().encode(), -1), None)


def plain_entry(zxid: int) -> bytes:
    hdr = TxnHeader(7, 2, zxid, 1000, OpCode.SETDATA)
    return encode_txn(hdr, SetDataTxn("/a", b"x", 1), None)


def ensemble() -> Net:
    net = Net(3, 1)
    old = config((1, 2, 3), 0x100000000)
    net.leader.verifier = net.leader.last_seen = old
    net.connect()
    net.pump()
    assert net.leader.established
    return net


def activations(net: Net, sid: int) -> list[Activation]:
    return [a for rd in net.sides[sid].ready for a in rd.activated]


def test_reconfig_entries_are_recognised() -> None:
    qv = config((1, 2), 5)
    assert reconfig_config(reconfig_entry(5, qv)) == qv.to_string().encode()
    assert reconfig_config(plain_entry(5)) is None
    assert reconfig_config(b"short") is None


def test_a_reconfig_needs_both_quorums_and_activates_everywhere() -> None:
    net = ensemble()
    z = make_zxid(1, 1)
    new = config((1, 2), z)
    net.hold = {2}  # 2 is the only other voter of the new configuration
    assert net.leader.propose(z, reconfig_entry(z, new), new)
    assert net.leader.propose(z + 1, plain_entry(z + 1))
    net.pump()
    # 1 and 3 are a quorum of {1,2,3}, not of {1,2}: nothing commits, the next one neither
    assert net.sides[1].applied == []
    assert [rd.last_seen_config for rd in net.sides[1].ready if rd.last_seen_config] == [
        new.to_string().encode()
    ]
    for s in (2, 3):  # followers see the proposed configuration (the .next file)
        assert new.to_string().encode() in [rd.last_seen_config for rd in net.sides[s].ready]
    net.release(2)
    assert net.sides[1].applied == [z, z + 1]
    lead = struct.pack(">q", 1)
    to = {
        s: [m.packet for rd in net.sides[1].ready for m in rd.messages if m.link == s]
        for s in (2, 3, 4)
    }
    assert kinds(to[2])[-2:] == ["COMMITANDACTIVATE", "COMMIT"]
    assert to[2][-2].data == lead and to[2][-2].zxid == z
    assert kinds(to[4])[-2:] == ["INFORMANDACTIVATE", "INFORM"]
    assert to[4][-2].data == lead + reconfig_entry(z, new)
    want = [Activation(z, new.to_string().encode(), 1)]
    for s in (1, 2, 3, 4):
        assert activations(net, s) == want, s
        assert net.sides[s].applied == [z, z + 1], s
    # from now on the new configuration alone counts: 1 and 2
    net.hold = {3}
    assert net.leader.propose(z + 2, plain_entry(z + 2))
    net.pump()
    assert net.sides[1].applied[-1] == z + 2
    assert net.leader.config_version == z


def test_a_reconfig_that_removes_the_leader_designates_a_follower() -> None:
    net = ensemble()
    z = make_zxid(1, 1)
    new = config((2, 3), z)
    assert net.leader.propose(z, reconfig_entry(z, new), new)
    net.pump()
    assert activations(net, 1) == [Activation(z, new.to_string().encode(), 2)]
    assert activations(net, 3)[0].leader == 2
    # allowedToCommit: the old leader commits nothing more
    assert not net.leader.allowed_to_commit
    assert net.leader.propose(z + 1, plain_entry(z + 1))
    net.pump()
    assert net.sides[1].applied == [z]


def test_designated_leader_acked_the_most_of_what_follows() -> None:
    net = ensemble()
    z = make_zxid(1, 1)
    new = config((2, 3), z)
    net.hold = {2}  # 2 ACKs the reconfig late and nothing after it: 3 is the better leader
    assert net.leader.propose(z, reconfig_entry(z, new), new)
    net.pump()
    assert net.leader.propose(z + 1, plain_entry(z + 1))
    net.pump()
    assert net.sides[1].applied == []
    net.appliers[2].synced(net.appended[2] - 1)  # 2's ACK of the reconfig only
    net.pump()
    assert net.sides[1].applied == [z]  # then 3 is designated: z + 1 is its to commit
    assert activations(net, 1)[0].leader == 3


def test_newleader_needs_a_quorum_of_the_last_seen_configuration_too() -> None:
    """Leader.lead: ``newLeaderProposal`` holds the committed verifier and, when newer, the
    last seen one (a reconfig the new leader logged and nobody committed): establishing the
    epoch commits that reconfig, so a quorum of the proposed configuration must be synced."""
    net = Net(3, 1)
    net.leader.verifier = config((1, 2, 3), 0x100000000)
    net.leader.last_seen = config((1, 2), 0x100000005)
    net.connect(3, 4)
    net.pump()
    # 1 and 3 are a quorum of {1,2,3}, not of {1,2}
    assert not net.leader.established
    net.connect(2)
    net.pump()
    assert net.leader.established
