"""The pure revocation verdicts (trizk.server.auth.revocation): CRLs and OCSP responses made
with ``cryptography`` for the certificates of tests/shell/revocation_pki.py, and the JDK's
legacy ``PREFER_OCSP`` / ``ONLY_CRLS`` rule (the network side is tests/shell/test_revocation.py)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import ocsp
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.shell.revocation_pki import Pki, _make
from trizk.server.auth import revocation as rv
from trizk.server.auth.certpath import certification_path


@pytest.fixture
def now() -> datetime.datetime:
    """The time of the checks: when the test starts, not when the module was imported (under
    xdist a module's tests may run many minutes after collection, and the CRLs and OCSP
    answers of the pki fixture are dated when they are made)."""
    return datetime.datetime.now(datetime.UTC)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d: Path = tmp_path_factory.mktemp("pki")
    return _make(d, "http://127.0.0.1:1", "http://127.0.0.1:2")


def _crl(pki: Pki) -> x509.CertificateRevocationList:
    return x509.load_der_x509_crl(pki.crl())


def test_where_to_ask(pki: Pki) -> None:
    good = pki.certs["good"]
    assert rv.crl_uris(good) == ("http://127.0.0.1:1/ca.crl",)
    assert rv.ocsp_uri(good) == "http://127.0.0.1:1/ocsp"
    assert rv.crl_uris(pki.certs["bare"]) == ()
    assert rv.ocsp_uri(pki.certs["bare"]) is None
    req = ocsp.load_der_ocsp_request(rv.ocsp_request(good, pki.ca))
    assert req.serial_number == good.serial_number
    assert isinstance(req.hash_algorithm, hashes.SHA1)


def test_path_below_the_anchor(pki: Pki, now: datetime.datetime) -> None:
    path, anchor = certification_path([pki.certs["good"]], [pki.ca], now, client=True)
    assert path == [pki.certs["good"]] and anchor == pki.ca


def test_crl_verdicts(pki: Pki, now: datetime.datetime) -> None:
    crl = _crl(pki)
    assert rv.check_crls(pki.certs["good"], pki.ca, [crl], now) == rv.GOOD
    revoked = rv.check_crls(pki.certs["revoked"], pki.ca, [crl], now)
    assert revoked.revoked
    assert revoked.reason.startswith("Certificate has been revoked, reason: KEY_COMPROMISE, ")
    assert "authority: CN=revocation test CA, extension OIDs: [2.5.29.21]" in revoked.reason
    assert " UTC 20" in revoked.reason  # java.util.Date's toString
    # no CRL at all: hard fail, as the JDK's legacy mode
    assert rv.check_crls(pki.certs["good"], pki.ca, [], now) == rv.Verdict(
        "unknown", rv.COULD_NOT_DETERMINE
    )
    assert rv.check_crls(pki.certs["good"], pki.ca, [], now, network_failed=True) == rv.Verdict(
        "unknown", rv.NETWORK_ERROR
    )
    assert rv.rejection(revoked).startswith("PKIX path validation failed: Certificate has been")


def test_unusable_crls(pki: Pki, now: datetime.datetime) -> None:
    crl = _crl(pki)
    # out of date beyond the 15 minutes of clock skew, or not yet valid
    later = now + datetime.timedelta(hours=1, minutes=20)
    assert rv.check_crls(pki.certs["revoked"], pki.ca, [crl], later).status == "unknown"
    skewed = now + datetime.timedelta(hours=1, minutes=10)
    assert rv.check_crls(pki.certs["revoked"], pki.ca, [crl], skewed).revoked
    earlier = now - datetime.timedelta(minutes=30)
    assert rv.check_crls(pki.certs["good"], pki.ca, [crl], earlier).status == "unknown"
    # signed by another key under the CA's name
    other = ec.generate_private_key(ec.SECP256R1())
    forged = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(pki.ca.subject)
        .last_update(now - datetime.timedelta(minutes=1))
        .next_update(now + datetime.timedelta(hours=1))
        .sign(other, hashes.SHA256())
    )
    assert rv.check_crls(pki.certs["revoked"], pki.ca, [forged], now).status == "unknown"
    # a usable CRL decides even beside a forged one
    assert rv.check_crls(pki.certs["revoked"], pki.ca, [forged, crl], now).revoked


def test_remove_from_crl_is_not_revoked(pki: Pki, now: datetime.datetime) -> None:
    entry = (
        x509.RevokedCertificateBuilder()
        .serial_number(pki.certs["good"].serial_number)
        .revocation_date(now - datetime.timedelta(minutes=2))
        .add_extension(x509.CRLReason(x509.ReasonFlags.remove_from_crl), critical=False)
        .build()
    )
    crl = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(pki.ca.subject)
        .last_update(now - datetime.timedelta(minutes=1))
        .next_update(now + datetime.timedelta(hours=1))
        .add_revoked_certificate(entry)
        .sign(pki.ca_key, hashes.SHA256())
    )
    assert rv.check_crls(pki.certs["good"], pki.ca, [crl], now) == rv.GOOD


def _ocsp(pki: Pki, name: str) -> bytes:
    return pki.ocsp_response(rv.ocsp_request(pki.certs[name], pki.ca))


def test_ocsp_verdicts(pki: Pki, now: datetime.datetime) -> None:
    assert rv.check_ocsp(pki.certs["good"], pki.ca, _ocsp(pki, "good"), now) == rv.GOOD
    revoked = rv.check_ocsp(pki.certs["revoked"], pki.ca, _ocsp(pki, "revoked"), now)
    assert revoked.revoked and "reason: KEY_COMPROMISE" in revoked.reason
    # the answer for another certificate does not speak for this one
    other = rv.check_ocsp(pki.certs["good"], pki.ca, _ocsp(pki, "revoked"), now)
    assert other.status == "unknown"
    unauthorized = ocsp.OCSPResponseBuilder.build_unsuccessful(
        ocsp.OCSPResponseStatus.UNAUTHORIZED
    ).public_bytes(serialization.Encoding.DER)
    assert rv.check_ocsp(pki.certs["good"], pki.ca, unauthorized, now) == rv.Verdict(
        "unknown", "OCSP response error: UNAUTHORIZED"
    )
    assert rv.check_ocsp(pki.certs["good"], pki.ca, b"<html>", now).status == "unknown"


def _responder(
    pki: Pki, eku: bool, now: datetime.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    b = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ocsp responder")]))
        .issuer_name(pki.ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if eku:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.OCSP_SIGNING]), False)
    return b.sign(pki.ca_key, hashes.SHA256()), key


@pytest.mark.parametrize("eku", [True, False])
def test_delegated_responder(pki: Pki, eku: bool, now: datetime.datetime) -> None:
    responder, key = _responder(pki, eku, now)
    cert = pki.certs["good"]
    der = (
        ocsp.OCSPResponseBuilder()
        .add_response(
            cert=cert,
            issuer=pki.ca,
            algorithm=hashes.SHA1(),
            cert_status=ocsp.OCSPCertStatus.GOOD,
            this_update=now - datetime.timedelta(minutes=1),
            next_update=now + datetime.timedelta(hours=1),
            revocation_time=None,
            revocation_reason=None,
        )
        .responder_id(ocsp.OCSPResponderEncoding.NAME, responder)
        .certificates([responder])
        .sign(key, hashes.SHA256())
        .public_bytes(serialization.Encoding.DER)
    )
    verdict = rv.check_ocsp(cert, pki.ca, der, now)
    if eku:
        assert verdict == rv.GOOD
    else:
        assert verdict.status == "unknown" and "not authorized" in verdict.reason


def test_prefer_ocsp_failover() -> None:
    crl_only = rv.RevocationPolicy(crl=True)
    both = rv.RevocationPolicy(crl=True, ocsp=True)
    ocsp_only = rv.RevocationPolicy(ocsp=True)
    assert not rv.RevocationPolicy().enabled and crl_only.enabled and ocsp_only.enabled
    revoked = rv.Verdict("revoked", "r")
    no_responder = rv.Verdict("unknown", rv.NO_RESPONDER)
    no_crl = rv.Verdict("unknown", rv.COULD_NOT_DETERMINE)
    # CRLs alone: the CRL verdict decides
    assert not rv.needs_failover(crl_only, no_crl)
    assert rv.combine(crl_only, no_crl) == no_crl
    for policy in (both, ocsp_only):  # ssl.ocsp turns the CRL DPs on as well
        assert not rv.needs_failover(policy, rv.GOOD)
        assert rv.combine(policy, revoked) == revoked
        assert rv.needs_failover(policy, no_responder)
        assert rv.combine(policy, no_responder, rv.GOOD) == rv.GOOD
        assert rv.combine(policy, no_responder, revoked) == revoked
        assert rv.combine(policy, no_responder, no_crl) == no_responder
