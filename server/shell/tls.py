"""TLS for the secure client port: ZooKeeper's ``ssl.*`` settings -> a pyOpenSSL context and the
trust anchors its clients are judged by (:class:`ServerTLS`), and the client certificate's
subject as the ``x509`` scheme sees it.

Theory
------
ZooKeeper serves TLS on ``secureClientPort`` (with the Netty connection factory) from the
properties ``zookeeper.ssl.keyStore.*``, ``zookeeper.ssl.trustStore.*`` and
``zookeeper.ssl.clientAuth`` (zoo.cfg keys ``ssl.*`` become those properties). Its quorum
(``sslQuorum``) and the AdminServer's HTTPS (``admin.forceHttps``/``admin.portUnification``)
read the same settings under ``zookeeper.ssl.quorum.*`` (``QuorumX509Util``). trizk reads them
all with one :class:`TLSSettings` per prefix:

* Stores (:mod:`trizk.server.shell.keystores`): JKS, PKCS12 and PEM as ``X509Util`` reads them
  (declared type or file extension, Java 17's dual-format JKS/PKCS12 decided by the bytes,
  ``*.password`` or ``*.passwordPath``).
* ``ssl.clientAuth``: ``need`` (the default, as ``ClientAuth.fromPropertyValue(null)``) asks for
  a certificate and fails the handshake without one; ``want`` asks but accepts none; ``none``
  does not ask.
* Client certificates are judged by Java's PKIX rules, not OpenSSL's
  (:mod:`trizk.server.auth.certpath` says why and how): the context accepts any chain in the
  handshake and the TLS shell (:mod:`trizk.server.shell.tlsstream`) checks it against the trust
  store before the connection is used.
* ``ssl.hostnameVerification`` (default true) is ``ZKTrustManager``'s *server* hostname check,
  which only a TLS client makes; the server side's check of its *clients'* names is on only
  where ``X509Util.shouldVerifyClientHostname()`` says so: never for the client port
  (``ClientX509Util``), always for the quorum (``QuorumX509Util``) when hostnameVerification is
  on. :attr:`TLSSettings.client_hostname_verification` is that product.
* ``ssl.crl`` / ``ssl.ocsp`` (default false) turn on the revocation checks of the JVM's PKIX
  validator (``X509Util.createTrustManager``): CRLs fetched from the certificates'
  distribution points, and with ``ssl.ocsp`` the OCSP responder their Authority Information
  Access names first; a certificate revoked, or whose status cannot be had, is refused (the
  JDK's legacy mode never soft-fails). :meth:`ServerTLS.judge_client` runs them after the
  PKIX path (:mod:`trizk.server.auth.revocation` gives the verdicts,
  :mod:`trizk.server.shell.revocationfetch` does the HTTP); the AdminServer's handshake and
  its x509 provider run them too (:mod:`trizk.server.ops.admin`). Answering as 3.9,
  ``ssl.ocsp=true`` stops the start: 3.9.3's secure client port fails every connection with
  it (:func:`check_client_port_ocsp`).
* Protocols of the client port (:func:`client_port_protocols`): ``ssl.enabledProtocols`` (a
  comma-separated list) or else the one ``ssl.protocol`` names, by default ``TLSv1.2`` in 3.8.0
  (``SSLContextAndOptions``: ``{sslContext.getProtocol()}``) and ``TLSv1.3`` in 3.9.3 on a JDK
  that has it (``X509Util.defaultTlsProtocol()``; ``ClientX509Util``'s Netty server context
  enables that one protocol). So a 3.8.0 server refuses a TLSv1.3-only client and a 3.9.3
  server a TLSv1.2-only one (3.8's Java client, measured: "The client supported protocol
  versions [TLSv1.2] are not accepted by server preferences [TLSv1.3]"). The context enables
  the range from the lowest to the highest protocol named. The quorum and the AdminServer keep
  TLSv1.2 and newer (:attr:`TLSSettings.protocols` empty).
* Without a trust store the system's default CAs verify client certificates (the JVM's
  default trust managers), but the x509 provider then has no trust manager and refuses every
  certificate: ZooKeeper closes such a connection ("No trust manager available").
* ``x509`` ids: ``X509Certificate.getSubjectX500Principal().getName()`` -- RFC 2253, most
  specific RDN first, keywords only for CN C L ST O OU STREET DC UID, any other attribute as
  ``OID=#<hex DER>``; ``,=+<>#;"\\`` escaped, a leading/trailing blank escaped
  (:func:`x509_subject`).

Only :func:`server_context` and the store loaders touch files (they read the stores).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa
from OpenSSL import SSL

from trizk.jute.javalang import parse_boolean
from trizk.server.auth.certpath import (
    CertificateRejected,
    certification_path,
)
from trizk.server.auth.revocation import X500_KEYWORDS, RevocationPolicy
from trizk.server.shell.keystores import (
    KeyMaterial,
    StoreConfig,
    StoreError,
    load_key_store,
    load_trust_store,
)
from trizk.server.shell.revocationfetch import RevocationFetcher

__all__ = [
    "CLIENT_PREFIX",
    "QUORUM_PREFIX",
    "ServerTLS",
    "TLSConfigError",
    "TLSSettings",
    "check_client_port_ocsp",
    "revocation_of",
    "server_context",
    "x509_subject",
]

CLIENT_PREFIX = "zookeeper.ssl."
QUORUM_PREFIX = "zookeeper.ssl.quorum."
_CLIENT_AUTHS = ("need", "want", "none")


class TLSConfigError(ValueError):
    """The TLS settings cannot be used (the server does not start); one line naming the key."""


def _get_boolean(props: Mapping[str, str], key: str, default: bool) -> bool:
    """``ZKConfig.getBoolean(key, default)``: absent is the default, else parseBoolean(trim)."""
    value = props.get(key)
    return default if value is None else parse_boolean(value.strip())


def revocation_of(props: Mapping[str, str], prefix: str = CLIENT_PREFIX) -> RevocationPolicy:
    """``<prefix>crl`` / ``<prefix>ocsp``: X509Util's crlEnabled / ocspEnabled, which turn on
    the PKIX revocation checks (trizk.server.auth.revocation,
    trizk.server.shell.revocationfetch)."""
    return RevocationPolicy(
        crl=_get_boolean(props, prefix + "crl", False),
        ocsp=_get_boolean(props, prefix + "ocsp", False),
    )


@dataclass(frozen=True, slots=True)
class TLSSettings:
    """One ``X509Util``'s settings (``zookeeper.ssl.`` or ``zookeeper.ssl.quorum.``)."""

    prefix: str
    key_store: StoreConfig | None
    trust_store: StoreConfig | None = None
    client_auth: str = "need"
    hostname_verification: bool = True
    client_hostname_verification: bool = False
    crl: bool = False
    ocsp: bool = False
    #: the protocols the listener enables (Java's names); empty: TLSv1.2 and newer
    protocols: tuple[str, ...] = ()

    @property
    def revocation(self) -> RevocationPolicy:
        """``ssl.crl`` / ``ssl.ocsp``"""
        return RevocationPolicy(crl=self.crl, ocsp=self.ocsp)

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], prefix: str = CLIENT_PREFIX, *, need_key_store: bool = True
    ) -> TLSSettings:
        try:
            key_store = StoreConfig.from_properties(props, prefix + "keyStore")
            trust_store = StoreConfig.from_properties(props, prefix + "trustStore")
        except StoreError as e:
            raise TLSConfigError(str(e)) from None
        if key_store is None and need_key_store:
            # X509Util only warns; a TLS server without a key manager then fails every
            # handshake, so trizk refuses to start instead.
            raise TLSConfigError(
                f"{prefix}keyStore.location not specified: a TLS server needs a key store "
                "(JKS, PKCS12 or PEM)"
            )
        raw_auth = props.get(prefix + "clientAuth") or ""
        auth = raw_auth.lower() or "need"
        if auth not in _CLIENT_AUTHS:
            raise TLSConfigError(f"{prefix}clientAuth={raw_auth!r}: expected need, want or none")
        hostname = _get_boolean(props, prefix + "hostnameVerification", True)
        revocation = revocation_of(props, prefix)
        return cls(
            prefix=prefix,
            key_store=key_store,
            trust_store=trust_store,
            client_auth=auth,
            hostname_verification=hostname,
            client_hostname_verification=hostname and prefix == QUORUM_PREFIX,
            crl=revocation.crl,
            ocsp=revocation.ocsp,
        )


#: Java's protocol names -> OpenSSL's versions
_PROTOCOLS: dict[str, int] = {
    "TLSv1": SSL.TLS1_VERSION,
    "TLSv1.1": SSL.TLS1_1_VERSION,
    "TLSv1.2": SSL.TLS1_2_VERSION,
    "TLSv1.3": SSL.TLS1_3_VERSION,
}


def client_port_protocols(
    props: Mapping[str, str], zk39: bool, prefix: str = CLIENT_PREFIX
) -> tuple[str, ...]:
    """The protocols ZooKeeper's secure client port enables (``ClientX509Util``'s Netty server
    context): ``<prefix>enabledProtocols`` split at commas, else ``<prefix>protocol``, else the
    release's default (3.8.0: TLSv1.2; 3.9.3: TLSv1.3, which Java 11+ has). An unknown name is
    a :class:`TLSConfigError` naming the key (Java fails every handshake with it)."""
    enabled = props.get(prefix + "enabledProtocols")
    if enabled is not None:
        key, names = prefix + "enabledProtocols", tuple(n.strip() for n in enabled.split(","))
    else:
        key = prefix + "protocol"
        names = (props.get(key) or ("TLSv1.3" if zk39 else "TLSv1.2"),)
    for name in names:
        if name not in _PROTOCOLS:
            raise TLSConfigError(f"{key}={name!r}: expected one of {', '.join(_PROTOCOLS)}")
    return names


def check_client_port_ocsp(props: Mapping[str, str], zk39: bool) -> None:
    """ZooKeeper 3.9's secure client port cannot serve with ``ssl.ocsp=true``:
    ``ClientX509Util`` passes the setting to Netty's ``SslContextBuilder.enableOcsp``, which
    the JDK SslProvider refuses, so every connection is closed before its TLS handshake
    ("Failed to initialize a channel ... OCSP is not supported with this SslProvider: JDK",
    measured with 3.9.3). trizk answering as 3.9 refuses to start instead (a
    :class:`TLSConfigError`), as it does for stores ZooKeeper cannot use; 3.8.0 checks OCSP as
    the trust manager's revocation check, and so does trizk answering as 3.8.0."""
    if zk39 and _get_boolean(props, CLIENT_PREFIX + "ocsp", False):
        raise TLSConfigError(
            f"{CLIENT_PREFIX}ocsp=true: ZooKeeper 3.9's secure client port fails every "
            "connection with it (Netty: OCSP is not supported with this SslProvider: JDK); "
            "set it to false, or answer as 3.8.0 (trizk.zookeeperVersion)"
        )


@dataclass(frozen=True, slots=True)
class LoadedStores:
    """The stores of one :class:`TLSSettings`, read."""

    key: KeyMaterial | None
    anchors: tuple[x509.Certificate, ...]


def load_stores(settings: TLSSettings) -> LoadedStores:
    """Read the key and trust stores (raises TLSConfigError naming the key)."""
    try:
        key = load_key_store(settings.key_store) if settings.key_store is not None else None
        anchors = load_trust_store(settings.trust_store) if settings.trust_store is not None else ()
    except StoreError as e:
        raise TLSConfigError(str(e)) from None
    return LoadedStores(key, tuple(anchors))


_SigningKey = (
    rsa.RSAPrivateKey
    | ec.EllipticCurvePrivateKey
    | ed25519.Ed25519PrivateKey
    | ed448.Ed448PrivateKey
    | dsa.DSAPrivateKey
)
_VERIFY = {
    "need": SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT,
    "want": SSL.VERIFY_PEER,
    "none": SSL.VERIFY_NONE,
}


def _accept_any(conn: SSL.Connection, cert: object, errnum: int, depth: int, ok: int) -> bool:
    """OpenSSL's verdict is not ZooKeeper's: the chain is judged after the handshake
    (:meth:`ServerTLS.judge_client`)."""
    return True


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """What a TLS listener needs: the context, and the trust anchors its clients are judged by
    (Java's PKIX rules, :mod:`trizk.server.auth.certpath`)."""

    settings: TLSSettings
    context: SSL.Context
    anchors: tuple[x509.Certificate, ...]
    key: KeyMaterial  # what ``context`` presents (a quorum peer's client side presents it too)
    #: the revocation checks (``ssl.crl`` / ``ssl.ocsp``), None when both are off
    revocation: RevocationFetcher | None = None

    async def judge_client(
        self, chain: list[x509.Certificate], now: datetime.datetime
    ) -> str | None:
        """None when the client's chain is trusted, else why not (Java's words): the PKIX
        path, then its revocation checks (the network: CRLs and OCSP, each fetch bounded)."""
        try:
            path, anchor = certification_path(chain, self.anchors, now, client=True)
        except CertificateRejected as e:
            return str(e)
        if self.revocation is None:
            return None
        return await self.revocation.judge(path, anchor, now)


def _signing_key(pem: bytes) -> _SigningKey:
    """A key TLS can sign with (the kinds a key store holds)."""
    key = serialization.load_pem_private_key(pem, None)
    if not isinstance(
        key,
        (
            rsa.RSAPrivateKey,
            ec.EllipticCurvePrivateKey,
            ed25519.Ed25519PrivateKey,
            ed448.Ed448PrivateKey,
            dsa.DSAPrivateKey,
        ),
    ):
        raise ValueError(f"a {type(key).__name__} cannot sign a TLS handshake")
    return key


def use_key_store(ctx: SSL.Context, settings: TLSSettings, key: KeyMaterial) -> None:
    """Present ``key`` (a key store's private key and certificate chain) on ``ctx``, a server's
    or a client's context (raises TLSConfigError naming the key store)."""
    assert settings.key_store is not None
    try:
        ctx.use_privatekey(_signing_key(key.key_pem))
        ctx.use_certificate(key.chain[0])
        for extra in key.chain[1:]:
            ctx.add_extra_chain_cert(extra)
        ctx.check_privatekey()
    except (SSL.Error, ValueError, TypeError) as e:
        raise TLSConfigError(
            f"{settings.key_store.location_key} {settings.key_store.location}: cannot use the "
            f"private key and certificate ({key.format}): {e}"
        ) from None


def server_context(settings: TLSSettings) -> ServerTLS:
    """The TLS context of a listener from its settings (reads the stores; raises
    TLSConfigError naming the key)."""
    stores = load_stores(settings)
    key = stores.key
    if key is None or settings.key_store is None:
        raise TLSConfigError(f"{settings.prefix}keyStore.location not specified")
    ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
    if settings.protocols:
        versions = [_PROTOCOLS[p] for p in settings.protocols]
        ctx.set_min_proto_version(min(versions))
        ctx.set_max_proto_version(max(versions))
    else:
        ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
    use_key_store(ctx, settings, key)
    ctx.set_verify(_VERIFY[settings.client_auth], _accept_any)
    if stores.anchors:
        # Java's CertificateRequest names the trust store's subjects (certificate_authorities)
        for anchor in stores.anchors:
            ctx.add_client_ca(anchor)
    ctx.set_session_id(b"trizk")
    policy = settings.revocation
    fetcher = RevocationFetcher(policy) if policy.enabled else None
    return ServerTLS(settings, ctx, stores.anchors, key, fetcher)


# ------------------------------------------------------------------ x509 ids

_ESCAPEES = ',=+<>#;"\\'


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def _der_value(tag: int, value: str) -> bytes:
    if tag == 30:  # BMPString
        body = value.encode("utf-16-be")
    elif tag == 28:  # UniversalString
        body = value.encode("utf-32-be")
    elif tag == 12:  # UTF8String
        body = value.encode("utf-8")
    else:
        body = value.encode("latin-1", "replace")
    return bytes([tag]) + _der_length(len(body)) + body


def _escape(value: str) -> str:
    out: list[str] = []
    for c in value:
        if c in _ESCAPEES:
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append("".join(f"\\{b:02X}" for b in c.encode("utf-8")))
        else:
            out.append(c)
    s = "".join(out)
    if s.startswith(" "):
        s = "\\" + s
    if s.endswith(" ") and not s.endswith("\\ "):
        s = s[:-1] + "\\ "
    return s


def x509_subject(der_cert: bytes) -> str:
    """The subject of a DER certificate as ``X500Principal.getName()`` (RFC 2253) writes it."""
    cert = x509.load_der_x509_certificate(der_cert)
    rdns: list[str] = []
    for rdn in reversed(list(cert.subject.rdns)):
        avas: list[str] = []
        for attr in rdn:
            oid = attr.oid.dotted_string
            keyword = X500_KEYWORDS.get(oid)
            value = attr.value if isinstance(attr.value, str) else attr.value.decode("latin-1")
            if keyword is None:
                tag = getattr(getattr(attr, "_type", None), "value", 12)
                avas.append(f"{oid}=#{_der_value(int(tag), value).hex()}")
            else:
                avas.append(f"{keyword}={_escape(value)}")
        rdns.append("+".join(avas))
    return ",".join(rdns)
