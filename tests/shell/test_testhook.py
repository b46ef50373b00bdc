"""The test-only reconfig hold (server/shell/ensemble/testhook.py): its setting, the reconfig
proposal it recognises, and which packets each side lets through once it tripped. The
process tests using it are tests/compat/test_reconfig_kill.py."""

from __future__ import annotations

import pytest

from tests.quorum.test_zab_reconfig import config, plain_entry, reconfig_entry
from trizk.quorum.zab.zabwire import PacketType, make_zxid, packet
from trizk.server.shell.ensemble.testhook import (
    FollowerHold,
    HoldSpec,
    LeaderHold,
    parse_hold,
    reconfig_zxid,
)

Z = make_zxid(1, 7)
RECONFIG = packet(PacketType.PROPOSAL, Z, reconfig_entry(Z, config((1, 2), Z)))
PLAIN = packet(PacketType.PROPOSAL, Z + 1, plain_entry(Z + 1))
PING = packet(PacketType.PING, Z)


def test_settings() -> None:
    assert parse_hold(None) is None and parse_hold(" ") is None
    assert parse_hold("leader:") == HoldSpec("leader", frozenset())
    assert parse_hold("leader:1, 3") == HoldSpec("leader", frozenset({1, 3}))
    assert parse_hold("follower:drop") == HoldSpec("follower")
    assert parse_hold("follower:log") == HoldSpec("follower", log_it=True)
    for bad in ("leader:x", "follower", "follower:keep", "observer:drop"):
        with pytest.raises(ValueError, match=r"trizk\.test\.reconfigHold"):
            parse_hold(bad)


def test_only_a_reconfig_proposal_trips_it() -> None:
    assert reconfig_zxid(RECONFIG) == Z
    assert reconfig_zxid(PLAIN) is None and reconfig_zxid(PING) is None
    assert reconfig_zxid(packet(PacketType.COMMIT, Z)) is None


def test_leader_side(caplog: pytest.LogCaptureFixture) -> None:
    hold = LeaderHold(HoldSpec("leader", frozenset({2})))
    assert hold.send(3, RECONFIG, established=False)  # a sync replaying it: not tripped
    assert hold.send(3, PLAIN, established=True) and hold.zxid is None
    assert hold.send(2, RECONFIG, established=True) and hold.zxid == Z
    assert not hold.send(3, RECONFIG, established=True)
    assert not hold.send(3, PING, established=True) and hold.send(2, PING, established=True)
    caplog.set_level("WARNING", "trizk.quorum")
    hold.persisted([Z - 1])
    hold.persisted([Z, Z + 1])
    hold.persisted([Z])
    hold.acked(3, packet(PacketType.ACK, Z))  # not a listed learner
    hold.acked(2, packet(PacketType.ACK, Z - 1))
    hold.acked(2, packet(PacketType.ACK, Z))
    assert [r.getMessage() for r in caplog.records] == [
        f"reconfigHold: proposed {Z:#x} to [2]",
        f"reconfigHold: ACK of {Z:#x} from 2",
    ]


@pytest.mark.parametrize("log_it", [False, True])
def test_follower_side(log_it: bool, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", "trizk.quorum")
    hold = FollowerHold(HoldSpec("follower", log_it=log_it))
    assert hold.receive(RECONFIG, synced=False)  # still syncing: passes
    assert hold.receive(PLAIN, synced=True) and hold.sends()
    assert hold.receive(RECONFIG, synced=True) is log_it
    assert not hold.sends()
    assert not hold.receive(PING, synced=True) and not hold.receive(PLAIN, synced=True)
    hold.persisted([Z])
    hold.persisted([Z])
    what = "logged" if log_it else "dropped"
    assert [r.getMessage() for r in caplog.records] == [f"reconfigHold: {what} {Z:#x}"]
