"""The Zab learner (follower or observer) as a pure state machine.

Theory (``Learner.registerWithLeader`` / ``syncWithLeader``, ``Follower``, ``Observer``)
-----------------------------------------------------------------------------------------
::

    connected()        -> FOLLOWERINFO|OBSERVERINFO(zxid = acceptedEpoch<<32, LearnerInfo)
    LEADERINFO(e<<32)  -> e > acceptedEpoch: persist acceptedEpoch=e, then (advance)
                            ACKEPOCH(lastLoggedZxid, int currentEpoch)
                          e == acceptedEpoch: ACKEPOCH(lastLoggedZxid, -1) at once
                          e <  acceptedEpoch: give up (LOOKING)
    DIFF | TRUNC(z) | SNAP(z) + payload        first packet after ACKEPOCH, else give up
    PROPOSAL/COMMIT/INFORM* (held)             the leader's history beyond ours
    NEWLEADER(e<<32)   -> persist currentEpoch=e, (snapshot after SNAP/TRUNC), log the held
                          proposals, then (advance) ACK(e<<32) and an ACK per logged proposal
    UPTODATE           -> serve clients; ACK(e<<32)
    BROADCAST: PROPOSAL -> log, then (advance) ACK(zxid)   [followers]
               COMMIT   -> must match the oldest pending proposal, else give up
                           (``FollowerZooKeeperServer.commit`` exits the JVM)
               INFORM   -> log and apply                   [observers]
               PING     -> PING(same zxid, same authinfo, touches since the last ping)
               REVALIDATE / SYNC answers -> Ready.revalidated / Ready.synced

Invariants
----------
* Nothing is sent between ACKEPOCH and the NEWLEADER ACK (a Java leader requires the first
  packet after NEWLEADER to be that ACK), and the NEWLEADER ACK precedes every proposal ACK.
* A proposal is ACKed only after ``advance`` reports its entry durable; acceptedEpoch is durable
  before ACKEPOCH promises it, currentEpoch before the NEWLEADER ACK.
* Committed entries leave in zxid order, each after its entry was handed out for logging.
* Proposal zxids only grow; a packet that breaks the protocol ends the machine (LOOKING) with
  a reason, never an exception out of ``step``.
* Read timeout: initLimit ticks until NEWLEADER, syncLimit ticks afterwards (``Learner``),
  counted in passes of the learner's own ticker (every tickTime/2, no catch-up), not read off
  the clock. ZooKeeper's learner reads with ``SO_TIMEOUT``; after a pause of the process (a
  SIGSTOP, a VM freeze) that read returns at once with the PINGs already queued in its socket,
  so a learner is never declared cut off by a gap it slept through. Here a pause or a jump of
  the clock is one pass, and the packets queued meanwhile reach ``step`` before the limit is
  reached; a leader that really stays silent is given up after limit ticks (between limit and
  limit + 1/2 ticks of time after its last packet, as the read timeout's limit * tickTime).
"""

from __future__ import annotations

import struct
from collections import deque
from enum import Enum, auto

from mypy_extensions import mypyc_attr

from trizk.jute.primitives import JuteDecodeError
from trizk.jute.records import Id, QuorumPacket
from trizk.quorum.zab.zab import (
    Activation,
    Entry,
    LearnerType,
    Ready,
    ReadyOutbox,
    RoleChange,
    Send,
    ServerState,
    SnapshotIn,
    SyncMode,
    Timing,
    ZabError,
    ZabState,
    reconfig_config,
)
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamError,
    SnapshotPayload,
    decode_int,
    encode_ackepoch_data,
    encode_learner_info,
    encode_touches,
    epoch_of,
    make_zxid,
    packet,
    packet_name,
    zxid_hex,
)

P = PacketType


class _Phase(Enum):
    CONNECTING = auto()
    WAIT_LEADERINFO = auto()
    WAIT_EPOCH_PERSIST = auto()
    WAIT_SYNC_MODE = auto()
    WAIT_SNAPSHOT = auto()
    SYNCING = auto()  # DIFF/TRUNC/SNAP seen, until NEWLEADER
    WAIT_UPTODATE = auto()
    BROADCAST = auto()
    DONE = auto()


# (Compiled, open to Python subclasses: the simulation's tests break it on purpose that way.)
@mypyc_attr(allow_interpreted_subclasses=True)
class Learner(ReadyOutbox):
    """A follower (``learner_type=PARTICIPANT``) or an observer, talking to one leader."""

    def __init__(
        self,
        *,
        sid: int,
        leader: int,
        learner_type: LearnerType,
        timing: Timing,
        accepted_epoch: int,
        current_epoch: int,
        last_logged_zxid: int,
        now_ms: int,
        config_version: int = 0,
        snapshot_zxid: int = 0,
    ) -> None:
        self.sid = sid
        self.leader = leader
        self.learner_type = learner_type
        self.timing = timing
        self.accepted_epoch = accepted_epoch
        self.current_epoch = current_epoch
        self.last_logged = last_logged_zxid
        self.config_version = config_version
        #: zxid of the newest durable snapshot (what a TRUNC cannot cut into)
        self.snapshot_zxid = snapshot_zxid
        self.state = (
            ServerState.FOLLOWING
            if learner_type is LearnerType.PARTICIPANT
            else ServerState.OBSERVING
        )
        self.zab_state = ZabState.DISCOVERY
        self.sync_mode = SyncMode.NONE
        self.new_epoch = -1
        self.leader_config: bytes | None = None
        self._phase = _Phase.CONNECTING
        #: half-tick passes of ``tick`` so far, the time (ms) from which the next one runs, and
        #: the pass during which the leader was last heard from
        self._half_ticks = 0
        self._next_half_tick = now_ms
        self._heard_at = 0
        self._rd = Ready()
        #: proposals received during sync, logged at NEWLEADER
        self._held: list[Entry] = []
        #: zxids committed during sync, released at NEWLEADER
        self._held_commits: list[int] = []
        #: proposals handed out for logging, not yet committed (FollowerZooKeeperServer.pendingTxns)
        self._pending: deque[Entry] = deque()
        self._last_queued = last_logged_zxid
        self._snap_zxid = 0
        self._touches: dict[int, int] = {}

    # ------------------------------------------------------------------ inputs

    @property
    def observer(self) -> bool:
        return self.learner_type is LearnerType.OBSERVER

    @property
    def done(self) -> bool:
        return self._phase is _Phase.DONE

    def connected(self, now_ms: int) -> None:
        """The TCP connection to the leader is up: register (``Learner.registerWithLeader``)."""
        if self._phase is not _Phase.CONNECTING:
            return
        self._heard()
        kind = P.OBSERVERINFO if self.observer else P.FOLLOWERINFO
        info = encode_learner_info(self.sid, self.config_version)
        self._send(packet(kind, make_zxid(self.accepted_epoch, 0), info))
        self._phase = _Phase.WAIT_LEADERINFO

    def step(self, event: QuorumPacket | SnapshotPayload, now_ms: int) -> None:
        """One packet (or the SNAP payload) from the leader."""
        if self._phase is _Phase.DONE:
            return
        self._heard()
        try:
            if isinstance(event, SnapshotPayload):
                self._on_snapshot(event)
            else:
                self._on_packet(event)
        except (ZabError, QuorumStreamError, JuteDecodeError, struct.error) as e:
            self._finish(f"{type(e).__name__}: {e}")

    def tick(self, now_ms: int) -> None:
        """Read timeout: initLimit ticks until NEWLEADER, then syncLimit (``Learner``)."""
        if self._phase in (_Phase.DONE, _Phase.CONNECTING):
            return
        if now_ms < self._next_half_tick:
            return
        # one pass per wake-up, never a catch-up (see the module's docstring)
        self._next_half_tick = now_ms + max(self.timing.tick_ms // 2, 1)
        self._half_ticks += 1
        if self._half_ticks > self._heard_at + 2 * self._limit():
            ticks = self._limit()
            self._finish(
                f"read timeout: nothing from leader {self.leader} for {ticks} ticks "
                f"({ticks * self.timing.tick_ms} ms)"
            )

    def _limit(self) -> int:
        """Ticks the leader may stay silent: initLimit until NEWLEADER, syncLimit after."""
        if self._phase in (_Phase.WAIT_UPTODATE, _Phase.BROADCAST):
            return self.timing.sync_limit
        return self.timing.init_limit

    def _heard(self) -> None:
        self._heard_at = self._half_ticks

    def bytes_arrived(self) -> None:
        """Bytes came from the leader, whole packets or not (a SNAP payload arrives over many
        reads): the read timeout counts from now, as ``SO_TIMEOUT`` on ZooKeeper's socket
        counts only the time a read waits for bytes."""
        if self._phase is not _Phase.DONE:
            self._heard()

    def link_closed(self, reason: str) -> None:
        self._finish(f"connection to leader closed: {reason}")

    def touch(self, session_id: int, timeout: int) -> None:
        """A local client session was active; reported with the next PING reply."""
        self._touches[session_id] = timeout

    def forward_request(
        self,
        session_id: int,
        cxid: int,
        op: int,
        body: bytes,
        authinfo: tuple[Id, ...] | None = None,
    ) -> bool:
        """Forward a client write (or sync, op 9) to the leader (``Learner.request``)."""
        if self._phase is not _Phase.BROADCAST:
            return False
        data = struct.pack(">qii", session_id, cxid, op) + body
        self._send(QuorumPacket(int(P.REQUEST), -1, data, authinfo))
        return True

    def revalidate(self, session_id: int, timeout: int) -> bool:
        """Ask the leader whether a reconnecting client's session is valid."""
        if self._phase is not _Phase.BROADCAST:
            return False
        self._send(packet(P.REVALIDATE, -1, struct.pack(">qi", session_id, timeout)))
        return True

    # ------------------------------------------------------------------ Ready

    def advance(self, rd: Ready) -> None:
        """``rd``'s persistence is durable: send what it promised."""
        if self._phase is _Phase.DONE:
            return
        if rd.accepted_epoch is not None and self._phase is _Phase.WAIT_EPOCH_PERSIST:
            self._send(
                packet(P.ACKEPOCH, self.last_logged, encode_ackepoch_data(self.current_epoch))
            )
            self._phase = _Phase.WAIT_SYNC_MODE
        if rd.current_epoch is not None:
            self._send(packet(P.ACK, make_zxid(self.new_epoch, 0)))
        if not self.observer:
            for e in rd.entries:
                self._send(packet(P.ACK, e.zxid))

    # ------------------------------------------------------------------ packets

    def _on_packet(self, qp: QuorumPacket) -> None:
        ph = self._phase
        if ph is _Phase.WAIT_LEADERINFO:
            self._on_leaderinfo(qp)
        elif ph is _Phase.WAIT_SYNC_MODE:
            self._on_sync_mode(qp)
        elif ph is _Phase.WAIT_SNAPSHOT:
            raise ZabError(f"{packet_name(qp.type)} where the snapshot was expected")
        elif ph in (_Phase.SYNCING, _Phase.WAIT_UPTODATE):
            self._on_sync_packet(qp)
        elif ph is _Phase.BROADCAST:
            self._on_broadcast(qp)
        else:
            raise ZabError(f"unexpected {packet_name(qp.type)} in {ph.name}")

    def _on_leaderinfo(self, qp: QuorumPacket) -> None:
        if qp.type != P.LEADERINFO:
            # A pre-Zab-1.0 leader would send NEWLEADER here; ZooKeeper 3.8 never does.
            raise ZabError(f"first packet should have been LEADERINFO, got {packet_name(qp.type)}")
        decode_int(qp.data)  # protocol version
        e = epoch_of(qp.zxid)
        self.new_epoch = e
        if e > self.accepted_epoch:
            self.accepted_epoch = e
            self._rd.accepted_epoch = e
            self._phase = _Phase.WAIT_EPOCH_PERSIST
        elif e == self.accepted_epoch:
            self._send(packet(P.ACKEPOCH, self.last_logged, encode_ackepoch_data(-1)))
            self._phase = _Phase.WAIT_SYNC_MODE
        else:
            raise ZabError(f"Leaders epoch, {e} is less than accepted epoch, {self.accepted_epoch}")
        self.zab_state = ZabState.SYNCHRONIZATION

    def _on_sync_mode(self, qp: QuorumPacket) -> None:
        if qp.type == P.DIFF:
            self.sync_mode = SyncMode.DIFF
            self._phase = _Phase.SYNCING
        elif qp.type == P.TRUNC:
            self.sync_mode = SyncMode.TRUNC
            if qp.zxid > self.last_logged:
                raise ZabError(f"TRUNC to {zxid_hex(qp.zxid)} beyond our last zxid")
            if qp.zxid < self.snapshot_zxid:
                # Our newest snapshot was taken at a NEWLEADER whose leader never became
                # established (its history beyond z was never committed). ZooKeeper
                # truncates the log and reloads that snapshot, resurrecting those txns
                # (FileTxnSnapLog.truncateLog keeps snapshots). We cannot rebuild state(z):
                # drop our data and rejoin empty. Safe: we ACKed nothing of this epoch yet,
                # and all we hold up to z is committed in the leader's history.
                self._rd.wipe = True
                self.last_logged = 0
                raise ZabError(
                    f"TRUNC to {zxid_hex(qp.zxid)} below our snapshot "
                    f"{zxid_hex(self.snapshot_zxid)}: local data wiped, rejoining empty"
                )
            self._rd.truncate_to = qp.zxid
            self.last_logged = self._last_queued = qp.zxid
            self._phase = _Phase.SYNCING
        elif qp.type == P.SNAP:
            self.sync_mode = SyncMode.SNAP
            self._snap_zxid = qp.zxid
            self._phase = _Phase.WAIT_SNAPSHOT
        else:
            # Learner.syncWithLeader: "Unexpected packet" -> the JVM exits.
            raise ZabError(f"expected DIFF/TRUNC/SNAP, got {packet_name(qp.type)}")

    def _on_snapshot(self, snap: SnapshotPayload) -> None:
        if self._phase is not _Phase.WAIT_SNAPSHOT:
            raise ZabError("snapshot payload without SNAP")
        self._rd.snapshot_in = SnapshotIn(self._snap_zxid, snap.body)
        self.last_logged = self._last_queued = self._snap_zxid
        self._phase = _Phase.SYNCING

    def _proposal(self, qp: QuorumPacket) -> Entry:
        if qp.data is None:
            raise ZabError("PROPOSAL without data")
        if qp.zxid <= self._last_queued:
            raise ZabError(f"proposal {zxid_hex(qp.zxid)} not after {zxid_hex(self._last_queued)}")
        self._last_queued = qp.zxid
        config = reconfig_config(qp.data)
        if config is not None:
            # Follower.processPacket / syncWithLeader: setLastSeenQuorumVerifier(qv, true)
            self._rd.last_seen_config = config
        return Entry(qp.zxid, qp.data)

    def _activate(self, e: Entry, qp: QuorumPacket) -> None:
        """COMMITANDACTIVATE / INFORMANDACTIVATE of reconfig ``e``: the designated leader is
        the packet's first long."""
        if qp.data is None or len(qp.data) < 8:
            raise ZabError(f"{packet_name(qp.type)} without a designated leader")
        config = reconfig_config(e.data)
        if config is None:
            raise ZabError(f"{packet_name(qp.type)} {zxid_hex(qp.zxid)} is not a reconfig")
        (leader,) = struct.unpack_from(">q", qp.data)
        self._rd.activated.append(Activation(e.zxid, config, leader))

    def _informed(self, qp: QuorumPacket) -> Entry:
        """INFORMANDACTIVATE's entry: the txn after the designated leader's long."""
        if qp.data is None or len(qp.data) < 8:
            raise ZabError("INFORMANDACTIVATE without a designated leader")
        e = self._proposal(QuorumPacket(int(P.INFORM), qp.zxid, qp.data[8:], qp.authinfo))
        return e

    def reconfigured(self, reason: str) -> None:
        """The member's role or leader changed with an activated configuration: the role
        ends (``Follower``: "changes proposed in reconfig")."""
        self._finish(reason)

    def _on_sync_packet(self, qp: QuorumPacket) -> None:
        t = qp.type
        held = self._phase is _Phase.SYNCING
        if t == P.PROPOSAL:
            e = self._proposal(qp)
            if held:
                self._held.append(e)
            else:
                self._log(e)
        elif t == P.COMMIT:
            if held:
                self._held_commits.append(qp.zxid)
            else:
                self._commit(qp.zxid)
        elif t == P.INFORM:
            e = self._proposal(qp)
            if held:
                self._held.append(e)
                self._held_commits.append(e.zxid)
            else:
                self._log(e)
                self._commit(e.zxid)
        elif t == P.COMMITANDACTIVATE:
            # Learner.syncWithLeader: activated at once (the txn is committed with the others)
            found = [x for x in (*self._held, *self._pending) if x.zxid == qp.zxid]
            if not found:
                raise ZabError(f"COMMITANDACTIVATE {zxid_hex(qp.zxid)} of no proposal")
            self._activate(found[0], qp)
            if held:
                self._held_commits.append(qp.zxid)
            else:
                self._commit(qp.zxid)
        elif t == P.INFORMANDACTIVATE:
            e = self._informed(qp)
            self._activate(e, qp)
            if held:
                self._held.append(e)
                self._held_commits.append(e.zxid)
            else:
                self._log(e)
                self._commit(e.zxid)
        elif t == P.NEWLEADER:
            if not held:
                raise ZabError("second NEWLEADER")
            self._on_newleader(qp)
        elif t == P.UPTODATE:
            if held:
                raise ZabError("UPTODATE before NEWLEADER (pre-Zab-1.0 leader)")
            self._phase = _Phase.BROADCAST
            self.zab_state = ZabState.BROADCAST
            self._rd.serving = make_zxid(self.new_epoch, 0)
            self._send(packet(P.ACK, make_zxid(self.new_epoch, 0)))
        # anything else (PING before UPTODATE) is ignored, as Learner.syncWithLeader does

    def _on_newleader(self, qp: QuorumPacket) -> None:
        if epoch_of(qp.zxid) != self.new_epoch:
            raise ZabError(f"NEWLEADER {zxid_hex(qp.zxid)} is not of epoch {self.new_epoch}")
        if qp.data is not None and len(qp.data) > 1:
            self.leader_config = qp.data
            # Learner.syncWithLeader: setLastSeenQuorumVerifier(qv, true) at NEWLEADER
            self._rd.last_seen_config = qp.data
        if self.sync_mode is not SyncMode.DIFF:
            self._rd.take_snapshot = True
        self.current_epoch = self.new_epoch
        self._rd.current_epoch = self.new_epoch
        for e in self._held:
            self._log(e)
        self._held = []
        for z in self._held_commits:
            self._commit(z)
        self._held_commits = []
        self._phase = _Phase.WAIT_UPTODATE

    def _log(self, e: Entry) -> None:
        self._rd.entries.append(e)
        self._pending.append(e)
        self.last_logged = e.zxid

    def _commit(self, zxid: int) -> None:
        if not self._pending:
            return  # FollowerZooKeeperServer.commit: "Committing ... without seeing txn" (warn)
        head = self._pending[0]
        if head.zxid != zxid:
            raise ZabError(
                f"Committing zxid {zxid_hex(zxid)} but next pending txn {zxid_hex(head.zxid)}"
            )
        self._rd.committed.append(self._pending.popleft())

    def _on_broadcast(self, qp: QuorumPacket) -> None:
        t = qp.type
        if t == P.PING:
            data = encode_touches(self._touches)
            self._touches = {}
            self._send(QuorumPacket(int(P.PING), qp.zxid, data, qp.authinfo))
        elif t == P.PROPOSAL and not self.observer:
            self._log(self._proposal(qp))
        elif t == P.COMMIT and not self.observer:
            self._commit(qp.zxid)
        elif t == P.INFORM and self.observer:
            e = self._proposal(qp)
            self._log(e)
            self._commit(e.zxid)
        elif t == P.REVALIDATE:
            if qp.data is None or len(qp.data) < 9:
                raise ZabError("short REVALIDATE answer")
            session_id, valid = struct.unpack_from(">q?", qp.data)
            self._rd.revalidated.append((session_id, valid))
        elif t == P.SYNC:
            self._rd.synced += 1
        elif t == P.COMMITANDACTIVATE and not self.observer:
            # Follower.processPacket: the pending head is the reconfig
            if not self._pending or self._pending[0].zxid != qp.zxid:
                raise ZabError(f"COMMITANDACTIVATE {zxid_hex(qp.zxid)} is not the next pending")
            self._activate(self._pending[0], qp)
            self._commit(qp.zxid)
        elif t == P.INFORMANDACTIVATE and self.observer:
            e = self._informed(qp)
            self._log(e)
            self._commit(e.zxid)
            self._activate(e, qp)
        # UPTODATE again, or PROPOSAL/COMMIT at an observer: ignored with a warning in Java

    # ------------------------------------------------------------------ helpers

    def _send(self, qp: QuorumPacket) -> None:
        self._rd.messages.append(Send(self.leader, qp))

    def _finish(self, reason: str) -> None:
        if self._phase is _Phase.DONE:
            return
        self._phase = _Phase.DONE
        self.zab_state = ZabState.ELECTION
        self.state = ServerState.LOOKING
        self._rd.role = RoleChange(ServerState.LOOKING, reason)
