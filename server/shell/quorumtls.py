"""Quorum TLS: the election and Zab links between members over TLS, as ZooKeeper 3.8/3.9 makes
them (``sslQuorum``, ``portUnification``, ``sslQuorumReloadCertFiles``, ``ssl.quorum.*``).

Theory
------
ZooKeeper secures both quorum ports with one ``QuorumX509Util`` (properties
``zookeeper.ssl.quorum.*``; zoo.cfg keys ``ssl.quorum.*`` become them):

* **Who starts TLS.** The connecting member, always: ``QuorumCnxManager.initiateConnection``
  (election) and ``Learner.connectToLeader`` (quorum port) open an ``SSLSocket`` when
  ``sslQuorum=true`` and ``startHandshake()`` before the first byte of the protocol (the
  election's initial message, FOLLOWERINFO). The accepting member never decides alone: both
  ports listen on a ``UnifiedServerSocket`` when ``sslQuorum`` or ``portUnification`` is on,
  which reads the connection's first 5 bytes (``UnifiedSocket.detectMode``, within
  ``ssl.quorum.handshakeDetectionTimeoutMillis``, 5000) and asks Netty's
  ``SslHandler.isEncrypted`` whether they start a TLS record (:func:`looks_like_tls`). TLS:
  the server handshake, fed those bytes first. Plain text: served as plain text with
  ``portUnification=true`` (the bytes put back), else closed ("Blocked insecure connection
  attempt"). A plain member's first bytes never look like TLS: the election's initial message
  starts with a negative protocol version or a small sid, FOLLOWERINFO with ``00 00 00 0b``.
  So ZooKeeper's rolling switch works: portUnification on every member (restart one by one),
  then ``sslQuorum=true`` one by one (these connect with TLS, accept both), then
  portUnification off.
* **Defaults** (``X509Util`` / ``SSLContextAndOptions``): ``ssl.quorum.protocol`` TLSv1.2 in
  3.8.0 (enabled protocols: that one alone), TLSv1.3 in 3.9 (enabled: TLSv1.3 and TLSv1.2, the
  JDK's defaults for that context) -- trizk takes the release it answers as
  (``trizk.zookeeperVersion``); ``ssl.quorum.enabledProtocols`` and ``ssl.quorum.ciphersuites``
  are comma-separated Java names; the default suites are Java 9+'s list: ECDHE with AES-GCM,
  then ECDHE with AES-CBC (:data:`DEFAULT_CIPHERS`; TLS 1.3 keeps its own suites).
  ``ssl.quorum.clientAuth`` defaults to need: every member presents its key store's
  certificate, on both ports.
* **Checks** (``ZKTrustManager`` over Java's PKIX trust manager): each side judges the other's
  chain against its trust store (:mod:`trizk.server.auth.certpath`: a connecting member's as a
  TLS client's, the accepting member's as a TLS server's); with
  ``ssl.quorum.hostnameVerification`` (default true) *both* sides then check the certificate
  against the other end's IP address, then against the name a reverse lookup of it gives
  (``QuorumX509Util.shouldVerifyClientHostname`` is true): a member's certificate must name
  the address it connects from and listens on (a SAN ``IP:`` entry, or a DNS name / CN its
  address resolves back to). OpenSSL accepts any chain during the handshake and the chain is
  judged right after it, before one protocol byte is read or written (as the client port
  does, :mod:`trizk.server.shell.tlsstream`); a refused peer's connection is closed with one
  log line.
* ``sslQuorumReloadCertFiles``: ZooKeeper watches the stores' directories and builds a new
  context when a store file is modified or created; connections made after that use it. trizk
  looks at the files' (mtime, size, inode) before each new connection and rebuilds the
  contexts when one changed; stores that cannot be read then leave the previous contexts in
  place with one error line.

The pure parts (:class:`QuorumTLSConfig`, :func:`looks_like_tls`, :func:`openssl_cipher`)
read properties and bytes; :class:`QuorumTLS` is the shell both ports use (one place that
turns a connected Trio stream into a quorum TLS stream, in both directions).
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import trio
from cryptography import x509
from OpenSSL import SSL

from trizk.server.auth.certpath import (
    CertificateRejected,
    HostnameMismatch,
    certification_path,
    verify_hostname,
    verify_peer_host,
)
from trizk.server.common import release
from trizk.server.shell.revocationfetch import RevocationFetcher
from trizk.server.shell.streams import ReplayStream
from trizk.server.shell.tls import (
    QUORUM_PREFIX,
    TLSConfigError,
    TLSSettings,
    server_context,
    use_key_store,
)
from trizk.server.shell.tlsstream import OpenSSLServerStream

__all__ = [
    "DEFAULT_CIPHERS",
    "DEFAULT_DETECTION_TIMEOUT_MS",
    "QuorumTLS",
    "QuorumTLSConfig",
    "looks_like_tls",
    "openssl_cipher",
]

log = logging.getLogger("trizk.quorum.tls")

#: ``X509Util.DEFAULT_HANDSHAKE_DETECTION_TIMEOUT_MILLIS``
DEFAULT_DETECTION_TIMEOUT_MS = 5000
#: ``X509Util.DEFAULT_CIPHERS_JAVA9``: GCM first, then CBC (Java names)
DEFAULT_CIPHERS = (
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
)
#: Java's protocol names -> OpenSSL's version constant and the option that turns it off
_PROTOCOLS: dict[str, tuple[int, int]] = {
    "TLSv1": (SSL.TLS1_VERSION, SSL.OP_NO_TLSv1),
    "TLSv1.1": (SSL.TLS1_1_VERSION, SSL.OP_NO_TLSv1_1),
    "TLSv1.2": (SSL.TLS1_2_VERSION, SSL.OP_NO_TLSv1_2),
    "TLSv1.3": (SSL.TLS1_3_VERSION, SSL.OP_NO_TLSv1_3),
}
#: the TLS 1.3 suites (the same names in Java and OpenSSL)
_TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
_KEY_EXCHANGES = {
    "ECDHE_ECDSA": "ECDHE-ECDSA-",
    "ECDHE_RSA": "ECDHE-RSA-",
    "DHE_RSA": "DHE-RSA-",
    "DHE_DSS": "DHE-DSS-",
    "RSA": "",
}
_BULK = {
    "AES_128_GCM": "AES128-GCM",
    "AES_256_GCM": "AES256-GCM",
    "AES_128_CBC": "AES128",
    "AES_256_CBC": "AES256",
    "AES_128_CCM": "AES128-CCM",
    "AES_256_CCM": "AES256-CCM",
    "CHACHA20_POLY1305": "CHACHA20-POLY1305",
}


def openssl_cipher(java_name: str) -> str | None:
    """A TLS 1.2 suite's OpenSSL name from its Java (IANA) name, None when it is not one trizk
    knows (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` -> ``ECDHE-RSA-AES128-GCM-SHA256``)."""
    if not java_name.startswith("TLS_") or "_WITH_" not in java_name:
        return None
    kx, _, rest = java_name[4:].partition("_WITH_")
    prefix = _KEY_EXCHANGES.get(kx)
    if prefix is None:
        return None
    for bulk, name in _BULK.items():
        if rest == bulk or rest.startswith(bulk + "_"):
            mac = rest[len(bulk) + 1 :]
            if bulk == "CHACHA20_POLY1305":
                return prefix + name if mac == "SHA256" else None
            if bulk.endswith("CCM"):
                return prefix + name if mac in ("", "8") else None
            if mac not in ("SHA", "SHA256", "SHA384"):
                return None
            if prefix == "" and bulk == "AES_128_CBC" and mac == "SHA":
                return "AES128-SHA"
            return f"{prefix}{name}-{mac}"
    return None


def looks_like_tls(first: bytes) -> bool:
    """Netty's ``SslHandler.isEncrypted`` on a connection's first 5 bytes (what
    ``UnifiedSocket.detectMode`` asks): an SSLv3/TLS record header (content type 20..24,
    major version 3, a non-empty length) or an SSLv2 one (major version 2 or 3 after a 2- or
    3-byte header). Fewer than 5 bytes: plain text, as ZooKeeper decides."""
    if len(first) < 5:
        return False
    if first[0] in (20, 21, 22, 23, 24) and first[1] == 3:
        if int.from_bytes(first[3:5], "big") > 0:
            return True
    header = 2 if first[0] & 0x80 else 3
    return first[header + 1] in (2, 3) if header + 1 < len(first) else False


@dataclass(frozen=True, slots=True)
class QuorumTLSConfig:
    """What a member's quorum TLS is configured to be (pure: properties in, settings out)."""

    #: ``sslQuorum``: connect with TLS, accept TLS only (unless port unification)
    ssl_quorum: bool
    #: ``portUnification``: accept TLS and plain text on both ports
    port_unification: bool
    #: ``sslQuorumReloadCertFiles``
    reload_cert_files: bool
    #: the stores, clientAuth, hostnameVerification (``ssl.quorum.*``)
    settings: TLSSettings
    #: the properties the settings were read from (a reload reads the password files again)
    properties: Mapping[str, str]
    #: ``ssl.quorum.protocol`` and the enabled protocols, Java's names
    protocol: str
    enabled_protocols: tuple[str, ...]
    #: ``ssl.quorum.ciphersuites``: TLS 1.2 suites as OpenSSL names, TLS 1.3 ones as they are
    ciphers: tuple[str, ...]
    tls13_suites: tuple[str, ...]
    #: ``ssl.quorum.handshakeDetectionTimeoutMillis``
    detection_timeout_ms: int = DEFAULT_DETECTION_TIMEOUT_MS

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, str],
        *,
        ssl_quorum: bool,
        port_unification: bool,
        reload_cert_files: bool = False,
        zookeeper_version: str = release.DEFAULT_RELEASE,
    ) -> QuorumTLSConfig | None:
        """None when the quorum has no TLS (neither sslQuorum nor portUnification); raises
        TLSConfigError (one line naming the key) for settings that cannot be used."""
        if not (ssl_quorum or port_unification):
            return None
        p = QUORUM_PREFIX
        settings = TLSSettings.from_properties(props, p)
        if props.get(p + "context.supplier.class"):
            # X509Util loads that Java class to make the SSLContext
            raise TLSConfigError(
                f"{p}context.supplier.class: trizk builds its own TLS contexts (no Java "
                "classes); remove it"
            )
        is39 = release.is_39(zookeeper_version)
        # X509Util.DEFAULT_PROTOCOL: "TLSv1.2" in 3.8.0, defaultTlsProtocol() (TLSv1.3 on a
        # JDK that has it) in 3.9
        protocol = props.get(p + "protocol") or ("TLSv1.3" if is39 else "TLSv1.2")
        if protocol not in _PROTOCOLS and protocol not in ("TLS", "SSL"):
            raise TLSConfigError(f"{p}protocol={protocol}: not a TLS protocol Java knows")
        raw = props.get(p + "enabledProtocols")
        if raw is not None:
            enabled = tuple(raw.split(","))
        elif is39 and protocol in ("TLSv1.3", "TLS", "SSL"):
            enabled = ("TLSv1.3", "TLSv1.2")  # the JDK's defaults for a TLSv1.3 context
        elif protocol in ("TLS", "SSL"):
            enabled = ("TLSv1.3", "TLSv1.2")
        else:
            enabled = (protocol,)  # 3.8.0: {sslContext.getProtocol()}
        for name in enabled:
            if name not in _PROTOCOLS:
                raise TLSConfigError(f"{p}enabledProtocols: unsupported protocol {name!r}")
        raw = props.get(p + "ciphersuites")
        names = tuple(raw.split(",")) if raw is not None else DEFAULT_CIPHERS
        ciphers: list[str] = []
        tls13: list[str] = []
        for name in names:
            if name in _TLS13_SUITES:
                tls13.append(name)
                continue
            converted = openssl_cipher(name)
            if converted is None:
                raise TLSConfigError(f"{p}ciphersuites: unsupported cipher suite {name!r}")
            ciphers.append(converted)
        if raw is None:
            tls13 = ["TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256"]
            if is39:
                tls13.append("TLS_CHACHA20_POLY1305_SHA256")
        timeout = DEFAULT_DETECTION_TIMEOUT_MS
        text = props.get(p + "handshakeDetectionTimeoutMillis")
        if text is not None:
            try:
                timeout = int(text)
            except ValueError:
                raise TLSConfigError(
                    f"{p}handshakeDetectionTimeoutMillis={text!r}: not an integer"
                ) from None
            if timeout < 1:
                log.warning(
                    "Invalid value for %shandshakeDetectionTimeoutMillis: %d, using the default "
                    "value of %d", p, timeout, DEFAULT_DETECTION_TIMEOUT_MS,
                )  # fmt: skip
                timeout = DEFAULT_DETECTION_TIMEOUT_MS
        return cls(
            ssl_quorum=ssl_quorum,
            port_unification=port_unification,
            reload_cert_files=reload_cert_files,
            settings=settings,
            properties=dict(props),
            protocol=protocol,
            enabled_protocols=enabled,
            ciphers=tuple(ciphers),
            tls13_suites=tuple(tls13),
            detection_timeout_ms=timeout,
        )


def _accept_any(conn: SSL.Connection, cert: object, errnum: int, depth: int, ok: int) -> bool:
    """The chain is judged after the handshake, by Java's rules (module docstring)."""
    return True


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True, slots=True)
class _Contexts:
    server: SSL.Context
    client: SSL.Context
    anchors: tuple[x509.Certificate, ...]
    stamps: tuple[tuple[int, int, int] | None, ...]


def _peer_ip(stream: trio.abc.Stream) -> str:
    sock = getattr(stream, "socket", None)
    try:
        return str(sock.getpeername()[0]) if sock is not None else "?"
    except OSError:
        return "?"


async def _reverse_name(ip: str) -> str:
    """``InetAddress.getHostName()``: the name a reverse lookup gives, else the address."""
    try:
        host, _ = await trio.socket.getnameinfo((ip, 0), socket.NI_NAMEREQD)
    except (OSError, trio.socket.gaierror):
        return ip
    return str(host)


class QuorumTLS:
    """One member's quorum TLS (both ports): :meth:`accept` for a connection a port accepted,
    :meth:`connect` for one this member opened. Both return the stream to speak the protocol
    on, or None after one log line when the peer is refused (its connection closed)."""

    def __init__(self, config: QuorumTLSConfig) -> None:
        self.config = config
        self._settings = config.settings
        self._contexts = self._build(config.settings)
        # ssl.quorum.crl / ssl.quorum.ocsp: the trust manager's revocation checks, both ways
        policy = config.settings.revocation
        self._revocation = RevocationFetcher(policy) if policy.enabled else None

    # ------------------------------------------------------------------ contexts
    def _store_paths(self, settings: TLSSettings) -> tuple[str, ...]:
        return tuple(
            s.location for s in (settings.key_store, settings.trust_store) if s is not None
        )

    def _configure(self, ctx: SSL.Context) -> None:
        cfg = self.config
        versions = sorted(_PROTOCOLS[name][0] for name in cfg.enabled_protocols)
        ctx.set_min_proto_version(versions[0])
        ctx.set_max_proto_version(versions[-1])
        for name, (_, off) in _PROTOCOLS.items():
            if name not in cfg.enabled_protocols:
                ctx.set_options(off)
        try:
            if cfg.ciphers:
                ctx.set_cipher_list(":".join(cfg.ciphers).encode())
            ctx.set_tls13_ciphersuites(":".join(cfg.tls13_suites).encode())
        except SSL.Error as e:
            raise TLSConfigError(
                f"{QUORUM_PREFIX}ciphersuites: OpenSSL accepts none of them ({e})"
            ) from None

    def _build(self, settings: TLSSettings) -> _Contexts:
        paths = self._store_paths(settings)
        stamps = tuple(_stamp(p) for p in paths)
        served = server_context(settings)  # reads both stores; clientAuth, key and chain
        self._configure(served.context)
        client = SSL.Context(SSL.TLS_CLIENT_METHOD)
        self._configure(client)
        use_key_store(client, settings, served.key)  # the same key and chain, read once
        client.set_verify(SSL.VERIFY_PEER, _accept_any)
        return _Contexts(served.context, client, served.anchors, stamps)

    def _current(self) -> _Contexts:
        """The contexts, rebuilt first when a store file changed (sslQuorumReloadCertFiles)."""
        now = self._contexts
        if not self.config.reload_cert_files:
            return now
        paths = self._store_paths(self._settings)
        stamps = tuple(_stamp(p) for p in paths)
        if stamps == now.stamps:
            return now
        changed = [p for p, old, new in zip(paths, now.stamps, stamps, strict=True) if old != new]
        try:
            settings = TLSSettings.from_properties(self.config.properties, QUORUM_PREFIX)
            rebuilt = self._build(settings)
        except TLSConfigError as e:
            log.error("Failed to reload the quorum TLS stores (%s changed): %s; keeping the "
                      "previous ones", ", ".join(changed), e)  # fmt: skip
            # do not try again until the files change once more
            self._contexts = _Contexts(now.server, now.client, now.anchors, stamps)
            return self._contexts
        log.info("Reloaded the quorum TLS stores: %s changed", ", ".join(changed))
        self._settings = settings
        self._contexts = rebuilt
        return rebuilt

    # ------------------------------------------------------------------ accepting
    async def accept(
        self, stream: trio.abc.Stream, port: str, timeout: float
    ) -> trio.abc.Stream | None:
        """A connection ``port`` ("election" or "quorum") accepted: plain, or TLS as its
        first bytes say (module docstring); None when refused (closed, one log line)."""
        cfg = self.config
        ip = _peer_ip(stream)
        first = bytearray()
        with trio.move_on_after(cfg.detection_timeout_ms / 1000) as detecting:
            try:
                while len(first) < 5:
                    data = await stream.receive_some(5 - len(first))
                    if not data:
                        break
                    first += data
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
        if detecting.cancelled_caught:
            log.warning("Socket mode detection timed out after %d ms, assuming PLAINTEXT",
                        cfg.detection_timeout_ms)  # fmt: skip
        if not looks_like_tls(bytes(first)):
            if cfg.port_unification:
                return ReplayStream(stream, bytes(first))
            log.warning("Blocked insecure connection attempt from /%s on the %s port", ip, port)
            await _close(stream)
            return None
        contexts = self._current()
        tls = OpenSSLServerStream(stream, contexts.server, bytes(first))
        refused = await self._handshake(tls, timeout)
        if refused is None:
            chain = tls.peer_chain()
            if chain:
                refused = await self._judge(chain, contexts.anchors, ip, client=True)
        if refused is not None:
            log.error("Refused the TLS connection of quorum peer /%s on the %s port: %s",
                      ip, port, refused)  # fmt: skip
            await _close(tls)
            return None
        return tls

    # ------------------------------------------------------------------ connecting
    async def connect(
        self, stream: trio.abc.Stream, peer: str, timeout: float
    ) -> trio.abc.Stream | None:
        """A connection this member opened to ``peer`` (for the log: "3's election port"):
        TLS with sslQuorum, else as it is; None when the peer is refused or the handshake
        fails (closed, one log line)."""
        if not self.config.ssl_quorum:
            return stream
        ip = _peer_ip(stream)
        contexts = self._current()
        tls = OpenSSLServerStream(stream, contexts.client, client=True)
        refused = await self._handshake(tls, timeout)
        if refused is None:
            chain = tls.peer_chain()
            refused = (
                await self._judge(chain, contexts.anchors, ip, client=False)
                if chain
                else "the server presented no certificate"
            )
        if refused is not None:
            log.warning("Cannot open secure channel to %s (/%s): %s", peer, ip, refused)
            await _close(tls)
            return None
        log.info("SSL handshake complete with %s (/%s) - %s - %s",
                 peer, ip, tls.protocol(), tls.cipher())  # fmt: skip
        return tls

    # ------------------------------------------------------------------ both
    async def _handshake(self, tls: OpenSSLServerStream, timeout: float) -> str | None:
        try:
            with trio.fail_after(timeout):
                await tls.do_handshake()
        except trio.TooSlowError:
            return f"no TLS handshake within {timeout:g} s"
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            return str(e)
        return None

    async def _judge(
        self,
        chain: list[x509.Certificate],
        anchors: tuple[x509.Certificate, ...],
        ip: str,
        *,
        client: bool,
    ) -> str | None:
        """``ZKTrustManager.checkClientTrusted``/``checkServerTrusted``: the PKIX path (with
        the revocation checks of ``ssl.quorum.crl``/``ssl.quorum.ocsp``), then the host check
        against the peer's address (then its reverse-lookup name)."""
        settings = self._settings
        if settings.trust_store is None and not anchors:
            return "no trust store (ssl.quorum.trustStore.location) to judge its certificate"
        now = datetime.datetime.now(datetime.UTC)
        try:
            path, anchor = certification_path(chain, anchors, now, client=client)
        except CertificateRejected as e:
            return str(e)
        if self._revocation is not None:
            revoked = await self._revocation.judge(path, anchor, now)
            if revoked is not None:
                return revoked
        if not settings.hostname_verification:
            return None
        leaf = chain[0]
        try:
            verify_hostname(ip, leaf)
            return None
        except HostnameMismatch:
            pass
        name = await _reverse_name(ip)
        try:
            verify_peer_host(leaf, ip, lambda: name)
        except CertificateRejected as e:
            return str(e)
        return None

    def wrap_accept(
        self,
        handler: Callable[[trio.abc.Stream], Awaitable[object]],
        port: str,
        timeout: float,
    ) -> Callable[[trio.abc.Stream], Awaitable[None]]:
        """``handler`` for a listener: each accepted connection goes through :meth:`accept`
        first (a refused one never reaches it)."""

        async def accepted(stream: trio.abc.Stream) -> None:
            secured = await self.accept(stream, port, timeout)
            if secured is not None:
                await handler(secured)

        return accepted


async def _close(stream: trio.abc.Stream) -> None:
    with trio.CancelScope(shield=True):
        try:
            await stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
