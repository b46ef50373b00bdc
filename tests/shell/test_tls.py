"""TLS on secureClientPort, over real sockets: kazoo with ``use_ssl=True`` and client
certificates, the x509 scheme taking the certificate's subject as the id, ``ssl.clientAuth``
need/want/none, PEM and PKCS12 stores, both ports side by side, and the refusals (no client
certificate under ``need``, an untrusted certificate, settings that cannot be used; keytool's
stores are in test_keystores.py).

Certificates are made here with ``cryptography`` (a CA, a server certificate for 127.0.0.1,
client certificates signed by the CA and one self-signed)."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl

from tests.conftest import ThreadedServer, free_port
from trizk.compat.oracle.rawclient import RawClient
from trizk.jute.codes import OpCode
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.shell import tls

CLIENT_DN = "CN=client one,OU=ops,O=Acme\\, Inc.,C=DE"


@dataclass
class PKI:
    dir: Path
    ca: Path  # CA certificate (PEM): the trust store
    server_pem: Path  # key + chain (PEM key store)
    server_p12: Path  # the same as PKCS12, password "storepw"
    client_cert: Path
    client_key: Path
    rogue_cert: Path  # self-signed, not trusted
    rogue_key: Path


def _name(cn: str, *extra: x509.NameAttribute) -> x509.Name:
    return x509.Name([*extra, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    san_ip: str | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if san_ip is not None:
        b = b.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(san_ip))]),
            critical=False,
        )
    return b.sign(issuer_key, hashes.SHA256())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    d = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("trizk test CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert(_name("127.0.0.1"), srv_key, ca_name, ca_key, san_ip="127.0.0.1")
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli_name = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc."),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "ops"),
            x509.NameAttribute(NameOID.COMMON_NAME, "client one"),
        ]
    )
    cli = _cert(cli_name, cli_key, ca_name, ca_key)
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue = _cert(_name("rogue"), rogue_key, _name("rogue"), rogue_key)
    p = PKI(
        d,
        d / "ca.pem",
        d / "server.pem",
        d / "server.p12",
        d / "client.crt",
        d / "client.key",
        d / "rogue.crt",
        d / "rogue.key",
    )
    p.ca.write_bytes(_pem(ca))
    p.server_pem.write_bytes(_pem_key(srv_key) + _pem(srv) + _pem(ca))
    p.server_p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"server", srv_key, srv, [ca], serialization.BestAvailableEncryption(b"storepw")
        )
    )
    p.client_cert.write_bytes(_pem(cli))
    p.client_key.write_bytes(_pem_key(cli_key))
    p.rogue_cert.write_bytes(_pem(rogue))
    p.rogue_key.write_bytes(_pem_key(rogue_key))
    return p


def _config(tmp_path: Path, pki: PKI, **ssl_keys: str) -> ServerConfig:
    keys: dict[str, Any] = {
        "clientPort": free_port(),
        "clientPortAddress": "127.0.0.1",
        "secureClientPort": free_port(),
        "secureClientPortAddress": "127.0.0.1",
        "tickTime": 2000,
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "ssl.keyStore.location": str(pki.server_pem),
        "ssl.trustStore.location": str(pki.ca),
    }
    keys.update(ssl_keys)
    return ServerConfig.create(tmp_path / "data", **keys)


@pytest.fixture
def tls_server(tmp_path: Path, pki: PKI) -> Iterator[ThreadedServer]:
    srv = ThreadedServer(_config(tmp_path, pki)).start()
    yield srv
    srv.stop()


def _secure_port(srv: ThreadedServer) -> int:
    assert srv.server is not None
    return int(srv.server.secure_port)


def _kazoo_tls(srv: ThreadedServer, pki: PKI, *, cert: bool = True) -> KazooClient:
    kw: dict[str, Any] = {"use_ssl": True, "ca": str(pki.ca), "verify_certs": True}
    if cert:
        kw.update(certfile=str(pki.client_cert), keyfile=str(pki.client_key))
    zk = KazooClient(hosts=f"127.0.0.1:{_secure_port(srv)}", timeout=10, **kw)
    zk.start(timeout=10)
    return zk


def _tls_socket(
    srv: ThreadedServer, pki: PKI, cert: Path | None, key: Path | None
) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None and key is not None:
        ctx.load_cert_chain(str(cert), str(key))
    raw = socket.create_connection(("127.0.0.1", _secure_port(srv)), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def _refused(s: ssl.SSLSocket) -> bool:
    """True when the server ends the TLS connection (TLS 1.3 reports a refused client
    certificate only on the first read)."""
    try:
        s.sendall(b"\0\0\0\0")
        return s.recv(1) == b""
    except (ssl.SSLError, OSError):
        return True
    finally:
        s.close()


# ---------------------------------------------------------------------------- x509 ids


def test_x509_subject_is_java_rfc2253(pki: PKI) -> None:
    der = x509.load_pem_x509_certificate(pki.client_cert.read_bytes()).public_bytes(
        serialization.Encoding.DER
    )
    assert tls.x509_subject(der) == CLIENT_DN


def test_kazoo_tls_with_client_certificate_and_x509_acl(
    tls_server: ThreadedServer, pki: PKI
) -> None:
    zk = _kazoo_tls(tls_server, pki)
    plain = KazooClient(hosts=tls_server.hosts, timeout=10)  # the plaintext port runs too
    plain.start(timeout=10)
    try:
        zk.create("/x", b"mine", acl=[make_acl("x509", CLIENT_DN, all=True)])
        assert zk.get("/x")[0] == b"mine"
        # "auth" expands to the certificate's id
        zk.create("/y", acl=[make_acl("auth", "", read=True, write=True)])
        assert [(a.perms, a.id.scheme, a.id.id) for a in zk.get_acls("/y")[0]] == [
            (3, "x509", CLIENT_DN)
        ]
        for denied in (
            lambda: plain.get("/x"),
            lambda: plain.set("/x", b"stolen"),
            lambda: plain.create("/x/c"),
            lambda: plain.get_children("/x"),
            lambda: plain.set_acls("/x", [make_acl("world", "anyone", all=True)]),
        ):
            with pytest.raises(NoAuthError):
                denied()
        data, st = zk.get("/x")
        assert data == b"mine" and st.version == 0 and st.aversion == 0 and st.numChildren == 0
    finally:
        for c in (zk, plain):
            c.stop()
            c.close()


def test_whoami_on_tls_lists_x509(tls_server: ThreadedServer, pki: PKI) -> None:
    s = _tls_socket(tls_server, pki, pki.client_cert, pki.client_key)
    c = RawClient.__new__(RawClient)
    RawClient.__init__(c, "127.0.0.1", tls_server.port, io_timeout=10)  # replace its socket
    c.sock.close()
    c.sock = s
    try:
        assert c.connect() is not None
        xid = c.send(OpCode.WHOAMI, None)
        _, reply = c.read_until_reply(xid)
        ids = {(i.authScheme, i.user) for i in reply.body.clientInfo}
        assert ids == {("ip", "127.0.0.1"), ("x509", CLIENT_DN)}
    finally:
        c.close()


# ---------------------------------------------------------------------------- clientAuth


def test_need_refuses_missing_and_untrusted_certificates(
    tls_server: ThreadedServer, pki: PKI
) -> None:
    assert _refused(_tls_socket(tls_server, pki, None, None))
    assert _refused(_tls_socket(tls_server, pki, pki.rogue_cert, pki.rogue_key))
    # NettyServerCnxnFactory: each failed handshake is an auth failure and an unsuccessful
    # handshake (counted as the server drops the connection: a bounded wait for it)
    assert tls_server.server is not None
    m = tls_server.server.server_metrics
    deadline = time.monotonic() + 10
    while tls_server.call(lambda: m.unsuccessful_handshake) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # polling interval of a bounded wait
    assert tls_server.call(lambda: (m.unsuccessful_handshake, m.auth_failed_count)) == (2, 2)
    # the server is still fine for a good client
    zk = _kazoo_tls(tls_server, pki)
    try:
        assert zk.exists("/") is not None
    finally:
        zk.stop()
        zk.close()


def test_want_accepts_no_certificate(tmp_path: Path, pki: PKI) -> None:
    srv = ThreadedServer(_config(tmp_path, pki, **{"ssl.clientAuth": "want"})).start()
    try:
        zk = _kazoo_tls(srv, pki, cert=False)
        try:
            zk.create("/w", acl=[make_acl("x509", CLIENT_DN, all=True)])
            with pytest.raises(NoAuthError):  # no certificate: no x509 id
                zk.get("/w")
        finally:
            zk.stop()
            zk.close()
        assert _refused(_tls_socket(srv, pki, pki.rogue_cert, pki.rogue_key))
    finally:
        srv.stop()


def test_pkcs12_key_store(tmp_path: Path, pki: PKI) -> None:
    cfg = _config(
        tmp_path,
        pki,
        **{
            "ssl.keyStore.location": str(pki.server_p12),
            "ssl.keyStore.password": "storepw",
            "ssl.clientAuth": "none",
        },
    )
    srv = ThreadedServer(cfg).start()
    try:
        zk = _kazoo_tls(srv, pki)
        try:
            zk.create("/p12", b"ok")
            assert zk.get("/p12")[0] == b"ok"
        finally:
            zk.stop()
            zk.close()
    finally:
        srv.stop()


# ---------------------------------------------------------------------------- bad settings


def _settings(**props: str) -> tls.TLSSettings:
    return tls.TLSSettings.from_properties({"zookeeper." + k: v for k, v in props.items()})


def test_store_settings_errors_name_the_key(tmp_path: Path, pki: PKI) -> None:
    with pytest.raises(tls.TLSConfigError, match=r"ssl\.keyStore\.location .*server\.jks"):
        tls.server_context(_settings(**{"ssl.keyStore.location": str(tmp_path / "server.jks")}))
    with pytest.raises(tls.TLSConfigError, match=r"Bad value for zookeeper\.ssl\.keyStore\.type"):
        tls.server_context(
            _settings(**{"ssl.keyStore.location": str(pki.server_pem), "ssl.keyStore.type": "X"})
        )
    with pytest.raises(tls.TLSConfigError, match="auto-detect"):
        tls.server_context(_settings(**{"ssl.keyStore.location": str(tmp_path / "server.bin")}))
    with pytest.raises(tls.TLSConfigError, match="auto-detect"):  # ZooKeeper knows no .pfx
        tls.server_context(_settings(**{"ssl.keyStore.location": str(tmp_path / "server.pfx")}))
    with pytest.raises(tls.TLSConfigError, match="keystore password was incorrect"):
        tls.server_context(
            _settings(
                **{"ssl.keyStore.location": str(pki.server_p12), "ssl.keyStore.password": "x"}
            )
        )
    with pytest.raises(tls.TLSConfigError, match=r"keyStore\.location not specified"):
        tls.TLSSettings.from_properties({})
    with pytest.raises(tls.TLSConfigError, match="need, want or none"):
        tls.TLSSettings.from_properties(
            {"zookeeper.ssl.keyStore.location": "k.pem", "zookeeper.ssl.clientAuth": "maybe"}
        )
    # ssl.ocsp is honoured now (tests/shell/test_revocation.py)
    ocsp = tls.TLSSettings.from_properties(
        {"zookeeper.ssl.keyStore.location": "k.pem", "zookeeper.ssl.ocsp": "true"}
    )
    assert ocsp.revocation.prefer_ocsp


# ---------------------------------------------------------------------------- protocols


def test_client_port_protocols_follow_the_release() -> None:
    """``ClientX509Util``'s Netty server context enables one protocol: ssl.protocol, by
    default TLSv1.2 in 3.8.0 and TLSv1.3 in 3.9.3; ssl.enabledProtocols wins."""
    assert tls.client_port_protocols({}, zk39=False) == ("TLSv1.2",)
    assert tls.client_port_protocols({}, zk39=True) == ("TLSv1.3",)
    proto = {"zookeeper.ssl.protocol": "TLSv1.2"}
    assert tls.client_port_protocols(proto, zk39=True) == ("TLSv1.2",)
    both = {**proto, "zookeeper.ssl.enabledProtocols": "TLSv1.3, TLSv1.2"}
    assert tls.client_port_protocols(both, zk39=False) == ("TLSv1.3", "TLSv1.2")
    with pytest.raises(tls.TLSConfigError, match=r"zookeeper\.ssl\.protocol='SSLv3'"):
        tls.client_port_protocols({"zookeeper.ssl.protocol": "SSLv3"}, zk39=True)


def _handshakes(srv: ThreadedServer, pki: PKI, version: ssl.TLSVersion) -> bool:
    """Whether a client offering only ``version`` (with a certificate) completes a request."""
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.minimum_version = ctx.maximum_version = version
    ctx.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    raw = socket.create_connection(("127.0.0.1", _secure_port(srv)), timeout=10)
    try:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            # a ConnectRequest (protocolVersion 0, timeout 30 s, no session, a 16-byte password)
            body = bytes(4) + bytes(8) + (30000).to_bytes(4, "big") + bytes(8)
            body += (16).to_bytes(4, "big") + bytes(16)
            s.sendall(len(body).to_bytes(4, "big") + body)
            return len(s.recv(4)) == 4  # the ConnectResponse's length
    except (ssl.SSLError, OSError):
        return False
    finally:
        raw.close()


@pytest.mark.parametrize(
    ("keys", "accepted"),
    [
        ({}, {ssl.TLSVersion.TLSv1_3}),  # the default release, 3.9.3
        ({"trizk.zookeeperVersion": "3.8.0"}, {ssl.TLSVersion.TLSv1_2}),
        ({"ssl.protocol": "TLSv1.2"}, {ssl.TLSVersion.TLSv1_2}),
        (
            {"ssl.enabledProtocols": "TLSv1.2,TLSv1.3"},
            {ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3},
        ),
    ],
    ids=["3.9.3", "3.8.0", "protocol", "enabledProtocols"],
)
def test_secure_port_enables_the_releases_protocol(
    tmp_path: Path, pki: PKI, keys: dict[str, str], accepted: set[ssl.TLSVersion]
) -> None:
    """As measured: ZooKeeper 3.9.3 refuses 3.8's Java client (TLSv1.2 only), "The client
    supported protocol versions [TLSv1.2] are not accepted by server preferences [TLSv1.3]"."""
    srv = ThreadedServer(_config(tmp_path, pki, **keys)).start()
    try:
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            assert _handshakes(srv, pki, version) == (version in accepted), version
    finally:
        srv.stop()
