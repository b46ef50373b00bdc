"""An ensemble member (``QuorumPeer``): leader election, then a Zab role, then election again.

Theory of operation
-------------------
A member loops through ZooKeeper's states::

    LOOKING --FastLeaderElection--> LEADING | FOLLOWING | OBSERVING --(role ends)--> LOOKING

* **LOOKING.** The replica is reloaded from the data directory (snapshot + the whole txn log:
  ``getLastLoggedZxid`` counts proposals logged but never committed), the epoch files are read,
  and the election port (:class:`trizk.server.shell.cnxmanager.ElectionPort`) runs an election
  with (last logged zxid, currentEpoch). Clients are refused (the role served is
  :class:`~trizk.server.roles.notserving.NotServingRole`, until a Zab role is established or
  synced; a four-letter word still gets "not currently serving"). With
  ``-Dreadonlymode.enabled=true``, a member LOOKING for longer than ``max(2000, tickTime)`` ms
  serves read-only clients until the election ends (:mod:`.readonly`,
  :class:`~trizk.server.roles.readonly.ReadOnly`).
* **LEADING.** A :class:`trizk.quorum.zab.leader.Leader` runs discovery and synchronisation with
  the learners that connect to the quorum port. Once established (``Ready.serving``) the member
  is ZooKeeper's leader, serving the :class:`~trizk.server.roles.leading.Leading` role: front
  end + sequencer + replica, the sequencer's committer being Zab
  (:class:`.leading.ZabCommitter`: PROPOSAL to the followers, logged and ACKed by itself, COMMIT
  once a quorum acked). Learners' REQUESTs enter the sequencer like local writes, their PING
  touches keep their sessions alive, REVALIDATE asks are answered from the session tracker.
* **FOLLOWING / OBSERVING.** A :class:`trizk.quorum.zab.learner.Learner` connects to the
  leader's quorum port, syncs (DIFF, TRUNC or SNAP), and once UPTODATE serves clients through
  the :class:`~trizk.server.roles.learning.Learning` role: front end + replica, the write path
  being :class:`~trizk.server.writes.forwarder.LearnerWritePath` (REQUESTs to the leader).

Every role a member serves is built by the server's
:class:`~trizk.server.roles.factory.RoleFactory` and installed in the server through
:class:`.hosts.PeerHost` (the narrow view of the server a member has: its clock, metrics and txn
log, ``install(role)`` and ``wake()``). The pumps hand each Ready's committed txns, in zxid
order, to the installed role's sink (``Role.commit``), which applies them to the replica and
answers them.

Each role is driven by one *pump* (:mod:`.pumping`: run in the task that gave the machine work
-- a link's reader, the txn log's syncer, the client poller -- or in the pump task for kicks
and barriers) in the Ready order the Zab machines require: send the
messages (none of them waits for this Ready's persistence: what promises durability only comes
out of ``advance``), persist (epoch files, TRUNC, SNAP install, snapshot, txn log append +
fsync), apply the committed txns (the role's sink), then ``advance``. Readers feed packets in
(``step``), a ticker feeds time (``tick``, every half tick of the server's
:class:`~trizk.server.shell.clock.Clock`: a test that moves that clock moves the Zab machine's
timeouts with it). When a role ends (lost quorum, leader gone, a protocol error)
every client connection is closed and the member is LOOKING again.

Bounds: each quorum link's unsent output is capped (:data:`.links.LINK_OUTPUT_LIMIT`); the
packet and snapshot decoders cap what a peer can make us buffer; a peer that sends garbage loses
its link. Learners' REQUESTs enter the leader's sequencer only while fewer than the leader's
globalOutstandingLimit (:func:`.spec.leader_outstanding_limit`) of their proposals are
outstanding (the leader's own clients have their throttle in the front end); the others wait in
arrival order, and a learner with too many waiting loses its link (the caps are the Leader
machine's, see :mod:`trizk.quorum.zab.leader`).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from trizk.quorum.election.election import ElectionView
from trizk.quorum.election.messages import ServerState as ElectionState
from trizk.quorum.reconfig import LeaderConfigView
from trizk.quorum.verifier import QuorumVerifier
from trizk.quorum.zab.applier import (
    AcceptedEpoch,
    CurrentEpoch,
    InstallSnapshot,
    Plan,
    ReadyApplier,
    Step,
    TakeSnapshot,
    Truncate,
    Wipe,
    decode_entry,
)
from trizk.quorum.zab.leader import Leader
from trizk.quorum.zab.learner import Learner
from trizk.quorum.zab.zab import Entry, LearnerType, Quorum
from trizk.quorum.zab.zabwire import SnapshotPayload, epoch_of
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.common.metricregistry import (
    LEARNER_HANDLER_QP_SIZE,
    LEARNER_HANDLER_QP_TIME_MS,
    MNTR_ORDER,
)
from trizk.server.common.servermetrics import Summary
from trizk.server.roles.factory import Role, RoleFactory
from trizk.server.shell.cnxmanager import ElectionPort, format_address, open_first_stream
from trizk.server.shell.ensemble.hosts import PeerHost
from trizk.server.shell.ensemble.leading import LeaderPump, ZabCommitter
from trizk.server.shell.ensemble.learning import LearnerPump
from trizk.server.shell.ensemble.links import Link, QueueMeter
from trizk.server.shell.ensemble.readonly import look_read_only
from trizk.server.shell.ensemble.reconfig import MemberConfigs
from trizk.server.shell.ensemble.spec import EnsembleSpec, members_of
from trizk.server.shell.persistence import FREEZE_MIN_NODES
from trizk.server.shell.poller import Poller
from trizk.server.shell.quorumtls import QuorumTLS
from trizk.server.shell.reachability import reachable_or_all
from trizk.server.shell.streams import ReplayStream
from trizk.storage.disk import epochs as epochfiles
from trizk.storage.formats import treeio, txnlog
from trizk.storage.tree.javahash import JavaHashSet
from trizk.storage.tree.replica import Replica

__all__ = ["CONNECT_PAUSE", "QuorumPeer"]

log = logging.getLogger("trizk.quorum")

#: Learner.connectToLeader: the pause between tries (leaderConnectDelayDuringRetryMs).
CONNECT_PAUSE = 0.1


class QuorumPeer:
    """One ensemble member; see the module docstring."""

    def __init__(
        self, host: PeerHost, spec: EnsembleSpec, core_config: CoreConfig, roles: RoleFactory
    ) -> None:
        self.host = host
        #: the server's clock: every time the Zab machines see, and their ticks
        self.clock = host.clock
        self.metrics = host.server_metrics
        self.spec = spec
        if spec.reconfig_hold is not None:
            log.warning(
                "TEST HOOK ON: trizk.test.reconfigHold=%s holds a reconfig proposal "
                "(for tests only, never in production)",
                spec.reconfig_hold,
            )
        self.core_config = core_config
        #: builds the role served once a Zab role is established (or synced)
        self.roles = roles
        #: the role the host serves: not serving until a leader is established or a learner
        #: synced; committed txns go to its sink (:meth:`Role.commit`)
        self.role: Role = roles.not_serving()
        self.persistence = host.persistence
        # a sync that returned may let a pump send its ACKs: they leave from the syncer's
        # task (pumping.py)
        self.persistence.on_durable = self.run_pump
        assert self.persistence.replica is not None, "load() first"
        self.replica: Replica = self.persistence.replica
        self.epoch_dir: Path = self.persistence.settings.snap_dir
        #: the committed and last seen configurations, with reconfig enabled (None: the
        #: static configuration of ``spec`` for good)
        self.configs: MemberConfigs | None = None
        if spec.reconfig_enabled and spec.verifier is not None:
            self.configs = MemberConfigs(
                spec.myid,
                spec.verifier,
                reconfig_enabled=True,
                config_file=spec.config_file,
                last_seen=spec.last_seen,
                standalone_enabled=spec.standalone_enabled,
                multi_address=spec.multi_address,
            )
            self.configs.start()
        self.state = "looking"
        self.leader: Leader | None = None
        self.learner: Learner | None = None
        #: quorum TLS on both ports (sslQuorum / portUnification), None: plain links
        self.tls = QuorumTLS(spec.tls) if spec.tls is not None else None
        self.election = ElectionPort(
            spec.myid,
            spec.election_view(),
            {sid: m.election for sid, m in spec.members.items()},
            connect_timeout=spec.connect_timeout_ms / 1000,
            handshake_timeout=spec.timing.sync_ms / 1000,
            listen_on_all_ips=spec.listen_on_all_ips,
            all_addresses={sid: m.election_addrs for sid, m in spec.members.items()},
            multi_address=spec.multi_address,
            bind_tries=spec.election_bind_tries,
            quorum_auth=spec.quorum_auth,
            clock=self.clock,
            tls=self.tls,
            reachability_timeout_ms=spec.reachability_timeout_ms,
        )
        if self.configs is not None:
            self.election.on_config = self._notified_config
        self._kick = trio.Event()
        #: the client poller's pass is under way (kicks wait for its end: end_client_pass)
        self._client_pass = False
        #: the client poller (:meth:`use_poller`), whose passes also read the plain quorum
        #: links and the fsync helper's answers
        self.poller: Poller | None = None
        self._pump: LeaderPump | LearnerPump | None = None
        #: the one Ready applier (quorum/zab/applier.py): each role's machine goes through it;
        #: it keeps the committed log (a leader's DIFFs) and the txns logged but not applied
        self.applier = ReadyApplier(
            self._recent_entries(), self.persistence.settings.commit_log_count
        )
        #: the SNAP payload the replica was last loaded from, until the snapshot at NEWLEADER
        #: is written from it (dropped by any other change of the replica's whole state)
        self._received: treeio.ReceivedSnapshot | None = None
        #: the last SNAP payload off the leader's link, with the tree built as it came
        self._arrived: SnapshotPayload | None = None
        #: the cyclic garbage collector is paused while a SNAP's tree is built
        #: (:meth:`snapshot_builder`)
        self._gc_paused = False
        #: ZKDatabase.committedLog: the newest txns applied, for a leader's DIFFs
        self._committed_log = self.applier.committed_log
        #: the replica equals the data directory (just loaded); else see _catch_up
        self._fresh = True
        #: the last role reached serving (its in-memory state is whole)
        self._served = False
        self._links: dict[int, Link] = {}
        self._next_link = 0
        #: when this member last stopped serving (QuorumPeer.unavailableStartTime)
        self._unavailable_since: int | None = None
        #: ServerMetrics' LEARNER_HANDLER_QP_SIZE / _QP_TIME summary sets, by learner sid (as
        #: ZooKeeper's, process-wide: they outlive the role that measured them)
        self.qp_sizes: dict[str, Summary] = {}
        self.qp_times: dict[str, Summary] = {}
        #: QuorumPeer.reconfigFlag with the vote updateVote set: (designated leader, the
        #: reconfig's zxid) -- the next role follows it without an election
        self._designated: tuple[int, int] | None = None

    # ------------------------------------------------------------------ main loop
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.election.serve)
            task_status.started()
            while True:
                await self._round()

    def _broadcasting(self, now: int) -> None:
        """``QuorumPeer.setZabState(BROADCAST)``: UNAVAILABLE_TIME since LOOKING began (and
        LEADER_UNAVAILABLE_TIME on the leader)."""
        if self._unavailable_since is not None:
            elapsed = now - self._unavailable_since
            metrics = self.metrics
            metrics.unavailable_time.add(elapsed)
            if self.state == "leader":
                metrics.leader_unavailable_time.add(elapsed)
            self._unavailable_since = None

    def _install(self, role: Role) -> None:
        self.role = role
        self.host.install(role)

    def serve(self, role: Role, zxid: int, now: int) -> None:
        """A Zab role reached broadcast at ``zxid``: serve clients through ``role``
        (``Leader.startZkServer``, ``Learner.syncWithLeader``'s UPTODATE)."""
        self._install(role)
        self.election.update_peer_epoch(epoch_of(zxid))
        self._served = True
        self.persistence.serving()
        self._broadcasting(now)

    async def _round(self) -> None:
        # QuorumPeer.updateServerState: a role that ended on a reconfig that designated
        # another leader goes to that leader's role at once (reconfigFlag); else LOOKING,
        # which clears the flag
        designated, self._designated = self._designated, None
        self.state = "looking"
        metrics = self.metrics
        if designated is None:
            metrics.looking_count += 1  # QuorumPeer.run: case LOOKING
        if self._unavailable_since is None:
            self._unavailable_since = self.clock.now()
        self._install(self.roles.not_serving())
        # the vote is the last *logged* zxid: everything appended must be durable first
        await self.persistence.durable()
        self.applier.stop()
        self._catch_up()
        self._served = False
        ep = epochfiles.load_epochs(self.epoch_dir, self.replica.last_zxid)
        log.info(
            "LOOKING: last logged zxid %#x, currentEpoch %d, acceptedEpoch %d",
            self.replica.last_zxid,
            ep.current,
            ep.accepted,
        )
        start_fle = self.clock.now()
        if designated is not None:
            decision = self.election.designate(*designated)
            log.info(
                "%s: the reconfig designated leader %d: %s without an election",
                self.spec.myid,
                designated[0],
                decision.state.name,
            )
        elif self.spec.read_only_mode:
            self.election.look(self.replica.last_zxid, ep.current)
            decision = await look_read_only(
                self.clock,
                self.spec.timing.tick_ms,
                self._serve_read_only,
                lambda: self._install(self.roles.not_serving()),
                self.election.wait_decision,
            )
        else:
            self.election.look(self.replica.last_zxid, ep.current)
            decision = await self.election.wait_decision()
        leader = decision.vote.leader
        if not self.spec.observer and designated is None:
            # Leader.lead / Follower.followLeader: ELECTION_TIME = end_fle - start_fle
            metrics.election_time.add(self.clock.now() - start_fle)
        try:
            if decision.state == ElectionState.LEADING:
                self.state = "leader"
                reason = await self._lead(ep)
            else:
                self.state = "observer" if self.spec.observer else "follower"
                reason = await self._learn(leader, ep)
        finally:
            self.leader = self.learner = self._pump = None
            for link in self._links.values():
                link.close()
            self._links.clear()
        log.warning("%s: leaving the %s role: %s", self.spec.myid, self.state, reason)

    def _serve_read_only(self) -> None:
        """Still LOOKING after the grace period: serve read-only clients
        (``ReadOnlyZooKeeperServer``)."""
        now, wall = self.clock.now(), self.clock.wall()
        self._install(self.roles.read_only(self.spec.local_sessions, now, wall))

    def _catch_up(self) -> None:
        """Before an election the replica must hold every txn this member logged, committed
        or not (its vote is its last *logged* zxid). After a role that served, the txns
        logged but never applied are applied in memory (``ZKDatabase.fastForwardDataBase``);
        after one that ended mid-sync (TRUNC, SNAP) the data directory is read again."""
        if self._fresh:
            self._fresh = False
            self.init_config()
        elif self._served:
            for e in self.applier.fast_forward(self.replica.last_zxid):
                self.replica.apply(*decode_entry(e.data))
        else:
            self._reload()
            self._fresh = False

    def _reload(self) -> None:
        """The replica as the data directory has it (snapshot + txn log)."""
        loaded = self.persistence.load()
        self.replica.reset(loaded.replica.tree, loaded.replica.sessions)
        self.persistence.replica = self.replica
        self.applier.reset(self._recent_entries())
        self.init_config()

    def _recent_entries(self) -> list[Entry]:
        """The newest txns of the log as loaded (a leader's committed log after a load)."""
        return [Entry(e.zxid, txnlog.encode_payload(e)) for e in self.persistence.recent_entries()]

    def init_config(self) -> None:
        """``QuorumPeer.initConfigInZKDatabase``: /zookeeper/config shows this member's view of
        the ensemble (its committed configuration; mzxid its version) at start-up, after every
        sync and after every activation."""
        configs = self.configs
        if configs is None:
            self.replica.tree.set_config(self.spec.config, self.clock.wall())
        else:
            data, version = configs.committed_bytes, configs.committed.version
            self.replica.tree.set_config(data, self.clock.wall(), version)

    # ------------------------------------------------------------------ dynamic reconfig
    def see_config(self, data: bytes) -> None:
        """``setLastSeenQuorumVerifier(qv, true)`` (reconfig enabled: the ``.next`` file)."""
        if self.configs is not None:
            self.configs.see(data)

    def process_reconfig(self, data: bytes | None, designated: int | None = None) -> bool:
        """``QuorumPeer.processReconfig``: activate a configuration -- a leader's last seen
        one when it is established (``data`` None), NEWLEADER's at a learner's UPTODATE, a
        committed reconfig's (``designated``: its designated leader) -- then
        ``/zookeeper/config`` shows the committed configuration. True when this member's
        role or leader changes with it (a learner's role then ends)."""
        configs = self.configs
        major = False
        if configs is not None:
            qv = configs.last_seen if data is None else configs.parse(data)
            prev = configs.activate(qv) if qv is not None else None
            if prev is not None:
                major = self._activated(prev, designated)
        self.init_config()
        return major

    def _activated(self, prev: QuorumVerifier, designated: int | None) -> bool:
        """The committed configuration changed from ``prev``: the member's view of its
        ensemble follows; whether its role or its leader changes (``updateLearnerType``,
        ``updateVote``)."""
        configs = self.configs
        assert configs is not None
        new = configs.committed
        was_observer = self.spec.observer
        self.spec = dataclasses.replace(
            self.spec, members=members_of(new), verifier=new, config=configs.committed_bytes
        )
        self.election.set_view(
            ElectionView.from_verifier(new),
            {sid: m.election_addrs for sid, m in self.spec.members.items()},
        )
        leader = self.leader
        if leader is not None:
            leader.verifier = new
            if leader.last_seen is None or leader.last_seen.version < new.version:
                leader.last_seen = new
            leader.config_version = new.version
        if prev.java_equals(new):
            return False  # a new version of the same members
        role_change = self.spec.observer != was_observer
        if designated is not None:
            current = self.learner.leader if self.learner is not None else self.spec.myid
            if designated != current:
                # updateVote: the vote becomes (designated, the reconfig's zxid) and
                # reconfigFlag is set: the role that ends hands over without an election
                self._designated = (designated, new.version)
                log.warning("Suggested leader: %d", designated)
                return True
            return role_change
        self._designated = None  # processReconfig without a leader: reconfigFlagClear
        return role_change

    def _notified_config(self, data: bytes) -> None:
        """``FastLeaderElection.WorkerReceiver``: a LOOKING member that hears of a newer
        configuration activates it (``processReconfig(rqv, null, null, false)``); the
        election goes on with the new view."""
        configs = self.configs
        if configs is None or self.state != "looking" or data == configs.committed_bytes:
            return
        qv = configs.parse(data)
        if qv is not None and qv.version > configs.committed.version:
            log.info(
                "%s Received version: %x my version: %x",
                self.spec.myid,
                qv.version,
                configs.committed.version,
            )
            self.process_reconfig(data)

    def leader_config(self) -> LeaderConfigView:
        """What a reconfig's prep needs of this leader (its configurations, its synced
        followers)."""
        leader, configs = self.leader, self.configs
        assert leader is not None and configs is not None
        seen = leader.last_seen or configs.last_seen
        committed = leader.verifier or configs.committed
        return LeaderConfigView(
            seen,
            committed.version,
            leader.quorum_synced,
            configs.standalone_enabled,
            configs.multi_address,
        )

    def kick(self) -> None:
        if self._client_pass:
            return  # end_client_pass runs the pump
        pump = self._pump
        if pump is not None and pump.passing:
            # a pass under way takes every Ready the kicker made before it ends (no wake-up
            # of the pump task for nothing, one per pass: the front end's flush kicks)
            return
        self._kick.set()

    def use_poller(self, poller: Poller) -> None:
        """Serve with the client ``poller``: what a pass gives the role's Zab machine (a
        learner's REQUESTs, a link's packets, a sync's answer) is handled as the pass ends,
        in the poller's task; the plain quorum links and the fsync helper's socket are read
        in its passes."""
        self.poller = poller
        poller.before_pass = self.begin_client_pass
        poller.after_pass = self.end_client_pass
        self.persistence.sync_with(poller)

    @property
    def client_pass(self) -> bool:
        return self._client_pass

    def begin_client_pass(self) -> None:
        """The client poller begins a pass: what it kicks is handled when it ends."""
        self._client_pass = True

    def end_client_pass(self) -> None:
        """The client poller's pass ended: the Readies its clients' requests made (a
        learner's REQUESTs, session touches) are handled now, in the poller's task -- one pass
        of the pump for the poller's pass, not a wake-up of the pump task per client frame."""
        self._client_pass = False
        self.run_pump()

    def run_pump(self) -> None:
        """Handle the role's Readies now, in the caller's task (a sync returned, a poller's
        pass ended: :meth:`.pumping.Pump.run_now`); no role: a kick."""
        pump = self._pump
        if pump is not None:
            pump.run_now()
        else:
            self.kick()

    # ------------------------------------------------------------------ four-letter words
    def role_metrics(self) -> list[tuple[str, str, int | float | str]]:
        """mntr's role gauges (QuorumPeer / Leader metrics), with the gauge each follows in
        ZooKeeper 3.8.0's output (captured from a live leader and follower)."""
        if self.role.front.read_only is not None:
            # a ReadOnlyZooKeeperServer is no QuorumZooKeeperServer: no peer_state, no
            # quorum_size (ZooKeeper 3.8.0's mntr on a read-only member)
            return self._queue_summaries()
        zab = "broadcast" if self.role.front.serving else "election"
        state = {"looking": "looking", "leader": "leading", "follower": "following"}.get(
            self.state, "observing"
        )
        out: list[tuple[str, str, int | float | str]] = [
            ("peer_state", "server_state", f"{state} - {zab}"),
            ("quorum_size", "non_mtls_local_conn_count", len(self.spec.voters)),
        ]
        out += self._queue_summaries()
        role = self._pump
        if isinstance(role, LeaderPump) and role.established_at is not None:
            learners = role.leader.learners()
            voters = self.spec.voters
            synced = [sid for _, sid, _, ok in learners if ok]
            last, low, high = role.committer.sizes
            out += [
                ("min_proposal_size", "avg_latency", low),
                ("max_proposal_size", "packets_received", high),
                ("synced_followers", "max_client_response_size", sum(s in voters for s in synced)),
                ("synced_non_voting_followers", "watch_count", 0),
                ("synced_observers", "watch_count", sum(s not in voters for s in synced)),
                ("last_proposal_size", "open_file_descriptor_count", last),
                ("pending_syncs", "open_file_descriptor_count", role.leader.pending_syncs),
                (
                    "leader_uptime",
                    "open_file_descriptor_count",
                    self.clock.now() - role.established_at,
                ),
                ("learners", "outstanding_tls_handshake", len(learners)),
            ]
        return out

    def _queue_summaries(self) -> list[tuple[str, str, int | float | str]]:
        """The ``learner_handler_qp`` summary sets, after every other mntr line as in
        ZooKeeper (keys in ConcurrentHashMap order; ``write_per_namespace``, which ZooKeeper
        prints between the two sets, is not measured here)."""
        last = MNTR_ORDER[-1]
        out: list[tuple[str, str, int | float | str]] = []
        for name, table in (
            (LEARNER_HANDLER_QP_SIZE.name, self.qp_sizes),
            (LEARNER_HANDLER_QP_TIME_MS.name, self.qp_times),
        ):
            for key in JavaHashSet(16, table):
                for k, v in table[key].mntr_values(f"{key}_{name}"):
                    out.append((k, last, v))
        return out

    def queue_meter(self, sid: int) -> QueueMeter:
        key = str(sid)
        return QueueMeter(
            # at the levels ServerMetrics registers them (the metric registry)
            self.qp_sizes.setdefault(key, Summary(LEARNER_HANDLER_QP_SIZE.advanced, None)),
            self.qp_times.setdefault(key, Summary(LEARNER_HANDLER_QP_TIME_MS.advanced, None)),
        )

    def proposal_sizes(self) -> tuple[int, int, int]:
        role = self._pump
        return role.committer.sizes if isinstance(role, LeaderPump) else (-1, -1, -1)

    async def wait_kick(self) -> None:
        """Wait until something may have given the role's Zab machine work (:meth:`kick`)."""
        await self._kick.wait()
        self._kick = trio.Event()

    # ------------------------------------------------------------------ quorum links
    def add_link(self, stream: trio.abc.Stream) -> Link:
        """A new quorum-port connection (a leader's learner): numbered, and kept until
        :meth:`remove_link` or the role's end."""
        self._next_link += 1
        link = self._links[self._next_link] = Link(self._next_link, stream)
        return link

    def link(self, lk: int) -> Link | None:
        """Link ``lk``, if it is still open."""
        return self._links.get(lk)

    def links(self) -> list[Link]:
        """The open quorum links (a leader's learners)."""
        return list(self._links.values())

    def remove_link(self, lk: int) -> None:
        self._links.pop(lk, None)

    # ------------------------------------------------------------------ leading
    async def _lead(self, ep: epochfiles.Epochs) -> str:
        spec = self.spec
        configs = self.configs
        quorum = spec.quorum()
        if configs is not None:
            # NEWLEADER carries the last seen configuration (Leader.getQuorumVerifierBytes)
            quorum = Quorum(quorum.voters, quorum.contains_quorum, configs.last_seen_bytes)
        leader = self.leader = Leader(
            verifier=configs.committed if configs is not None else None,
            sid=spec.myid,
            quorum=quorum,
            timing=spec.timing,
            accepted_epoch=ep.accepted,
            current_epoch=ep.current,
            last_zxid=self.replica.last_zxid,
            now_ms=self.clock.now(),
            committed_log=list(self._committed_log),
            commit_log_count=self.persistence.settings.commit_log_count,
            txnlog=self.persistence.txnlog_source(),
            force_snap=spec.force_snap_sync,
            ack_logging_frequency=spec.ack_logging_frequency,
            config_version=configs.committed.version if configs is not None else 0,
            bump_config=configs.bump_candidate() if configs is not None else None,
        )
        if configs is not None:
            leader.last_seen = configs.last_seen
        committer = ZabCommitter(leader, self.kick, self.persistence.settings.digest_enabled)
        # QuorumPeer: the quorum port on each configured address, or every address with
        # quorumListenOnAllIPs
        listeners: list[trio.SocketListener] = []
        failed: list[str] = []
        for host, port in spec.members[spec.myid].quorum_addrs:
            where = format_address(None if spec.listen_on_all_ips else host, port)
            try:
                listeners += await trio.open_tcp_listeners(
                    port, host=None if spec.listen_on_all_ips else host
                )
            except OSError as e:
                failed.append(f"{where} ({e.strerror or e})")
        if failed:
            # Leader(): "Couldn't bind to /127.0.0.1:2888"; with no address bound ZooKeeper
            # 3.8.0 does not exit, it goes back to LOOKING (captured with the port held)
            what = "leading on the others" if listeners else "not leading"
            log.error("cannot bind the quorum port %s: %s", ", ".join(failed), what)
        if not listeners:
            return "quorum port taken"
        role = self._pump = LeaderPump(self, leader, committer)
        async with trio.open_nursery() as nursery:
            accept: Callable[[trio.abc.Stream], Awaitable[None]] = role.accept
            if self.tls is not None:  # UnifiedServerSocket: TLS or plain by the first bytes
                # LearnerHandler's first reads: initLimit ticks
                accept = self.tls.wrap_accept(accept, "quorum", spec.timing.init_ms / 1000)
            nursery.start_soon(trio.serve_listeners, accept, listeners)
            nursery.start_soon(self._ticker, leader.tick)
            reason = await role.pump()
            nursery.cancel_scope.cancel()
        return reason

    # ------------------------------------------------------------------ learning
    async def _learn(self, leader_sid: int, ep: epochfiles.Epochs) -> str:
        spec = self.spec
        learner = self.learner = Learner(
            sid=spec.myid,
            leader=leader_sid,
            learner_type=LearnerType.OBSERVER if spec.observer else LearnerType.PARTICIPANT,
            timing=spec.timing,
            accepted_epoch=ep.accepted,
            current_epoch=ep.current,
            last_logged_zxid=self.replica.last_zxid,
            now_ms=self.clock.now(),
            snapshot_zxid=self.persistence.newest_snapshot_zxid(),
            config_version=self.configs.committed.version if self.configs is not None else 0,
        )
        stream = await self._connect(spec.members[leader_sid].quorum_addrs)
        if stream is not None and self.tls is not None:  # Learner.connectToLeader's handshake
            stream = await self.tls.connect(
                stream, f"leader {leader_sid}'s quorum port", spec.timing.init_ms / 1000
            )
        if stream is None:
            return f"cannot connect to leader {leader_sid}"
        link_stream: trio.abc.Stream = stream
        auth = spec.quorum_auth
        if auth is not None:
            # Learner.connectToLeader: authLearner.authenticate(sock, the leader's hostname)
            host, port = spec.members[leader_sid].quorum
            first: bytes | None = None
            try:
                first = await auth.authenticate(
                    stream,
                    host,
                    spec.timing.init_ms / 1000,
                    "quorum port",
                    f"leader {leader_sid} ({format_address(host, port)})",
                )
            finally:
                if first is None:  # refused, or the member is stopping
                    with trio.CancelScope(shield=True):
                        await stream.aclose()
            if first is None:
                return f"quorum SASL authentication with leader {leader_sid} failed"
            if first:  # the leader never speaks first, but nothing read is dropped
                link_stream = ReplayStream(stream, first)
        link = Link(0, link_stream)
        learner.connected(self.clock.now())
        role = self._pump = LearnerPump(self, learner, link)
        role.sync_started = self.clock.now()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(link.writer)
                nursery.start_soon(role.reader)
                nursery.start_soon(self._ticker, learner.tick)
                reason = await role.pump()
                nursery.cancel_scope.cancel()
        finally:
            self._resume_gc()  # a SNAP that never got installed
        with trio.CancelScope(shield=True):
            await stream.aclose()
        return reason

    async def _connect(self, addrs: Sequence[tuple[str, int]]) -> trio.abc.Stream | None:
        """Learner.connectToLeader: retry every 100 ms within initLimit ticks (ZooKeeper gives
        up after 5 tries; the leader opens its quorum port only once it has won, so a follower
        deciding first would otherwise often go back to LOOKING)."""
        deadline = trio.current_time() + self.spec.timing.init_ms / 1000
        while True:
            timeout_ms = self.spec.reachability_timeout_ms
            tried = addrs
            if timeout_ms is not None and len(addrs) > 1:
                # the leader's reachable addresses, or all (getAllReachableAddressesOrAll)
                tried = await reachable_or_all(addrs, timeout_ms)
            try:
                # every address of a multi-address leader at once (LeaderConnector threads)
                return await open_first_stream(tried, deadline - trio.current_time())
            except (OSError, trio.TooSlowError) as e:
                if trio.current_time() + CONNECT_PAUSE >= deadline:
                    shown = "|".join(format_address(h, p) for h, p in addrs)
                    log.warning("cannot connect to the leader at %s: %s", shown, e)
                    return None
                await trio.sleep(CONNECT_PAUSE)

    async def _ticker(self, tick: Callable[[int], None]) -> None:
        """Feed the Zab machine time every half tick of the server's clock (a test that moves
        the clock wakes it at once: the machine's timeouts see the new time)."""
        clock = self.clock
        step = max(self.spec.timing.tick_ms // 2, 1)
        while True:
            await clock.sleep_until(clock.now() + step)
            tick(clock.now())
            self.kick()

    # ------------------------------------------------------------------ the applier's disk
    def append(self, plan: Plan) -> None:
        """A pipelined plan's persistence (a broadcast Ready: txn entries, nothing else to
        persist): its entries are only *appended*; the pump goes on while the fsync helper
        makes them durable, and :meth:`advance_durable` advances them once their sync has
        returned -- so the leader keeps proposing, and a learner keeps logging, during an
        fsync (ZooKeeper's SyncRequestProcessor runs beside the proposal flow the same way)."""
        # SyncRequestProcessor.processRequest, for every txn a member logs
        self.metrics.sync_processor_request_queued += len(plan.ready.entries)
        if plan.append:
            entries = plan.append
            number = self.persistence.append_entries([(e.zxid, e.data) for e in entries])
            self.applier.persisted(number)
        else:
            self.applier.persisted()

    async def persist(self, plan: Plan) -> None:
        """A barrier plan's persistence on the data directory (the applier's host, both
        roles): it waits for every append before it to be durable and performs its steps
        whole, in order: an ACK of NEWLEADER still follows the durability of the txns synced
        before it. (A pipelined plan: :meth:`append`.)"""
        if not plan.barrier:
            self.append(plan)
            return
        self.metrics.sync_processor_request_queued += len(plan.ready.entries)
        await self.persistence.durable()
        for step in plan.steps:
            await self._perform(step)
        self.applier.persisted()

    def snapshot_builder(self) -> treeio.SnapshotBuilder:
        """What the leader link's decoder builds a SNAP payload's tree into as it arrives
        (its snapshot sink, one per payload).

        The cyclic garbage collector is paused from here until the tree is installed (or
        the learner's link ends, :meth:`_resume_gc`), as it is while a data directory loads
        (``Persistence.load``): the build makes a few objects per node, each 700 of which
        would bring a collection, and the oldest generation's ones walk every object made
        so far again (~40 % of the build's CPU for 200,000 znodes). What the heap held
        before is collected first, while it is small; a big tree is then frozen out of the
        collector's reach once installed."""
        if not self._gc_paused and gc.isenabled():
            gc.collect()
            gc.disable()
            self._gc_paused = True
        return treeio.SnapshotBuilder(extended_types=self.core_config.extended_types)

    def _resume_gc(self, freeze: bool = False) -> None:
        """End the pause of :meth:`snapshot_builder`; ``freeze``: first move every object
        (the tree just installed) out of the collector's reach (``gc.freeze``: tree nodes
        hold no reference cycles, reference counting still frees them). Only what became
        cyclic garbage during the build is frozen with them, uncollected."""
        if self._gc_paused:
            self._gc_paused = False
            if freeze:
                gc.freeze()
            gc.enable()

    def snapshot_arrived(self, payload: SnapshotPayload) -> None:
        """The leader link's reader decoded a SNAP payload (its tree built as it came); the
        InstallSnapshot step that follows uses it."""
        self._arrived = payload

    async def _perform(self, step: Step) -> None:
        persistence = self.persistence
        if isinstance(step, AcceptedEpoch):
            await trio.to_thread.run_sync(
                epochfiles.write_epoch, self.epoch_dir, epochfiles.ACCEPTED_EPOCH, step.epoch
            )
        elif isinstance(step, CurrentEpoch):
            await trio.to_thread.run_sync(
                epochfiles.write_epoch, self.epoch_dir, epochfiles.CURRENT_EPOCH, step.epoch
            )
        elif isinstance(step, Wipe):
            self._received = None
            persistence.wipe()
            self._reload()
        elif isinstance(step, Truncate):
            self._received = None
            persistence.truncate(step.zxid)
            self._reload()
            log.info("TRUNC: the replica is at %#x", self.replica.last_zxid)
        elif isinstance(step, InstallSnapshot):
            snap = step.snapshot
            t0 = time.monotonic()
            built, self._arrived = self._arrived, None
            how = "built as it came"
            if (
                built is not None
                and built.body is snap.body
                and isinstance(built.built, treeio.SnapshotBuilder)
                and built.built.error is None
            ):
                received = built.built.finish(snap.body, snap.zxid)
            else:
                # (a payload the builder failed on is loaded whole: that reports the error)
                how = "loaded whole"
                received = treeio.load_snapshot_body(
                    snap.body, snap.zxid, extended_types=self.core_config.extended_types
                )
            got = received.replica
            self.replica.reset(got.tree, got.sessions)
            # written as this member's snapshot at NEWLEADER (the TakeSnapshot step)
            self._received = received
            # Learner.syncWithLeader: "Reset config node content from local config after
            # deserialization of snapshot"
            self.init_config()
            self._resume_gc(freeze=got.tree.node_count() >= FREEZE_MIN_NODES)
            log.info(
                "SNAP: loaded the leader's snapshot at %#x (%d bytes, %s) in %.3f s",
                snap.zxid,
                len(snap.body),
                how,
                time.monotonic() - t0,
            )
        elif isinstance(step, TakeSnapshot):
            kept, self._received = self._received, None
            await persistence.take_snapshot(kept)
        else:
            await persistence.log_entries([(e.zxid, e.data) for e in step.entries])

    def advance_durable(self) -> None:
        """Advance the appends whose sync has returned since (oldest first: their ACKs leave
        in zxid order). Raises StorageFailure after a failed sync."""
        self.applier.synced(self.persistence.synced)
