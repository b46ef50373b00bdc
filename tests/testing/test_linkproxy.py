"""The link proxies (trizk.testing.linkproxy) on their own, between fake members on loopback:
bytes carried both ways, the election header's address rewritten to the reverse proxy, cuts closing
established connections and refusing or blackholing new ones, heals, per-member server lines."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from trizk.quorum.election.messages import encode_initial_message, parse_initial_message
from trizk.testing.linkproxy import (
    BLACKHOLE,
    ELECTION,
    QUORUM,
    LinkNet,
    rewrite_initial_message,
)
from trizk.testing.ports import MemberAddrs


def test_rewrite_initial_message() -> None:
    head = encode_initial_message(1, "127.0.0.1", 4001)
    assert rewrite_initial_message(head[:10], 1, ("127.0.0.1", 5)) is None  # more bytes needed
    out, used = rewrite_initial_message(head + b"tail", 1, ("127.0.0.9", 5)) or (b"", 0)
    assert used == len(head)
    parsed = parse_initial_message(out)
    assert parsed is not None and parsed[0].sid == 1
    assert parsed[0].addresses == (("127.0.0.9", 5),)
    # another sender's header, and the pre-3.5 bare sid, pass unchanged
    assert rewrite_initial_message(head, 2, ("127.0.0.9", 5)) == (head, len(head))
    bare = (7).to_bytes(8, "big")
    assert rewrite_initial_message(bare, 7, ("127.0.0.9", 5)) == (bare, 8)


class FakeMember:
    """A member's two listening ports; every accepted connection goes to ``conns``."""

    def __init__(self) -> None:
        self.send, self.conns = trio.open_memory_channel[trio.SocketStream](16)
        self.ports: dict[str, int] = {}
        self.accepted = 0

    async def _handler(self, stream: trio.SocketStream) -> None:
        self.accepted += 1
        await self.send.send(stream)
        await trio.sleep_forever()  # the test owns the stream

    async def start(self, nursery: trio.Nursery) -> None:
        for kind in (QUORUM, ELECTION):
            serve = functools.partial(trio.serve_tcp, self._handler, 0, host="127.0.0.1")
            listeners = await nursery.start(serve)
            self.ports[kind] = listeners[0].socket.getsockname()[1]


@asynccontextmanager
async def two_members() -> AsyncIterator[tuple[LinkNet, dict[int, FakeMember]]]:
    async with trio.open_nursery() as nursery:
        fakes = {1: FakeMember(), 2: FakeMember()}
        for f in fakes.values():
            await f.start(nursery)
        addrs = {
            sid: MemberAddrs(sid, f.ports[QUORUM], f.ports[ELECTION], 2180 + sid)
            for sid, f in fakes.items()
        }
        net = LinkNet(addrs)
        try:
            await nursery.start(net.serve)
            yield net, fakes
        finally:
            nursery.cancel_scope.cancel()
            net.close()


async def closed(stream: trio.SocketStream) -> bool:
    """Whether the peer closed or reset the connection (waits for it, bounded)."""
    with trio.fail_after(5):
        try:
            return await stream.receive_some(100) == b""
        except trio.BrokenResourceError:
            return True


async def test_bytes_flow_both_ways_and_server_lines() -> None:
    async with two_members() as (net, fakes):
        lines = net.server_lines(1)
        q = net.pipes[1, 2, QUORUM].address[1]
        e = net.pipes[1, 2, ELECTION].address[1]
        assert lines["server.1"].startswith(f"127.0.0.1:{fakes[1].ports[QUORUM]}:")
        assert lines["server.2"] == f"127.0.0.1:{q}:{e};127.0.0.1:2182"
        with trio.fail_after(5):
            c = await trio.open_tcp_stream("127.0.0.1", q)
            await c.send_all(b"ping")
            far = await fakes[2].conns.receive()
            assert await far.receive_some(100) == b"ping"
            await far.send_all(b"pong")
            assert await c.receive_some(100) == b"pong"


async def test_election_header_names_the_reverse_proxy() -> None:
    async with two_members() as (net, fakes):
        with trio.fail_after(5):
            c = await trio.open_tcp_stream("127.0.0.1", net.pipes[1, 2, ELECTION].address[1])
            real = ("127.0.0.1", fakes[1].ports[ELECTION])
            await c.send_all(encode_initial_message(1, *real) + b"\0\0\0\4abcd")
            far = await fakes[2].conns.receive()
            got = b""
            while (parsed := parse_initial_message(got)) is None:
                got += await far.receive_some(100)
            msg, used = parsed
            # member 2 connecting back to this address goes through the proxy (2, 1)
            assert msg.addresses == (net.pipes[2, 1, ELECTION].address,)
            while len(got) < used + 8:
                got += await far.receive_some(100)
            assert got[used:] == b"\0\0\0\4abcd"


async def test_cut_closes_and_refuses_heal_carries_again() -> None:
    async with two_members() as (net, fakes):
        port = net.pipes[2, 1, QUORUM].address[1]
        with trio.fail_after(5):
            c = await trio.open_tcp_stream("127.0.0.1", port)
            far = await fakes[1].conns.receive()
        net.cut(1, 2)
        assert net.is_cut(2, 1)
        assert await closed(c) and await closed(far)
        with trio.fail_after(5):
            try:
                c2 = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:  # refused: reset at once, sometimes before connect() returns
                pass
            else:
                assert await closed(c2)
        assert fakes[1].accepted == 1  # nothing reached the member
        net.heal()
        assert not net.is_cut(1, 2)
        with trio.fail_after(5):
            c3 = await trio.open_tcp_stream("127.0.0.1", port)
            await c3.send_all(b"x")
            far3 = await fakes[1].conns.receive()
            assert await far3.receive_some(10) == b"x"


async def test_blackhole_holds_silently_until_the_heal() -> None:
    async with two_members() as (net, fakes):
        port = net.pipes[1, 2, ELECTION].address[1]
        net.cut(1, 2, both_ways=False, mode=BLACKHOLE)
        assert net.pipes[1, 2, QUORUM].cut_mode == BLACKHOLE
        assert net.pipes[2, 1, QUORUM].cut_mode is None  # one way only
        with trio.fail_after(5):
            c = await trio.open_tcp_stream("127.0.0.1", port)
            await c.send_all(b"lost")
        # the proxy took the connection (the accept loop runs before the next check) and holds it
        with trio.fail_after(5):
            while not net.pipes[1, 2, ELECTION]._held:
                await trio.sleep(0.001)
        net.heal(1, 2)
        assert await closed(c)
        assert fakes[2].accepted == 0


async def test_isolate_and_partition_choose_links() -> None:
    async with two_members() as (net, _):
        net.isolate(2)
        assert all(p.cut_mode for p in net.pipes.values())
        net.heal()
        net.partition({1}, {2})
        assert net.is_cut(1, 2)
        net.heal()
        net.partition({1, 2})
        assert not net.is_cut(1, 2)


def test_no_proxy_takes_a_port_a_member_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """The members' ports are found free and given up before the proxies bind: when the kernel
    hands one of them to a proxy (as it did in CI, and the member then could not bind it), the
    proxy takes another port."""
    import socket

    from trizk.testing import linkproxy
    from trizk.testing.ports import allocate

    addrs = allocate([1, 2])
    given = addrs[1].quorum_port  # free again: what the kernel may hand out next
    handed: list[socket.socket] = []

    class KernelHandsOutGiven(socket.socket):
        """The first socket bound to port 0 gets ``given``."""

        def bind(self, address: object) -> None:
            host, port = address  # type: ignore[misc]
            if port == 0 and not handed:
                handed.append(self)
                port = given
            super().bind((host, port))

    monkeypatch.setattr(linkproxy.socket, "socket", KernelHandsOutGiven)
    net = LinkNet(addrs)
    monkeypatch.undo()
    try:
        ports = {p.address[1] for p in net.pipes.values()}
        assert handed and handed[0].fileno() == -1  # it did get the member's port, set aside
        theirs = {a.quorum_port for a in addrs.values()} | {a.election_port for a in addrs.values()}
        theirs |= {a.client_port for a in addrs.values()}
        assert len(ports) == 4 and not ports & theirs
    finally:
        net.close()
