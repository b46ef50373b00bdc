"""Multi-address members beside Apache ZooKeeper members (3.8.0 and 3.9.3, run with
``-Dzookeeper.multiAddress.enabled=true`` and ``multiAddress.enabled=true``): the scenario of
tests/shell/test_multi_address.py with ZooKeeper participants 1 and 2, and trizk participant 3 and
observer 4, each of these listing a dead ``127.0.0.2`` address pair first.

ZooKeeper parses the trizk members' ``a|b`` lines and prints them in ``/zookeeper/config`` as
trizk does, both kinds exchange election headers of version -65535, and ZooKeeper learners
reach a trizk leader through its live quorum address (its LeaderConnectors try every address).
The dead addresses are on trizk members only: ZooKeeper's election picks one address of a peer
by ICMP reachability (``MultipleAddresses.getReachableOrOne``), which cannot tell a closed port
on a reachable loopback address from a live one; the trizk members, of higher sids, own those
connections anyway."""

from __future__ import annotations

import pytest

from tests.shell.test_multi_address import BASE, check_ensemble, dead_ports, multi_lines
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.servers import BASE_CFG, zookeeper_available
from trizk.testing.processes import Member, member_cfg

PROPERTY = "zookeeper.multiAddress.enabled=true"


class MultiAddressEnsemble(ProcessEnsemble):
    def command(self, m: Member) -> list[str]:
        cmd = super().command(m)
        if m.kind == "zookeeper":
            return [cmd[0], f"-D{PROPERTY}", *cmd[1:]]
        return [*cmd, "-D", PROPERTY]


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.8.0", "3.9.3"])
def test_multi_address_mixed_ensemble(version: str) -> None:
    if not zookeeper_available(version):
        pytest.skip(f"ZooKeeper {version} is not installed")
    kinds = {1: "zookeeper", 2: "zookeeper", 3: "trizk", 4: "trizk"}
    base = {**BASE_CFG, **BASE}
    with (
        dead_ports(2 * len(kinds)) as dead,
        MultiAddressEnsemble(
            kinds, observers=[4], start=False, versions={1: version, 2: version}
        ) as ens,
    ):
        lines = multi_lines(ens, dead, {3, 4})
        for m in ens.members.values():
            m.write(member_cfg(m.addrs, m.data_dir, lines, base=base))
        for sid in ens.members:
            ens.start(sid)
        check_ensemble(ens, lines)
        # whoever led, the other kind follows it after a kill of the leader
        leader = ens.leader()
        assert leader is not None
        ens.kill(leader)
        modes = ens.wait_serving(90)
        assert list(modes.values()).count("leader") == 1, modes
