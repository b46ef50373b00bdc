"""LEADING: the leader's pump, its committer and the admission of learners' REQUESTs.

* :class:`ZabCommitter` -- the leader sequencer's committer: every proposal goes to the
  :class:`~trizk.quorum.zab.leader.Leader` machine as the bytes a txn log entry holds.
* :class:`LearnerRequests` -- learners' REQUESTs enter the sequencer while fewer than
  :func:`~.spec.leader_outstanding_limit` of their proposals are outstanding (pure).
* :class:`LeaderPump` -- the quorum port's accepted links and the pump that handles the
  Leader's Readies; the :class:`~trizk.server.roles.leading.Leading` role once established.
"""

from __future__ import annotations

import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping

import trio

from trizk.jute import records as r
from trizk.jute.codes import OpCode
from trizk.quorum.zab.applier import Plan, decode_entry
from trizk.quorum.zab.leader import Leader
from trizk.quorum.zab.zabwire import (
    PacketType,
    StreamEvent,
    encode_packet,
    encode_snapshot_payload,
    epoch_of,
)
from trizk.server.roles.leading import Leading
from trizk.server.shell import quorumauth
from trizk.server.shell.ensemble.hosts import RolePeer
from trizk.server.shell.ensemble.links import Link, read_link, until_done
from trizk.server.shell.ensemble.pumping import Pump
from trizk.server.shell.ensemble.spec import leader_outstanding_limit
from trizk.server.shell.ensemble.testhook import LeaderHold
from trizk.server.shell.streams import ReplayStream
from trizk.server.writes.committer import Proposal
from trizk.server.writes.sequencer import Sequencer
from trizk.storage.formats import treeio, txnlog
from trizk.storage.formats.snapshot import NODES_END
from trizk.storage.formats.txnlog import TxnEntry

__all__ = ["LeaderPump", "LearnerRequests", "ZabCommitter", "txn_time"]

log = logging.getLogger("trizk.quorum")


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
        if not self.leader.propose(p.hdr.zxid, data, p.config):
            log.warning("proposal %#x not taken: the leader stepped down", p.hdr.zxid)
        self.kick()


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


class LeaderPump(Pump):
    """LEADING: quorum-port links, the pump (:class:`~.pumping.Pump`: a learner's packets are
    handled in its link's reader task); the :class:`~trizk.server.roles.leading.Leading` role
    once established."""

    def __init__(self, peer: RolePeer, leader: Leader, committer: ZabCommitter) -> None:
        super().__init__(peer)
        self.leader = leader
        self.committer = committer
        #: the role served once established (None before)
        self.role: Leading | None = None
        self.established_at: int | None = None
        hold = peer.spec.reconfig_hold
        #: the test-only reconfig hold (:mod:`.testhook`), when set for a leader
        self.hold = LeaderHold(hold) if hold is not None and hold.role == "leader" else None
        peer.applier.start(leader)
        self.requests = LearnerRequests(
            leader_outstanding_limit(
                peer.core_config.global_outstanding_limit, len(peer.spec.voters)
            )
        )

    async def accept(self, stream: trio.abc.Stream) -> None:
        peer = self.peer
        auth = peer.spec.quorum_auth
        if auth is not None:
            # LearnerHandler: authServer.authenticate before the first packet (initLimit ticks)
            where = quorumauth.peer_address(stream)
            timeout = peer.spec.timing.init_ms / 1000
            first: bytes | None = None
            try:
                first = await auth.accept(stream, b"", timeout, "quorum port", where)
            finally:
                if first is None:  # refused, or the role ended meanwhile
                    with trio.CancelScope(shield=True):
                        await stream.aclose()
            if first is None:
                return
            if first:  # a learner that did not authenticate: its first bytes were read
                stream = ReplayStream(stream, first)
        link = peer.add_link(stream)
        self.leader.connected(link.link)
        clock = peer.clock

        def step(ev: StreamEvent) -> None:
            if isinstance(ev, r.QuorumPacket):  # learners send no snapshots
                if self.hold is not None:
                    self.hold.acked(self._sid_of(link.link), ev)
                self.leader.step(link.link, ev, clock.now())

        try:
            async with trio.open_nursery() as nursery:
                # the link ends when either side does: the pump closing it, or the learner
                nursery.start_soon(until_done, link.writer, nursery.cancel_scope)
                reason = await read_link(stream, step, self.run_now, poller=peer.poller)
                log.info("quorum link %d ends: %s", link.link, reason)
                link.close()
        finally:
            peer.remove_link(link.link)
            self.leader.link_closed(link.link)
            self.requests.link_closed(link.link)
            peer.kick()
            with trio.CancelScope(shield=True):
                await stream.aclose()

    def _links(self) -> list[Link]:
        return self.peer.links()

    def _send(self, plan: Plan) -> None:
        peer = self.peer
        rd = plan.ready
        clock, metrics = peer.clock, peer.metrics
        # Leader.propose: PROPOSAL_COUNT, once per proposal (what the leader logs)
        metrics.proposal_count += len(rd.entries)
        now = clock.now()
        # a PROPOSAL or COMMIT goes to every follower: encoded once
        encoded: dict[int, bytes] = {}
        for s in rd.messages:
            link = peer.link(s.link)
            if link is None:
                continue
            if self.hold is not None and not self.hold.send(
                self._sid_of(s.link), s.packet, self.role is not None
            ):
                continue
            packet = s.packet
            # LearnerHandler.syncFollower: SNAP_COUNT, or DIFF_COUNT (DIFF or TRUNC)
            if packet.type == PacketType.SNAP:
                metrics.snap_count += 1
            elif packet.type in (PacketType.DIFF, PacketType.TRUNC):
                metrics.diff_count += 1
            if link.meter is None:
                sid = self._sid_of(s.link)
                if sid > 0:
                    link.meter, link.now = peer.queue_meter(sid), clock.now
            if link.meter is not None:
                link.meter.queued(packet.type, now)
            data = encoded.get(id(packet))
            if data is None:
                data = encoded[id(packet)] = encode_packet(packet)
            link.send(data)
            if packet.type == PacketType.SNAP:
                self._send_snapshot(link, packet.zxid)
        for lk, why in rd.close:
            link = peer.link(lk)
            if link is not None:
                log.warning("closing quorum link %d: %s", lk, why)
                link.close()
        if rd.last_seen_config is not None:
            peer.see_config(rd.last_seen_config)

    def _apply(self, plan: Plan) -> None:
        peer, leader, applier = self.peer, self.leader, self.peer.applier
        rd = plan.ready
        if self.hold is not None:
            self.hold.persisted([e.zxid for e in rd.entries])
        clock, metrics = peer.clock, peer.metrics
        now, wall = clock.now(), clock.wall()
        committed = applier.committed()
        if committed:
            inflight = self.committer.inflight
            batch = []
            for e in committed:
                # the leader's own proposal, else (proposed by an earlier leader and
                # committed at establishment) decoded from its entry
                p = inflight.pop(e.zxid, None)
                if p is None:
                    p = Proposal(*decode_entry(e.data))
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
            made = txn_time(data)
            if made is not None and wall >= made:
                metrics.ack_latency.add(str(sid), wall - made)
        for a in rd.activated:
            # Leader.tryToCommit of a reconfig: processReconfig (a leader that
            # designated another one commits nothing more; its followers leave)
            peer.process_reconfig(a.config, a.leader)
        if rd.serving is not None:
            self._establish(rd.serving, now, wall)
        if self.role is not None:
            seq = self.role.sequencer
            # requests and sessions are owned by the learner they came through
            sid_of = {lk: sid for lk, sid, _, _ in leader.learners()}
            # a closed link's REQUESTs are dropped (see LearnerRequests)
            self.requests.waiting.extend(r for r in rd.requests if peer.link(r[0]) is not None)
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

    def _sid_of(self, lk: int) -> int:
        """The sid of the learner on link ``lk`` (0 before its FOLLOWERINFO)."""
        return next((sid for k, sid, _, _ in self.leader.learners() if k == lk), 0)

    def _send_snapshot(self, link: Link, zxid: int) -> None:
        """The SNAP payload after its packet (``LearnerHandler``: ``serializeSnapshot`` onto
        the socket's buffered stream, then the signature): its head (sessions, ACL cache) now,
        in this pass, where the tree is at ``zxid``; then the walk's pieces, streamed by the
        link's writer between the pump's passes (:class:`SnapshotStream`,
        ``Link.stream_pieces``) while the pump goes on, and the learner builds its tree as
        they arrive (``treeio.SnapshotBuilder``). The tree changes under the walk as
        ZooKeeper's does under ``serializeSnapshot``: the body is fuzzy, and the txns after
        ``zxid`` (the Leader machine forwards them to this link from the SNAP on) are held by
        the link until the body ends, then replayed by the learner."""
        replica = self.peer.replica
        snap = SnapshotStream(
            link.link, zxid, treeio.FuzzySnapshot(replica.tree, replica.sessions, digest=False)
        )
        link.send(snap.head())
        link.stream_pieces(snap)

    def _bad_request(self, lk: int, e: Exception) -> None:
        log.warning("quorum link %d: bad REQUEST (%s); closing it", lk, e)
        link = self.peer.link(lk)
        if link is not None:
            link.close()

    def _establish(self, zxid: int, now: int, wall: int) -> None:
        """``Leader.startZkServer``: serve clients; txns continue at ``zxid`` (epoch << 32)."""
        peer = self.peer
        peer.process_reconfig(None)  # Leader.startZkServer
        role = self.role = peer.roles.leading(self.committer, zxid, now, wall)
        if peer.configs is not None:
            role.sequencer.leader_config = peer.leader_config
        peer.serve(role, zxid, now)
        self.established_at = now
        log.info("LEADING: established epoch %d at %#x", epoch_of(zxid), zxid)


_TXN_TIME = struct.Struct(">q")
#: nodes walked per piece of a streamed SNAP (~0.6 MB of 100-byte znodes, 1/49 of a
#: 200,000-node walk: the longest the pump's other work waits for the walk)
SNAP_STREAM_STEP = 4096


class SnapshotStream:
    """A SNAP body as a link streams it (``links.PieceSource``): the head, then one walk step
    of :data:`SNAP_STREAM_STEP` nodes per piece, then the end of the nodes; logs the whole
    when done."""

    def __init__(self, link: int, zxid: int, fs: treeio.FuzzySnapshot) -> None:
        self.link = link
        self.zxid = zxid
        self.fs = fs
        self.size = 0
        self.started = time.monotonic()

    def head(self) -> bytes:
        data = self.fs.body_head()
        self.size += len(data)
        return data

    def next_piece(self) -> tuple[bytes, bool]:
        fs = self.fs
        done = fs.step(SNAP_STREAM_STEP)
        chunks = fs.take_chunks()
        if done:
            chunks.append(encode_snapshot_payload(NODES_END))
        data = b"".join(chunks)
        self.size += len(data)
        if done:
            log.info(
                "SNAP to link %d at %#x: %d bytes streamed as walked in %.3f s",
                self.link,
                self.zxid,
                self.size,
                time.monotonic() - self.started,
            )
        return data, done


def txn_time(entry: bytes) -> int | None:
    """The ``time`` of a marshalled txn's TxnHeader (clientId, cxid, zxid, time, type)."""
    if len(entry) < 28:
        return None
    return int(_TXN_TIME.unpack_from(entry, 20)[0])
