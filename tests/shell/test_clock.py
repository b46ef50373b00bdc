"""The server's one clock (:mod:`trizk.server.shell.clock`): both readings move together, a
sleeper wakes when the clock is moved past its deadline (and only then), and the election
port's timeouts run on it."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trizk.quorum.election.election import (
    MAX_NOTIFICATION_INTERVAL,
    MIN_NOTIFICATION_INTERVAL,
    ElectionView,
)
from trizk.server.shell.clock import Clock
from trizk.server.shell.cnxmanager import ElectionPort
from trizk.testing.ports import free_ports


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


async def test_the_election_ports_timeouts_follow_the_server_clock() -> None:
    """A member's election port runs FastLeaderElection on the server's clock: moving the
    clock fires its notification timeouts (each doubling the next, up to the maximum) at once,
    as the Zab tickers do; on Trio's clock the same doublings would take minutes."""
    clock = Clock()
    addrs = {sid: ("127.0.0.1", port) for sid, port in zip((1, 2, 3), free_ports(3), strict=True)}
    port = ElectionPort(1, ElectionView(frozenset(addrs)), addrs, clock=clock)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(port.serve)
            port.look(0, 0)  # alone: members 2 and 3 are down, it stays LOOKING
            assert port.election.not_timeout == MIN_NOTIFICATION_INTERVAL
            while port.election.not_timeout < MAX_NOTIFICATION_INTERVAL:
                clock.advance(MAX_NOTIFICATION_INTERVAL)
                await trio.testing.wait_all_tasks_blocked()
            assert port.decision is None
            assert port.election.deadline is not None
            assert port.election.deadline > clock.now()  # re-armed on the moved clock
            nursery.cancel_scope.cancel()
