"""Wire codecs of the election port (QuorumCnxManager + FastLeaderElection, ZooKeeper 3.8).

Theory
------
A member's election port carries one TCP connection per pair of members. The connecting side
starts with the *initial message* (``QuorumCnxManager.startConnection``)::

    long protocolVersion   -65536 (PROTOCOL_VERSION_V1; -65535 = V2, multi-address)
    long sid               the sender's myid
    int  len               1..2048 (QuorumCnxManager.maxBuffer)
    byte addr[len]         "host:port" of the sender's election address (V2: "a:p|b:q")

A first long >= 0 is the pre-3.5 form: a bare sid and nothing else (``handleConnection``). There is
no reply. Both directions then carry frames ``int length`` + ``length`` bytes, where the receiver
(``RecvWorker.run``) drops the link when ``length <= 0 or length > PACKETMAXSIZE`` (512 KiB).

Each frame is one FastLeaderElection notification (``FastLeaderElection.buildMsg``)::

    int state; long leader; long zxid; long electionEpoch; long peerEpoch;
    int version (2); int configLen; byte config[configLen]     (QuorumVerifier.toString, UTF-8)

The receiver (``WorkerReceiver.run``) accepts older forms by the frame's size: 28 bytes (no
peerEpoch: it is taken from the zxid's epoch, no version), exactly 40 bytes (peerEpoch, the
version word is not read: version 0), otherwise it reads the version; a version > 1 must carry
``configLen`` in [0, frame size] and that many bytes. Bytes after the parsed fields are ignored.

Invariants
----------
* Every decoder either returns a value or raises :class:`ElectionWireError` -- for any input.
* Nothing a peer sends can make us buffer more than one initial message (8+8+4+2048 bytes) or
  one frame (4 + 512 KiB) at a time.
* Encoders produce exactly the bytes Java sends (golden tests in tests/quorum/data/).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from trizk.jute.javalang import java_split, parse_int

#: QuorumCnxManager.PROTOCOL_VERSION_V1 / _V2 (ZOOKEEPER-3188 multi-address uses V2).
PROTOCOL_VERSION_V1 = -65536
PROTOCOL_VERSION_V2 = -65535
#: QuorumCnxManager.maxBuffer: bound of the address part of the initial message.
MAX_INITIAL_ADDR = 2048
#: QuorumCnxManager.PACKETMAXSIZE: bound of one election frame.
PACKETMAXSIZE = 512 * 1024
#: QuorumPeer.OBSERVER_ID: an observer that does not know its sid (replaced by -1, -2, ...).
OBSERVER_ID = (1 << 63) - 1
#: FastLeaderElection.Notification.CURRENTVERSION.
NOTIFICATION_VERSION = 2


_HEAD = struct.Struct(">qqi")  # protocolVersion, sid, len
_NOTE28 = struct.Struct(">iqqq")  # state, leader, zxid, electionEpoch
_NOTE44 = struct.Struct(">iqqqqii")  # ... peerEpoch, version, configLen
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")


class ElectionWireError(ValueError):
    """Bytes on the election port that ZooKeeper would refuse; the link is closed.

    From :meth:`FrameDecoder.feed`, ``frames`` holds the whole frames that came before the bad
    length (Java's RecvWorker has delivered them by then)."""

    def __init__(self, message: str, frames: list[bytes] | None = None) -> None:
        super().__init__(message)
        self.frames: list[bytes] = frames or []


class ServerState(enum.IntEnum):
    """QuorumPeer.ServerState; the wire carries the ordinal."""

    LOOKING = 0
    FOLLOWING = 1
    LEADING = 2
    OBSERVING = 3


# --------------------------------------------------------------------------- initial message


@dataclass(frozen=True)
class InitialMessage:
    """What the connecting side said first. ``protocol_version`` is None for the bare-sid form,
    whose ``addresses`` is empty; ``addresses`` excludes wildcard hosts as Java drops them."""

    sid: int
    addresses: tuple[tuple[str, int], ...] = ()
    protocol_version: int | None = PROTOCOL_VERSION_V1


def format_address(host: str, port: int) -> str:
    """NetUtils.formatInetAddr: IPv6 literals in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def encode_initial_message(sid: int, host: str, port: int) -> bytes:
    """The V1 header a connecting member sends in one flushed write (startConnection)."""
    addr = format_address(host, port).encode()
    if not 0 < len(addr) <= MAX_INITIAL_ADDR:
        raise ValueError(f"election address too long: {len(addr)} bytes")
    return _HEAD.pack(PROTOCOL_VERSION_V1, sid, len(addr)) + addr


def encode_initial_message_multi(sid: int, addresses: Sequence[tuple[str, int]]) -> bytes:
    """The V2 header (``zookeeper.multiAddress.enabled``): every election address of the
    sender, ``host:port`` joined by ``|`` (startConnection, ZOOKEEPER-3188)."""
    addr = "|".join(format_address(h, p) for h, p in addresses).encode()
    if not 0 < len(addr) <= MAX_INITIAL_ADDR:
        raise ValueError(f"election addresses too long: {len(addr)} bytes")
    return _HEAD.pack(PROTOCOL_VERSION_V2, sid, len(addr)) + addr


def _host_and_port(s: str) -> tuple[str, int]:
    # ConfigUtils.getHostAndPort, then InitialMessage.parse's checks.
    if s.startswith("["):
        i = s.find("]")
        if i < 0 or i + 2 >= len(s):
            raise ElectionWireError(f"badly formed address: {s!r}")
        parts = [s[1:i], *java_split(s[i + 2 :], ":")]
    else:
        parts = java_split(s, ":")
    if len(parts) != 2:
        raise ElectionWireError(f"badly formed address: {s!r}")
    port = parse_int(parts[1])  # Integer.parseInt
    if port is None:
        raise ElectionWireError(f"bad port number: {parts[1]!r}")
    if not 0 <= port <= 0xFFFF:  # InetSocketAddress refuses it
        raise ElectionWireError(f"port out of range: {port}")
    return parts[0], port


_WILDCARDS = frozenset({"0.0.0.0", "::", "0:0:0:0:0:0:0:0", ""})


def parse_initial_message(buf: bytes | bytearray) -> tuple[InitialMessage, int] | None:
    """Parse the initial message at the start of ``buf``: (message, bytes used), or None when
    more bytes are needed. Raises ElectionWireError on what handleConnection refuses."""
    if len(buf) < 8:
        return None
    (first,) = _LONG.unpack_from(buf, 0)
    if first >= 0:  # pre-3.5: a bare sid
        return InitialMessage(first, (), None), 8
    if first not in (PROTOCOL_VERSION_V1, PROTOCOL_VERSION_V2):
        raise ElectionWireError(f"unrecognized protocol version {first}")
    if len(buf) < _HEAD.size:
        return None
    _, sid, n = _HEAD.unpack_from(buf, 0)
    if n <= 0 or n > MAX_INITIAL_ADDR:
        raise ElectionWireError(f"unreasonable buffer length: {n}")
    end = _HEAD.size + n
    if len(buf) < end:
        return None
    text = bytes(buf[_HEAD.size : end]).decode("utf-8", errors="replace")
    addrs = []
    for part in java_split(text, "|"):
        host, port = _host_and_port(part)
        if host not in _WILDCARDS:
            addrs.append((host, port))
    return InitialMessage(sid, tuple(addrs), first), end


#: Longest initial message a receiver ever buffers.
MAX_INITIAL_MESSAGE = _HEAD.size + MAX_INITIAL_ADDR


# --------------------------------------------------------------------------- framing


def encode_frame(payload: bytes) -> bytes:
    """SendWorker.send: int length + payload."""
    if not 0 < len(payload) <= PACKETMAXSIZE:
        raise ValueError(f"frame payload of {len(payload)} bytes")
    return _INT.pack(len(payload)) + payload


class FrameDecoder:
    """Incremental RecvWorker: feed bytes as they arrive, get whole frames out."""

    def __init__(self, max_size: int = PACKETMAXSIZE) -> None:
        self._buf = bytearray()
        self._max = max_size

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= 4:
            (n,) = _INT.unpack_from(self._buf, 0)
            if n <= 0 or n > self._max:
                raise ElectionWireError(f"received packet with invalid length: {n}", out)
            if len(self._buf) < 4 + n:
                break
            out.append(bytes(self._buf[4 : 4 + n]))
            del self._buf[: 4 + n]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)


# --------------------------------------------------------------------------- notifications


@dataclass(frozen=True)
class Notification:
    """One FastLeaderElection message as it is on the wire (the sender's sid is the link's).

    ``state`` is kept as the raw int: WorkerReceiver ignores an unknown state from a voter but
    still answers a non-voter whatever it sent. ``config`` is None when the sender's form
    carried none (version <= 1)."""

    state: int
    leader: int
    zxid: int
    election_epoch: int
    peer_epoch: int
    version: int = NOTIFICATION_VERSION
    config: bytes | None = b""

    def encode(self) -> bytes:
        """buildMsg (the 44-byte + config form); only version 2 is ever sent."""
        if self.version != NOTIFICATION_VERSION:
            raise ValueError("only version 2 notifications are sent")
        cfg = self.config or b""
        return (
            _NOTE44.pack(
                self.state,
                self.leader,
                self.zxid,
                self.election_epoch,
                self.peer_epoch,
                NOTIFICATION_VERSION,
                len(cfg),
            )
            + cfg
        )


def decode_notification(buf: bytes) -> Notification:
    """WorkerReceiver.run's parse of one frame (any length; see the module docstring)."""
    cap = len(buf)
    if cap < _NOTE28.size:
        raise ElectionWireError(f"short notification: {cap} bytes")
    state, leader, zxid, election_epoch = _NOTE28.unpack_from(buf, 0)
    version = 0
    config: bytes | None = None
    if cap == 28:
        peer_epoch = zxid >> 32  # ZxidUtils.getEpochFromZxid (arithmetic shift)
    else:
        if cap < 36:
            raise ElectionWireError(f"partial notification: {cap} bytes")
        (peer_epoch,) = _LONG.unpack_from(buf, 28)
        if cap != 40:
            if cap < 40:
                raise ElectionWireError(f"partial notification: {cap} bytes")
            (version,) = _INT.unpack_from(buf, 36)
        if version > 1:
            if cap < 44:
                raise ElectionWireError(f"partial notification: {cap} bytes")
            (n,) = _INT.unpack_from(buf, 40)
            if n < 0 or n > cap:
                raise ElectionWireError(f"invalid configLength {n} in a {cap}-byte notification")
            if 44 + n > cap:
                raise ElectionWireError(f"partial notification config: {n} of {cap - 44} bytes")
            config = bytes(buf[44 : 44 + n])
    return Notification(state, leader, zxid, election_epoch, peer_epoch, version, config)
