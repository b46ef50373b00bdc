"""FOLLOWING / OBSERVING: the learner's pump.

:class:`LearnerPump` reads the leader's link into the :class:`~trizk.quorum.zab.learner.Learner`
machine and handles its Readies; once synced (UPTODATE) the member serves the
:class:`~trizk.server.roles.learning.Learning` role.
"""

from __future__ import annotations

import logging

from trizk.quorum.zab.applier import decode_entry
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
from trizk.server.writes.committer import Proposal
from trizk.storage.formats import treeio

__all__ = ["LearnerPump"]

log = logging.getLogger("trizk.quorum")


class LearnerPump:
    """FOLLOWING / OBSERVING: the leader link's reader and the pump; the
    :class:`~trizk.server.roles.learning.Learning` role once synced."""

    def __init__(self, peer: RolePeer, learner: Learner, link: Link) -> None:
        self.peer = peer
        self.learner = learner
        self.link = link
        peer.applier.start(learner)
        #: the role served once synced (None before)
        self.role: Learning | None = None
        #: when the sync with the leader began (its link connected)
        self.sync_started = 0

    async def reader(self) -> None:
        clock = self.peer.clock
        peer = self.peer
        extended = peer.core_config.extended_types

        def step(ev: StreamEvent) -> None:
            if isinstance(ev, SnapshotPayload):
                log.info("SNAP: received the leader's snapshot, %d bytes", len(ev.body))
                # built while it came: the InstallSnapshot step finishes it
                peer.snapshot_arrived(ev)
            elif ev.type == PacketType.SNAP:
                log.info("SNAP: the leader sends its snapshot at %#x", ev.zxid)
            self.learner.step(ev, clock.now())

        # Learner.syncWithLeader deserialises the SNAP from the socket: the tree is built as
        # the payload arrives (while a streaming leader still walks its own)
        decoder = QuorumStreamDecoder(
            snapshot_sink=lambda: treeio.SnapshotBuilder(extended_types=extended)
        )
        learner = self.learner

        def arrived() -> None:
            learner.bytes_arrived()
            peer.kick()

        reason = await read_link(self.link.stream, step, arrived, decoder)
        self.learner.link_closed(f"leader link: {reason}")
        self.peer.kick()

    async def pump(self) -> str:
        """Hand the Learner's Readies through the member's applier (``quorum/zab/applier.py``:
        send, persist, apply, advance) until the role ends; returns why."""
        peer, applier = self.peer, self.peer.applier
        clock, metrics = peer.clock, peer.metrics
        while True:
            peer.advance_durable()  # ACKs, now that the proposals are durable
            while (plan := applier.take()) is not None:
                rd = plan.ready
                for s in rd.messages:
                    self.link.send(encode_packet(s.packet))
                wall = clock.wall()
                if self.role is not None and not peer.spec.observer:
                    # Follower.processPacket PROPOSAL (broadcast phase): the count, and
                    # PROPOSAL_LATENCY = wall ms since the leader made the txn (if >= 0)
                    for e in rd.entries:
                        metrics.learner_proposal_received_count += 1
                        made = txn_time(e.data)
                        if made is not None and wall >= made:
                            metrics.proposal_latency.add(wall - made)
                if rd.last_seen_config is not None:
                    peer.see_config(rd.last_seen_config)
                await peer.persist(plan)
                # earlier appends first: their ACKs precede this Ready's (an ACK of
                # NEWLEADER is the one packet LearnerHandler reads after sending it)
                peer.advance_durable()
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
                applier.finish()
                peer.host.wake()
                if rd.role is not None:
                    return rd.role.reason
            await peer.wait_kick()

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
