import pytest
import trio

from trizk.testing import AsyncServer


@pytest.mark.trio
async def test_clock_moves_without_sleeping():
    async with AsyncServer() as server:
        await server.load({"/jobs/1": "pending"})
        before = trio.current_time()
        await server.advance(3600)  # an hour passes on the server
        assert trio.current_time() - before < 60  # and not in the test
        assert (await server.dump())["tree"]["/jobs/1"]["data"] == "pending"
