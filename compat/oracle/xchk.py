"""Cross-check proxy: ``trizk-xchk --listen H:P --oracle ZH:ZP --candidate CH:CP``.

Theory of operation
-------------------
Clients connect to the proxy as if it were a ZooKeeper server. Every client connection is
mirrored onto two server connections: the *oracle* (Apache ZooKeeper) and the *candidate*
(trizk). The client only ever sees the oracle: its handshake answer, its replies and its watch
events, byte for byte. The candidate gets the same frames (rewritten only where the protocol
carries server-specific ids, below) and its answers are compared with the oracle's and dropped.

Ordering. With ``lockstep`` (the default) the proxy forwards one request at a time *across all
sessions*: a request (or handshake) is sent to both servers and the next one is forwarded only
when both have answered (or ``reply_timeout`` passed). Both servers then see one and the same
global order of operations, so zxids, sequential suffixes, reply-header zxids of reads and the
position of every watch event in its session's stream are deterministic and can be compared
exactly. ``--pipelined`` forwards as fast as the client sends; the servers may then order
concurrent sessions differently, so reply-header zxids are not compared and event positions
are ignored (body and error comparisons remain, and may report ordering races). In both modes
the client gets a reply only once both servers answered its request (bounded by the reply
timeout): a client reading after its own write, on another session, then finds the write on
both servers.

Pairing. Each server connection has its own FIFO of forwarded requests; a reply is paired with
the oldest outstanding request of the same xid (ZooKeeper answers a session's requests in order;
auth replies may overtake). A request is compared once both sides answered; a side whose
connection closed counts as "no reply". Watch events (xid -1) are paired by their index in the
session's event stream.

Normalisation (as :mod:`trizk.compat.oracle.normalise`): session ids are mapped by the handshake
(oracle sid <-> candidate sid), and any other id in ``ephemeralOwner`` by order of appearance;
``ctime``/``mtime`` are compared only for sign; zxids (reply headers, czxid, mzxid, pzxid) are
learned online as an *order-preserving bijection*: a new pair (o, c) must fit between the
images of its neighbours, and a known o must map to the same c. -1 and 0 are constants. Child
lists are compared in the order sent (ZooKeeper's HashSet order, which trizk reproduces), or
sorted with ``--sort-children``. Everything else (error codes, data, versions, counts, paths,
event type/state/path, connect timeouts) must be equal.

Rewriting for the candidate: a re-connect handshake carries the oracle's session id, password
and last zxid; the candidate gets its own session id/password and the mapped zxid. SetWatches
(xid -8) carries a relative zxid, mapped the same way. Nothing else is rewritten.

Divergences are logged (stderr line + optional JSON lines file) with the request that caused
them and counted; the summary is printed on exit (SIGINT/SIGTERM, or after ``--max-sessions``
sessions ended).

Exit status of the command: 0 when no divergence was seen, 1 otherwise.

Bounds: frames over ``jute.maxbuffer`` (plus header slack) abort the connection; at most
``max_outstanding`` requests per session are in flight (the client is not read beyond that);
unpaired events per session, the id maps and the divergence list are capped; every wait has a
timeout. Every address (listen, oracle, candidate) must be a loopback address.
"""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import json
import signal
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import trio
from sortedcontainers import SortedDict

from trizk.jute import multi
from trizk.jute.codes import OpCode
from trizk.jute.framing import FrameDecoder, FrameTooLarge, frame
from trizk.jute.primitives import JuteDecodeError
from trizk.jute.records import (
    ConnectRequest,
    ConnectResponse,
    Create2Response,
    CreateResponse,
    ExistsResponse,
    GetACLResponse,
    GetAllChildrenNumberResponse,
    GetChildren2Response,
    GetChildrenResponse,
    GetDataResponse,
    GetEphemeralsResponse,
    ReplyHeader,
    RequestHeader,
    SetACLResponse,
    SetDataResponse,
    SetWatches,
    SetWatches2,
    SyncResponse,
    WatcherEvent,
    WhoAmIResponse,
)

MAX_FRAME = 0xFFFFF + 1024
NOTIFICATION_XID = -1
SET_WATCHES_XID = -8
ZXID_FIELDS = frozenset({"zxid", "czxid", "mzxid", "pzxid"})
TIME_FIELDS = frozenset({"ctime", "mtime"})
SESSION_FIELDS = frozenset({"ephemeralOwner", "sessionId"})
CONST_IDS = frozenset({-1, 0})

# ------------------------------------------------------------------------------ pure core


class Bijection:
    """A bijection learned from observed pairs; optionally order-preserving (for zxids)."""

    def __init__(
        self, ordered: bool, constants: frozenset[int] = CONST_IDS, max_entries: int = 1_000_000
    ) -> None:
        self.ordered = ordered
        self.constants = constants
        self.max_entries = max_entries
        self.fwd: SortedDict = SortedDict()
        self.back: dict[int, int] = {}

    def _learn(self, o: int, c: int) -> None:
        self.fwd[o] = c
        self.back[c] = o
        if len(self.fwd) > self.max_entries:
            # Bound memory: forget the oldest tenth (smallest oracle values). Later checks then
            # only see the remaining neighbours, which is all the order check needs.
            for _ in range(self.max_entries // 10):
                _, old_c = self.fwd.popitem(0)
                self.back.pop(old_c, None)

    def check(self, o: int, c: int) -> str | None:
        """Learn (o, c) or explain why it contradicts what was learned."""
        if o in self.constants or c in self.constants:
            return None if o == c else f"{o:#x} vs {c:#x} (constant)"
        known = self.fwd.get(o)
        if known is not None:
            return None if known == c else f"{o:#x} maps to {known:#x}, candidate sent {c:#x}"
        if c in self.back:
            return f"candidate {c:#x} already stands for oracle {self.back[c]:#x}, not {o:#x}"
        if self.ordered:
            i = self.fwd.bisect_left(o)
            if i > 0 and self.fwd.peekitem(i - 1)[1] >= c:
                lo = self.fwd.peekitem(i - 1)
                return f"order: oracle {lo[0]:#x}<{o:#x} but candidate {lo[1]:#x}>={c:#x}"
            if i < len(self.fwd) and self.fwd.peekitem(i)[1] <= c:
                hi = self.fwd.peekitem(i)
                return f"order: oracle {o:#x}<{hi[0]:#x} but candidate {c:#x}>={hi[1]:#x}"
        self._learn(o, c)
        return None

    def to_candidate(self, o: int) -> int:
        """Best image of an oracle value: exact, else that of the largest known value below it
        (a client's lastZxidSeen must not exceed what the candidate has)."""
        if o in self.constants:
            return o
        if o in self.fwd:
            return int(self.fwd[o])
        i = self.fwd.bisect_left(o)
        return int(self.fwd.peekitem(i - 1)[1]) if i > 0 else 0


def _asdict(rec: Any) -> Any:
    if dataclasses.is_dataclass(rec) and not isinstance(rec, type):
        return dataclasses.asdict(rec)
    return rec


def _decode_multi(b: bytes, pos: int) -> list[dict[str, Any]]:
    results, _ = multi.decode_response(b, pos, max_results=100_000)
    out: list[dict[str, Any]] = []
    for res in results:
        entry: dict[str, Any] = {"type": res.type, "err": res.err}
        if res.body is not None:
            entry["body"] = _asdict(res.body)
        out.append(entry)
    return out


#: Reply body record by request opcode (FinalRequestProcessor's switch); absent = empty body.
REPLY_BODIES: dict[int, Any] = {
    OpCode.CREATE: CreateResponse,
    OpCode.CREATE2: Create2Response,
    OpCode.CREATECONTAINER: Create2Response,
    OpCode.CREATETTL: Create2Response,
    OpCode.EXISTS: ExistsResponse,
    OpCode.GETDATA: GetDataResponse,
    OpCode.SETDATA: SetDataResponse,
    OpCode.GETACL: GetACLResponse,
    OpCode.SETACL: SetACLResponse,
    OpCode.GETCHILDREN: GetChildrenResponse,
    OpCode.GETCHILDREN2: GetChildren2Response,
    OpCode.SYNC: SyncResponse,
    OpCode.GETEPHEMERALS: GetEphemeralsResponse,
    OpCode.GETALLCHILDRENNUMBER: GetAllChildrenNumberResponse,
    OpCode.WHOAMI: WhoAmIResponse,
}
MULTI_OPS = frozenset({OpCode.MULTI, OpCode.MULTIREAD})
#: Requests whose body starts with a path (for the divergence log).
PATH_OPS = frozenset(
    int(o)
    for o in (
        OpCode.CREATE, OpCode.DELETE, OpCode.EXISTS, OpCode.GETDATA, OpCode.SETDATA,
        OpCode.GETACL, OpCode.SETACL, OpCode.GETCHILDREN, OpCode.SYNC, OpCode.GETCHILDREN2,
        OpCode.CHECK, OpCode.CREATE2, OpCode.CREATECONTAINER, OpCode.DELETECONTAINER,
        OpCode.CREATETTL, OpCode.CHECKWATCHES, OpCode.REMOVEWATCHES, OpCode.GETEPHEMERALS,
        OpCode.GETALLCHILDRENNUMBER, OpCode.ADDWATCH,
    )
)  # fmt: skip


def decode_reply(op: int, payload: bytes) -> dict[str, Any]:
    """ReplyHeader + body (by the request's opcode) as plain data; undecodable tails as hex."""
    hdr, pos = ReplyHeader.decode_from(payload, 0)
    out: dict[str, Any] = {"xid": hdr.xid, "zxid": hdr.zxid, "err": hdr.err}
    if hdr.err != 0 and op not in MULTI_OPS:
        if pos < len(payload):
            out["tail"] = payload[pos:].hex()
        return out
    try:
        if op in MULTI_OPS:
            out["results"] = _decode_multi(payload, pos)
            return out
        body = REPLY_BODIES.get(op)
        if body is not None:
            rec, pos = body.decode_from(payload, pos)
            out["body"] = _asdict(rec)
    except JuteDecodeError:
        out["undecodable"] = payload[pos:].hex()
        return out
    if pos < len(payload):
        out["tail"] = payload[pos:].hex()
    return out


def describe_request(payload: bytes) -> dict[str, Any]:
    """xid, opcode name, path (when the op has one) of a request frame, for the log."""
    try:
        hdr, pos = RequestHeader.decode_from(payload, 0)
    except JuteDecodeError:
        return {"raw": payload[:64].hex()}
    try:
        name = OpCode(hdr.type).name.lower()
    except ValueError:
        name = str(hdr.type)
    out: dict[str, Any] = {"xid": hdr.xid, "op": name}
    if hdr.type in PATH_OPS and len(payload) >= pos + 4:
        n = int.from_bytes(payload[pos : pos + 4], "big", signed=True)
        if 0 <= n <= 4096:
            out["path"] = payload[pos + 4 : pos + 4 + n].decode("utf-8", "replace")
    elif hdr.type in MULTI_OPS:
        out["ops"] = _describe_multi(payload, pos)
    return out


def _describe_multi(payload: bytes, pos: int) -> list[str]:
    """``["create /a", "setdata /b", ...]`` for a multi/multiRead request (best effort)."""
    ops: list[str] = []
    try:
        while len(ops) < 1000:
            typ, done, _, rec, pos = multi.read_op(payload, pos, multi.REQUEST_RECORDS)
            if done:
                break
            if rec is None:
                ops.append(f"op{typ} ?")
                break
            try:
                name = OpCode(typ).name.lower()
            except ValueError:
                name = str(typ)
            ops.append(f"{name} {getattr(rec, 'path', None)}")
    except JuteDecodeError:
        ops.append("<undecodable>")
    return ops


@dataclass
class Divergence:
    kind: str
    session: str
    request: dict[str, Any] | None
    detail: str
    oracle: Any = None
    candidate: Any = None


class Checker:
    """The comparison core: id maps, normalised comparison, divergence records. No I/O."""

    def __init__(self, *, sort_children: bool = False, compare_header_zxid: bool = True) -> None:
        self.zxids = Bijection(ordered=True)
        self.sessions = Bijection(ordered=False, constants=frozenset({0}))
        self.sort_children = sort_children
        self.compare_header_zxid = compare_header_zxid
        self.divergences: list[Divergence] = []
        self.counts: Counter[str] = Counter()
        self.compared = 0
        self.events_compared = 0
        self.sink: Callable[[Divergence], None] | None = None

    def record(self, d: Divergence) -> None:
        self.counts[d.kind] += 1
        if len(self.divergences) < 10_000:
            self.divergences.append(d)
        if self.sink is not None:
            self.sink(d)

    # -- structural comparison -------------------------------------------------------------
    def diff(self, o: Any, c: Any, where: str, out: list[str]) -> None:
        if isinstance(o, dict) and isinstance(c, dict):
            if o.keys() != c.keys():
                out.append(f"{where}: fields {sorted(o)} vs {sorted(c)}")
                return
            for k in o:
                ov, cv = o[k], c[k]
                w = f"{where}.{k}" if where else k
                if (
                    k == "children"
                    and isinstance(ov, list | tuple)
                    and isinstance(cv, list | tuple)
                ):
                    if self.sort_children:
                        ov, cv = sorted(ov), sorted(cv)
                    if list(ov) != list(cv):
                        out.append(f"{w}: {list(ov)[:20]} vs {list(cv)[:20]}")
                    continue
                if isinstance(ov, int) and isinstance(cv, int) and not isinstance(ov, bool):
                    if k in ZXID_FIELDS:
                        if k == "zxid" and where == "" and not self.compare_header_zxid:
                            continue
                        why = self.zxids.check(ov, cv)
                        if why:
                            out.append(f"{w}: zxid {why}")
                        continue
                    if k in TIME_FIELDS:
                        if (ov > 0) != (cv > 0) or (ov <= 0 and ov != cv):
                            out.append(f"{w}: {ov} vs {cv}")
                        continue
                    if k in SESSION_FIELDS:
                        why = self.sessions.check(ov, cv)
                        if why:
                            out.append(f"{w}: session {why}")
                        continue
                self.diff(ov, cv, w, out)
            return
        if isinstance(o, list | tuple) and isinstance(c, list | tuple):
            if len(o) != len(c):
                out.append(f"{where}: {len(o)} items vs {len(c)}")
                return
            for i, (a, b) in enumerate(zip(o, c, strict=True)):
                self.diff(a, b, f"{where}[{i}]", out)
            return
        if o != c:
            out.append(f"{where}: {_short(o)} vs {_short(c)}")

    # -- entry points ----------------------------------------------------------------------
    def compare_connect(
        self, session: str, o: ConnectResponse, c: ConnectResponse, o_tail: bytes, c_tail: bytes
    ) -> None:
        problems = []
        if o.protocolVersion != c.protocolVersion:
            problems.append(f"protocolVersion {o.protocolVersion} vs {c.protocolVersion}")
        if o.timeOut != c.timeOut:
            problems.append(f"timeOut {o.timeOut} vs {c.timeOut}")
        if (o.sessionId == 0) != (c.sessionId == 0):
            problems.append(f"sessionId {o.sessionId:#x} vs {c.sessionId:#x}")
        else:
            why = self.sessions.check(o.sessionId, c.sessionId)
            if why:
                problems.append(f"sessionId {why}")
        if len(o.passwd or b"") != len(c.passwd or b""):
            problems.append(f"passwd length {len(o.passwd or b'')} vs {len(c.passwd or b'')}")
        if o_tail != c_tail:
            problems.append(f"readOnly tail {o_tail.hex()} vs {c_tail.hex()}")
        if problems:
            self.record(
                Divergence(
                    "connect",
                    session,
                    {"op": "connect"},
                    "; ".join(problems),
                    _asdict(o),
                    _asdict(c),
                )
            )

    def compare_reply(self, session: str, req: dict[str, Any], op: int, o: bytes, c: bytes) -> None:
        self.compared += 1
        try:
            od, cd = decode_reply(op, o), decode_reply(op, c)
        except JuteDecodeError as e:
            if o != c:
                self.record(Divergence("undecodable", session, req, str(e), o.hex(), c.hex()))
            return
        if od["err"] != cd["err"]:
            self.record(Divergence("err", session, req, f"err {od['err']} vs {cd['err']}", od, cd))
            return
        problems: list[str] = []
        self.diff(od, cd, "", problems)
        if problems:
            kind = "zxid" if all(": zxid " in p for p in problems) else "reply"
            self.record(Divergence(kind, session, req, "; ".join(problems[:10]), od, cd))

    def compare_event(
        self, session: str, index: int, o: bytes, c: bytes, positions: tuple[int, int] | None
    ) -> None:
        self.events_compared += 1
        try:
            oh, p1 = ReplyHeader.decode_from(o, 0)
            ch, p2 = ReplyHeader.decode_from(c, 0)
            oe, _ = WatcherEvent.decode_from(o, p1)
            ce, _ = WatcherEvent.decode_from(c, p2)
        except JuteDecodeError as e:
            if o != c:
                self.record(Divergence("event", session, None, f"undecodable: {e}"))
            return
        problems: list[str] = []
        if (oe.type, oe.state, oe.path) != (ce.type, ce.state, ce.path):
            problems.append(
                f"event {oe.type}/{oe.state}/{oe.path} vs {ce.type}/{ce.state}/{ce.path}"
            )
        why = self.zxids.check(oh.zxid, ch.zxid)
        if why or oh.err != ch.err:
            problems.append(f"header zxid/err {oh.zxid:#x}/{oh.err} vs {ch.zxid:#x}/{ch.err}")
        if positions is not None and positions[0] != positions[1]:
            problems.append(
                f"position: after {positions[0]} replies (oracle) vs {positions[1]} (candidate)"
            )
        if problems:
            self.record(
                Divergence(
                    "event",
                    session,
                    {"event_index": index},
                    "; ".join(problems),
                    _asdict(oe),
                    _asdict(ce),
                )
            )

    def summary(self) -> dict[str, Any]:
        return {
            "divergences": sum(self.counts.values()),
            "by_kind": dict(self.counts),
            "replies_compared": self.compared,
            "events_compared": self.events_compared,
        }


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 120 else s[:117] + "..."


def is_four_letter_word(first4: bytes) -> bool:
    return len(first4) == 4 and all(97 <= b <= 122 for b in first4)


# ------------------------------------------------------------------------------ Trio shell


@dataclass
class _Pending:
    xid: int
    op: int
    desc: dict[str, Any]
    replies: dict[str, bytes | None] = field(default_factory=dict)  # side -> payload / None
    done: trio.Event = field(default_factory=trio.Event)


class _Side:
    """One server connection of a mirrored session."""

    def __init__(self, name: str, stream: trio.SocketStream | None) -> None:
        self.name = name
        self.stream = stream
        self.queue: deque[_Pending] = deque()
        self.events: deque[tuple[bytes, int]] = deque()  # unpaired (payload, replies-before)
        self.replies = 0
        self.closed = stream is None


class Proxy:
    def __init__(
        self,
        oracle: tuple[str, int],
        candidate: tuple[str, int],
        checker: Checker,
        *,
        lockstep: bool = True,
        reply_timeout: float = 10.0,
        grace: float = 3.0,
        max_sessions: int | None = None,
        max_outstanding: int = 1000,
        connect_timeout: float = 5.0,
    ) -> None:
        self.oracle = oracle
        self.candidate = candidate
        self.checker = checker
        self.lockstep = lockstep
        self.reply_timeout = reply_timeout
        self.grace = grace
        self.max_sessions = max_sessions
        self.max_outstanding = max_outstanding
        self.connect_timeout = connect_timeout
        self.order = trio.Lock()
        self.sessions_ended = 0
        self.sessions_started = 0
        self.active = 0
        self.all_done = trio.Event()
        self._cancel: trio.CancelScope | None = None
        # oracle session id -> (candidate session id, candidate password)
        self.session_table: dict[int, tuple[int, bytes | None]] = {}

    # -- serving -----------------------------------------------------------------------------
    async def serve(
        self, host: str, port: int, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen and mirror until cancelled or ``max_sessions`` sessions have ended."""
        listeners = await trio.open_tcp_listeners(port, host=host)
        with trio.CancelScope() as scope:
            self._cancel = scope
            async with trio.open_nursery() as nursery:
                task_status.started(listeners[0].socket.getsockname()[1])
                nursery.start_soon(trio.serve_listeners, self._handle, listeners)
                await self.all_done.wait()
                nursery.cancel_scope.cancel()

    async def _connect(self, addr: tuple[str, int]) -> trio.SocketStream | None:
        try:
            with trio.fail_after(self.connect_timeout):
                return await trio.open_tcp_stream(*addr)
        except (OSError, trio.TooSlowError):
            return None

    async def _handle(self, client: trio.SocketStream) -> None:
        self.sessions_started += 1
        self.active += 1
        label = f"conn{self.sessions_started}"
        try:
            await self._mirror(client, label)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except (trio.TooSlowError, JuteDecodeError) as e:
            # A server that does not answer the handshake in time, or garbage: drop the client
            # (as a dead server would) and keep serving the others.
            print(f"xchk: {label}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            with trio.CancelScope(shield=True):
                await client.aclose()
            self.active -= 1
            self.sessions_ended += 1
            if self.max_sessions is not None and self.sessions_ended >= self.max_sessions:
                self.all_done.set()

    async def _read_frame(
        self, stream: trio.SocketStream, dec: FrameDecoder, timeout: float | None
    ) -> bytes | None:
        while True:
            fr = dec.next_frame()
            if fr is not None:
                return fr
            if timeout is None:
                data = await stream.receive_some(65536)
            else:
                with trio.fail_after(timeout):
                    data = await stream.receive_some(65536)
            if not data:
                return None
            dec.feed(data)

    async def _mirror(self, client: trio.SocketStream, label: str) -> None:
        # ---- first frame: a four-letter word or a ConnectRequest
        cdec = FrameDecoder(MAX_FRAME)
        first = b""
        with trio.fail_after(self.reply_timeout):
            while len(first) < 4:
                data = await client.receive_some(65536)
                if not data:
                    return
                first += data
        if is_four_letter_word(first[:4]):
            await self._four_letter(client, first)
            return
        cdec.feed(first)
        try:
            hello = await self._read_frame(client, cdec, self.reply_timeout)
        except FrameTooLarge:
            return
        if hello is None:
            return
        o_stream = await self._connect(self.oracle)
        if o_stream is None:
            return  # the client sees a closed connection, as with a dead server
        c_stream = await self._connect(self.candidate)
        oracle, cand = _Side("oracle", o_stream), _Side("candidate", c_stream)
        try:
            await self._session(client, cdec, hello, oracle, cand, label)
        finally:
            with trio.CancelScope(shield=True):
                await o_stream.aclose()
                if c_stream is not None:
                    await c_stream.aclose()

    async def _four_letter(self, client: trio.SocketStream, first: bytes) -> None:
        o_stream = await self._connect(self.oracle)
        if o_stream is None:
            return
        async with o_stream:
            await o_stream.send_all(first[:4])
            total = 0
            with trio.move_on_after(self.reply_timeout):
                while total < MAX_FRAME:
                    data = await o_stream.receive_some(65536)
                    if not data:
                        break
                    total += len(data)
                    await client.send_all(data)

    def _candidate_hello(self, hello: bytes) -> bytes:
        """The client's ConnectRequest with the candidate's own session id, password, zxid."""
        try:
            req, pos = ConnectRequest.decode_from(hello, 0)
        except JuteDecodeError:
            return hello
        sid, pw = req.sessionId, req.passwd
        if sid in self.session_table:
            sid, pw = self.session_table[sid]
        z = self.checker.zxids.to_candidate(req.lastZxidSeen)
        mapped = dataclasses.replace(req, sessionId=sid, passwd=pw, lastZxidSeen=z)
        return mapped.encode() + hello[pos:]

    def _candidate_request(self, payload: bytes) -> bytes:
        """SetWatches carry the oracle's relative zxid: give the candidate its own."""
        try:
            hdr, pos = RequestHeader.decode_from(payload, 0)
            if hdr.type not in (OpCode.SETWATCHES, OpCode.SETWATCHES2):
                return payload
            rec_t = SetWatches if hdr.type == OpCode.SETWATCHES else SetWatches2
            rec, end = rec_t.decode_from(payload, pos)
        except JuteDecodeError:
            return payload
        z = self.checker.zxids.to_candidate(rec.relativeZxid)
        return payload[:pos] + dataclasses.replace(rec, relativeZxid=z).encode() + payload[end:]

    async def _session(
        self,
        client: trio.SocketStream,
        cdec: FrameDecoder,
        hello: bytes,
        oracle: _Side,
        cand: _Side,
        label: str,
    ) -> None:
        chk = self.checker
        odec, kdec = FrameDecoder(MAX_FRAME), FrameDecoder(MAX_FRAME)
        # ---- handshake, under the global order lock in lockstep mode
        async with self._ordered():
            assert oracle.stream is not None
            await oracle.stream.send_all(frame(hello))
            if cand.stream is not None:
                try:
                    await cand.stream.send_all(frame(self._candidate_hello(hello)))
                except (trio.BrokenResourceError, OSError):
                    cand.closed = True
            o_resp = await self._read_frame(oracle.stream, odec, self.reply_timeout)
            c_resp = None
            if cand.stream is not None and not cand.closed:
                try:
                    c_resp = await self._read_frame(cand.stream, kdec, self.reply_timeout)
                except (trio.TooSlowError, trio.BrokenResourceError, OSError, FrameTooLarge):
                    c_resp = None
        if o_resp is None:
            return
        try:
            o_conn, opos = ConnectResponse.decode_from(o_resp, 0)
        except JuteDecodeError:
            await client.send_all(frame(o_resp))
            return
        session = f"{o_conn.sessionId:#x}" if o_conn.sessionId else label
        if c_resp is None:
            chk.record(Divergence("connect", session, {"op": "connect"}, "candidate: no answer"))
            cand.closed = True
        else:
            try:
                c_conn, cpos = ConnectResponse.decode_from(c_resp, 0)
                chk.compare_connect(session, o_conn, c_conn, o_resp[opos:], c_resp[cpos:])
                if o_conn.sessionId and c_conn.sessionId:
                    self.session_table[o_conn.sessionId] = (c_conn.sessionId, c_conn.passwd)
                    if len(self.session_table) > 100_000:  # bound: forget the oldest session
                        del self.session_table[next(iter(self.session_table))]
            except JuteDecodeError as e:
                chk.record(Divergence("connect", session, {"op": "connect"}, f"candidate: {e}"))
        await client.send_all(frame(o_resp))
        if o_conn.sessionId == 0:
            return  # ZooKeeper closes after refusing a session

        window = trio.Semaphore(self.max_outstanding)
        ended = trio.Event()
        client_gone = False
        # The oracle's frames for the client, in order; a reply is held until the candidate
        # answered its request too (see _to_client).
        out = _ClientOut(self.max_outstanding + _MAX_EVENTS)

        async def from_client() -> None:
            try:
                while True:
                    payload = await self._read_frame(client, cdec, None)
                    if payload is None:
                        return
                    await window.acquire()
                    try:
                        hdr, _ = RequestHeader.decode_from(payload, 0)
                        xid, op = hdr.xid, hdr.type
                    except JuteDecodeError:
                        xid, op = 0, -999
                    p = _Pending(xid, op, describe_request(payload))
                    async with self._ordered():
                        oracle.queue.append(p)
                        assert oracle.stream is not None
                        await oracle.stream.send_all(frame(payload))
                        if not cand.closed and cand.stream is not None:
                            cand.queue.append(p)
                            try:
                                await cand.stream.send_all(frame(self._candidate_request(payload)))
                            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                                self._side_closed(cand, session)
                        else:
                            p.replies["candidate"] = None
                        if self.lockstep:
                            with trio.move_on_after(self.reply_timeout) as ms:
                                await p.done.wait()
                            if ms.cancelled_caught:
                                chk.record(
                                    Divergence(
                                        "slow_reply",
                                        session,
                                        p.desc,
                                        f"no pair of replies within {self.reply_timeout}s: "
                                        f"have {sorted(p.replies)}",
                                    )
                                )
            except (FrameTooLarge, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            finally:
                nonlocal client_gone
                client_gone = True
                ended.set()

        async def from_server(side: _Side, dec: FrameDecoder) -> None:
            assert side.stream is not None
            try:
                while True:
                    payload = await self._read_frame(side.stream, dec, None)
                    if payload is None:
                        break
                    await self._on_server_frame(side, oracle, cand, payload, out, session, window)
            except (FrameTooLarge, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            finally:
                self._side_closed(side, session)
                if side is oracle:
                    ended.set()

        async def forward_to_client() -> None:
            try:
                async for payload, pending in out.receive:
                    await self._to_client(client, payload, pending, session)
                    out.sent += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                out.broken = True

        async with trio.open_nursery() as nursery:
            nursery.start_soon(forward_to_client)
            nursery.start_soon(from_client)
            nursery.start_soon(from_server, oracle, odec)
            if not cand.closed:
                nursery.start_soon(from_server, cand, kdec)
            await ended.wait()
            # Give the candidate a bounded grace period to catch up, then account for the rest.
            # When the oracle closed the connection itself (closeSession, a protocol error), the
            # candidate must close it too.
            server_closed = oracle.closed and not client_gone
            deadline = trio.current_time() + self.grace
            while trio.current_time() < deadline:
                # Caught up: every forwarded request answered by the candidate, and every event
                # paired (an unpaired oracle event may still be on its way from the candidate).
                events_paired = not oracle.events and not cand.events
                caught_up = not cand.queue and (cand.closed or events_paired)
                forwarded = out.broken or out.sent == out.queued
                if caught_up and forwarded and (not oracle.queue or oracle.closed):
                    if not server_closed or cand.closed:
                        break
                await trio.sleep(0.01)
            if server_closed and not cand.closed:
                chk.record(
                    Divergence(
                        "close",
                        session,
                        None,
                        "the oracle closed the connection, the candidate did not",
                    )
                )
            nursery.cancel_scope.cancel()
        self._finish(oracle, cand, session)

    async def _to_client(
        self, client: trio.SocketStream, payload: bytes, pending: _Pending | None, session: str
    ) -> None:
        """Send the oracle's ``payload`` to the client; a reply (``pending``: its request)
        only once the candidate answered that request too, or gave up (bounded).

        Without this, a client sees a write's reply from the oracle while the candidate may
        not have applied it yet, and a read it then sends on another session (read-after-write
        across sessions, as any client may do) finds the two servers in different states: a
        divergence of the proxy's making. Frames stay in the oracle's order, so an event that
        arrived before a held reply goes before it, and one that arrived after waits."""
        if pending is not None and not pending.done.is_set():
            with trio.move_on_after(self.reply_timeout) as scope:
                await pending.done.wait()
            if scope.cancelled_caught and not self.lockstep:
                self.checker.record(
                    Divergence(
                        "slow_reply",
                        session,
                        pending.desc,
                        f"no pair of replies within {self.reply_timeout}s: "
                        f"have {sorted(pending.replies)}",
                    )
                )
        await client.send_all(frame(payload))

    def _ordered(self) -> Any:
        return self.order if self.lockstep else _NullLock()

    def _side_closed(self, side: _Side, session: str) -> None:
        if side.closed and not side.queue:
            return
        side.closed = True
        while side.queue:
            p = side.queue.popleft()
            p.replies[side.name] = None
            self._maybe_compare(p, session)

    def _maybe_compare(self, p: _Pending, session: str) -> None:
        if "oracle" not in p.replies or "candidate" not in p.replies or p.done.is_set():
            return
        o, c = p.replies["oracle"], p.replies["candidate"]
        if o is not None and c is not None:
            self.checker.compare_reply(session, p.desc, p.op, o, c)
        elif o is not None or c is not None:
            who = "candidate" if c is None else "oracle"
            self.checker.record(
                Divergence(
                    "missing_reply",
                    session,
                    p.desc,
                    f"no reply from the {who}",
                    o.hex() if o else None,
                    c.hex() if c else None,
                )
            )
        p.done.set()

    async def _on_server_frame(
        self,
        side: _Side,
        oracle: _Side,
        cand: _Side,
        payload: bytes,
        out: _ClientOut,
        session: str,
        window: trio.Semaphore,
    ) -> None:
        xid = int.from_bytes(payload[:4], "big", signed=True) if len(payload) >= 16 else 0
        if side is oracle and (len(payload) < 16 or xid == NOTIFICATION_XID):
            await out.put(payload, None)
        if len(payload) < 16:
            self.checker.record(Divergence("reply", session, None, f"{side.name}: short frame"))
            return
        if xid == NOTIFICATION_XID:
            if len(side.events) >= _MAX_EVENTS:
                self.checker.record(Divergence("event", session, None, "event backlog overflow"))
                return
            side.events.append((payload, side.replies))
            while oracle.events and cand.events:
                (o, opos), (c, cpos) = oracle.events.popleft(), cand.events.popleft()
                idx = self.checker.events_compared
                self.checker.compare_event(
                    session, idx, o, c, (opos, cpos) if self.lockstep else None
                )
            return
        side.replies += 1
        # Pair with the oldest outstanding request of this xid (auth replies may overtake).
        match = None
        for i, p in enumerate(side.queue):
            if p.xid == xid:
                match = p
                if i:
                    head = side.queue[0]
                    if head.xid >= 0 and xid >= 0:
                        self.checker.record(
                            Divergence(
                                "reply_order",
                                session,
                                p.desc,
                                f"{side.name} answered xid {xid} before {head.xid}",
                            )
                        )
                del side.queue[i]
                break
        if side is oracle:
            await out.put(payload, match)
        if match is None:
            self.checker.record(
                Divergence(
                    "unexpected_reply",
                    session,
                    None,
                    f"{side.name}: reply xid {xid} matches no request",
                    payload.hex(),
                )
            )
            return
        match.replies[side.name] = payload
        if side is oracle:
            window.release()
        self._maybe_compare(match, session)

    def _finish(self, oracle: _Side, cand: _Side, session: str) -> None:
        for side in (oracle, cand):
            self._side_closed(side, session)
        if oracle.events or cand.events:
            self.checker.record(
                Divergence(
                    "event",
                    session,
                    None,
                    f"unpaired events: oracle {len(oracle.events)}, candidate {len(cand.events)}",
                    [_event_repr(e) for e, _ in list(oracle.events)[:5]],
                    [_event_repr(e) for e, _ in list(cand.events)[:5]],
                )
            )


def _event_repr(payload: bytes) -> Any:
    try:
        _, pos = ReplyHeader.decode_from(payload, 0)
        return _asdict(WatcherEvent.decode_from(payload, pos)[0])
    except JuteDecodeError:
        return payload.hex()


#: unpaired watch events kept per session and side
_MAX_EVENTS = 10_000


class _ClientOut:
    """The oracle's frames on their way to one client, in the oracle's order."""

    def __init__(self, size: int) -> None:
        self._send, self.receive = trio.open_memory_channel[tuple[bytes, _Pending | None]](size)
        self.queued = self.sent = 0
        #: the client's connection failed: nothing more reaches it
        self.broken = False

    async def put(self, payload: bytes, pending: _Pending | None) -> None:
        """Queue ``payload``; a reply (``pending``: its request) waits for the candidate's."""
        self.queued += 1
        await self._send.send((payload, pending))


class _NullLock:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


# ------------------------------------------------------------------------------ command line


def parse_hostport(s: str, *, allow_remote: bool = False) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not allow_remote:
        try:
            loop = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loop = host == "localhost"
        if not loop:
            raise argparse.ArgumentTypeError(f"{s}: loopback addresses only")
    return host, int(port)


def make_sink(log: TextIO | None, quiet: bool) -> Callable[[Divergence], None]:
    def sink(d: Divergence) -> None:
        if not quiet:
            req = d.request or {}
            what = " ".join(f"{k}={v}" for k, v in req.items())
            print(f"xchk: DIVERGENCE {d.kind} session={d.session} {what}: {d.detail}",
                  file=sys.stderr, flush=True)  # fmt: skip
        if log is not None:
            rec = dataclasses.asdict(d)
            rec["time"] = time.time()
            log.write(json.dumps(rec, default=str) + "\n")
            log.flush()

    return sink


async def run(args: argparse.Namespace) -> dict[str, Any]:
    chk = Checker(sort_children=args.sort_children, compare_header_zxid=not args.pipelined)
    log = open(args.log, "a") if args.log else None
    chk.sink = make_sink(log, args.quiet)
    proxy = Proxy(
        args.oracle,
        args.candidate,
        chk,
        lockstep=not args.pipelined,
        reply_timeout=args.reply_timeout,
        max_sessions=args.max_sessions,
    )
    try:
        async with trio.open_nursery() as nursery:

            async def signals() -> None:
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as it:
                    async for _ in it:
                        proxy.all_done.set()
                        return

            nursery.start_soon(signals)
            port = await nursery.start(proxy.serve, args.listen[0], args.listen[1])
            print(f"xchk: listening on {args.listen[0]}:{port}", file=sys.stderr, flush=True)
            await proxy.all_done.wait()
            nursery.cancel_scope.cancel()
    finally:
        if log is not None:
            log.close()
    s = chk.summary()
    s["sessions"] = proxy.sessions_ended
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="trizk-xchk", description=__doc__.split("\n")[0])
    ap.add_argument("--listen", required=True, type=parse_hostport, help="HOST:PORT to listen on")
    ap.add_argument("--oracle", required=True, type=parse_hostport, help="ZooKeeper HOST:PORT")
    ap.add_argument("--candidate", required=True, type=parse_hostport, help="trizk HOST:PORT")
    ap.add_argument("--max-sessions", type=int, default=None, help="exit after N sessions")
    ap.add_argument("--pipelined", action="store_true", help="no global lockstep (see docs)")
    ap.add_argument("--sort-children", action="store_true", help="compare child lists as sets")
    ap.add_argument("--reply-timeout", type=float, default=10.0)
    ap.add_argument("--log", help="append divergences as JSON lines to this file")
    ap.add_argument("--quiet", action="store_true", help="no per-divergence lines on stderr")
    args = ap.parse_args(argv)
    summary = trio.run(run, args)
    print("xchk summary: " + json.dumps(summary, sort_keys=True), flush=True)
    return 1 if summary["divergences"] else 0


if __name__ == "__main__":
    sys.exit(main())
