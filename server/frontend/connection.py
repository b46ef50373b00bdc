"""One client connection, sans-IO: bytes in, framed bytes out, nothing else.

The Trio listener feeds received bytes with :meth:`ClientConnection.receive_data` and sends
whatever :meth:`ClientConnection.take_output` returns; the server core reads frames with
:meth:`next_frame` and writes replies/events with :meth:`send_reply` / :meth:`send_event`. No
socket, clock or task lives here, so the whole connection protocol is testable without a network.

States: ``HANDSHAKE`` (waiting for the ConnectRequest; the first four bytes may instead be a
four-letter word), ``OPEN`` (session established), ``CLOSED`` (no more input is processed; the
output already queued is still flushed, then the socket is closed).
"""

from __future__ import annotations

import enum
import struct

from trizk.jute import records as r
from trizk.jute.codes import KeeperState, Xid
from trizk.jute.framing import FrameDecoder
from trizk.server.auth.acl import DEFAULT_AUTH, AuthInfo, new_connection_ids
from trizk.server.common.latency import Latency

_REPLY_HDR = struct.Struct(">iiqi")  # frame length + ReplyHeader(xid, zxid, err)
_EVENT_HDR = struct.Struct(">iiqiiii")  # length, hdr(-1, -1, 0), type, state, path length
_SYNCCONNECTED = int(KeeperState.SYNCCONNECTED)


class State(enum.Enum):
    HANDSHAKE = "handshake"
    OPEN = "open"
    CLOSED = "closed"


class ClientConnection:
    """Protocol state and buffers of one client connection."""

    def __init__(self, conn_id: int, remote: tuple[str, int], max_frame: int, now: int = 0) -> None:
        #: unique among the connections of one server (the server numbers them)
        self.id = conn_id
        self.remote = remote
        self.decoder = FrameDecoder(max_frame)
        self.state = State.HANDSHAKE
        #: ``state is State.CLOSED``, kept as a plain attribute: it is asked several times per
        #: request (a property, and an enum member's lookup, cost ~0.2 us per question)
        self.closed = False
        self.out = bytearray()
        self.session_id = 0
        self.session_timeout = 0
        #: the client did not send ConnectRequest's trailing readOnly byte (ServerCnxn.isOldClient)
        self.old_client = False
        # statistics (``cons``)
        self.established = now
        self.last_io = 0  # monotonic ms of the last bytes received
        self.packets_received = 0
        self.packets_sent = 0
        self.outstanding = 0
        #: not read from until the server's requests in process drop (globalOutstandingLimit)
        self.throttled = False
        self.last_cxid = -1
        self.last_zxid = -1
        self.last_op = "NA"
        self.last_latency = 0
        self.last_response_time = 0
        self.latency = Latency()
        self.close_reason = ""
        #: authenticated ids (``ServerCnxn.authInfo``), ``ip`` first; the core gives them the
        #: server's providers in ``connection_made``
        self.auth: AuthInfo = new_connection_ids(DEFAULT_AUTH, remote[0])
        #: subject of the verified client certificate on a TLS connection (x509), else None
        self.x509_subject: str | None = None
        #: this connection's SASL server (``ZooKeeperSaslServer``), made on the first SASL packet
        self.sasl: object | None = None

    def __repr__(self) -> str:
        return f"<conn {self.id} {self.remote[0]}:{self.remote[1]} 0x{self.session_id:x}>"

    # input ---------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        if not self.closed:
            self.decoder.feed(data)

    def next_frame(self) -> bytes | None:
        """The next complete frame (raises FrameTooLarge on an oversized length)."""
        if self.closed:
            return None
        return self.decoder.next_frame()

    # output --------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self.out += data

    def send_frame(self, payload: bytes) -> None:
        self.out += struct.pack(">i", len(payload))
        self.out += payload

    def send_reply(self, xid: int, zxid: int, err: int, body: r.Record | None = None) -> int:
        """ReplyHeader and, only when there is a response record, its body. Returns the
        packet's length (header + body: ``ServerCnxn.sendResponse``'s response size)."""
        if body is None:
            return self.send_reply_bytes(xid, zxid, err, b"")
        parts: list[bytes] = []
        body._encode_into(parts)
        return self.send_reply_bytes(xid, zxid, err, b"".join(parts))

    def send_reply_bytes(self, xid: int, zxid: int, err: int, payload: bytes) -> int:
        self.out += _REPLY_HDR.pack(16 + len(payload), xid, zxid, err)
        self.out += payload
        self.packets_sent += 1
        return 16 + len(payload)

    def send_event(self, event_type: int, path: str, zxid: int = -1) -> int:
        """A watch notification: ReplyHeader(-1, zxid, 0), WatcherEvent(type, SyncConnected,
        path). ``zxid`` is -1 in ZooKeeper 3.8, the firing txn's zxid in 3.9 (ZOOKEEPER-4655).
        Returns the packet's length."""
        p = path.encode("utf-8")
        self.out += _EVENT_HDR.pack(
            28 + len(p), Xid.NOTIFICATION, zxid, 0, event_type, _SYNCCONNECTED, len(p)
        )
        self.out += p
        self.packets_sent += 1
        return 28 + len(p)

    def take_output(self) -> bytes:
        data = bytes(self.out)
        self.out.clear()
        return data

    def close(self, reason: str) -> None:
        """Stop processing input; queued output is still flushed before the socket closes."""
        if not self.closed:
            self.state = State.CLOSED
            self.closed = True
            self.close_reason = reason

    def reset_stats(self) -> None:
        """``ServerCnxn.resetStats`` (4lw ``crst``): counters and latencies back to start."""
        self.packets_received = self.packets_sent = 0
        self.latency.reset()

    def record_latency(self, op: str, cxid: int, zxid: int, latency: int, now: int) -> None:
        self.last_op = op
        self.last_cxid = cxid
        self.last_zxid = zxid
        self.last_latency = latency
        self.last_response_time = now
        self.latency.add(latency)
