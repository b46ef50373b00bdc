"""TLS on the client port, trizk beside ZooKeeper 3.8.0 with the same zoo.cfg and the stores of
ZooKeeper's C client suite (gencerts.sh's steps: ``.jks`` files that hold PKCS12 bytes, root,
server and client certificates sharing one subject name; the fixture is
tests/shell/test_tls_java_checks.py's):

* kazoo presenting the suite's client certificate is served by both; an expired client
  certificate and a serverAuth-only one are refused by both (Java's PKIX and EndEntityChecker
  rules, which trizk follows in ``server/auth/certpath.py``);
* zkCli.sh's ZooKeeperMain (the Java client: Netty, ``zookeeper.client.secure=true``, the
  suite's client.jks and clienttrust.jks) creates and reads a node over TLS on both."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.compat.conftest import require_zookeeper
from tests.shell.test_tls_java_checks import suite as suite  # the module fixture
from trizk.compat.procs import servers
from trizk.testing.ports import free_port

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.slow,
    pytest.mark.skipif(
        not (shutil.which("openssl") and shutil.which("keytool")),
        reason="needs openssl and Java's keytool",
    ),
]


def _cfg(suite: Path, secure_port: int) -> dict[str, str]:
    return {
        "secureClientPort": str(secure_port),
        "secureClientPortAddress": "127.0.0.1",
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "ssl.keyStore.location": str(suite / "server.jks"),
        "ssl.keyStore.password": "password",
        "ssl.trustStore.location": str(suite / "servertrust.jks"),
        "ssl.trustStore.password": "password",
        "admin.enableServer": "false",
    }


def _kazoo_ok(port: int, cert: Path, key: Path) -> bool:
    zk = KazooClient(
        hosts=f"127.0.0.1:{port}",
        timeout=5,
        use_ssl=True,
        verify_certs=False,
        certfile=str(cert),
        keyfile=str(key),
        connection_retry={"max_tries": 0},
    )
    try:
        zk.start(timeout=8)
        return zk.exists("/") is not None
    except Exception:
        return False
    finally:
        zk.stop()
        zk.close()


def _raw_refused(port: int, cert: Path, key: Path) -> bool:
    """The TLS connection ends before a ConnectRequest is answered."""
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
        # a ConnectRequest (protocol 0, zxid 0, 30 s, session 0, 16-byte password)
        connect = (44).to_bytes(4, "big") + bytes(4) + bytes(8) + (30000).to_bytes(4, "big")
        connect += bytes(8) + (16).to_bytes(4, "big") + bytes(16)
        s.sendall(connect)
        return s.recv(1) == b""
    except (ssl.SSLError, OSError):
        return True
    finally:
        s.close()


def _judgements(kind: str, suite: Path) -> dict[str, bool]:
    port = free_port()
    with servers.running(kind, _cfg(suite, port)):
        return {
            "client": _kazoo_ok(port, suite / "client.crt", suite / "clientkey.pem"),
            "expired refused": _raw_refused(port, suite / "expired.crt", suite / "expiredkey.pem"),
            "serverAuth-only refused": _raw_refused(
                port, suite / "serveronly.crt", suite / "serveronlykey.pem"
            ),
        }


def test_client_certificates_judged_as_zookeeper(suite: Path) -> None:
    require_zookeeper()
    zk = _judgements("zookeeper", suite)
    assert zk == {"client": True, "expired refused": True, "serverAuth-only refused": True}
    assert _judgements("trizk", suite) == zk


def _zkcli_tls(port: int, suite: Path, *command: str, protocol: str | None = None) -> str:
    """zkCli.sh (3.8.0's) over TLS; ``protocol``: its ``zookeeper.ssl.protocol`` (its default
    is TLSv1.2, the only protocol it then offers)."""
    flags = [
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
        "-Dzookeeper.client.secure=true",
        f"-Dzookeeper.ssl.keyStore.location={suite / 'client.jks'}",
        "-Dzookeeper.ssl.keyStore.password=password",
        f"-Dzookeeper.ssl.trustStore.location={suite / 'clienttrust.jks'}",
        "-Dzookeeper.ssl.trustStore.password=password",
        # the suite's server certificate names zookeeper.apache.org, not 127.0.0.1
        "-Dzookeeper.ssl.hostnameVerification=false",
        *([f"-Dzookeeper.ssl.protocol={protocol}"] if protocol else []),
    ]
    # zkCli.sh's own command line (ZooKeeperMain), with the Netty jars Debian's zkEnv.sh
    # classpath leaves out (servers.ZK_NETTY_JARS)
    classpath = ":".join((*servers.ZK_JARS, *servers.ZK_NETTY_JARS))
    java = shutil.which("java") or "java"
    done = subprocess.run(
        [
            java,
            *flags,
            "-cp",
            classpath,
            "org.apache.zookeeper.ZooKeeperMain",
            "-server",
            f"127.0.0.1:{port}",
            *command,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("version", ["3.9.3", "3.8.0"])
def test_zkcli_over_tls(suite: Path, version: str) -> None:
    """ZooKeeper and trizk of one release, the same zkCli. The secure port enables one
    protocol (``ClientX509Util``): TLSv1.2 in 3.8.0, TLSv1.3 in 3.9.3, which refuses 3.8's
    client unless it is told ``zookeeper.ssl.protocol=TLSv1.3``."""
    require_zookeeper(version)
    protocol = "TLSv1.3" if version == "3.9.3" else None
    for kind in ("zookeeper", "trizk"):
        port = free_port()
        with servers.running(kind, _cfg(suite, port), version=version):
            if protocol:
                refused = _zkcli_tls(port, suite, "create", "/tls12", "x")
                assert "ConnectionLoss" in refused and "Created" not in refused, (kind, refused)
            created = _zkcli_tls(port, suite, "create", "/tls", "over-tls", protocol=protocol)
            read = _zkcli_tls(port, suite, "get", "/tls", protocol=protocol)
        assert "Created /tls" in created, (kind, created[-2000:])
        assert "over-tls" in read, (kind, read[-2000:])
