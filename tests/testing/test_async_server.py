"""trizk.testing.AsyncServer under pytest-trio: the controls as awaitables, in the three modes
(in the test's own Trio loop, in a thread, a child process), seen through kazoo.

kazoo blocks, so against an in-loop server it runs in worker threads (``trio.to_thread``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from tests.testing.test_server import WAIT, create_raw, states
from trizk.testing import AsyncServer, ServerError

MODES = ["in-process", "thread", "process"]


async def run(fn: Callable[..., Any], *args: Any) -> Any:
    return await trio.to_thread.run_sync(fn, *args)


async def client(srv: AsyncServer) -> KazooClient:
    zk = KazooClient(hosts=srv.connect_string, timeout=10)
    await run(lambda: zk.start(timeout=WAIT))
    return zk


async def close(*clients: KazooClient) -> None:
    for zk in clients:
        await run(zk.stop)
        zk.close()


@pytest.mark.parametrize("mode", MODES)
async def test_expire_session_drop_and_dump(mode: str) -> None:
    async with AsyncServer(mode=mode) as srv:
        if mode == "in-process":
            # no thread of its own: the server's tasks run in this test's loop
            assert not any(t.name == "trizk-testing" for t in threading.enumerate())
        zk, other = await client(srv), await client(srv)
        try:
            seen = states(zk)
            await run(lambda: zk.create("/eph", b"", ephemeral=True))
            fired = threading.Event()
            await run(lambda: other.exists("/eph", watch=lambda ev: fired.set()))
            sid = zk.client_id[0]
            assert await srv.session_ids() == sorted([sid, other.client_id[0]])
            assert (await srv.dump())["watches"]["data"]["/eph"] == [f"0x{other.client_id[0]:x}"]

            assert await srv.drop_connections(other.client_id[0]) == 1
            assert await srv.expire_session(sid)
            assert await run(seen[KazooState.LOST].wait, WAIT)  # EXPIRED_SESSION
            assert await run(fired.wait, WAIT)
            assert "/eph" not in (await srv.dump())["tree"]
            assert await run(other.retry, other.exists, "/eph") is None
            assert not await srv.expire_session(sid)
        finally:
            await close(zk, other)
        await srv.kill()
        assert not srv.running


@pytest.mark.parametrize("mode", ["in-process"])  # process mode: test_server.py's
async def test_advance_reaps_ttl_nodes_and_containers(mode: str) -> None:
    async with AsyncServer(mode=mode, properties={"extendedTypesEnabled": "true"}) as srv:
        await run(create_raw, srv, "/ttl", 5000)
        await run(create_raw, srv, "/box", None)
        zk = await client(srv)
        try:
            await run(lambda: zk.create("/box/child", b""))
            await run(zk.delete, "/box/child")
            seen = states(zk)
            # 61 s: past the TTL and the container reaper's next look (every 60 s); the
            # session (10 s) expires too
            await srv.advance(61)
            assert await run(seen[KazooState.LOST].wait, WAIT)
            zk2 = await client(srv)
            try:
                for path in ("/ttl", "/box"):
                    ev = threading.Event()
                    if await run(zk2.exists, path, lambda e, ev=ev: ev.set()):
                        assert await run(ev.wait, WAIT), path
                    with pytest.raises(NoNodeError):
                        await run(zk2.get, path)
            finally:
                await close(zk2)
        finally:
            await close(zk)


@pytest.mark.parametrize("mode", ["in-process"])  # a child is killed above
async def test_restart_and_kill_keep_port_and_data(mode: str) -> None:
    async with AsyncServer(mode=mode) as srv:
        root = srv.data_dir.parent
        port = srv.port
        assert await srv.load({"/kept": "v1"}) == 1
        await srv.restart()
        assert srv.port == port and (await srv.dump())["tree"]["/kept"]["data"] == "v1"
        await srv.kill()
        assert not srv.running
        with pytest.raises(ServerError):
            await srv.dump()
        await srv.start()
        assert srv.port == port and (await srv.dump())["tree"]["/kept"]["data"] == "v1"
    assert not srv.running and not root.exists()


async def test_the_blocks_exception_is_not_wrapped() -> None:
    srv = AsyncServer()
    with pytest.raises(KeyError):
        async with srv:
            raise KeyError("from the test")
    assert not srv.running and srv._root is None


async def test_in_process_starts_inside_async_with_only() -> None:
    with pytest.raises(ServerError, match="async with"):
        await AsyncServer().start()
    with pytest.raises(ValueError):
        AsyncServer(mode="elsewhere")
