"""Dynamic reconfig on a running 3-member trizk ensemble (processes started from zoo.cfg files
with ``reconfigEnabled=true``), driven by kazoo's ``client.reconfig`` as the super user:

* refusals: no super → NOAUTH; a stale ``from_config`` → BADVERSION; a bad joiner →
  BADARGUMENTS; an observer that never starts added and removed (kazoo's TestReconfig);
* a follower removed (it stays up as a non-voting follower), a write, the follower added back;
* the leader removed: the remaining two go on with the leader the reconfig designated,
  without an election (trizk members log it), and take writes;
* the whole membership set back non-incrementally.

After each step every voting member shows the same ``/zookeeper/config`` (the new
configuration, ``version=`` the reconfig's zxid) and holds every acknowledged write.
:func:`run_scenario` is shared with tests/compat/test_reconfig_mixed.py, which runs it with
ZooKeeper members too.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    ConnectionLoss,
    NoAuthError,
    SessionExpiredError,
)

from trizk.testing.processes import MemberSet

SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # super:test
BASE = {"tickTime": "200", "initLimit": "10", "syncLimit": "5", "maxSessionTimeout": "120000"}
EXTRA = {
    "reconfigEnabled": "true",
    "4lw.commands.whitelist": "*",
    "admin.enableServer": "false",
    "DigestAuthenticationProvider.superDigest": SUPER_DIGEST,
}
TIMEOUT = 60.0


def line(ens: MemberSet, sid: int) -> str:
    a = ens.members[sid].addrs
    return (
        f"server.{sid}={a.host}:{a.quorum_port}:{a.election_port}:participant;"
        f"{a.host}:{a.client_port}"
    )


def client(ens: MemberSet, sids: list[int]) -> KazooClient:
    zk = KazooClient(hosts=ens.hosts(sids), timeout=20, connection_retry={"max_tries": -1})
    zk.start(timeout=TIMEOUT)
    zk.add_auth("digest", "super:test")
    return zk


def until(what: str, check: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    """Poll ``check`` until it returns something true (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # a member between roles
            last = e
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: still {last!r} after {timeout} s")


def config_of(ens: MemberSet, sid: int) -> str:
    zk = KazooClient(hosts=ens.hosts([sid]), timeout=10)
    zk.start(timeout=20)
    try:
        return str(zk.get("/zookeeper/config")[0].decode())
    finally:
        zk.stop()
        zk.close()


def agree(ens: MemberSet, sids: list[int], want_lines: set[str]) -> str:
    """Every member of ``sids`` shows one configuration of exactly ``want_lines``."""

    def check() -> str | None:
        seen = {config_of(ens, s) for s in sids}
        if len(seen) != 1:
            return None
        text = seen.pop()
        return text if set(text.splitlines()[:-1]) == want_lines else None

    return str(until(f"/zookeeper/config of {sids}", check))


def reconfig(zk: KazooClient, **kw: Any) -> str:
    """A reconfig whose answer may be lost to a role change: then read what was committed."""
    before = zk.retry(zk.get, "/zookeeper/config")[0].decode()
    try:
        return str(zk.reconfig(**kw)[0].decode())
    except (ConnectionLoss, SessionExpiredError):
        return str(
            until(
                "the reconfig's outcome",
                lambda: (d := zk.retry(zk.get, "/zookeeper/config")[0].decode()) != before and d,
            )
        )


def run_scenario(ens: MemberSet) -> dict[str, Any]:
    """The scenario of the module docstring; returns what it saw, normalised."""
    out: dict[str, Any] = {}
    sids = sorted(ens.members)
    ens.wait_serving(TIMEOUT)
    lines = {s: line(ens, s) for s in sids}
    leader = until("a leader", ens.leader)
    follower = next(s for s in sids if s != leader)
    zk = client(ens, sids)
    try:
        anon = KazooClient(hosts=ens.hosts(sids), timeout=20)
        anon.start(timeout=TIMEOUT)
        with pytest.raises(NoAuthError):
            anon.reconfig(joining=None, leaving=str(follower), new_members=None)
        anon.stop()
        anon.close()
        with pytest.raises(BadVersionError):
            zk.reconfig(joining=None, leaving=str(follower), new_members=None, from_config=5)
        with pytest.raises(BadArgumentsError):
            zk.reconfig(joining="server.9=127.0.0.1:1", leaving=None, new_members=None)
        with pytest.raises(BadArgumentsError):
            zk.reconfig(joining="some thing", leaving=None, new_members=None)
        out["refusals"] = "ok"

        # kazoo's TestReconfig.test_add_remove_observer: an observer that never comes
        held = [socket.socket() for _ in range(3)]
        try:
            for h in held:
                h.bind(("", 0))
            p1, p2, p3 = (h.getsockname()[1] for h in held)
            joining = f"server.100=0.0.0.0:{p1}:{p2}:observer;0.0.0.0:{p3}"
            data, _ = zk.reconfig(joining=joining, leaving=None, new_members=None)
            assert joining.encode() in data
            data, _ = zk.reconfig(joining=None, leaving="100", new_members=None)
            assert joining.encode() not in data
            version = int(data.decode().split("\n")[-1].split("=")[1], 16)
            with pytest.raises(BadVersionError):
                zk.reconfig(
                    joining=joining, leaving=None, new_members=None, from_config=version + 1
                )
        finally:
            for h in held:
                h.close()
        agree(ens, sids, set(lines.values()))

        # a follower leaves and comes back
        text = reconfig(zk, joining=None, leaving=str(follower), new_members=None)
        rest = [s for s in sids if s != follower]
        assert set(text.splitlines()[:-1]) == {lines[s] for s in rest}
        agree(ens, rest, {lines[s] for s in rest})
        zk.retry(zk.create, "/after-leave", b"1")
        text = reconfig(zk, joining=lines[follower], leaving=None, new_members=None)
        agree(ens, sids, set(lines.values()))
        until("the follower back", lambda: ens.wait_serving(TIMEOUT))
        zk.retry(zk.create, "/after-join", b"2")

        # the leader leaves: the others go on
        leader = until("a leader", ens.leader)
        rest = [s for s in sids if s != leader]
        text = reconfig(zk, joining=None, leaving=str(leader), new_members=None)
        assert set(text.splitlines()[:-1]) == {lines[s] for s in rest}
        agree(ens, rest, {lines[s] for s in rest})
        until("a new leader", lambda: ens.leader() in rest)
        # the reconfig designated a leader: the others go to it without an election
        # (QuorumPeer.processReconfig's updateVote, updateServerState), trizk as ZooKeeper
        for s in rest:
            if ens.members[s].kind == "trizk":
                until(
                    f"member {s} handed over without an election",
                    lambda s=s: "without an election" in ens.members[s].log_path.read_text(),
                )
        zk.retry(zk.create, "/after-leader-left", b"3")

        # everyone back, non-incrementally
        text = reconfig(zk, joining=None, leaving=None, new_members=",".join(lines.values()))
        final = agree(ens, sids, set(lines.values()))
        ens.wait_serving(TIMEOUT)
        for s in sids:
            c = KazooClient(hosts=ens.hosts([s]), timeout=10)
            c.start(timeout=20)
            try:
                c.sync("/")
                got = [c.exists(p) is not None for p in ("/after-leave", "/after-join")]
                got.append(c.exists("/after-leader-left") is not None)
            finally:
                c.stop()
                c.close()
            assert got == [True, True, True], (s, got)
        out["final lines"] = sorted(final.splitlines()[:-1])
        out["final version"] = final.splitlines()[-1].startswith("version=")
    finally:
        zk.stop()
        zk.close()
    return out


@pytest.mark.slow
def test_reconfig_on_a_trizk_ensemble() -> None:
    with MemberSet({1: "trizk", 2: "trizk", 3: "trizk"}, base=BASE, extra=EXTRA) as ens:
        for s in ens.members:
            ens.start(s)
        seen = run_scenario(ens)
        assert seen["refusals"] == "ok" and seen["final version"]
        assert seen["final lines"] == sorted(line(ens, s) for s in ens.members)


@pytest.mark.slow
def test_members_join_and_catch_up_with_the_configuration() -> None:
    """Member 4 is not in the others' zoo.cfg: started with every line (its own included) it
    follows as a non-voter until ``-add`` makes it a voter. Member 2, down during a reconfig,
    hears of the newer configuration while LOOKING and activates it (FastLeaderElection's
    processReconfig), then syncs."""
    kinds = {1: "trizk", 2: "trizk", 3: "trizk", 4: "trizk"}
    with MemberSet(kinds, base=BASE, extra=EXTRA) as ens:
        for s in (1, 2, 3):
            cfg = ens.members[s].cfg_path
            cfg.write_text(
                "".join(x for x in cfg.read_text().splitlines(True) if "server.4=" not in x)
            )
            ens.start(s)
        ens.wait_serving(TIMEOUT)
        lines = {s: line(ens, s) for s in kinds}
        zk = client(ens, [1, 2, 3])
        try:
            ens.start(4)
            assert ens.wait_serving(TIMEOUT)[4] == "follower"  # a non-voting follower
            reconfig(zk, joining=lines[4], leaving=None, new_members=None)
            agree(ens, [1, 2, 3, 4], set(lines.values()))
            zk.retry(zk.create, "/with-4", b"4")
            follower = next(s for s in (1, 2) if ens.mode(s) == "follower")
            ens.stop(follower)
            text = reconfig(
                zk,
                joining=None,
                leaving=None,
                new_members=",".join(lines.values()),
            )
            ens.start(follower)
            ens.wait_serving(TIMEOUT)
            agree(ens, list(kinds), set(lines.values()))
            assert config_of(ens, follower) == text
            assert "Received version" in ens.members[follower].log_path.read_text()
            cfg = ens.members[follower].cfg_path.read_text()
            version = text.splitlines()[-1].split("=")[1]
            assert f"zoo.cfg.dynamic.{version}\n" in cfg
        finally:
            zk.stop()
            zk.close()
