"""Revocation checks of a certification path as the JVM makes them when ZooKeeper's
``ssl.crl`` / ``ssl.ocsp`` (or ``ssl.quorum.crl`` / ``ssl.quorum.ocsp``) is true: the verdicts
on CRLs and OCSP responses that the TLS shell fetched (:mod:`trizk.server.shell.revocationfetch`).

Theory
------
``X509Util.createTrustManager`` gives the PKIX trust manager ``PKIXBuilderParameters`` with
``setRevocationEnabled(crlEnabled || ocspEnabled)``; either flag also sets the system
properties ``com.sun.net.ssl.checkRevocation`` and ``com.sun.security.enableCRLDP`` (CRLs are
fetched from the certificates' CRL distribution points), and ``ssl.ocsp`` sets the security
property ``ocsp.enable``. The JDK's ``RevocationChecker`` then runs in its legacy mode (no
``PKIXRevocationChecker`` options): ``ONLY_CRLS`` without ``ocsp.enable``, ``PREFER_OCSP``
with it, never soft-fail, every certificate of the path below the trust anchor checked (the
anchor is trusted as it is), from the one nearest the anchor down to the leaf. Measured with
ZooKeeper 3.8.0 on Java 17 (tests/compat/test_revocation_oracle.py):

* ``ONLY_CRLS``: a certificate listed on its issuer's CRL is refused ("Certificate has been
  revoked, reason: KEY_COMPROMISE, revocation date: ..., authority: ..., extension OIDs:
  [2.5.29.21]"); one whose CRL cannot be had is refused too -- hard fail: "Unable to
  determine revocation status due to network error" when the distribution point cannot be
  reached, "Could not determine revocation status" when the certificate names none.
* ``PREFER_OCSP``: the OCSP responder of the certificate's Authority Information Access
  (the first ``id-ad-ocsp`` URI) is asked; a *revoked* answer refuses, a *good* one accepts;
  anything else (no responder named: "Certificate does not specify OCSP responder"; a network
  error: "Unable to determine revocation status due to network error"; an unusable response)
  falls over to the CRLs, and when those fail too the OCSP reason is the one reported.

What makes a CRL usable for a certificate (``DistributionPointFetcher.verifyCRL`` and the
``X509CRLSelector`` with the validation date and ``MAX_CLOCK_SKEW``): its issuer is the
certificate's issuer, the issuer's key verifies its signature, the issuer's keyUsage (if any)
allows cRLSign, it has a nextUpdate, and ``thisUpdate - 15 min <= now <= nextUpdate + 15 min``.
An entry with the certificate's serial revokes it unless its reason is removeFromCRL. A usable
OCSP response (``OCSPResponse.verify``): status successful, a basic response signed by the
issuer itself or by a responder certificate the issuer signed with the OCSPSigning extended
key usage, a single response for the certificate's CertId (SHA-1, as the JDK's ``CertId``), and
``thisUpdate - 15 min <= now <= nextUpdate + 15 min``. The JDK sends no nonce by default.

Not followed: ``ocsp.enable`` and ``com.sun.security.enableCRLDP`` are JVM-wide, so in
ZooKeeper ``ssl.quorum.ocsp=true`` also makes the client port's ``ssl.crl`` checks prefer
OCSP (and the reverse); trizk keeps each prefix's settings to its own port.

Everything here is pure: fetched bytes (or the reason a fetch failed) in, a :class:`Verdict`
out. The messages are the JDK's, as ZooKeeper logs them inside its SSLHandshakeException.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509 import ocsp
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID, ExtensionOID

__all__ = [
    "COULD_NOT_DETERMINE",
    "GOOD",
    "NETWORK_ERROR",
    "NO_RESPONDER",
    "X500_KEYWORDS",
    "RevocationPolicy",
    "Verdict",
    "check_crls",
    "check_ocsp",
    "combine",
    "crl_uris",
    "needs_failover",
    "ocsp_request",
    "ocsp_uri",
    "parse_crl",
    "rejection",
]

#: ``RevocationChecker.MAX_CLOCK_SKEW`` (and ``OCSPResponse``'s default ``ocsp.clockSkew``)
MAX_CLOCK_SKEW = datetime.timedelta(minutes=15)

COULD_NOT_DETERMINE = "Could not determine revocation status"
NETWORK_ERROR = "Unable to determine revocation status due to network error"
NO_RESPONDER = "Certificate does not specify OCSP responder"


@dataclass(frozen=True, slots=True)
class RevocationPolicy:
    """What ``ssl.crl`` / ``ssl.ocsp`` turn on (both false: no revocation checks)."""

    crl: bool = False
    ocsp: bool = False

    @property
    def enabled(self) -> bool:
        """``setRevocationEnabled(crlEnabled || ocspEnabled)``"""
        return self.crl or self.ocsp

    @property
    def prefer_ocsp(self) -> bool:
        """``ocsp.enable``: OCSP first, CRLs when it fails (else CRLs only)."""
        return self.ocsp


@dataclass(frozen=True, slots=True)
class Verdict:
    """One certificate's status by one method: ``good``, ``revoked`` or ``unknown`` (the
    method failed; ``reason`` says why, as the JDK does)."""

    status: str
    reason: str = ""

    @property
    def revoked(self) -> bool:
        return self.status == "revoked"

    @property
    def good(self) -> bool:
        return self.status == "good"


GOOD = Verdict("good")


def _unknown(reason: str) -> Verdict:
    return Verdict("unknown", reason)


def _extension(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> x509.ExtensionType | None:
    try:
        return cert.extensions.get_extension_for_oid(oid).value
    except x509.ExtensionNotFound:
        return None


# ------------------------------------------------------------------ where to ask


def crl_uris(cert: x509.Certificate) -> tuple[str, ...]:
    """The URIs of the certificate's CRL distribution points (fullName URIs, in order; a
    point with a cRLIssuer names an indirect CRL, which the shell cannot verify: skipped)."""
    cdp = _extension(cert, ExtensionOID.CRL_DISTRIBUTION_POINTS)
    if not isinstance(cdp, x509.CRLDistributionPoints):
        return ()
    uris: list[str] = []
    for point in cdp:
        if point.crl_issuer or not point.full_name:
            continue
        for name in point.full_name:
            if isinstance(name, x509.UniformResourceIdentifier):
                uris.append(name.value)
    return tuple(uris)


def ocsp_uri(cert: x509.Certificate) -> str | None:
    """``OCSP.getResponderURI``: the first id-ad-ocsp URI of the Authority Information
    Access extension, or None."""
    aia = _extension(cert, ExtensionOID.AUTHORITY_INFORMATION_ACCESS)
    if not isinstance(aia, x509.AuthorityInformationAccess):
        return None
    for desc in aia:
        if desc.access_method == AuthorityInformationAccessOID.OCSP and isinstance(
            desc.access_location, x509.UniformResourceIdentifier
        ):
            return desc.access_location.value
    return None


def ocsp_request(cert: x509.Certificate, issuer: x509.Certificate) -> bytes:
    """The DER OCSP request for ``cert`` (one CertId, SHA-1, no nonce: the JDK's default)."""
    builder = ocsp.OCSPRequestBuilder().add_certificate(cert, issuer, hashes.SHA1())
    return builder.build().public_bytes(serialization.Encoding.DER)


# ------------------------------------------------------------------ the JDK's words

#: ``java.security.cert.CRLReason`` names by RFC 5280 reason
_REASONS = {
    x509.ReasonFlags.unspecified: "UNSPECIFIED",
    x509.ReasonFlags.key_compromise: "KEY_COMPROMISE",
    x509.ReasonFlags.ca_compromise: "CA_COMPROMISE",
    x509.ReasonFlags.affiliation_changed: "AFFILIATION_CHANGED",
    x509.ReasonFlags.superseded: "SUPERSEDED",
    x509.ReasonFlags.cessation_of_operation: "CESSATION_OF_OPERATION",
    x509.ReasonFlags.certificate_hold: "CERTIFICATE_HOLD",
    x509.ReasonFlags.remove_from_crl: "REMOVE_FROM_CRL",
    x509.ReasonFlags.privilege_withdrawn: "PRIVILEGE_WITHDRAWN",
    x509.ReasonFlags.aa_compromise: "AA_COMPROMISE",
}
#: the attribute keywords Java writes in X.500 names (``X500Principal.toString()`` and
#: ``getName()`` alike, for these); other OIDs are written dotted
X500_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}


def _principal(name: x509.Name) -> str:
    """``X500Principal.toString()``: most specific RDN first, ", " between RDNs."""
    rdns: list[str] = []
    for rdn in reversed(list(name.rdns)):
        avas = []
        for attr in rdn:
            key = X500_KEYWORDS.get(attr.oid.dotted_string, "OID." + attr.oid.dotted_string)
            avas.append(f"{key}={attr.value!s}")
        rdns.append(" + ".join(avas))
    return ", ".join(rdns)


def _java_date(when: datetime.datetime) -> str:
    """``java.util.Date.toString()`` in UTC: ``Fri Nov 27 15:46:35 UTC 2026``."""
    return when.astimezone(datetime.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")


def _revoked(
    reason: x509.ReasonFlags | None,
    when: datetime.datetime,
    authority: x509.Name,
    extensions: Sequence[str] = (),
) -> Verdict:
    """``CertificateRevokedException.getMessage()`` (``extensions``: the OIDs of the CRL
    entry's extensions, the reasonCode among them; an OCSP answer's single response has none
    here)."""
    name = _REASONS.get(reason, "UNSPECIFIED") if reason is not None else "UNSPECIFIED"
    return Verdict(
        "revoked",
        f"Certificate has been revoked, reason: {name}, revocation date: {_java_date(when)}, "
        f"authority: {_principal(authority)}, extension OIDs: [{', '.join(extensions)}]",
    )


def rejection(verdict: Verdict) -> str:
    """The line a refusal logs (the style of :mod:`trizk.server.auth.certpath`'s reasons)."""
    return f"PKIX path validation failed: {verdict.reason}"


# ------------------------------------------------------------------ CRLs


def _in_window(
    this_update: datetime.datetime, next_update: datetime.datetime | None, now: datetime.datetime
) -> bool:
    if next_update is None:
        return False
    return this_update - MAX_CLOCK_SKEW <= now <= next_update + MAX_CLOCK_SKEW


def _crl_usable(
    crl: x509.CertificateRevocationList, issuer: x509.Certificate, now: datetime.datetime
) -> bool:
    if crl.issuer != issuer.subject:
        return False
    ku = _extension(issuer, ExtensionOID.KEY_USAGE)
    if isinstance(ku, x509.KeyUsage) and not ku.crl_sign:
        return False
    try:
        if not crl.is_signature_valid(issuer.public_key()):  # type: ignore[arg-type]
            return False
    except (TypeError, ValueError):
        return False
    return _in_window(crl.last_update_utc, crl.next_update_utc, now)


def parse_crl(data: bytes) -> x509.CertificateRevocationList | None:
    """A CRL in DER or PEM (what a distribution point serves), or None."""
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return x509.load_pem_x509_crl(data)
        return x509.load_der_x509_crl(data)
    except ValueError:
        return None


def check_crls(
    cert: x509.Certificate,
    issuer: x509.Certificate,
    crls: Sequence[x509.CertificateRevocationList],
    now: datetime.datetime,
    *,
    network_failed: bool = False,
) -> Verdict:
    """``cert``'s status by the CRLs fetched from its distribution points (``issuer`` signed
    it): revoked by any usable CRL that lists it, good when at least one usable CRL does not.
    Without a usable CRL: "Unable to determine revocation status due to network error" when
    a fetch failed (``network_failed``: ``URICertStore``'s IOException, which
    ``RevocationChecker.checkCRLs`` reports so), else "Could not determine revocation
    status" (measured with ZooKeeper 3.8.0: an unreachable point gives the first, a
    certificate without one the second)."""
    usable = [c for c in crls if _crl_usable(c, issuer, now)]
    for crl in usable:
        entry = crl.get_revoked_certificate_by_serial_number(cert.serial_number)
        if entry is None:
            continue
        reason: x509.ReasonFlags | None = None
        try:
            ext = entry.extensions.get_extension_for_oid(x509.CRLEntryExtensionOID.CRL_REASON)
            if isinstance(ext.value, x509.CRLReason):
                reason = ext.value.reason
        except x509.ExtensionNotFound:
            pass
        if reason == x509.ReasonFlags.remove_from_crl:
            continue
        oids = sorted(e.oid.dotted_string for e in entry.extensions)
        return _revoked(reason, entry.revocation_date_utc, crl.issuer, oids)
    if usable:
        return GOOD
    return _unknown(NETWORK_ERROR if network_failed else COULD_NOT_DETERMINE)


# ------------------------------------------------------------------ OCSP


def _ocsp_signer(
    response: ocsp.OCSPResponse, issuer: x509.Certificate, now: datetime.datetime
) -> x509.Certificate | None:
    """The certificate whose key signed the response: the issuer itself, or a delegated
    responder the issuer signed for OCSPSigning (valid at ``now``); None if neither."""
    candidates = [issuer, *response.certificates]
    for cert in candidates:
        if response.responder_name is not None:
            if cert.subject != response.responder_name:
                continue
        elif response.responder_key_hash is not None:
            digest = x509.SubjectKeyIdentifier.from_public_key(cert.public_key()).digest
            if digest != response.responder_key_hash:
                continue
        if cert == issuer:
            return cert
        try:
            cert.verify_directly_issued_by(issuer)
        except Exception:  # another issuer, or a bad signature
            continue
        eku = _extension(cert, ExtensionOID.EXTENDED_KEY_USAGE)
        if (
            not isinstance(eku, x509.ExtendedKeyUsage)
            or ExtendedKeyUsageOID.OCSP_SIGNING not in eku
        ):
            continue
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            continue
        return cert
    return None


def _signature_ok(response: ocsp.OCSPResponse, signer: x509.Certificate) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

    key = signer.public_key()
    algorithm = response.signature_hash_algorithm
    try:
        if isinstance(key, rsa.RSAPublicKey) and algorithm is not None:
            key.verify(
                response.signature, response.tbs_response_bytes, padding.PKCS1v15(), algorithm
            )
        elif isinstance(key, ec.EllipticCurvePublicKey) and algorithm is not None:
            key.verify(response.signature, response.tbs_response_bytes, ec.ECDSA(algorithm))
        else:
            key.verify(response.signature, response.tbs_response_bytes)  # type: ignore[call-arg,union-attr]
    except (InvalidSignature, TypeError, ValueError):
        return False
    return True


def check_ocsp(
    cert: x509.Certificate,
    issuer: x509.Certificate,
    response_der: bytes,
    now: datetime.datetime,
) -> Verdict:
    """``cert``'s status by its OCSP responder's answer (DER bytes)."""
    try:
        response = ocsp.load_der_ocsp_response(response_der)
    except ValueError:
        return _unknown("Unable to determine revocation status due to network error")
    if response.response_status != ocsp.OCSPResponseStatus.SUCCESSFUL:
        return _unknown(f"OCSP response error: {response.response_status.name}")
    signer = _ocsp_signer(response, issuer, now)
    if signer is None:
        return _unknown("Responder's certificate is not authorized to sign OCSP responses")
    if not _signature_ok(response, signer):
        return _unknown("Error verifying OCSP Response's signature")
    for single in response.responses:
        if single.serial_number != cert.serial_number or not _same_issuer(single, issuer, cert):
            continue
        if not _in_window(single.this_update_utc, single.next_update_utc or now, now):
            return _unknown("Response is unreliable: its validity interval is out-of-date")
        if single.certificate_status == ocsp.OCSPCertStatus.GOOD:
            return GOOD
        if single.certificate_status == ocsp.OCSPCertStatus.REVOKED:
            when = single.revocation_time_utc or now
            return _revoked(single.revocation_reason, when, signer.subject)
        return _unknown("Certificate's revocation status is unknown")
    return _unknown(f"No response found for CertId of serial {cert.serial_number:x}")


def _same_issuer(
    single: ocsp.OCSPSingleResponse, issuer: x509.Certificate, cert: x509.Certificate
) -> bool:
    """The single response's CertId names ``issuer`` (its name and key hashes, with the hash
    algorithm the responder used)."""
    try:
        mine = ocsp.OCSPRequestBuilder().add_certificate(cert, issuer, single.hash_algorithm)
        req = mine.build()
    except (TypeError, ValueError):
        return False
    return (
        req.issuer_key_hash == single.issuer_key_hash
        and req.issuer_name_hash == single.issuer_name_hash
    )


# ------------------------------------------------------------------ both


def combine(policy: RevocationPolicy, first: Verdict, crl: Verdict | None = None) -> Verdict:
    """The JDK's legacy ``RevocationChecker.check``: ``first`` is the OCSP verdict under
    ``PREFER_OCSP`` (else the CRL verdict, which decides alone); a revoked or good OCSP
    verdict decides, else the CRL verdict (``crl``: the failover) -- revoked or good decides,
    and when it fails too the OCSP reason is the one reported."""
    if not policy.prefer_ocsp or first.revoked or first.good:
        return first
    if crl is not None and (crl.revoked or crl.good):
        return crl
    return first


def needs_failover(policy: RevocationPolicy, first: Verdict) -> bool:
    """Whether the CRLs must be fetched after ``first`` (the OCSP verdict) to decide."""
    return policy.prefer_ocsp and not (first.revoked or first.good)
