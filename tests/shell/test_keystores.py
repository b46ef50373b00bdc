"""Key and trust stores made by Java 17's keytool, read as ZooKeeper reads them
(:mod:`trizk.server.shell.keystores`): JKS, PKCS12, PKCS12 bytes under a ``.jks`` name (what
keytool writes by default), JCEKS (which ZooKeeper's loaders refuse: "Invalid keystore
format"), wrong passwords, a key whose password is not the store's, ``*.passwordPath``, and a
kazoo client on the TLS port of a server whose stores are real JKS files.

The certificates are made with ``cryptography`` and put into stores by ``keytool`` in a tmp
dir (one module fixture: each keytool run starts a JVM)."""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import shutil
import subprocess
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

from tests.conftest import ThreadedServer, free_port
from trizk.server.config.main import main
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.shell import keystores, tls

KEYTOOL = shutil.which("keytool")
pytestmark = pytest.mark.skipif(KEYTOOL is None, reason="needs Java's keytool")
PW = "storepass"


def keytool(*args: str) -> None:
    assert KEYTOOL is not None
    subprocess.run(
        [KEYTOOL, *args], check=True, capture_output=True, timeout=120, stdin=subprocess.DEVNULL
    )


def _cert(
    cn: str, key: ec.EllipticCurvePrivateKey, issuer: str, issuer_key: ec.EllipticCurvePrivateKey
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
    )
    if cn != issuer:
        b = b.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return b.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Stores:
    dir: Path
    ca: Path
    client_cert: Path
    client_key: Path
    server: x509.Certificate

    def __getitem__(self, name: str) -> str:
        return str(self.dir / name)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    d = tmp_path_factory.mktemp("stores")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("trizk keystore CA", ca_key, "trizk keystore CA", ca_key)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert("server", srv_key, "trizk keystore CA", ca_key)
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = _cert("client", cli_key, "trizk keystore CA", ca_key)
    (d / "ca.pem").write_bytes(_pem(ca))
    (d / "client.crt").write_bytes(_pem(cli))
    (d / "client.key").write_bytes(
        cli_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (d / "server.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"server", srv_key, srv, [ca], serialization.BestAvailableEncryption(PW.encode())
        )
    )
    src = ["-srckeystore", str(d / "server.p12"), "-srcstoretype", "PKCS12"]
    src += ["-srcstorepass", PW, "-deststorepass", PW, "-noprompt"]
    # the same key entry as a real JKS store, and as a JCEKS store
    keytool(
        "-importkeystore",
        *src,
        "-destkeystore",
        str(d / "server-real.jks"),
        "-deststoretype",
        "JKS",
    )
    keytool(
        "-importkeystore", *src, "-destkeystore", str(d / "server.jceks"), "-deststoretype", "JCEKS"
    )
    # trust stores: keytool 17's default type (PKCS12 bytes in a .jks file) and a real JKS
    imp = ["-importcert", "-alias", "ca", "-file", str(d / "ca.pem"), "-storepass", PW, "-noprompt"]
    keytool(*imp, "-keystore", str(d / "trust-default.jks"))
    keytool(*imp, "-keystore", str(d / "trust-real.jks"), "-storetype", "JKS")
    # a key pair made by keytool itself, its key password not the store's
    keytool(
        "-genkeypair", "-alias", "k", "-keyalg", "EC", "-groupname", "secp256r1",
        "-dname", "CN=keytool", "-validity", "2", "-storetype", "JKS",
        "-keystore", str(d / "otherkeypass.jks"), "-storepass", PW, "-keypass", "keypass",
    )  # fmt: skip
    # key pairs made by keytool itself in each store type (JCEKS: refused when read)
    for kind, name in (("PKCS12", "gen.p12"), ("JKS", "gen.jks"), ("JCEKS", "gen.jceks")):
        keytool(
            "-genkeypair", "-alias", "gen", "-keyalg", "RSA", "-keysize", "2048",
            "-dname", "CN=keytool gen", "-validity", "2", "-storetype", kind,
            "-keystore", str(d / name), "-storepass", PW, "-keypass", PW,
        )  # fmt: skip
    (d / "secret").write_text(PW + os.linesep)
    return Stores(d, d / "ca.pem", d / "client.crt", d / "client.key", srv)


def _store(path: str, password: str = PW, kind: str | None = None) -> keystores.StoreConfig:
    return keystores.StoreConfig("zookeeper.ssl.keyStore.location", path, password, kind)


def test_jks_and_pkcs12_bytes_are_read_by_content(stores: Stores) -> None:
    real = stores["server-real.jks"]
    assert open(real, "rb").read(4) == b"\xfe\xed\xfe\xed"
    for path, kind in [
        (real, None),  # .jks, JKS bytes
        (real, "PKCS12"),  # Java 17's dual-format PKCS12 key store reads JKS bytes too
        (stores["server.p12"], None),
        (stores["server.p12"], "jks"),  # and its JKS reads PKCS12 (type case-insensitive)
    ]:
        km = keystores.load_key_store(_store(path, kind=kind))
        assert km.chain[0] == stores.server, (path, kind)
        assert len(km.chain) == 2  # the key entry's chain: server, CA
        assert b"PRIVATE KEY" in km.key_pem
    assert keystores.load_key_store(_store(real)).format == "JKS"
    assert keystores.load_key_store(_store(stores["server.p12"], kind="JKS")).format == "PKCS12"


def test_keytool_genkeypair_stores(stores: Stores) -> None:
    for name, fmt in (("gen.p12", "PKCS12"), ("gen.jks", "JKS")):
        km = keystores.load_key_store(_store(stores[name]))
        assert km.format == fmt
        assert [c.subject.rfc4514_string() for c in km.chain] == ["CN=keytool gen"]
    with pytest.raises(keystores.StoreError, match="Invalid keystore format"):
        keystores.load_key_store(_store(stores["gen.jceks"], kind="JKS"))


def test_trust_stores(stores: Stores) -> None:
    default = stores["trust-default.jks"]
    assert open(default, "rb").read(1) == b"\x30"  # keytool 17 writes PKCS12 bytes
    for path in (default, stores["trust-real.jks"]):
        anchors = keystores.load_trust_store(
            keystores.StoreConfig("zookeeper.ssl.trustStore.location", path, PW)
        )
        assert [a.subject.rfc4514_string() for a in anchors] == ["CN=trizk keystore CA"]
    with pytest.raises(keystores.StoreError, match="tampered with, or password was incorrect"):
        keystores.load_trust_store(
            keystores.StoreConfig("zookeeper.ssl.trustStore.location", stores["trust-real.jks"])
        )


def test_refusals_name_the_key_and_say_what_java_says(stores: Stores) -> None:
    with pytest.raises(keystores.StoreError, match=r"^zookeeper\.ssl\.keyStore\.location .*: "
                       r"Keystore was tampered with, or password was incorrect$"):  # fmt: skip
        keystores.load_key_store(_store(stores["server-real.jks"], "wrong"))
    with pytest.raises(keystores.StoreError, match="keystore password was incorrect"):
        keystores.load_key_store(_store(stores["server.p12"], "wrong"))
    with pytest.raises(keystores.StoreError, match=r"Invalid keystore format.*JCEKS"):
        keystores.load_key_store(_store(stores["server.jceks"], kind="JKS"))
    with pytest.raises(keystores.StoreError, match=r"Bad value for zookeeper\.ssl\.keyStore\.type"):
        keystores.load_key_store(_store(stores["server.jceks"], kind="JCEKS"))
    with pytest.raises(keystores.StoreError, match="Unable to auto-detect"):
        keystores.load_key_store(_store(stores["server.jceks"]))
    with pytest.raises(keystores.StoreError, match="Cannot recover key"):
        keystores.load_key_store(_store(stores["otherkeypass.jks"]))
    with pytest.raises(keystores.StoreError, match="BouncyCastle"):
        keystores.load_key_store(_store(stores["server.p12"], kind="BCFKS"))
    with pytest.raises(keystores.StoreError, match=r"keyStore\.location .*missing\.jks: No such"):
        keystores.load_key_store(_store(stores["missing.jks"]))


def test_password_path_wins_over_password(stores: Stores) -> None:
    props = {
        "zookeeper.ssl.quorum.keyStore.location": stores["server-real.jks"],
        "zookeeper.ssl.quorum.keyStore.password": "not it",
        "zookeeper.ssl.quorum.keyStore.passwordPath": stores["secret"],
    }
    settings = tls.TLSSettings.from_properties(props, tls.QUORUM_PREFIX)
    assert settings.key_store is not None and settings.key_store.password == PW
    assert settings.client_hostname_verification  # QuorumX509Util verifies its clients' names
    assert tls.load_stores(settings).key is not None
    props["zookeeper.ssl.quorum.keyStore.passwordPath"] = stores["nosuchfile"]
    with pytest.raises(tls.TLSConfigError, match=r"ssl\.quorum\.keyStore\.passwordPath .*nosuch"):
        tls.TLSSettings.from_properties(props, tls.QUORUM_PREFIX)


# ---------------------------------------------------------------------------- on the wire


@pytest.fixture
def jks_server(tmp_path: Path, stores: Stores) -> Iterator[ThreadedServer]:
    keys: dict[str, Any] = {
        "clientPort": free_port(),
        "clientPortAddress": "127.0.0.1",
        "secureClientPort": free_port(),
        "secureClientPortAddress": "127.0.0.1",
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "ssl.keyStore.location": stores["server-real.jks"],
        "ssl.keyStore.passwordPath": stores["secret"],
        "ssl.trustStore.location": stores["trust-default.jks"],
        "ssl.trustStore.password": PW,
    }
    srv = ThreadedServer(ServerConfig.create(tmp_path / "data", **keys)).start()
    yield srv
    srv.stop()


def test_kazoo_over_tls_with_jks_stores(jks_server: ThreadedServer, stores: Stores) -> None:
    assert jks_server.server is not None
    zk = KazooClient(
        hosts=f"127.0.0.1:{jks_server.server.secure_port}",
        timeout=10,
        use_ssl=True,
        ca=str(stores.ca),
        verify_certs=True,
        certfile=str(stores.client_cert),
        keyfile=str(stores.client_key),
    )
    zk.start(timeout=10)
    try:
        zk.create("/jks", b"ok")
        assert zk.get("/jks")[0] == b"ok"
        assert zk.client_id is not None
    finally:
        zk.stop()
        zk.close()


def test_server_with_a_bad_store_exits_with_one_line(
    tmp_path: Path, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        f"tickTime=2000\ndataDir={tmp_path / 'data'}\nclientPort={free_port()}\n"
        f"clientPortAddress=127.0.0.1\nsecureClientPort={free_port()}\n"
        "secureClientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
        f"ssl.keyStore.location={stores['server-real.jks']}\nssl.keyStore.password=wrong\n"
    )
    assert main([str(cfg)]) == 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, caplog.text
    assert errors[0].exc_info is None  # no traceback
    assert (
        errors[0]
        .getMessage()
        .endswith(
            f"zookeeper.ssl.keyStore.location {stores['server-real.jks']}: "
            "Keystore was tampered with, or password was incorrect"
        )
    )
