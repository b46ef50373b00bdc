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

Members reach each other only through the link proxies of :mod:`trizk.compat.procs.linkproxy`
(one
per
directed pair of members, quorum and election ports; each member's zoo.cfg lists its own
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
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from trizk.compat.procs.ensemble import ProcessMember, member_mode, wait_serving
from trizk.compat.procs.javaquorum import allocate
from trizk.compat.procs.linkproxy import REFUSE, LinkNet, LoopThread
from trizk.compat.procs.servers import stop_process
from trizk.testing_base import IN_PROCESS, PROCESS, ServerError

__all__ = ["AsyncEnsemble", "Ensemble"]

log = logging.getLogger("trizk.testing")


@dataclass
class _Member(ProcessMember):
    """A member's directory (``workdir``: zoo.cfg, data/, server.log) and what runs it: a child
    process, or in-process its server, cancel scope and a stopped event."""

    scope: Any = None
    server: Any = None
    stopped: Any = None

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"


class _Started:
    """A task_status that remembers whether the task said it started."""

    def __init__(self, task_status: Any) -> None:
        self.task_status = task_status
        self.done = False

    def started(self, value: Any = None) -> None:
        self.done = True
        self.task_status.started(value)


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
        self._loop: LoopThread | None = None
        self._members: dict[int, _Member] = {}

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Ensemble:
        """Start every member and wait until the ensemble serves (:meth:`wait_for_quorum`)."""
        if self.root is not None:
            raise ServerError("the ensemble was already started")
        self.root = Path(tempfile.mkdtemp(prefix="trizk-ensemble-", dir=self.base_dir))
        try:
            self.links = LinkNet(self._addrs)
            if self.mode == IN_PROCESS:
                self._loop = LoopThread("trizk-ensemble").start(self.start_timeout)
                self._loop.start_task(self.links.serve)
            else:
                self.links.start_thread(self.start_timeout)
            for sid in self.members:
                self._write_member(sid)
            for sid in self.members:
                self._start(sid)
            self.wait_for_quorum()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every member and the proxies, and delete the ensemble's directory."""
        try:
            for sid, m in self._members.items():
                if self._running(m):
                    self.kill(sid)
        finally:
            try:
                if self._loop is not None:
                    loop, self._loop = self._loop, None
                    loop.stop(self.start_timeout)
                if self.links is not None:
                    self.links.close()
            finally:
                if self.root is not None:
                    shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Ensemble:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _write_member(self, sid: int) -> None:
        assert self.root is not None and self.links is not None
        a = self._addrs[sid]
        m = _Member(sid, "trizk", a, self.root / f"m{sid}")
        m.data_dir.mkdir(parents=True)
        (m.data_dir / "myid").write_text(f"{sid}\n")
        cfg = {
            "dataDir": str(m.data_dir),
            "clientPort": str(a.client_port),
            "clientPortAddress": a.host,
            **({"peerType": "observer"} if a.observer else {}),
            **self.cfg,
            **self.links.server_lines(sid),
        }
        m.cfg_path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
        self._members[sid] = m

    def _running(self, m: _Member) -> bool:
        if self.mode == IN_PROCESS:
            return m.scope is not None
        return m.alive()

    def _start(self, sid: int) -> None:
        m = self._members[sid]
        if self._running(m):
            raise ServerError(f"member {sid} is running")
        if self.mode == PROCESS:
            with open(m.log_path, "ab") as out:
                m.proc = subprocess.Popen(
                    [sys.executable, "-m", "trizk.server", str(m.cfg_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=m.workdir,
                )
            return
        assert self._loop is not None
        loop = self._loop

        async def run_member(task_status: Any) -> None:
            import trio

            from trizk.server.config.zoocfg import load_config
            from trizk.server.shell.app import TrizkServer

            started = _Started(task_status)
            m.stopped = trio.Event()
            try:
                with trio.CancelScope() as scope:
                    m.server = TrizkServer(load_config(m.cfg_path))
                    m.scope = scope
                    await m.server.run(task_status=started)
            except Exception:
                if not started.done:
                    raise  # nursery.start raises it in start_member
                # a member that fails while it runs is down, like a crashed process; the
                # other members (and the loop they share) carry on
                log.exception("ensemble member %d failed", sid)
            finally:
                m.scope = None
                m.stopped.set()

        try:
            loop.start_task(run_member)
        except BaseException as e:
            raise ServerError(f"member {sid} did not start: {e!r}") from e

    def start_member(self, sid: int) -> None:
        """Start a stopped (or killed) member again: same ports, same data (no wait)."""
        self._start(sid)

    def kill(self, sid: int) -> None:
        """Stop member ``sid`` with no clean shutdown: SIGKILL out of process; in-process its
        tasks are cancelled where they stand (its sockets close, nothing more is written)."""
        self._halt(sid, kill=True)

    def stop(self, sid: int) -> None:
        """Stop member ``sid`` (SIGTERM out of process; in-process as :meth:`kill`)."""
        self._halt(sid, kill=False)

    def restart(self, sid: int) -> None:
        """Stop member ``sid`` and start it again on the same ports with the same data (no
        wait: follow with :meth:`wait_for_quorum`)."""
        self.stop(sid)
        self._start(sid)

    def _halt(self, sid: int, *, kill: bool) -> None:
        m = self._members[sid]
        if self.mode == PROCESS:
            if m.proc is not None and m.proc.poll() is None:
                if kill:
                    m.proc.kill()
                    m.proc.wait(self.start_timeout)
                else:
                    stop_process(m.proc, self.start_timeout)
            return
        if m.scope is None or self._loop is None:
            return
        import trio

        async def halt() -> None:
            if m.scope is not None:
                m.scope.cancel()
            with trio.fail_after(self.start_timeout):
                await m.stopped.wait()

        self._loop.run(halt)

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
        return self._members[sid].data_dir

    def running(self, sid: int) -> bool:
        return self._running(self._members[sid])

    def mode_of(self, sid: int) -> str:
        """``leader``, ``follower`` or ``observer`` (``srvr``'s Mode), or '' when member
        ``sid`` is down or not serving (e.g. cut off from a quorum)."""
        return member_mode("127.0.0.1", self.port(sid))

    def leader(self) -> int | None:
        """The sid of the member that says it leads, or None."""
        for sid, m in self._members.items():
            if self._running(m) and self.mode_of(sid) == "leader":
                return sid
        return None

    def wait_for_quorum(
        self, members: Iterable[int] | None = None, timeout: float | None = None
    ) -> dict[int, str]:
        """Wait until every running member (or those of ``members``) has a role and accepts a
        session, exactly one of them the leader; returns sid -> mode. Bounded by ``timeout``
        (default ``start_timeout``): a TimeoutError with the modes seen."""
        chosen = set(self.members if members is None else members)
        addrs = {
            s: ("127.0.0.1", self.port(s))
            for s, m in self._members.items()
            if s in chosen and self._running(m)
        }

        def tails() -> str:
            if self.mode == IN_PROCESS:
                return "(in-process members log through the logging module)"
            return "\n".join(f"--- member {s}\n{m.log_tail()}" for s, m in self._members.items())

        return wait_serving(addrs, self.start_timeout if timeout is None else timeout, tails)

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
