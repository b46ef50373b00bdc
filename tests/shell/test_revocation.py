"""``ssl.crl`` / ``ssl.ocsp`` on the secure client port, over real sockets: a CA whose
certificates name a CRL distribution point and an OCSP responder served on 127.0.0.1
(tests/shell/revocation_pki.py). As Java ZooKeeper 3.8.0 does (tests/compat/
test_revocation_oracle.py runs the same cases against it): a good certificate is served, a
revoked one refused, and one whose status cannot be had -- its CRL point or responder
unreachable, or none named -- refused too (hard fail). Quorum links with
``ssl.quorum.crl``/``ssl.quorum.ocsp``: a revoked member is refused whichever end it is. Also
the fetcher alone: the CRL cache
(30 s, then fetched again) and a responder that never answers (bounded)."""

from __future__ import annotations

import datetime
import logging
import socket
import ssl
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import ThreadedServer, free_port
from tests.shell.revocation_pki import Pki, responder
from tests.shell.test_quorum_tls import _pair
from trizk.server.auth import revocation as rv
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.shell.quorumtls import QuorumTLS, QuorumTLSConfig
from trizk.server.shell.revocationfetch import FetchError, RevocationFetcher, http_exchange


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pki]:
    with responder(tmp_path_factory.mktemp("revocation")) as p:
        yield p


def _server(tmp_path: Path, pki: Pki, **keys: str) -> ThreadedServer:
    cfg: dict[str, Any] = {
        "clientPort": free_port(),
        "clientPortAddress": "127.0.0.1",
        "secureClientPort": free_port(),
        "secureClientPortAddress": "127.0.0.1",
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "ssl.keyStore.location": str(pki.key_store("server")),
        "ssl.trustStore.location": str(pki.trust_pem),
        **keys,
    }
    return ThreadedServer(ServerConfig.create(tmp_path / "data", **cfg)).start()


def served(port: int, pki: Pki, name: str) -> bool:
    """A TLS client presenting ``name``'s certificate gets a session (the ConnectResponse's
    first bytes); False when the server ends the connection first."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(str(pki.cert_pem(name)), str(pki.key_pem(name)))
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        s = ctx.wrap_socket(raw)
    except (ssl.SSLError, OSError):
        raw.close()
        return False
    try:
        # a ConnectRequest (protocol 0, zxid 0, 30 s, session 0, 16-byte password)
        connect = (44).to_bytes(4, "big") + bytes(4) + bytes(8) + (30000).to_bytes(4, "big")
        connect += bytes(8) + (16).to_bytes(4, "big") + bytes(16)
        s.sendall(connect)
        return len(s.recv(4)) > 0
    except (ssl.SSLError, OSError):
        return False
    finally:
        s.close()


EXPECTED = {"good": True, "revoked": False, "unreachable": False, "bare": False}


@pytest.mark.parametrize("mode", ["crl", "ocsp"])
def test_client_certificates_checked_for_revocation(
    tmp_path: Path, pki: Pki, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    pki.hits.clear()
    # ssl.ocsp on the client port is 3.8's (3.9.3's Netty port fails every connection with it)
    srv = _server(tmp_path, pki, **{f"ssl.{mode}": "true", "trizk.zookeeperVersion": "3.8.0"})
    try:
        assert srv.server is not None
        port = int(srv.server.secure_port)
        with caplog.at_level(logging.ERROR):
            judged = {name: served(port, pki, name) for name in EXPECTED}
        # twice more: the CRL is cached, OCSP is asked every time
        assert served(port, pki, "good") and not served(port, pki, "revoked")
    finally:
        srv.stop()
    assert judged == EXPECTED
    lines = [r.getMessage() for r in caplog.records if "Unsuccessful handshake" in r.getMessage()]
    assert len(lines) == 4, lines  # and the revoked one once more
    revoked = (
        "Unsuccessful handshake with /127.0.0.1: PKIX path validation failed: Certificate has "
        "been revoked, reason: KEY_COMPROMISE, revocation date: "
    )
    assert lines[0].startswith(revoked) and lines[3].startswith(revoked), lines
    # a CRL entry's extensions (its reasonCode); an OCSP single response has none
    oids = "[2.5.29.21]" if mode == "crl" else "[]"
    assert lines[0].endswith(f"authority: CN=revocation test CA, extension OIDs: {oids}")
    if mode == "crl":
        assert lines[1:3] == [
            f"Unsuccessful handshake with /127.0.0.1: PKIX path validation failed: {why}"
            for why in (rv.NETWORK_ERROR, rv.COULD_NOT_DETERMINE)
        ]
        assert pki.hits == {"crl": 1}
    else:  # OCSP's reason (the CRL failover failed too)
        assert lines[1:3] == [
            f"Unsuccessful handshake with /127.0.0.1: PKIX path validation failed: {why}"
            for why in (rv.NETWORK_ERROR, rv.NO_RESPONDER)
        ]
        assert pki.hits == {"ocsp": 4}
    assert not any(r.exc_info for r in caplog.records)


def test_client_port_ocsp_stops_the_start_as_39(tmp_path: Path, pki: Pki) -> None:
    with pytest.raises(RuntimeError, match=r"zookeeper\.ssl\.ocsp=true: ZooKeeper 3\.9's"):
        _server(tmp_path, pki, **{"ssl.ocsp": "true", "trizk.zookeeperVersion": "3.9.3"})


def test_without_revocation_checks_nothing_is_fetched(tmp_path: Path, pki: Pki) -> None:
    pki.hits.clear()
    srv = _server(tmp_path, pki)
    try:
        assert srv.server is not None
        port = int(srv.server.secure_port)
        assert all(served(port, pki, name) for name in EXPECTED)
    finally:
        srv.stop()
    assert not pki.hits


async def test_crl_cache_and_bounded_fetches(pki: Pki) -> None:
    pki.hits.clear()
    fetcher = RevocationFetcher(rv.RevocationPolicy(crl=True), timeout=2)
    now = datetime.datetime.now(datetime.UTC)
    good, revoked = pki.certs["good"], pki.certs["revoked"]
    assert await fetcher.verdict(good, pki.ca, now) == rv.GOOD
    assert (await fetcher.verdict(revoked, pki.ca, now + datetime.timedelta(seconds=29))).revoked
    assert pki.hits == {"crl": 1}
    # URICertStore looks again after 30 s
    assert await fetcher.verdict(good, pki.ca, now + datetime.timedelta(seconds=31)) == rv.GOOD
    assert pki.hits == {"crl": 2}
    assert await fetcher.judge([revoked], pki.ca, now) is not None

    # a responder that accepts and never answers: the fetch ends at its bound
    async def mute(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, mute, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        with trio.fail_after(10):
            with pytest.raises(FetchError, match=r"no answer within 0\.5 s"):
                await http_exchange(f"http://127.0.0.1:{port}/ca.crl", timeout=0.5)
        nursery.cancel_scope.cancel()
    with pytest.raises(FetchError, match="only http"):
        await http_exchange("ldap://127.0.0.1/cn=ca")
    with pytest.raises(FetchError, match="HTTP status 404"):
        await http_exchange(pki.base + "/missing")


# -------------------------------------------------------------------------- quorum links


def _quorum(pki: Pki, name: str, **more: str) -> QuorumTLS:
    props = {
        "zookeeper.ssl.quorum.keyStore.location": str(pki.key_store(name)),
        "zookeeper.ssl.quorum.trustStore.location": str(pki.trust_pem),
        **{"zookeeper.ssl.quorum." + k: v for k, v in more.items()},
    }
    cfg = QuorumTLSConfig.from_properties(
        props, ssl_quorum=True, port_unification=False, zookeeper_version="3.8.0"
    )
    assert cfg is not None
    return QuorumTLS(cfg)


@pytest.mark.parametrize("mode", ["crl", "ocsp"])
async def test_a_revoked_member_is_refused_both_ways(
    pki: Pki, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``ssl.quorum.crl``/``ssl.quorum.ocsp``: the trust manager checks the other member's
    chain whichever end it is (``checkClientTrusted`` when it connected to us,
    ``checkServerTrusted`` when we connected to it)."""
    checking = _quorum(pki, "good", **{mode: "true"})
    revoked = _quorum(pki, "revoked")  # it does not check: only the checking end refuses
    caplog.set_level(logging.INFO, "trizk.quorum.tls")
    s, _ = await _pair(checking, revoked)  # the revoked member connects
    assert s is None
    lines = [r.getMessage() for r in caplog.records if "Refused the TLS" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(
        "Refused the TLS connection of quorum peer /127.0.0.1 on the election port: PKIX path "
        "validation failed: Certificate has been revoked, reason: KEY_COMPROMISE"
    ), lines
    caplog.clear()
    _, c = await _pair(revoked, checking)  # the checking member connects to the revoked one
    assert c is None
    lines = [r.getMessage() for r in caplog.records if "Cannot open secure" in r.getMessage()]
    assert len(lines) == 1 and "Certificate has been revoked" in lines[0], lines
    assert not any(r.exc_info for r in caplog.records)
    # a good member passes the same checks both ways
    good = _quorum(pki, "good", **{mode: "true"})
    s, c = await _pair(checking, good)
    assert s is not None and c is not None


# -------------------------------------------------------------------------- longer paths


def _ca_cert(
    name: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Certificate | None, signer: Any
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject if issuer is not None else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.CRLDistributionPoints(
                [
                    x509.DistributionPoint(
                        [x509.UniformResourceIdentifier(f"http://crl.invalid/{name}")],
                        None,
                        None,
                        None,
                    )
                ]
            ),
            critical=False,
        )
        .sign(signer, hashes.SHA256())
    )


def _crl_of(
    ca: x509.Certificate, key: ec.EllipticCurvePrivateKey, revoked: list[int]
) -> x509.CertificateRevocationList:
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.subject)
        .last_update(now - datetime.timedelta(minutes=1))
        .next_update(now + datetime.timedelta(hours=1))
    )
    for serial in revoked:
        b = b.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(now).build()
        )
    return b.sign(key, hashes.SHA256())


class _Served(RevocationFetcher):
    """The fetcher with its CRLs from a dict (uri -> CRL) instead of the network; records
    the order it asked in."""

    def __init__(self, crls: dict[str, x509.CertificateRevocationList]) -> None:
        super().__init__(rv.RevocationPolicy(crl=True))
        self.served = crls
        self.asked: list[str] = []

    async def _crl(self, uri: str, now: datetime.datetime) -> x509.CertificateRevocationList:
        self.asked.append(uri)
        return self.served[uri]


async def test_every_certificate_below_the_anchor_is_checked_from_the_top() -> None:
    """The JDK's legacy mode checks the intermediate CA too (not only the end entity), the one
    nearest the anchor first: a revoked intermediate refuses a leaf its own CRL calls good."""
    root_key, mid_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = _ca_cert("root", root_key, None, root_key)
    mid = _ca_cert("mid", mid_key, root, root_key)
    leaf = _ca_cert("leaf", leaf_key, mid, mid_key)  # its CDP names the "leaf" URI
    now = datetime.datetime.now(datetime.UTC)
    good = {
        "http://crl.invalid/mid": _crl_of(root, root_key, []),
        "http://crl.invalid/leaf": _crl_of(mid, mid_key, []),
    }
    fetcher = _Served(good)
    assert await fetcher.judge([leaf, mid], root, now) is None
    assert fetcher.asked == ["http://crl.invalid/mid", "http://crl.invalid/leaf"]
    revoked_mid = {**good, "http://crl.invalid/mid": _crl_of(root, root_key, [mid.serial_number])}
    fetcher = _Served(revoked_mid)
    refused = await fetcher.judge([leaf, mid], root, now)
    assert refused is not None and "Certificate has been revoked, reason: UNSPECIFIED" in refused
    assert "authority: CN=root" in refused
    assert fetcher.asked == ["http://crl.invalid/mid"]  # the leaf is not looked at
