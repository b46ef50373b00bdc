"""trizk in other people's tests: a throwaway ensemble with kills, restarts and partitions.

:class:`Ensemble` is a sync context manager around ``n`` voting members (sids ``1..n``) and
``observers`` observers (sids ``n+1..``), each on free 127.0.0.1 ports with its own data
directory under one temporary directory, removed on exit even when the test failed. Two modes,
one API (``trizk.testing.Ensemble`` re-exports it):

* ``mode="in-process"`` (default, fastest): every member is a
  :class:`trizk.server.shell.app.TrizkServer` with its ``QuorumPeer``, all in **one** thread running
  one Trio loop (nothing in a member is process-wide, so members share a loop as they would
  share a machine). ``kill(sid)`` cancels the member's tasks where they stand: its sockets close
  and nothing more is written; what it fsynced is its disk on ``restart``.
* ``mode="process"``: every member is a real ``python -m trizk.server zoo.cfg`` child;
  ``kill(sid)`` is SIGKILL, ``stop(sid)`` SIGTERM.

The members, their directories, zoo.cfg files, processes and link proxies are a
:class:`trizk.testing.processes.MemberSet` (the harness compat's process ensembles share);
in-process, a subclass of it runs each member as tasks of the one loop thread
(:class:`trizk.testing.loop.LoopThread`) instead of a process.

Members reach each other only through the link proxies of :mod:`trizk.testing.linkproxy` (one
per directed pair of members, quorum and election ports; each member's zoo.cfg lists its own
address and the proxies towards the others), so a test chooses which links fail:
``cut(1, 3)``, ``isolate(2)``, ``partition({1, 2}, {3})``, ``heal()``. Clients connect to the
members directly (``connect_string`` lists every member, as kazoo wants it).

``leader()`` and :meth:`Ensemble.wait_for_quorum` read the members' ``srvr`` answers (``Mode:``);
every wait is bounded and fails with the members' modes (and, out of process, their logs).
Timing defaults are short (``tickTime`` 200 ms, ``initLimit`` 10, ``syncLimit`` 5): a follower
gives up on a silent leader after 1 s, and a new leader is elected within a second or two.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import trio

from trizk.testing.linkproxy import REFUSE, LinkNet
from trizk.testing.loop import LoopThread
from trizk.testing.ports import allocate
from trizk.testing.probes import member_mode
from trizk.testing.processes import MemberSet
from trizk.testing.server import IN_PROCESS, PROCESS, ServerError

__all__ = ["AsyncEnsemble", "Ensemble"]

log = logging.getLogger("trizk.testing")


class _Started:
    """A task_status that remembers whether the task said it started."""

    def __init__(self, task_status: Any) -> None:
        self.task_status = task_status
        self.done = False

    def started(self, value: Any = None) -> None:
        self.done = True
        self.task_status.started(value)


class _Run:
    """An in-process member's run: its server, cancel scope and a stopped event."""

    def __init__(self) -> None:
        self.scope: trio.CancelScope | None = None
        self.server: Any = None
        self.stopped = trio.Event()


class _ProcessMembers(MemberSet):
    """The members as ``trizk-server`` children (MemberSet as it is)."""

    def close_member(self, sid: int) -> None:
        self.kill(sid)  # a throwaway ensemble: no clean shutdown needed


class _InProcessMembers(MemberSet):
    """The members as Trio tasks of one loop thread, which also serves the link proxies."""

    def __init__(self, kinds: Mapping[int, str], **kwargs: Any) -> None:
        self.loop: LoopThread | None = None
        self._runs: dict[int, _Run] = {}
        super().__init__(kinds, links=True, serve_links=False, **kwargs)
        try:
            assert self.links is not None
            self.loop = LoopThread("trizk-ensemble").start(self.timeout)
            self.loop.start_task(self.links.serve)
        except BaseException:
            self.close()
            raise

    def running(self, sid: int) -> bool:
        run = self._runs.get(sid)
        return run is not None and run.scope is not None

    def start(self, sid: int) -> None:
        if self.running(sid):
            raise ServerError(f"member {sid} is running")
        assert self.loop is not None
        m = self.members[sid]
        self._runs[sid] = run = self.loop.run_sync(_Run)

        async def run_member(task_status: Any) -> None:
            from trizk.server.config.zoocfg import load_config
            from trizk.server.shell.app import TrizkServer

            started = _Started(task_status)
            try:
                with trio.CancelScope() as scope:
                    run.server = TrizkServer(load_config(m.cfg_path))
                    run.scope = scope
                    await run.server.run(task_status=started)
            except Exception:
                if not started.done:
                    raise  # nursery.start raises it in start_member
                # a member that fails while it runs is down, like a crashed process; the
                # other members (and the loop they share) carry on
                log.exception("ensemble member %d failed", sid)
            finally:
                run.scope = None
                run.stopped.set()

        try:
            self.loop.start_task(run_member)
        except BaseException as e:
            raise ServerError(f"member {sid} did not start: {e!r}") from e

    def kill(self, sid: int) -> None:
        """Cancel the member's tasks where they stand: its sockets close, nothing more is
        written."""
        run = self._runs.get(sid)
        if run is None or run.scope is None or self.loop is None:
            return

        async def halt() -> None:
            if run.scope is not None:
                run.scope.cancel()
            with trio.fail_after(self.timeout):
                await run.stopped.wait()

        self.loop.run(halt)

    def stop(self, sid: int) -> None:
        self.kill(sid)

    def close_member(self, sid: int) -> None:
        self.kill(sid)

    def close_links(self) -> None:
        try:
            if self.loop is not None:
                loop, self.loop = self.loop, None
                loop.stop(self.timeout)
        finally:
            super().close_links()

    def tails(self) -> str:
        return "(in-process members log through the logging module)"


class Ensemble:
    """A trizk ensemble for a test; see the module docstring.

    ``properties`` are extra zoo.cfg keys for every member; the ensemble's temporary directory
    is made in ``base_dir`` (default: the system's temp dir). ``start_timeout`` bounds every
    start and wait (s)."""

    def __init__(
        self,
        n: int = 3,
        observers: int = 0,
        *,
        mode: str = IN_PROCESS,
        tick_time: int = 200,
        init_limit: int = 10,
        sync_limit: int = 5,
        properties: Mapping[str, str] | None = None,
        start_timeout: float = 30.0,
        base_dir: str | Path | None = None,
    ) -> None:
        if mode not in (IN_PROCESS, PROCESS):
            raise ValueError(f"mode must be {IN_PROCESS!r} or {PROCESS!r}, not {mode!r}")
        if n < 1 or observers < 0:
            raise ValueError("an ensemble has at least one voting member")
        self.mode = mode
        self.start_timeout = start_timeout
        self.base_dir = base_dir
        self.cfg: dict[str, str] = {
            "tickTime": str(tick_time),
            "initLimit": str(init_limit),
            "syncLimit": str(sync_limit),
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
            "maxClientCnxns": "0",
        }
        self.cfg.update(properties or {})
        sids = list(range(1, n + observers + 1))
        self._addrs = allocate(sids, frozenset(range(n + 1, n + observers + 1)))
        #: every member's sid, voters first
        self.members: tuple[int, ...] = tuple(sids)
        #: the observers' sids
        self.observers: tuple[int, ...] = tuple(sids[n:])
        self.root: Path | None = None
        self.links: LinkNet | None = None
        self._set: MemberSet | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Ensemble:
        """Start every member and wait until the ensemble serves (:meth:`wait_for_quorum`)."""
        if self.root is not None:
            raise ServerError("the ensemble was already started")
        kinds = dict.fromkeys(self.members, "trizk")
        common: dict[str, Any] = {
            "addrs": self._addrs,
            "extra": self.cfg,
            "base_dir": self.base_dir,
            "timeout": self.start_timeout,
        }
        if self.mode == IN_PROCESS:
            self._set = _InProcessMembers(kinds, **common)
        else:
            self._set = _ProcessMembers(kinds, links=True, **common)
        self.root, self.links = self._set.root, self._set.links
        try:
            for sid in self.members:
                self._start(sid)
            self.wait_for_quorum()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every member and the proxies, and delete the ensemble's directory."""
        if self._set is not None:
            self._set.close()

    def __enter__(self) -> Ensemble:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _members(self) -> MemberSet:
        if self._set is None:
            raise ServerError("the ensemble was never started")
        return self._set

    def _start(self, sid: int) -> None:
        members = self._members()
        if members.running(sid):
            raise ServerError(f"member {sid} is running")
        members.start(sid)

    def start_member(self, sid: int) -> None:
        """Start a stopped (or killed) member again: same ports, same data (no wait)."""
        self._start(sid)

    def kill(self, sid: int) -> None:
        """Stop member ``sid`` with no clean shutdown: SIGKILL out of process; in-process its
        tasks are cancelled where they stand (its sockets close, nothing more is written)."""
        self._members().kill(sid)

    def stop(self, sid: int) -> None:
        """Stop member ``sid`` (SIGTERM out of process; in-process as :meth:`kill`)."""
        self._members().stop(sid)

    def restart(self, sid: int) -> None:
        """Stop member ``sid`` and start it again on the same ports with the same data (no
        wait: follow with :meth:`wait_for_quorum`)."""
        self.stop(sid)
        self._start(sid)

    # ------------------------------------------------------------------ views
    def port(self, sid: int) -> int:
        """Member ``sid``'s client port."""
        return self._addrs[sid].client_port

    def hosts(self, sids: Iterable[int] | None = None) -> str:
        """``host:port,...`` of the given members (default: all)."""
        return ",".join(f"127.0.0.1:{self.port(s)}" for s in (sids or self.members))

    @property
    def connect_string(self) -> str:
        """Every member's ``host:port``: give it to any client as is."""
        return self.hosts()

    def data_dir(self, sid: int) -> Path:
        return self._members().members[sid].data_dir

    def running(self, sid: int) -> bool:
        return self._members().running(sid)

    def mode_of(self, sid: int) -> str:
        """``leader``, ``follower`` or ``observer`` (``srvr``'s Mode), or '' when member
        ``sid`` is down or not serving (e.g. cut off from a quorum)."""
        return member_mode("127.0.0.1", self.port(sid))

    def leader(self) -> int | None:
        """The sid of the member that says it leads, or None."""
        return None if self._set is None else self._set.leader()

    def wait_for_quorum(
        self, members: Iterable[int] | None = None, timeout: float | None = None
    ) -> dict[int, str]:
        """Wait until every running member (or those of ``members``) has a role and accepts a
        session, exactly one of them the leader; returns sid -> mode. Bounded by ``timeout``
        (default ``start_timeout``): a TimeoutError with the modes seen."""
        wait = self.start_timeout if timeout is None else timeout
        return self._members().wait_serving(wait, members)

    # ------------------------------------------------------------------ partitions
    def _net(self) -> LinkNet:
        if self.links is None:
            raise ServerError("the ensemble is not running")
        return self.links

    def cut(self, a: int, b: int, *, mode: str = REFUSE) -> None:
        """Cut the links between members ``a`` and ``b`` (both ways, quorum and election ports):
        their connections close, new ones are refused (``mode="blackhole"``: held silent)."""
        self._net().cut(a, b, mode=mode)

    def isolate(self, sid: int, *, mode: str = REFUSE) -> None:
        """Cut member ``sid`` off from every other member (clients still reach it)."""
        self._net().isolate(sid, mode=mode)

    def partition(self, *groups: Iterable[int], mode: str = REFUSE) -> None:
        """Cut every link between members of different groups: ``partition({1, 2}, {3})``."""
        self._net().partition(*groups, mode=mode)

    def heal(self) -> None:
        """Heal every cut link."""
        self._net().heal()


class AsyncEnsemble:
    """:class:`Ensemble` for Trio tests: ``async with AsyncEnsemble(3) as ens:``, every control
    awaited. Same arguments, same controls, same guarantees; each blocking control runs in a
    worker thread (``trio.to_thread``), so the test's own loop goes on meanwhile -- the members
    run in their own Trio loop thread (in-process) or as child processes, never in the test's
    loop. ``ensemble`` is the underlying :class:`Ensemble`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ensemble = Ensemble(*args, **kwargs)

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        import functools

        import trio

        return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    async def __aenter__(self) -> AsyncEnsemble:
        await self._call(self.ensemble.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import trio

        with trio.CancelScope(shield=True):  # nothing left running, even when cancelled
            await self._call(self.ensemble.close)

    # -- what does not block: as on Ensemble
    @property
    def members(self) -> tuple[int, ...]:
        return self.ensemble.members

    @property
    def observers(self) -> tuple[int, ...]:
        return self.ensemble.observers

    @property
    def connect_string(self) -> str:
        return self.ensemble.connect_string

    def hosts(self, sids: Iterable[int] | None = None) -> str:
        return self.ensemble.hosts(sids)

    def port(self, sid: int) -> int:
        return self.ensemble.port(sid)

    def data_dir(self, sid: int) -> Path:
        return self.ensemble.data_dir(sid)

    # -- the controls, awaited
    async def leader(self) -> int | None:
        return await self._call(self.ensemble.leader)

    async def mode_of(self, sid: int) -> str:
        return await self._call(self.ensemble.mode_of, sid)

    async def wait_for_quorum(
        self, members: Iterable[int] | None = None, timeout: float | None = None
    ) -> dict[int, str]:
        return await self._call(self.ensemble.wait_for_quorum, members, timeout)

    async def kill(self, sid: int) -> None:
        await self._call(self.ensemble.kill, sid)

    async def stop(self, sid: int) -> None:
        await self._call(self.ensemble.stop, sid)

    async def restart(self, sid: int) -> None:
        await self._call(self.ensemble.restart, sid)

    async def start_member(self, sid: int) -> None:
        await self._call(self.ensemble.start_member, sid)

    async def cut(self, a: int, b: int, *, mode: str = REFUSE) -> None:
        await self._call(self.ensemble.cut, a, b, mode=mode)

    async def isolate(self, sid: int, *, mode: str = REFUSE) -> None:
        await self._call(self.ensemble.isolate, sid, mode=mode)

    async def partition(self, *groups: Iterable[int], mode: str = REFUSE) -> None:
        await self._call(self.ensemble.partition, *groups, mode=mode)

    async def heal(self) -> None:
        await self._call(self.ensemble.heal)
