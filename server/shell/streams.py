"""Streams over streams: bytes a shell already read, received again first.

A quorum port peeks at a connection's first bytes before it knows who speaks: quorum TLS reads 5
to tell a TLS ClientHello from plain text (ZooKeeper's ``UnifiedServerSocket`` and
``PrependableSocket.prependToInputStream``), quorum SASL reads 8 to find the QuorumAuthPacket's
magic (``QuorumAuth.nextPacketIsAuth``, a mark and reset). :class:`ReplayStream` hands those bytes
back to whoever reads the link next.
"""

from __future__ import annotations

from typing import Any

import trio

__all__ = ["ReplayStream", "socket_of"]


class ReplayStream(trio.abc.Stream):
    """A stream whose first bytes were already read (the 8 bytes a server peeks at, as
    ``QuorumAuth.nextPacketIsAuth``'s mark and reset): they are received again first."""

    def __init__(self, stream: trio.abc.Stream, first: bytes) -> None:
        self.stream = stream
        self._first = first

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._first:
            n = len(self._first) if max_bytes is None else max_bytes
            data, self._first = self._first[:n], self._first[n:]
            await trio.lowlevel.checkpoint()
            return data
        return bytes(await self.stream.receive_some(max_bytes))

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


def socket_of(stream: trio.abc.Stream) -> Any | None:
    """The socket under ``stream``: its own, or that of the stream a wrapper wraps (trio's
    SSLStream, the TLS and replay wrappers); None when there is none."""
    s: object = stream
    for _ in range(4):
        sock = getattr(s, "socket", None)
        if sock is not None:
            return sock
        s = next(
            (w for a in ("transport_stream", "transport", "stream") if (w := getattr(s, a, None))),
            None,
        )
        if s is None:
            break
    return None
