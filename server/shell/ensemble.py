"""An ensemble member (``QuorumPeer``): leader election, then a Zab role, then election again.

Theory of operation
-------------------
A member loops through ZooKeeper's states::

    LOOKING --FastLeaderElection--> LEADING | FOLLOWING | OBSERVING --(role ends)--> LOOKING

* **LOOKING.** The replica is reloaded from the data directory (snapshot + the whole txn log:
  ``getLastLoggedZxid`` counts proposals logged but never committed), the epoch files are read,
  and the election port (:class:`trizk.server.shell.cnxmanager.ElectionPort`) runs an election with
  (last logged zxid, currentEpoch). Clients are refused (the role served is
  :class:`~trizk.server.roles.notserving.NotServingRole`, until a Zab role is established or
  synced; a four-letter word still gets "not currently serving").
* **LEADING.** A :class:`trizk.quorum.zab.leader.Leader` runs discovery and synchronisation with the
  learners that connect to the quorum port. Once established (``Ready.serving``) the member is
  ZooKeeper's leader, serving the :class:`~trizk.server.roles.leading.Leading` role: front end +
  sequencer + replica, the sequencer's committer being Zab (:class:`ZabCommitter`: PROPOSAL to
  the followers, logged and ACKed by itself, COMMIT once a quorum acked). Learners' REQUESTs
  enter the sequencer like local writes, their PING touches keep their sessions alive,
  REVALIDATE asks are answered from the session tracker.
* **FOLLOWING / OBSERVING.** A :class:`trizk.quorum.zab.learner.Learner` connects to the leader's
  quorum port, syncs (DIFF, TRUNC or SNAP), and once UPTODATE serves clients through the
  :class:`~trizk.server.roles.learning.Learning` role: front end + replica, the write path
  being :class:`~trizk.server.writes.forwarder.LearnerWritePath` (REQUESTs to the leader).

Every role a member serves is built by the server's
:class:`~trizk.server.roles.factory.RoleFactory` and installed in the server through
:class:`PeerHost` (the narrow view of the server a member has: its clock, metrics and txn log,
``install(role)`` and ``wake()``). The pumps hand each Ready's committed txns, in zxid order, to
the installed role's sink (``Role.commit``), which applies them to the replica and answers them.

Each role is driven by one *pump* task in the Ready order the Zab machines require: send the
messages (none of them waits for this Ready's persistence: what promises durability only comes
out of ``advance``), persist (epoch files, TRUNC, SNAP install, snapshot, txn log append +
fsync), apply the committed txns (the role's sink), then ``advance``. Readers feed packets in
(``step``), a ticker feeds time (``tick``, every half tick of the server's
:class:`~trizk.server.shell.clock.Clock`: a test that moves that clock moves the Zab machine's
timeouts with it). When a role ends (lost quorum, leader gone, a protocol error)
every client connection is closed and the member is LOOKING again.

Bounds: each quorum link's unsent output is capped (:data:`LINK_OUTPUT_LIMIT`); the packet and
snapshot decoders cap what a peer can make us buffer; a peer that sends garbage loses its link.
Learners' REQUESTs enter the leader's sequencer only while fewer than the leader's
globalOutstandingLimit (:func:`leader_outstanding_limit`) of their proposals are outstanding
(the leader's own clients have their throttle in the front end); the others wait in arrival
order, and a learner with too many waiting loses its link (the caps are the
Leader machine's, see :mod:`trizk.quorum.zab.leader`).
"""

from __future__ import annotations

import dataclasses
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import trio

from trizk.jute import records as r
from trizk.jute.codes import OpCode
from trizk.jute.javalang import get_integer
from trizk.quorum.election.election import ElectionView
from trizk.quorum.election.messages import ServerState as ElectionState
from trizk.quorum.verifier import QuorumVerifier
from trizk.quorum.zab.leader import Leader
from trizk.quorum.zab.learner import Learner
from trizk.quorum.zab.zab import Entry, LearnerType, Quorum, Ready, Timing
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    QuorumStreamError,
    StreamEvent,
    encode_packet,
    encode_snapshot_payload,
    epoch_of,
)
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.common.metricregistry import (
    LEARNER_HANDLER_QP_SIZE,
    LEARNER_HANDLER_QP_TIME_MS,
    MNTR_ORDER,
)
from trizk.server.common.servermetrics import ServerMetrics, Summary
from trizk.server.roles.factory import Role, RoleFactory
from trizk.server.roles.leading import Leading
from trizk.server.roles.learning import Learning
from trizk.server.shell.clock import Clock
from trizk.server.shell.cnxmanager import ElectionPort, format_address, open_first_stream
from trizk.server.shell.persistence import COMMIT_LOG_COUNT, Persistence
from trizk.server.writes.committer import Proposal
from trizk.server.writes.sequencer import Sequencer
from trizk.storage.disk import epochs as epochfiles
from trizk.storage.formats import treeio, txnlog
from trizk.storage.formats.txnlog import TxnEntry
from trizk.storage.tree.javahash import JavaHashSet
from trizk.storage.tree.replica import Replica

if TYPE_CHECKING:
    from trizk.server.config.zoocfg import ServerConfig

__all__ = [
    "EnsembleSpec",
    "LearnerRequests",
    "Member",
    "PeerHost",
    "QueueMeter",
    "QuorumPeer",
    "ZabCommitter",
]

log = logging.getLogger("trizk.quorum")

#: Unsent bytes a quorum link may hold before the link is dropped (a learner that stopped
#: reading; ZooKeeper's LearnerHandler queue is unbounded, its syncLimit check catches it).
LINK_OUTPUT_LIMIT = 256 * 1024 * 1024
#: what a link reads at once: receive_some(n) allocates n bytes and shrinks them, so n stays
#: under glibc's default mmap threshold (128 KiB) or every read maps and unmaps
RECEIVE_SIZE = 64 * 1024
#: Learner.connectToLeader: the pause between tries (leaderConnectDelayDuringRetryMs).
CONNECT_PAUSE = 0.1


@dataclass(frozen=True)
class Member:
    """One ``server.N`` line: quorum and election addresses, participant or observer."""

    sid: int
    quorum: tuple[str, int]
    election: tuple[str, int]
    observer: bool = False
    #: a multi-address member's further (quorum, election) addresses (``a:1:2|b:3:4``)
    more: tuple[tuple[tuple[str, int], tuple[str, int]], ...] = ()

    @property
    def quorum_addrs(self) -> tuple[tuple[str, int], ...]:
        return (self.quorum, *(q for q, _ in self.more))

    @property
    def election_addrs(self) -> tuple[tuple[str, int], ...]:
        return (self.election, *(e for _, e in self.more))


@dataclass(frozen=True)
class EnsembleSpec:
    """What a member needs to know of its ensemble (a static configuration)."""

    myid: int
    members: Mapping[int, Member]
    timing: Timing
    #: ``QuorumVerifier.toString()``: sent in notifications and NEWLEADER
    config: bytes = b"version=0"
    #: ``quorumListenOnAllIPs``: bind the quorum and election ports on every address
    listen_on_all_ips: bool = False
    #: ``cnxTimeout`` (ms): connecting to another member's election port
    connect_timeout_ms: int = 5000
    #: ``zookeeper.forceSnapshotSync``: a leader syncs every learner by SNAP
    force_snap_sync: bool = False
    #: ``zookeeper.leader.ackLoggingFrequency``: the leader samples ACK_LATENCY every n zxids
    ack_logging_frequency: int = 1000
    #: the quorum verifier (hierarchical quorums: groups and weights); None: a majority
    verifier: QuorumVerifier | None = None
    #: ``multiAddress.enabled``: election connections announce every address (V2)
    multi_address: bool = False
    #: ``zookeeper.electionPortBindRetry``: binds of the election port before giving up
    election_bind_tries: int = 3

    @classmethod
    def from_config(cls, config: ServerConfig) -> EnsembleSpec:
        """The ensemble a quorum member's zoo.cfg describes (``server.N`` lines, myid)."""
        qv = config.quorum
        assert qv is not None and config.my_id is not None, "not a quorum configuration"
        members = {
            sid: Member(
                sid,
                (m.addr.host, m.addr.port),
                (m.election_addr.host, m.election_addr.port),
                observer=m.is_observer,
                more=tuple(((q.host, q.port), (e.host, e.port)) for q, e in m.more),
            )
            for sid, m in qv.members.items()
        }
        return cls(
            config.my_id,
            members,
            Timing(config.tick_time, config.init_limit, config.sync_limit),
            qv.to_string().encode(),
            listen_on_all_ips=config.quorum_listen_on_all_ips,
            connect_timeout_ms=config.cnx_timeout,
            force_snap_sync=config.flag("zookeeper.forceSnapshotSync"),
            ack_logging_frequency=config.ack_logging_frequency,
            verifier=qv,
            multi_address=config.multi_address_enabled,
            election_bind_tries=_bind_tries(config),
        )

    @property
    def voters(self) -> frozenset[int]:
        return frozenset(s for s, m in self.members.items() if not m.observer)

    @property
    def observer(self) -> bool:
        return self.members[self.myid].observer

    def quorum(self) -> Quorum:
        if self.verifier is None:
            return Quorum.majority_of(self.voters, self.config)
        return Quorum(self.voters, self.verifier.contains_quorum, self.config)

    def election_view(self) -> ElectionView:
        return ElectionView(self.voters, self.config, self.verifier)


def _bind_tries(config: ServerConfig) -> int:
    """``Integer.getInteger("zookeeper.electionPortBindRetry", 3)``; negative means 3."""
    tries = get_integer(config.properties, "zookeeper.electionPortBindRetry", 3)
    return tries if tries >= 0 else 3


class ZabCommitter:
    """The leader sequencer's :class:`~trizk.server.writes.committer.Committer`: each proposal goes
    to
    Zab as the bytes a txn log entry holds (``Util.marshallTxnEntry``), encoded once."""

    def __init__(self, leader: Leader, kick: Callable[[], None], digests: bool) -> None:
        self.leader = leader
        self.kick = kick
        self.digests = digests
        #: proposals by zxid until their commit is applied
        self.inflight: dict[int, Proposal] = {}
        #: Leader.proposalStats (BufferStats): sizes of the proposals' data, -1 before any
        self.sizes = (-1, -1, -1)

    def propose(self, p: Proposal) -> None:
        digest = txnlog.make_digest(p.digest) if self.digests else None
        data = txnlog.encode_payload(TxnEntry(p.hdr, p.txn, digest))
        n = len(data)
        _, low, high = self.sizes
        self.sizes = (n, n if low < 0 else min(low, n), max(high, n))
        self.inflight[p.hdr.zxid] = p
        if not self.leader.propose(p.hdr.zxid, data):
            log.warning("proposal %#x not taken: the leader stepped down", p.hdr.zxid)
        self.kick()


#: ``LearnerHandler.markerPacketInterval``: every so many queued packets a marker measures
#: the queue's latency
MARKER_PACKET_INTERVAL = 1000
#: packets a LearnerHandler writes to the socket itself, outside its queue
_UNQUEUED = frozenset({PacketType.LEADERINFO, PacketType.SNAP})
#: packets it adds to the queue without ``queuePacket`` (no marker counting)
_UNMARKED = frozenset({PacketType.NEWLEADER, PacketType.UPTODATE})


class QueueMeter:
    """One learner handler's ``queuedPackets`` as ZooKeeper 3.8 measures it (pure).

    ``LearnerHandler.sendPackets`` adds, for every item it takes from the queue, the queue's
    remaining size to ``LEARNER_HANDLER_QP_SIZE`` (summary set ``learner_handler_qp_size``,
    key = the learner's sid); ``queuePacket`` puts a marker after every
    :data:`MARKER_PACKET_INTERVAL`-th packet (the first included), and taking a marker adds its
    time in the queue (ms) to ``LEARNER_HANDLER_QP_TIME`` (``learner_handler_qp_time_ms``).
    Here the queue is the link's unsent output; the writer takes it whole."""

    def __init__(self, sizes: Summary, times: Summary) -> None:
        self.sizes = sizes
        self.times = times
        #: queued items: None a packet, an int a marker (the time it was queued)
        self.items: deque[int | None] = deque()
        self.counter = 0

    def queued(self, ptype: int, now: int) -> None:
        if ptype in _UNQUEUED:
            return
        self.items.append(None)
        if ptype not in _UNMARKED:
            if self.counter % MARKER_PACKET_INTERVAL == 0:
                self.items.append(now)
            self.counter += 1

    def taken(self, now: int) -> None:
        items = self.items
        while items:
            item = items.popleft()
            self.sizes.add(len(items))
            if item is not None:
                self.times.add(now - item)


class _Link:
    """A quorum-port connection's output: packets queued by the pump, sent by one task."""

    def __init__(self, link: int, stream: trio.SocketStream) -> None:
        self.link = link
        self.stream = stream
        self.out = bytearray()
        self.ready = trio.Event()
        self.closed = False
        #: the leader's measure of this learner's queue (once its sid is known)
        self.meter: QueueMeter | None = None
        self.now: Callable[[], int] | None = None

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        self.out += data
        if len(self.out) > LINK_OUTPUT_LIMIT:
            log.warning("quorum link %d: %d bytes unsent, closing it", self.link, len(self.out))
            self.close()
        self.ready.set()

    def close(self) -> None:
        self.closed = True
        self.ready.set()

    async def writer(self) -> None:
        try:
            while True:
                if self.out:
                    data = bytes(self.out)
                    self.out.clear()
                    if self.meter is not None and self.now is not None:
                        self.meter.taken(self.now())
                    await self.stream.send_all(data)
                    continue
                if self.closed:
                    return
                self.ready = trio.Event()
                await self.ready.wait()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.closed = True


async def _read_link(
    stream: trio.SocketStream, step: Callable[[StreamEvent], None], kick: Callable[[], None]
) -> str:
    """Feed a quorum link's packets (and SNAP payloads) to ``step`` until the peer closes it,
    it breaks, or it carries bytes that cannot be a quorum stream; returns why it ended."""
    decoder = QuorumStreamDecoder()
    while True:
        try:
            data = await stream.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            return f"connection broke: {e}"
        if not data:
            return "connection closed by the peer"
        try:
            decoder.feed(data)
            while (ev := decoder.next_event()) is not None:
                step(ev)
        except QuorumStreamError as e:
            log.warning("bad bytes on a quorum link (%s); closing it", e)
            return f"bad stream: {e}"
        kick()


async def _until_done(task: Callable[[], Awaitable[None]], scope: trio.CancelScope) -> None:
    """Run ``task``; when it returns, cancel ``scope`` (its sibling tasks)."""
    await task()
    scope.cancel()


class PeerHost(Protocol):
    """What an ensemble member needs of the server around it (the shell,
    :class:`~trizk.server.shell.app.TrizkServer`): its clock, its metrics, its txn log, the
    installation of a role, and the flush of what the role's front end wrote."""

    @property
    def clock(self) -> Clock:
        """The server's one clock: Zab's times and ticks come from it."""
        ...

    @property
    def server_metrics(self) -> ServerMetrics:
        """ServerMetrics: one per server, every role adds to it."""
        ...

    @property
    def persistence(self) -> Persistence:
        """The data directory: txn log, snapshots (loaded)."""
        ...

    def install(self, role: Role) -> None:
        """Serve clients through ``role`` from now on (the previous role's are closed)."""
        ...

    def wake(self) -> None:
        """Flush what the front end wrote (after a Ready was applied)."""
        ...


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
        self.core_config = core_config
        #: builds the role served once a Zab role is established (or synced)
        self.roles = roles
        #: the role the host serves: not serving until a leader is established or a learner
        #: synced; committed txns go to its sink (:meth:`Role.commit`)
        self.role: Role = roles.not_serving()
        self.persistence = host.persistence
        # a sync that returned may let a pump send its ACKs
        self.persistence.on_durable = self.kick
        assert self.persistence.replica is not None, "load() first"
        self.replica: Replica = self.persistence.replica
        self.epoch_dir: Path = self.persistence.settings.snap_dir
        self.state = "looking"
        self.leader: Leader | None = None
        self.learner: Learner | None = None
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
        )
        self._kick = trio.Event()
        self._pump: _LeaderPump | _LearnerPump | None = None
        #: ZKDatabase.committedLog: the newest txns applied, for a leader's DIFFs
        self._committed_log: deque[Entry] = deque(
            (Entry(e.zxid, txnlog.encode_payload(e)) for e in self.persistence.recent_entries()),
            maxlen=COMMIT_LOG_COUNT,
        )
        #: txns logged by this member and not (yet) applied: zxid -> marshalled entry
        self._unapplied: dict[int, bytes] = {}
        #: entries appended by a broadcast Ready, not yet known durable: (append number, entries)
        self._undurable: deque[tuple[int, list[Entry]]] = deque()
        #: the replica equals the data directory (just loaded); else see _catch_up
        self._fresh = True
        #: the last role reached serving (its in-memory state is whole)
        self._served = False
        self._links: dict[int, _Link] = {}
        self._next_link = 0
        #: when this member last stopped serving (QuorumPeer.unavailableStartTime)
        self._unavailable_since: int | None = None
        #: ServerMetrics' LEARNER_HANDLER_QP_SIZE / _QP_TIME summary sets, by learner sid (as
        #: ZooKeeper's, process-wide: they outlive the role that measured them)
        self.qp_sizes: dict[str, Summary] = {}
        self.qp_times: dict[str, Summary] = {}

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
        self._broadcasting(now)

    async def _round(self) -> None:
        self.state = "looking"
        metrics = self.metrics
        metrics.looking_count += 1  # QuorumPeer.run: case LOOKING
        if self._unavailable_since is None:
            self._unavailable_since = self.clock.now()
        self._install(self.roles.not_serving())
        # the vote is the last *logged* zxid: everything appended must be durable first
        await self.persistence.durable()
        self._undurable.clear()
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
        self.election.look(self.replica.last_zxid, ep.current)
        decision = await self.election.wait_decision()
        leader = decision.vote.leader
        if not self.spec.observer:
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

    def _catch_up(self) -> None:
        """Before an election the replica must hold every txn this member logged, committed
        or not (its vote is its last *logged* zxid). After a role that served, the txns
        logged but never applied are applied in memory (``ZKDatabase.fastForwardDataBase``);
        after one that ended mid-sync (TRUNC, SNAP) the data directory is read again."""
        if self._fresh:
            self._fresh = False
            self.init_config()
        elif self._served:
            for zxid in sorted(self._unapplied):
                data = self._unapplied[zxid]
                if zxid > self.replica.last_zxid:
                    te = txnlog.decode_payload(data)
                    self.replica.apply(te.header, treeio.current_txn(te))
                    self._committed_log.append(Entry(zxid, data))
            self._unapplied.clear()
        else:
            self._reload()
            self._fresh = False

    def _reload(self) -> None:
        """The replica as the data directory has it (snapshot + txn log)."""
        loaded = self.persistence.load()
        self.replica.reset(loaded.replica.tree, loaded.replica.sessions)
        self.persistence.replica = self.replica
        self._committed_log.clear()
        self._committed_log.extend(
            Entry(e.zxid, txnlog.encode_payload(e)) for e in self.persistence.recent_entries()
        )
        self._unapplied.clear()
        self.init_config()

    def init_config(self) -> None:
        """``QuorumPeer.initConfigInZKDatabase``: /zookeeper/config shows this member's view of
        the ensemble (at start-up and after every sync, reconfig being off)."""
        self.replica.tree.set_config(self.spec.config, self.clock.wall())

    def kick(self) -> None:
        self._kick.set()

    # ------------------------------------------------------------------ four-letter words
    def role_metrics(self) -> list[tuple[str, str, int | float | str]]:
        """mntr's role gauges (QuorumPeer / Leader metrics), with the gauge each follows in
        ZooKeeper 3.8.0's output (captured from a live leader and follower)."""
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
        if isinstance(role, _LeaderPump) and role.established_at is not None:
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
        return role.committer.sizes if isinstance(role, _LeaderPump) else (-1, -1, -1)

    async def wait_kick(self) -> None:
        """Wait until something may have given the role's Zab machine work (:meth:`kick`)."""
        await self._kick.wait()
        self._kick = trio.Event()

    # ------------------------------------------------------------------ quorum links
    def add_link(self, stream: trio.SocketStream) -> _Link:
        """A new quorum-port connection (a leader's learner): numbered, and kept until
        :meth:`remove_link` or the role's end."""
        self._next_link += 1
        link = self._links[self._next_link] = _Link(self._next_link, stream)
        return link

    def link(self, lk: int) -> _Link | None:
        """Link ``lk``, if it is still open."""
        return self._links.get(lk)

    def remove_link(self, lk: int) -> None:
        self._links.pop(lk, None)

    # ------------------------------------------------------------------ leading
    async def _lead(self, ep: epochfiles.Epochs) -> str:
        spec = self.spec
        leader = self.leader = Leader(
            sid=spec.myid,
            quorum=spec.quorum(),
            timing=spec.timing,
            accepted_epoch=ep.accepted,
            current_epoch=ep.current,
            last_zxid=self.replica.last_zxid,
            now_ms=self.clock.now(),
            committed_log=list(self._committed_log),
            txnlog=self.persistence.txnlog_source(),
            force_snap=spec.force_snap_sync,
            ack_logging_frequency=spec.ack_logging_frequency,
        )
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
        role = self._pump = _LeaderPump(self, leader, committer)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, role.accept, listeners)
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
        )
        stream = await self._connect(spec.members[leader_sid].quorum_addrs)
        if stream is None:
            return f"cannot connect to leader {leader_sid}"
        link = _Link(0, stream)
        learner.connected(self.clock.now())
        role = self._pump = _LearnerPump(self, learner, link)
        role.sync_started = self.clock.now()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.writer)
            nursery.start_soon(role.reader)
            nursery.start_soon(self._ticker, learner.tick)
            reason = await role.pump()
            nursery.cancel_scope.cancel()
        with trio.CancelScope(shield=True):
            await stream.aclose()
        return reason

    async def _connect(self, addrs: Sequence[tuple[str, int]]) -> trio.SocketStream | None:
        """Learner.connectToLeader: retry every 100 ms within initLimit ticks (ZooKeeper gives
        up after 5 tries; the leader opens its quorum port only once it has won, so a follower
        deciding first would otherwise often go back to LOOKING)."""
        deadline = trio.current_time() + self.spec.timing.init_ms / 1000
        while True:
            try:
                # every address of a multi-address leader at once (LeaderConnector threads)
                return await open_first_stream(addrs, deadline - trio.current_time())
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

    # ------------------------------------------------------------------ shared Ready handling
    async def persist(self, rd: Ready) -> Ready:
        """Ready step 1 (both roles): epoch files, wipe, TRUNC, SNAP install, snapshot, txn log.

        Returns what ``advance`` may be given now. A broadcast Ready (txn entries, nothing else
        to persist) only *appends* its entries: the rest of the Ready goes on while the sync
        thread makes them durable, and their advance (the ACKs that promise durability) comes
        from :meth:`durable_entries` once their sync has returned -- so the leader keeps
        proposing, and a learner keeps logging, during an fsync (ZooKeeper's
        SyncRequestProcessor runs beside the proposal flow the same way). Any other Ready waits
        for every append before it to be durable and is persisted whole, in order, as before:
        an ACK of NEWLEADER still follows the durability of the txns synced before it."""
        persistence = self.persistence
        # SyncRequestProcessor.processRequest, for every txn a member logs
        self.metrics.sync_processor_request_queued += len(rd.entries)
        if not (
            rd.accepted_epoch is not None
            or rd.current_epoch is not None
            or rd.wipe
            or rd.truncate_to is not None
            or rd.snapshot_in is not None
            or rd.take_snapshot
        ):
            if rd.entries:
                seq = persistence.append_entries([(e.zxid, e.data) for e in rd.entries])
                for e in rd.entries:
                    self._unapplied[e.zxid] = e.data
                self._undurable.append((seq, rd.entries))
                return dataclasses.replace(rd, entries=[])
            return rd
        await persistence.durable()
        if rd.accepted_epoch is not None:
            await trio.to_thread.run_sync(
                epochfiles.write_epoch, self.epoch_dir, epochfiles.ACCEPTED_EPOCH, rd.accepted_epoch
            )
        if rd.current_epoch is not None:
            await trio.to_thread.run_sync(
                epochfiles.write_epoch, self.epoch_dir, epochfiles.CURRENT_EPOCH, rd.current_epoch
            )
        if rd.wipe:
            persistence.wipe()
            self._reload()
        if rd.truncate_to is not None:
            persistence.truncate(rd.truncate_to)
            self._reload()
            log.info("TRUNC: the replica is at %#x", self.replica.last_zxid)
        if rd.snapshot_in is not None:
            got = treeio.replica_from_snapshot_body(
                rd.snapshot_in.body,
                rd.snapshot_in.zxid,
                extended_types=self.core_config.extended_types,
            )
            self.replica.reset(got.tree, got.sessions)
            # Learner.syncWithLeader: "Reset config node content from local config after
            # deserialization of snapshot"
            self.init_config()
            log.info("SNAP: loaded the leader's snapshot at %#x", rd.snapshot_in.zxid)
        if rd.take_snapshot:
            await persistence.take_snapshot()
        if rd.entries:
            await persistence.log_entries([(e.zxid, e.data) for e in rd.entries])
            for e in rd.entries:
                self._unapplied[e.zxid] = e.data
        return rd

    def durable_entries(self) -> list[Ready]:
        """Readies of the appended entries whose sync has returned since (oldest first): what
        to hand to the machine's ``advance``. Raises StorageFailure after a failed sync."""
        synced = self.persistence.synced
        out = []
        while self._undurable and self._undurable[0][0] <= synced:
            out.append(Ready(entries=self._undurable.popleft()[1]))
        return out

    def committed(self, e: Entry, p: Proposal | None) -> Proposal:
        """Ready step 3, before the role's sink applies it: one committed txn, as the proposal
        ``p`` it was (the leader's own) or decoded from its entry, is no longer unapplied and
        joins the committed log (a leader's DIFFs)."""
        self._unapplied.pop(e.zxid, None)
        self._committed_log.append(e)
        if p is not None:
            return p
        te = txnlog.decode_payload(e.data)
        return Proposal(te.header, treeio.current_txn(te))


def leader_outstanding_limit(global_outstanding_limit: int, voters: int) -> int:
    """``LeaderZooKeeperServer.getGlobalOutstandingLimit``: the limit shared by the followers,
    divided by (voters - 1) in ensembles of more than two voters."""
    divisor = voters - 1 if voters > 2 else 1
    return max(global_outstanding_limit // divisor, 1)


class LearnerRequests:
    """Learners' REQUESTs on their way into the leader's sequencer (pure).

    They wait in arrival order (``Ready.requests``) and enter the sequencer while fewer than
    ``limit`` of the proposals made for them are outstanding; each one entering is released
    in the Leader machine (``Leader.request_done``), which caps what a link has waiting. The
    leader's own clients are throttled by its front end instead.

    A link that closes drops its waiting REQUESTs. ZooKeeper would still prep them, but their
    clients were dropped with the learner's leader link (unknown outcome), and one of them
    reconnecting to the leader itself would otherwise see its new writes overtake its old ones:
    the leader's own requests do not wait here (found by the Zab simulation, which runs this
    class with a limit of 3: seeds 19 of "3+1" and 6 of "5+1"). A REQUEST the leader reads
    from a link the learner has already closed may still be prepped after the same session's
    newer writes through the leader; it then fails with SESSIONMOVED (the reconnect made the
    leader the session's owner, ``Sequencer.revalidate_for``), except a closeSession, which
    is not checked against the owner (as in ZooKeeper's prep) and closes the session."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waiting: deque[tuple[int, r.QuorumPacket]] = deque()
        #: zxids proposed for learners' REQUESTs and not yet committed
        self.proposed: set[int] = set()

    def committed(self, zxid: int) -> None:
        self.proposed.discard(zxid)

    def link_closed(self, link: int) -> None:
        if any(lk == link for lk, _ in self.waiting):
            self.waiting = deque((lk, qp) for lk, qp in self.waiting if lk != link)

    def feed(
        self,
        leader: Leader,
        seq: Sequencer,
        owners: Mapping[int, int],
        now: int,
        wall: int,
        sync: Callable[[int], None],
        bad: Callable[[int, Exception], None],
    ) -> None:
        """Waiting REQUESTs into ``seq``, oldest first, while under the limit, each owned by
        its link's learner (``owners``: link -> sid; a link gone: an owner of its own); a sync is
        handed to ``sync(link)`` in its place in the order (``Leader.processSync``), a REQUEST
        the sequencer cannot take to ``bad(link, error)``."""
        waiting, proposed = self.waiting, self.proposed
        while waiting and len(proposed) < self.limit:
            lk, qp = waiting.popleft()
            leader.request_done(lk, qp)
            last = seq.last_zxid
            try:
                owner = owners.get(lk, -2 - lk)
                op = seq.submit_learner_request(qp.data or b"", qp.authinfo, now, wall, owner)
            except Exception as e:  # a bad REQUEST costs its link only
                bad(lk, e)
                continue
            if seq.last_zxid != last:
                proposed.add(seq.last_zxid)
            if op == OpCode.SYNC:
                sync(lk)


class _LeaderPump:
    """LEADING: quorum-port links, the pump; the :class:`~trizk.server.roles.leading.Leading`
    role once established."""

    def __init__(self, peer: QuorumPeer, leader: Leader, committer: ZabCommitter) -> None:
        self.peer = peer
        self.leader = leader
        self.committer = committer
        #: the role served once established (None before)
        self.role: Leading | None = None
        self.established_at: int | None = None
        self.requests = LearnerRequests(
            leader_outstanding_limit(
                peer.core_config.global_outstanding_limit, len(peer.spec.voters)
            )
        )

    async def accept(self, stream: trio.SocketStream) -> None:
        peer = self.peer
        link = peer.add_link(stream)
        self.leader.connected(link.link)
        clock = peer.clock

        def step(ev: StreamEvent) -> None:
            if isinstance(ev, r.QuorumPacket):  # learners send no snapshots
                self.leader.step(link.link, ev, clock.now())

        try:
            async with trio.open_nursery() as nursery:
                # the link ends when either side does: the pump closing it, or the learner
                nursery.start_soon(_until_done, link.writer, nursery.cancel_scope)
                reason = await _read_link(stream, step, peer.kick)
                log.info("quorum link %d ends: %s", link.link, reason)
                link.close()
        finally:
            peer.remove_link(link.link)
            self.leader.link_closed(link.link)
            self.requests.link_closed(link.link)
            peer.kick()
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def pump(self) -> str:
        peer, leader = self.peer, self.leader
        clock, metrics = peer.clock, peer.metrics
        while True:
            for done in peer.durable_entries():
                leader.advance(done)  # the leader's own ACKs
            while leader.has_ready():
                rd = leader.ready()
                # Messages never wait for this Ready's persistence (what needs it comes from
                # advance): PROPOSALs go out while the leader's own fsync runs.
                # Leader.propose: PROPOSAL_COUNT, once per proposal (what the leader logs)
                metrics.proposal_count += len(rd.entries)
                now = clock.now()
                for s in rd.messages:
                    link = peer.link(s.link)
                    if link is None:
                        continue
                    # LearnerHandler.syncFollower: SNAP_COUNT, or DIFF_COUNT (DIFF or TRUNC)
                    if s.packet.type == PacketType.SNAP:
                        metrics.snap_count += 1
                    elif s.packet.type in (PacketType.DIFF, PacketType.TRUNC):
                        metrics.diff_count += 1
                    if link.meter is None:
                        sid = next((sid for lk, sid, _, _ in leader.learners() if lk == s.link), 0)
                        if sid > 0:
                            link.meter, link.now = peer.queue_meter(sid), clock.now
                    if link.meter is not None:
                        link.meter.queued(s.packet.type, now)
                    link.send(encode_packet(s.packet))
                    if s.packet.type == PacketType.SNAP:
                        link.send(encode_snapshot_payload(treeio.snapshot_body(peer.replica)))
                for lk, why in rd.close:
                    link = peer.link(lk)
                    if link is not None:
                        log.warning("closing quorum link %d: %s", lk, why)
                        link.close()
                now_ready = await peer.persist(rd)
                for done in peer.durable_entries():
                    leader.advance(done)  # earlier appends first: ACKs in zxid order
                now, wall = clock.now(), clock.wall()
                if rd.committed:
                    inflight = self.committer.inflight
                    batch = []
                    for e in rd.committed:
                        p = peer.committed(e, inflight.pop(e.zxid, None))
                        # Leader.tryToCommit: QUORUM_ACK_LATENCY (wall ms since the txn's
                        # creation, when not negative); Leader.commit: COMMIT_COUNT
                        metrics.commit_count += 1
                        if wall >= p.hdr.time:
                            metrics.quorum_ack_latency.add(wall - p.hdr.time)
                        self.requests.committed(p.hdr.zxid)
                        batch.append(p)
                    # the role's sink (not serving until established): apply, answer
                    peer.role.commit(batch, now)
                for sid, data in rd.acks:
                    # Leader.processAck: ACK_LATENCY{key=sid} (Request.logLatency)
                    made = _txn_time(data)
                    if made is not None and wall >= made:
                        metrics.ack_latency.add(str(sid), wall - made)
                if rd.serving is not None:
                    self._establish(rd.serving, now, wall)
                if self.role is not None:
                    seq = self.role.sequencer
                    # requests and sessions are owned by the learner they came through
                    sid_of = {lk: sid for lk, sid, _, _ in leader.learners()}
                    # a closed link's REQUESTs are dropped (see LearnerRequests)
                    self.requests.waiting.extend(
                        r for r in rd.requests if peer.link(r[0]) is not None
                    )
                    self.requests.feed(
                        leader,
                        seq,
                        sid_of,
                        now,
                        wall,
                        leader.process_sync,
                        self._bad_request,
                    )
                    for sid, timeout in rd.touches:
                        seq.touch(sid, now, timeout)
                    for lk, sid, timeout in rd.revalidate:
                        metrics.revalidate_count += 1  # LearnerHandler: REVALIDATE
                        owner = sid_of.get(lk, -2 - lk)
                        leader.revalidated(lk, sid, seq.revalidate_for(sid, timeout, now, owner))
                leader.advance(now_ready)
                peer.host.wake()
                if rd.role is not None:
                    return rd.role.reason
            await peer.wait_kick()

    def _bad_request(self, lk: int, e: Exception) -> None:
        log.warning("quorum link %d: bad REQUEST (%s); closing it", lk, e)
        link = self.peer.link(lk)
        if link is not None:
            link.close()

    def _establish(self, zxid: int, now: int, wall: int) -> None:
        """``Leader.startZkServer``: serve clients; txns continue at ``zxid`` (epoch << 32)."""
        peer = self.peer
        role = self.role = peer.roles.leading(self.committer, zxid, now, wall)
        peer.serve(role, zxid, now)
        self.established_at = now
        log.info("LEADING: established epoch %d at %#x", epoch_of(zxid), zxid)


class _LearnerPump:
    """FOLLOWING / OBSERVING: the leader link's reader and the pump; the
    :class:`~trizk.server.roles.learning.Learning` role once synced."""

    def __init__(self, peer: QuorumPeer, learner: Learner, link: _Link) -> None:
        self.peer = peer
        self.learner = learner
        self.link = link
        #: the role served once synced (None before)
        self.role: Learning | None = None
        #: when the sync with the leader began (its link connected)
        self.sync_started = 0

    async def reader(self) -> None:
        clock = self.peer.clock
        reason = await _read_link(
            self.link.stream,
            lambda ev: self.learner.step(ev, clock.now()),
            self.peer.kick,
        )
        self.learner.link_closed(f"leader link: {reason}")
        self.peer.kick()

    async def pump(self) -> str:
        peer, learner = self.peer, self.learner
        clock, metrics = peer.clock, peer.metrics
        while True:
            for done in peer.durable_entries():
                learner.advance(done)  # ACKs, now that the proposals are durable
            while learner.has_ready():
                rd = learner.ready()
                for s in rd.messages:
                    self.link.send(encode_packet(s.packet))
                wall = clock.wall()
                if self.role is not None and not peer.spec.observer:
                    # Follower.processPacket PROPOSAL (broadcast phase): the count, and
                    # PROPOSAL_LATENCY = wall ms since the leader made the txn (if >= 0)
                    for e in rd.entries:
                        metrics.learner_proposal_received_count += 1
                        made = _txn_time(e.data)
                        if made is not None and wall >= made:
                            metrics.proposal_latency.add(wall - made)
                now_ready = await peer.persist(rd)
                for done in peer.durable_entries():
                    # earlier appends first: their ACKs precede this Ready's (an ACK of
                    # NEWLEADER is the one packet LearnerHandler reads after sending it)
                    learner.advance(done)
                now, wall = clock.now(), clock.wall()
                if rd.committed:
                    batch = [peer.committed(e, None) for e in rd.committed]
                    if self.role is not None:
                        for p in batch:
                            # COMMIT (INFORM on an observer): LEARNER_COMMIT_RECEIVED_COUNT,
                            # COMMIT_PROPAGATION_LATENCY (Request.logLatency)
                            metrics.learner_commit_received_count += 1
                            if wall >= p.hdr.time:
                                metrics.commit_propagation_latency.add(wall - p.hdr.time)
                    # the role's sink (not serving until synced): apply, answer
                    peer.role.commit(batch, now)
                if rd.serving is not None:
                    self._serve(rd.serving, wall)
                role = self.role
                if role is not None:
                    for sid, valid in rd.revalidated:
                        role.path.revalidated(sid, valid)
                    for _ in range(rd.synced):
                        role.front.on_synced(now)
                learner.advance(now_ready)
                peer.host.wake()
                if rd.role is not None:
                    return rd.role.reason
            await peer.wait_kick()

    def _serve(self, zxid: int, wall: int) -> None:
        peer = self.peer
        peer.init_config()  # Learner.syncWithLeader, after every sync
        now = peer.clock.now()
        # Follower.followLeader / Observer.observeLeader: FOLLOWER_/OBSERVER_SYNC_TIME
        synced = peer.metrics.summary(
            "observer_sync_time" if peer.spec.observer else "follower_sync_time"
        )
        synced.add(now - self.sync_started)
        if peer.spec.observer:
            role = self.role = peer.roles.observing(self.learner, wall)
        else:
            role = self.role = peer.roles.following(self.learner, wall)
        peer.serve(role, zxid, now)
        log.info(
            "%s: synced with the leader by %s, serving clients (epoch %d)",
            peer.state.upper(),
            self.learner.sync_mode.value,
            epoch_of(zxid),
        )


_TXN_TIME = struct.Struct(">q")


def _txn_time(entry: bytes) -> int | None:
    """The ``time`` of a marshalled txn's TxnHeader (clientId, cxid, zxid, time, type)."""
    if len(entry) < 28:
        return None
    return int(_TXN_TIME.unpack_from(entry, 20)[0])
