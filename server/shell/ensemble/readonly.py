"""Read-only mode's timing: when a LOOKING member starts serving read-only clients.

``QuorumPeer.run``'s LOOKING case with ``-Dreadonlymode.enabled=true``: a thread waits a grace
period of ``max(2000, tickTime)`` ms ("before we decide we're partitioned") and, if the member
is still LOOKING, starts a ``ReadOnlyZooKeeperServer``; when the election ends the thread is
interrupted and the read-only server shut down (every client connection closed), whatever the
member's new role. :func:`look_read_only` is that thread as a Trio task beside the wait for
the election's decision; the role itself is pure (:mod:`trizk.server.roles.readonly`). The
grace period runs on the server's clock, so a test that moves the clock moves it too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from trizk.server.shell.clock import Clock

__all__ = ["GRACE_MS", "grace_ms", "look_read_only"]

log = logging.getLogger("trizk.quorum")

#: QuorumPeer: "lower-bound grace period to 2 secs"
GRACE_MS = 2000

D = TypeVar("D")


def grace_ms(tick_ms: int) -> int:
    """How long a member LOOKs before it serves read-only clients: ``max(2000, tickTime)``."""
    return max(GRACE_MS, tick_ms)


async def look_read_only(
    clock: Clock,
    tick_ms: int,
    serve: Callable[[], None],
    stop: Callable[[], None],
    decision: Callable[[], Awaitable[D]],
) -> D:
    """Wait for ``decision()``; if it takes longer than :func:`grace_ms`, ``serve()`` (start
    the read-only role) meanwhile, and ``stop()`` it once the decision is there."""
    started = False

    async def after_grace() -> None:
        nonlocal started
        await clock.sleep_until(clock.now() + grace_ms(tick_ms))
        started = True
        serve()
        log.info("Read-only server started")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(after_grace)
        decided = await decision()
        nursery.cancel_scope.cancel()
    if started:
        stop()
        log.info("Read-only server stopped: the election ended")
    return decided
