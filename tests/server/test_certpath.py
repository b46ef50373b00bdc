"""Java's PKIX checks of a TLS client's chain (:mod:`trizk.server.auth.certpath`), on chains
made here with ``cryptography``: the shared-subject chain of ZooKeeper's C client suite (which
OpenSSL calls self-signed), intermediates, dates, CA constraints, key usages."""

from __future__ import annotations

import datetime
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from trizk.server.auth.certpath import (
    CertificateRejected,
    HostnameMismatch,
    validate_client_chain,
    verify_hostname,
    verify_peer_host,
)

NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)
Key = ec.EllipticCurvePrivateKey


def _key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: str,
    key: Key,
    issuer: str,
    issuer_key: Key,
    *,
    ca: bool | None = None,
    path_length: int | None = None,
    ku: x509.KeyUsage | None = None,
    eku: list[x509.ObjectIdentifier] | None = None,
    before: datetime.datetime = NOW - DAY,
    after: datetime.datetime = NOW + DAY,
    critical_unknown: bool = False,
) -> x509.Certificate:
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(before)
        .not_valid_after(after)
    )
    if ca is not None:
        b = b.add_extension(x509.BasicConstraints(ca=ca, path_length=path_length), critical=True)
    if ku is not None:
        b = b.add_extension(ku, critical=True)
    if eku is not None:
        b = b.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
    if critical_unknown:
        b = b.add_extension(
            x509.UnrecognizedExtension(x509.ObjectIdentifier("1.2.3.4.5"), b"\x05\x00"),
            critical=True,
        )
    return b.sign(issuer_key, hashes.SHA256())


def _ku(*, digital_signature: bool = False, key_cert_sign: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=not digital_signature and not key_cert_sign,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def test_shared_subject_chain_is_accepted() -> None:
    """gencerts.sh: root, server and client certificates share one subject; the trust store
    holds the root and the server certificate (servertrust.jks)."""
    root_key, server_key, client_key = _key(), _key(), _key()
    root = _cert("zk", root_key, "zk", root_key)
    server = _cert("zk", server_key, "zk", root_key)
    client = _cert("zk", client_key, "zk", root_key)
    # the server certificate comes first: its key does not verify, the root's does
    assert validate_client_chain([client], [server, root], NOW) == root
    impostor_key = _key()
    impostor = _cert("zk", impostor_key, "zk", impostor_key)  # truly self-signed
    with pytest.raises(CertificateRejected, match="unable to find valid certification path"):
        validate_client_chain([impostor], [server, root], NOW)


def test_intermediates_and_anchors() -> None:
    root_key, mid_key, leaf_key = _key(), _key(), _key()
    root = _cert("root", root_key, "root", root_key, ca=True)
    mid = _cert("mid", mid_key, "root", root_key, ca=True, ku=_ku(key_cert_sign=True))
    leaf = _cert("leaf", leaf_key, "mid", mid_key, ku=_ku(digital_signature=True))
    assert validate_client_chain([leaf, mid], [root], NOW) == root
    assert validate_client_chain([leaf], [mid], NOW) == mid  # an intermediate as anchor
    assert validate_client_chain([leaf, mid, root], [root], NOW) == root
    with pytest.raises(CertificateRejected, match="unable to find"):
        validate_client_chain([leaf], [root], NOW)  # the intermediate is missing
    # a trusted leaf is trusted as it is (dates are not checked)
    old_key = _key()
    old = _cert("old", old_key, "old", old_key, after=NOW - DAY, before=NOW - 2 * DAY)
    assert validate_client_chain([old], [old], NOW) == old


def test_dates() -> None:
    root_key, leaf_key = _key(), _key()
    root = _cert("root", root_key, "root", root_key, ca=True, after=NOW - DAY)
    expired = _cert("leaf", leaf_key, "root", root_key, before=NOW - 2 * DAY, after=NOW - DAY)
    future = _cert("leaf", leaf_key, "root", root_key, before=NOW + DAY, after=NOW + 2 * DAY)
    good = _cert("leaf", leaf_key, "root", root_key)
    with pytest.raises(CertificateRejected, match=r"validity check failed \(NotAfter"):
        validate_client_chain([expired], [root], NOW)
    with pytest.raises(CertificateRejected, match=r"validity check failed \(NotBefore"):
        validate_client_chain([future], [root], NOW)
    assert validate_client_chain([good], [root], NOW) == root  # an expired anchor is fine


def test_ca_constraints() -> None:
    root_key, mid_key, leaf_key = _key(), _key(), _key()
    root = _cert("root", root_key, "root", root_key, ca=True)
    leaf_of = _cert("leaf", leaf_key, "mid", mid_key)
    not_ca = _cert("mid", mid_key, "root", root_key, ca=False)
    with pytest.raises(CertificateRejected, match="this is not a CA certificate"):
        validate_client_chain([leaf_of, not_ca], [root], NOW)
    v1 = _cert("mid", mid_key, "root", root_key)
    with pytest.raises(CertificateRejected, match="this is not a CA certificate"):
        validate_client_chain([leaf_of, v1], [root], NOW)
    no_sign = _cert("mid", mid_key, "root", root_key, ca=True, ku=_ku(digital_signature=True))
    with pytest.raises(CertificateRejected, match="CA key usage check failed"):
        validate_client_chain([leaf_of, no_sign], [root], NOW)
    # pathLen 0 on the first intermediate forbids a second one under it
    mid2_key = _key()
    mid0 = _cert("mid", mid_key, "root", root_key, ca=True, path_length=0)
    mid2 = _cert("mid2", mid2_key, "mid", mid_key, ca=True)
    leaf2 = _cert("leaf", leaf_key, "mid2", mid2_key)
    with pytest.raises(CertificateRejected, match="pathLenConstraint"):
        validate_client_chain([leaf2, mid2, mid0], [root], NOW)
    assert validate_client_chain([leaf_of, mid0], [root], NOW) == root
    odd = _cert("leaf", leaf_key, "root", root_key, critical_unknown=True)
    with pytest.raises(CertificateRejected, match=r"Unrecognized critical extension\(s\)"):
        validate_client_chain([odd], [root], NOW)


def test_client_key_usages() -> None:
    root_key, leaf_key = _key(), _key()
    root = _cert("root", root_key, "root", root_key, ca=True)

    def leaf(**kw: object) -> x509.Certificate:
        return _cert("leaf", leaf_key, "root", root_key, **kw)  # type: ignore[arg-type]

    with pytest.raises(CertificateRejected, match="does not allow digital signatures"):
        validate_client_chain([leaf(ku=_ku())], [root], NOW)
    with pytest.raises(CertificateRejected, match="does not permit use for TLS client auth"):
        validate_client_chain([leaf(eku=[ExtendedKeyUsageOID.SERVER_AUTH])], [root], NOW)
    for usages in (
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
        [ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE],
    ):
        ok = leaf(eku=usages, ku=_ku(digital_signature=True))
        assert validate_client_chain([ok], [root], NOW) == root
    with pytest.raises(CertificateRejected, match="Empty"):
        validate_client_chain([], [root], NOW)


# ---------------------------------------------------------------------------- host names


def _named(
    cn: str | None, *alts: x509.GeneralName, extra_cn: str | None = None
) -> x509.Certificate:
    key = _key()
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "zk")]
    if extra_cn is not None:
        attrs.insert(0, x509.NameAttribute(NameOID.COMMON_NAME, extra_cn))
    if cn is not None:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    name = x509.Name(attrs)
    b = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW - DAY)
        .not_valid_after(NOW + DAY)
    )
    if alts:
        b = b.add_extension(x509.SubjectAlternativeName(list(alts)), critical=False)
    return b.sign(key, hashes.SHA256())


def test_hostname_verification_as_zkhostnameverifier() -> None:
    ip = x509.IPAddress
    dns = x509.DNSName
    san = _named(
        "ignored.example",
        ip(ipaddress.ip_address("10.0.0.1")),
        ip(ipaddress.ip_address("::1")),
        dns("*.zk.example"),
        dns("Node1.Example"),
    )
    verify_hostname("10.0.0.1", san)
    verify_hostname("0:0:0:0:0:0:0:1", san)  # IPv6 compared normalised
    verify_hostname("[::1]", san)
    verify_hostname("a.zk.example", san)
    verify_hostname("NODE1.example", san)
    for host in ("10.0.0.2", "a.b.zk.example", "ignored.example", "zk.example"):
        with pytest.raises(HostnameMismatch, match="subject alternative names"):
            verify_hostname(host, san)
    # no subjectAltName: the most specific CN (the last in DER order)
    cn_only = _named("node2.example", extra_cn="other.example")
    verify_hostname("Node2.Example", cn_only)
    with pytest.raises(HostnameMismatch, match="common name of the certificate subject"):
        verify_hostname("other.example", cn_only)
    with pytest.raises(HostnameMismatch, match="doesn't contain a common name"):
        verify_hostname("x", _named(None))


def test_peer_host_tries_the_address_then_the_reverse_name() -> None:
    cert = _named(None, x509.DNSName("peer.example"))
    looked_up: list[str] = []

    def reverse() -> str:
        looked_up.append("peer.example")
        return "peer.example"

    verify_peer_host(cert, "10.1.1.1", reverse)
    assert looked_up == ["peer.example"]
    by_ip = _named(None, x509.IPAddress(ipaddress.ip_address("10.1.1.1")))
    verify_peer_host(by_ip, "10.1.1.1", lambda: pytest.fail("no reverse lookup needed"))
    with pytest.raises(CertificateRejected, match="Failed to verify both host address and"):
        verify_peer_host(cert, "10.1.1.1", lambda: "10-1-1-1.isp.example")
