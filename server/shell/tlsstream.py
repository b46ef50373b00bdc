"""A Trio TLS server stream over pyOpenSSL memory BIOs, so that the *server* decides whether a
client's certificate chain is trusted (:mod:`trizk.server.auth.certpath`).

Theory
------
Python's ``ssl`` module gives no verify callback: with ``CERT_REQUIRED`` or ``CERT_OPTIONAL``
OpenSSL verifies the client's chain itself and fails the handshake on any error, with OpenSSL's
rules (a certificate whose subject equals its issuer is "self-signed" and is refused unless it
is itself trusted), not Java's. pyOpenSSL's ``Context.set_verify`` takes a callback: the
contexts made by :func:`trizk.server.shell.tls.server_context` accept whatever the client
presents (OpenSSL still checks that the client owns the key: the CertificateVerify signature),
and the shell judges the chain after the handshake, before reading any request.

The stream is the shape of ``trio.SSLStream`` that the connection tasks use: one task receives
while another sends. The TLS object lives in memory (``bio_write`` what the socket delivers,
``bio_read`` what to send); both tasks call it synchronously between awaits, and the bytes it
has to send (records, alerts, TLS 1.3 session tickets and key updates) are taken and sent
under one FIFO lock, so they reach the socket in the order OpenSSL produced them. Any TLS or
socket failure is ``trio.BrokenResourceError``; the peer's close_notify or a plain EOF reads as
end of stream (b"").
"""

from __future__ import annotations

import trio
from cryptography import x509
from OpenSSL import SSL

__all__ = ["OpenSSLServerStream"]

_CHUNK = 65536


class OpenSSLServerStream(trio.abc.Stream):
    """The server side of one TLS connection on ``transport`` (the client side with
    ``client``: a quorum member connecting to another, :mod:`trizk.server.shell.quorumtls`)."""

    def __init__(
        self,
        transport: trio.abc.Stream,
        context: SSL.Context,
        initial: bytes = b"",
        *,
        client: bool = False,
    ) -> None:
        """``initial``: bytes already read from ``transport`` (a port that sniffed the first
        byte to tell TLS from plain text), fed to TLS first."""
        self.transport = transport
        self._conn = SSL.Connection(context, None)
        if client:
            self._conn.set_connect_state()
        else:
            self._conn.set_accept_state()
        if initial:
            self._conn.bio_write(initial)
        self._send_lock = trio.StrictFIFOLock()
        self._receiving = False
        self._closed = False

    # -- the TLS object's outgoing bytes, and the socket's incoming ones
    async def _flush(self) -> None:
        async with self._send_lock:
            while True:
                try:
                    data = self._conn.bio_read(_CHUNK)
                except SSL.WantReadError:
                    return
                if not data:
                    return
                try:
                    await self.transport.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                    raise trio.BrokenResourceError(str(e)) from e

    async def _fill(self) -> bool:
        """Feed the TLS object what the socket delivers; False at EOF."""
        try:
            data = await self.transport.receive_some(_CHUNK)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            raise trio.BrokenResourceError(str(e)) from e
        if not data:
            self._conn.bio_shutdown()
            return False
        self._conn.bio_write(data)
        return True

    # -- handshake and the peer's certificates
    async def do_handshake(self) -> None:
        while True:
            try:
                self._conn.do_handshake()
            except SSL.WantReadError:
                await self._flush()
                if not await self._fill():
                    raise trio.BrokenResourceError("EOF during the TLS handshake") from None
                continue
            except SSL.Error as e:
                try:
                    await self._flush()  # the alert, if OpenSSL wrote one
                except trio.BrokenResourceError:
                    pass
                raise trio.BrokenResourceError(f"TLS handshake failed: {e}") from e
            await self._flush()
            return

    def protocol(self) -> str:
        """The negotiated protocol (``TLSv1.2``), after the handshake."""
        return str(self._conn.get_protocol_version_name())

    def cipher(self) -> str:
        """The negotiated cipher suite (OpenSSL's name), after the handshake."""
        return str(self._conn.get_cipher_name())

    def peer_chain(self) -> list[x509.Certificate]:
        """The peer's certificates as presented, leaf first (empty: none)."""
        leaf = self._conn.get_peer_certificate(as_cryptography=True)
        if leaf is None:
            return []
        # On the server side OpenSSL's peer chain leaves the leaf out (the client side's has it).
        rest = self._conn.get_peer_cert_chain(as_cryptography=True) or []
        return [leaf, *(c for c in rest if c != leaf)]

    # -- trio.abc.Stream
    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._closed:
            raise trio.ClosedResourceError("the TLS stream is closed")
        if self._receiving:
            raise trio.BusyResourceError("another task is receiving on this TLS stream")
        self._receiving = True
        try:
            while True:
                try:
                    data = self._conn.recv(max_bytes or _CHUNK)
                except SSL.WantReadError:
                    await self._flush()
                    if not await self._fill():
                        return b""
                    continue
                except SSL.ZeroReturnError:
                    return b""
                except SSL.SysCallError:
                    return b""  # EOF without close_notify
                except SSL.Error as e:
                    raise trio.BrokenResourceError(f"TLS error: {e}") from e
                await self._flush()  # what reading made OpenSSL write (a key update answer)
                return bytes(data)
        finally:
            self._receiving = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the TLS stream is closed")
        view = memoryview(data)
        while view:
            try:
                n = self._conn.send(bytes(view[:_CHUNK]))
            except SSL.Error as e:
                raise trio.BrokenResourceError(f"TLS error: {e}") from e
            view = view[n:]
            await self._flush()
        if not data:
            await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            try:
                self._conn.shutdown()  # close_notify
            except SSL.Error:
                pass
            with trio.move_on_after(1):
                await self._flush()
        except trio.BrokenResourceError:
            pass
        finally:
            await self.transport.aclose()
