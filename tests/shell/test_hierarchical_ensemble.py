"""A trizk ensemble with a hierarchical quorum (``group.N``, ``weight.N``) and an observer, as
processes started from zoo.cfg files, used through kazoo (tests/compat/test_hierarchical_mixed.py
runs the same scenario with Apache ZooKeeper members in it).

Layout: participants 1..5 in three groups ``group.1=1:2:3``, ``group.2=4``, ``group.3=5``,
server 3 of weight 0, observer 6. A quorum is a weighted majority in two of the three groups:
servers 1 and 2 together carry group 1 (3 weighs nothing), 4 and 5 their own groups. So

* 1, 2, 3 (a majority of the members) hold one group only: no quorum, nobody serves and no
  write commits;
* 4 and 5 (a minority of the members) hold two groups: a quorum, one of them leads and writes
  commit, also through the observer.

Server 3 (weight 0) and the observer never lead. Every member shows the same
``/zookeeper/config``, ZooKeeper's ``QuorumHierarchical.toString``.
"""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient

from tests.ensemble_helpers import DEADLINE, client
from trizk.testing.processes import MemberSet

BASE = {
    "tickTime": "200",
    "initLimit": "10",
    "syncLimit": "5",
    "maxSessionTimeout": "120000",
    "4lw.commands.whitelist": "*",
    "admin.enableServer": "false",
}
HIERARCHY = {"group.1": "1:2:3", "group.2": "4", "group.3": "5", "weight.3": "0"}
OBSERVERS = (6,)
#: the group and weight lines of /zookeeper/config (after the server lines)
CONFIG_TAIL = (
    "group.1=1:2:3\ngroup.2=4\ngroup.3=5\n"
    "weight.1=1\nweight.2=1\nweight.3=0\nweight.4=1\nweight.5=1\nversion=0"
)
#: how long a set of members without a quorum is watched (many election rounds at tick 200)
NO_QUORUM_WATCH = 6.0


def nobody_serves(ens: MemberSet, sids: list[int], watch: float) -> None:
    """For ``watch`` seconds, none of ``sids`` reports a role (they keep looking)."""
    end = time.monotonic() + watch
    while time.monotonic() < end:
        modes = {s: ens.mode(s) for s in sids}
        assert not any(modes.values()), f"served without a hierarchical quorum: {modes}"
        time.sleep(0.1)  # polling interval of a bounded watch


def write_fails(hosts: str) -> None:
    zk = KazooClient(hosts=hosts, timeout=4)
    try:
        with pytest.raises(Exception):  # noqa: B017 - kazoo's timeout or connection error
            zk.start(timeout=4)
            zk.create("/must-not-commit", b"x")
    finally:
        zk.stop()
        zk.close()


def run_scenario(ens: MemberSet) -> None:
    modes = ens.wait_serving(DEADLINE)
    leader = next(s for s, m in modes.items() if m == "leader")
    assert leader in (1, 2, 4, 5), modes  # 3 weighs 0, 6 observes
    assert modes[6] == "observer"
    configs = {}
    for sid in ens.members:
        zk = client(ens.hosts([sid]))
        try:
            if sid == 1:
                zk.create("/before", b"all members")
            configs[sid] = zk.get("/zookeeper/config")[0].decode()
        finally:
            zk.stop()
            zk.close()
    assert len(set(configs.values())) == 1, configs
    assert configs[1].endswith("\n" + CONFIG_TAIL), configs[1]

    # a majority of the members, one group: no quorum
    ens.stop(4)
    ens.stop(5)
    nobody_serves(ens, [1, 2, 3, 6], NO_QUORUM_WATCH)
    write_fails(ens.hosts([1, 2, 3, 6]))

    # a minority of the members, two groups: a quorum
    ens.start(4)
    ens.start(5)
    ens.wait_serving(DEADLINE)
    for sid in (1, 2, 3):
        ens.stop(sid)
    modes = ens.wait_serving(DEADLINE, members=[4, 5, 6])
    assert sorted(s for s, m in modes.items() if m == "leader") in ([4], [5]), modes
    zk = client(ens.hosts([6]))
    try:
        zk.create("/after", b"groups 2 and 3")
    finally:
        zk.stop()
        zk.close()
    for sid in (4, 5):
        zk = client(ens.hosts([sid]))
        try:
            zk.sync("/")
            assert zk.get("/after")[0] == b"groups 2 and 3"
            assert zk.get("/before")[0] == b"all members"
            assert not zk.exists("/must-not-commit")
        finally:
            zk.stop()
            zk.close()


@pytest.mark.slow
def test_hierarchical_trizk_ensemble() -> None:
    kinds = {sid: "trizk" for sid in range(1, 7)}
    with MemberSet(kinds, observers=OBSERVERS, base=BASE, extra=HIERARCHY) as ens:
        for sid in ens.members:
            ens.start(sid)
        run_scenario(ens)
