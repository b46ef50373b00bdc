"""The server's one clock: every time a server's cores and tasks see comes from here.

Theory of operation
-------------------
The pure cores never read a clock: they are handed ``now`` (monotonic ms: session and
connection expiry, Zab's timeouts) and ``wall`` (wall-clock ms: txn times, TTLs, containers).
Those values come from one :class:`Clock` per server, made by the shell
(:class:`~trizk.server.shell.app.TrizkServer`) and passed to whatever needs the time: the
client poller, the txn log's committer, the ensemble member (its Zab pumps and tickers) and
the test controls.

A test moves a server's time forward with :meth:`Clock.advance` (``trizk.testing``'s
``advance``, ``POST /advance``): both readings gain the same offset, and every task waiting in
:meth:`Clock.sleep_until` -- the session ticker, the container reaper, the connection expirer,
the Zab tickers of an ensemble member -- wakes and looks at the new time at once, as if that
much time had passed. Time never goes back.

Invariants: ``now()`` never decreases (Trio's clock is monotonic and the offset only grows);
``wall() - now()`` changes only with the system's wall clock, never with :meth:`advance`.
"""

from __future__ import annotations

import time

import trio

__all__ = ["Clock"]


class Clock:
    """One server's monotonic and wall clocks, each plus the offset a test moved them by.

    Made inside the server's Trio run (it reads that run's clock)."""

    def __init__(self) -> None:
        #: milliseconds a test moved this clock forward (:meth:`advance`)
        self.offset = 0
        #: the run's clock (trio.current_time() without its per-call lookups: the shell asks
        #: for the time a few times per request)
        self._trio = trio.lowlevel.current_clock()
        #: set (and replaced) when the clock moves: the timed tasks wake up and look again
        self._moved = trio.Event()

    def now(self) -> int:
        """Monotonic milliseconds (session expiry, connection expiry, Zab's timeouts)."""
        return int(self._trio.current_time() * 1000) + self.offset

    def wall(self) -> int:
        """Wall-clock milliseconds (txn times, TTLs, containers)."""
        return int(time.time() * 1000) + self.offset

    def advance(self, ms: int) -> None:
        """Move both clocks ``ms`` forward: every :meth:`sleep_until` wakes and looks again."""
        if ms < 0:
            raise ValueError("the clock only moves forward")
        self.offset += ms
        moved, self._moved = self._moved, trio.Event()
        moved.set()

    async def sleep_until(self, deadline: int) -> None:
        """Sleep until :meth:`now` reaches ``deadline`` (ms), cut short when the clock is moved
        past it."""
        while (left := deadline - self.now()) > 0:
            with trio.move_on_after(left / 1000):
                await self._moved.wait()
