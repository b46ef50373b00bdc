"""The server's roles without sockets: front end, write path, commit sink, replica.

Drives :class:`trizk.server.roles.standalone.Standalone` (and the ensemble's roles) with raw
frames on sans-IO connections and a :class:`MemoryCommitter`, so the test decides when txns
commit. Pins the seams the ensemble builds on:

* nothing is answered before its txn commits; replies are matched to requests by
  (session id, cxid), never by position, and each session's replies keep request order, reads
  queued behind writes included;
* a committed txn that no local request is waiting for (another server's client) fires watches
  and answers nobody; an expiry closeSession closes the session's connection;
* the replica is the only place state changes: replaying the committed proposals into a fresh
  replica gives the same tree and session table;
* every role comes from the one :class:`~trizk.server.roles.factory.RoleFactory`: its front end
  writes to its write path, a standalone server's and a leader's sequencer is the session
  tracker, and each role's commit sink applies in zxid order and answers only its own clients
  (the leading and following roles, fed one commit stream, stand in for an ensemble).
"""

from __future__ import annotations

import ast
import struct
from collections.abc import Sequence
from pathlib import Path

from trizk.jute import records as r
from trizk.jute.codes import Code, EventType, OpCode, Xid
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.common.servermetrics import ServerMetrics
from trizk.server.frontend.connection import ClientConnection
from trizk.server.frontend.core import FrontEnd
from trizk.server.roles.factory import Role, RoleFactory
from trizk.server.roles.learning import Learning
from trizk.server.roles.notserving import NotServing
from trizk.server.roles.standalone import Standalone
from trizk.server.writes.committer import MemoryCommitter, Proposal
from trizk.server.writes.sessions import generate_password
from trizk.storage.formats import treeio
from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE, DataTree
from trizk.storage.tree.replica import Replica

ACL = tuple(OPEN_ACL_UNSAFE)
WALL = 1_700_000_000_000
#: the zxid a leader of epoch 1 is established at
EPOCH1 = 1 << 32


class Harness:
    def __init__(self) -> None:
        self.committer = MemoryCommitter()
        self.log: list[Proposal] = []
        self.node = Standalone(
            CoreConfig(tick_time=2000), Replica(DataTree()), self.committer, now=0, wall=WALL
        )
        self.now = 0

        def sink(batch: Sequence[Proposal], now: int) -> None:
            self.log.extend(batch)
            self.node.commit(batch, now)

        self.committer.sink = sink
        self._ids = 0

    def connect(self) -> ClientConnection:
        self._ids += 1
        c = ClientConnection(self._ids, ("127.0.0.1", 40000 + self._ids), 0xFFFFF)
        self.node.front.connection_made(c)
        self.send(c, r.ConnectRequest(0, 0, 10_000, 0, bytes(16)).encode() + b"\x00")
        assert c.out == b"", "answered before the createSession txn committed"
        self.commit()
        frames = replies(c)
        assert len(frames) == 1 and c.session_id
        return c

    def send(self, c: ClientConnection, body: bytes) -> None:
        self.node.front.data_received(c, struct.pack(">i", len(body)) + body, self.now, WALL)

    def request(self, c: ClientConnection, xid: int, op: int, rec: r.Record | None) -> None:
        self.send(c, r.RequestHeader(xid, op).encode() + (rec.encode() if rec else b""))

    def commit(self) -> int:
        return self.committer.flush(self.now)


def replies(c: ClientConnection) -> list[bytes]:
    """The frames written to ``c`` since the last call."""
    data = c.take_output()
    out = []
    while data:
        (n,) = struct.unpack_from(">i", data)
        out.append(data[4 : 4 + n])
        data = data[4 + n :]
    return out


def xids(frames: list[bytes]) -> list[tuple[int, int]]:
    """(xid, err) of each reply frame."""
    return [(x, e) for x, _z, e in (struct.unpack_from(">iqi", f) for f in frames)]


def test_writes_answered_on_commit_matched_by_session_and_cxid() -> None:
    h = Harness()
    a, b = h.connect(), h.connect()
    h.request(a, 1, OpCode.CREATE, r.CreateRequest("/a", b"1", ACL, 0))
    h.request(b, 1, OpCode.CREATE, r.CreateRequest("/b", b"2", ACL, 0))
    # a read behind a's write waits for it and runs against the tree as of that commit (b's
    # create comes after it in zxid order); b's read behind its own write too
    h.request(a, 2, OpCode.GETDATA, r.GetDataRequest("/b", False))
    h.request(b, 2, OpCode.EXISTS, r.ExistsRequest("/a", False))
    h.request(a, 3, OpCode.CREATE, r.CreateRequest("/a", b"", ACL, 0))  # NODEEXISTS (pending)
    assert a.out == b"" and b.out == b""
    assert h.node.sequencer.outstanding == 3
    h.commit()
    assert xids(replies(a)) == [(1, 0), (2, Code.NONODE), (3, Code.NODEEXISTS)]
    assert xids(replies(b)) == [(1, 0), (2, 0)]
    assert h.node.sequencer.outstanding == 0


def test_commit_from_elsewhere_fires_watches_and_answers_nobody() -> None:
    h = Harness()
    a = h.connect()
    h.request(a, 1, OpCode.EXISTS, r.ExistsRequest("/x", True))
    assert xids(replies(a)) == [(1, Code.NONODE)]
    # A txn of another session (as a learner sees its leader's commits) with a cxid that a's
    # next request will also use: it must not be taken for a's reply.
    other = 0x7700000000000001
    h.node.commit(
        [
            Proposal(
                r.TxnHeader(other, 2, 0x100, WALL, OpCode.CREATESESSION), r.CreateSessionTxn(5000)
            )
        ],
        0,
    )
    h.request(a, 2, OpCode.SYNC, r.SyncRequest("/"))
    assert xids(replies(a)) == [(2, 0)]
    txn = r.CreateTxn("/x", b"", ACL, False, 1)
    h.node.commit([Proposal(r.TxnHeader(other, 2, 0x101, WALL, OpCode.CREATE), txn)], 0)
    frames = replies(a)
    assert len(frames) == 1
    xid, _zxid, err, etype, _state = struct.unpack_from(">iqiii", frames[0])
    assert (xid, err, etype) == (Xid.NOTIFICATION, 0, EventType.NODECREATED)
    assert h.node.replica.sessions[other] == 5000


def test_expiry_closes_the_connection() -> None:
    h = Harness()
    a = h.connect()
    sid = a.session_id
    h.now = 60_000
    h.node.sequencer.tick(h.now, WALL + h.now)
    assert not a.closed
    h.commit()
    assert a.closed and sid not in h.node.replica.sessions
    assert sid not in h.node.sequencer.sessions.sessions


def test_close_session_replies_then_closes() -> None:
    h = Harness()
    a = h.connect()
    h.request(a, 5, OpCode.CREATE, r.CreateRequest("/e", b"", ACL, 1))  # ephemeral
    h.request(a, 6, OpCode.CLOSESESSION, None)
    h.commit()
    assert xids(replies(a)) == [(5, 0), (6, 0)]
    assert a.closed
    assert h.node.replica.tree.get("/e") is None


def test_replica_replay_of_committed_proposals_equals_live_state() -> None:
    h = Harness()
    conns = [h.connect() for _ in range(3)]
    for i, c in enumerate(conns):
        h.request(c, 1, OpCode.CREATE, r.CreateRequest(f"/n{i}", b"x", ACL, 0))
        h.request(c, 2, OpCode.SETDATA, r.SetDataRequest(f"/n{i}", b"y" * i, -1))
        h.request(c, 3, OpCode.CREATE, r.CreateRequest(f"/n{i}/e", b"", ACL, 1))
    h.commit()
    h.request(conns[0], 4, OpCode.CLOSESESSION, None)
    h.request(conns[1], 4, OpCode.DELETE, r.DeleteRequest("/n2", -1))  # NOTEMPTY
    h.commit()
    fresh = Replica(DataTree())
    for p in h.log:
        fresh.apply(p.hdr, p.txn)
    assert treeio.canonical(fresh.tree) == treeio.canonical(h.node.replica.tree)
    assert fresh.sessions == h.node.replica.sessions
    assert fresh.last_zxid == h.node.replica.last_zxid == h.node.sequencer.last_zxid
    zxids = [p.hdr.zxid for p in h.log]
    assert zxids == sorted(zxids) == list(range(1, len(zxids) + 1))


def test_global_outstanding_limit_stops_reading_until_requests_drain() -> None:
    # ServerCnxn.incrOutstandingAndCheckThrottle: over globalOutstandingLimit requests in
    # process, a connection with requests of its own in process is not read until they drain.
    h = Harness()
    h.node.front.config.global_outstanding_limit = 2
    a = h.connect()
    frames = b""
    for i in range(10):
        body = r.RequestHeader(i + 1, OpCode.CREATE).encode()
        body += r.CreateRequest(f"/t{i}", b"", ACL, 0).encode()
        frames += struct.pack(">i", len(body)) + body
    front = h.node.front
    front.data_received(a, frames, 0, WALL)
    assert a.throttled
    assert front.in_process == 3 and h.node.sequencer.outstanding == 3  # the rest is buffered
    answered: list[tuple[int, int]] = []
    for _ in range(10):
        h.commit()
        answered += xids(replies(a))
        assert front.in_process <= 3
        if a.throttled:
            continue
        front.data_received(a, b"", 0, WALL)  # what the shell does once unthrottled
    assert answered == [(i + 1, 0) for i in range(10)]
    assert front.in_process == 0 and not a.throttled


def test_frames_after_a_connect_request_are_read_as_requests_once_the_session_is_up() -> None:
    # ZooKeeperServer.processConnectRequest disables reading the connection until
    # finishSessionInit: what follows the ConnectRequest in the same write waits, then is read
    # as requests. A second ConnectRequest is then a request of type 0 (the high half of its
    # lastZxidSeen) with xid 0 (its protocolVersion): UNIMPLEMENTED, zxid -1, closed.
    h = Harness()
    front = h.node.front
    connect = r.ConnectRequest(0, 0, 10_000, 0, bytes(16)).encode() + b"\x00"
    framed = struct.pack(">i", len(connect)) + connect
    c = ClientConnection(1, ("127.0.0.1", 40001), 0xFFFFF)
    front.connection_made(c)
    front.data_received(c, framed + framed, 0, WALL)
    assert c.throttled and c.out == b""  # the createSession txn is not committed yet
    h.commit()
    assert not c.throttled and c.session_id
    front.data_received(c, b"", 0, WALL)  # what the shell does once unthrottled
    frames = replies(c)
    assert len(frames) == 2
    assert r.ConnectResponse.decode_from(frames[0], 0)[0].sessionId == c.session_id
    assert struct.unpack(">iqi", frames[1]) == (0, -1, Code.UNIMPLEMENTED)
    assert c.closed

    # a request pipelined behind the ConnectRequest is answered after the ConnectResponse
    d = ClientConnection(2, ("127.0.0.1", 40002), 0xFFFFF)
    front.connection_made(d)
    body = r.RequestHeader(1, OpCode.EXISTS).encode() + r.ExistsRequest("/", False).encode()
    front.data_received(d, framed + struct.pack(">i", len(body)) + body, 0, WALL)
    assert d.throttled
    h.commit()
    front.data_received(d, b"", 0, WALL)
    frames = replies(d)
    assert len(frames) == 2 and xids(frames[1:]) == [(1, 0)]
    assert not d.closed


# ------------------------------------------------------------------ learner write path
# A leader (front end + sequencer) and a follower (front end + LearnerWritePath) sharing one
# commit stream, with the Zab link between them replaced by direct calls: what the server-side
# glue does around Zab, checked without it.


class FakeLink:
    """The follower's leader link: REQUESTs go straight into the leader's sequencer."""

    def __init__(self, ens: MiniEnsemble) -> None:
        self.ens = ens
        self.touched: dict[int, int] = {}

    def forward_request(
        self,
        session_id: int,
        cxid: int,
        op: int,
        body: bytes,
        authinfo: tuple[r.Id, ...] | None = None,
    ) -> bool:
        data = struct.pack(">qii", session_id, cxid, op) + body
        seq = self.ens.leader.sequencer
        if seq.submit_learner_request(data, authinfo, 0, WALL, 2) == OpCode.SYNC:
            self.ens.syncs.append(seq.last_zxid)  # answered once everything before commits
        return True

    def touch(self, session_id: int, timeout: int) -> None:
        self.touched[session_id] = timeout

    def revalidate(self, session_id: int, timeout: int) -> bool:
        valid = self.ens.leader.sequencer.revalidate_for(session_id, timeout, 0, 2)
        self.ens.revalidations.append((session_id, valid))
        return True


class MiniEnsemble:
    """The leading and following roles as the factory builds them, one commit stream feeding
    both roles' sinks."""

    def __init__(self) -> None:
        self.committer = MemoryCommitter(self._commit)
        lroles = RoleFactory(CoreConfig(tick_time=2000, server_id=1), Replica(DataTree()))
        self.leader = lroles.leading(self.committer, EPOCH1, now=0, wall=WALL)
        self.syncs: list[int] = []
        self.revalidations: list[tuple[int, bool]] = []
        self.link = FakeLink(self)
        self.freplica = Replica(DataTree())
        froles = RoleFactory(CoreConfig(tick_time=2000, server_id=2), self.freplica)
        self.following = froles.following(self.link, wall=WALL)
        self.path = self.following.path
        self.follower = self.following.front
        self._ids = 0

    def _commit(self, batch: Sequence[Proposal], now: int) -> None:
        self.leader.commit(batch, now)
        self.following.commit(batch, now)

    def step(self) -> None:
        """Commit what was proposed, then deliver the leader's SYNC and REVALIDATE answers."""
        self.committer.flush()
        while self.syncs:
            self.syncs.pop(0)
            self.follower.on_synced(0)
        while self.revalidations:
            self.path.revalidated(*self.revalidations.pop(0))

    def connect(
        self, front: FrontEnd, session: int = 0, passwd: bytes = bytes(16)
    ) -> ClientConnection:
        self._ids += 1
        c = ClientConnection(self._ids, ("127.0.0.1", 41000 + self._ids), 0xFFFFF)
        front.connection_made(c)
        body = r.ConnectRequest(0, 0, 10_000, session, passwd).encode() + b"\x00"
        front.data_received(c, struct.pack(">i", len(body)) + body, 0, WALL)
        self.step()
        return c

    def request(
        self, front: FrontEnd, c: ClientConnection, xid: int, op: int, rec: r.Record | None
    ) -> None:
        body = r.RequestHeader(xid, op).encode() + (rec.encode() if rec else b"")
        front.data_received(c, struct.pack(">i", len(body)) + body, 0, WALL)


def connect_response(c: ClientConnection) -> r.ConnectResponse:
    frames = replies(c)
    assert len(frames) == 1
    return r.ConnectResponse.decode_from(frames[0], 0)[0]


def test_follower_sessions_writes_and_syncs_go_through_the_leader() -> None:
    ens = MiniEnsemble()
    f = ens.connect(ens.follower)
    rsp = connect_response(f)
    assert rsp.sessionId >> 56 == 2  # the follower chose the id (its myid in the top byte)
    assert rsp.sessionId in ens.leader.sequencer.sessions.sessions  # the leader tracks it
    assert ens.freplica.sessions == ens.leader.replica.sessions == {rsp.sessionId: 10_000}
    ens.request(ens.follower, f, 1, OpCode.CREATE, r.CreateRequest("/f", b"1", ACL, 1))
    ens.request(ens.follower, f, 2, OpCode.SYNC, r.SyncRequest("/f"))
    ens.request(ens.follower, f, 3, OpCode.GETDATA, r.GetDataRequest("/f", False))
    assert f.out == b""  # nothing answered before the leader's commit / SYNC
    ens.step()
    frames = replies(f)
    assert xids(frames) == [(1, 0), (2, 0), (3, 0)]
    assert r.SyncResponse.decode(memoryview(frames[1])[16:]).path == "/f"
    assert ens.leader.replica.tree.get("/f") is not None
    assert ens.link.touched == {rsp.sessionId: 10_000}  # for the next PING reply


def test_sessions_move_between_leader_and_follower() -> None:
    ens = MiniEnsemble()
    a = ens.connect(ens.leader.front)
    rsp = connect_response(a)
    ens.request(ens.leader.front, a, 1, OpCode.CREATE, r.CreateRequest("/e", b"", ACL, 1))
    ens.step()
    assert xids(replies(a)) == [(1, 0)]
    # the client moves to the follower: revalidated by the leader, keeps its ephemeral
    b = ens.connect(ens.follower, rsp.sessionId, rsp.passwd or b"")
    assert connect_response(b).sessionId == rsp.sessionId
    ens.request(ens.follower, b, 2, OpCode.DELETE, r.DeleteRequest("/e", -1))
    ens.request(ens.follower, b, 3, OpCode.CLOSESESSION, None)
    ens.step()
    assert xids(replies(b)) == [(2, 0), (3, 0)] and b.closed
    assert rsp.sessionId not in ens.leader.sequencer.sessions.sessions
    assert rsp.sessionId not in ens.path.sessions
    # a session the leader does not know (right password) is refused after the leader's
    # answer: timeout 0, session 0
    gone = 0x0200000000000099
    c = ens.connect(ens.follower, gone, generate_password(gone))
    assert ens.path.sessions.get(gone) is None
    assert connect_response(c).sessionId == 0 and c.closed


# ------------------------------------------------------------------ the role factory
# Every role's chain comes from one RoleFactory (setupRequestProcessors): what its front end
# writes to, whether it has a session tracker that ticks, and what its commit sink does.


def test_the_factory_declares_each_roles_chain() -> None:
    replica = Replica(DataTree())
    metrics = ServerMetrics()
    roles = RoleFactory(CoreConfig(tick_time=2000, server_id=2), replica, metrics)
    committer = MemoryCommitter()
    link = FakeLink(MiniEnsemble())
    standalone = roles.standalone(committer, now=0, wall=WALL)
    leading = roles.leading(committer, EPOCH1, now=0, wall=WALL)
    following = roles.following(link, wall=WALL)
    observing = roles.observing(link, wall=WALL)
    not_serving = roles.not_serving()
    built: list[Role] = [standalone, leading, following, observing, not_serving]
    assert [role.name for role in built] == [
        "standalone",
        "leading",
        "following",
        "observing",
        "not serving",
    ]
    for role in built:
        # one replica and one ServerMetrics under every role of a server
        assert role.front.replica is replica and role.front.stats.metrics is metrics
        # the front end writes to the role's write path
        assert role.front.write_path is role.write_path
    # standalone and leader: prep in the sequencer, which is also the ticking session tracker
    for role in (standalone, leading):
        assert role.write_path is role.sequencer
        assert role.sequencer is not None and role.sequencer.committer is committer
    assert standalone.front.counts_sync and not leading.front.counts_sync
    # a leader's txns continue at its established zxid
    assert leading.sequencer.last_zxid == EPOCH1 == replica.tree.last_processed_zxid
    # learners forward to the leader and track no expiry; a client's sync goes there too
    for learner in (following, observing):
        assert isinstance(learner, Learning) and learner.sequencer is None
        assert learner.path.link is link and learner.write_path.forwards_sync
        assert learner.front.serving
    # between roles: nothing is served, nothing can be written
    assert isinstance(not_serving.write_path, NotServing) and not_serving.sequencer is None
    assert not not_serving.front.serving


def _session_txns(sid: int, zxid: int) -> list[Proposal]:
    """A session's life as a leader commits it: created, an ephemeral, closed."""
    return [
        Proposal(r.TxnHeader(sid, 0, zxid, WALL, OpCode.CREATESESSION), r.CreateSessionTxn(9000)),
        Proposal(
            r.TxnHeader(sid, 1, zxid + 1, WALL, OpCode.CREATE),
            r.CreateTxn("/e", b"", ACL, True, 1),
        ),
        Proposal(r.TxnHeader(sid, 2, zxid + 2, WALL, OpCode.CLOSESESSION), None),
    ]


def test_a_sequencer_roles_sink_answers_its_clients_in_order() -> None:
    for make in ("standalone", "leading"):
        replica = Replica(DataTree())
        roles = RoleFactory(CoreConfig(tick_time=2000), replica)
        committer = MemoryCommitter()
        role: Role
        if make == "standalone":
            role = roles.standalone(committer, now=0, wall=WALL)
        else:
            role = roles.leading(committer, EPOCH1, now=0, wall=WALL)
        committer.sink = role.commit
        c = ClientConnection(1, ("127.0.0.1", 40001), 0xFFFFF)
        role.front.connection_made(c)
        body = r.ConnectRequest(0, 0, 10_000, 0, bytes(16)).encode() + b"\x00"
        role.front.data_received(c, struct.pack(">i", len(body)) + body, 0, WALL)
        assert c.out == b"" and committer.flush(1) == 1  # answered once createSession commits
        assert len(replies(c)) == 1
        for xid, rec in (
            (1, r.CreateRequest("/e", b"", ACL, 1)),
            (2, r.ExistsRequest("/e", False)),
        ):
            op = OpCode.CREATE if xid == 1 else OpCode.EXISTS
            frame = r.RequestHeader(xid, op).encode() + rec.encode()
            role.front.data_received(c, struct.pack(">i", len(frame)) + frame, 0, WALL)
        assert c.out == b""  # nothing before the commit; the exists waits behind the create
        assert committer.flush(2) == 1
        assert xids(replies(c)) == [(1, 0), (2, 0)]
        assert replica.sessions == {c.session_id: 10_000}
        assert role.sequencer is not None and role.sequencer.outstanding == 0
        node = replica.tree.get("/e")
        assert node is not None and node.ephemeral_owner == c.session_id
        if make == "leading":
            assert node.czxid == EPOCH1 + 2  # txns continue at the established zxid


def test_a_learners_sink_and_a_not_serving_one_apply_the_leaders_commits() -> None:
    sid = 0x0100000000000001  # a session of another member's client
    for make in ("following", "observing", "not serving"):
        replica = Replica(DataTree())
        roles = RoleFactory(CoreConfig(tick_time=2000, server_id=2), replica)
        link = FakeLink(MiniEnsemble())
        role: Role
        if make == "following":
            role = roles.following(link, wall=WALL)
        elif make == "observing":
            role = roles.observing(link, wall=WALL)
        else:
            role = roles.not_serving()
        watcher = ClientConnection(1, ("127.0.0.1", 40001), 0xFFFFF)
        role.front.connection_made(watcher)
        txns = _session_txns(sid, 1)
        role.commit(txns[:2], 5)
        # applied, in order, by the role's own sink
        assert replica.sessions == {sid: 9000} and replica.tree.get("/e") is not None
        assert replica.last_zxid == 2
        if isinstance(role, Learning):
            role.path.sessions[sid] = 9000  # as if the session had moved to this member
        role.commit(txns[2:], 6)
        assert replica.sessions == {} and replica.tree.get("/e") is None
        if isinstance(role, Learning):
            # a closeSession ends the session on the learner too (no more touches for it)
            assert sid not in role.path.sessions
        # nobody here asked: nobody is answered
        assert watcher.out == b""


def test_the_roles_are_pure() -> None:
    """``server/roles`` reads no clock and touches no socket or file: times are passed in, and
    nothing there imports Trio, the shells or the clock."""
    import trizk.server.roles as roles

    shells = ("trio", "socket", "time", "select", "selectors", "os", "trizk.server.shell")
    for source in Path(roles.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert not name.startswith(shells), f"{source.name} imports {name}"
