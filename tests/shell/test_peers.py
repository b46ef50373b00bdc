"""The election port shell on loopback: trizk members elect one leader; garbage closes a link."""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing

from trizk.quorum.election.election import ElectionView
from trizk.quorum.election.messages import (
    Notification,
    ServerState,
    decode_notification,
    encode_frame,
    encode_initial_message,
    parse_initial_message,
)
from trizk.server.shell.cnxmanager import ElectionPort
from trizk.testing.ports import free_ports


def make_ports(
    sids: list[int], voters: set[int], zxids: dict[int, int]
) -> tuple[dict[int, ElectionPort], dict[int, tuple[str, int]]]:
    ports = free_ports(len(sids))
    addrs = {sid: ("127.0.0.1", p) for sid, p in zip(sids, ports, strict=True)}
    view = ElectionView(frozenset(voters))
    return {sid: ElectionPort(sid, view, addrs) for sid in sids}, addrs


async def test_three_trizk_members_elect_one_leader() -> None:
    zxids = {1: 0x100000007, 2: 0x100000009, 3: 0x100000008}
    members, _ = make_ports([1, 2, 3], {1, 2, 3}, zxids)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for m in members.values():
                await nursery.start(m.serve)
            for sid, m in members.items():
                m.look(zxids[sid], 1)
            decisions = {sid: await m.wait_decision() for sid, m in members.items()}
            nursery.cancel_scope.cancel()
    # one leader, the one everybody names, with its own zxid; on an idle loopback it is 2 (the
    # best vote), but FLE lets a quorum that heard nothing better for 200 ms decide (see the
    # simulation), so a loaded machine may legitimately elect 3
    (leader,) = {d.vote.leader for d in decisions.values()}
    assert {d.vote.zxid for d in decisions.values()} == {zxids[leader]}
    for sid, d in decisions.items():
        assert d.state == (ServerState.LEADING if sid == leader else ServerState.FOLLOWING)


async def test_observer_and_late_joiner_learn_the_leader() -> None:
    """Two voters of three elect; then the third voter and an observer (sid 9) start and learn
    the leader from FOLLOWING/LEADING answers (outofelection + checkLeader)."""
    zxids = {1: 5, 2: 5, 3: 5, 9: 5}
    members, _ = make_ports([1, 2, 3, 9], {1, 2, 3}, zxids)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for m in members.values():
                await nursery.start(m.serve)
            members[1].look(5, 1)
            members[2].look(5, 1)
            first = [await members[1].wait_decision(), await members[2].wait_decision()]
            assert {d.vote.leader for d in first} == {2}
            members[3].look(9, 0)  # a higher zxid but an older epoch: must still follow 2
            members[9].look(5, 1)
            late = [await members[3].wait_decision(), await members[9].wait_decision()]
            nursery.cancel_scope.cancel()
    assert late[0].state == ServerState.FOLLOWING and late[0].vote.leader == 2
    assert late[1].state == ServerState.OBSERVING and late[1].vote.leader == 2


async def test_garbage_closes_the_link_and_decided_member_answers() -> None:
    members, addrs = make_ports([1, 2], {1, 2}, {})
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for m in members.values():
                await nursery.start(m.serve)
            members[1].look(5, 1)
            members[2].look(5, 1)
            await members[1].wait_decision()
            await members[2].wait_decision()
            # a bad protocol version: closed without a reply
            s = await trio.open_tcp_stream(*addrs[2])
            await s.send_all(struct.pack(">qqi", -7, 77, 0))
            assert await s.receive_some(100) == b""
            await s.aclose()
            # a bad frame length after a good header from a higher sid: closed
            s = await trio.open_tcp_stream(*addrs[2])
            await s.send_all(encode_initial_message(5, "127.0.0.1", 1) + b"\xff\xff\xff\xff")
            assert await s.receive_some(100) == b""
            await s.aclose()
            # a LOOKING non-voter (sid 5 > 2, so its connection is kept) gets the vote back
            s = await trio.open_tcp_stream(*addrs[2])
            note = Notification(0, 5, 0, 1, 0, config=b"version=0")
            await s.send_all(encode_initial_message(5, "127.0.0.1", 1))
            await s.send_all(encode_frame(note.encode()))
            got = b""
            while len(got) < 4 or len(got) < 4 + struct.unpack(">i", got[:4])[0]:
                chunk = await s.receive_some(1000)
                assert chunk
                got += chunk
            answer = decode_notification(got[4:])
            await s.aclose()
            nursery.cancel_scope.cancel()
    assert answer.state == ServerState.LEADING
    assert answer.leader == 2 and answer.config == b"version=0"


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])


async def _read_frame(stream: trio.SocketStream, buf: bytearray) -> bytes:
    while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
        chunk = await stream.receive_some(4096)
        assert chunk, "connection closed"
        buf += chunk
    n = struct.unpack(">i", buf[:4])[0]
    frame = bytes(buf[4 : 4 + n])
    del buf[: 4 + n]
    return frame


async def test_lower_sid_is_closed_and_connected_back_to_its_header_address() -> None:
    """handleConnection: a connection from a lower sid is closed; we connect back to the
    address it announced and send our initial message, then our vote."""
    members, addrs = make_ports([2], {1, 2, 3}, {})
    fake = await trio.open_tcp_listeners(0, host="127.0.0.1")
    fake_port = fake[0].socket.getsockname()[1]
    back: trio.MemorySendChannel[trio.SocketStream]
    back, back_recv = trio.open_memory_channel[trio.SocketStream](1)

    async def accept_one() -> None:
        stream = await fake[0].accept()
        await back.send(stream)

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(members[2].serve)
            nursery.start_soon(accept_one)
            s = await trio.open_tcp_stream(*addrs[2])
            await s.send_all(encode_initial_message(1, "127.0.0.1", fake_port))
            assert await s.receive_some(100) == b""  # closed: we lost the challenge
            await s.aclose()
            members[2].look(7, 1)
            stream = await back_recv.receive()
            head = bytearray()
            while len(head) < 8 + 8 + 4 + len(f"127.0.0.1:{addrs[2][1]}"):
                chunk = await stream.receive_some(100)
                assert chunk
                head += chunk
            msg, used = parse_initial_message(head) or (None, 0)
            assert msg is not None and msg.sid == 2
            assert msg.addresses == (addrs[2],)
            vote = decode_notification(await _read_frame(stream, head[used:]))
            await stream.aclose()
            nursery.cancel_scope.cancel()
    assert (vote.state, vote.leader, vote.zxid, vote.election_epoch) == (0, 2, 7, 1)


async def test_last_message_is_resent_on_reconnect(mock_clock: trio.testing.MockClock) -> None:
    """SendWorker.run: a fresh connection with an empty queue re-sends the last message.

    Virtual time stands still (it jumps only after 5 s of real idleness, bounding the waits), so
    no poll timeout can put a fresh copy in the queue between the two connections."""
    mock_clock.autojump_threshold = 5
    members, addrs = make_ports([1], {1, 5}, {})
    addrs5 = ("127.0.0.1", free_ports(1)[0])  # nobody listens: 1 cannot connect to 5
    members[1].addresses[5] = addrs5
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(members[1].serve)
            members[1].look(9, 2)
            got = []
            for _ in range(2):
                s = await trio.open_tcp_stream(*addrs[1])
                await s.send_all(encode_initial_message(5, *addrs5))
                got.append(decode_notification(await _read_frame(s, bytearray())))
                await s.aclose()
            nursery.cancel_scope.cancel()
    assert got[0] == got[1]
    assert members[1].election.not_timeout == 200  # no poll timed out meanwhile
    assert (got[0].leader, got[0].zxid, got[0].peer_epoch) == (1, 9, 2)


async def test_leader_crash_reelection_and_rejoin() -> None:
    """Kill the leader's election port; the others look again and elect among themselves; a
    fresh port for the old leader then joins them from their FOLLOWING/LEADING answers."""
    zxids = {1: 0x100000001, 2: 0x100000002, 3: 0x100000003}
    members, addrs = make_ports([1, 2, 3], {1, 2, 3}, zxids)
    scopes: dict[int, trio.CancelScope] = {}

    async def run(port: ElectionPort, *, task_status: trio.TaskStatus[None]) -> None:
        with trio.CancelScope() as scope:
            scopes[port.myid] = scope
            await port.serve(task_status=task_status)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for m in members.values():
                await nursery.start(run, m)
            for sid, m in members.items():
                m.look(zxids[sid], 1)
            first = {sid: await m.wait_decision() for sid, m in members.items()}
            (leader,) = {d.vote.leader for d in first.values()}
            scopes[leader].cancel()  # the leader's process dies
            rest = [sid for sid in members if sid != leader]
            for sid in rest:
                members[sid].look(zxids[sid], 1)  # its followers lose it and look again
            second = {sid: await members[sid].wait_decision() for sid in rest}
            (new_leader,) = {d.vote.leader for d in second.values()}
            assert new_leader != leader
            view = members[leader].view
            reborn = ElectionPort(leader, view, addrs)
            await nursery.start(run, reborn)
            reborn.look(zxids[leader], 1)
            third = await reborn.wait_decision()
            nursery.cancel_scope.cancel()
    assert {d.state for d in second.values()} == {ServerState.LEADING, ServerState.FOLLOWING}
    assert second[new_leader].state == ServerState.LEADING
    assert third.state == ServerState.FOLLOWING and third.vote.leader == new_leader


async def test_unknown_sids_leave_no_state_behind() -> None:
    members, addrs = make_ports([2], {1, 2}, {})
    port = members[2]
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(port.serve)
            port.look(5, 1)
            # QuorumPeer.OBSERVER_ID becomes -1, a lower sid: closed and called back (in vain)
            s = await trio.open_tcp_stream(*addrs[2])
            await s.send_all(encode_initial_message((1 << 63) - 1, "127.0.0.1", 1))
            assert await s.receive_some(100) == b""
            await s.aclose()
            for sid in (100, 101, 102):
                s = await trio.open_tcp_stream(*addrs[2])
                await s.send_all(encode_initial_message(sid, "127.0.0.1", 1))
                await s.send_all(encode_frame(Notification(0, 2, 5, 1, 1).encode()))
                answer = decode_notification(await _read_frame(s, bytearray()))
                assert answer.leader == 2
                await s.aclose()
            # each link ends when the peer closes; wait until all are gone (bounded above)
            while any(sid not in (1, 2) for sid in port._links):
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    leftovers = set(port._slot) | set(port._last_sent) | set(port._slot_ready)
    assert leftovers <= {1}
