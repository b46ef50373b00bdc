"""Length-prefixed frames, sans-IO.

A ZooKeeper connection carries frames of ``int length`` (big-endian, 4 bytes) followed by that
many bytes. :class:`FrameDecoder` is fed arbitrary chunks and yields complete frame payloads;
feeding the same bytes in any chunking yields the same frames (property-tested).

A declared length over ``max_frame`` (ZooKeeper: ``jute.maxbuffer``), or a negative one, raises
:class:`FrameTooLarge` as soon as the 4 length bytes are seen, before any payload is buffered,
so a client cannot make the server buffer more than the cap.
"""

from __future__ import annotations

import struct

from trizk.jute.primitives import JuteDecodeError

_LEN = struct.Struct(">i")


class FrameTooLarge(JuteDecodeError):
    """A frame declared a length outside [0, max_frame]."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"Len error {length} (limit {limit})")
        self.length = length
        self.limit = limit


class FrameDecoder:
    """Splits a byte stream into frame payloads (without the length prefix)."""

    __slots__ = ("_buf", "_pos", "max_frame")

    def __init__(self, max_frame: int) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_frame = max_frame

    def feed(self, data: bytes) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def peek(self, n: int) -> bytes:
        """The next ``n`` unconsumed bytes (fewer if not yet received)."""
        return bytes(self._buf[self._pos : self._pos + n])

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def next_frame(self) -> bytes | None:
        """Return the next complete payload, or None if more bytes are needed."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (n,) = _LEN.unpack_from(buf, pos)
        if n < 0 or n > self.max_frame:
            raise FrameTooLarge(n, self.max_frame)
        end = pos + 4 + n
        if len(buf) < end:
            return None
        payload = bytes(buf[pos + 4 : end])
        if end == len(buf):
            buf.clear()
            self._pos = 0
        else:
            self._pos = end
            if end > 65536:
                del buf[:end]
                self._pos = 0
        return payload


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its length."""
    return _LEN.pack(len(payload)) + payload
