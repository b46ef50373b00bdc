"""The server's one clock (:mod:`trizk.server.shell.clock`): both readings move together, and
a sleeper wakes when the clock is moved past its deadline (and only then)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trizk.server.shell.clock import Clock


async def test_advance_moves_both_readings_forward_only() -> None:
    clock = Clock()
    now, wall = clock.now(), clock.wall()
    clock.advance(60_000)
    assert clock.offset == 60_000
    assert clock.now() - now >= 60_000 and clock.wall() - wall >= 60_000
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.offset == 60_000


async def test_a_sleeper_wakes_when_the_clock_passes_its_deadline() -> None:
    clock = Clock()
    woke: list[int] = []

    async def sleeper(deadline: int) -> None:
        await clock.sleep_until(deadline)
        woke.append(clock.now() - deadline)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sleeper, clock.now() + 3_600_000)  # an hour
        await trio.testing.wait_all_tasks_blocked()
        clock.advance(1_800_000)  # half of it: still asleep
        await trio.testing.wait_all_tasks_blocked()
        assert woke == []
        clock.advance(1_800_000)
        await trio.testing.wait_all_tasks_blocked()
        assert len(woke) == 1 and woke[0] >= 0
