"""Failover between a member's addresses (``server.N=a:q:e|b:q:e``, ``multiAddress.enabled``,
``multiAddress.reachabilityCheckEnabled`` on: ZooKeeper's default), on test hosts in network
namespaces with two links each (compat/procs/netns.py ``links=2``; root only, skipped
elsewhere): trizk, Apache ZooKeeper 3.8.0 and mixed ensembles.

Every member lists both of every member's addresses. Once the ensemble serves, every host
loses its first link: the first addresses stop answering (no RST: connections through them
stall, as a real failure does). Each member must drop what went through them -- a kept
election connection is closed once its host no longer answers
(``SendWorker.asyncValidateIfSocketIsStillReachable``; a new connection from the peer also
replaces one), Zab's timeouts end the quorum links -- and reach the others through
their second addresses (the election's reachable address, ``Learner.connectToLeader``'s
reachable addresses): the three members serve again, one leader, and take writes through every
member.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest
from kazoo.client import KazooClient

from tests.ensemble_helpers import DEADLINE
from trizk.compat.procs import netns
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.servers import zookeeper_available
from trizk.testing.probes import member_mode
from trizk.testing.processes import Member, member_cfg

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not netns.available(), reason="needs root and network namespaces"),
]

PROPERTY = "zookeeper.multiAddress.enabled=true"
BASE = {
    "tickTime": "200",
    "initLimit": "10",
    "syncLimit": "5",
    "maxSessionTimeout": "120000",
    "4lw.commands.whitelist": "*",
    "admin.enableServer": "false",
    "multiAddress.enabled": "true",
    "multiAddress.reachabilityCheckTimeoutMs": "500",
}


class TwoLinkEnsemble(ProcessEnsemble):
    """Members on a two-link lab, started with ``-Dzookeeper.multiAddress.enabled=true``."""

    def command(self, m: Member) -> list[str]:
        lab, self.lab = self.lab, None
        try:
            cmd = super().command(m)
        finally:
            self.lab = lab
        assert lab is not None
        if m.kind == "zookeeper":
            cmd = [cmd[0], f"-D{PROPERTY}", *cmd[1:]]
        else:
            cmd = [*cmd, "-D", PROPERTY]
        return lab.command(m.sid, cmd)


def server_lines(lab: netns.NetnsLab, sids: list[int]) -> dict[str, str]:
    return {f"server.{s}": f"{lab.host(s, 0)}:2888:3888|{lab.host(s, 1)}:2888:3888" for s in sids}


def modes(lab: netns.NetnsLab, sids: list[int], cut: Mapping[int, int]) -> dict[int, str]:
    """Each member's mode, asked through an address of it that still answers."""
    return {s: member_mode(lab.host(s, 1 if cut.get(s) == 0 else 0), 2181) for s in sids}


def wait_all_serving(
    lab: netns.NetnsLab, sids: list[int], cut: Mapping[int, int], ens: ProcessEnsemble
) -> dict[int, str]:
    deadline = time.monotonic() + DEADLINE
    while True:
        now = modes(lab, sids, cut)
        if (
            all(m in ("leader", "follower") for m in now.values())
            and list(now.values()).count("leader") == 1
        ):
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"not serving again: {now}\n{ens.tails()}")
        time.sleep(0.2)


def write_through_each(
    lab: netns.NetnsLab, sids: list[int], cut: Mapping[int, int], tag: str
) -> None:
    for s in sids:
        host = lab.host(s, 1 if cut.get(s) == 0 else 0)
        zk = KazooClient(hosts=f"{host}:2181", timeout=10, connection_retry=None)
        zk.start(timeout=DEADLINE)
        try:
            zk.create(f"/{tag}{s}", str(s).encode())
            zk.sync("/")
            assert sorted(c for c in zk.get_children("/") if c.startswith(tag)) == sorted(
                f"{tag}{x}" for x in sids if x <= s
            )
        finally:
            zk.stop()
            zk.close()


def run_failover(kinds: dict[int, str]) -> None:
    sids = sorted(kinds)
    with (
        netns.NetnsLab(len(sids), links=2) as lab,
        TwoLinkEnsemble(kinds, lab=lab, start=False) as ens,
    ):
        lines = server_lines(lab, sids)
        for m in ens.members.values():
            m.write(
                member_cfg(
                    m.addrs, m.data_dir, lines, base=BASE, extra={"clientPortAddress": "0.0.0.0"}
                )
            )
        for s in sids:
            ens.start(s)
        before = wait_all_serving(lab, sids, {}, ens)
        write_through_each(lab, sids, {}, "before")
        assert list(before.values()).count("leader") == 1
        # the first network goes away: every member is reached through its second address
        cut = dict.fromkeys(sids, 0)
        for s in sids:
            lab.cut(s, 0)
        wait_all_serving(lab, sids, cut, ens)
        write_through_each(lab, sids, cut, "after")


@pytest.mark.parametrize(
    "kinds",
    [
        {1: "trizk", 2: "trizk", 3: "trizk"},
        {1: "zookeeper", 2: "zookeeper", 3: "zookeeper"},
        {1: "zookeeper", 2: "zookeeper", 3: "trizk"},
        {1: "trizk", 2: "trizk", 3: "zookeeper"},
    ],
    ids=["trizk", "zookeeper", "trizk-3", "zookeeper-3"],
)
def test_failover_between_a_members_addresses(kinds: dict[int, str]) -> None:
    if "zookeeper" in kinds.values() and not zookeeper_available():
        pytest.skip("ZooKeeper 3.8.0 is not installed")
    run_failover(kinds)


def test_reachability_is_the_hosts() -> None:
    """``is_reachable`` (Java's isReachable without ICMP privileges: TCP to port 7, a refusal
    counts as an answer) from inside a test host: a live host answers, one whose link is down
    does not within the timeout, and ``reachable_or_all`` keeps the live address (or all)."""
    code = (
        "import trio;"
        "from trizk.server.shell.reachability import is_reachable, reachable_or_all;"
        "print(trio.run(is_reachable, {a!r}, 300), trio.run(is_reachable, {b!r}, 300),"
        " trio.run(reachable_or_all, [({b!r}, 1), ({a!r}, 2)], 300),"
        " trio.run(reachable_or_all, [({b!r}, 1), ({b!r}, 2)], 300))"
    )
    with netns.NetnsLab(2, links=2) as lab:
        lab.cut(2, 0)
        out = lab.run_python(1, code.format(a=lab.host(2, 1), b=lab.host(2, 0)))
        live, dead = lab.host(2, 1), lab.host(2, 0)
        assert out.split() == [
            "True",
            "False",
            f"[('{live}',",
            "2)]",
            f"[('{dead}',",
            "1),",
            f"('{dead}',",
            "2)]",
        ], out
