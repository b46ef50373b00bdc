"""Local sessions in the pure cores: a leading and a following role (as the factory builds
them with ``localSessionsEnabled``) fed one commit stream, their Zab link replaced by direct
calls (tests/server/test_roles.py's MiniEnsemble shape); the live comparison with ZooKeeper is
tests/compat/test_local_sessions.py.

Pinned: a local session is answered at once and logs nothing (no createSession, no
closeSession, no expiry txn); an ephemeral create from it proposes its upgrade (createSession,
cxid 0) ahead of the create, or without upgrading fails EPHEMERALONLOCALSESSION (the leader
logs -120 for its own session, -112 for a learner's, the learner answers -120); a local session
cannot be revalidated by another member; its expiry closes its connection; a learner's local
session's touches stay on the learner.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pytest

from tests.server.test_roles import ACL, EPOCH1, WALL, FakeLink, connect_response, replies, xids
from trizk.jute import records as r
from trizk.jute.codes import Code, OpCode
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.frontend.connection import ClientConnection
from trizk.server.frontend.core import FrontEnd
from trizk.server.roles.factory import RoleFactory
from trizk.server.writes.committer import MemoryCommitter, Proposal
from trizk.server.writes.localsessions import creates_ephemeral, server_id_of
from trizk.server.writes.sequencer import WriteRequest
from trizk.storage.tree.datatree import DataTree
from trizk.storage.tree.replica import Replica

EPHEMERAL = 1


class LocalEnsemble:
    """Leader (sid 1) and follower (sid 2) with local sessions; every proposal logged."""

    def __init__(self, upgrading: bool) -> None:
        self.log: list[Proposal] = []
        self.committer = MemoryCommitter(self._commit)

        def config(sid: int) -> CoreConfig:
            return CoreConfig(
                tick_time=2000,
                server_id=sid,
                local_sessions=True,
                local_sessions_upgrading=upgrading,
            )

        self.leader = RoleFactory(config(1), Replica(DataTree())).leading(
            self.committer, EPOCH1, now=0, wall=WALL
        )
        self.syncs: list[int] = []
        self.revalidations: list[tuple[int, bool]] = []
        self.link = FakeLink(self)  # type: ignore[arg-type]
        self.freplica = Replica(DataTree())
        self.following = RoleFactory(config(2), self.freplica).following(self.link, WALL, now=0)
        self.path = self.following.path
        self.follower = self.following.front
        self._ids = 0

    def _commit(self, batch: Sequence[Proposal], now: int) -> None:
        self.log.extend(batch)
        self.leader.commit(batch, now)
        self.following.commit(batch, now)

    def step(self) -> None:
        self.committer.flush()
        while self.revalidations:
            self.path.revalidated(*self.revalidations.pop(0))

    def connect(
        self, front: FrontEnd, session: int = 0, passwd: bytes = bytes(16), timeout: int = 10_000
    ) -> ClientConnection:
        self._ids += 1
        c = ClientConnection(self._ids, ("127.0.0.1", 42000 + self._ids), 0xFFFFF)
        front.connection_made(c)
        body = r.ConnectRequest(0, 0, timeout, session, passwd).encode() + b"\x00"
        front.data_received(c, struct.pack(">i", len(body)) + body, 0, WALL)
        return c

    def request(
        self, front: FrontEnd, c: ClientConnection, xid: int, op: int, rec: r.Record | None
    ) -> None:
        body = r.RequestHeader(xid, op).encode() + (rec.encode() if rec else b"")
        front.data_received(c, struct.pack(">i", len(body)) + body, 0, WALL)

    def logged(self) -> list[tuple[int, int, int]]:
        """(txn type, session id, cxid) of every committed proposal."""
        return [(p.hdr.type, p.hdr.clientId, p.hdr.cxid) for p in self.log]


@pytest.mark.parametrize("member", ["leader", "follower"])
def test_a_local_session_is_answered_at_once_and_logs_nothing(member: str) -> None:
    ens = LocalEnsemble(upgrading=True)
    front = ens.leader.front if member == "leader" else ens.follower
    c = ens.connect(front)
    rsp = connect_response(c)  # before any commit
    sid = rsp.sessionId
    assert server_id_of(sid) == (1 if member == "leader" else 2)
    ens.request(front, c, 1, OpCode.CREATE, r.CreateRequest("/p", b"", ACL, 0))
    ens.step()
    assert xids(replies(c)) == [(1, 0)]
    ens.request(front, c, 2, OpCode.CLOSESESSION, None)
    assert xids(replies(c)) == [(2, 0)] and c.closed  # answered without a txn
    ens.step()
    assert ens.logged() == [(OpCode.CREATE, sid, 1)]
    assert ens.leader.replica.sessions == {} == ens.freplica.sessions
    local = ens.leader.sequencer.local_sessions if member == "leader" else ens.path.local_sessions
    assert local is not None and len(local) == 0


@pytest.mark.parametrize("member", ["leader", "follower"])
def test_an_ephemeral_create_upgrades_the_session_first(member: str) -> None:
    ens = LocalEnsemble(upgrading=True)
    front = ens.leader.front if member == "leader" else ens.follower
    c = ens.connect(front)
    sid = connect_response(c).sessionId
    ens.request(front, c, 1, OpCode.CREATE, r.CreateRequest("/e", b"", ACL, EPHEMERAL))
    ens.step()
    assert xids(replies(c)) == [(1, 0)]
    assert ens.logged() == [(OpCode.CREATESESSION, sid, 0), (OpCode.CREATE, sid, 1)]
    assert ens.leader.replica.sessions == {sid: 10_000} == ens.freplica.sessions
    assert sid in ens.leader.sequencer.sessions.sessions
    local = ens.leader.sequencer.local_sessions if member == "leader" else ens.path.local_sessions
    assert local is not None and len(local) == 0 and not local.upgrading
    # global now: its close is logged and removes its ephemeral
    ens.request(front, c, 2, OpCode.CLOSESESSION, None)
    ens.step()
    assert xids(replies(c)) == [(2, 0)] and c.closed
    assert ens.logged()[-1] == (OpCode.CLOSESESSION, sid, 2)
    assert ens.leader.replica.tree.get("/e") is None


@pytest.mark.parametrize(("member", "logged_err"), [("leader", -120), ("follower", -112)])
def test_without_upgrading_an_ephemeral_create_fails(member: str, logged_err: int) -> None:
    ens = LocalEnsemble(upgrading=False)
    front = ens.leader.front if member == "leader" else ens.follower
    c = ens.connect(front)
    sid = connect_response(c).sessionId
    ens.request(front, c, 1, OpCode.CREATE, r.CreateRequest("/e", b"", ACL, EPHEMERAL))
    ens.step()
    assert xids(replies(c)) == [(1, Code.EPHEMERALONLOCALSESSION)]
    assert ens.logged() == [(OpCode.ERROR, sid, 1)]
    txn = ens.log[0].txn
    assert isinstance(txn, r.ErrorTxn) and txn.err == logged_err
    assert ens.leader.replica.sessions == {}


def test_a_local_session_cannot_move() -> None:
    ens = LocalEnsemble(upgrading=True)
    a = ens.connect(ens.leader.front)
    rsp = connect_response(a)
    # back on its own member: kept
    b = ens.connect(ens.leader.front, rsp.sessionId, rsp.passwd or b"")
    assert connect_response(b).sessionId == rsp.sessionId
    # on another member: the leader knows no global session of that id
    c = ens.connect(ens.follower, rsp.sessionId, rsp.passwd or b"")
    ens.step()
    moved = connect_response(c)
    assert (moved.timeOut, moved.sessionId) == (0, 0) and c.closed
    f = ens.connect(ens.follower)
    frsp = connect_response(f)
    d = ens.connect(ens.leader.front, frsp.sessionId, frsp.passwd or b"")
    assert connect_response(d).sessionId == 0 and d.closed


def test_local_sessions_expire_without_a_txn() -> None:
    ens = LocalEnsemble(upgrading=True)
    a = ens.connect(ens.leader.front, timeout=4000)
    f = ens.connect(ens.follower, timeout=4000)
    replies(a), replies(f)
    seq = ens.leader.sequencer
    assert ens.following.expirer is ens.path and ens.leader.expirer is seq
    assert seq.next_tick_in(0) == 2000 and ens.path.next_tick_in(0) == 2000
    for now in (2000, 4000):
        seq.tick(now, WALL)
        ens.path.tick(now, WALL)
    assert not a.closed and not f.closed
    seq.tick(6000, WALL)
    ens.path.tick(6000, WALL)
    ens.step()
    assert a.closed and f.closed and ens.log == []
    assert seq.local_sessions is not None and len(seq.local_sessions) == 0


def test_a_learners_local_session_touches_stay_local() -> None:
    ens = LocalEnsemble(upgrading=True)
    f = ens.connect(ens.follower)
    sid = connect_response(f).sessionId
    ens.request(ens.follower, f, 1, OpCode.EXISTS, r.ExistsRequest("/", False))
    assert ens.link.touched == {}
    # writes of a learner's local session pass the leader's session check
    ens.request(ens.follower, f, 2, OpCode.SETDATA, r.SetDataRequest("/", b"x", -1))
    ens.step()
    assert [x for x, _e in xids(replies(f))] == [1, 2]
    assert ens.logged() == [(OpCode.SETDATA, sid, 2)]
    # a session of the leader's own id that it does not know is expired
    ghost = (1 << 56) | 0x77
    seq = ens.leader.sequencer
    frame = r.RequestHeader(3, OpCode.SETDATA).encode() + r.SetDataRequest("/", b"", -1).encode()
    seq.submit(WriteRequest(ghost, 3, OpCode.SETDATA, frame, [], 2), 0, WALL)
    ens.step()
    txn = ens.log[-1].txn
    assert isinstance(txn, r.ErrorTxn) and txn.err == Code.SESSIONEXPIRED


def test_creates_ephemeral_reads_creates_and_multis() -> None:
    def frame(op: int, rec: r.Record) -> bytes:
        return r.RequestHeader(1, op).encode() + rec.encode()

    assert creates_ephemeral(
        OpCode.CREATE, frame(OpCode.CREATE, r.CreateRequest("/a", b"", ACL, 1))
    )
    assert creates_ephemeral(
        OpCode.CREATE2, frame(OpCode.CREATE2, r.CreateRequest("/a", b"", ACL, 3))
    )
    assert not creates_ephemeral(
        OpCode.CREATE, frame(OpCode.CREATE, r.CreateRequest("/a", b"", ACL, 2))
    )
    assert not creates_ephemeral(
        OpCode.CREATE, frame(OpCode.CREATE, r.CreateRequest("/a", b"", ACL, 99))
    )
    assert not creates_ephemeral(OpCode.CREATE, b"\x00\x00\x00\x01\x00\x00\x00\x01")  # no body


def test_a_local_close_waits_for_the_sessions_earlier_writes() -> None:
    # CommitProcessor keeps a session's order: the close (no txn) is answered after the write
    ens = LocalEnsemble(upgrading=True)
    f = ens.connect(ens.follower)
    connect_response(f)
    ens.request(ens.follower, f, 1, OpCode.CREATE, r.CreateRequest("/w", b"", ACL, 0))
    ens.request(ens.follower, f, 2, OpCode.CLOSESESSION, None)
    assert replies(f) == [] and not f.closed
    ens.step()
    assert xids(replies(f)) == [(1, 0), (2, 0)] and f.closed
