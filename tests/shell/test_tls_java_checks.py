"""Client certificates judged as Java judges them, over real sockets, with the stores of
ZooKeeper's C client suite: ``zookeeper-client-c/ssl/gencerts.sh`` (3.8) makes a root, a
server and a client certificate that share ONE subject name, with ``openssl`` (v1 leaf
certificates, no extensions), and puts them into ``.jks`` stores with Java 17's keytool (PKCS12
bytes). OpenSSL calls the client certificate self-signed; ZooKeeper accepts it (its issuer is
found by key and signature), and so must trizk. The same steps are run here (written for this
test from the script's description), then a kazoo client with the suite's client certificate
talks to trizk; an expired client certificate and one whose extendedKeyUsage is serverAuth
only are refused, the server staying up."""

from __future__ import annotations

import datetime
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from kazoo.client import KazooClient

from tests.conftest import ThreadedServer, free_port
from trizk.server.config.zoocfg import ServerConfig

TOOLS = shutil.which("openssl") and shutil.which("keytool")
pytestmark = pytest.mark.skipif(not TOOLS, reason="needs openssl and Java's keytool")
HOST = "zookeeper.apache.org"
DN = f"""[ req ]
prompt = no
default_md = sha256
distinguished_name = dn
[ dn ]
C = US
ST = California
L = San Francisco
O = ZooKeeper
emailAddress = dev@{HOST}
CN = {HOST}
"""


def _run(d: Path, *cmd: str) -> None:
    subprocess.run(cmd, cwd=d, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C client suite's certificates and stores (gencerts.sh's steps)."""
    d = tmp_path_factory.mktemp("gencerts")
    (d / "dn.cnf").write_text(DN)
    _run(d, "openssl", "genrsa", "-out", "rootkey.pem", "2048")
    _run(d, "openssl", "req", "-x509", "-new", "-key", "rootkey.pem", "-out", "root.crt",
         "-config", "dn.cnf")  # fmt: skip
    for who in ("client", "server"):
        _run(d, "openssl", "genrsa", "-out", f"{who}key.pem", "2048")
        _run(d, "openssl", "req", "-new", "-key", f"{who}key.pem", "-out", f"{who}.csr",
             "-config", "dn.cnf")  # fmt: skip
        _run(d, "openssl", "x509", "-req", "-in", f"{who}.csr", "-CA", "root.crt", "-CAkey",
             "rootkey.pem", "-CAcreateserial", "-days", "3650", "-out", f"{who}.crt")  # fmt: skip
        _run(d, "openssl", "pkcs12", "-export", "-in", f"{who}.crt", "-inkey", f"{who}key.pem",
             "-out", f"{who}.pkcs12", "-password", "pass:password")  # fmt: skip
        _run(d, "keytool", "-importkeystore", "-srckeystore", f"{who}.pkcs12",
             "-destkeystore", f"{who}.jks", "-srcstoretype", "pkcs12", "-srcstorepass",
             "password", "-deststorepass", "password", "-noprompt")  # fmt: skip
    imp = ("keytool", "-importcert", "-storepass", "password", "-noprompt")
    _run(d, *imp, "-keystore", "server.jks", "-file", "root.crt")
    _run(d, *imp, "-alias", "ca", "-file", "root.crt", "-keystore", "servertrust.jks")
    _run(d, *imp, "-alias", "servercert", "-file", "server.crt", "-keystore", "servertrust.jks")
    _run(d, *imp, "-alias", "ca", "-file", "root.crt", "-keystore", "clienttrust.jks")
    _run(d, *imp, "-alias", "clientcert", "-file", "client.crt", "-keystore", "clienttrust.jks")
    # two more client certificates from the same root: expired, and serverAuth only
    root_key = serialization.load_pem_private_key((d / "rootkey.pem").read_bytes(), None)
    assert isinstance(root_key, ec.EllipticCurvePrivateKey) or hasattr(root_key, "sign")
    root = x509.load_pem_x509_certificate((d / "root.crt").read_bytes())
    now = datetime.datetime.now(datetime.UTC)
    for name, before, after, eku in [
        ("expired", now - datetime.timedelta(days=3), now - datetime.timedelta(days=1), None),
        ("serveronly", now - datetime.timedelta(days=1), now + datetime.timedelta(days=1),
         [ExtendedKeyUsageOID.SERVER_AUTH]),
    ]:  # fmt: skip
        key = ec.generate_private_key(ec.SECP256R1())
        b = (
            x509.CertificateBuilder()
            .subject_name(root.subject)
            .issuer_name(root.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(before)
            .not_valid_after(after)
        )
        if eku is not None:
            b = b.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
        cert = b.sign(root_key, hashes.SHA256())  # type: ignore[arg-type]
        (d / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (d / f"{name}key.pem").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return d


@pytest.fixture
def server(tmp_path: Path, suite: Path) -> Iterator[ThreadedServer]:
    keys: dict[str, Any] = {
        "clientPort": free_port(),
        "clientPortAddress": "127.0.0.1",
        "secureClientPort": free_port(),
        "secureClientPortAddress": "127.0.0.1",
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "ssl.keyStore.location": str(suite / "server.jks"),
        "ssl.keyStore.password": "password",
        "ssl.trustStore.location": str(suite / "servertrust.jks"),
        "ssl.trustStore.password": "password",
    }
    srv = ThreadedServer(ServerConfig.create(tmp_path / "data", **keys)).start()
    yield srv
    srv.stop()


def _secure(srv: ThreadedServer) -> int:
    assert srv.server is not None
    return int(srv.server.secure_port)


def test_openssl_calls_the_suite_client_self_signed(suite: Path) -> None:
    """The premise: OpenSSL's own verification refuses what Java accepts."""
    done = subprocess.run(
        ["openssl", "verify", "-CAfile", "root.crt", "client.crt"],
        cwd=suite,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "self-signed" in done.stdout + done.stderr


def test_suite_client_certificate_is_accepted(server: ThreadedServer, suite: Path) -> None:
    zk = KazooClient(
        hosts=f"127.0.0.1:{_secure(server)}",
        timeout=10,
        use_ssl=True,
        verify_certs=False,  # the server certificate looks self-signed to OpenSSL too
        certfile=str(suite / "client.crt"),
        keyfile=str(suite / "clientkey.pem"),
    )
    zk.start(timeout=10)
    try:
        zk.create("/suite", b"ok")
        assert zk.get("/suite")[0] == b"ok"
        who = zk.client_id
        assert who is not None
    finally:
        zk.stop()
        zk.close()


def _refused(port: int, cert: Path, key: Path) -> bool:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(str(cert), str(key))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s = ctx.wrap_socket(raw)
    except (ssl.SSLError, OSError):
        raw.close()
        return True
    try:
        s.sendall(b"\0\0\0\0")
        return s.recv(1) == b""
    except (ssl.SSLError, OSError):
        return True
    finally:
        s.close()


def test_expired_and_server_only_certificates_are_refused(
    server: ThreadedServer, suite: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = _secure(server)
    assert _refused(port, suite / "expired.crt", suite / "expiredkey.pem")
    assert _refused(port, suite / "serveronly.crt", suite / "serveronlykey.pem")
    reasons = [r.getMessage() for r in caplog.records if "Unsuccessful handshake" in r.getMessage()]
    assert len(reasons) == 2, caplog.text
    assert "validity check failed (NotAfter" in reasons[0]
    assert reasons[1].endswith(
        "Extended key usage does not permit use for TLS client authentication"
    )
