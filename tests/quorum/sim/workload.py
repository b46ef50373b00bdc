"""The simulation's real replicas and simulated clients (used by ``cluster.py``).

Replicas
--------
Every member holds a real :class:`trizk.storage.tree.replica.Replica` (a ``DataTree`` plus the
committed session table). Its txns are real: the leader's
:class:`trizk.server.writes.sequencer.Sequencer`
prepares them (``prep``, pending changes, session tracking and expiry) from what the simulated
clients send, and every member applies the committed ones through ``Replica.apply`` after
decoding the entry bytes Zab carried (``txnlog.decode_payload``, as ``QuorumPeer.apply`` does).
Snapshots are the real SNAP body (``treeio.snapshot_body`` / ``replica_from_snapshot_body``).

:class:`Reference` applies the one committed history (zxid order) to its own replica: the tree a
member must have at a given zxid. Its digest at each zxid is ZooKeeper's tree digest
(``DataTree.digest``); :func:`content` is the whole state (every node's data, ACL, persisted
stat and children, and the session table) for the full comparisons.

Clients
-------
:class:`SimClient` is a ZooKeeper client with one session: it connects to a serving member
(createSession, or a reconnect revalidated by the leader), then issues writes with increasing
cxids, at most ``MAX_INFLIGHT`` at a time, through that member (a learner forwards them as
REQUEST packets, a leader's sequencer takes them at once), pings its session and sometimes
closes it. A member's role change or crash drops its clients (their pending requests have
unknown outcomes) and they reconnect elsewhere with the same session.
"""

from __future__ import annotations

import bisect
import heapq
import random
from collections import deque
from dataclasses import dataclass, field

from trizk.jute import multi
from trizk.jute import records as r
from trizk.jute.codes import CreateMode, OpCode
from trizk.quorum.zab.applier import decode_entry
from trizk.storage.formats import treeio
from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE, DataTree
from trizk.storage.tree.replica import Replica

#: requests a client keeps in flight on its connection (pipelining)
MAX_INFLIGHT = 3
#: the top-level nodes the clients write under
NAMES = ("a", "b", "c", "d")


def fresh_replica() -> Replica:
    return Replica(DataTree())


def decode(data: bytes) -> tuple[r.TxnHeader, r.Record | None]:
    """A Zab entry's bytes (``Util.marshallTxnEntry``) as (header, txn): the applier's
    decoding, the one the ensemble shell's pumps use."""
    return decode_entry(data)


def apply_entry(rep: Replica, data: bytes) -> r.TxnHeader:
    hdr, txn = decode(data)
    rep.apply(hdr, txn)
    return hdr


def content(rep: Replica) -> tuple[dict[str, tuple[object, ...]], tuple[tuple[int, int], ...]]:
    """The whole replicated state, comparable with ``==``."""
    return treeio.canonical(rep.tree), tuple(sorted(rep.sessions.items()))


class HistoryError(AssertionError):
    """The committed history grew below a zxid already applied to the reference."""


class Reference:
    """The committed history applied in zxid order; digests by zxid (see the docstring)."""

    def __init__(self) -> None:
        self.rep = fresh_replica()
        self.zxid = 0
        self._heap: list[tuple[int, bytes]] = []
        self._zxids: list[int] = []
        self._digests: list[int] = []
        self._empty = self.rep.tree.digest
        #: session id -> cxid of its last committed txn (per-session FIFO)
        self.last_cxid: dict[int, int] = {}
        self.applied: list[r.TxnHeader] = []

    def add(self, zxid: int, data: bytes) -> None:
        """A newly committed txn (each zxid once)."""
        if zxid <= self.zxid:
            raise HistoryError(f"committed {zxid:#x} below the applied {self.zxid:#x}")
        heapq.heappush(self._heap, (zxid, data))

    def advance(self, upto: int) -> list[r.TxnHeader]:
        """Apply the committed txns up to ``upto``; returns their headers."""
        out = []
        while self._heap and self._heap[0][0] <= upto:
            z, data = heapq.heappop(self._heap)
            out.append(apply_entry(self.rep, data))
            self.zxid = z
            self._zxids.append(z)
            self._digests.append(self.rep.tree.digest)
        return out

    def digest_at(self, zxid: int) -> int:
        self.advance(zxid)
        i = bisect.bisect_right(self._zxids, zxid)
        return self._digests[i - 1] if i else self._empty


@dataclass
class SimClient:
    no: int
    timeout: int
    session: int = 0
    #: sid of the member the client is connected to (0: none)
    member: int = 0
    #: down | creating | revalidating | up
    state: str = "down"
    #: bumped at every (dis)connection: callbacks of an old connection are ignored
    conn_no: int = 0
    cxid: int = 0
    #: cxids of the requests sent on this connection and not answered, oldest first
    pending: deque[int] = field(default_factory=deque)
    #: op of each pending cxid
    ops: dict[int, int] = field(default_factory=dict)

    def drop(self) -> None:
        """The connection is gone; pending requests have unknown outcomes."""
        self.member = 0
        self.state = "down"
        self.conn_no += 1
        self.pending.clear()
        self.ops.clear()


def _path(rng: random.Random, rep: Replica) -> str:
    """An existing node under one of :data:`NAMES` (read from the member's replica, as a
    client would list it), or a top-level name."""
    top = "/" + rng.choice(NAMES)
    node = rep.tree.get(top)
    if node is not None and node.num_children() and rng.random() < 0.5:
        return top + "/" + rng.choice(node.child_names())
    return top


def next_request(rng: random.Random, c: SimClient, rep: Replica) -> tuple[int, bytes]:
    """A random write: (op, request frame with the client's next cxid)."""
    c.cxid += 1
    x = rng.random()
    data = rng.randbytes(rng.randint(0, 12))
    version = -1 if rng.random() < 0.6 else rng.randint(0, 3)
    rec: r.Record | bytes
    if x < 0.35:
        op = OpCode.CREATE
        top = "/" + rng.choice(NAMES)
        mode = rng.choice(
            (
                CreateMode.PERSISTENT,
                CreateMode.EPHEMERAL,
                CreateMode.PERSISTENT_SEQUENTIAL,
                CreateMode.EPHEMERAL_SEQUENTIAL,
            )
        )
        path = top if rng.random() < 0.3 else f"{top}/{rng.choice(('x', 'y', 's-'))}"
        rec = r.CreateRequest(path, data, OPEN_ACL_UNSAFE, int(mode))
    elif x < 0.6:
        op = OpCode.SETDATA
        rec = r.SetDataRequest(_path(rng, rep), data, version)
    elif x < 0.8:
        op = OpCode.DELETE
        rec = r.DeleteRequest(_path(rng, rep), version)
    elif x < 0.97:
        op = OpCode.MULTI
        p = _path(rng, rep)
        ops: list[tuple[int, r.Record]] = [
            (OpCode.CHECK, r.CheckVersionRequest(p, version)),
            (OpCode.SETDATA, r.SetDataRequest(p, data, -1)),
            (
                OpCode.CREATE,
                r.CreateRequest(
                    "/" + rng.choice(NAMES) + "/m-",
                    data,
                    OPEN_ACL_UNSAFE,
                    int(CreateMode.PERSISTENT_SEQUENTIAL),
                ),
            ),
        ]
        rng.shuffle(ops)
        rec = multi.encode_request(ops)
    else:
        op = OpCode.CLOSESESSION
        rec = b""
    body = rec if isinstance(rec, bytes) else rec.encode()
    return op, r.RequestHeader(c.cxid, op).encode() + body
