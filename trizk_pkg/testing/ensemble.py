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
members directly (``connect_string`` lists every member, as kazoo wants it). ``links=False``
gives the members each other's own addresses instead (no partitions then): what an ensemble
with ``reconfigEnabled=true`` needs, as its members take the leader's server lines on a
reconfig (and when they sync with a leader whose configuration is newer: ZooKeeper's
``QuorumPeer.processReconfig``), and in the leader's lines another member's own address is
the leader's proxy towards it: its links would no longer be its own, and its quorum and
election addresses would move onto ports its proxy holds.

``leader()`` and :meth:`Ensemble.wait_for_quorum` read the members' ``srvr`` answers (``Mode:``);
every wait is bounded and fails with the members' modes (and, out of process, their logs).
Timing defaults are short (``tickTime`` 200 ms, ``initLimit`` 10, ``syncLimit`` 5): a follower
gives up on a silent leader after 1 s, and a new leader is elected within a second or two.
``maxSessionTimeout`` is set to 60 s (:data:`MAX_SESSION_TIMEOUT`; ZooKeeper's 20 ticks would
cap sessions at 4 s) and ``maxClientCnxns`` to 0 (no per-address limit).

The test controls are :class:`trizk.testing.Server`'s, performed by the members themselves
through :class:`trizk.server.ops.testcontrol.Controls` (in-process inside the loop thread; as
processes over each member's ``--testing`` HTTP endpoint, whose URL its readiness line gives in
its log): ``expire_session`` on the leader (the member that tracks sessions), then waited for
on every running member; ``drop_connections`` member by member; ``advance`` on every member
together in steps of a quarter of the followers' timeout, the members' pings exchanged between
steps (in-process: until the loop is idle), so that Zab sees time pass without a member giving
up on its leader; ``dump`` from the leader or a chosen member; ``load`` through a client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import trio

from trizk.testing.linkproxy import REFUSE, LinkNet
from trizk.testing.loop import LoopThread
from trizk.testing.ports import allocate
from trizk.testing.probes import member_mode
from trizk.testing.processes import Member, MemberSet
from trizk.testing.server import (
    IN_PROCESS,
    PROCESS,
    ServerError,
    _Base,
    _control_reply,
    _create_all,
    _http_control,
    _ready_in,
    _wanted,
)

__all__ = ["AsyncEnsemble", "Ensemble"]

#: how long ``advance`` lets an in-process ensemble run between two steps at most (s)
STEP_SETTLE = 0.05
#: an Ensemble's maxSessionTimeout unless its properties say otherwise (ms): ZooKeeper's default
#: (20 ticks) would be 4 s with the Ensemble's 200 ms tick, shorter than the 10-30 s sessions
#: clients ask for (kazoo's 10 s default, its harness's 15 s); sessions get what they ask up
#: to this, as from a server with tickTime 3000
MAX_SESSION_TIMEOUT = 60_000

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
    """The members as ``trizk-server --testing`` children: MemberSet's processes, each with
    its test controls (their URL is on the readiness line the child prints into its log)."""

    def __init__(
        self, kinds: Mapping[int, str], system_properties: Mapping[str, str], **kwargs: Any
    ) -> None:
        self.system_properties = dict(system_properties)
        #: sid -> where in its log this run of the member began (its readiness line is after)
        self._log_start: dict[int, int] = {}
        #: sid -> this run's test controls URL, once read
        self._controls: dict[int, str] = {}
        super().__init__(kinds, **kwargs)

    def command(self, m: Member) -> list[str]:
        props = (a for k, v in self.system_properties.items() for a in ("-D", f"{k}={v}"))
        return [*super().command(m), "--testing", *props]

    def start(self, sid: int) -> None:
        m = self.members[sid]
        self._log_start[sid] = m.log_path.stat().st_size if m.log_path.exists() else 0
        self._controls.pop(sid, None)
        super().start(sid)

    def close_member(self, sid: int) -> None:
        self.kill(sid)  # a throwaway ensemble: no clean shutdown needed

    def controls_url(self, sid: int) -> str:
        """This run's test controls URL (waits, bounded, for the member's readiness line)."""
        url = self._controls.get(sid)
        if url is not None:
            return url
        m = self.members[sid]
        deadline = time.monotonic() + self.timeout
        while True:
            if not self.running(sid):
                raise ServerError(f"member {sid} is not running")
            try:
                with open(m.log_path, "rb") as f:
                    f.seek(self._log_start.get(sid, 0))
                    ready = _ready_in(f.read())
            except OSError:
                ready = None
            if ready is not None and "testing" in ready:
                self._controls[sid] = url = ready["testing"]
                return url
            if time.monotonic() > deadline:
                raise ServerError(f"member {sid} printed no readiness line:\n{m.log_tail()}")
            time.sleep(0.02)  # polling interval of a bounded wait for a line in a log

    def perform(self, sid: int, action: Any) -> Any:
        """A test control's answer (testcontrol.Reply) from member ``sid``."""
        return _http_control(self.controls_url(sid), action, self.timeout)


class _InProcessMembers(MemberSet):
    """The members as Trio tasks of one loop thread, which also serves the link proxies."""

    def __init__(
        self,
        kinds: Mapping[int, str],
        system_properties: Mapping[str, str],
        *,
        links: bool = True,
        **kwargs: Any,
    ) -> None:
        self.loop: LoopThread | None = None
        self._runs: dict[int, _Run] = {}
        self.system_properties = dict(system_properties)
        super().__init__(kinds, links=links, serve_links=False, **kwargs)
        try:
            self.loop = LoopThread("trizk-ensemble").start(self.timeout)
            if self.links is not None:
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
                    config = load_config(m.cfg_path, properties=self.system_properties)
                    run.server = TrizkServer(config)
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

    def perform(self, sid: int, action: Any) -> Any:
        """A test control's answer (testcontrol.Reply) from member ``sid``, inside the loop."""
        from trizk.server.ops.testcontrol import Controls

        run = self._runs.get(sid)
        if run is None or run.scope is None or run.server is None or self.loop is None:
            raise ServerError(f"member {sid} is not running")
        return self.loop.run(Controls(run.server).perform, action)

    def advance_all(self, sids: list[int], ms: int, step: int) -> None:
        """Move the clocks of members ``sids`` ``ms`` forward together, ``step`` at a time, the
        loop left to run between steps until its tasks are idle (every member's pings and
        acks of that step exchanged), so no Zab timeout fires that would not in real time."""
        servers = [
            r.server
            for s in sids
            if (r := self._runs.get(s)) is not None and r.scope is not None and r.server
        ]

        async def move() -> None:
            from trio.testing import wait_all_tasks_blocked

            left = ms
            while left > 0:
                n = min(step, left)
                for server in servers:
                    server.clock.advance(n)
                left -= n
                with trio.move_on_after(STEP_SETTLE):
                    await wait_all_tasks_blocked(0.001)

        assert self.loop is not None
        self.loop.run(move)


class Ensemble:
    """A trizk ensemble for a test; see the module docstring.

    ``properties`` are extra zoo.cfg keys for every member, ``member_properties`` (sid -> keys)
    a member's own (its ``secureClientPort``), ``system_properties`` what java's ``-D`` would
    set (``java.security.auth.login.config``); the ensemble's temporary directory is made in
    ``base_dir`` (default: the system's temp dir). ``start_timeout`` bounds every start and
    wait (s). ``links=False``: no link proxies, the members' zoo.cfg lists their own addresses
    (for ``reconfigEnabled=true``; :meth:`cut`, :meth:`isolate`, :meth:`partition` and
    :meth:`heal` then raise ServerError). ``maxClientCnxns`` is 0 (no per-address limit, as
    kazoo's and Curator's harnesses) and ``maxSessionTimeout`` 60 s
    (:data:`MAX_SESSION_TIMEOUT`) unless ``properties`` say otherwise."""

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
        member_properties: Mapping[int, Mapping[str, str]] | None = None,
        system_properties: Mapping[str, str] | None = None,
        start_timeout: float = 30.0,
        base_dir: str | Path | None = None,
        links: bool = True,
    ) -> None:
        if mode not in (IN_PROCESS, PROCESS):
            raise ValueError(f"mode must be {IN_PROCESS!r} or {PROCESS!r}, not {mode!r}")
        if n < 1 or observers < 0:
            raise ValueError("an ensemble has at least one voting member")
        self.mode = mode
        self.start_timeout = start_timeout
        self.base_dir = base_dir
        self.tick_time = tick_time
        self.sync_limit = sync_limit
        self.cfg: dict[str, str] = {
            "tickTime": str(tick_time),
            "initLimit": str(init_limit),
            "syncLimit": str(sync_limit),
            "maxSessionTimeout": str(MAX_SESSION_TIMEOUT),
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
            "maxClientCnxns": "0",
            # written, not fsynced, as trizk.testing.Server (a throwaway ensemble)
            "forceSync": "no",
        }
        self.cfg.update(properties or {})
        self.member_cfg = {sid: dict(keys) for sid, keys in (member_properties or {}).items()}
        self.system_properties = dict(system_properties or {})
        sids = list(range(1, n + observers + 1))
        self._addrs = allocate(sids, frozenset(range(n + 1, n + observers + 1)))
        #: every member's sid, voters first
        self.members: tuple[int, ...] = tuple(sids)
        #: the observers' sids
        self.observers: tuple[int, ...] = tuple(sids[n:])
        #: whether the members reach each other through link proxies (see the module docstring)
        self.use_links = links
        self.root: Path | None = None
        self.links: LinkNet | None = None
        self._set: _InProcessMembers | _ProcessMembers | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Ensemble:
        """Start every member and wait until the ensemble serves (:meth:`wait_for_quorum`)."""
        if self.root is not None:
            raise ServerError("the ensemble was already started")
        kinds = dict.fromkeys(self.members, "trizk")
        common: dict[str, Any] = {
            "addrs": self._addrs,
            "extra": self.cfg,
            "member_extra": self.member_cfg,
            "base_dir": self.base_dir,
            "timeout": self.start_timeout,
            "links": self.use_links,
        }
        if self.mode == IN_PROCESS:
            self._set = _InProcessMembers(kinds, self.system_properties, **common)
        else:
            self._set = _ProcessMembers(kinds, self.system_properties, **common)
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

    def _members(self) -> _InProcessMembers | _ProcessMembers:
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

    # ------------------------------------------------------------------ test controls
    def _running(self) -> list[int]:
        members = self._members()
        return [sid for sid in self.members if members.running(sid)]

    def _control(self, sid: int, what: str, action: Any, read: Any) -> Any:
        """Perform a testcontrol action on member ``sid`` (as Server's controls: in-process
        inside the loop, as processes through the member's HTTP test controls)."""
        return read(_control_reply(self._members().perform(sid, action), what))

    def _serving(self, sid: int | None) -> int:
        """``sid``, or the leader (the member that tracks sessions); ServerError if none."""
        if sid is not None:
            return sid
        leader = self.leader()
        if leader is None:
            raise ServerError("the ensemble has no leader (wait_for_quorum() first)")
        return leader

    def expire_session(self, session_id: int) -> bool:
        """Expire a session now, as when it times out: the leader (which tracks every global
        session) proposes its closeSession. Returns once it is committed and every running
        member has applied it (its ephemerals are gone everywhere, its watchers told, its
        client sees EXPIRED_SESSION); False if the leader does not know the session (or it is
        already closing)."""
        leader = self._serving(None)
        if not self._control(leader, *_Base._expire(session_id)):
            return False
        deadline = time.monotonic() + self.start_timeout
        for sid in self._running():
            while any(
                node.get("ephemeral_owner") == session_id
                for node in self.dump(sid)["tree"].values()
            ):
                if time.monotonic() > deadline:
                    raise ServerError(f"member {sid} did not apply the closeSession in time")
                time.sleep(0.005)  # polling interval of a bounded wait for a commit to apply
        return True

    def drop_connections(self, session_id: int | None = None) -> int:
        """Close every client connection of every running member (or only ``session_id``'s)
        from the server side; sessions stay, so clients reconnect into them (to any member).
        Returns how many were closed. A session has one connection: the members are asked in
        turn until one closed it (asking on would close its next one too, to the member its
        client reconnected to meanwhile)."""
        dropped = 0
        for sid in self._running():
            dropped += int(self._control(sid, *_Base._drop(session_id)))
            if session_id is not None and dropped:
                break
        return dropped

    def advance(self, seconds: float) -> None:
        """Move every running member's clocks ``seconds`` forward, with no sleeping: sessions
        not heard from for their timeout expire, TTL nodes and empty containers are reaped,
        and the Zab ticks see the time pass. The clocks move together, a quarter of the
        followers' timeout (``syncLimit`` ticks) at a time with the members' pings exchanged in
        between, so that the ensemble stays as it is (no member gives up on its leader): time
        passes as it would, only faster. Clients' own clocks do not move."""
        name, action, read = _Base._advance(seconds)
        total = action.ms
        step = max(1, self.sync_limit * self.tick_time // 4)
        members = self._members()
        running = self._running()
        if isinstance(members, _InProcessMembers):
            members.advance_all(running, total, step)
            return
        from trizk.server.ops.testcontrol import Advance

        left = total
        while left > 0:
            n = min(step, left)
            for sid in running:
                self._control(sid, name, Advance(n), read)
            left -= n
            time.sleep(0.002)  # let the members exchange this step's pings (see the docstring)

    def dump(self, sid: int | None = None) -> dict[str, Any]:
        """Member ``sid``'s state as plain data (default: the leader's, the member that tracks
        the sessions), as :meth:`trizk.testing.Server.dump`: ``{"tree", "sessions",
        "watches"}`` (a follower's ``sessions`` is empty, its ``watches`` its own clients')."""
        return dict(self._control(self._serving(sid), *_Base._dump()))

    def session_ids(self) -> list[int]:
        """The ids of the sessions the leader tracks (every global session)."""
        return _Base._session_ids(self.dump())

    def load(self, tree: Mapping[str, Any] | str | bytes) -> int:
        """Seed the tree through ordinary creates (a client session of its own, to any
        member), as :meth:`trizk.testing.Server.load`. Returns how many nodes were created."""
        return _create_all(self.connect_string, _wanted(tree), self.start_timeout)

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
        if self._set is None:
            raise ServerError(
                "the ensemble is not started: its connect_string is known after start()"
            )
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
        if not self.use_links:
            raise ServerError("the ensemble has no link proxies (it was made with links=False)")
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

    async def expire_session(self, session_id: int) -> bool:
        return bool(await self._call(self.ensemble.expire_session, session_id))

    async def drop_connections(self, session_id: int | None = None) -> int:
        return int(await self._call(self.ensemble.drop_connections, session_id))

    async def advance(self, seconds: float) -> None:
        await self._call(self.ensemble.advance, seconds)

    async def dump(self, sid: int | None = None) -> dict[str, Any]:
        return dict(await self._call(self.ensemble.dump, sid))

    async def session_ids(self) -> list[int]:
        return list(await self._call(self.ensemble.session_ids))

    async def load(self, tree: Mapping[str, Any] | str | bytes) -> int:
        return int(await self._call(self.ensemble.load, tree))
