"""A Trio loop in a thread: how synchronous code (a test, a fixture) runs Trio tasks.

Theory
------
:class:`LoopThread` is one daemon thread running one ``trio.run``, whose main task opens one
nursery and waits. Other threads hand work to the loop through its token
(``trio.from_thread``): :meth:`LoopThread.run` awaits a function inside the loop and returns
its result (or raises its exception) in the calling thread, :meth:`LoopThread.run_sync` does
the same for a plain function, and :meth:`LoopThread.start_task` is ``nursery.start(fn)``
inside the loop -- it returns once ``fn`` called ``task_status.started(value)``, with that
value, and ``fn`` then runs on in the loop's nursery. Whatever ``fn`` raised before it said it
started is raised to the caller and leaves the loop running.

It is the one home of every "server in a thread" the tests and ``trizk.testing`` run: a
standalone server (``trizk.testing.Server``'s in-process mode, the suite's ``ThreadedServer``),
an in-process ensemble's members, the link proxies of synchronous tests.

Invariants
----------
* Every wait from the calling thread is bounded: :meth:`LoopThread.start` and
  :meth:`LoopThread.stop` take a timeout and raise ``RuntimeError`` past it.
* :meth:`LoopThread.stop` cancels everything in the loop and joins the thread. A task that
  fails after it started cancels the loop (as in any nursery); the exception it ended with is
  kept in :attr:`LoopThread.error` for the owner to report, and :attr:`LoopThread.alive` is
  then False.
* Calls into a loop that has ended raise ``trio.RunFinishedError``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["LoopThread"]


class LoopThread:
    """One daemon thread running one Trio loop, with a nursery that other threads start tasks
    into; see the module docstring."""

    def __init__(self, name: str) -> None:
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        self._scope: trio.CancelScope | None = None
        self._ready = threading.Event()
        #: what the loop ended with, if not with :meth:`stop` (a task that failed)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            with trio.CancelScope() as scope:
                self._scope = scope
                self.token = trio.lowlevel.current_trio_token()
                async with trio.open_nursery() as nursery:
                    self.nursery = nursery
                    self._ready.set()
                    await trio.sleep_forever()

        try:
            trio.run(main)
        except BaseException as e:
            self.error = e
        finally:
            self._ready.set()

    @property
    def alive(self) -> bool:
        """Whether the loop's thread still runs."""
        return self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> LoopThread:
        """Start the thread; returns once its loop takes work (bounded by ``timeout``)."""
        self._thread.start()
        if not self._ready.wait(timeout) or self.error is not None:
            raise RuntimeError(f"the Trio loop thread did not start: {self.error!r}")
        return self

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``await fn(*args)`` in the loop; its result (or exception) here."""
        return trio.from_thread.run(fn, *args, trio_token=self.token)

    def run_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in the loop (to read or change what its tasks own); its result here."""
        return trio.from_thread.run_sync(fn, *args, trio_token=self.token)

    def start_task(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """``nursery.start(fn, *args)`` in the loop: returns what ``fn`` passed to
        ``task_status.started`` once it did. With ``timeout`` (s), a task that has not said
        it started by then is cancelled and ``trio.TooSlowError`` raised."""

        async def start() -> Any:
            assert self.nursery is not None
            if timeout is None:
                return await self.nursery.start(fn, *args)
            with trio.fail_after(timeout):
                return await self.nursery.start(fn, *args)

        return self.run(start)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel everything in the loop and join the thread (bounded)."""
        if self._thread.is_alive() and self._scope is not None:
            try:
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self.token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError("the Trio loop thread did not stop")
