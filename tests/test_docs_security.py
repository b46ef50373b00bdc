"""docs/operations.md's Security section: every zoo.cfg in it is started as written (its
``/etc/zookeeper/ssl`` paths pointed at stores made here with Java's keytool, its ports replaced
by free ones, a dataDir added) and does what the text says: kazoo over TLS with a client
certificate, the AdminServer over HTTPS, a request without SASL refused with -124, digest
enforced."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID
from kazoo.client import KazooClient

from tests.conftest import ThreadedServer, free_port
from tests.test_docs import fenced
from trizk.compat.oracle.rawclient import RawClient
from trizk.jute import records as R
from trizk.jute.codes import Code, OpCode
from trizk.server.config.zoocfg import load_config

ROOT = Path(__file__).resolve().parent.parent
OPERATIONS = ROOT / "docs" / "operations.md"
KEYTOOL = shutil.which("keytool")
pytestmark = pytest.mark.skipif(KEYTOOL is None, reason="needs Java's keytool")
JAAS = (
    'Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n user_bob="pw";\n};\n'
)


def _security_examples() -> list[str]:
    text = OPERATIONS.read_text()
    section = text[text.index("\n## Security\n") :]
    section = section[: section.index("\n## ", 1)]
    # the Kerberos example needs a KDC: tests/shell/test_kerberos.py runs it
    section = section.split("\n### Kerberos\n")[0]
    return [body for lang, body in fenced(section) if lang == "properties"]


def _cert(
    cn: str, key: ec.EllipticCurvePrivateKey, issuer: str, ca_key: ec.EllipticCurvePrivateKey
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=cn == issuer, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    )
    return b.sign(ca_key, hashes.SHA256())


@pytest.fixture(scope="module")
def ssl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/etc/zookeeper/ssl of the examples: server.jks, truststore.jks, keystore.pass."""
    d = tmp_path_factory.mktemp("etc-zookeeper-ssl")
    ca_key, srv_key, cli_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = _cert("docs CA", ca_key, "docs CA", ca_key)
    pem = serialization.Encoding.PEM
    (d / "ca.pem").write_bytes(ca.public_bytes(pem))
    (d / "client.crt").write_bytes(
        _cert("docs client", cli_key, "docs CA", ca_key).public_bytes(pem)
    )
    (d / "client.key").write_bytes(
        cli_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    srv = _cert("127.0.0.1", srv_key, "docs CA", ca_key)
    (d / "server.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"server", srv_key, srv, [ca], serialization.BestAvailableEncryption(b"changeit")
        )
    )
    (d / "keystore.pass").write_text("changeit\n")
    assert KEYTOOL is not None
    run = {"check": True, "capture_output": True, "timeout": 120}
    subprocess.run(
        [KEYTOOL, "-importkeystore", "-srckeystore", str(d / "server.p12"), "-srcstoretype",
         "PKCS12", "-srcstorepass", "changeit", "-destkeystore", str(d / "server.jks"),
         "-deststorepass", "changeit", "-noprompt"], **run,
    )  # fmt: skip
    subprocess.run(
        [KEYTOOL, "-importcert", "-alias", "ca", "-file", str(d / "ca.pem"), "-keystore",
         str(d / "truststore.jks"), "-storepass", "changeit", "-noprompt"], **run,
    )  # fmt: skip
    (d / "jaas.conf").write_text(JAAS)
    return d


Start = Callable[[str], tuple[ThreadedServer, dict[int, int]]]


@pytest.fixture
def start(tmp_path: Path, ssl_dir: Path) -> Iterator[Start]:
    servers: list[ThreadedServer] = []

    def run(example: str) -> tuple[ThreadedServer, dict[int, int]]:
        ports = {p: free_port() for p in (2181, 2281, 8080)}
        text = example.replace("/etc/zookeeper/ssl", str(ssl_dir))
        for old, new in ports.items():
            text = text.replace(f"={old}\n", f"={new}\n")
        text += f"dataDir={tmp_path / 'data'}\nclientPortAddress=127.0.0.1\n"
        text += "secureClientPortAddress=127.0.0.1\n" if "secureClientPort" in text else ""
        text += "admin.serverAddress=127.0.0.1\n" if "admin.enableServer" in text else ""
        text += "admin.enableServer=false\n" if "admin.enableServer" not in text else ""
        cfg_file = tmp_path / "zoo.cfg"
        cfg_file.write_text(text)
        props = [("java.security.auth.login.config", str(ssl_dir / "jaas.conf"))]
        srv = ThreadedServer(load_config(cfg_file, properties=props)).start()
        servers.append(srv)
        return srv, ports

    yield run
    for srv in servers:
        srv.stop()


def _refused_without_auth(port: int) -> bool:
    c = RawClient("127.0.0.1", port)
    try:
        assert c.connect() is not None
        xid = c.send(OpCode.EXISTS, R.ExistsRequest(path="/", watch=False))
        _, reply = c.read_until_reply(xid)
        closed = c.read_raw_until_closed(time.monotonic() + 5) == (b"", "closed")
        return reply.err == Code.SESSIONCLOSEDREQUIRESASLAUTH and closed
    finally:
        c.close()


def test_every_security_example_runs(start: Start, ssl_dir: Path) -> None:
    examples = _security_examples()
    assert len(examples) == 4
    run = start
    tls_cfg, admin_cfg, sasl_cfg, digest_cfg = examples
    # TLS with keytool's .jks stores and a password file
    srv, ports = run(tls_cfg)
    zk = KazooClient(
        hosts=f"127.0.0.1:{ports[2281]}",
        timeout=10,
        use_ssl=True,
        ca=str(ssl_dir / "ca.pem"),
        verify_certs=True,
        certfile=str(ssl_dir / "client.crt"),
        keyfile=str(ssl_dir / "client.key"),
    )
    zk.start(timeout=10)
    try:
        assert zk.exists("/") is not None
    finally:
        zk.stop()
        zk.close()
    srv.stop()
    # the AdminServer over HTTPS
    srv, ports = run(admin_cfg)
    ctx = ssl.create_default_context(cafile=str(ssl_dir / "ca.pem"))
    conn = http.client.HTTPSConnection("127.0.0.1", ports[8080], timeout=10, context=ctx)
    try:
        conn.request("GET", "/commands/ruok")
        assert conn.getresponse().status == 200
    finally:
        conn.close()
    srv.stop()
    # SASL required: a request without SASL is refused
    srv, ports = run(sasl_cfg)
    assert _refused_without_auth(ports[2181])
    srv.stop()
    # digest enforced: refused without, served after addauth
    srv, ports = run(digest_cfg)
    assert _refused_without_auth(ports[2181])
    zk = KazooClient(hosts=f"127.0.0.1:{ports[2181]}", timeout=10, auth_data=[("digest", "a:b")])
    zk.start(timeout=10)
    try:
        assert zk.exists("/") is not None
    finally:
        zk.stop()
        zk.close()
