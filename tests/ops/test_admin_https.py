"""The AdminServer over HTTPS, as ZooKeeper's JettyAdminServer serves it from the
``ssl.quorum.*`` key and trust stores: ``admin.forceHttps=true`` (HTTPS only, with Jetty's
Strict-Transport-Security header), ``admin.portUnification=true`` (HTTPS and plain HTTP on one
port), and stores that cannot be read (one warning, the server runs without an AdminServer,
as ZooKeeper's AdminServerFactory falls back to a DummyAdminServer)."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import logging
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from tests.conftest import ThreadedServer, free_port, make_config


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("admin-stores")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    (d / "admin.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"admin", key, cert, None, serialization.BestAvailableEncryption(b"adminpw")
        )
    )
    (d / "ca.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return d


def _server(tmp_path: Path, stores: Path, **extra: Any) -> ThreadedServer:
    keys: dict[str, Any] = {
        "admin.enableServer": "true",
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": free_port(),
        "ssl.quorum.keyStore.location": str(stores / "admin.p12"),
        "ssl.quorum.keyStore.password": "adminpw",
        "ssl.quorum.trustStore.location": str(stores / "ca.pem"),
    }
    keys.update(extra)
    return ThreadedServer(make_config(tmp_path, **keys)).start()


def _port(srv: ThreadedServer) -> int | None:
    assert srv.server is not None
    return srv.server.admin_port


def _get(conn: http.client.HTTPConnection, path: str) -> tuple[int, dict[str, str], bytes]:
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def _https(port: int, stores: Path) -> http.client.HTTPSConnection:
    ctx = ssl.create_default_context(cafile=str(stores / "ca.pem"))
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)


def test_force_https(tmp_path: Path, stores: Path) -> None:
    srv = _server(tmp_path, stores, **{"admin.forceHttps": "true"})
    try:
        port = _port(srv)
        assert port is not None
        status, headers, body = _get(_https(port, stores), "/commands/ruok")
        assert status == 200 and json.loads(body)["command"] == "ruok"
        assert headers["Strict-Transport-Security"] == "max-age=86400; includeSubDomains"
        # plain HTTP gets no answer on an HTTPS-only port
        with pytest.raises((http.client.HTTPException, OSError)):
            _get(http.client.HTTPConnection("127.0.0.1", port, timeout=10), "/commands/ruok")
        # and the port still serves HTTPS afterwards
        assert _get(_https(port, stores), "/commands/ruok")[0] == 200
    finally:
        srv.stop()


def test_port_unification(tmp_path: Path, stores: Path) -> None:
    srv = _server(tmp_path, stores, **{"admin.portUnification": "true"})
    try:
        port = _port(srv)
        assert port is not None
        status, headers, _ = _get(_https(port, stores), "/commands/stat")
        assert status == 200 and "Strict-Transport-Security" in headers
        status, headers, body = _get(
            http.client.HTTPConnection("127.0.0.1", port, timeout=10), "/commands/stat"
        )
        assert status == 200 and json.loads(body)["command"] == "stats"
        assert "Strict-Transport-Security" not in headers
    finally:
        srv.stop()


def test_unreadable_stores_leave_no_admin_server(
    tmp_path: Path, stores: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "trizk.server.ops.admin"):
        srv = _server(
            tmp_path,
            stores,
            **{"admin.forceHttps": "true", "ssl.quorum.keyStore.password": "wrong"},
        )
    try:
        assert _port(srv) is None  # the server runs, without its AdminServer
        assert srv.call(lambda: srv.server is not None)
        lines = [r.getMessage() for r in caplog.records if r.name == "trizk.server.ops.admin"]
        assert lines == [
            "Unable to start JettyAdminServer: zookeeper.ssl.quorum.keyStore.location "
            f"{stores / 'admin.p12'}: keystore password was incorrect"
        ]
    finally:
        srv.stop()


def test_x509_authentication_with_need_client_auth(tmp_path: Path, stores: Path) -> None:
    """3.9's ``admin.needClientAuth``: the client certificate is the ``x509`` scheme's id for
    the AdminServer's authenticated commands (checked against the ``ssl.*`` trust store)."""
    key, cert, _ = pkcs12.load_key_and_certificates((stores / "admin.p12").read_bytes(), b"adminpw")
    assert key is not None and cert is not None
    (tmp_path / "client.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "client.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    srv = _server(
        tmp_path,
        stores,
        **{
            "admin.forceHttps": "true",
            "admin.needClientAuth": "true",
            "secureClientPort": free_port(),
            "ssl.keyStore.location": str(stores / "admin.p12"),
            "ssl.keyStore.password": "adminpw",
            "ssl.trustStore.location": str(stores / "ca.pem"),
        },
    )
    try:
        port = _port(srv)
        assert port is not None
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=f"127.0.0.1:{srv.port}", timeout=10)
        zk.start(timeout=10)
        try:
            from kazoo.security import ACL, Id

            zk.set_acls("/", [ACL(31, Id("x509", "CN=127.0.0.1"))])
        finally:
            zk.stop()
            zk.close()

        def ask(auth: str, with_cert: bool) -> int:
            ctx = ssl.create_default_context(cafile=str(stores / "ca.pem"))
            if with_cert:
                ctx.load_cert_chain(str(tmp_path / "client.pem"), str(tmp_path / "client.key"))
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)
            try:
                conn.request(
                    "GET", "/commands/snapshot?streaming=false", headers={"Authorization": auth}
                )
                return conn.getresponse().status
            finally:
                conn.close()

        assert ask("ip", True) == 403  # authenticated, but / wants the certificate's id
        assert ask("x509", True) == 200
        with pytest.raises((ssl.SSLError, OSError)):
            ask("x509", False)  # needClientAuth: no certificate, no connection
    finally:
        srv.stop()


def test_x509_authentication_checks_revocation(tmp_path: Path) -> None:
    """``ssl.crl=true`` with 3.9's ``admin.needClientAuth``: ``X509Util.createTrustManager``
    turns the JVM's revocation checks on process-wide, so Jetty's handshake (the
    ``ssl.quorum.*`` trust store) refuses a revoked client certificate, and one whose status
    cannot be had (no soft fail), whatever the scheme asked; a good one connects and its
    ``x509`` id authenticates (ZooKeeper 3.9.3 answers so: the oracle test in
    tests/compat/test_revocation_oracle.py)."""
    from kazoo.client import KazooClient
    from kazoo.security import ACL, Id

    from tests.shell.revocation_pki import responder

    with responder(tmp_path / "pki") as pki:
        srv = _server(
            tmp_path,
            tmp_path,
            **{
                "admin.forceHttps": "true",
                "admin.needClientAuth": "true",
                "ssl.quorum.keyStore.location": str(pki.key_store("server")),
                "ssl.quorum.keyStore.password": "",
                "ssl.quorum.trustStore.location": str(pki.trust_pem),
                "secureClientPort": free_port(),
                "ssl.keyStore.location": str(pki.key_store("server")),
                "ssl.trustStore.location": str(pki.trust_pem),
                "ssl.crl": "true",
            },
        )
        try:
            port = _port(srv)
            assert port is not None
            zk = KazooClient(hosts=f"127.0.0.1:{srv.port}", timeout=10)
            zk.start(timeout=10)
            try:
                zk.set_acls(
                    "/",
                    [ACL(31, Id("x509", f"CN={n}")) for n in ("good", "revoked", "unreachable")],
                )
            finally:
                zk.stop()
                zk.close()

            def ask(name: str, auth: str = "x509") -> tuple[int, Any] | str:
                ctx = ssl.create_default_context(cafile=str(pki.trust_pem))
                ctx.load_cert_chain(str(pki.cert_pem(name)), str(pki.key_pem(name)))
                conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=ctx)
                try:
                    conn.request(
                        "GET",
                        "/commands/snapshot?streaming=false",
                        headers={"Authorization": auth},
                    )
                    resp = conn.getresponse()
                    body = resp.read()
                    return resp.status, json.loads(body) if resp.status != 200 else None
                except (ssl.SSLError, OSError):
                    return "refused"
                finally:
                    conn.close()

            pki.hits.clear()
            assert ask("good") == (200, None)
            assert ask("revoked") == "refused"
            assert ask("unreachable") == "refused"
            assert ask("bare") == "refused"
            assert ask("revoked", "digest a:b") == "refused"
            assert pki.hits["crl"] > 0
        finally:
            srv.stop()
