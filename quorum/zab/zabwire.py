"""Zab's quorum-port wire: the packet type table and a sans-IO stream codec.

Theory
------
A learner's TCP connection to its leader carries a bare stream of Jute ``QuorumPacket``
records, with **no length prefix** and no magic (``Learner.writePacket`` /
``LearnerHandler`` use ``BinaryOutputArchive.writeRecord`` on the socket stream)::

    Stream       := (QuorumPacket | SNAP-QuorumPacket SnapPayload)*
    QuorumPacket := type:int zxid:long data:buffer authinfo:vector<Id>     (zookeeper.jute)
    Id           := scheme:ustring id:ustring

Right after a ``SNAP`` packet (type 15) the leader writes the snapshot itself, raw, on the same
stream (``LearnerHandler.run``: ``ZKDatabase.serializeSnapshot`` then
``writeString("BenWasHere")``)::

    SnapPayload  := Sessions AclCache Nodes Signature
    Sessions     := count:int (id:long timeout:int)*count       (SerializeUtils.serializeSnapshot)
    AclCache     := count:int (ref:long acls:vector<ACL>)*count  (ReferenceCountedACLCache)
    ACL          := perms:int Id
    Nodes        := (path:ustring data:buffer acl:long StatPersisted)* "/":ustring
                                                                  (DataTree.serialize)
    StatPersisted:= 60 fixed bytes (czxid mzxid ctime mtime version cversion aversion
                    ephemeralOwner pzxid)
    Signature    := "BenWasHere":ustring                         (checked by Learner)

The payload has no length, so the decoder walks this grammar to find its end; the payload is
handed on as opaque bytes (everything up to, not including, the signature) for the replica to
load (:mod:`trizk.storage` parses that body).

Invariants
----------
* :class:`QuorumStreamDecoder` yields the same events whatever the chunking of its input
  (property-tested byte by byte against one-shot feeding).
* It raises only :class:`QuorumStreamError`, as soon as the bytes cannot be a valid stream:
  negative lengths other than -1, a buffer/string or vector beyond its bound, a snapshot
  beyond ``max_snapshot`` bytes, a bad signature. After an error the decoder stays failed; the
  shell closes the link (a stray byte desyncs an unframed stream for good).
* Buffered input never exceeds one bounded item (a packet is at most ``max_packet`` bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

from trizk.jute.primitives import DEFAULT_MAX_BUFFER, JuteDecodeError
from trizk.jute.records import LearnerInfo, QuorumPacket


class PacketType(IntEnum):
    """Quorum packet types (``Leader.java`` constants), one table."""

    REQUEST = 1
    PROPOSAL = 2
    ACK = 3
    COMMIT = 4
    PING = 5
    REVALIDATE = 6
    SYNC = 7
    INFORM = 8
    COMMITANDACTIVATE = 9
    NEWLEADER = 10
    FOLLOWERINFO = 11
    UPTODATE = 12
    DIFF = 13
    TRUNC = 14
    SNAP = 15
    OBSERVERINFO = 16
    LEADERINFO = 17
    ACKEPOCH = 18
    INFORMANDACTIVATE = 19


def packet_name(t: int) -> str:
    """``Leader.getPacketType``: the name of a type, or ``UNKNOWN`` (never raises)."""
    try:
        return PacketType(t).name
    except ValueError:
        return "UNKNOWN"


#: LearnerInfo.protocolVersion / LEADERINFO data: Zab 1.0 (``0x10000``, Learner/LearnerHandler).
PROTOCOL_VERSION = 0x10000
#: The string the leader writes after a SNAP payload (``LearnerHandler.run``).
SNAP_SIGNATURE = "BenWasHere"
#: StatPersisted is nine fixed-width fields.
STAT_PERSISTED_SIZE = 60

_I = struct.Struct(">i")
_Q = struct.Struct(">q")
#: the ustring "/" that ends a snapshot's nodes
_SLASH = b"\x00\x00\x00\x01/"


class QuorumStreamError(ValueError):
    """The peer's bytes are not a valid quorum packet stream; close the link."""


# ------------------------------------------------------------------------ zxid (ZxidUtils)


def make_zxid(epoch: int, counter: int) -> int:
    """``ZxidUtils.makeZxid``: epoch in the high 32 bits, counter in the low 32."""
    return (epoch << 32) | (counter & 0xFFFFFFFF)


def epoch_of(zxid: int) -> int:
    """``ZxidUtils.getEpochFromZxid`` (arithmetic shift: -1 stays -1)."""
    return zxid >> 32


def counter_of(zxid: int) -> int:
    """``ZxidUtils.getCounterFromZxid``."""
    return zxid & 0xFFFFFFFF


def zxid_hex(zxid: int) -> str:
    return f"0x{zxid & 0xFFFFFFFFFFFFFFFF:x}"


# ------------------------------------------------------------------------ small payloads


def encode_learner_info(sid: int, config_version: int = 0) -> bytes:
    return LearnerInfo(sid, PROTOCOL_VERSION, config_version).encode()


def encode_int(v: int) -> bytes:
    return _I.pack(v)


def decode_int(data: bytes | None) -> int:
    """A 4-byte big-endian int payload (LEADERINFO version, ACKEPOCH epoch)."""
    if data is None or len(data) < 4:
        raise QuorumStreamError(f"expected a 4-byte int payload, got {data!r}")
    return int(_I.unpack_from(data, 0)[0])


def encode_touches(touches: dict[int, int]) -> bytes:
    """PING reply data: (long sessionId, int timeout)* -- empty, never null (Learner.ping)."""
    return b"".join(struct.pack(">qi", s, t) for s, t in touches.items())


def decode_touches(data: bytes | None) -> list[tuple[int, int]]:
    """LearnerHandler reads whole pairs while bytes remain; a torn pair is an EOF error."""
    if data is None:
        raise QuorumStreamError("PING reply without data")
    if len(data) % 12:
        raise QuorumStreamError(f"PING reply data of {len(data)} bytes is not whole pairs")
    return [(int(s), int(t)) for s, t in struct.iter_unpack(">qi", data)]


# ------------------------------------------------------------------------ encoder


def encode_packet(qp: QuorumPacket) -> bytes:
    """The bytes of one packet on the stream (no framing)."""
    return qp.encode()


def packet(t: int, zxid: int, data: bytes | None = None) -> QuorumPacket:
    """A QuorumPacket without authinfo (null vector, as every leader/learner packet but REQUEST)."""
    return QuorumPacket(int(t), zxid, data, None)


# ------------------------------------------------------------------------ decoder


class SnapshotSink(Protocol):
    """What a SNAP payload is handed to while it arrives (a learner's tree builder,
    ``treeio.SnapshotBuilder``): its Sessions and AclCache sections once they are whole,
    then its nodes in pieces of whole nodes (lengths checked), in order, without the "/" that
    ends them. It must not raise."""

    def head(self, head: bytes) -> None: ...

    def nodes(self, chunk: bytes, end: int) -> None:
        """The whole nodes ``chunk[:end]``."""


@dataclass(frozen=True, slots=True)
class SnapshotPayload:
    """The raw snapshot that followed a SNAP packet: Sessions AclCache Nodes (no signature);
    ``built``, the sink it was handed to while it arrived (when the decoder has one)."""

    body: bytes
    built: SnapshotSink | None = field(default=None, compare=False)


StreamEvent = QuorumPacket | SnapshotPayload

# A grammar is a generator that yields how many bytes it needs next and receives them.
_Grammar = Generator[int, bytes, object]
#: what a grammar yields to see the buffered bytes without taking them (at least one)
_PEEK = -1


class QuorumStreamDecoder:
    """Incremental decoder: ``feed(bytes)``, then ``next_event()`` until it returns None.

    ``max_packet`` bounds one QuorumPacket (its ``data`` buffer and all of authinfo);
    ``max_length`` bounds any single buffer/string (``jute.maxbuffer`` + extrasize);
    ``max_snapshot`` bounds a SNAP payload. Exceeding any raises :class:`QuorumStreamError`.
    """

    def __init__(
        self,
        *,
        max_packet: int = 2 * DEFAULT_MAX_BUFFER + 4096,
        max_length: int = 2 * DEFAULT_MAX_BUFFER,
        max_snapshot: int = 1 << 34,
        max_auth_ids: int = 1024,
        snapshot_sink: Callable[[], SnapshotSink] | None = None,
    ) -> None:
        #: makes the sink each SNAP payload is handed to while it arrives (None: none)
        self.snapshot_sink = snapshot_sink
        self._sink: SnapshotSink | None = None
        self.max_packet = max_packet
        self.max_length = max_length
        self.max_snapshot = max_snapshot
        self.max_auth_ids = max_auth_ids
        self._buf = bytearray()
        self._pos = 0
        self._failed: QuorumStreamError | None = None
        self._gen: _Grammar | None = None
        self._need = 0
        self._taken = 0  # bytes consumed by the current item so far
        self._snap_parts: list[bytes] = []
        self._in_snapshot = False

    def feed(self, data: bytes) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def next_event(self) -> StreamEvent | None:
        """The next packet or snapshot payload, None if more bytes are needed."""
        if self._failed is not None:
            raise self._failed
        try:
            return self._next()
        except QuorumStreamError as e:
            self._failed = e
            raise
        except JuteDecodeError as e:
            self._failed = QuorumStreamError(str(e))
            raise self._failed from None

    def _start(self) -> None:
        self._taken = 0
        if self._in_snapshot:
            self._snap_parts = []
            self._sink = self.snapshot_sink() if self.snapshot_sink is not None else None
            self._gen = self._snapshot_grammar()
        else:
            self._gen = self._packet_grammar()
        self._need = next(self._gen)

    def _next(self) -> StreamEvent | None:
        if self._gen is None:
            self._start()
        gen = self._gen
        assert gen is not None
        while True:
            if self._need == _PEEK:
                # the grammar looks at what is buffered without taking it (the snapshot's
                # nodes: as many whole ones as are there, then taken in one piece)
                if len(self._buf) == self._pos:
                    return None
                self._need = gen.send(bytes(self._buf[self._pos :]))
                continue
            if len(self._buf) - self._pos < self._need:
                return None
            chunk = bytes(self._buf[self._pos : self._pos + self._need])
            self._pos += self._need
            self._taken += self._need
            try:
                self._need = gen.send(chunk)
            except StopIteration as stop:
                self._gen = None
                result = stop.value
                if isinstance(result, QuorumPacket) and result.type == PacketType.SNAP:
                    self._in_snapshot = True
                elif isinstance(result, SnapshotPayload):
                    self._in_snapshot = False
                assert isinstance(result, QuorumPacket | SnapshotPayload)
                return result

    # Grammars. ``yield n`` returns the next n bytes.

    def _length(self, n: int, what: str) -> int:
        if n < -1:
            raise QuorumStreamError(f"negative {what} length {n}")
        if n > self.max_length:
            raise QuorumStreamError(f"{what} length {n} over the limit {self.max_length}")
        return n

    def _packet_grammar(self) -> _Grammar:
        parts: list[bytes] = []
        head = yield 16  # type, zxid, data length
        parts.append(head)
        n = self._length(_I.unpack_from(head, 12)[0], "packet data")
        if n > self.max_packet:
            raise QuorumStreamError(f"packet data of {n} bytes over {self.max_packet}")
        if n > 0:
            parts.append((yield n))
        cnt_b = yield 4
        parts.append(cnt_b)
        (count,) = _I.unpack(cnt_b)
        if count < -1 or count > self.max_auth_ids:
            raise QuorumStreamError(f"bad authinfo count {count}")
        for _ in range(max(count, 0)):
            for what in ("scheme", "id"):
                lb = yield 4
                parts.append(lb)
                k = self._length(_I.unpack(lb)[0], f"authinfo {what}")
                if k > 0:
                    parts.append((yield k))
                if self._taken > self.max_packet:
                    raise QuorumStreamError(f"packet over {self.max_packet} bytes")
        return QuorumPacket.decode(b"".join(parts))

    def _snap_take(self, b: bytes) -> bytes:
        self._snap_parts.append(b)
        if self._taken > self.max_snapshot:
            raise QuorumStreamError(f"snapshot over {self.max_snapshot} bytes")
        return b

    def _whole_nodes(self, b: bytes) -> tuple[int, bool]:
        """How many bytes at the start of ``b`` are whole snapshot nodes (``path data
        acl+StatPersisted``), including the "/" that ends them if it is there (then True)."""
        unpack = _I.unpack_from
        total = len(b)
        tail = 8 + STAT_PERSISTED_SIZE
        p = 0
        while p + 4 <= total:
            (n,) = unpack(b, p)
            n = self._length(n, "node path")
            if n < 0:
                raise QuorumStreamError("null node path in snapshot")
            q = p + 4 + n
            if q > total:
                break
            if n == 1 and b[p + 4] == 0x2F:  # "/": the end of the nodes
                return q, True
            if q + 4 > total:
                break
            (n,) = unpack(b, q)
            n = self._length(n, "node data")
            q += 4 + max(n, 0) + tail
            if q > total:
                break
            p = q
        return p, False

    def _snapshot_grammar(self) -> _Grammar:
        take = self._snap_take
        sink = self._sink
        (count,) = _I.unpack(take((yield 4)))
        if count < 0:
            raise QuorumStreamError(f"bad session count {count}")
        for _ in range(count):
            take((yield 12))
        (count,) = _I.unpack(take((yield 4)))
        if count < 0:
            raise QuorumStreamError(f"bad acl cache count {count}")
        for _ in range(count):
            take((yield 8))
            (k,) = _I.unpack(take((yield 4)))
            if k < 0:
                raise QuorumStreamError("Incorrect format: missing acls")
            for _ in range(k):
                take((yield 4))  # perms
                for what in ("acl scheme", "acl id"):
                    (n,) = _I.unpack(take((yield 4)))
                    n = self._length(n, what)
                    if n > 0:
                        take((yield n))
        if sink is not None:
            sink.head(b"".join(self._snap_parts))
        while True:
            # Whole nodes in one piece: as many as the buffer holds, by their lengths (the
            # same checks as node by node below); a node that is not all there yet is read
            # field by field.
            seen = yield _PEEK
            k, end = self._whole_nodes(seen)
            if k:
                chunk = take((yield k))
                if sink is not None:
                    sink.nodes(chunk, k - len(_SLASH) if end else k)
            if end:
                break
            if k:
                continue
            first = len(self._snap_parts)
            (n,) = _I.unpack(take((yield 4)))
            n = self._length(n, "node path")
            if n < 0:
                raise QuorumStreamError("null node path in snapshot")
            path = take((yield n)) if n else b""
            if path == b"/":
                break
            (n,) = _I.unpack(take((yield 4)))
            n = self._length(n, "node data")
            if n > 0:
                take((yield n))
            take((yield 8 + STAT_PERSISTED_SIZE))
            if sink is not None:
                node = b"".join(self._snap_parts[first:])
                sink.nodes(node, len(node))
        body = b"".join(self._snap_parts)
        self._snap_parts = []
        (n,) = _I.unpack((yield 4))
        sig = SNAP_SIGNATURE.encode()
        if n != len(sig) or (yield n) != sig:
            raise QuorumStreamError("Missing signature")
        self._sink = None
        return SnapshotPayload(body, sink)


def encode_snapshot_payload(body: bytes) -> bytes:
    """What follows a SNAP packet on the wire: the body, then the signature."""
    sig = SNAP_SIGNATURE.encode()
    return body + _I.pack(len(sig)) + sig


def encode_ackepoch_data(epoch: int) -> bytes:
    """ACKEPOCH data: the learner's currentEpoch as a Java int cast, or -1."""
    v = epoch & 0xFFFFFFFF
    return _I.pack(v - (1 << 32) if v >= 1 << 31 else v)


__all__ = [
    "PROTOCOL_VERSION",
    "SNAP_SIGNATURE",
    "PacketType",
    "QuorumStreamDecoder",
    "QuorumStreamError",
    "SnapshotPayload",
    "SnapshotSink",
    "StreamEvent",
    "counter_of",
    "decode_int",
    "decode_touches",
    "encode_ackepoch_data",
    "encode_int",
    "encode_learner_info",
    "encode_packet",
    "encode_snapshot_payload",
    "encode_touches",
    "epoch_of",
    "make_zxid",
    "packet",
    "packet_name",
    "zxid_hex",
]
