"""Quorum links' output and the pumps' shared pass, on real sockets.

* :class:`~trizk.server.shell.ensemble.links.Link` writes a packet inline on a plain TCP link
  when nothing is queued or being sent; what the socket does not take, and everything on a
  wrapped stream, goes through the writer task; corked, a pass's packets leave in one write;
  whatever the path, the bytes arrive whole and in order.
* :class:`~trizk.server.shell.ensemble.pumping.Pump` handles Readies in the caller's task, never
  re-entered, leaves barriers to the pump task, and hands an exception met in another task to
  the pump task.
"""

from __future__ import annotations

import socket
import struct
from collections import deque
from typing import Any

import pytest
import trio
import trio.testing

from trizk.quorum.zab.applier import Plan, ReadyApplier
from trizk.quorum.zab.zab import Entry, Ready
from trizk.quorum.zab.zabwire import PacketType, encode_packet, packet
from trizk.server.shell.ensemble.links import Link, read_link
from trizk.server.shell.ensemble.pumping import Pump
from trizk.server.shell.poller import Poller
from trizk.server.shell.streams import ReplayStream

DEADLINE = 10.0


async def _pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listeners[0].accept()
    for lst in listeners:
        await lst.aclose()
    return client, server


async def _receive(stream: trio.abc.ReceiveStream, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = await stream.receive_some(65536)
        assert chunk, "closed early"
        got += chunk
    return bytes(got)


async def test_a_packet_on_a_plain_link_is_written_inline() -> None:
    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        link = Link(1, a)
        link.send(b"proposal")
        # no writer task runs: the bytes left in send()
        assert not link.out
        assert await _receive(b, 8) == b"proposal"
        await a.aclose()
        await b.aclose()


async def test_corked_sends_leave_in_one_write_on_uncork() -> None:
    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        link = Link(1, a)
        link.cork()
        link.send(b"one,")
        link.send(b"two,")
        assert link.out == b"one,two,"
        link.uncork()
        assert not link.out
        link.send(b"three")
        assert await _receive(b, 13) == b"one,two,three"
        await a.aclose()
        await b.aclose()


async def test_what_the_socket_does_not_take_goes_through_the_writer_in_order() -> None:
    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        link = Link(1, a)
        big = bytes(range(256)) * 40_000  # ~10 MB: more than the socket buffers hold
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.writer)
            link.send(big)
            assert link.out  # the rest is queued for the writer
            link.send(b"after")  # queued behind it, never written inline before it
            got = await _receive(b, len(big) + 5)
            assert got == big + b"after"
            link.close()
        await a.aclose()
        await b.aclose()


class Pieces:
    """A streamed body of ``n`` pieces of ``size`` bytes, counting the pieces made."""

    def __init__(self, n: int, size: int) -> None:
        self.n, self.size, self.made = n, size, 0

    def next_piece(self) -> tuple[bytes, bool]:
        self.made += 1
        return bytes([self.made]) * self.size, self.made == self.n


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "wrapped"])
async def test_a_streamed_body_is_made_as_the_socket_takes_it_and_held_packets_follow(
    wrapped: bool,
) -> None:
    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        b.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        link = Link(1, ReplayStream(a, b"") if wrapped else a)  # wrapped: as TLS or SASL
        body = Pieces(40, 1 << 20)  # 40 MiB: far more than the sockets hold
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.writer)
            link.cork()
            link.send(b"SNAP")
            link.stream_pieces(body)
            link.send(b"NEWLEADER")  # sent during the stream: held behind its body
            link.uncork()
            assert link.streaming and link.out == (b"SNAP" if wrapped else b"")  # inline?
            link.send(b"COMMIT")
            await trio.testing.wait_all_tasks_blocked()
            # the peer reads nothing: the writer made only what the sockets could take, and
            # the one piece waiting for room
            assert link.streaming and body.made < 10
            got = await _receive(b, 4 + 40 * (1 << 20) + 15)
            assert got[:4] == b"SNAP" and got[-15:] == b"NEWLEADERCOMMIT"
            assert got[4:-15] == b"".join(bytes([i]) * (1 << 20) for i in range(1, 41))
            assert not link.streaming
            link.send(b"after")
            assert await _receive(b, 5) == b"after"
            link.close()
        await a.aclose()
        await b.aclose()


async def test_a_failing_body_closes_its_link_only() -> None:
    class Broken:
        def next_piece(self) -> tuple[bytes, bool]:
            raise ValueError("walk failed")

    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        link = Link(1, a)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.writer)
            link.stream_pieces(Broken())
            link.send(b"held")
            await trio.testing.wait_all_tasks_blocked()
        assert link.closed and not link.streaming
        await a.aclose()
        assert await b.receive_some(10) == b""  # nothing held was sent
        await b.aclose()


async def test_a_wrapped_stream_is_written_by_the_writer_task() -> None:
    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        link = Link(1, ReplayStream(a, b""))
        link.send(b"sasl")
        assert link.out == b"sasl"  # never written inline on a wrapped stream
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.writer)
            assert await _receive(b, 4) == b"sasl"
            link.close()
        await a.aclose()
        await b.aclose()


async def test_a_closed_socket_is_never_written_inline() -> None:
    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        link = Link(1, a)
        await a.aclose()
        link.send(b"late")  # fileno() is -1: queued, not written to a reused number
        assert link.out == b"late"
        await b.aclose()


async def test_a_broken_link_is_closed_by_an_inline_write() -> None:
    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        link = Link(1, a)
        # SO_LINGER 0: closing sends an RST, which loopback delivers before aclose returns
        b.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await b.aclose()
        link.send(b"x" * 1000)
        assert link.closed
        await a.aclose()


# ---------------------------------------------------------------------------------- the pass


class _Machine:
    """A Zab machine stand-in: Readies queued by the test, advances recorded."""

    def __init__(self) -> None:
        self.readies: deque[Ready] = deque()
        self.advanced: list[Ready] = []

    def has_ready(self) -> bool:
        return bool(self.readies)

    def ready(self) -> Ready:
        return self.readies.popleft()

    def advance(self, rd: Ready) -> None:
        self.advanced.append(rd)


class _Peer:
    """The RolePeer parts a pass uses."""

    def __init__(self) -> None:
        self.applier = ReadyApplier()
        self.kicks = 0
        self.kicked = trio.Event()
        self.appended: list[Plan] = []
        self.persisted: list[Plan] = []
        self.gate = trio.Event()
        self.host = self
        self.client_pass = False

    def kick(self) -> None:
        self.kicks += 1
        self.kicked.set()

    async def wait_kick(self) -> None:
        await self.kicked.wait()
        self.kicked = trio.Event()

    def wake(self) -> None:
        pass

    def advance_durable(self) -> None:
        self.applier.synced(1 << 60)

    def append(self, plan: Plan) -> None:
        self.appended.append(plan)
        self.applier.persisted(len(self.appended) if plan.append else None)

    async def persist(self, plan: Plan) -> None:
        await self.gate.wait()
        self.persisted.append(plan)
        self.applier.persisted()


class _Pump(Pump):
    def __init__(self, peer: Any) -> None:
        super().__init__(peer)
        self.sent: list[Ready] = []
        self.applied: list[Ready] = []
        self.fail: Exception | None = None
        self.reenter = False

    def _links(self) -> list[Link]:
        return []

    def _send(self, plan: Plan) -> None:
        self.sent.append(plan.ready)
        if self.reenter:
            self.run_now()  # a pass is never re-entered: this only kicks

    def _apply(self, plan: Plan) -> None:
        if self.fail is not None:
            raise self.fail
        self.applied.append(plan.ready)


def _pump() -> tuple[_Peer, _Machine, _Pump]:
    """A pump over a machine stand-in, its applier started."""
    peer = _Peer()
    machine = _Machine()
    peer.applier.start(machine)
    return peer, machine, _Pump(peer)


def _entries(z: int) -> Ready:
    return Ready(entries=[Entry(z, b"txn")])


async def test_run_now_handles_readies_in_the_callers_task_and_only_kicks_when_it_cannot() -> None:
    with trio.fail_after(DEADLINE):
        peer, machine, pump = _pump()
        machine.readies.append(_entries(1))
        pump.run_now()  # the pump task is not running: a kick, nothing handled
        assert peer.kicks == 1 and not pump.sent
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump.pump)
            await trio.testing.wait_all_tasks_blocked()
            assert [r.entries[0].zxid for r in pump.applied] == [1]
            kicks = peer.kicks
            machine.readies.append(_entries(2))
            pump.reenter = True
            pump.run_now()  # handled here, at once; the re-entry from _send only kicked
            assert [r.entries[0].zxid for r in pump.applied] == [1, 2]
            assert peer.kicks == kicks + 1
            nursery.cancel_scope.cancel()


async def test_run_now_inside_a_client_pass_waits_for_its_end() -> None:
    with trio.fail_after(DEADLINE):
        peer, machine, pump = _pump()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump.pump)
            await trio.testing.wait_all_tasks_blocked()
            kicks = peer.kicks
            machine.readies.append(_entries(1))
            peer.client_pass = True
            pump.run_now()  # the poller's pass runs it when it ends: nothing now, no kick
            assert not pump.sent and peer.kicks == kicks
            peer.client_pass = False
            pump.run_now()  # (QuorumPeer.end_client_pass)
            assert [r.entries[0].zxid for r in pump.applied] == [1]
            nursery.cancel_scope.cancel()


class _NoClients:
    """A poller owner with no client connections."""

    def feed(self, peer: object, data: bytes) -> None:
        raise AssertionError("no client here")

    def finished(self, peer: object) -> None:
        raise AssertionError("no client here")


def _poller() -> Poller:
    return Poller(
        _NoClients(),  # type: ignore[arg-type]
        lambda: 0,
        receive_size=4096,
        soft_limit=1 << 20,
        hard_limit=1 << 22,
        linger_ms=1000,
    )


async def test_a_plain_link_is_read_in_the_client_pollers_passes() -> None:
    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        poller = _poller()
        passes: list[str] = []
        poller.before_pass = lambda: passes.append("begin")
        poller.after_pass = lambda: passes.append("end")
        got: list[tuple[int, int]] = []
        reasons: list[str] = []

        def step(ev: object) -> None:
            assert not isinstance(ev, bytes)
            got.append((ev.type, ev.zxid))  # type: ignore[attr-defined]
            passes.append("step")

        async def reader() -> None:
            reasons.append(await read_link(b, step, lambda: passes.append("kick"), None, poller))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poller.run)
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            assert len(poller.selector.get_map()) == 1  # the link's socket, nothing else
            two = encode_packet(packet(PacketType.PROPOSAL, 7, b"t"))
            two += encode_packet(packet(PacketType.COMMIT, 7))
            await a.send_all(two)
            await trio.testing.wait_all_tasks_blocked()
            # both packets stepped, then one kick, inside one pass
            assert got == [(PacketType.PROPOSAL, 7), (PacketType.COMMIT, 7)]
            assert passes[:5] == ["begin", "step", "step", "kick", "end"]
            assert set(passes[5:]) <= {"begin", "end"}  # (the poller looks again after a pass)
            await a.aclose()
            await trio.testing.wait_all_tasks_blocked()
            assert reasons == ["connection closed by the peer"]
            assert not poller.selector.get_map()  # unwatched when the link ended
            nursery.cancel_scope.cancel()
        await b.aclose()


async def test_a_failure_in_a_pollers_pass_is_raised_by_the_links_reader() -> None:
    with trio.fail_after(DEADLINE):
        a, b = await _pair()
        poller = _poller()

        def step(ev: object) -> None:
            raise OSError("disk gone")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poller.run)
            await a.send_all(encode_packet(packet(PacketType.PING, 0)))
            with pytest.raises(OSError, match="disk gone"):
                await read_link(b, step, lambda: None, None, poller)
            assert not poller.selector.get_map()
            # a reader cancelled while it waits unwatches too
            with trio.move_on_after(0.01):
                await read_link(b, step, lambda: None, None, poller)
            assert not poller.selector.get_map()
            nursery.cancel_scope.cancel()
        await a.aclose()
        await b.aclose()


async def test_a_barrier_is_left_to_the_pump_task() -> None:
    with trio.fail_after(DEADLINE):
        peer, machine, pump = _pump()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump.pump)
            await trio.testing.wait_all_tasks_blocked()
            machine.readies.append(Ready(current_epoch=3))
            machine.readies.append(_entries(5))
            pump.run_now()
            # the barrier's messages went out; its persistence waits in the pump task
            assert len(pump.sent) == 1 and not pump.applied
            await trio.testing.wait_all_tasks_blocked()
            pump.run_now()  # meanwhile: nothing taken behind the barrier
            assert len(pump.sent) == 1
            peer.gate.set()
            await trio.testing.wait_all_tasks_blocked()
            assert len(peer.persisted) == 1
            assert [r.current_epoch for r in pump.applied] == [3, None]
            assert pump.applied[1].entries[0].zxid == 5
            nursery.cancel_scope.cancel()


async def test_an_error_in_another_tasks_pass_is_raised_by_the_pump_task() -> None:
    with trio.fail_after(DEADLINE):
        _, machine, pump = _pump()

        async def fail_from_another_task() -> None:
            await trio.testing.wait_all_tasks_blocked()
            pump.fail = OSError("disk gone")
            machine.readies.append(_entries(1))
            pump.run_now()  # does not raise here, in the caller's task

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail_from_another_task)
            with pytest.raises(OSError, match="disk gone"):
                await pump.pump()
