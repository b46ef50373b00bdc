"""Certificates and PEM stores for quorum TLS tests: a CA, member certificates naming
127.0.0.1 (SAN ``IP:`` and ``DNS:localhost``, as ``ssl.quorum.hostnameVerification`` wants),
written as ZooKeeper's PEM key store (key + chain) and PEM trust store (the CA).

:func:`make_stores` makes one CA's stores; a second call with another name makes an
unrelated CA (the "untrusted member" of a test)."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Stores", "make_stores", "quorum_tls_keys"]

_NOW = datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class Stores:
    """One member's PEM key store and its CA's PEM trust store."""

    key_store: Path
    trust_store: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_stores(
    directory: Path,
    ca_name: str,
    members: list[str],
    *,
    expired: Collection[str] = (),
    names: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
) -> dict[str, Stores]:
    """A CA named ``ca_name`` and one certificate per name in ``members``: those in
    ``expired`` expired yesterday; ``names[member]`` = (IP addresses, DNS names) in its SAN
    instead of 127.0.0.1 and localhost. PEM files in ``directory``; returns member -> its
    stores."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_name))
        .issuer_name(_name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOW - datetime.timedelta(days=1))
        .not_valid_after(_NOW + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    trust = directory / f"{ca_name}-trust.pem"
    trust.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out: dict[str, Stores] = {}
    for member in members:
        if member in expired:
            start, end = _NOW - datetime.timedelta(days=10), _NOW - datetime.timedelta(days=1)
        else:
            start, end = _NOW - datetime.timedelta(days=1), _NOW + datetime.timedelta(days=30)
        ips, dns = (names or {}).get(member, (("127.0.0.1",), ("localhost",)))
        sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]
        sans += [x509.DNSName(d) for d in dns]
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(member))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        path = directory / f"{ca_name}-{member}.pem"
        path.write_bytes(
            _pem_key(key)
            + cert.public_bytes(serialization.Encoding.PEM)
            + ca.public_bytes(serialization.Encoding.PEM)
        )
        out[member] = Stores(path, trust)
    return out


def quorum_tls_keys(stores: Stores, **more: str) -> dict[str, str]:
    """zoo.cfg keys of a member with ``sslQuorum=true`` and these stores (then ``more``)."""
    return {
        "sslQuorum": "true",
        "ssl.quorum.keyStore.location": str(stores.key_store),
        "ssl.quorum.keyStore.type": "PEM",
        "ssl.quorum.trustStore.location": str(stores.trust_store),
        "ssl.quorum.trustStore.type": "PEM",
        **more,
    }
