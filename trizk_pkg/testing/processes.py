"""Server processes and ensembles on loopback: the one process-ensemble harness.

Theory
------
A member of an ensemble is a directory (``zoo.cfg``, ``data/myid``, ``server.log``) and, while
it runs, a process started from that zoo.cfg exactly as a user starts one
(``python -m trizk.server zoo.cfg``; compat adds ``java ... QuorumPeerMain zoo.cfg``).
:class:`MemberSet` owns an ensemble's members: their ports (:func:`trizk.testing.ports.allocate`,
or addresses the caller chose), their zoo.cfg files (:func:`member_cfg`: ``server.N`` lines for
all members), optionally the link proxies between them (:mod:`trizk.testing.linkproxy`: then
each member has its own ``server.N`` lines, naming the proxies towards the others), and their
processes: start, stop (SIGTERM), kill (SIGKILL: what a crash leaves), restart on the same
ports and data. It finds the leader through ``srvr`` (``Mode: leader``) and waits until every
running member serves a session (:func:`trizk.testing.probes.wait_serving`).

What differs between the harnesses built on it is a method each: the command of a member's
kind (:meth:`MemberSet.command`; compat's ProcessEnsemble adds Apache ZooKeeper and network
namespaces), and how a member runs (``trizk.testing.Ensemble``'s in-process mode runs members
as Trio tasks of one loop thread instead of processes).

The single-server helpers (:func:`cfg_text`, :func:`spawn`, :func:`poll_ready`,
:func:`stop_process`) are the same steps for one server (compat.procs.servers,
compat.procs.launcher).

Invariants
----------
* Loopback only unless the caller gives addresses; each member's data in its own directory
  under one temporary directory, removed by :meth:`MemberSet.close` even after a failure.
* Only processes we started are signalled, by their PID. Every wait is bounded and fails with
  the tails of the members' logs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from trizk.testing.linkproxy import LinkNet
from trizk.testing.ports import MemberAddrs, allocate, server_lines
from trizk.testing.probes import member_mode, wait_serving

__all__ = [
    "Member",
    "MemberSet",
    "cfg_text",
    "member_cfg",
    "poll_ready",
    "spawn",
    "stop_process",
    "trizk_command",
]


# ---------------------------------------------------------------------------- zoo.cfg
def cfg_text(keys: Mapping[str, object]) -> str:
    """zoo.cfg text: one ``key=value`` line per key, in the mapping's order."""
    return "".join(f"{k}={v}\n" for k, v in keys.items())


def member_cfg(
    addrs: MemberAddrs,
    data_dir: Path,
    lines: Mapping[str, str],
    *,
    base: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A member's zoo.cfg keys: ``base``, then its own (dataDir, client address, peerType for an
    observer), then ``extra`` (which may replace any of them), then the ``server.N`` lines."""
    return {
        **(base or {}),
        "dataDir": str(data_dir),
        "clientPort": str(addrs.client_port),
        "clientPortAddress": addrs.host,
        **({"peerType": "observer"} if addrs.observer else {}),
        **(extra or {}),
        **lines,
    }


def trizk_command(cfg_path: Path | str) -> list[str]:
    """The command line of a trizk server started from ``cfg_path``."""
    return [sys.executable, "-m", "trizk.server", str(cfg_path)]


# ---------------------------------------------------------------------------- processes
def spawn(
    cmd: list[str],
    workdir: Path | str,
    log_path: Path | str,
    *,
    append: bool = True,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` as a direct child in ``workdir``, stdin closed, stdout and stderr appended
    to (or, without ``append``, written over) ``log_path``; ``env`` adds variables to ours (a
    preloaded library such as libfaketime, JAVA_TOOL_OPTIONS)."""
    with open(log_path, "ab" if append else "wb") as log:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=None if env is None else {**os.environ, **env},
        )


def stop_process(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Terminate a process we started (by its PID), wait at most ``timeout`` s, then kill it
    and wait as long again."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def kill_process(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGKILL a process we started (no clean shutdown, as a crash) and reap it (bounded)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout)


def poll_ready(
    proc: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    timeout: float,
    interval: float = 0.05,
) -> bool:
    """Poll ``ready()`` until it is true (True), the process exited or ``timeout`` passed
    (False; ``proc.poll()`` tells which)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if ready():
            return True
        time.sleep(interval)  # polling interval of a bounded readiness loop
    return False


# ---------------------------------------------------------------------------- members
@dataclass
class Member:
    """A member's directory (zoo.cfg, data/, server.log) and its process."""

    sid: int
    kind: str
    addrs: MemberAddrs
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def cfg_path(self) -> Path:
        return self.workdir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    def write(self, cfg: Mapping[str, str]) -> None:
        """Make the member's directory: ``data/myid`` and ``zoo.cfg`` with ``cfg``."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "myid").write_text(f"{self.sid}\n")
        self.cfg_path.write_text(cfg_text(cfg))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class MemberSet:
    """The members ``kinds`` (sid -> kind, "trizk" unless a subclass knows more) of one
    ensemble; see the module docstring.

    ``observers`` are sids started as observers; ``addrs`` the members' addresses (default:
    free loopback ports); ``base`` and ``extra`` zoo.cfg keys before and after each member's
    own (:func:`member_cfg`), ``member_extra`` keys of one member's own after those (a member's
    secureClientPort); with ``links`` the members reach each other only through link
    proxies (served in a thread of their own unless ``serve_links`` is False: the caller then
    runs ``links.serve`` in its own Trio loop); ``env`` environment variables of one member's
    process (added to ours; read at each start). ``timeout`` bounds each stop and kill (s). The
    members are not started: :meth:`start` each. Use as a context manager (every process
    stopped, every directory removed on exit)."""

    def __init__(
        self,
        kinds: Mapping[int, str],
        *,
        observers: Iterable[int] = (),
        addrs: Mapping[int, MemberAddrs] | None = None,
        base: Mapping[str, str] | None = None,
        extra: Mapping[str, str] | None = None,
        member_extra: Mapping[int, Mapping[str, str]] | None = None,
        links: bool = False,
        serve_links: bool = True,
        env: Mapping[int, Mapping[str, str]] | None = None,
        prefix: str = "trizk-ensemble-",
        base_dir: str | Path | None = None,
        timeout: float = 15.0,
    ) -> None:
        self.timeout = timeout
        self.root = Path(tempfile.mkdtemp(prefix=prefix, dir=base_dir))
        self.members: dict[int, Member] = {}
        #: sid -> environment variables added to that member's process at each start
        self.env: dict[int, Mapping[str, str]] = dict(env or {})
        #: with ``links``, the proxies between the members (``links.cut(1, 3)``, ``isolate``,
        #: ``partition``, ``heal``)
        self.links: LinkNet | None = None
        try:
            if addrs is None:
                addrs = allocate(sorted(kinds), frozenset(observers))
            if links:
                self.links = LinkNet(addrs)
                if serve_links:
                    self.links.start_thread(timeout)
            for sid, kind in kinds.items():
                a = addrs[sid]
                m = Member(sid, kind, a, self.root / f"m{sid}")
                lines = self.links.server_lines(sid) if self.links else server_lines(addrs)
                own = {**(extra or {}), **(member_extra or {}).get(sid, {})}
                m.write(member_cfg(a, m.data_dir, lines, base=base, extra=own))
                self.members[sid] = m
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ processes
    def command(self, m: Member) -> list[str]:
        """The command line of member ``m`` (its kind's)."""
        if m.kind == "trizk":
            return trizk_command(m.cfg_path)
        raise ValueError(f"unknown server kind {m.kind!r}")

    def running(self, sid: int) -> bool:
        return self.members[sid].alive()

    def start(self, sid: int) -> None:
        """Start member ``sid`` (first time or again: same ports, same data; no wait)."""
        m = self.members[sid]
        if self.running(sid):
            raise RuntimeError(f"member {sid} is running")
        m.proc = spawn(self.command(m), m.workdir, m.log_path, env=self.env.get(sid))

    def kill(self, sid: int) -> None:
        """SIGKILL: no clean shutdown, as a crash."""
        m = self.members[sid]
        if m.proc is not None:
            kill_process(m.proc, self.timeout)

    def stop(self, sid: int) -> None:
        """SIGTERM (then SIGKILL past ``timeout``)."""
        m = self.members[sid]
        if m.proc is not None:
            stop_process(m.proc, self.timeout)

    def close_member(self, sid: int) -> None:
        """How :meth:`close` ends a running member: :meth:`stop`."""
        self.stop(sid)

    def close_links(self) -> None:
        if self.links is not None:
            self.links.close()

    def close(self) -> None:
        """End every running member, the link proxies, and remove the directory."""
        try:
            for sid in self.members:
                if self.running(sid):
                    self.close_member(sid)
        finally:
            try:
                self.close_links()
            finally:
                shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ views
    def port(self, sid: int) -> int:
        return self.members[sid].addrs.client_port

    def host(self, sid: int) -> str:
        return self.members[sid].addrs.host

    def hosts(self, sids: Iterable[int] | None = None) -> str:
        """``host:port,...`` of the given members (default: all)."""
        return ",".join(f"{self.host(s)}:{self.port(s)}" for s in (sids or self.members))

    def mode(self, sid: int) -> str:
        """leader / follower / observer / standalone, or '' (down, or not serving)."""
        return member_mode(self.host(sid), self.port(sid))

    def leader(self) -> int | None:
        """The sid of the running member that says it leads, or None."""
        for sid in self.members:
            if self.running(sid) and self.mode(sid) == "leader":
                return sid
        return None

    def tails(self) -> str:
        """The end of every member's log (for a failed wait's message)."""
        return "\n".join(
            f"--- member {s} ({m.kind})\n{m.log_tail()}" for s, m in self.members.items()
        )

    def wait_serving(
        self, timeout: float = 60.0, members: Iterable[int] | None = None
    ) -> dict[int, str]:
        """Wait until every running member (or those of ``members``) has a role and accepts
        a session, one of them the leader; returns sid -> mode."""
        chosen = set(self.members if members is None else members)
        addrs = {
            s: (self.host(s), self.port(s)) for s in self.members if s in chosen and self.running(s)
        }
        return wait_serving(addrs, timeout, self.tails)
