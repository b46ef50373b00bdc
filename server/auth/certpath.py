"""Certificate path checks as Java's PKIX trust manager makes them for a TLS client certificate
(``X509Util.createTrustManager``: ``TrustManagerFactory("PKIX")`` over the trust store's anchors,
wrapped by ``ZKTrustManager``).

Theory
------
Why not OpenSSL's own verification: OpenSSL looks for a certificate's issuer *by name* and
calls a certificate whose subject equals its issuer "self-signed" without looking further.
ZooKeeper's C client suite (``zookeeper-client-c/ssl/gencerts.sh``) gives the root, the
server and the client certificates one subject name; the client certificate (issued by the
root) then looks self-signed and OpenSSL refuses it (``X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT``)
while Java accepts it: Java's ``PKIXValidator`` takes every trust anchor whose subject is the
certificate's issuer and keeps the one whose key verifies the signature. Python's ``ssl``
module has no verify callback, so the TLS shell lets the handshake accept any certificate and
hands the presented chain to :func:`validate_client_chain` before a single byte of the
connection is read; a rejected chain closes the connection (Java fails the handshake with an
alert; the client sees its connection end either way -- with TLS 1.3 a client finishes its
side of the handshake before the server judges its certificate, in Java as here).

The path (``PKIXValidator`` / ``PKIXCertPathValidator``; the revocation checks ``ssl.crl`` and
``ssl.ocsp`` add are :mod:`trizk.server.auth.revocation`'s, on the path
:func:`certification_path` returns):

1. A presented certificate that *is* a trust anchor ends the path there (Java's "chain
   contains a trusted certificate": the rest is not looked at).
2. Otherwise, from the leaf, each next certificate is an anchor or another presented
   certificate whose subject is the current issuer and whose key verifies the current
   signature (anchors first, every candidate tried: a depth-first search). None: "PKIX path
   building failed: unable to find valid certification path to requested target".
3. Every certificate on the path below the anchor is checked (an anchor is trusted as it is:
   PKIX checks neither its dates nor its extensions): its dates against ``now`` ("validity
   check failed"); an issuer below the anchor must be a CA -- a v3 basicConstraints CA whose
   pathLenConstraint allows the certificates under it, and keyCertSign if it has a keyUsage;
   any unknown critical extension fails ("Unrecognized critical extension(s)").
4. The leaf as a TLS client's certificate (``EndEntityChecker.checkTLSClient``): a keyUsage
   must allow digitalSignature; an extendedKeyUsage must name clientAuth or
   anyExtendedKeyUsage.

A TLS *server's* chain (what a quorum member checks of the member it connected to,
:func:`validate_server_chain`) is built and checked the same way; only step 4 differs
(``EndEntityChecker.checkTLSServer``: digitalSignature, serverAuth).

Host names (:func:`verify_peer_host`, ``ZKTrustManager.performHostVerification`` with
``ZKHostnameVerifier``): checked where ZooKeeper checks them -- a TLS client checks its server
when ``ssl.hostnameVerification`` is true (the default), a quorum member checks the member that
connected to it when ``ssl.quorum.hostnameVerification`` is; the client port never checks its
clients (``ClientX509Util.shouldVerifyClientHostname``). The peer's address is tried first,
then the name a reverse lookup gives. A certificate with subjectAltNames is matched on those
only (an IPv4 address against iPAddress entries as Java writes them, an IPv6 one after
normalising both, a name against dNSName entries, case-insensitively, a ``*`` standing for
one label at most); one without is matched on its most specific CN.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Callable, Sequence

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID

__all__ = [
    "CertificateRejected",
    "HostnameMismatch",
    "certification_path",
    "validate_client_chain",
    "validate_server_chain",
    "verify_hostname",
    "verify_peer_host",
]

#: the extensions Java's PKIX checkers process (a critical one of any other OID is refused)
_KNOWN_CRITICAL = {
    ExtensionOID.BASIC_CONSTRAINTS,
    ExtensionOID.KEY_USAGE,
    ExtensionOID.EXTENDED_KEY_USAGE,
    ExtensionOID.SUBJECT_ALTERNATIVE_NAME,
    ExtensionOID.ISSUER_ALTERNATIVE_NAME,
    ExtensionOID.NAME_CONSTRAINTS,
    ExtensionOID.POLICY_CONSTRAINTS,
    ExtensionOID.CERTIFICATE_POLICIES,
    ExtensionOID.POLICY_MAPPINGS,
    ExtensionOID.INHIBIT_ANY_POLICY,
    ExtensionOID.SUBJECT_KEY_IDENTIFIER,
    ExtensionOID.AUTHORITY_KEY_IDENTIFIER,
}
_NOT_FOUND = (
    "PKIX path building failed: unable to find valid certification path to requested target"
)


class CertificateRejected(Exception):
    """The client's certificate chain fails a PKIX check; the text says which, as Java does."""


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """Issuer name matches and the issuer's key verifies the signature."""
    try:
        cert.verify_directly_issued_by(issuer)
    except Exception:  # another name, an unsupported key, or InvalidSignature
        return False
    return True


def _extension(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> x509.ExtensionType | None:
    try:
        return cert.extensions.get_extension_for_oid(oid).value
    except x509.ExtensionNotFound:
        return None


def _build(
    path: list[x509.Certificate],
    pool: list[x509.Certificate],
    anchors: Sequence[x509.Certificate],
) -> tuple[list[x509.Certificate], x509.Certificate] | None:
    """Depth-first: the path below the anchor and the anchor, or None."""
    current = path[-1]
    for anchor in anchors:
        if _issued_by(current, anchor):
            return path, anchor
    for candidate in pool:
        if candidate in path or not _issued_by(current, candidate):
            continue
        found = _build([*path, candidate], pool, anchors)
        if found is not None:
            return found
    return None


def _check_dates(cert: x509.Certificate, now: datetime.datetime) -> None:
    if now > cert.not_valid_after_utc:
        raise CertificateRejected(
            "PKIX path validation failed: validity check failed (NotAfter: "
            f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC, {cert.subject.rfc4514_string()})"
        )
    if now < cert.not_valid_before_utc:
        raise CertificateRejected(
            "PKIX path validation failed: validity check failed (NotBefore: "
            f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC, {cert.subject.rfc4514_string()})"
        )


def _check_critical(cert: x509.Certificate) -> None:
    unknown = [e.oid.dotted_string for e in cert.extensions if e.critical]
    unknown = [o for o in unknown if x509.ObjectIdentifier(o) not in _KNOWN_CRITICAL]
    if unknown:
        raise CertificateRejected(
            f"PKIX path validation failed: Unrecognized critical extension(s) {unknown}"
        )


def _check_ca(cert: x509.Certificate, below: int) -> None:
    """An issuer under the anchor with ``below`` non-self-issued certificates under it."""
    bc = _extension(cert, ExtensionOID.BASIC_CONSTRAINTS)
    if not isinstance(bc, x509.BasicConstraints) or not bc.ca:
        raise CertificateRejected(
            "PKIX path validation failed: basic constraints check failed: this is not a CA "
            f"certificate ({cert.subject.rfc4514_string()})"
        )
    if bc.path_length is not None and below - 1 > bc.path_length:
        raise CertificateRejected(
            "PKIX path validation failed: basic constraints check failed: pathLenConstraint "
            "violated - this cert must be the last cert in the certification path"
        )
    ku = _extension(cert, ExtensionOID.KEY_USAGE)
    if isinstance(ku, x509.KeyUsage) and not ku.key_cert_sign:
        raise CertificateRejected("PKIX path validation failed: CA key usage check failed")


def _tls_end_entity_check(
    purpose: x509.ObjectIdentifier, role: str
) -> Callable[[x509.Certificate], None]:
    """``EndEntityChecker.checkTLSClient``/``checkTLSServer`` (for the (EC)DHE suites TLS uses
    here): a keyUsage must allow digitalSignature; an extendedKeyUsage must name ``purpose``
    (clientAuth or serverAuth) or anyExtendedKeyUsage."""

    def check(leaf: x509.Certificate) -> None:
        ku = _extension(leaf, ExtensionOID.KEY_USAGE)
        if isinstance(ku, x509.KeyUsage) and not ku.digital_signature:
            raise CertificateRejected("KeyUsage does not allow digital signatures")
        eku = _extension(leaf, ExtensionOID.EXTENDED_KEY_USAGE)
        if isinstance(eku, x509.ExtendedKeyUsage):
            if not set(eku) & {purpose, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE}:
                raise CertificateRejected(
                    f"Extended key usage does not permit use for TLS {role} authentication"
                )

    return check


_check_tls_client = _tls_end_entity_check(ExtendedKeyUsageOID.CLIENT_AUTH, "client")
_check_tls_server = _tls_end_entity_check(ExtendedKeyUsageOID.SERVER_AUTH, "server")


def validate_server_chain(
    chain: Sequence[x509.Certificate],
    anchors: Sequence[x509.Certificate],
    now: datetime.datetime,
) -> x509.Certificate:
    """:func:`validate_client_chain` for a TLS *server's* chain (what a quorum member that
    connects checks of the member it connected to: ``checkServerTrusted``)."""
    return _validate(chain, anchors, now, _check_tls_server)[1]


def certification_path(
    chain: Sequence[x509.Certificate],
    anchors: Sequence[x509.Certificate],
    now: datetime.datetime,
    *,
    client: bool,
) -> tuple[list[x509.Certificate], x509.Certificate]:
    """:func:`validate_client_chain` (``client``) or :func:`validate_server_chain`, returning
    the path below the anchor (leaf first) and the anchor: what the revocation checks walk
    (:mod:`trizk.server.auth.revocation`)."""
    return _validate(chain, anchors, now, _check_tls_client if client else _check_tls_server)


def validate_client_chain(
    chain: Sequence[x509.Certificate],
    anchors: Sequence[x509.Certificate],
    now: datetime.datetime,
) -> x509.Certificate:
    """Check a TLS client's chain (leaf first) against the trust anchors at ``now`` (aware);
    returns the anchor the path ends at. Raises :class:`CertificateRejected`."""
    return _validate(chain, anchors, now, _check_tls_client)[1]


def _validate(
    chain: Sequence[x509.Certificate],
    anchors: Sequence[x509.Certificate],
    now: datetime.datetime,
    end_entity: Callable[[x509.Certificate], None],
) -> tuple[list[x509.Certificate], x509.Certificate]:
    if not chain:
        raise CertificateRejected("Empty client certificate chain")
    leaf = chain[0]
    # 1. a presented certificate that is an anchor ends the path
    path: list[x509.Certificate] | None = None
    anchor: x509.Certificate | None = None
    for i, cert in enumerate(chain):
        if cert in anchors:
            path, anchor = list(chain[:i]), cert
            break
    if anchor is None:
        found = _build([leaf], list(chain[1:]), anchors)
        if found is None:
            raise CertificateRejected(_NOT_FOUND)
        path, anchor = found
    assert path is not None
    # 3. the certificates under the anchor, leaf first
    for i, cert in enumerate(path):
        _check_dates(cert, now)
        _check_critical(cert)
        if i > 0:
            _check_ca(cert, i)
    # 4. the leaf as a TLS client's (EndEntityChecker runs after the path, trusted leaf too)
    end_entity(leaf)
    return path, anchor


# ------------------------------------------------------------------ host names


class HostnameMismatch(Exception):
    """The certificate does not name the host (ZKHostnameVerifier's SSLPeerUnverifiedException)."""


def _match_identity(host: str, identity: str) -> bool:
    """``matchIdentityStrict``: both lower-cased; one ``*`` matches within one label."""
    star = identity.find("*")
    if star < 0:
        return host == identity
    prefix, suffix = identity[:star], identity[star + 1 :]
    if prefix and not host.startswith(prefix):
        return False
    if suffix and not host.endswith(suffix):
        return False
    return "." not in host[len(prefix) : len(host) - len(suffix)]


def _host_kind(host: str) -> tuple[str, str]:
    """("ipv4" | "ipv6" | "dns", the host as compared)."""
    try:
        v4 = ipaddress.IPv4Address(host)
    except ValueError:
        pass
    else:
        if str(v4) == host:  # InetAddressUtils.isIPv4Address: dotted decimal only
            return "ipv4", host
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return "ipv6", str(ipaddress.IPv6Address(bare))
    except ValueError:
        return "dns", host.lower()


def _normalised(address: str) -> str:
    """``normaliseAddress``: one spelling per IPv6 address (IPv4 ones as they are)."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address


def verify_hostname(host: str, cert: x509.Certificate) -> None:
    """``ZKHostnameVerifier.verify(host, cert)``; raises :class:`HostnameMismatch`."""
    kind, wanted = _host_kind(host)
    san = _extension(cert, ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
    ips: list[str] = []
    names: list[str] = []
    if isinstance(san, x509.SubjectAlternativeName):
        ips = [str(a) for a in san.get_values_for_type(x509.IPAddress)]
        names = list(san.get_values_for_type(x509.DNSName))
    if ips or names:
        if kind == "ipv4" and wanted in ips:
            return
        if kind == "ipv6" and wanted in [_normalised(a) for a in ips]:
            return
        if kind == "dns" and any(_match_identity(wanted, n.lower()) for n in names):
            return
        alts = [f"IP:{a}" for a in ips] + [f"DNS:{n}" for n in names]
        raise HostnameMismatch(
            f"Certificate for <{host}> doesn't match any of the subject alternative names: {alts}"
        )
    cn: str | None = None
    for rdn in reversed(cert.subject.rdns):
        for attr in rdn:
            if attr.oid == x509.NameOID.COMMON_NAME:
                cn = str(attr.value)
                break
        if cn is not None:
            break
    if cn is None:
        raise HostnameMismatch(
            f"Certificate subject for <{host}> doesn't contain a common name and does not have "
            "alternative names"
        )
    if not _match_identity(host.lower(), cn.lower()):
        raise HostnameMismatch(
            f"Certificate for <{host}> doesn't match common name of the certificate subject: {cn}"
        )


def verify_peer_host(cert: x509.Certificate, address: str, reverse_name: Callable[[], str]) -> None:
    """``ZKTrustManager.performHostVerification``: the peer's address, else the name of a
    reverse lookup (``reverse_name``, only called when the address fails); raises
    :class:`CertificateRejected` "Failed to verify both host address and host name"."""
    try:
        verify_hostname(address, cert)
        return
    except HostnameMismatch as by_address:
        first = by_address
    name = reverse_name()
    try:
        verify_hostname(name, cert)
    except HostnameMismatch as by_name:
        raise CertificateRejected(
            f"Failed to verify both host address and host name ({first}; {by_name})"
        ) from None
