"""Mixed elections with Apache ZooKeeper 3.8 members on loopback (skipped without java/jar).

* 2 Java members + 1 trizk election port: the trizk member reaches the Java members' decision,
  both when all start together and when it joins after they have formed their ensemble
  (it then learns the leader from FOLLOWING/LEADING answers).
* 1 Java member + 2 trizk election ports: all three agree on a trizk leader (the Java member then
  fails to reach that leader's quorum port, which nobody serves here; we only check its log).
"""

from __future__ import annotations

import re

import pytest
import trio

from trizk.compat.procs.javaquorum import start_java_member, wait_log, zookeeper_available
from trizk.compat.procs.servers import Server
from trizk.quorum.election.election import Decision, ElectionView
from trizk.quorum.election.messages import ServerState
from trizk.server.shell.cnxmanager import ElectionPort
from trizk.testing.ports import allocate, config_string

pytestmark = pytest.mark.skipif(
    not zookeeper_available(), reason="java or /usr/share/java/zookeeper.jar missing"
)

STATE_LINE = r"\] QuorumPeer[^:]*: (LEADING|FOLLOWING|OBSERVING)\n"


def java_vote(srv: Server, timeout: float = 40.0) -> tuple[str, int]:
    """The first state a Java member decided and the leader it chose, from its INFO log.

    QuorumPeer logs the state; the leader is the member's own proposal at that moment, which
    its WorkerReceiver logged when the proposal looped back to itself ("n.sid:<myid> ...
    n.leader:<leader>"), or the leader that announced itself LEADING to it; a LEADING member
    chose itself."""
    myid = int(srv.cfg["__myid"])
    found = wait_log(srv, STATE_LINE, timeout)
    if found.group(1) == "LEADING":
        return "LEADING", myid
    text = srv.log_path.read_text(errors="replace")[: found.start()]
    if found.group(1) == "OBSERVING":  # an observer's own votes are not looped back
        heard = re.findall(r"Notification: .*n\.leader:(\d+)", text)
        assert heard, text[-3000:]
        return "OBSERVING", int(heard[-1])
    # A member that joins an ensemble which has already decided follows the leader that
    # announced itself LEADING (FastLeaderElection's out-of-election path) without updating its
    # own proposal, which still names itself: the leader's own announcement then says whom it
    # follows.
    announced = [
        int(leader)
        for sid, leader in re.findall(r"n\.sid:(\d+), n\.state:LEADING, n\.leader:(\d+)", text)
        if sid == leader
    ]
    if announced:
        return found.group(1), announced[-1]
    own = re.findall(rf"n\.sid:{myid}, n\.state:LOOKING, n\.leader:(\d+)", text)
    assert own, text[-3000:]
    return found.group(1), int(own[-1])


#: What Java logs when our election bytes displease it (QuorumCnxManager, WorkerReceiver).
WIRE_COMPLAINTS = (
    "Initial message parsing error",
    "Unreasonable buffer length",
    "Received packet with invalid packet",
    "Got a short response",
    "partial / malformed response",
    "Something went wrong while processing config",
    "restarting leader election",
    "Received version:",  # our config version is above theirs (static configs send 0)
    "Backward compatibility mode",
)


def assert_java_content(srv: Server) -> None:
    text = srv.log_path.read_text(errors="replace")
    for complaint in WIRE_COMPLAINTS:
        assert complaint not in text, f"{complaint!r} in the Java log:\n{srv.log_tail(60)}"


def start_java(sid: int, members: dict) -> Server:
    srv = start_java_member(sid, members)
    srv.cfg["__myid"] = str(sid)
    return srv


async def _trizk_member(sid: int, members: dict, nursery: trio.Nursery) -> ElectionPort:
    view = ElectionView(
        frozenset(s for s, m in members.items() if not m.observer),
        config_string(members).encode(),
    )
    port = ElectionPort(sid, view, {s: m.election for s, m in members.items()})
    await nursery.start(port.serve)
    return port


async def _trizk_beside_javas(
    trizk_sids: list[int], members: dict, java_sids: list[int]
) -> tuple[list[Decision], list[tuple[str, int]]]:
    """Java members ``java_sids`` and trizk members ``trizk_sids`` start an election together
    (trizk's with a zero vote): trizk's decisions and the Java members' votes, in the order
    given, the Java logs checked for complaints about our bytes."""
    javas = [start_java(j, members) for j in java_sids]
    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                mine = [await _trizk_member(s, members, nursery) for s in trizk_sids]
                for m in mine:
                    m.look(0, 0)
                decisions = [await m.wait_decision() for m in mine]
                votes = [await trio.to_thread.run_sync(java_vote, j) for j in javas]
                nursery.cancel_scope.cancel()
        for j in javas:
            assert_java_content(j)
    finally:
        for j in javas:
            j.stop()
    return decisions, votes


async def test_trizk_beside_two_java_members_started_together() -> None:
    members = allocate([1, 2, 3])
    (decision,), votes = await _trizk_beside_javas([1], members, [2, 3])
    # all three agree; which Java member leads depends on how far apart the JVMs started (a
    # quorum that hears nothing better for 200 ms decides), but never the worse-sid trizk one
    (leader,) = {leader for _, leader in votes}
    assert sorted(votes) == [("FOLLOWING", leader), ("LEADING", leader)]
    assert decision.state == ServerState.FOLLOWING and decision.vote.leader == leader


async def test_trizk_joins_an_established_java_ensemble() -> None:
    members = allocate([1, 2, 3])
    javas = [start_java(1, members), start_java(2, members)]
    try:
        votes = [await trio.to_thread.run_sync(java_vote, j) for j in javas]
        # Zab finished between the Java pair: the leader answers LEADING with its new epoch
        await trio.to_thread.run_sync(wait_log, javas[1], r"LEADER ELECTION TOOK", 40.0)
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                me = await _trizk_member(3, members, nursery)
                me.look(0x500000000, 5)  # a better vote than theirs must not matter now
                decision = await me.wait_decision()
                nursery.cancel_scope.cancel()
        for j in javas:
            assert_java_content(j)
    finally:
        for j in javas:
            j.stop()
    assert sorted(votes) == [("FOLLOWING", 2), ("LEADING", 2)]
    assert decision.state == ServerState.FOLLOWING and decision.vote.leader == 2


async def test_one_java_member_beside_two_trizk_members() -> None:
    members = allocate([1, 2, 3])
    decisions, (vote,) = await _trizk_beside_javas([2, 3], members, [1])
    assert vote == ("FOLLOWING", 3)
    assert [(d.state, d.vote.leader) for d in decisions] == [
        (ServerState.FOLLOWING, 3),
        (ServerState.LEADING, 3),
    ]


async def test_trizk_observer_beside_two_java_voters() -> None:
    members = allocate([1, 2, 3], observers=frozenset({3}))
    (decision,), votes = await _trizk_beside_javas([3], members, [1, 2])
    assert sorted(votes) == [("FOLLOWING", 2), ("LEADING", 2)]
    assert decision.state == ServerState.OBSERVING and decision.vote.leader == 2


async def test_java_observer_beside_two_trizk_voters() -> None:
    members = allocate([1, 2, 3], observers=frozenset({3}))
    decisions, (vote,) = await _trizk_beside_javas([1, 2], members, [3])
    assert [(d.state, d.vote.leader) for d in decisions] == [
        (ServerState.FOLLOWING, 2),
        (ServerState.LEADING, 2),
    ]
    assert vote == ("OBSERVING", 2)
