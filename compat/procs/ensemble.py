"""Ensembles of real server processes on loopback: trizk, Apache ZooKeeper, or a mix.

Theory
------
Every member is a process started from its own zoo.cfg (``server.N`` lines for all members,
``dataDir/myid``), exactly as a user starts one: ``python -m trizk.server zoo.cfg`` or
``java ... QuorumPeerMain zoo.cfg``. Members share one wire protocol, so any mix forms one
ensemble. :class:`ProcessEnsemble` starts, kills (SIGKILL: what a crash leaves), stops and
restarts members on the same ports and data, finds the leader through the ``srvr`` four-letter
word (``Mode: leader``), and waits until every running member serves a session. With
``links=True`` every member reaches the others through per-link proxies that a test cuts and
heals (compat/procs/linkproxy.py); each member then has its own ``server.N`` lines.

Invariants
----------
* Loopback only, ports chosen free by binding port 0; each member's data in its own directory.
* We signal only processes we started, by PID. Every wait is bounded and fails with the tails
  of the members' logs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from trizk.compat.oracle.rawclient import handshake_ok
from trizk.compat.procs.javaquorum import _LOG4J_INFO, MemberAddrs, allocate, server_lines
from trizk.compat.procs.linkproxy import LinkNet
from trizk.compat.procs.netns import NetnsLab
from trizk.compat.procs.servers import BASE_CFG, _command, stop_process

__all__ = ["ProcessEnsemble", "ProcessMember", "four_letter", "member_mode", "wait_serving"]


def four_letter(
    port: int, word: str = "srvr", timeout: float = 3.0, host: str = "127.0.0.1"
) -> str:
    """Send a four-letter word to host:port; the answer ('' if nothing answers)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            out = b""
            while True:
                data = s.recv(65536)
                if not data:
                    return out.decode(errors="replace")
                out += data
    except OSError:
        return ""


@dataclass
class ProcessMember:
    """A member's directory (zoo.cfg, server.log) and its process."""

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

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class ProcessEnsemble:
    """Members ``kinds[sid]`` ("trizk" or "zookeeper"); observers by sid. Use as a context
    manager (every process stopped, every directory removed on exit)."""

    def __init__(
        self,
        kinds: Mapping[int, str],
        *,
        observers: Iterable[int] = (),
        extra: Mapping[str, str] | None = None,
        start: bool = True,
        lab: NetnsLab | None = None,
        links: bool = False,
    ) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="trizk-ensemble-"))
        #: members on the hosts of a network-namespace lab (member i on host i, ZooKeeper's
        #: usual ports), else all on 127.0.0.1 with free ports
        self.lab = lab
        if lab is None:
            addrs = allocate(sorted(kinds), frozenset(observers))
        else:
            addrs = {
                sid: MemberAddrs(sid, 2888, 3888, 2181, sid in set(observers), lab.host(sid))
                for sid in kinds
            }
        #: with ``links``, every member reaches every other through the link proxies of
        #: compat/procs/linkproxy.py (``self.links.cut(1, 3)``, ``isolate``, ``partition``,
        # ``heal``)
        self.links: LinkNet | None = None
        if links:
            if lab is not None:
                raise ValueError("link proxies are for loopback ensembles")
            self.links = LinkNet(addrs).start_thread()
        self.members: dict[int, ProcessMember] = {}
        for sid, kind in kinds.items():
            a = addrs[sid]
            workdir = self.root / f"m{sid}"
            data = workdir / "data"
            data.mkdir(parents=True)
            (data / "myid").write_text(f"{sid}\n")
            cfg = dict(BASE_CFG)
            cfg.update(
                {
                    "dataDir": str(data),
                    "clientPort": str(a.client_port),
                    "clientPortAddress": a.host,
                }
            )
            if a.observer:
                cfg["peerType"] = "observer"
            cfg.update(self.links.server_lines(sid) if self.links else server_lines(addrs))
            cfg.update(extra or {})
            (workdir / "zoo.cfg").write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
            self.members[sid] = ProcessMember(sid, kind, a, workdir)
        if start:
            try:
                for sid in self.members:
                    self.start(sid)
            except BaseException:
                self.close()
                raise

    # ------------------------------------------------------------------ processes
    def start(self, sid: int) -> None:
        m = self.members[sid]
        assert not m.alive(), f"member {sid} is running"
        cmd = _command(m.kind, m.cfg_path, m.workdir)
        if m.kind == "zookeeper":
            # INFO: state changes and sync modes are logged (_command writes a WARN config)
            (m.workdir / "log4j.properties").write_text(_LOG4J_INFO)
        if self.lab is not None:
            cmd = self.lab.command(sid, cmd)
        with open(m.log_path, "ab") as log:
            m.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=m.workdir,
            )

    def kill(self, sid: int) -> None:
        """SIGKILL: no clean shutdown, as a crash."""
        m = self.members[sid]
        if m.proc is not None and m.proc.poll() is None:
            os.kill(m.proc.pid, signal.SIGKILL)
            m.proc.wait(30)

    def stop(self, sid: int) -> None:
        m = self.members[sid]
        if m.proc is not None:
            stop_process(m.proc, 15)

    def close(self) -> None:
        try:
            for sid in self.members:
                self.stop(sid)
        finally:
            if self.links is not None:
                self.links.close()
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ProcessEnsemble:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ views
    def port(self, sid: int) -> int:
        return self.members[sid].addrs.client_port

    def host(self, sid: int) -> str:
        return self.members[sid].addrs.host

    def hosts(self, sids: Iterable[int] | None = None) -> str:
        return ",".join(f"{self.host(s)}:{self.port(s)}" for s in (sids or self.members))

    def mode(self, sid: int) -> str:
        """leader / follower / observer / standalone, or '' (down, or not serving)."""
        return member_mode(self.host(sid), self.port(sid))

    def leader(self) -> int | None:
        for sid, m in self.members.items():
            if m.alive() and self.mode(sid) == "leader":
                return sid
        return None

    def wait_serving(
        self, timeout: float = 60.0, members: Iterable[int] | None = None
    ) -> dict[int, str]:
        """Wait until every running member (or those of ``members``) has a role and accepts
        a session, one of them the leader."""
        chosen = set(self.members if members is None else members)

        def tails() -> str:
            return "\n".join(
                f"--- member {s} ({m.kind})\n{m.log_tail()}" for s, m in self.members.items()
            )

        addrs = {
            s: (self.host(s), self.port(s))
            for s, m in self.members.items()
            if s in chosen and m.alive()
        }
        return wait_serving(addrs, timeout, tails)

    def wait_leader(self, sid: int, timeout: float = 90.0) -> dict[int, str]:
        """Wait until every member serves with ``sid``, the highest voter sid, as leader.

        Members with equal zxids (a fresh ensemble, or one whose members all synced) elect the
        highest voter sid -- unless a quorum of the others finalized before it was heard, as
        a slow start on a loaded machine can make them do. Then the leader is stopped (the
        survivors, still with equal zxids, elect the highest sid among them) and restarted
        as a follower. Bounded: one such round per member at most."""
        deadline = time.monotonic() + timeout
        voters = [s for s, m in self.members.items() if not m.addrs.observer]
        assert sid == max(voters), "only the highest voter sid wins an election of equals"

        def left() -> float:
            return max(deadline - time.monotonic(), 1.0)

        modes = self.wait_serving(left())
        for _ in range(len(self.members)):
            leader = next(s for s, m in modes.items() if m == "leader")
            if leader == sid:
                return modes
            self.stop(leader)
            self.wait_serving(left(), members=[s for s in self.members if s != leader])
            self.start(leader)
            modes = self.wait_serving(left())
        raise TimeoutError(f"member {sid} did not become the leader: {modes}")


def member_mode(host: str, port: int) -> str:
    """A member's ``Mode`` in ``srvr`` (leader / follower / observer / standalone), or '' when
    it is down or not serving."""
    for line in four_letter(port, host=host).splitlines():
        if line.startswith("Mode: "):
            return line[6:].strip()
    return ""


def wait_serving(
    addrs: Mapping[int, tuple[str, int]],
    timeout: float,
    tails: Callable[[], str] = lambda: "",
) -> dict[int, str]:
    """Wait until every member of ``addrs`` (sid -> client address) has a role and accepts a
    session, exactly one of them the leader; their modes. Bounded: past ``timeout`` a
    TimeoutError with the modes seen and ``tails()`` (the members' logs)."""
    deadline = time.monotonic() + timeout
    while True:
        modes = {s: member_mode(*a) for s, a in addrs.items()}
        roles = list(modes.values())
        if (
            roles.count("leader") == 1
            and all(roles)
            and all(handshake_ok(*addrs[s], timeout=2.0) for s in modes)
        ):
            return modes
        if time.monotonic() > deadline:
            raise TimeoutError(f"ensemble not serving within {timeout}s: {modes}\n{tails()}")
        time.sleep(0.05)  # polling interval of a bounded wait
