"""Scenarios as data, and the one executor that runs them against any server.

Theory
------
A *scenario* is plain data (JSON in ``compat/scenarios/*.json``)::

    {"name": "...", "doc": "...",
     "cfg": {"extendedTypesEnabled": "true"},          # extra zoo.cfg keys (optional)
     "sessions": {"A": {}, "B": {"timeout": 400}},     # connected at the start, in this order
     "steps": [["A", "create", {"path": "/a", "data": "x", "mode": "EPHEMERAL"}],
               ["B", "exists", {"path": "/a", "watch": true}], ...],
     "ci": true,                                       # part of the fast CI subset
     "trizk_xfail": "reason"}                          # trizk does not pass it yet (optional)

Each step names a session, an operation and its arguments (see :data:`OPS` and
:func:`build_request`). The executor sends the step's request on that session's connection and
reads that connection until the reply arrives, recording every packet in arrival order. The
*transcript* is, per session, the list of entries (connect responses, replies, watch events,
connection closes) in the order they arrived on that session's socket. Order across sessions is
not recorded: the protocol does not define it.

At the end every still-connected session sends a ping and reads until the ping's reply, so
every notification the server sent before it is in the transcript (ZooKeeper answers pings in
request order, after the notifications queued before them).

Entries are JSON-able dicts with named fields (``zxid``, ``czxid``, ``ctime``, ``sessionId``,
``ephemeralOwner`` ...), exactly as the server sent them; :mod:`trizk.compat.oracle.normalise` then
rewrites the fields that legitimately differ between servers.

Invariants
----------
* One executor for every server: scenarios never contain per-server code.
* Every wait is bounded (``io_timeout`` per read; ``wait_event`` / ``wait_closed`` have their own
  bound); a missing reply is recorded as a ``timeout`` entry, never waited on forever.
* Steps are independent of replies (no variables), so any subsequence of a scenario is again a
  valid scenario: the random mode's shrinker relies on it.
"""

from __future__ import annotations

import base64
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trizk.compat.oracle.rawclient import (
    ConnectionClosed,
    Event,
    Packet,
    RawClient,
    Reply,
    WireTimeout,
)
from trizk.jute import records as R
from trizk.jute.codes import Code, CreateMode, EventType, KeeperState, OpCode, Perms, Xid
from trizk.jute.multi import MultiResult, encode_request
from trizk.jute.primitives import JuteDecodeError, Record

Step = list[Any]  # [session, op, {args}]
Entry = dict[str, Any]
Transcript = dict[str, list[Entry]]

DEFAULT_TIMEOUT_MS = 30000
#: xid of the request that follows a "frames" step's bytes (no generated request uses it)
FENCE_XID = 0x7FFF0000
WAIT_BOUND = 10.0  # seconds: bound of wait_event / wait_closed (expiry takes < 1 s here)

OPEN_ACL = (R.ACL(int(Perms.ALL), R.Id("world", "anyone")),)
READ_ACL = (R.ACL(int(Perms.READ), R.Id("world", "anyone")),)
CREATOR_ACL = (R.ACL(int(Perms.ALL), R.Id("auth", "")),)
NAMED_ACLS = {"open": OPEN_ACL, "read": READ_ACL, "creator": CREATOR_ACL, "empty": ()}


# --------------------------------------------------------------------------- arguments


def data_arg(v: Any) -> bytes | None:
    """``"text"`` (UTF-8), ``null``, ``{"hex": "00ff"}``, ``{"repeat": ["x", n]}``."""
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, dict):
        if "hex" in v:
            return bytes.fromhex(v["hex"])
        if "repeat" in v:
            s, n = v["repeat"]
            return (s.encode() * int(n))[: int(n)]
        if "b64" in v:
            return base64.b64decode(v["b64"])
    raise ValueError(f"bad data argument {v!r}")


def acl_arg(v: Any) -> tuple[R.ACL, ...] | None:
    """A name from NAMED_ACLS, ``null``, or ``[[perms, scheme, id], ...]``."""
    if v is None:
        return None
    if isinstance(v, str):
        return NAMED_ACLS[v]
    return tuple(R.ACL(int(p), R.Id(s, i)) for p, s, i in v)


def mode_arg(v: Any) -> int:
    if isinstance(v, int):
        return v
    return int(CreateMode[v.upper()])


_I32 = struct.Struct(">i")


def _ustring(v: Any) -> bytes:
    """A Jute ustring: text, ``null`` (length -1) or ``{"hex": ...}`` (raw bytes: bad UTF-8)."""
    if v is None:
        return _I32.pack(-1)
    b = bytes.fromhex(v["hex"]) if isinstance(v, dict) else str(v).encode()
    return _I32.pack(len(b)) + b


def _field_bytes(f: list[Any]) -> bytes:
    kind, args = f[0], f[1:]
    if kind == "int":
        return _I32.pack(int(args[0]))
    if kind == "long":
        return struct.pack(">q", int(args[0]))
    if kind == "bool":  # any byte value: Java's readBoolean takes non-zero as true
        return bytes([int(args[0]) & 0xFF])
    if kind == "ustring":
        return _ustring(args[0])
    if kind == "buffer":
        data = data_arg(args[0])
        return _I32.pack(-1) if data is None else _I32.pack(len(data)) + data
    if kind == "hex":
        return bytes.fromhex(args[0])
    if kind == "strings":  # vector<ustring>, or null
        if args[0] is None:
            return _I32.pack(-1)
        return _I32.pack(len(args[0])) + b"".join(_ustring(x) for x in args[0])
    if kind == "acl":  # vector<ACL> by name / list (see acl_arg), or null
        acl = acl_arg(args[0])
        if acl is None:
            return _I32.pack(-1)
        return _I32.pack(len(acl)) + b"".join(a.encode() for a in acl)
    if kind == "mh":  # MultiHeader(type, done, err)
        typ, done, err = [*args, False, -1][:3]
        return R.MultiHeader(int(typ), bool(done), int(err)).encode()
    if kind == "req":  # a well-formed request record of a step's operation
        _code, rec = build_request(args[0], args[1] if len(args) > 1 else {})
        return rec.encode() if rec is not None else b""
    if kind == "multi":  # a well-formed MultiOperationRecord of (op, args) pairs, end marker too
        return encode_request([build_request(o[0], o[1] if len(o) > 1 else {}) for o in args[0]])  # type: ignore[misc]
    raise ValueError(f"bad field {f!r}")


def body_arg(fields: list[list[Any]]) -> bytes:
    """A request body built field by field, for malformed requests: each field is
    ``[kind, value...]`` with kind ``int``, ``long``, ``bool`` (a byte), ``ustring`` (text,
    null or ``{"hex"}``), ``buffer`` (see :func:`data_arg`), ``hex`` (raw bytes), ``strings``
    (vector<ustring> or null), ``acl`` (vector<ACL> as :func:`acl_arg`, or null), ``mh``
    (MultiHeader type, done, err), ``req`` (the record of ``[op, args]``) or ``multi`` (a
    MultiOperationRecord of ``[[op, args], ...]``)."""
    return b"".join(_field_bytes(f) for f in fields)


def build_request(op: str, a: Mapping[str, Any]) -> tuple[int, Record | None]:
    """(opcode, request record) of a step's operation."""
    path = a.get("path", "/")
    if op in ("create", "create2", "createContainer", "createTTL"):
        data = data_arg(a.get("data", ""))
        acl = acl_arg(a.get("acl", "open"))
        default_mode = {"createContainer": "CONTAINER", "createTTL": "PERSISTENT_WITH_TTL"}
        flags = mode_arg(a.get("mode", default_mode.get(op, "PERSISTENT")))
        if op == "createTTL":
            return OpCode.CREATETTL, R.CreateTTLRequest(path, data, acl, flags, int(a["ttl"]))
        code = {
            "create": OpCode.CREATE,
            "create2": OpCode.CREATE2,
            "createContainer": OpCode.CREATECONTAINER,
        }[op]
        return code, R.CreateRequest(path, data, acl, flags)
    if op == "delete":
        return OpCode.DELETE, R.DeleteRequest(path, int(a.get("version", -1)))
    if op == "exists":
        return OpCode.EXISTS, R.ExistsRequest(path, bool(a.get("watch", False)))
    if op == "getData":
        return OpCode.GETDATA, R.GetDataRequest(path, bool(a.get("watch", False)))
    if op == "setData":
        data = data_arg(a.get("data", ""))
        return OpCode.SETDATA, R.SetDataRequest(path, data, int(a.get("version", -1)))
    if op == "getChildren":
        return OpCode.GETCHILDREN, R.GetChildrenRequest(path, bool(a.get("watch", False)))
    if op == "getChildren2":
        return OpCode.GETCHILDREN2, R.GetChildren2Request(path, bool(a.get("watch", False)))
    if op == "getACL":
        return OpCode.GETACL, R.GetACLRequest(path)
    if op == "setACL":
        acl = acl_arg(a.get("acl", "open"))
        return OpCode.SETACL, R.SetACLRequest(path, acl, int(a.get("version", -1)))
    if op == "sync":
        return OpCode.SYNC, R.SyncRequest(path)
    if op == "check":
        return OpCode.CHECK, R.CheckVersionRequest(path, int(a.get("version", -1)))
    if op == "getAllChildrenNumber":
        return OpCode.GETALLCHILDRENNUMBER, R.GetAllChildrenNumberRequest(path)
    if op == "getEphemerals":
        return OpCode.GETEPHEMERALS, R.GetEphemeralsRequest(a.get("prefix", "/"))
    if op == "whoAmI":
        return OpCode.WHOAMI, None
    if op == "addWatch":
        return OpCode.ADDWATCH, R.AddWatchRequest(path, int(a.get("mode", 0)))
    if op == "removeWatches":
        return OpCode.REMOVEWATCHES, R.RemoveWatchesRequest(path, int(a.get("type", 3)))
    if op == "checkWatches":
        return OpCode.CHECKWATCHES, R.CheckWatchesRequest(path, int(a.get("type", 3)))
    if op == "closeSession":
        return OpCode.CLOSESESSION, None
    raise ValueError(f"unknown operation {op!r}")


REQUEST_OPS = (
    "create create2 createContainer createTTL delete exists getData setData getChildren "
    "getChildren2 getACL setACL sync check getAllChildrenNumber getEphemerals whoAmI addWatch "
    "removeWatches checkWatches closeSession"
).split()
CONTROL_OPS = (
    "multi multiRead setWatches setWatches2 auth ping request frames open raw connect reconnect "
    "renew drop wait_event wait_closed"
).split()
#: Every operation a step may name.
OPS = frozenset(REQUEST_OPS + CONTROL_OPS)


# --------------------------------------------------------------------------- records -> entries


def _name(enum: Any, v: int) -> str | int:
    try:
        return str(enum(v).name)
    except ValueError:
        return v


def data_value(b: bytes | None) -> Any:
    """Data as recorded: text when it is printable UTF-8, else hex; None stays None."""
    if b is None:
        return None
    if len(b) > 64:
        return {"len": len(b), "hex_head": b[:16].hex()}
    try:
        s = b.decode()
        if s.isprintable():
            return s
    except UnicodeDecodeError:
        pass
    return {"hex": b.hex()}


def record_value(rec: Any) -> Any:
    """A decoded record as a plain dict (field names kept: the normaliser keys on them)."""
    if isinstance(rec, Record):
        out: dict[str, Any] = {}
        for f in rec.__dataclass_fields__:  # type: ignore[attr-defined]
            out[f] = record_value(getattr(rec, f))
        return out
    if isinstance(rec, bytes):
        return data_value(rec)
    if isinstance(rec, tuple):
        return [record_value(x) for x in rec]
    return rec


def packet_entry(p: Packet, step: int) -> Entry:
    if isinstance(p, Event):
        e: Entry = {"step": step, "kind": "event", "zxid": p.zxid, "err": p.err}
        if p.event is not None:
            e["type"] = _name(EventType, p.event.type)
            e["state"] = _name(KeeperState, p.event.state)
            e["path"] = p.event.path
        if p.raw:
            e["raw"] = p.raw.hex()
        return e
    r: Reply = p
    e = {
        "step": step,
        "kind": "reply",
        "op": _name(OpCode, r.op) if r.op is not None else None,
        "xid": r.xid,
        "zxid": r.zxid,
        "err": _name(Code, r.err),
    }
    if isinstance(r.body, list):
        e["results"] = [
            {
                "type": _name(OpCode, m.type),
                "err": _name(Code, m.err),
                **({"body": record_value(m.body)} if m.body is not None else {}),
            }
            for m in r.body
            if isinstance(m, MultiResult)
        ]
    elif r.body is not None:
        e["body"] = record_value(r.body)
    if r.raw:
        e["raw"] = r.raw.hex()
    return e


# --------------------------------------------------------------------------- execution


@dataclass
class _Session:
    label: str
    client: RawClient | None = None
    session_id: int = 0
    passwd: bytes = b"\0" * 16
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    last_zxid: int = 0  # the largest zxid seen in a reply header, as ClientCnxn keeps it
    log: list[Entry] = field(default_factory=list)


class Executor:
    """Runs steps against one server (host, port) and records the transcript."""

    def __init__(self, host: str, port: int, *, io_timeout: float = 10.0) -> None:
        self.host = host
        self.port = port
        self.io_timeout = io_timeout
        self.sessions: dict[str, _Session] = {}

    # -- helpers
    def _record(self, s: _Session, packets: list[Packet], step: int) -> None:
        for p in packets:
            if isinstance(p, Reply) and p.zxid > s.last_zxid:
                s.last_zxid = p.zxid
            s.log.append(packet_entry(p, step))

    def _lost(self, s: _Session, step: int, why: str) -> None:
        s.log.append({"step": step, "kind": why})
        if s.client is not None:
            s.client.close()
        s.client = None

    def _connect(self, s: _Session, step: int, a: Mapping[str, Any], reuse: bool) -> None:
        if s.client is not None:
            s.client.close()
        try:
            c = RawClient(self.host, self.port, io_timeout=self.io_timeout)
        except OSError as e:
            s.log.append({"step": step, "kind": "connect_failed", "error": type(e).__name__})
            s.client = None
            return
        timeout = int(a.get("timeout", s.timeout_ms))
        sid, pw = (s.session_id, s.passwd) if reuse else (0, b"\0" * 16)
        if "session_of" in a:
            other = self.sessions[a["session_of"]]
            sid, pw = other.session_id, other.passwd
        if "passwd" in a:
            pw = data_arg(a["passwd"]) or b""
        try:
            resp = c.connect(
                timeout_ms=timeout,
                session_id=sid,
                passwd=pw,
                last_zxid=s.last_zxid
                if a.get("last_zxid") == "last"
                else int(a.get("last_zxid", 0)),
                read_only=a.get("read_only", False),
                repeat=2 if a.get("twice") else 1,
            )
        except (WireTimeout, OSError, JuteDecodeError) as e:
            s.log.append({"step": step, "kind": "connect_failed", "error": type(e).__name__})
            c.close()
            s.client = None
            return
        if resp is None:
            s.log.append({"step": step, "kind": "closed"})
            c.close()
            s.client = None
            return
        entry: Entry = {"step": step, "kind": "connect", **record_value(resp)}
        pw_got = resp.passwd or b""
        entry["passwd"] = {"len": len(pw_got), "zero": not any(pw_got)}
        entry["tail"] = c.connect_tail.hex()
        s.log.append(entry)
        if resp.sessionId != 0:
            s.session_id, s.passwd, s.timeout_ms = resp.sessionId, resp.passwd or b"", timeout
        s.client = c
        if a.get("twice"):
            # The ConnectRequest went twice in one write: what the server makes of the second
            # (ZooKeeper reads it as a request once the session is up), up to a close or a
            # bounded quiet spell (the connection is then kept).
            self._wait(s, step, until_closed=True, bound=WAIT_BOUND)

    def open_sessions(self, spec: Mapping[str, Mapping[str, Any]]) -> None:
        for label, opts in spec.items():
            s = self.sessions[label] = _Session(label)
            s.timeout_ms = int(opts.get("timeout", DEFAULT_TIMEOUT_MS))
            self._connect(s, -1, opts, reuse=False)

    def _roundtrip(
        self,
        s: _Session,
        step: int,
        send: Callable[[RawClient], int],
        wait: float | None = None,
    ) -> None:
        c = s.client
        if c is None:
            s.log.append({"step": step, "kind": "not_connected"})
            return
        before: list[Packet] = []
        try:
            xid = send(c)
            deadline = time.monotonic() + (wait if wait is not None else self.io_timeout)
            while True:
                p = c.read_packet(deadline)
                if isinstance(p, Reply) and p.xid == xid:
                    break
                before.append(p)
        except WireTimeout:
            # No reply (ZooKeeper 3.8.0 swallows a successful standalone check): record it and
            # keep the connection; a late reply is recorded when it arrives.
            self._record(s, before, step)
            s.log.append({"step": step, "kind": "timeout"})
            return
        except (ConnectionClosed, OSError):
            self._record(s, before, step)
            self._lost(s, step, "closed")
            return
        except JuteDecodeError:
            # A frame that is not even a ReplyHeader: a difference in itself; stop reading.
            self._record(s, before, step)
            self._lost(s, step, "undecodable")
            return
        self._record(s, before, step)
        self._record(s, [p], step)

    def step(self, i: int, st: Step) -> None:
        label, op = st[0], st[1]
        a: Mapping[str, Any] = st[2] if len(st) > 2 else {}
        if op not in OPS:
            raise ValueError(f"step {i}: unknown operation {op!r}")
        s = self.sessions.setdefault(label, _Session(label))
        if op in REQUEST_OPS:
            code, rec = build_request(op, a)
            xid = a.get("xid")
            self._roundtrip(s, i, lambda c: c.send(code, rec, xid=xid), a.get("wait"))
            if op == "closeSession" and s.client is not None:
                s.client.close()
                s.client = None
        elif op in ("setWatches", "setWatches2"):
            # Re-registration of watches after a reconnect (xid -8, as ClientCnxn sends it);
            # relativeZxid "last" is the session's last seen zxid.
            rz = a.get("relativeZxid", "last")
            rz = s.last_zxid if rz == "last" else int(rz)
            lists = [tuple(a.get(k, ())) for k in ("data", "exist", "child")]
            sw: Record
            if op == "setWatches":
                sw, swop = R.SetWatches(rz, *lists), OpCode.SETWATCHES
            else:
                more = [tuple(a.get(k, ())) for k in ("persistent", "persistentRecursive")]
                sw, swop = R.SetWatches2(rz, *lists, *more), OpCode.SETWATCHES2
            self._roundtrip(s, i, lambda c: c.send(swop, sw, xid=Xid.SET_WATCHES))
        elif op in ("multi", "multiRead"):
            ops = [build_request(sub[0], sub[1] if len(sub) > 1 else {}) for sub in a["ops"]]
            self._roundtrip(
                s,
                i,
                lambda c: c.send_multi(ops, read=op == "multiRead"),  # type: ignore[arg-type]
            )
        elif op == "auth":
            self._roundtrip(s, i, lambda c: c.add_auth(a["scheme"], data_arg(a["auth"]) or b""))
        elif op == "ping":
            self._roundtrip(s, i, lambda c: c.ping())
        elif op == "request":
            # An arbitrary opcode with an arbitrary body (unknown opcodes, malformed records).
            # The body is ``body_hex`` (raw) or ``fields`` (see body_arg); the opcode a number or
            # an OpCode name.
            if "fields" in a:
                body = body_arg(a["fields"])
            else:
                body = bytes.fromhex(a.get("body_hex", ""))
            opcode = a["opcode"] if isinstance(a["opcode"], int) else int(OpCode[a["opcode"]])

            xid = a.get("xid")
            self._roundtrip(s, i, lambda c: c.send(opcode, body, xid=xid), a.get("wait"))
        elif op == "frames":
            # Bytes as they are ("hex"), framed or not (the wire fuzzer's mutated frames), then
            # a fence (exists "/t" with xid FENCE_XID); everything up to the fence's reply is
            # recorded, or the close, or a timeout (the connection is then kept).
            data = bytes.fromhex(a["hex"])

            def send_frames(c: RawClient) -> int:
                c.send_frames(data)
                return c.send(OpCode.EXISTS, R.ExistsRequest("/t", False), xid=FENCE_XID)

            self._roundtrip(s, i, send_frames, a.get("wait"))
        elif op == "open":
            # A TCP connection with no handshake, for bytes sent with "raw".
            if s.client is not None:
                s.client.close()
            try:
                s.client = RawClient(self.host, self.port, io_timeout=self.io_timeout)
            except OSError as e:
                s.log.append({"step": i, "kind": "connect_failed", "error": type(e).__name__})
                s.client = None
        elif op == "raw":
            # Bytes as they are ("hex" or "text"); then every byte received until the server
            # closes the connection (bounded), recorded unframed (a 4lw answer has no frame).
            if s.client is None:
                s.log.append({"step": i, "kind": "not_connected"})
                return
            data = bytes.fromhex(a["hex"]) if "hex" in a else a["text"].encode()
            try:
                s.client.send_raw(data)
            except OSError:
                self._lost(s, i, "closed")
                return
            got, how = s.client.read_raw_until_closed(time.monotonic() + WAIT_BOUND)
            s.log.append({"step": i, "kind": "received", "data": data_value(got)})
            self._lost(s, i, how)
        elif op == "connect":
            self._connect(s, i, a, reuse=False)
        elif op == "renew":
            # closeSession (recorded) and a fresh session under the same label, as one step.
            if s.client is not None:
                code, rec = build_request("closeSession", {})
                self._roundtrip(s, i, lambda c: c.send(code, rec))
                if s.client is not None:
                    s.client.close()
                    s.client = None
            self._connect(s, i, a, reuse=False)
        elif op == "reconnect":
            self._connect(s, i, a, reuse=True)
        elif op == "drop":
            if s.client is not None:
                s.client.close()
                s.client = None
        elif op == "wait_event":
            self._wait(s, i, until_closed=False, bound=float(a.get("seconds", WAIT_BOUND)))
        elif op == "wait_closed":
            self._wait(s, i, until_closed=True, bound=float(a.get("seconds", WAIT_BOUND)))

    def _wait(self, s: _Session, i: int, *, until_closed: bool, bound: float) -> None:
        """Read ``s``'s packets for up to ``bound`` seconds (a step's ``seconds``, else
        WAIT_BOUND), until an event (``wait_event``) or the connection's close
        (``wait_closed``); a shorter bound makes a close that one release performs and another
        does not a deterministic step: "closed" against "timeout"."""
        c = s.client
        if c is None:
            s.log.append({"step": i, "kind": "not_connected"})
            return
        deadline = time.monotonic() + bound
        while True:
            try:
                p = c.read_packet(deadline)
            except WireTimeout:
                s.log.append({"step": i, "kind": "timeout"})
                return
            except (ConnectionClosed, OSError):
                self._lost(s, i, "closed")
                return
            except JuteDecodeError:
                self._lost(s, i, "undecodable")
                return
            self._record(s, [p], i)
            if isinstance(p, Event) and not until_closed:
                return

    def finish(self, step: int) -> None:
        """Drain: ping every connected session and read up to the ping's reply; then close."""
        for s in self.sessions.values():
            if s.client is not None:
                self._roundtrip(s, step, lambda c: c.ping())
        for s in self.sessions.values():
            if s.client is not None:
                s.client.close_session(time.monotonic() + self.io_timeout)
                s.client = None

    def transcript(self) -> Transcript:
        return {label: s.log for label, s in self.sessions.items()}


def run_steps(
    host: str,
    port: int,
    sessions: Mapping[str, Mapping[str, Any]],
    steps: list[Step],
    *,
    io_timeout: float = 10.0,
) -> Transcript:
    """Run a scenario's sessions and steps against one server; returns its raw transcript."""
    ex = Executor(host, port, io_timeout=io_timeout)
    try:
        ex.open_sessions(sessions)
        for i, st in enumerate(steps):
            ex.step(i, st)
        ex.finish(len(steps))
    finally:
        for s in ex.sessions.values():
            if s.client is not None:
                s.client.close()
    return ex.transcript()


def describe_step(st: Step) -> str:
    args = st[2] if len(st) > 2 else {}
    inner = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return f"{st[0]}: {st[1]}({inner})"
