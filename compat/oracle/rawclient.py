"""A raw ZooKeeper protocol client for the compatibility suite (blocking sockets).

Theory
------
The suite compares what two servers put on the wire, so this client hides nothing: it sends
exactly the request record it is given (with the xid it is given, or the next one), reads whole
frames in arrival order and hands back every reply header, error code and record unaltered.
It never pings on its own, never reconnects, never retries, and never turns an error code into
an exception. Bad inputs are sent with :meth:`RawClient.send_raw`.

Invariants
----------
* Every blocking call is bounded: socket reads use a deadline and raise :class:`WireTimeout`.
* :meth:`RawClient.read_packet` returns packets in the order the server wrote them; a reply is
  decoded with the response type of the opcode its xid was sent with (the client keeps
  ``xid -> opcode``, as ``ClientCnxn`` keeps its pending queue). Bytes that do not decode are
  kept as ``raw`` (hex) next to the decoded part, never dropped.
* Multi requests and replies are written and read with the one multi codec,
  :mod:`trizk.jute.multi` (``MultiOperationRecord``, ``MultiResponse``); a reply's results are
  :class:`~trizk.jute.multi.MultiResult`.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from trizk.jute import multi
from trizk.jute import records as R
from trizk.jute.codes import OpCode, Xid
from trizk.jute.framing import FrameDecoder, frame
from trizk.jute.primitives import JuteDecodeError, Record

#: Large enough for any reply we provoke (ZooKeeper's jute.maxbuffer is 0xfffff; allow slack).
MAX_FRAME = 16 * 1024 * 1024
_INT = struct.Struct(">i")


class WireTimeout(Exception):
    """No complete frame arrived before the deadline."""


class ConnectionClosed(Exception):
    """The server closed the connection."""


#: Response record per opcode, for a reply with err == 0 (FinalRequestProcessor).
RESPONSE_TYPES: dict[int, type[Record] | None] = {
    OpCode.CREATE: R.CreateResponse,
    OpCode.CREATE2: R.Create2Response,
    OpCode.CREATECONTAINER: R.Create2Response,
    OpCode.CREATETTL: R.Create2Response,
    OpCode.DELETE: None,
    OpCode.EXISTS: R.ExistsResponse,
    OpCode.GETDATA: R.GetDataResponse,
    OpCode.SETDATA: R.SetDataResponse,
    OpCode.GETACL: R.GetACLResponse,
    OpCode.SETACL: R.SetACLResponse,
    OpCode.GETCHILDREN: R.GetChildrenResponse,
    OpCode.GETCHILDREN2: R.GetChildren2Response,
    OpCode.SYNC: R.SyncResponse,
    OpCode.PING: None,
    OpCode.CHECK: None,
    OpCode.CLOSESESSION: None,
    OpCode.AUTH: None,
    OpCode.SETWATCHES: None,
    OpCode.SETWATCHES2: None,
    OpCode.REMOVEWATCHES: None,
    OpCode.CHECKWATCHES: None,
    OpCode.ADDWATCH: R.ErrorResponse,  # FinalRequestProcessor: rsp = new ErrorResponse(0)
    OpCode.GETALLCHILDRENNUMBER: R.GetAllChildrenNumberResponse,
    OpCode.GETEPHEMERALS: R.GetEphemeralsResponse,
    OpCode.WHOAMI: R.WhoAmIResponse,
}


@dataclass
class Reply:
    xid: int
    zxid: int
    err: int
    op: int | None
    body: Any = None  # a Record, a list of multi results, or None
    raw: bytes = b""  # bytes after the header that did not decode (kept, never dropped)


@dataclass
class Event:
    zxid: int
    err: int
    event: R.WatcherEvent | None
    raw: bytes = b""


@dataclass
class _Pending:
    op: int
    sub_ops: list[int] = field(default_factory=list)


Packet = Reply | Event


class RawClient:
    """One TCP connection to a ZooKeeper-protocol server; see the module docstring."""

    def __init__(
        self, host: str, port: int, *, io_timeout: float = 10.0, source: str | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.io_timeout = io_timeout
        src = (source, 0) if source else None  # a local address to connect from
        self.sock = socket.create_connection((host, port), timeout=io_timeout, source_address=src)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._dec = FrameDecoder(MAX_FRAME)
        self._pending: dict[int, _Pending] = {}
        self.next_xid = 1
        self.closed = False
        self.session_id = 0
        self.passwd = b"\0" * 16
        self.timeout_ms = 0
        self.connect_tail = b""

    # ------------------------------------------------------------------ sending
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frames(self, data: bytes) -> None:
        """Send bytes as they are (well-formed or not); every complete frame in them whose
        RequestHeader reads is remembered as ``xid -> opcode``, so its reply decodes by type."""
        pos = 0
        while pos + 12 <= len(data):
            (n,) = _INT.unpack_from(data, pos)
            if n < 8 or pos + 4 + n > len(data):
                break
            xid, op = struct.unpack_from(">ii", data, pos + 4)
            self._pending[xid] = _Pending(op)
            pos += 4 + n
        self.send_raw(data)

    def connect(
        self,
        *,
        timeout_ms: int = 30000,
        session_id: int = 0,
        passwd: bytes | None = b"\0" * 16,
        last_zxid: int = 0,
        read_only: bool | None = False,
        deadline: float | None = None,
        repeat: int = 1,
    ) -> R.ConnectResponse | None:
        """Send a ConnectRequest (with the readOnly byte unless ``read_only`` is None) and read
        the ConnectResponse. Returns None if the server closed the connection instead.
        ``repeat``: the request that many times in one write (what follows the first is read
        by the caller)."""
        req = R.ConnectRequest(
            protocolVersion=0,
            lastZxidSeen=last_zxid,
            timeOut=timeout_ms,
            sessionId=session_id,
            passwd=passwd,
        ).encode()
        if read_only is not None:
            req += b"\x01" if read_only else b"\x00"
        self.send_raw(frame(req) * repeat)
        try:
            payload = self._read_frame(deadline)
        except ConnectionClosed:
            return None
        resp, pos = R.ConnectResponse.decode_from(payload, 0)
        # ZooKeeper 3.x appends the readOnly boolean after the record.
        self.connect_tail = payload[pos:]
        self.session_id = resp.sessionId
        self.passwd = resp.passwd or b""
        self.timeout_ms = resp.timeOut
        return resp

    def send(self, op: int, rec: Record | bytes | None, *, xid: int | None = None) -> int:
        """Send RequestHeader{xid, op} + record (or raw body bytes); returns the xid used."""
        if xid is None:
            xid = self.next_xid
            self.next_xid += 1
        else:
            self.next_xid = max(self.next_xid, xid + 1)
        if isinstance(rec, Record):
            body = rec.encode()
        else:
            body = rec or b""
        self._pending[xid] = _Pending(op)
        self.send_raw(frame(R.RequestHeader(xid=xid, type=op).encode() + body))
        return xid

    def send_multi(self, ops: list[tuple[int, Record]], *, read: bool = False) -> int:
        xid = self.next_xid
        self.next_xid += 1
        op = OpCode.MULTIREAD if read else OpCode.MULTI
        self._pending[xid] = _Pending(op, [o for o, _ in ops])
        self.send_raw(frame(R.RequestHeader(xid=xid, type=op).encode() + multi.encode_request(ops)))
        return xid

    def ping(self) -> int:
        """Send a ping (xid -2); returns that xid."""
        self._pending[Xid.PING] = _Pending(OpCode.PING)
        self.send_raw(frame(R.RequestHeader(xid=Xid.PING, type=OpCode.PING).encode()))
        return Xid.PING

    def add_auth(self, scheme: str, auth: bytes) -> int:
        """Send an AuthPacket (xid -4); returns that xid."""
        self._pending[Xid.AUTH] = _Pending(OpCode.AUTH)
        rec = R.AuthPacket(type=0, scheme=scheme, auth=auth)
        self.send_raw(
            frame(R.RequestHeader(xid=Xid.AUTH, type=OpCode.AUTH).encode() + rec.encode())
        )
        return Xid.AUTH

    # ------------------------------------------------------------------ receiving
    def _read_frame(self, deadline: float | None) -> bytes:
        if deadline is None:
            deadline = time.monotonic() + self.io_timeout
        while True:
            f = self._dec.next_frame()
            if f is not None:
                return f
            left = deadline - time.monotonic()
            if left <= 0:
                raise WireTimeout("no frame before the deadline")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError as e:
                raise WireTimeout("no frame before the deadline") from e
            except (ConnectionResetError, BrokenPipeError) as e:
                self.closed = True
                raise ConnectionClosed(str(e)) from e
            if not data:
                self.closed = True
                raise ConnectionClosed("EOF")
            self._dec.feed(data)

    def read_raw_until_closed(self, deadline: float) -> tuple[bytes, str]:
        """Every byte (framed or not) until EOF; returns (bytes, "closed" | "timeout")."""
        out = bytearray(self._dec.peek(self._dec.buffered))
        self._dec = FrameDecoder(MAX_FRAME)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(out), "timeout"
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                return bytes(out), "timeout"
            except OSError:
                return bytes(out), "closed"
            if not data:
                return bytes(out), "closed"
            out += data

    def read_packet(self, deadline: float | None = None) -> Packet:
        """The next reply or watch event, decoded as far as it decodes."""
        payload = self._read_frame(deadline)
        again = self._connect_again(payload)
        if again is not None:
            return again
        hdr, pos = R.ReplyHeader.decode_from(payload, 0)
        rest = payload[pos:]
        if hdr.xid == Xid.NOTIFICATION and Xid.NOTIFICATION not in self._pending:
            try:
                ev, p = R.WatcherEvent.decode_from(rest, 0)
                return Event(hdr.zxid, hdr.err, ev, rest[p:])
            except JuteDecodeError:
                return Event(hdr.zxid, hdr.err, None, rest)
        pend = self._pending.pop(hdr.xid, None)
        op = pend.op if pend else None
        reply = Reply(hdr.xid, hdr.zxid, hdr.err, op, None, rest)
        if not rest or pend is None:
            return reply
        try:
            if op in (OpCode.MULTI, OpCode.MULTIREAD):
                results, p = multi.decode_response(rest, 0)
                reply.body, reply.raw = results, rest[p:]
            else:
                cls = RESPONSE_TYPES.get(op)  # type: ignore[arg-type]
                if cls is not None:
                    reply.body, p = cls.decode_from(rest, 0)
                    reply.raw = rest[p:]
        except (JuteDecodeError, struct.error, IndexError):
            reply.body, reply.raw = None, rest
        return reply

    def _connect_again(self, payload: bytes) -> Reply | None:
        """A ConnectResponse for this session where a reply would be: ZooKeeper's answer to a
        createSession request on an open session (FinalRequestProcessor: finishSessionInit).
        Recorded as a reply (xid and zxid 0) whose body is the response, its password
        ``b"same"`` when it is the session's own."""
        xid = next((x for x, p in self._pending.items() if p.op == OpCode.CREATESESSION), None)
        if xid is None or len(payload) not in (36, 37):
            return None
        try:
            resp, _ = R.ConnectResponse.decode_from(payload, 0)
        except JuteDecodeError:
            return None
        if resp.sessionId != self.session_id or resp.protocolVersion != 0:
            return None
        del self._pending[xid]
        if resp.passwd == self.passwd:
            resp = R.ConnectResponse(resp.protocolVersion, resp.timeOut, resp.sessionId, b"same")
        return Reply(0, 0, 0, OpCode.CREATESESSION, resp, payload[36:])

    def read_until_reply(
        self, xid: int, deadline: float | None = None
    ) -> tuple[list[Packet], Reply]:
        """Read packets until the reply to ``xid``; returns (everything before it, the reply)."""
        before: list[Packet] = []
        while True:
            p = self.read_packet(deadline)
            if isinstance(p, Reply) and p.xid == xid:
                return before, p
            before.append(p)

    def close_session(self, deadline: float | None = None) -> Reply | None:
        """closeSession and wait for its reply (None if the connection dropped first)."""
        try:
            xid = self.send(OpCode.CLOSESESSION, None)
            _, r = self.read_until_reply(xid, deadline)
            return r
        except (ConnectionClosed, WireTimeout, OSError):
            return None
        finally:
            self.close()

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass
