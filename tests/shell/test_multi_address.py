"""Multi-address members (``server.N=a:q:e|b:q2:e2``), as processes started from zoo.cfg with
``-D zookeeper.multiAddress.enabled=true`` (ZooKeeper parses ``|`` only with that system
property; the zoo.cfg key ``multiAddress.enabled`` alone is refused, checked on 3.8.0) and
``multiAddress.enabled=true`` in zoo.cfg (election headers of protocol version -65535 with every
address).

Every member is written with a dead address first: ``127.0.0.2`` ports that this test holds
bound without listening, so that the member cannot bind them and a connection to them is
refused. The members must still elect a leader (election connections fail over to the live
address, the listener serves the address it could bind), learners must reach the leader through
its live quorum address, and writes go through every member.
tests/compat/test_multi_address_mixed.py runs the same with Apache ZooKeeper members.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager

import pytest

from tests.ensemble_helpers import DEADLINE, client
from trizk.quorum.verifier import QuorumVerifier
from trizk.testing.processes import Member, MemberSet, member_cfg

BASE = {
    "tickTime": "200",
    "initLimit": "10",
    "syncLimit": "5",
    "maxSessionTimeout": "120000",
    "4lw.commands.whitelist": "*",
    "admin.enableServer": "false",
    "multiAddress.enabled": "true",
}
DEAD_HOST = "127.0.0.2"


@contextmanager
def dead_ports(n: int) -> Iterator[list[int]]:
    """``n`` ports of 127.0.0.2 bound (not listening) by this process: a member cannot bind
    them, and a connection to them is refused."""
    with ExitStack() as stack:
        ports = []
        for _ in range(n):
            s = stack.enter_context(socket.socket())
            s.bind((DEAD_HOST, 0))
            ports.append(s.getsockname()[1])
        yield ports


def multi_lines(ens: MemberSet, dead: list[int], multi: set[int]) -> dict[str, str]:
    """server.N lines: members of ``multi`` with a dead address pair written first."""
    lines = {}
    for i, (sid, m) in enumerate(sorted(ens.members.items())):
        a = m.addrs
        role = ":observer" if a.observer else ""
        live = f"{a.host}:{a.quorum_port}:{a.election_port}{role}"
        if sid in multi:
            live = f"{DEAD_HOST}:{dead[2 * i]}:{dead[2 * i + 1]}{role}|{live}"
        lines[f"server.{sid}"] = f"{live};{a.host}:{a.client_port}"
    return lines


def rewrite(ens: MemberSet, lines: Mapping[str, str], base: Mapping[str, str]) -> None:
    for m in ens.members.values():
        m.write(member_cfg(m.addrs, m.data_dir, lines, base=base))


class MultiAddressMembers(MemberSet):
    def command(self, m: Member) -> list[str]:
        return [*super().command(m), "-D", "zookeeper.multiAddress.enabled=true"]


def check_ensemble(ens: MemberSet, lines: Mapping[str, str]) -> None:
    modes = ens.wait_serving(DEADLINE)
    assert sorted(modes.values()).count("leader") == 1, modes
    expected = QuorumVerifier.from_properties(sorted(lines.items()), multi_address=True).to_string()
    for sid in ens.members:
        zk = client(ens.hosts([sid]))
        try:
            zk.create(f"/via{sid}", str(sid).encode())
            config = zk.get("/zookeeper/config")[0].decode()
        finally:
            zk.stop()
            zk.close()
        # the same members as every other member prints them (Java's HashMap order of sids
        # may differ with the zoo.cfg key order: compare as sets of lines)
        assert set(config.splitlines()) == set(expected.splitlines()), config
    zk = client(ens.hosts())
    try:
        zk.sync("/")
        assert sorted(c for c in zk.get_children("/") if c.startswith("via")) == sorted(
            f"via{s}" for s in ens.members
        )
    finally:
        zk.stop()
        zk.close()


@pytest.mark.slow
def test_multi_address_trizk_ensemble_fails_over_dead_addresses() -> None:
    kinds = {1: "trizk", 2: "trizk", 3: "trizk", 4: "trizk"}
    with (
        dead_ports(2 * len(kinds)) as dead,
        MultiAddressMembers(kinds, observers=[4], base=BASE) as ens,
    ):
        lines = multi_lines(ens, dead, set(kinds))
        rewrite(ens, lines, BASE)
        for sid in ens.members:
            ens.start(sid)
        check_ensemble(ens, lines)
        leader = ens.leader()
        assert leader is not None
        # the leader's dead quorum address was given up with one line, the live one serves
        text = ens.members[leader].log_path.read_text()
        assert f"cannot bind the quorum port {DEAD_HOST}:" in text
        assert "leading on the others" in text
        # a new leader: every learner again reaches it through its live address
        ens.kill(leader)
        modes = ens.wait_serving(DEADLINE)
        assert leader not in modes and list(modes.values()).count("leader") == 1
