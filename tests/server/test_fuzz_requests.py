"""Fuzzing the request path: frame decoder, request decoders and the pure server core.

Properties (hypothesis; bounded example counts in CI, ``TRIZK_FUZZ_EXAMPLES=N`` for a long run,
e.g. ``TRIZK_FUZZ_EXAMPLES=20000 python -m pytest tests/server/test_fuzz_requests.py``):

* the frame decoder, fed *any* byte stream, yields frames or raises the one decode error
  (:class:`JuteDecodeError`), and feeding it byte by byte gives exactly what feeding it at once
  gives (the same frames, then the same error or the same leftover);
* every request decoder the core uses (:func:`decode_body` of each request record,
  :func:`parse_multi`, :func:`multi_without_txn`) either decodes or raises JuteDecodeError, for
  arbitrary bodies and for mutated valid ones (nulls, bad lengths, truncation, trailing bytes);
* the core (a standalone server's roles, :class:`Standalone`, driven without sockets) never
  lets an exception escape ``data_received`` / ``commit``, whatever frames a session sends --
  unknown opcodes, mutated bodies, garbage, in any chunking, with commits prompt or late;
  every byte it writes to that connection is a well-formed reply or event frame; the
  connection is closed, waits for the rest of a frame, or answers a ping; and a bystander
  session on the same core still creates, reads and is answered in order after every case;
* the same with a malformed (or garbage, or unknown-session) ConnectRequest first, and session
  expiry afterwards.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.jute import records as R
from trizk.jute.codes import OpCode, Xid
from trizk.jute.framing import FrameDecoder, frame
from trizk.jute.multi import REQUEST_RECORDS as MULTI_RECORDS
from trizk.jute.multi import encode_request
from trizk.jute.primitives import BUFFER, USTRING, JuteDecodeError, Record, Vector
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.frontend.connection import ClientConnection
from trizk.server.frontend.reads import READ_OPS
from trizk.server.frontend.requests import (
    decode_body,
    multi_without_txn,
    parse_multi,
)
from trizk.server.roles.standalone import Standalone
from trizk.server.writes.committer import MemoryCommitter, Proposal
from trizk.server.writes.prep import WRITE_OPS
from trizk.storage.tree.datatree import DataTree
from trizk.storage.tree.replica import Replica

EXAMPLES = examples(150, "TRIZK_FUZZ_EXAMPLES")
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_I = struct.Struct(">i")

# ----------------------------------------------------------------------------- frame decoder


def _run_decoder(chunks: list[bytes], limit: int) -> tuple[list[bytes], str, bytes]:
    """Frames out, then how it ended ("ok" or the error) and the bytes left buffered."""
    d = FrameDecoder(limit)
    out: list[bytes] = []
    for c in chunks:
        d.feed(c)
        while True:
            try:
                f = d.next_frame()
            except JuteDecodeError as e:
                return out, f"error {e}", d.peek(d.buffered)
            if f is None:
                break
            out.append(f)
    return out, "ok", d.peek(d.buffered)


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.binary(max_size=30).map(frame),
            st.sampled_from([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00"]),
        ),
        max_size=8,
    ),
    st.integers(0, 64),
)
def test_frame_decoder_any_stream_byte_by_byte_equals_one_shot(
    parts: list[bytes], limit: int
) -> None:
    data = b"".join(parts)
    whole = _run_decoder([data], limit)
    single = _run_decoder([data[i : i + 1] for i in range(len(data))], limit)
    # the same frames and the same end (on an error the stream is dead: what was buffered
    # after it depends only on how much had arrived)
    assert whole[:2] == single[:2]
    frames, how, left = whole
    if how == "ok":
        assert left == single[2]
    assert all(len(f) <= limit for f in frames)
    if how != "ok":
        assert how.startswith("error")


# ----------------------------------------------------------------------------- request decoders

VALID: dict[int, list[Record]] = {
    OpCode.CREATE: [R.CreateRequest("/a", b"x", (R.ACL(31, R.Id("world", "anyone")),), 0)],
    OpCode.CREATETTL: [
        R.CreateTTLRequest("/t", b"", (R.ACL(31, R.Id("world", "anyone")),), 5, 100)
    ],
    OpCode.DELETE: [R.DeleteRequest("/a", -1)],
    OpCode.SETDATA: [R.SetDataRequest("/a", b"y", -1)],
    OpCode.SETACL: [R.SetACLRequest("/a", (R.ACL(1, R.Id("digest", "u:p")),), -1)],
    OpCode.CHECK: [R.CheckVersionRequest("/a", 0)],
    OpCode.EXISTS: [R.ExistsRequest("/a", True)],
    OpCode.GETDATA: [R.GetDataRequest("/a", True)],
    OpCode.GETCHILDREN: [R.GetChildrenRequest("/", True)],
    OpCode.GETCHILDREN2: [R.GetChildren2Request("/", False)],
    OpCode.GETACL: [R.GetACLRequest("/a")],
    OpCode.SYNC: [R.SyncRequest("/a")],
    OpCode.GETALLCHILDRENNUMBER: [R.GetAllChildrenNumberRequest("/")],
    OpCode.GETEPHEMERALS: [R.GetEphemeralsRequest("/")],
    OpCode.ADDWATCH: [R.AddWatchRequest("/a", 1)],
    OpCode.REMOVEWATCHES: [R.RemoveWatchesRequest("/a", 3)],
    OpCode.CHECKWATCHES: [R.CheckWatchesRequest("/a", 3)],
    OpCode.SETWATCHES: [R.SetWatches(0, ("/a",), ("/b",), ("/",))],
    OpCode.SETWATCHES2: [R.SetWatches2(0, ("/a",), (), ("/",), ("/p",), ())],
    OpCode.AUTH: [R.AuthPacket(0, "digest", b"u:p")],
    OpCode.SASL: [R.GetSASLRequest(b"")],
    OpCode.RECONFIG: [R.ReconfigRequest(None, None, None, -1)],
}


MULTI_BODIES = [
    encode_request(
        [(OpCode.CREATE, VALID[OpCode.CREATE][0]), (OpCode.DELETE, R.DeleteRequest("/a", 0))]
    ),
    encode_request(
        [(OpCode.SETDATA, VALID[OpCode.SETDATA][0]), (OpCode.CHECK, VALID[OpCode.CHECK][0])]
    ),
    encode_request(
        [
            (OpCode.GETDATA, R.GetDataRequest("/a", False)),
            (OpCode.GETCHILDREN, R.GetChildrenRequest("/", False)),
        ]
    ),
    encode_request([]),
]


@st.composite
def mutated(draw: Any, base: bytes) -> bytes:
    """A valid body with up to three malformations: a length made null / negative / huge /
    zero, a truncation, inserted or flipped bytes, trailing bytes."""
    b = bytearray(base)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["len", "cut", "insert", "flip", "trail"]))
        i = draw(st.integers(0, len(b)))
        if kind == "len" and len(b) >= 4:
            # mostly at a length prefix (a string, buffer or vector count), else anywhere
            prefixes = [
                j for j in range(len(b) - 3) if 0 <= _I.unpack_from(b, j)[0] <= len(b) - j - 4
            ]
            i = (
                draw(st.sampled_from(prefixes))
                if prefixes and draw(st.booleans())
                else min(i, len(b) - 4)
            )
            b[i : i + 4] = draw(
                st.sampled_from(
                    [b"\xff\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x7f\xff\xff\xff", bytes(4)]
                )
            )
        elif kind == "cut":
            del b[i:]
        elif kind == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=6))
        elif kind == "flip" and i < len(b):
            b[i] ^= draw(st.integers(1, 255))
        else:
            b += draw(st.binary(min_size=1, max_size=6))
    return bytes(b)


def bodies_for(op: int) -> st.SearchStrategy[bytes]:
    if op in (OpCode.MULTI, OpCode.MULTIREAD):
        base = st.sampled_from(MULTI_BODIES)
    elif op in VALID:
        base = st.sampled_from([r.encode() for r in VALID[op]])
    else:
        base = st.just(b"")
    return st.one_of(st.binary(max_size=48), base.flatmap(mutated))


KNOWN_OPS = sorted({int(o) for o in OpCode})
DECODED = sorted({*READ_OPS, *WRITE_OPS, *MULTI_RECORDS} - {OpCode.DELETECONTAINER})


@FUZZ
@given(st.sampled_from(DECODED).flatmap(lambda op: st.tuples(st.just(op), bodies_for(op))))
def test_request_decoders_decode_or_raise_the_decode_error(case: tuple[int, bytes]) -> None:
    op, body = case
    fr = R.RequestHeader(7, op).encode() + body
    classes = {c for c in (READ_OPS.get(op, (None,))[0], WRITE_OPS.get(op, (None,))[0]) if c}
    for cls in classes:
        try:
            rec = decode_body(cls, fr)
        except JuteDecodeError:
            continue
        assert isinstance(rec, cls)
        # trailing bytes are ignored (byteBuffer2Record): more of them change nothing
        assert decode_body(cls, fr + b"\x00\xff junk") == rec


@FUZZ
@given(st.one_of(st.sampled_from(MULTI_BODIES).flatmap(mutated), st.binary(max_size=64)))
def test_multi_decoder_decodes_or_raises_the_decode_error(body: bytes) -> None:
    fr = R.RequestHeader(1, OpCode.MULTI).encode() + body
    try:
        ops = parse_multi(fr)
    except JuteDecodeError:
        assert multi_without_txn(fr) is False
        return
    kinds = {t in (OpCode.GETDATA, OpCode.GETCHILDREN) for t, _ in ops}
    assert len(kinds) <= 1  # never mixed
    assert multi_without_txn(fr) == any(getattr(r, "path", "") is None for _, r in ops)


# ----------------------------------------------------------------------------- the core


class Core:
    """A standalone server's roles with an in-memory committer: txns commit on :meth:`commit`
    (``sync``: after every input, as a shell flushing at once would)."""

    def __init__(self, *, sync: bool = True, config: CoreConfig | None = None) -> None:
        self.committer = MemoryCommitter()
        self.node = Standalone(
            config or CoreConfig(), Replica(DataTree()), self.committer, now=0, wall=0
        )
        self.front = self.node.front
        self.sync = sync
        self.now = 1000

        self.committer.sink = self.node.commit
        self._ids = 0

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def commit(self, now: int = 1000) -> None:
        self.now = now
        self.committer.flush(now)


class Client:
    """One connection to the core, as the shell would drive it."""

    def __init__(self, core: Core, port: int) -> None:
        self.core = core
        self.conn = ClientConnection(
            core.next_id(), ("127.0.0.1", port), core.front.config.max_buffer
        )
        core.front.connection_made(self.conn)
        self.dec = FrameDecoder(1 << 24)
        self.xid = 0

    def feed(self, data: bytes) -> None:
        self.core.front.data_received(self.conn, data, 1000, 1000)
        self.core.front.dirty.clear()
        if self.core.sync:
            self.core.commit()

    def replies(self) -> list[tuple[int, int, int, bytes]]:
        """Every frame written to this connection so far: (xid, zxid, err, rest)."""
        self.dec.feed(self.conn.take_output())
        out = []
        while (f := self.dec.next_frame()) is not None:
            h, p = R.ReplyHeader.decode_from(f, 0)  # must decode: well-formed frames only
            out.append((h.xid, h.zxid, h.err, f[p:]))
        return out

    def handshake(self) -> None:
        self.feed(frame(R.ConnectRequest(0, 0, 30000, 0, bytes(16)).encode() + b"\0"))
        self.core.commit()
        self.dec.feed(self.conn.take_output())
        f = self.dec.next_frame()
        assert f is not None
        assert R.ConnectResponse.decode_from(f, 0)[0].sessionId != 0

    def request(self, op: int, body: bytes) -> int:
        self.xid += 1
        self.feed(frame(R.RequestHeader(self.xid, op).encode() + body))
        return self.xid


def _check_bystander(core: Core, b: Client, n: int) -> None:
    x1 = b.request(
        OpCode.CREATE, R.CreateRequest(f"/by{n}", b"v", VALID[OpCode.CREATE][0].acl, 0).encode()
    )
    x2 = b.request(OpCode.GETDATA, R.GetDataRequest(f"/by{n}", False).encode())
    core.commit()
    got = [(xid, err, rest) for xid, _z, err, rest in b.replies() if xid > 0]
    assert [(xid, err) for xid, err, _ in got] == [(x1, 0), (x2, 0)]
    assert R.GetDataResponse.decode_from(got[1][2], 0)[0].data == b"v"


_REQUEST = st.sampled_from([*KNOWN_OPS, 999, -100]).flatmap(
    lambda op: st.tuples(st.just(op), bodies_for(op))
)
FRAMES = st.lists(
    st.one_of(
        _REQUEST,
        _REQUEST,
        _REQUEST,
        st.tuples(st.just(None), st.binary(max_size=24)),  # unframed garbage
    ),
    min_size=1,
    max_size=6,
)


@FUZZ
@given(FRAMES, st.integers(1, 7), st.booleans())
def test_core_answers_or_closes_and_a_bystander_is_undisturbed(
    frames: list[tuple[int | None, bytes]], chunk: int, late_commit: bool
) -> None:
    core = Core(sync=not late_commit)
    bystander = Client(core, 1)
    bystander.handshake()
    _check_bystander(core, bystander, 0)
    x = Client(core, 2)
    x.handshake()
    stream = b""
    for op, body in frames:
        if op is None:
            stream += body
        else:
            x.xid += 1
            stream += frame(R.RequestHeader(x.xid, op).encode() + body)
    for i in range(0, len(stream), chunk):
        x.feed(stream[i : i + chunk])  # must never raise
        if late_commit and i % (3 * chunk) == 0:
            core.commit()
    core.commit()
    x.replies()  # every frame written is a well-formed reply or event
    if not x.conn.closed and x.conn.decoder.buffered == 0:
        # frame-aligned (no half frame of garbage pending): a ping is answered
        x.feed(frame(R.RequestHeader(Xid.PING, OpCode.PING).encode()))
        core.commit()
        rs = x.replies()
        assert x.conn.closed or any(xid == Xid.PING for xid, *_ in rs)
    _check_bystander(core, bystander, 1)
    assert not bystander.conn.closed


def _null_variants(rec: Record) -> list[Record]:
    """``rec`` with each field the wire can send as null (a ustring, buffer or vector: length
    -1) null in turn, then all of them; a vector of strings with a null string; an ACL whose
    id's scheme and id are null."""
    nullable = [n for n, t in rec.FIELDS if t in (USTRING, BUFFER) or isinstance(t, Vector)]
    out = [dataclasses.replace(rec, **{n: None}) for n in nullable]
    out.append(dataclasses.replace(rec, **{n: None for n in nullable}))
    for n, t in rec.FIELDS:
        if isinstance(t, Vector) and t.item is USTRING:
            out.append(dataclasses.replace(rec, **{n: ("/a", None)}))
        elif isinstance(t, Vector) and n == "acl":
            out.append(dataclasses.replace(rec, **{n: (R.ACL(31, R.Id(None, None)),)}))
    return out


NULL_CASES = [
    (op, variant)
    for op, recs in sorted(VALID.items())
    for v in recs
    for variant in _null_variants(v)
] + [
    (OpCode.MULTI, encode_request([(op, variant)]))
    for op in sorted(MULTI_RECORDS)
    if op in VALID
    for variant in _null_variants(VALID[op][0])
]


@pytest.mark.parametrize("case", range(len(NULL_CASES)))
def test_null_fields_are_answered_without_an_internal_error(case: int) -> None:
    """Every request whose strings, buffers or vectors are null (alone in a frame or as a
    multi's op) is answered, or closes its connection, as the protocol decides: the core never
    raises. (Compiled with mypyc, a null where an annotation says ``str`` raises TypeError,
    which the shell would log as an internal error and answer by closing the connection.)"""
    op, body = NULL_CASES[case]
    core = Core()
    bystander = Client(core, 1)
    bystander.handshake()
    x = Client(core, 2)
    x.handshake()
    payload = body if isinstance(body, bytes) else body.encode()
    x.request(op, payload)  # must not raise
    core.commit()
    x.replies()
    _check_bystander(core, bystander, 0)


CONNECT = R.ConnectRequest(0, 0, 30000, 0, bytes(16)).encode()


@pytest.mark.slow
@FUZZ
@given(
    st.one_of(st.sampled_from([CONNECT, CONNECT + b"\0"]).flatmap(mutated), st.binary(max_size=40)),
    FRAMES,
    st.integers(1, 9),
)
# a reconnect to the bystander's session from a client that has seen a newer zxid: refused
# before the bystander's connection is closed
@example(R.ConnectRequest(0, 1 << 56, 30000, 0x100000000000000, bytes(16)).encode(), [], 1)
def test_core_handshake_fuzz_never_raises(
    connect: bytes, frames: list[tuple[int | None, bytes]], chunk: int
) -> None:
    """A connection whose ConnectRequest is malformed (or garbage, or a reconnect to a session
    id that does not exist), then anything: no exception escapes, the bystander carries on."""
    core = Core()
    bystander = Client(core, 1)
    bystander.handshake()
    x = Client(core, 2)
    stream = frame(connect)
    for op, body in frames:
        stream += body if op is None else frame(R.RequestHeader(1, op).encode() + body)
    for i in range(0, len(stream), chunk):
        x.feed(stream[i : i + chunk])
    core.commit()
    try:
        req = R.ConnectRequest.decode_from(connect, 0)[0]
        named, seen = req.sessionId, req.lastZxidSeen
    except JuteDecodeError:
        named = seen = 0
    if named == bystander.conn.session_id and seen <= core.front.tree.last_processed_zxid:
        # A ConnectRequest naming the bystander's session closes its connection before the
        # password is checked, as ZooKeeperServer.processConnectRequest does (CLIENT_RECONNECT);
        # one that has seen a newer zxid is refused before that (CLIENT_ZXID_AHEAD), and the
        # bystander carries on.
        assert bystander.conn.closed
    else:
        _check_bystander(core, bystander, 2)
    core.node.sequencer.tick(10**9, 10**9)  # every session expires: no exception either
    core.commit(10**9)
    assert bystander.conn.closed


# ----------------------------------------------------------------------------- fast reads


def _child(i: int) -> str:
    return f"/e/c{i}" + "\u00e9" * (i % 3)


def _fast_read_tree() -> DataTree:
    """Nodes a fast read meets: world-readable with data, null data, empty data; one only
    a digest user may read; a path with a non-ASCII name; one with NUL (exists: BADARGUMENTS)."""
    from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE

    tree = DataTree()
    secret = (R.ACL(31, R.Id("digest", "u:x")),)
    for i, (path, data, acl) in enumerate(
        [
            ("/a", b"data", OPEN_ACL_UNSAFE),
            ("/a/n", None, OPEN_ACL_UNSAFE),
            ("/e", b"", OPEN_ACL_UNSAFE),
            ("/s", b"secret", secret),
            ("/\u00e9", b"x" * 40, (R.ACL(1, R.Id("world", "anyone")),)),
            ("/z\u0000", b"", OPEN_ACL_UNSAFE),  # only a tree built by hand has one
        ]
    ):
        tree.create_node(path, data, acl, 0, -1, i + 1, 1000 + i)
    for i in range(60):  # a children table past the small sizes, non-ASCII names among them
        tree.create_node(_child(i), b"", OPEN_ACL_UNSAFE, 0, -1, 10 + i, 1)
    return tree


FAST_PATHS = ["/a", "/a/n", "/e", "/s", "/\u00e9", "/", "", "/missing", "/z\u0000", "a"]


@FUZZ
@given(
    st.sampled_from([OpCode.GETDATA, OpCode.EXISTS, OpCode.GETCHILDREN, OpCode.GETCHILDREN2]),
    st.sampled_from(FAST_PATHS).flatmap(
        lambda p: st.one_of(
            st.builds(lambda w: R.GetDataRequest(p, w).encode(), st.booleans()),
            st.builds(lambda w: R.GetDataRequest(p, w).encode(), st.booleans()).flatmap(mutated),
        )
    ),
)
def test_fast_reads_answer_as_the_general_path(op: int, body: bytes) -> None:
    # GetDataRequest, ExistsRequest and GetChildren(2)Request share one layout (path, watch)
    from trizk.server.common.servermetrics import SummarySet
    from trizk.server.frontend.reads import FAST_READS, ReadContext, ReadError
    from trizk.server.frontend.watches import WatchManager

    frame = struct.pack(">ii", 5, op) + body

    def run(fast: bool) -> tuple[object, object, object, dict[str, int]]:
        tree, watches, stats = _fast_read_tree(), WatchManager(), SummarySet(False, None)
        answer: object
        if fast:
            answer = FAST_READS[op](frame, tree, watches, "w", stats)
            if answer is None:
                return None, {}, {}, {}
        else:
            cls, fn = READ_OPS[op]
            ctx = ReadContext(tree, watches, "w", 1, [("ip", "127.0.0.1")], read_stats=stats)
            try:
                rsp = fn(decode_body(cls, frame), ctx)  # type: ignore[arg-type]
                answer = rsp.encode() if rsp is not None else b""
            except (ReadError, JuteDecodeError, ValueError) as e:
                answer = type(e).__name__
        counts = {k: s.count for k, s in stats.by_key.items()}
        return answer, watches.data.by_path, watches.child.by_path, counts

    fast = run(True)
    if fast[0] is not None:
        assert fast == run(False)


def test_node_caches_follow_every_change() -> None:
    # the cached Stat bytes, getData body and world permissions of a node are rebuilt after
    # each kind of change: its data, its ACL, its children
    from trizk.storage.tree.datatree import DataNode

    def fresh(n: DataNode) -> tuple[bytes, bytes, int]:
        copy = DataNode(n.data, n.acl)
        for name in ("czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "cversion"):
            setattr(copy, name, getattr(n, name))
        copy.aversion, copy.children = n.aversion, n.children
        return copy.stat_wire(), copy.read_wire(), copy.world_perms()

    tree = _fast_read_tree()
    node = tree.get("/a")
    assert node is not None
    secret = (R.ACL(31, R.Id("digest", "u:x")),)
    changes: list[tuple[int, Record]] = [
        (OpCode.SETDATA, R.SetDataTxn("/a", b"new data", 1)),
        (OpCode.SETACL, R.SetACLTxn("/a", secret, 1)),
        (OpCode.CREATE, R.CreateTxn("/a/m", b"", secret, False, -1)),
        (OpCode.DELETE, R.DeleteTxn("/a/m")),
    ]
    for i, (typ, txn) in enumerate(changes):
        before = (node.stat_wire(), node.read_wire(), node.world_perms())
        rc = tree.apply(R.TxnHeader(1, i, 100 + i, 5000 + i, typ), txn)
        assert rc.err == 0
        after = (node.stat_wire(), node.read_wire(), node.world_perms())
        assert after != before and after == fresh(node)
    assert node.world_perms() == 0
    assert R.Stat.decode(node.stat_wire()) == node.stat()


def test_children_reply_cache_follows_every_change() -> None:
    # the cached getChildren body is rebuilt when a child comes or goes (and only then)
    tree = _fast_read_tree()
    node = tree.get("/e")
    assert node is not None

    def fresh() -> tuple[bytes, int]:
        names = tuple(node.child_names())
        return R.GetChildrenResponse(names).encode(), sum(map(len, names))

    assert node.children_wire() == fresh()
    for i in range(200):
        zxid = 1000 + i
        if i % 3 == 2 and i < 60:
            txn: Record = R.DeleteTxn(_child(i))
            typ = OpCode.DELETE
        else:
            txn, typ = R.CreateTxn(f"/e/n{i}", b"", (), False, -1), OpCode.CREATE
        cached = node.children_wire()
        assert tree.apply(R.TxnHeader(1, i, zxid, 5000 + i, typ), txn).err == 0
        assert node.children_wire() == fresh() != cached
    rc = tree.apply(R.TxnHeader(1, 0, 2000, 6000, OpCode.SETDATA), R.SetDataTxn("/e", b"x", 1))
    assert rc.err == 0
    assert node.children_wire() == fresh()
    empty = tree.get("/a/n")
    assert empty is not None and empty.children_wire() == (b"\x00\x00\x00\x00", 0)


def test_large_data_reply_bodies_are_not_cached() -> None:
    # the cache copies the data: only small nodes keep their getData body
    from trizk.storage.tree.datatree import READ_CACHE_MAX, DataNode

    small, large = DataNode(b"s" * READ_CACHE_MAX, ()), DataNode(b"l" * (READ_CACHE_MAX + 1), ())
    assert small.read_wire() is small.read_wire()
    body = large.read_wire()
    assert body == large.read_wire() and body is not large.read_wire()
    assert R.GetDataResponse.decode(body).data == large.data


# ----------------------------------------------------------------------------- fast setData

_OPEN = (R.ACL(31, R.Id("world", "anyone")),)
#: (path, data, ACL, flags) of the nodes a fast setData meets: world-writable with data and a
#: child, null data, an ACL only a digest user passes, world READ only, a non-ASCII name, an
#: ephemeral
_SET_NODES = [
    ("/a", b"data", _OPEN, 0),
    ("/a/c", b"", _OPEN, 0),
    ("/n", None, _OPEN, 0),
    ("/s", b"secret", (R.ACL(31, R.Id("digest", "u:x")),), 0),
    ("/r", b"read", (R.ACL(1, R.Id("world", "anyone")),), 0),
    ("/\u00e9", b"x" * 40, _OPEN, 0),
    ("/e", b"eph", _OPEN, 1),
]
SET_PATHS = [p for p, *_ in _SET_NODES] + ["/", "", "/missing", "/a/", "a", "/zookeeper/quota"]


def _set_data_run(
    fast: bool, body: bytes, pending: str | None, session: str, quota: bool
) -> tuple[object, ...]:
    """A setData of ``body`` from a session in state ``session``, after a setData of
    ``pending`` that is not committed yet: everything the core said and did."""
    core = Core(sync=False, config=CoreConfig(enforce_quota=quota))
    c = Client(core, 1)
    c.handshake()
    for path, data, acl, flags in _SET_NODES:
        c.request(OpCode.CREATE, R.CreateRequest(path, data, acl, flags).encode())
    core.commit()
    if pending is not None:
        c.request(OpCode.SETDATA, R.SetDataRequest(pending, b"pending", -1).encode())
    seq = core.node.sequencer
    s = seq.sessions.sessions[c.conn.session_id]
    if session == "closing":
        s.closing = True
    elif session == "moved":
        s.owner = 12345
    elif session == "unattached":
        s.owner = None
    proposed: list[tuple[bytes, bytes, int]] = []
    committer = seq.committer

    class Recording:
        """The sequencer's committer, recording what it is handed. (Seams, not mock.patch:
        the sequencer may be compiled by mypyc, and its calls then do not go through
        patched module or instance attributes.)"""

        def propose(self, p: Proposal) -> None:
            proposed.append((p.hdr.encode(), p.txn.encode() if p.txn else b"", p.digest))
            committer.propose(p)

    seq.committer = Recording()
    seq.fast_set_data = fast
    try:
        c.request(OpCode.SETDATA, body)
    finally:
        seq.committer = committer
        seq.fast_set_data = True
    pv = seq.pending
    records = [(r.zxid, r.path, r.digest, r.data, r.version, r.mzxid, r.mtime) for r in pv.ordered]
    state = (records, pv.digest, s.owner, s.closing, dict(core.node.stats.metrics.mntr_values()))
    core.commit(2000)
    return (state, proposed, c.replies(), core.node.replica.tree.digest)


@pytest.mark.slow
@FUZZ
@given(
    st.sampled_from(SET_PATHS).flatmap(
        lambda p: st.builds(
            lambda d, v: R.SetDataRequest(p, d, v).encode(),
            st.sampled_from([None, b"", b"new data"]),
            st.sampled_from([-1, 0, 1, 7]),
        ).flatmap(lambda b: st.one_of(st.just(b), mutated(b)))
    ),
    st.sampled_from([None, "/a", "/n", "/a/c"]),
    st.sampled_from(["ok", "ok", "closing", "moved", "unattached"]),
    st.booleans(),
)
def test_fast_set_data_prepares_as_the_general_path(
    body: bytes, pending: str | None, session: str, quota: bool
) -> None:
    # fast or not, a setData gives the same txn, pending records, digest, session state,
    # metrics, reply and tree
    assert _set_data_run(True, body, pending, session, quota) == _set_data_run(
        False, body, pending, session, quota
    )


def test_fast_set_data_prepares_every_plain_request_as_the_general_path() -> None:
    # every path, version and data a session in order may send, nothing pending: the cases
    # the fast path is made for, not left to the draw
    for path in SET_PATHS:
        for version in (-1, 0, 1):
            for data in (None, b"", b"x"):
                body = R.SetDataRequest(path, data, version).encode()
                fast = _set_data_run(True, body, None, "ok", False)
                assert fast == _set_data_run(False, body, None, "ok", False), (path, version)


def test_fast_set_data_takes_the_common_case() -> None:
    # (so the property above compares the fast path, not the general path with itself)
    from trizk.server.writes import prep

    pv = prep.PendingChanges(DataTree())
    pv.tree.create_node("/a", b"old", _OPEN, 0, -1, 1, 1000)
    pv.tree.create_node("/s", b"old", (R.ACL(31, R.Id("digest", "u:x")),), 0, -1, 2, 1000)
    head = R.RequestHeader(1, OpCode.SETDATA).encode()
    txn = prep.fast_set_data(head + R.SetDataRequest("/a", b"new", 0).encode(), pv, 7, 5000)
    assert txn == R.SetDataTxn("/a", b"new", 1)
    assert [(r.path, r.zxid, r.version, r.mtime) for r in pv.ordered] == [("/a", 7, 1, 5000)]
    for req in [
        R.SetDataRequest("/a", b"again", -1),  # pending now
        R.SetDataRequest("/s", b"new", -1),  # the ACL needs the client's ids
        R.SetDataRequest("/b", b"new", -1),  # missing
    ]:
        assert prep.fast_set_data(head + req.encode(), pv, 8, 5000) is None
    assert len(pv.ordered) == 1


def test_versions_wrap_as_java_ints() -> None:
    """ZooKeeper's version counters are Java ints bumped with a plain ``+ 1``
    (checkAndIncVersion, the create's parentCVersion++), and copyStat reports
    ``cversion * 2 - numChildren`` as an int: all wrap at 2**31 instead of failing. Both
    setData paths (the fast one and, with an ACL that needs the client's ids checked, the
    general one), setACL, and a create under a parent at the last cversion."""
    from trizk.server.writes import prep

    int_max, int_min = 0x7FFFFFFF, -0x80000000
    core = Core()
    c = Client(core, 1)
    c.handshake()
    # world:anyone may only read; the client writes as ip:127.0.0.1 (so: the general path)
    guarded = (R.ACL(1, R.Id("world", "anyone")), R.ACL(31, R.Id("ip", "127.0.0.1")))
    for path, acl in (("/fast", _OPEN), ("/general", guarded), ("/p", _OPEN)):
        c.request(OpCode.CREATE, R.CreateRequest(path, b"", acl, 0).encode())
    core.commit()
    c.replies()
    tree = core.front.tree
    for path in ("/fast", "/general"):
        node = tree.nodes[path]
        node.version = node.aversion = int_max
        node.touch()
    tree.nodes["/p"].cversion = int_max
    tree.nodes["/p"].touch()

    def answer(op: int, req: Record) -> tuple[int, bytes]:
        xid = c.request(op, req.encode())
        core.commit()
        ((x, _z, err, rest),) = [r for r in c.replies() if r[0] > 0]
        assert x == xid
        return err, rest

    def stat_of(rest: bytes) -> R.Stat:
        return R.Stat.decode_from(rest, 0)[0]

    def takes_fast_path(path: str) -> bool:
        """Whether the sequencer's fast path prepares this setData (asked on a pending view
        of its own, so nothing changes)."""
        frame = R.RequestHeader(1, OpCode.SETDATA).encode()
        frame += R.SetDataRequest(path, b"x", int_max).encode()
        return prep.fast_set_data(frame, prep.PendingChanges(tree), 1, 0) is not None

    assert core.node.sequencer.fast_set_data
    assert takes_fast_path("/fast") and not takes_fast_path("/general")
    for path in ("/fast", "/general"):
        node = tree.nodes[path]
        node.version = int_max
        node.touch()
        err, rest = answer(OpCode.SETDATA, R.SetDataRequest(path, b"x", int_max))
        assert err == 0 and stat_of(rest).version == int_min
        err, rest = answer(OpCode.SETDATA, R.SetDataRequest(path, b"y", int_min))
        assert err == 0 and stat_of(rest).version == int_min + 1
        err, rest = answer(OpCode.SETACL, R.SetACLRequest(path, _OPEN, int_max))
        assert err == 0 and stat_of(rest).aversion == int_min
    # the sequential suffix is the parent's cversion before the create (%010d); the parent's
    # cversion then stays: the wrapped value is lower (DataTree.createNode only moves it up)
    err, rest = answer(OpCode.CREATE, R.CreateRequest("/p/s", b"", _OPEN, 2))
    assert err == 0 and R.CreateResponse.decode_from(rest, 0)[0].path == "/p/s2147483647"
    err, rest = answer(OpCode.EXISTS, R.ExistsRequest("/p", False))
    assert err == 0 and stat_of(rest).cversion == -3  # (2**31 - 1) * 2 - 1 as an int
