"""Ensembles of real server processes on loopback: trizk, Apache ZooKeeper, or a mix.

Theory
------
Every member is a process started from its own zoo.cfg (``server.N`` lines for all members,
``dataDir/myid``), exactly as a user starts one: ``python -m trizk.server zoo.cfg`` or
``java ... QuorumPeerMain zoo.cfg``. Members share one wire protocol, so any mix forms one
ensemble. :class:`ProcessEnsemble` is the shared harness of trizk.testing
(:class:`trizk.testing.processes.MemberSet`: ports, directories, zoo.cfg files, start, kill
(SIGKILL: what a crash leaves), stop and restart on the same ports and data, the leader
through the ``srvr`` four-letter word, waiting until every running member serves a session,
and with ``links=True`` per-link proxies that a test cuts and heals, each member then with its
own ``server.N`` lines) with what only compat has: Apache ZooKeeper members, members on the
hosts of a network-namespace lab (:mod:`trizk.compat.procs.netns`), and
:meth:`ProcessEnsemble.wait_leader`.

Invariants
----------
* Loopback only, ports chosen free by binding port 0; each member's data in its own directory.
* We signal only processes we started, by PID. Every wait is bounded and fails with the tails
  of the members' logs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from trizk.compat.procs.javaquorum import LOG4J_INFO
from trizk.compat.procs.netns import NetnsLab
from trizk.compat.procs.servers import BASE_CFG, DEFAULT_VERSION, _command
from trizk.testing.ports import MemberAddrs
from trizk.testing.probes import four_letter
from trizk.testing.processes import Member, MemberSet

__all__ = ["ProcessEnsemble"]


class ProcessEnsemble(MemberSet):
    """Members ``kinds[sid]`` ("trizk" or "zookeeper"); observers by sid; ``versions[sid]`` the
    ZooKeeper release of a ``zookeeper`` member (default 3.9.3, as trizk's; 3.8.0 too), or the one a
    ``trizk`` member answers as (``-D trizk.zookeeperVersion``; without an entry, trizk's
    default); ``system_properties`` the ``-D`` properties of every member (``-Dkey=value`` on a
    ZooKeeper member's java command line, ``-D key=value`` on a trizk member's: what only a
    system property sets, such as ``znode.container.checkIntervalMs`` or
    ``readonlymode.enabled``); ``env`` the environment variables of one member's process (a
    preloaded libfaketime: :mod:`trizk.compat.procs.clocksteps`). Use as a context manager (every
    process stopped, every directory removed on exit)."""

    def __init__(
        self,
        kinds: Mapping[int, str],
        *,
        observers: Iterable[int] = (),
        extra: Mapping[str, str] | None = None,
        start: bool = True,
        lab: NetnsLab | None = None,
        links: bool = False,
        versions: Mapping[int, str] | None = None,
        system_properties: Mapping[str, str] | None = None,
        env: Mapping[int, Mapping[str, str]] | None = None,
        first: int | None = None,
    ) -> None:
        #: Java system properties of every member (``-Dkey=value``; a trizk member gets
        #: ``-D key=value``): what ZooKeeper reads only from the command line, such as
        #: ``readonlymode.enabled``
        self.system_properties = dict(system_properties or {})
        #: the ZooKeeper release of each ``zookeeper`` member (servers.ZK_VERSIONS)
        self.versions = {sid: (versions or {}).get(sid, DEFAULT_VERSION) for sid in kinds}
        #: the releases trizk members were asked to answer as
        self.trizk_versions = {
            sid: v for sid, v in (versions or {}).items() if kinds.get(sid) == "trizk"
        }
        #: members on the hosts of a network-namespace lab (member i on host i, ZooKeeper's
        #: usual ports), else all on 127.0.0.1 with free ports
        self.lab = lab
        addrs = None
        if lab is not None:
            if links:
                raise ValueError("link proxies are for loopback ensembles")
            addrs = {
                sid: MemberAddrs(sid, 2888, 3888, 2181, sid in set(observers), lab.host(sid))
                for sid in kinds
            }
        # with ``links``, every member reaches every other through the link proxies of
        # trizk.testing.linkproxy (``self.links.cut(1, 3)``, ``isolate``, ``partition``,
        # ``heal``)
        super().__init__(
            kinds,
            observers=observers,
            addrs=addrs,
            base=BASE_CFG,
            extra=extra,
            links=links,
            env=env,
        )
        if start:
            try:
                self.start_all(first)
            except BaseException:
                self.close()
                raise

    # ------------------------------------------------------------------ processes
    def command(self, m: Member) -> list[str]:
        cmd = _command(m.kind, m.cfg_path, m.workdir, version=self.versions[m.sid])
        if m.sid in self.trizk_versions:
            cmd += ["-D", f"trizk.zookeeperVersion={self.trizk_versions[m.sid]}"]
        for key, value in self.system_properties.items():
            if m.kind == "zookeeper":
                cmd.insert(1, f"-D{key}={value}")
            else:
                cmd += ["-D", f"{key}={value}"]
        if m.kind == "zookeeper":
            # INFO: state changes and sync modes are logged (_command writes a WARN config)
            (m.workdir / "log4j.properties").write_text(LOG4J_INFO)
        if self.lab is not None:
            cmd = self.lab.command(m.sid, cmd)
        return cmd

    def start_all(self, first: int | None = None, timeout: float = 90.0) -> None:
        """Start every member; with ``first``, that member alone until its client port answers
        a four-letter word (ZooKeeper's QuorumPeer.start opens the client port just before it
        starts electing; trizk's likewise), then the others. In a fresh ensemble ``first``,
        when it is the highest voter sid, then leads: its vote reaches the others within their
        finalize wait, even when it is a JVM that starts seconds after trizk members would
        have elected among themselves. (:meth:`wait_leader`'s stop-the-leader round relies on
        equal zxids, which members with only local sessions do not have: each member's last
        logged zxid then depends on whether it joined by DIFF or by SNAP.)"""
        if first is not None:
            self.start(first)
            deadline = time.monotonic() + timeout
            while not four_letter(self.port(first), "srvr", host=self.host(first)):
                if not self.running(first) or time.monotonic() > deadline:
                    raise TimeoutError(f"member {first} did not answer\n{self.tails()}")
                time.sleep(0.05)  # polling interval of a bounded wait
        for sid in self.members:
            if sid != first:
                self.start(sid)

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
