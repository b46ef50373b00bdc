"""A CA whose certificates carry CRL distribution points and OCSP responder URLs, and the HTTP
server that answers both, on 127.0.0.1 (for the revocation tests of trizk and of ZooKeeper).

* The CA (the trust anchor, PEM) signs a server certificate for 127.0.0.1 and client
  certificates: ``good`` and ``revoked`` point at this responder (``/ca.crl`` and ``/ocsp``),
  ``unreachable`` at a loopback port nobody listens on, ``bare`` has neither extension.
* The responder serves the CA's current CRL (``revoked``'s serial, keyCompromise) and signs
  OCSP responses with the CA's key (GET with the base64 request in the path, as the JDK sends
  small requests, and POST). It counts the requests it answers.

Every PEM key store is the key and its chain in one file (``ssl.keyStore.type=PEM``, which
ZooKeeper 3.8 reads too)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import ocsp
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID, NameOID

from trizk.testing.ports import free_port

CLIENTS = ("good", "revoked", "unreachable", "bare")


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass
class Pki:
    dir: Path
    ca_key: ec.EllipticCurvePrivateKey
    ca: x509.Certificate
    base: str  # http://127.0.0.1:port of the responder
    certs: dict[str, x509.Certificate] = field(default_factory=dict)
    revoked: set[int] = field(default_factory=set)
    hits: Counter[str] = field(default_factory=Counter)

    @property
    def trust_pem(self) -> Path:
        return self.dir / "ca.pem"

    def key_store(self, name: str) -> Path:
        """key + certificate (PEM key store)"""
        return self.dir / f"{name}.keystore.pem"

    def cert_pem(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def key_pem(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    # -- what the responder answers
    def crl(self) -> bytes:
        now = datetime.datetime.now(datetime.UTC)
        b = (
            x509.CertificateRevocationListBuilder()
            .issuer_name(self.ca.subject)
            .last_update(now - datetime.timedelta(minutes=1))
            .next_update(now + datetime.timedelta(hours=1))
        )
        for serial in sorted(self.revoked):
            b = b.add_revoked_certificate(
                x509.RevokedCertificateBuilder()
                .serial_number(serial)
                .revocation_date(now - datetime.timedelta(minutes=2))
                .add_extension(x509.CRLReason(x509.ReasonFlags.key_compromise), critical=False)
                .build()
            )
        return b.sign(self.ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)

    def ocsp_response(self, request_der: bytes) -> bytes:
        req = ocsp.load_der_ocsp_request(request_der)
        cert = next((c for c in self.certs.values() if c.serial_number == req.serial_number), None)
        if cert is None:
            return ocsp.OCSPResponseBuilder.build_unsuccessful(
                ocsp.OCSPResponseStatus.UNAUTHORIZED
            ).public_bytes(serialization.Encoding.DER)
        now = datetime.datetime.now(datetime.UTC)
        revoked = cert.serial_number in self.revoked
        b = (
            ocsp.OCSPResponseBuilder()
            .add_response(
                cert=cert,
                issuer=self.ca,
                algorithm=hashes.SHA1(),
                cert_status=ocsp.OCSPCertStatus.REVOKED if revoked else ocsp.OCSPCertStatus.GOOD,
                this_update=now - datetime.timedelta(minutes=1),
                next_update=now + datetime.timedelta(hours=1),
                revocation_time=now - datetime.timedelta(minutes=2) if revoked else None,
                revocation_reason=x509.ReasonFlags.key_compromise if revoked else None,
            )
            .responder_id(ocsp.OCSPResponderEncoding.HASH, self.ca)
        )
        return b.sign(self.ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


class _Handler(BaseHTTPRequestHandler):
    pki: Pki

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _reply(self, body: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/ca.crl":
            self.pki.hits["crl"] += 1
            self._reply(self.pki.crl(), "application/pkix-crl")
        elif self.path.startswith("/ocsp/"):
            self.pki.hits["ocsp"] += 1
            der = base64.b64decode(urllib.parse.unquote(self.path[len("/ocsp/") :]))
            self._reply(self.pki.ocsp_response(der), "application/ocsp-response")
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/ocsp":
            self.send_error(404)
            return
        self.pki.hits["ocsp"] += 1
        der = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._reply(self.pki.ocsp_response(der), "application/ocsp-response")


def _make(dir: Path, base: str, dead: str) -> Pki:
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "revocation test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(dir, ca_key, ca, base)
    dir.mkdir(parents=True, exist_ok=True)
    pki.trust_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    where = {"good": base, "revoked": base, "unreachable": dead, "server": base}
    for name in (*CLIENTS, "server"):
        key = ec.generate_private_key(ec.SECP256R1())
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        url = where.get(name)
        if url is not None:
            b = b.add_extension(
                x509.CRLDistributionPoints(
                    [
                        x509.DistributionPoint(
                            [x509.UniformResourceIdentifier(f"{url}/ca.crl")], None, None, None
                        )
                    ]
                ),
                critical=False,
            ).add_extension(
                x509.AuthorityInformationAccess(
                    [
                        x509.AccessDescription(
                            AuthorityInformationAccessOID.OCSP,
                            x509.UniformResourceIdentifier(f"{url}/ocsp"),
                        )
                    ]
                ),
                critical=False,
            )
        cert = b.sign(ca_key, hashes.SHA256())
        pki.certs[name] = cert
        pem = cert.public_bytes(serialization.Encoding.PEM)
        pki.cert_pem(name).write_bytes(pem)
        pki.key_pem(name).write_bytes(_pem_key(key))
        pki.key_store(name).write_bytes(_pem_key(key) + pem)
    pki.revoked.add(pki.certs["revoked"].serial_number)
    return pki


@contextmanager
def responder(dir: Path) -> Iterator[Pki]:
    """The PKI under ``dir`` and its HTTP responder on 127.0.0.1, for the block."""
    handler = type("Handler", (_Handler,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    port = server.server_address[1]
    pki = _make(dir, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{free_port()}")
    handler.pki = pki  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield pki
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
