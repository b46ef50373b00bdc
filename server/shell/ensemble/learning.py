"""FOLLOWING / OBSERVING: the learner's pump.

:class:`LearnerPump` reads the leader's link into the :class:`~trizk.quorum.zab.learner.Learner`
machine and handles its Readies; once synced (UPTODATE) the member serves the
:class:`~trizk.server.roles.learning.Learning` role.
"""

from __future__ import annotations

import logging

from trizk.quorum.zab.applier import Plan, decode_entry
from trizk.quorum.zab.learner import Learner
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    SnapshotPayload,
    StreamEvent,
    encode_packet,
    epoch_of,
)
from trizk.server.roles.learning import Learning
from trizk.server.shell.ensemble.hosts import RolePeer
from trizk.server.shell.ensemble.leading import txn_time
from trizk.server.shell.ensemble.links import Link, read_link
from trizk.server.shell.ensemble.pumping import Pump
from trizk.server.shell.ensemble.testhook import FollowerHold
from trizk.server.writes.committer import Proposal

__all__ = ["LearnerPump"]

log = logging.getLogger("trizk.quorum")


class LearnerPump(Pump):
    """FOLLOWING / OBSERVING: the leader link's reader and the pump (:class:`~.pumping.Pump`:
    the leader's packets are handled in the reader's task); the
    :class:`~trizk.server.roles.learning.Learning` role once synced."""

    def __init__(self, peer: RolePeer, learner: Learner, link: Link) -> None:
        super().__init__(peer)
        self.learner = learner
        self.link = link
        peer.applier.start(learner)
        #: the role served once synced (None before)
        self.role: Learning | None = None
        #: when the sync with the leader began (its link connected)
        self.sync_started = 0
        hold = peer.spec.reconfig_hold
        #: the test-only reconfig hold (:mod:`.testhook`), when set for a follower
        self.hold = (
            FollowerHold(hold)
            if hold is not None and hold.role == "follower" and not peer.spec.observer
            else None
        )

    async def reader(self) -> None:
        clock = self.peer.clock
        peer = self.peer
        hold = self.hold

        def step(ev: StreamEvent) -> None:
            if isinstance(ev, SnapshotPayload):
                log.info("SNAP: received the leader's snapshot, %d bytes", len(ev.body))
                # built while it came: the InstallSnapshot step finishes it
                peer.snapshot_arrived(ev)
            elif ev.type == PacketType.SNAP:
                log.info("SNAP: the leader sends its snapshot at %#x", ev.zxid)
            elif hold is not None and not hold.receive(ev, self.role is not None):
                return
            self.learner.step(ev, clock.now())

        # Learner.syncWithLeader deserialises the SNAP from the socket: the tree is built as
        # the payload arrives
        decoder = QuorumStreamDecoder(snapshot_sink=peer.snapshot_builder)
        learner = self.learner

        def arrived() -> None:
            learner.bytes_arrived()
            self.run_now()

        reason = await read_link(self.link.stream, step, arrived, decoder, peer.poller)
        self.learner.link_closed(f"leader link: {reason}")
        self.peer.kick()

    def _links(self) -> list[Link]:
        return [self.link]

    def _send(self, plan: Plan) -> None:
        peer, rd = self.peer, plan.ready
        if self.hold is None or self.hold.sends():
            for s in rd.messages:
                self.link.send(encode_packet(s.packet))
        if self.role is not None and not peer.spec.observer and rd.entries:
            # Follower.processPacket PROPOSAL (broadcast phase): the count, and
            # PROPOSAL_LATENCY = wall ms since the leader made the txn (if >= 0)
            metrics, wall = peer.metrics, peer.clock.wall()
            for e in rd.entries:
                metrics.learner_proposal_received_count += 1
                made = txn_time(e.data)
                if made is not None and wall >= made:
                    metrics.proposal_latency.add(wall - made)
        if rd.last_seen_config is not None:
            peer.see_config(rd.last_seen_config)

    def _apply(self, plan: Plan) -> None:
        # (the pass advanced earlier appends first: their ACKs precede this Ready's; an ACK
        # of NEWLEADER is the one packet LearnerHandler reads after sending it)
        peer, applier, rd = self.peer, self.peer.applier, plan.ready
        if self.hold is not None:
            self.hold.persisted([e.zxid for e in rd.entries])
        clock, metrics = peer.clock, peer.metrics
        now, wall = clock.now(), clock.wall()
        committed = applier.committed()
        if committed:
            batch = [Proposal(*decode_entry(e.data)) for e in committed]
            if self.role is not None:
                for p in batch:
                    # COMMIT (INFORM on an observer): LEARNER_COMMIT_RECEIVED_COUNT,
                    # COMMIT_PROPAGATION_LATENCY (Request.logLatency)
                    metrics.learner_commit_received_count += 1
                    if wall >= p.hdr.time:
                        metrics.commit_propagation_latency.add(wall - p.hdr.time)
            # the role's sink (not serving until synced): apply, answer
            peer.role.commit(batch, now)
        for a in rd.activated:
            # Follower/Observer.processPacket COMMITANDACTIVATE / INFORMANDACTIVATE
            if peer.process_reconfig(a.config, a.leader):
                self.learner.reconfigured("changes proposed in reconfig")
        if rd.serving is not None:
            self._serve(rd.serving, wall)
        role = self.role
        if role is not None:
            for sid, valid in rd.revalidated:
                role.path.revalidated(sid, valid)
            for _ in range(rd.synced):
                role.front.on_synced(now)

    def _serve(self, zxid: int, wall: int) -> None:
        peer = self.peer
        # Learner.syncWithLeader, after every sync: initConfigInZKDatabase, and at UPTODATE
        # processReconfig of NEWLEADER's configuration
        peer.process_reconfig(self.learner.leader_config)
        now = peer.clock.now()
        # Follower.followLeader / Observer.observeLeader: FOLLOWER_/OBSERVER_SYNC_TIME
        synced = peer.metrics.summary(
            "observer_sync_time" if peer.spec.observer else "follower_sync_time"
        )
        synced.add(now - self.sync_started)
        if peer.spec.observer:
            role = self.role = peer.roles.observing(self.learner, wall, now)
        else:
            role = self.role = peer.roles.following(self.learner, wall, now)
        peer.serve(role, zxid, now)
        log.info(
            "%s: synced with the leader by %s, serving clients (epoch %d)",
            peer.state.upper(),
            self.learner.sync_mode.value,
            epoch_of(zxid),
        )
