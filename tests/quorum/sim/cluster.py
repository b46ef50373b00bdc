"""Deterministic simulation of a Zab ensemble (one thread, one seeded RNG, simulated time).

What is simulated
-----------------
* Members: ``voters`` participants and ``observers``, each with a simulated disk, a real
  replica (``trizk.storage.tree.replica.Replica``, see ``workload.py``), the history model beside it
  (the list of applied (zxid, entry bytes)) and, when not LOOKING, one pure Zab machine
  (:class:`trizk.quorum.zab.leader.Leader` or :class:`trizk.quorum.zab.learner.Learner`). An
  established leader runs the real :class:`~trizk.server.writes.sequencer.Sequencer` (prep, zxids,
  session tracking and expiry), a serving learner the real
  :class:`~trizk.server.writes.forwarder.LearnerWritePath` (REQUEST forwarding, session touches,
  REVALIDATE).
* Ready handling: each member's Readies go through the one applier the ensemble shell's pumps
  use (:class:`trizk.quorum.zab.applier.ReadyApplier`), so the simulation does what production
  does: a broadcast Ready's entries are appended to the volatile disk and the next Ready is
  taken at once, several appends in flight, each advanced (its ACKs) when its fsync completes,
  in order; any other Ready waits for every earlier fsync, persists whole and is finished when
  its own fsync completes. A member looks (votes) only once its appends are durable.
* Disk: persistence goes to a volatile copy at once and becomes durable when its fsync
  completes (a random delay later, after every fsync started before it); a crash keeps only
  what was durable. A snapshot install clears the txn log (see the report on ZooKeeper's
  retained pre-snapshot log files). A restarted member's replica is its snapshot plus its log.
* Network: a learner-leader link is a TCP connection: FIFO per direction with random delays
  (so packets reorder across links), broken at random, by partitions and by crashes; a broken
  link delivers nothing more. Partitions split the members into groups; only members of one
  group reach each other.
* Clocks: each member's clock runs at its own rate (skew in ticks between members).
* Pauses and clock steps (``pause_interval_ms`` / ``clock_step_interval_ms``, off by default):
  a paused member is a SIGSTOPped process (a VM freeze): it ticks, reads, sends and elects
  nothing (it takes no Ready; its fsyncs in flight complete, the kernel writes them); what
  reaches it (packets, a closed link, a connect) waits in its ``held`` queue; its peers see
  silence. On resume its ticker and its readers wake together:
  in a random order, the ticker first or the queued input first. Sometimes the whole ensemble
  is paused and resumed at once, sometimes one member, for shorter and longer than syncLimit.
  A clock step moves one member's monotonic clock forward (the test controls' ``advance``, a
  VM restored after a freeze): its next tick sees the jump.
* Election: an oracle standing in for FastLeaderElection: a LOOKING member joins a reachable
  LEADING member, else when a quorum of reachable voters is LOOKING the best of them by
  (currentEpoch, lastLoggedZxid, sid) leads and the rest follow.
* Dynamic reconfig (``reconfig_interval_ms``, ``voter_changes``): clients as the super user
  send reconfigs through the real prep; with voter changes a participant is removed, added
  (an observer promoted, a removed member back) or demoted, between 3 and 5 voters. Each
  member's configuration and last seen one survive its crashes (ZooKeeper's dynamic files);
  voters are those of each member's own configuration, a LOOKING member adopts the newest
  configuration of the LOOKING members it reaches (FastLeaderElection's notifications), and
  the leader needs a quorum of the best member's configuration and, when newer, of its last
  seen one (the vote tracker).
* Clients (``workload.SimClient``): sessions issuing pipelined writes (creates of every mode,
  setData and delete with versions, multi, closeSession) in cxid order through the member they
  are connected to, pinging it, reconnecting elsewhere when it drops them; syncs from members.

Invariants checked (AssertionError with the seed's trace)
---------------------------------------------------------
* at most one established leader per epoch;
* every txn applied by a serving member, and every established leader's history, agrees with
  the one committed history (``canonical``: zxid -> bytes): committed prefixes agree;
* an established leader's history contains every txn committed before (no acknowledged write
  is lost; ``acked`` are the writes answered to a client, each after its commit on the member
  the client is connected to); serving members' histories are exactly the committed prefix up
  to their last zxid;
* replicas at equal zxid have equal trees: after every txn a serving member applies (and when
  a member starts serving), its tree digest equals the reference replica's at that zxid
  (``workload.Reference``, the committed history applied in zxid order); every 500 steps and
  at the end the whole state (nodes, stats, ACLs, sessions) of every serving member equals the
  other members' at the same zxid and the reference's;
* per-session FIFO: a session's txns commit in the order its client submitted them (cxids
  strictly increase along the committed history), and a client's replies arrive in the order
  of its requests;
* a learner's sync answer comes after it applied what the leader had proposed at sync time;
* epoch files on a restarted member: acceptedEpoch >= currentEpoch >= epoch(last logged zxid);
* reconfig: one configuration per version everywhere; a reconfig's commit (its first
  activation by a commit: the leader's, COMMITANDACTIVATE / INFORMANDACTIVATE, a new leader's
  establishment) finds the txn durable on a quorum of the *new* configuration's voters (the
  old one's is every commit's). Two activations are no commit of a txn, as in ZooKeeper:
  UPTODATE's of NEWLEADER's configuration (the leader's last seen one, which may still be in
  flight), and a new leader's of a last seen configuration whose txn it never made durable
  (the ``.next`` file is written when the proposal arrives; counted as "configs activated
  from .next alone").
"""

from __future__ import annotations

import heapq
import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.quorum.sim import workload
from tests.quorum.sim.workload import HistoryError, Reference, SimClient
from trizk.jute import records as r
from trizk.jute.codes import OpCode
from trizk.jute.records import QuorumPacket
from trizk.quorum.reconfig import LeaderConfigView
from trizk.quorum.verifier import QuorumVerifier, parse_config_string
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
from trizk.quorum.zab.zab import Entry, LearnerType, Quorum, Timing
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    SnapshotPayload,
    counter_of,
    encode_snapshot_payload,
    epoch_of,
    make_zxid,
)
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.roles.factory import Role, RoleFactory
from trizk.server.shell.ensemble import LearnerRequests
from trizk.server.writes.committer import Proposal
from trizk.server.writes.forwarder import LearnerWritePath
from trizk.server.writes.sequencer import Sequencer, WriteRequest
from trizk.server.writes.sessions import LOCAL
from trizk.storage.formats import treeio, txnlog
from trizk.storage.formats.txnlog import TxnEntry
from trizk.storage.tree.replica import Replica

P = PacketType


class SimCommitter:
    """The leader sequencer's committer: each proposal to Zab as the bytes a txn log entry
    holds (as ``server/shell/ensemble/leading.py``'s ZabCommitter)."""

    def __init__(self, sim: Sim, n: Node, leader: Leader) -> None:
        self.sim, self.n, self.leader = sim, n, leader

    def propose(self, p: Proposal) -> None:
        data = txnlog.encode_payload(TxnEntry(p.hdr, p.txn, txnlog.make_digest(p.digest)))
        if self.leader.propose(p.hdr.zxid, data, p.config):
            self.sim.stats["proposed"] += 1
        else:
            self.sim.stats["rollovers"] += counter_of(p.hdr.zxid) == 0xFFFFFFFF


@dataclass
class Disk:
    accepted: int = 0
    current: int = 0
    snap_zxid: int = 0
    snap_hist: tuple[tuple[int, bytes], ...] = ()
    #: the snapshot as the replica's SNAP body (None: no snapshot)
    snap_body: bytes | None = None
    log: tuple[Entry, ...] = ()

    def copy(self) -> Disk:
        return Disk(
            self.accepted, self.current, self.snap_zxid, self.snap_hist, self.snap_body, self.log
        )

    def history(self, upto: int | None = None) -> list[tuple[int, bytes]]:
        hist = list(self.snap_hist)
        for e in self.log:
            if e.zxid > self.snap_zxid and (upto is None or e.zxid <= upto):
                hist.append((e.zxid, e.data))
        return hist

    def last_zxid(self) -> int:
        z = self.snap_zxid
        for e in self.log:
            z = max(z, e.zxid)
        return z


@dataclass
class Conn:
    cid: int
    learner: int
    leader: int
    alive: bool = True
    # last scheduled delivery time per direction, for FIFO
    last_to_leader: int = 0
    last_to_learner: int = 0
    dec_to_leader: QuorumStreamDecoder = field(default_factory=QuorumStreamDecoder)
    dec_to_learner: QuorumStreamDecoder = field(default_factory=QuorumStreamDecoder)


@dataclass
class Node:
    sid: int
    voter: bool
    rate: float
    disk: Disk = field(default_factory=Disk)  # volatile view
    durable: Disk = field(default_factory=Disk)
    alive: bool = True
    machine: Leader | Learner | None = None
    conn: Conn | None = None  # learner's link
    hist: list[tuple[int, bytes]] = field(default_factory=list)
    serving: bool = False
    #: the one Ready applier (quorum/zab/applier.py), across this member's roles
    applier: ReadyApplier = field(default_factory=ReadyApplier)
    #: a barrier plan taken and not yet persisted (no other plan is taken meanwhile)
    barrier: Plan | None = None
    #: fsyncs started and completed (numbers), and when the last started one completes
    appended: int = 0
    synced: int = 0
    fsync_done_at: int = 0
    incarnation: int = 0
    zxid: int = 0  # the replica's last applied zxid (lastProcessedZxid)
    group: int = 0
    disk_speed: float = 1.0  # fsync latency multiplier (a slow disk)
    rep: Replica = field(default_factory=workload.fresh_replica)
    #: the role served (the factory's leading or following/observing role), once serving
    role: Role | None = None
    #: established leader: the role's sequencer; serving learner: its write path
    seq: Sequencer | None = None
    path: LearnerWritePath | None = None
    #: established leader: learners' REQUESTs on their way into the sequencer
    requests: LearnerRequests | None = None

    #: SIGSTOPped: everything that reaches the member waits in ``held`` until it resumes
    paused: bool = False
    held: list[Callable[[], None]] = field(default_factory=list)
    #: how far the member's clock was stepped forward (ms)
    clock_offset: int = 0
    #: dynamic reconfig: the committed and the last seen configuration (kept across crashes,
    #: as ZooKeeper's dynamic files); None: reconfig off
    config: QuorumVerifier | None = None
    last_seen: QuorumVerifier | None = None

    def clock(self, now: int) -> int:
        return int(now * self.rate) + self.clock_offset


@dataclass
class SimConfig:
    voters: int = 3
    observers: int = 1
    duration_ms: int = 60_000
    timing: Timing = field(default_factory=lambda: Timing(tick_ms=100, init_limit=10, sync_limit=5))
    write_interval_ms: int = 40
    net_delay_ms: tuple[int, int] = (1, 30)
    fsync_ms: tuple[int, int] = (1, 50)
    link_break_prob: float = 0.002
    crash_interval_ms: int = 4_000
    power_failure_prob: float = 0.3
    partition_interval_ms: int = 6_000
    commit_log_count: int = 20
    high_counter_prob: float = 0.1
    random_leader: bool = False
    clients: int = 5
    session_timeout_ms: tuple[int, int] = (1_500, 4_000)
    #: the leader's globalOutstandingLimit for learners' REQUESTs (small: they wait)
    learner_request_limit: int = 3
    #: packets as bytes through the stream codec, in random chunks; snapshots in the
    #: SNAP payload grammar, read back with trizk.storage.formats.snapshot
    wire: bool = False
    #: mean interval of process pauses (0: none); a pause lasts pause_ms (uniform) of time
    pause_interval_ms: int = 0
    pause_ms: tuple[int, int] = (100, 2_000)
    #: probability that a pause stops the whole ensemble, not one member
    pause_all_prob: float = 0.4
    #: mean interval of forward steps of one member's clock (0: none), of clock_step_ms
    clock_step_interval_ms: int = 0
    clock_step_ms: tuple[int, int] = (100, 3_000)
    #: mean interval of reconfigs (0: reconfig off): the observers leave or join again, or a
    #: new version of the same membership, sent by a client as the super user
    reconfig_interval_ms: int = 0
    #: reconfigs change the voters too: a participant removed or added (a member removed
    #: earlier, or an observer), a participant made an observer (between 3 and 5 voters)
    voter_changes: bool = False


class Violation(AssertionError):
    pass


class Sim:
    def __init__(self, seed: int, cfg: SimConfig | None = None) -> None:
        self.seed = seed
        self.cfg = cfg or SimConfig()
        self.rng = random.Random(seed)
        self.now = 0
        self._q: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        c = self.cfg
        sids = list(range(1, c.voters + c.observers + 1))
        self.voters = frozenset(sids[: c.voters])
        self.quorum = Quorum.majority_of(self.voters)
        self.nodes = {s: Node(s, s in self.voters, self.rng.uniform(0.9, 1.1)) for s in sids}
        #: every member's line (the observers' joiner lines in reconfigs)
        self.lines = {
            s: f"server.{s}=10.0.0.{s}:2888:3888:"
            f"{'participant' if s in self.voters else 'observer'};10.0.0.{s}:2181"
            for s in sids
        }
        if c.reconfig_interval_ms:
            base = parse_config_string("\n".join([*self.lines.values(), "version=0"]))
            for n in self.nodes.values():
                n.config = n.last_seen = base
        #: activations seen, by member: (version, config) in order
        self.activations: dict[int, list[tuple[int, bytes]]] = {s: [] for s in sids}
        #: the one configuration of each version
        self.configs: dict[int, bytes] = {}
        #: versions whose commit was checked against the new configuration's quorum
        self.checked_configs: set[int] = set()
        for n in self.nodes.values():
            n.disk_speed = self.rng.choice((0.2, 1.0, 4.0))
        self.conns: dict[int, Conn] = {}
        self._cid = 0
        self.canonical: dict[int, bytes] = {}
        self.leaders: dict[int, int] = {}  # epoch -> sid
        self.stats: Counter[str] = Counter()
        self.trace: deque[str] = deque(maxlen=60)
        self.sync_targets: dict[int, deque[int]] = {}
        #: the learner machine class (tests swap in deliberately broken ones)
        self.learner_cls: type[Learner] = Learner
        self.ref = Reference()
        #: zxid -> entry of every write answered to a client
        self.acked: dict[int, bytes] = {}
        self.clients = [
            SimClient(i, self.rng.randint(*c.session_timeout_ms)) for i in range(c.clients)
        ]
        #: SNAP side channel: the sender's history model with each snapshot, by link
        self._snap_hists: dict[int, deque[list[tuple[int, bytes]]]] = {}

    # ------------------------------------------------------------------ event loop

    def at(self, delay: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._q, (self.now + max(delay, 0), self._seq, fn))

    def log(self, msg: str) -> None:
        self.trace.append(f"{self.now:7d} {msg}")

    def fail(self, msg: str) -> None:
        raise Violation(f"seed {self.seed}: {msg}\n" + "\n".join(self.trace))

    def run(self) -> Sim:
        c = self.cfg
        for n in self.nodes.values():
            self.at(self.rng.randint(0, 50), lambda n=n: self.look(n))
            self.at(10, lambda n=n: self.tick(n))
        for cl in self.clients:
            self.at(self.rng.randint(0, 200), lambda cl=cl: self.client_step(cl))
        self.at(c.write_interval_ms, self.member_sync)
        self.at(self.rng.randint(1, c.crash_interval_ms), self.chaos_crash)
        self.at(self.rng.randint(1, c.partition_interval_ms), self.chaos_partition)
        if c.reconfig_interval_ms:
            self.at(self.rng.randint(1, c.reconfig_interval_ms), self.chaos_reconfig)
        if c.pause_interval_ms:
            self.at(self.rng.randint(1, c.pause_interval_ms), self.chaos_pause)
        if c.clock_step_interval_ms:
            self.at(self.rng.randint(1, c.clock_step_interval_ms), self.chaos_clock_step)
        # a paused member takes no Ready while stopped, so nothing leaves it (its fsyncs still
        # complete: the kernel writes; their ACKs go out when resume drains it)
        drain = self.drain

        def drain_unless_paused(n: Node) -> None:
            if not (n.alive and n.paused):
                drain(n)

        self.drain = drain_unless_paused  # type: ignore[method-assign]
        steps = 0
        while self._q:
            t, _, fn = heapq.heappop(self._q)
            if t > c.duration_ms:
                break
            self.now = t
            fn()
            steps += 1
            if steps % 500 == 0:
                self.check_prefixes()
                self.check_contents()
        self.check_prefixes()
        self.check_contents()
        return self

    # ------------------------------------------------------------------ membership

    def reachable(self, a: Node, b: Node) -> bool:
        return a.alive and b.alive and a.group == b.group and not a.paused and not b.paused

    def hold(self, n: Node, fn: Callable[[], None]) -> bool:
        """Keep ``fn`` for when ``n`` resumes if it is paused (True), else False."""
        if n.alive and n.paused:
            n.held.append(fn)
            return True
        return False

    def look(self, n: Node) -> None:
        """Election oracle for a LOOKING member (FastLeaderElection stand-in)."""
        if not n.alive or n.machine is not None:
            return
        self.at(self.rng.randint(50, 200), lambda: self.look(n))
        if n.paused:
            return
        if n.synced < n.appended:
            # QuorumPeer: the vote is the last *logged* zxid, so every append of the role that
            # ended must be durable before the member looks
            return
        for m in self.nodes.values():
            if (
                m is not n
                and self.reachable(n, m)
                and isinstance(m.machine, Leader)
                and not m.machine.done
            ):
                self.become_learner(n, m)
                return
        looking = [
            m
            for m in self.nodes.values()
            if (m is n or self.reachable(n, m)) and m.machine is None and m.synced == m.appended
        ]
        if n.config is not None:
            # FastLeaderElection: notifications carry the sender's configuration, and a LOOKING
            # member processes a newer one (processReconfig) before it counts votes
            newest = max((m.config for m in looking if m.config), key=lambda qv: qv.version)
            for m in looking:
                self.adopt(m, newest)
        voters = [m for m in looking if self.votes(m)]
        ids = {m.sid for m in voters}
        if not self.votes(n) or not self.quorum_of(n).contains_quorum(ids):
            return
        if self.cfg.random_leader:
            # not FLE: any looking voter; Zab's discovery alone must keep it safe
            best = self.rng.choice(voters)
        else:
            best = max(voters, key=lambda m: (m.disk.current, m.disk.last_zxid(), m.sid))
        # the vote tracker: a quorum of the committed configuration and, when newer, of the
        # last seen one (FastLeaderElection.getVoteTracker), as the chosen leader counts
        if not self.quorum_of(best).contains_quorum(ids):
            return
        seen = best.last_seen
        if seen is not None and best.config is not None and seen.version > best.config.version:
            if not seen.contains_quorum(ids):
                return
        self.become_leader(best)
        for m in voters:
            if m is not best:
                self.become_learner(m, best)

    def votes(self, n: Node) -> bool:
        """A voter of its own configuration (reconfig on), else of the fixed voters."""
        return n.voter if n.config is None else n.sid in n.config.voting_members

    def observes(self, n: Node) -> bool:
        """An observer of its own configuration; a member in no line of it is a non-voting
        participant (as the ensemble shell)."""
        return not n.voter if n.config is None else n.sid in n.config.observing_members

    def quorum_of(self, n: Node) -> Quorum:
        qv = n.config
        if qv is None:
            return self.quorum
        return Quorum(frozenset(qv.voting_members), qv.contains_quorum)

    def adopt(self, n: Node, qv: QuorumVerifier) -> None:
        """A LOOKING member activates a newer configuration heard in the election."""
        prev = n.config
        if prev is None or qv.version <= prev.version:
            return
        data = self._bytes(qv)
        first = self.configs.setdefault(qv.version, data)
        if first != data:
            self.fail(f"{n.sid}: configuration {qv.version:#x} differs: {first!r} / {data!r}")
        n.config = qv
        if n.last_seen is None or n.last_seen.version < qv.version:
            n.last_seen = qv
        self.activations[n.sid].append((qv.version, data))
        self.stats["election_adoptions"] += 1

    def reload(self, n: Node, upto: int | None = None) -> None:
        """The replica from the disk (snapshot + log up to ``upto``), as LOOKING and TRUNC
        reload it; the replica in memory is kept when the disk's history extends it (the same
        state a reload would build)."""
        d = n.disk
        hist = d.history(upto)
        old = n.hist
        if len(hist) >= len(old) and hist[: len(old)] == old:
            for _, data in hist[len(old) :]:
                workload.apply_entry(n.rep, data)
        else:
            self.stats["rebuilds"] += 1
            if d.snap_body is None:
                n.rep = workload.fresh_replica()
            else:
                n.rep = treeio.replica_from_snapshot_body(d.snap_body, d.snap_zxid)
            for z, data in hist:
                if z > d.snap_zxid:
                    workload.apply_entry(n.rep, data)
        n.hist = hist
        n.zxid = d.last_zxid() if upto is None else upto
        n.serving = False

    def become_leader(self, n: Node) -> None:
        self.reload(n)
        d = n.disk
        log = [e for e in d.log if e.zxid > d.snap_zxid][-self.cfg.commit_log_count :]

        def txnlog(peer: int, log: tuple[Entry, ...] = d.log) -> list[Entry]:
            # FileTxnIterator from peer: must start exactly at peer (ZKDatabase
            # getProposalsFromTxnLog); a log not reaching back that far yields nothing.
            out = [e for e in log if e.zxid >= peer]
            return out if out and out[0].zxid == peer else []

        n.machine = Leader(
            sid=n.sid,
            quorum=self.quorum_of(n),
            timing=self.cfg.timing,
            accepted_epoch=d.accepted,
            current_epoch=d.current,
            last_zxid=n.zxid,
            now_ms=n.clock(self.now),
            committed_log=log,
            txnlog=txnlog,
            commit_log_count=self.cfg.commit_log_count,
            verifier=n.config,
            config_version=n.config.version if n.config is not None else 0,
        )
        if n.config is not None:
            n.machine.last_seen = n.last_seen
            if n.last_seen is not None and n.last_seen.version > n.config.version:
                self.stats["leaders with a reconfig in flight"] += 1
            n.machine.newleader_config = self._bytes(n.last_seen)
        n.applier.start(n.machine)
        self.log(f"{n.sid} LEADING (acc {d.accepted} cur {d.current} last {n.zxid:#x})")
        self.drain(n)

    def become_learner(self, n: Node, leader: Node) -> None:
        self.reload(n)
        d = n.disk
        lt = LearnerType.OBSERVER if self.observes(n) else LearnerType.PARTICIPANT
        n.machine = self.learner_cls(
            sid=n.sid,
            leader=leader.sid,
            learner_type=lt,
            timing=self.cfg.timing,
            accepted_epoch=d.accepted,
            current_epoch=d.current,
            last_logged_zxid=n.zxid,
            now_ms=n.clock(self.now),
            snapshot_zxid=d.snap_zxid,
            config_version=n.config.version if n.config is not None else 0,
        )
        n.applier.start(n.machine)
        self.log(f"{n.sid} {lt.name} of {leader.sid}")
        machine = n.machine
        self.at(self.rng.randint(1, 20), lambda: self.connect(n, leader, machine))

    def connect(self, n: Node, leader: Node, machine: Learner) -> None:
        if n.machine is not machine or machine.done:
            return
        if self.hold(n, lambda: self.connect(n, leader, machine)):
            return
        lm = leader.machine
        if not self.reachable(n, leader) or not isinstance(lm, Leader) or lm.done:
            machine.link_closed("connect failed")
            self.drain(n)
            return
        self._cid += 1
        conn = Conn(self._cid, n.sid, leader.sid)
        self.conns[conn.cid] = conn
        n.conn = conn
        lm.connected(conn.cid)
        machine.connected(n.clock(self.now))
        self.drain(n)

    def end_role(self, n: Node, reason: str) -> None:
        self.log(f"{n.sid} -> LOOKING: {reason}")
        self.stats["role_ends"] += 1
        n.machine = None
        n.applier.stop()
        self.stop_serving(n)
        if n.conn is not None:
            self.break_conn(n.conn)
            n.conn = None
        for conn in list(self.conns.values()):
            if conn.leader == n.sid:
                self.break_conn(conn)
        self.at(self.rng.randint(0, 100), lambda: self.look(n))

    def break_conn(self, conn: Conn) -> None:
        if not conn.alive:
            return
        conn.alive = False
        self.conns.pop(conn.cid, None)
        lrn, ldr = self.nodes[conn.learner], self.nodes[conn.leader]
        self.closed_at_leader(ldr, ldr.machine, conn)
        self.closed_at_learner(lrn, lrn.machine, conn)

    def closed_at_leader(self, ldr: Node, machine: Leader | Learner | None, conn: Conn) -> None:
        if self.hold(ldr, lambda: self.closed_at_leader(ldr, machine, conn)):
            return
        if machine is not ldr.machine:
            return  # the role ended meanwhile
        if isinstance(ldr.machine, Leader):
            ldr.machine.link_closed(conn.cid)
        if ldr.requests is not None:
            ldr.requests.link_closed(conn.cid)

    def closed_at_learner(self, lrn: Node, machine: Leader | Learner | None, conn: Conn) -> None:
        if self.hold(lrn, lambda: self.closed_at_learner(lrn, machine, conn)):
            return
        if lrn.conn is conn and isinstance(lrn.machine, Learner) and lrn.machine is machine:
            lrn.machine.link_closed("connection broken")
            self.at(0, lambda: self.drain(lrn))

    # ------------------------------------------------------------------ network

    def send(self, src: Node, conn: Conn, ev: QuorumPacket | SnapshotPayload) -> None:
        if not conn.alive:
            return
        if self.rng.random() < self.cfg.link_break_prob:
            self.break_conn(conn)
            return
        lo, hi = self.cfg.net_delay_ms
        t = self.now + self.rng.randint(lo, hi)
        to_leader = src.sid == conn.learner
        if to_leader:
            t = max(t, conn.last_to_leader)
            conn.last_to_leader = t
        else:
            t = max(t, conn.last_to_learner)
            conn.last_to_learner = t
        if not self.cfg.wire:
            self.at(t - self.now, lambda: self.deliver(conn, to_leader, ev))
            return
        raw = encode_snapshot_payload(ev.body) if isinstance(ev, SnapshotPayload) else ev.encode()
        i = 0
        while i < len(raw):  # TCP segments: the receiver sees arbitrary chunks
            k = self.rng.randint(1, 64)
            chunk = raw[i : i + k]
            i += k
            self.at(t - self.now, lambda chunk=chunk: self.deliver_bytes(conn, to_leader, chunk))

    def deliver_bytes(self, conn: Conn, to_leader: bool, chunk: bytes) -> None:
        dec = conn.dec_to_leader if to_leader else conn.dec_to_learner
        dec.feed(chunk)
        while conn.alive and (ev := dec.next_event()) is not None:
            self.deliver(conn, to_leader, ev)

    def deliver(self, conn: Conn, to_leader: bool, ev: QuorumPacket | SnapshotPayload) -> None:
        if not conn.alive:
            return
        dst = self.nodes[conn.leader if to_leader else conn.learner]
        if self.hold(dst, lambda: self.deliver(conn, to_leader, ev)):
            return
        m = dst.machine
        if to_leader:
            assert isinstance(ev, QuorumPacket)
            if isinstance(m, Leader):
                m.step(conn.cid, ev, dst.clock(self.now))
        elif isinstance(m, Learner) and dst.conn is conn:
            if isinstance(ev, QuorumPacket) and ev.type in (P.DIFF, P.TRUNC, P.SNAP):
                self.stats[P(ev.type).name] += 1
            m.step(ev, dst.clock(self.now))
        self.drain(dst)

    # ------------------------------------------------------------------ Ready handling

    def drain(self, n: Node) -> None:
        """Hand the machine's Readies through the member's applier (``quorum/zab/applier.py``,
        the one the ensemble shell's pumps use), as the shell does: send, persist, apply,
        advance. A pipelined append goes to the volatile disk at once and the next Ready is
        taken while its fsync runs; a barrier waits for every earlier append's fsync, then
        persists whole and is finished when its own fsync completes."""
        while True:
            m = n.machine
            if m is None or not n.alive or n.barrier is not None:
                return
            plan = n.applier.take()
            if plan is None:
                return
            self.send_plan(n, m, plan)
            if plan.barrier:
                n.barrier = plan
                self.start_barrier(n, m)
                return
            number = None
            if plan.append:
                n.disk.log = n.disk.log + tuple(plan.append)
                number = self.start_fsync(n)
            n.applier.persisted(number)
            self.handle(n, m, plan)
            if n.machine is not m:
                return

    def send_plan(self, n: Node, m: Leader | Learner, plan: Plan) -> None:
        """A plan's messages (none waits for its persistence) and the links it closes."""
        rd = plan.ready
        if isinstance(m, Leader):
            for s in rd.messages:
                conn = self.conns.get(s.link)
                if conn is None:
                    continue
                self.send(n, conn, s.packet)
                if s.packet.type == P.SNAP:
                    self._snap_hists.setdefault(conn.cid, deque()).append(list(n.hist))
                    self.send(n, conn, SnapshotPayload(treeio.snapshot_body(n.rep)))
            for link, _reason in rd.close:
                conn = self.conns.get(link)
                if conn is not None:
                    self.break_conn(conn)
        else:
            for s in rd.messages:
                if n.conn is not None:
                    self.send(n, n.conn, s.packet)

    def start_fsync(self, n: Node, then: Callable[[], None] | None = None) -> int:
        """An fsync of the volatile disk as it is now: it completes a random delay later, after
        every fsync started before it (the sync thread takes them in order); returns its
        number. A crash keeps only what a completed fsync made durable."""
        n.appended += 1
        number, copy, incarnation = n.appended, n.disk.copy(), n.incarnation
        lo, hi = self.cfg.fsync_ms
        done = max(n.fsync_done_at, self.now + self.rng.randint(lo, int(hi * n.disk_speed)))
        n.fsync_done_at = done

        def fsynced() -> None:
            if n.incarnation != incarnation or not n.alive:
                return
            n.durable = copy
            n.synced = number
            n.applier.synced(number)  # the appends' ACKs, oldest first
            if then is not None:
                then()
            elif n.barrier is not None and n.synced == n.appended:
                m = n.machine
                if m is not None:
                    self.start_barrier(n, m)
            self.drain(n)

        self.at(done - self.now, fsynced)
        return number

    def start_barrier(self, n: Node, m: Leader | Learner) -> None:
        """A barrier plan, once every earlier append is durable: its steps on the volatile
        disk, in order, then one fsync; handled when that completes."""
        plan = n.barrier
        if plan is None or n.synced < n.appended:
            return  # the last append's fsync starts it
        for step in plan.steps:
            self.perform(n, step)

        def persisted() -> None:
            n.barrier = None
            n.applier.persisted()
            self.handle(n, m, plan)

        self.start_fsync(n, persisted)

    def perform(self, n: Node, step: Step) -> None:
        """One persistence step on the simulated (volatile) disk and the replica."""
        d = n.disk
        if isinstance(step, AcceptedEpoch):
            d.accepted = step.epoch
        elif isinstance(step, CurrentEpoch):
            d.current = step.epoch
        elif isinstance(step, Wipe):
            d.snap_zxid, d.snap_hist, d.snap_body, d.log = 0, (), None, ()
            n.hist, n.zxid, n.rep = [], 0, workload.fresh_replica()
            self.stats["wipes"] += 1
        elif isinstance(step, Truncate):
            z = step.zxid
            if d.snap_hist and d.snap_hist[-1][0] > z:
                # ZooKeeper keeps snapshots on TRUNC (FileTxnSnapLog.truncateLog) and reloads
                # the newest: one holding txns after z would resurrect them.
                self.fail(f"{n.sid}: TRUNC to {z:#x} below its snapshot's content")
            d.log = tuple(e for e in d.log if e.zxid <= z)
            self.reload(n, z)
        elif isinstance(step, InstallSnapshot):
            assert n.conn is not None
            snap = step.snapshot
            n.hist = self._snap_hists[n.conn.cid].popleft()
            n.rep = treeio.replica_from_snapshot_body(snap.body, snap.zxid)
            # fuzzy: the leader may have applied more by the time it serialised; the
            # PROPOSAL/COMMITs after SNAP replay those (idempotently)
            n.zxid = max(snap.zxid, n.hist[-1][0] if n.hist else 0)
            self.stats["fuzzy_snaps"] += n.zxid > snap.zxid
        elif isinstance(step, TakeSnapshot):
            d.snap_zxid = n.zxid
            d.snap_hist = tuple(n.hist)
            d.snap_body = treeio.snapshot_body(n.rep)
            d.log = ()
        else:
            d.log = d.log + tuple(step.entries)

    def handle(self, n: Node, m: Leader | Learner, plan: Plan) -> None:
        """A persisted plan: apply its committed txns, hand over the rest of the Ready (as
        ``server/shell/ensemble``'s pumps do), then the machine's advance."""
        rd = plan.ready
        self.stats["pipelined"] += not plan.barrier and bool(plan.append)
        self.stats["in_flight_max"] = max(self.stats["in_flight_max"], n.applier.appends_in_flight)
        for e in n.applier.committed():
            if n.hist and e.zxid <= n.hist[-1][0]:
                # fuzzy snapshot already had it (SNAP sent while the commit was in flight)
                if dict(n.hist).get(e.zxid) != e.data:
                    self.fail(f"{n.sid}: replayed {e.zxid:#x} differs")
                continue
            n.hist.append((e.zxid, e.data))
            n.zxid = e.zxid
            hdr, txn = decode_entry(e.data)
            self.apply_txn(n, hdr, txn)
            self.stats["applied"] += 1
            if n.serving:
                self.check_commit(n, e)
                self.check_tree(n)
            self.on_applied(n, hdr)
        if rd.last_seen_config is not None and n.config is not None:
            seen = parse_config_string(rd.last_seen_config.decode())
            if n.last_seen is None or seen.version > n.last_seen.version:
                n.last_seen = seen
        for a in rd.activated:
            self.activate(n, m, a.config, a.leader)
        if isinstance(m, Leader):
            if rd.serving is not None:
                if n.config is not None and n.last_seen is not None:
                    # startZkServer: the last seen configuration. Its reconfig txn is in the
                    # new epoch's history (committed with it), or was lost: ZooKeeper writes
                    # the .next file when the proposal arrives, before the txn is durable, and
                    # a member restarted from it leads with it -- no commit of a txn then
                    seen = n.last_seen
                    logged = any(z == seen.version for z, _ in n.hist)
                    if not logged and seen.version != n.config.version:
                        self.stats["configs activated from .next alone"] += 1
                    self.activate(n, m, self._bytes(seen), None, committed=logged)
                self.on_leader_established(n, m, rd.serving)
            if n.seq is not None and n.requests is not None:
                # a closed link's REQUESTs are dropped (see LearnerRequests)
                self.stats["waiting"] += len(n.requests.waiting) * bool(rd.requests)
                n.requests.waiting.extend(lq for lq in rd.requests if lq[0] in self.conns)
                self.feed_requests(n, m)
                self.stats["touches"] += len(rd.touches)
                now = n.clock(self.now)
                for sid, timeout in rd.touches:
                    n.seq.touch(sid, now, timeout)
                for link, sid, timeout in rd.revalidate:
                    conn = self.conns.get(link)
                    owner = conn.learner if conn is not None else -2 - link
                    m.revalidated(link, sid, n.seq.revalidate_for(sid, timeout, now, owner))
        else:
            if rd.serving is not None and n.config is not None and m.leader_config is not None:
                # UPTODATE: processReconfig of NEWLEADER's configuration -- the leader's last
                # seen one, which may be a reconfig still in flight (as in ZooKeeper's
                # Learner.syncWithLeader): not a commit
                self.activate(n, m, m.leader_config, None, committed=False)
            if rd.serving is not None and not m.done:
                n.serving = True
                roles = RoleFactory(self.core_config(n), n.rep)
                wall = n.clock(self.now)
                if m.learner_type is LearnerType.OBSERVER:
                    learning = roles.observing(m, wall)
                else:
                    learning = roles.following(m, wall)
                n.role, n.path = learning, learning.path
                self.check_history(n, "learner up to date")
                self.check_tree(n)
            if n.path is not None:
                for sid, valid in rd.revalidated:
                    n.path.revalidated(sid, valid)
            if rd.synced:
                targets = self.sync_targets.get(n.conn.cid if n.conn else -1, deque())
                for _ in range(rd.synced):
                    if targets:
                        z = targets.popleft()
                        z = max((c for c in self.canonical if c <= z), default=0)
                        if n.zxid < z:
                            self.fail(f"{n.sid}: sync answered at {n.zxid:#x} < {z:#x}")
                        self.stats["syncs"] += 1
        n.applier.finish()
        if rd.role is not None:
            self.end_role(n, rd.role.reason)

    # ------------------------------------------------------------------ sequencer + checks

    def on_leader_established(self, n: Node, m: Leader, z: int) -> None:
        e = epoch_of(z)
        prev = self.leaders.setdefault(e, n.sid)
        if prev != n.sid:
            self.fail(f"two leaders established in epoch {e}: {prev} and {n.sid}")
        self.stats["leaders"] += 1
        self.log(f"{n.sid} established epoch {e}")
        mine = dict(n.hist)
        # Zab's invariant: epoch e's initial history holds every txn committed in an epoch
        # before e. A leader can be established after a later epoch committed (it was paused
        # with its NEWLEADER ACKs queued, as ZooKeeper's LearnerHandler reads them on resume);
        # it commits nothing then (its learners promised the later epoch), so txns of epochs
        # >= e are not asked of it.
        for zx, data in self.canonical.items():
            if epoch_of(zx) < e and mine.get(zx) != data:
                self.fail(f"new leader {n.sid} lost committed {zx:#x}")
        for zx in self.acked:
            if epoch_of(zx) < e and zx not in mine:
                self.fail(f"new leader {n.sid} lost the acknowledged write {zx:#x}")
        self.check_history(n, "established")
        n.serving = True
        self.check_tree(n)
        # Leader.startZkServer / server/shell/ensemble/leading.py _establish: the factory's leading
        # role, its sequencer starting at e<<32
        now = n.clock(self.now)
        roles = RoleFactory(self.core_config(n), n.rep)
        leading = roles.leading(SimCommitter(self, n, m), z, now, now)
        n.role = leading
        seq = n.seq = leading.sequencer
        hi = self.rng.random() < self.cfg.high_counter_prob
        seq.last_zxid = make_zxid(e, 0xFFFFFFF0) if hi else z
        if n.config is not None:

            def view() -> LeaderConfigView:
                seen = m.last_seen or n.last_seen
                committed = m.verifier or n.config
                assert seen is not None and committed is not None
                return LeaderConfigView(seen, committed.version, m.quorum_synced)

            seq.leader_config = view
        n.requests = LearnerRequests(self.cfg.learner_request_limit)

    def feed_requests(self, n: Node, m: Leader) -> None:
        if n.seq is None or n.requests is None:
            return

        def sync(link: int) -> None:
            self.sync_targets.setdefault(link, deque()).append(m.last_proposed)
            m.process_sync(link)

        def bad(link: int, e: Exception) -> None:
            self.fail(f"{n.sid}: the sequencer refused a REQUEST of link {link}: {e!r}")

        owners = {cid: conn.learner for cid, conn in self.conns.items()}
        now = n.clock(self.now)
        n.requests.feed(m, n.seq, owners, now, now, sync, bad)

    @staticmethod
    def _bytes(qv: QuorumVerifier | None) -> bytes:
        assert qv is not None
        return qv.to_string().encode()

    def activate(
        self,
        n: Node,
        m: Leader | Learner,
        data: bytes,
        designated: int | None,
        committed: bool = True,
    ) -> None:
        """``processReconfig`` as the ensemble shell does it (peer.process_reconfig): a newer
        configuration becomes the member's; one version is one configuration everywhere; a
        learner whose leader or role changes with it ends its role."""
        qv = parse_config_string(data.decode())
        if committed and qv.version not in self.checked_configs:
            self.check_config_quorum(n, qv)
        first = self.configs.setdefault(qv.version, data)
        if first != data:
            self.fail(f"{n.sid}: configuration {qv.version:#x} differs: {first!r} / {data!r}")
        prev = n.config
        if prev is None or qv.version <= prev.version:
            return
        n.config = qv
        if n.last_seen is None or n.last_seen.version < qv.version:
            n.last_seen = qv
        self.activations[n.sid].append((qv.version, data))
        self.stats["activations"] += 1
        if isinstance(m, Leader):
            m.verifier = qv
            if m.last_seen is None or m.last_seen.version < qv.version:
                m.last_seen = qv
            m.config_version = qv.version
            return
        observer = n.sid in qv.observing_members
        was = m.learner_type is LearnerType.OBSERVER
        if prev.java_equals(qv):
            return
        if (designated is not None and designated != m.leader) or observer != was:
            self.stats["reconfig_role_ends"] += 1
            m.reconfigured("changes proposed in reconfig")

    def check_config_quorum(self, n: Node, qv: QuorumVerifier) -> None:
        """The first activation of a reconfig's configuration is its commit: a quorum of the
        *new* configuration's voters must hold the reconfig txn durably (Zab's commit rule
        across a configuration change; the old configuration's quorum is every commit's).
        A version that is no txn's zxid (a NEWLEADER-bumped initial config) is skipped."""
        v = qv.version
        if counter_of(v) == 0:
            return
        holders = {
            m.sid for m in self.nodes.values() if any(z == v for z, _ in m.durable.history())
        }
        if not qv.contains_quorum(holders):
            self.fail(
                f"{n.sid} activates configuration {v:#x}, durable on {sorted(holders)} only: "
                f"no quorum of its voters {sorted(qv.voting_members)}"
            )
        self.checked_configs.add(v)
        self.stats["config_quorum_checks"] += 1

    def chaos_reconfig(self) -> None:
        """A client sends a reconfig as the super user: an observer leaves or joins again, or
        the same membership gets a new version."""
        self.at(self.rng.randint(1, 2 * self.cfg.reconfig_interval_ms), self.chaos_reconfig)
        ups = [c for c in self.clients if c.state == "up" and not self.nodes[c.member].paused]
        if not ups:
            return
        c = self.rng.choice(ups)
        n = self.nodes[c.member]
        ws = n.seq or n.path
        if ws is None or len(c.pending) >= workload.MAX_INFLIGHT or n.config is None:
            return
        if self.cfg.voter_changes:
            req = self.voter_change(n.config)
        else:
            observers = [s for s in self.nodes if s not in self.voters]
            x = self.rng.random()
            if observers and x < 0.4:
                req = r.ReconfigRequest(None, str(self.rng.choice(observers)), None, -1)
            elif observers and x < 0.8:
                s = self.rng.choice(observers)
                req = r.ReconfigRequest(self.lines[s], None, None, -1)
            else:
                req = r.ReconfigRequest(None, None, ",".join(self.lines.values()), -1)
        c.cxid += 1
        frame = r.RequestHeader(c.cxid, OpCode.RECONFIG).encode() + req.encode()
        c.pending.append(c.cxid)
        c.ops[c.cxid] = OpCode.RECONFIG
        self.stats["reconfigs"] += 1
        now = n.clock(self.now)
        ws.submit(
            WriteRequest(c.session, c.cxid, OpCode.RECONFIG, frame, [("super", "")], LOCAL),
            now,
            now,
        )
        self.drain(n)

    def voter_change(self, qv: QuorumVerifier) -> r.ReconfigRequest:
        """A reconfig of ``qv`` (what the client's member knows; the leader preps against
        its own): a participant removed, made an observer or added (a member removed earlier,
        or an observer), an observer removed or added, or the same membership again --
        keeping 3 to 5 voters."""

        def line(s: int, role: str) -> str:
            return f"server.{s}=10.0.0.{s}:2888:3888:{role};10.0.0.{s}:2181"

        voters = sorted(qv.voting_members)
        observers = sorted(qv.observing_members)
        absent = [s for s in self.nodes if s not in qv.members]
        ops = ["same"]
        if len(voters) > 3:
            ops += ["remove voter", "remove voter", "demote voter", "demote voter"]
        if len(voters) < 5 and (observers or absent):
            ops += ["add voter", "add voter"]
        if observers:
            ops.append("remove observer")
        if absent:
            ops.append("add observer")
        op = self.rng.choice(ops)
        self.stats[f"reconfig {op}"] += 1
        if op == "remove voter":
            return r.ReconfigRequest(None, str(self.rng.choice(voters)), None, -1)
        if op == "demote voter":
            return r.ReconfigRequest(line(self.rng.choice(voters), "observer"), None, None, -1)
        if op == "add voter":
            s = self.rng.choice(observers + absent)
            return r.ReconfigRequest(line(s, "participant"), None, None, -1)
        if op == "remove observer":
            return r.ReconfigRequest(None, str(self.rng.choice(observers)), None, -1)
        if op == "add observer":
            return r.ReconfigRequest(line(self.rng.choice(absent), "observer"), None, None, -1)
        lines = [line(s, "participant") for s in voters]
        lines += [line(s, "observer") for s in observers]
        return r.ReconfigRequest(None, None, ",".join(lines), -1)

    def core_config(self, n: Node) -> CoreConfig:
        return CoreConfig(tick_time=self.cfg.timing.tick_ms, server_id=n.sid)

    def apply_txn(self, n: Node, hdr: r.TxnHeader, txn: r.Record | None) -> None:
        """A committed txn into a member's replica through its role's commit sink (the one
        the ensemble shell's pump calls; not serving: the replica alone)."""
        if n.role is not None:
            n.role.commit([Proposal(hdr, txn)], n.clock(self.now))
        else:
            n.rep.apply(hdr, txn)
        if n.requests is not None:
            n.requests.committed(hdr.zxid)

    def stop_serving(self, n: Node) -> None:
        """A role ends (or the member crashed): its clients are dropped."""
        n.serving = False
        n.role = None
        n.seq = None
        n.path = None
        n.requests = None
        for c in self.clients:
            if c.member == n.sid:
                c.drop()

    # ------------------------------------------------------------------ clients

    def member_sync(self) -> None:
        """A client's sync through a learner (answered by the leader's SYNC)."""
        self.at(self.rng.randint(1, 2 * self.cfg.write_interval_ms), self.member_sync)
        n = self.rng.choice(list(self.nodes.values()))
        m = n.machine
        if n.paused:
            return
        if isinstance(m, Learner) and m.forward_request(1, 1, OpCode.SYNC, b"\x00\x00\x00\x01/"):
            self.drain(n)

    def client_step(self, c: SimClient) -> None:
        self.at(self.rng.randint(5, 2 * self.cfg.write_interval_ms), lambda: self.client_step(c))
        if c.state == "down":
            if self.rng.random() < 0.3:
                self.client_connect(c)
            return
        n = self.nodes[c.member]
        now = n.clock(self.now)
        if c.state != "up" or n.paused:
            return
        ws = n.seq or n.path
        assert ws is not None, (c, n.sid)
        ws.touch(c.session, now)
        if isinstance(n.machine, Learner) and n.machine.done:
            return  # the role is ending: the client is about to be dropped
        if len(c.pending) < workload.MAX_INFLIGHT and self.rng.random() < 0.8:
            op, frame = workload.next_request(self.rng, c, n.rep)
            c.pending.append(c.cxid)
            c.ops[c.cxid] = op
            self.stats["requests"] += 1
            ws.submit(WriteRequest(c.session, c.cxid, op, frame, [], LOCAL), now, now)
        self.drain(n)

    def client_connect(self, c: SimClient) -> None:
        serving = [n for n in self.nodes.values() if n.alive and not n.paused and (n.seq or n.path)]
        if not serving:
            return
        n = self.rng.choice(serving)
        ws = n.seq or n.path
        assert ws is not None
        now = n.clock(self.now)
        c.member = n.sid
        c.conn_no += 1
        if c.session == 0:
            c.state = "creating"
            c.session = ws.create_session(c.timeout, now, now)
            c.pending.append(0)
            c.ops[0] = OpCode.CREATESESSION
            self.stats["sessions"] += 1
        else:
            c.state = "revalidating"
            conn_no = c.conn_no

            def done(valid: bool | None) -> None:
                if c.conn_no != conn_no:
                    return
                if valid:
                    c.state = "up"
                    self.stats["reconnects"] += 1
                else:
                    if valid is False:
                        self.stats["expired"] += 1
                        c.session = 0
                    c.drop()

            ws.revalidate(c.session, c.timeout, now, done)
        self.drain(n)

    def on_applied(self, n: Node, hdr: r.TxnHeader) -> None:
        """Replies: the txn answers its client if connected here (FrontEnd.on_committed)."""
        for c in self.clients:
            if c.session != hdr.clientId or c.session == 0:
                continue
            if hdr.type == OpCode.CLOSESESSION:
                c.session = 0  # expired or closed: a new session next time
                c.drop()
                continue
            if c.member != n.sid or hdr.cxid not in c.ops:
                continue
            if c.pending[0] != hdr.cxid:
                self.fail(
                    f"client {c.no} (session {c.session:#x}) got the reply to cxid "
                    f"{hdr.cxid} before {list(c.pending)}"
                )
            c.pending.popleft()
            del c.ops[hdr.cxid]
            if hdr.type == OpCode.CREATESESSION:
                c.state = "up"
            self.acked.setdefault(hdr.zxid, n.hist[-1][1])
            self.stats["acked"] += 1

    def tick(self, n: Node) -> None:
        self.at(self.rng.randint(5, 25), lambda: self.tick(n))
        self.tick_once(n)

    def tick_once(self, n: Node) -> None:
        """One wake-up of the member's tickers (Zab's, the sequencer's session expiry)."""
        if n.alive and not n.paused and n.machine is not None:
            now = n.clock(self.now)
            n.machine.tick(now)
            if n.seq is not None:
                n.seq.tick(now, now)
            self.drain(n)

    # ------------------------------------------------------------------ checks

    def commit_canonical(self, zxid: int, data: bytes) -> bytes:
        """Record a committed txn; the reference replica applies them in zxid order."""
        prev = self.canonical.get(zxid)
        if prev is not None:
            return prev
        self.canonical[zxid] = data
        try:
            self.ref.add(zxid, data)
        except HistoryError as e:
            self.fail(str(e))
        return data

    def check_commit(self, n: Node, e: Entry) -> None:
        prev = self.commit_canonical(e.zxid, e.data)
        if prev != e.data:
            self.fail(f"{n.sid} applied {e.zxid:#x}={e.data!r}, committed was {prev!r}")

    def check_history(self, n: Node, why: str) -> None:
        for zx, data in n.hist:
            prev = self.commit_canonical(zx, data)
            if prev != data:
                self.fail(f"{n.sid} ({why}) has {zx:#x}={data!r}, committed {prev!r}")

    def advance_reference(self, upto: int) -> None:
        """Apply the committed txns up to ``upto`` to the reference; per-session FIFO: each
        session's cxids strictly increase along the committed history."""
        for hdr in self.ref.advance(upto):
            self.stats[f"txn {OpCode(hdr.type).name}"] += 1
            if hdr.cxid == 0:
                continue  # createSession, an expiry's closeSession: the server's own
            last = self.ref.last_cxid.get(hdr.clientId, 0)
            if hdr.cxid <= last:
                self.fail(
                    f"session {hdr.clientId:#x}: cxid {hdr.cxid} committed at {hdr.zxid:#x} "
                    f"after cxid {last} (submit order broken)"
                )
            self.ref.last_cxid[hdr.clientId] = hdr.cxid

    def check_tree(self, n: Node) -> None:
        """The member's tree digest equals the committed history's at its zxid."""
        self.advance_reference(n.zxid)
        want = self.ref.digest_at(n.zxid)
        got = n.rep.tree.digest
        if got != want:
            self.fail(f"{n.sid} at {n.zxid:#x}: tree digest {got:#x}, committed history {want:#x}")

    def check_contents(self) -> None:
        """Whole states: serving members at equal zxid are equal, and equal the reference."""
        serving = [n for n in self.nodes.values() if n.alive and n.serving]
        if not serving:
            return
        self.advance_reference(max(n.zxid for n in serving))
        by_zxid: dict[int, tuple[int, Any]] = {}
        if self.ref.zxid:
            by_zxid[self.ref.zxid] = (0, workload.content(self.ref.rep))
        for n in serving:
            got = workload.content(n.rep)
            first = by_zxid.setdefault(n.zxid, (n.sid, got))
            if first[1] != got:
                who = f"member {first[0]}" if first[0] else "the committed history"
                self.fail(f"{n.sid} at {n.zxid:#x}: state differs from {who}'s")
        self.stats["content_checks"] += 1

    def check_prefixes(self) -> None:
        committed = sorted(self.canonical)
        for n in self.nodes.values():
            if not (n.alive and n.serving):
                continue
            last = n.zxid
            want = [z for z in committed if z <= last]
            got = [z for z, _ in n.hist]
            if got != want:
                missing = sorted(set(want) - set(got))[:5]
                extra = sorted(set(got) - set(want))[:5]
                self.fail(
                    f"{n.sid} history is not the committed prefix: missing "
                    f"{[hex(z) for z in missing]} extra {[hex(z) for z in extra]}"
                )

    # ------------------------------------------------------------------ chaos

    def chaos_crash(self) -> None:
        self.at(self.rng.randint(1, self.cfg.crash_interval_ms), self.chaos_crash)
        nodes = list(self.nodes.values())
        if self.rng.random() < self.cfg.power_failure_prob:
            # a correlated failure (power loss): several members at the same instant
            victims = self.rng.sample(nodes, self.rng.randint(2, len(nodes)))
        else:
            victims = [self.rng.choice(nodes)]
        for n in victims:
            if n.alive:
                self.crash(n)

    def crash(self, n: Node) -> None:
        self.log(f"{n.sid} CRASH")
        self.stats["crashes"] += 1
        n.alive = False
        n.paused = False
        n.held.clear()
        if n.machine is not None:
            n.machine = None
            if n.conn is not None:
                self.break_conn(n.conn)
            for conn in list(self.conns.values()):
                if conn.leader == n.sid:
                    self.break_conn(conn)
        n.conn = None
        # what was in flight is gone: a fresh applier, no fsync pending (the incarnation)
        n.applier = ReadyApplier()
        n.barrier = None
        n.appended = n.synced = 0
        n.fsync_done_at = self.now
        self.stop_serving(n)
        n.incarnation += 1
        self.at(self.rng.randint(100, 2000), lambda: self.restart(n))

    def restart(self, n: Node) -> None:
        n.disk = n.durable.copy()
        d = n.disk
        last = d.last_zxid()
        if not (d.accepted >= d.current >= epoch_of(last)):
            self.fail(f"{n.sid}: epoch files {d.accepted}/{d.current} vs last zxid {last:#x}")
        n.alive = True
        self.reload(n)
        self.log(f"{n.sid} RESTART last {last:#x}")
        self.look(n)

    def chaos_partition(self) -> None:
        self.at(self.rng.randint(1, self.cfg.partition_interval_ms), self.chaos_partition)
        nodes = list(self.nodes.values())
        if self.rng.random() < 0.5:
            for n in nodes:
                n.group = 0
            self.log("HEAL")
            return
        for n in nodes:
            n.group = self.rng.randint(0, 1)
        self.stats["partitions"] += 1
        self.log("PARTITION " + " ".join(f"{n.sid}:{n.group}" for n in nodes))
        for conn in list(self.conns.values()):
            if self.nodes[conn.learner].group != self.nodes[conn.leader].group:
                self.break_conn(conn)

    def chaos_pause(self) -> None:
        """SIGSTOP one member or the whole ensemble; SIGCONT later (all together)."""
        self.at(self.rng.randint(1, self.cfg.pause_interval_ms), self.chaos_pause)
        live = [n for n in self.nodes.values() if n.alive and not n.paused]
        if not live:
            return
        if self.rng.random() < self.cfg.pause_all_prob:
            victims = live
        else:
            victims = [self.rng.choice(live)]
        for n in victims:
            self.pause(n)
        incarnations = [(n, n.incarnation) for n in victims]

        def resume_all() -> None:
            for n, inc in incarnations:
                if n.incarnation == inc:
                    self.resume(n)

        self.at(self.rng.randint(*self.cfg.pause_ms), resume_all)

    def pause(self, n: Node) -> None:
        self.log(f"{n.sid} PAUSE")
        self.stats["pauses"] += 1
        n.paused = True

    def resume(self, n: Node) -> None:
        """SIGCONT: the ticker and the readers wake together, in either order."""
        if not n.paused:
            return
        self.log(f"{n.sid} RESUME ({len(n.held)} held)")
        n.paused = False
        held, n.held = n.held, []
        tick_first = self.rng.random() < 0.5
        if tick_first:
            self.tick_once(n)
        for fn in held:
            fn()
        if not tick_first:
            self.tick_once(n)
        self.drain(n)

    def chaos_clock_step(self) -> None:
        self.at(self.rng.randint(1, self.cfg.clock_step_interval_ms), self.chaos_clock_step)
        n = self.rng.choice(list(self.nodes.values()))
        self.step_clock(n, self.rng.randint(*self.cfg.clock_step_ms))

    def step_clock(self, n: Node, ms: int) -> None:
        """Move ``n``'s monotonic clock ``ms`` forward; its tickers wake at once."""
        self.log(f"{n.sid} CLOCK +{ms}")
        self.stats["clock_steps"] += 1
        n.clock_offset += ms
        self.tick_once(n)


def run_seed(seed: int, **kw: Any) -> Sim:
    return Sim(seed, SimConfig(**kw)).run()
