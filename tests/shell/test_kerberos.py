"""Kerberos (SASL GSSAPI) for clients, against a real MIT KDC started on loopback
(:class:`trizk.testing.kdc.LocalKdc`): kazoo (pure-sasl's GSSAPI over pykerberos, a kinit'd
credential cache), zkCli.sh (the Java client with a JAAS ``Client`` section) and ZooKeeper
3.8.0 configured identically (its JAAS ``Server`` section with ``Krb5LoginModule``), answers
compared. The pure parts (KerberosName, the authorized id) are unit-tested first.

The C client ``cli_mt`` of Debian's zookeeper-bin is built without SASL (no libsasl2 in its
``ldd``, no ``-u``/``--mechlist`` options): its test uses the ``cli_mt`` that
``compat/ctests/build.py`` builds with Cyrus SASL beside the C client suite (skipped, naming
the command that builds it, when that cache is empty).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from trizk.server.auth import sasl

# one worker runs the module under xdist (--dist loadgroup): one realm, one KDC
pytestmark = pytest.mark.xdist_group("kerberos")

# ---------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("principal", "host", "realm", "expected"),
    [
        ("alice@R.TEST", False, False, "alice@R.TEST"),
        ("alice@R.TEST", False, True, "alice"),
        ("zkcli/localhost@R.TEST", False, False, "zkcli/localhost@R.TEST"),
        ("zkcli/localhost@R.TEST", True, False, "zkcli@R.TEST"),
        ("zkcli/localhost@R.TEST", True, True, "zkcli"),
        ("bob", False, False, "bob"),
        # another realm: no auth_to_local rule applies, the authorization id stays
        ("carol@OTHER.TEST", True, True, "carol@OTHER.TEST"),
    ],
)
def test_kerberos_authorized_id(principal: str, host: bool, realm: bool, expected: str) -> None:
    got = sasl.kerberos_authorized_id(
        principal, principal, "R.TEST", remove_host=host, remove_realm=realm
    )
    assert got == expected, (got, expected)


def test_kerberos_name_parse() -> None:
    assert sasl.KerberosName.parse("a/b@C") == sasl.KerberosName("a", "b", "C")
    assert sasl.KerberosName.parse("a") == sasl.KerberosName("a", None, None)
    with pytest.raises(ValueError, match="Malformed Kerberos name"):
        sasl.KerberosName.parse("a/b/c@R")


def test_jaas_krb5_login_module() -> None:
    cfg = sasl.sasl_config_from(
        """Server {
            com.sun.security.auth.module.Krb5LoginModule required
            useKeyTab=true keyTab="/k/zk.keytab" storeKey=true useTicketCache=false
            principal="zookeeper/localhost@R.TEST";
        };""",
        {"zookeeper.kerberos.removeRealmFromPrincipal": "true"},
    )
    assert cfg is not None and cfg.kerberos is not None
    assert cfg.kerberos.principal == "zookeeper/localhost@R.TEST"
    assert cfg.kerberos.key_tab == "/k/zk.keytab" and cfg.kerberos.store_key
    assert cfg.kerberos.service_and_host() == ("zookeeper", "localhost")
    assert cfg.remove_realm and not cfg.remove_host
    with pytest.raises(sasl.JaasError, match="useKeyTab=true"):
        sasl.sasl_config_from(
            "Server { com.sun.security.auth.module.Krb5LoginModule required principal=x; };", {}
        )


# ---------------------------------------------------------------------------- the realm

kdcmod = pytest.importorskip("trizk.testing.kdc")
if kdcmod.available() is not None:
    pytest.skip(str(kdcmod.available()), allow_module_level=True)
pytest.importorskip("gssapi", reason="python-gssapi (pip install gssapi) is not installed")
pytest.importorskip("kerberos", reason="pykerberos (pure-sasl's GSSAPI) is not installed")

from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import AuthFailedError, NoAuthError  # noqa: E402
from kazoo.protocol.states import KazooState, KeeperState  # noqa: E402
from kazoo.security import make_acl  # noqa: E402

from tests.conftest import ThreadedServer, free_port  # noqa: E402
from trizk.compat.oracle.rawclient import ConnectionClosed, RawClient  # noqa: E402
from trizk.jute import records as R  # noqa: E402
from trizk.jute.codes import Code, OpCode  # noqa: E402
from trizk.server.auth.acl import SASL_PROVIDER  # noqa: E402
from trizk.server.config.zoocfg import ServerConfig  # noqa: E402

SERVER_JAAS = """Server {{
    com.sun.security.auth.module.Krb5LoginModule required
    useKeyTab=true
    keyTab="{keytab}"
    storeKey=true
    useTicketCache=false
    principal="zookeeper/localhost@{realm}";
}};
"""
CLIENT_JAAS = """Client {{
    com.sun.security.auth.module.Krb5LoginModule required
    useKeyTab=true
    keyTab="{keytab}"
    storeKey=true
    useTicketCache=false
    principal="{principal}";
}};
"""


@dataclass
class Realm:
    kdc: kdcmod.LocalKdc
    dir: Path
    server_keytab: Path
    alice_keytab: Path
    alice_ccache: Path
    zkcli_keytab: Path
    zkcli_ccache: Path

    def server_props(self, tmp: Path, **extra: str) -> dict[str, str]:
        jaas = tmp / "server-jaas.conf"
        jaas.write_text(SERVER_JAAS.format(keytab=self.server_keytab, realm=self.kdc.realm))
        return {
            "zookeeper.authProvider.1": SASL_PROVIDER,
            "java.security.auth.login.config": str(jaas),
            "java.security.krb5.conf": str(self.kdc.krb5_conf),
            **extra,
        }


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    d = tmp_path_factory.mktemp("realm")
    kdc = kdcmod.LocalKdc(d)
    with kdc, pytest.MonkeyPatch.context() as mp:
        for k, v in kdc.env().items():
            mp.setenv(k, v)
        kdc.add_principal("zookeeper/localhost", d / "zookeeper.keytab")
        alice = kdc.add_principal("alice", d / "alice.keytab")
        zkcli = kdc.add_principal("zkcli/localhost", d / "zkcli.keytab")
        kdc.kinit(alice, d / "alice.keytab", d / "alice.ccache")
        kdc.kinit(zkcli, d / "zkcli.keytab", d / "zkcli.ccache")
        yield Realm(
            kdc,
            d,
            d / "zookeeper.keytab",
            d / "alice.keytab",
            d / "alice.ccache",
            d / "zkcli.keytab",
            d / "zkcli.ccache",
        )


def _trizk(tmp: Path, props: dict[str, str]) -> ThreadedServer:
    cfg = ServerConfig.create(
        tmp / "data",
        properties=props,
        clientPort=free_port(),
        clientPortAddress="127.0.0.1",
        tickTime=2000,
    )
    return ThreadedServer(cfg).start()


def _kazoo(port: int, ccache: Path | None, monkeypatch: pytest.MonkeyPatch) -> KazooClient:
    kw: dict[str, object] = {}
    if ccache is not None:
        # pure-sasl's GSSAPI reads the default credential cache
        monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
        kw["sasl_options"] = {"mechanism": "GSSAPI", "service": "zookeeper"}
    # the host name is the service principal's: zookeeper/localhost@REALM
    zk = KazooClient(hosts=f"localhost:{port}", timeout=10, **kw)  # type: ignore[arg-type]
    zk.start(timeout=15)
    return zk


def _kazoo_story(port: int, realm: Realm, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """What a kerberized kazoo client sees: its ids, and a node only its sasl id may read."""
    out: dict[str, object] = {}
    alice = _kazoo(port, realm.alice_ccache, monkeypatch)
    anon = _kazoo(port, None, monkeypatch)
    try:
        sasl_id = f"alice@{realm.kdc.realm}"
        alice.create("/k", b"secret", acl=[make_acl("sasl", sasl_id, all=True)])
        out["acl"] = [(a.id.scheme, a.id.id, a.perms) for a in alice.get_acls("/k")[0]]
        out["alice_reads"] = alice.get("/k")[0]
        try:
            anon.get("/k")
            out["anon_reads"] = "yes"
        except NoAuthError:
            out["anon_reads"] = "NoAuth"
        alice.delete("/k")
    finally:
        alice.stop()
        alice.close()
        anon.stop()
        anon.close()
    return out


def _whoami(port: int, ccache: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """whoAmI (opcode 107) after a GSSAPI login over the raw client's socket, driven by
    pure-sasl as kazoo drives it."""
    from puresasl.client import SASLClient

    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    c = RawClient("127.0.0.1", port, io_timeout=10)
    try:
        assert c.connect() is not None
        cli = SASLClient("localhost", service="zookeeper", mechanism="GSSAPI")
        challenge: bytes | None = None
        while not cli.complete:
            token = cli.process(challenge)
            if cli.complete and not token:
                break
            xid = c.send(OpCode.SASL, R.GetSASLRequest(token or b""))
            _, reply = c.read_until_reply(xid)
            assert reply.err == 0 and reply.zxid == 0
            challenge = R.SetSASLResponse.decode(reply.raw).token
        # the exchange's last answer is a null token (GssKrb5Server: complete)
        assert challenge is None
        xid = c.send(OpCode.WHOAMI, None)
        _, reply = c.read_until_reply(xid)
        return [(i.authScheme, i.user) for i in reply.body.clientInfo]
    finally:
        c.close()


def test_kazoo_gssapi_acl(realm: Realm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = _trizk(tmp_path, realm.server_props(tmp_path))
    try:
        story = _kazoo_story(srv.port, realm, monkeypatch)
    finally:
        srv.stop()
    assert story == {
        "acl": [("sasl", f"alice@{realm.kdc.realm}", 31)],
        "alice_reads": b"secret",
        "anon_reads": "NoAuth",
    }


@pytest.mark.parametrize(
    ("props", "who", "expected"),
    [
        ({}, "alice", "alice@TRIZK.TEST"),
        ({"zookeeper.kerberos.removeRealmFromPrincipal": "true"}, "alice", "alice"),
        ({}, "zkcli", "zkcli/localhost@TRIZK.TEST"),
        ({"zookeeper.kerberos.removeHostFromPrincipal": "true"}, "zkcli", "zkcli@TRIZK.TEST"),
        (
            {
                "zookeeper.kerberos.removeHostFromPrincipal": "true",
                "zookeeper.kerberos.removeRealmFromPrincipal": "true",
                "zookeeper.superUser": "zkcli",
            },
            "zkcli",
            "zkcli",
        ),
    ],
)
def test_sasl_id_derivation(
    realm: Realm,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    props: dict[str, str],
    who: str,
    expected: str,
) -> None:
    srv = _trizk(tmp_path, realm.server_props(tmp_path, **props))
    ccache = realm.alice_ccache if who == "alice" else realm.zkcli_ccache
    try:
        ids = _whoami(srv.port, ccache, monkeypatch)
    finally:
        srv.stop()
    assert ("sasl", expected) in ids
    assert (("super", "") in ids) == ("zookeeper.superUser" in props)


def _bad_token(port: int) -> tuple[int, int, bytes, bool]:
    """A context token the acceptor refuses: (err, zxid, reply body, connection closed)."""
    c = RawClient("127.0.0.1", port, io_timeout=10)
    try:
        assert c.connect() is not None
        xid = c.send(OpCode.SASL, R.GetSASLRequest(b"\x60\x05not-a-ticket"))
        _, reply = c.read_until_reply(xid)
        try:
            c.read_packet()
            closed = False
        except ConnectionClosed:
            closed = True
        return reply.err, reply.zxid, reply.raw, closed
    finally:
        c.close()


def test_bad_ticket_is_authfailed(realm: Realm, tmp_path: Path) -> None:
    """A token the acceptor refuses: AUTHFAILED with a null token, then the connection closes
    (ZooKeeper: "GSS initiate failed")."""
    srv = _trizk(tmp_path, realm.server_props(tmp_path))
    try:
        assert _bad_token(srv.port) == (Code.AUTHFAILED, 0, b"\xff\xff\xff\xff", True)
    finally:
        srv.stop()


def test_stale_service_key_is_authfailed(
    realm: Realm,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The service's key changes at the KDC (a new kvno) but not in the server's keytab: the
    client's ticket cannot be decrypted and kazoo gets AuthFailedError."""
    import shutil

    old = tmp_path / "old.keytab"
    shutil.copy(realm.server_keytab, old)
    # ktadd gives the principal new keys, appended to the shared keytab (still good)
    realm.kdc.kadmin(f"ktadd -k {realm.server_keytab} zookeeper/localhost")
    props = realm.server_props(tmp_path)
    jaas = tmp_path / "stale-jaas.conf"
    jaas.write_text(SERVER_JAAS.format(keytab=old, realm=realm.kdc.realm))
    props["java.security.auth.login.config"] = str(jaas)
    srv = _trizk(tmp_path, props)
    ccache = tmp_path / "alice.ccache"  # a fresh cache: a service ticket under the new key
    realm.kdc.kinit(f"alice@{realm.kdc.realm}", realm.alice_keytab, ccache)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
    zk = KazooClient(
        hosts=f"localhost:{srv.port}",
        timeout=5,
        sasl_options={"mechanism": "GSSAPI", "service": "zookeeper"},
    )
    lost = threading.Event()
    zk.add_listener(lambda state: lost.set() if state == KazooState.LOST else None)
    try:
        # as with DIGEST-MD5 (test_sasl): kazoo turns the AUTHFAILED reply and the closed
        # connection into AUTH_FAILED (LOST for its listeners) and stops connecting
        with contextlib.suppress(AuthFailedError):
            zk.start(timeout=5)
        assert lost.wait(15), zk.client_state
        assert zk.client_state in (KeeperState.AUTH_FAILED, KeeperState.CLOSED)
        # one warning naming the cause (ZooKeeper: "Client ... failed to SASL authenticate:
        # javax.security.sasl.SaslException: GSS initiate failed ...")
        failed = [r.getMessage() for r in caplog.records if "failed to SASL" in r.getMessage()]
        assert failed and "GSS initiate failed" in failed[0] and "kvno" in failed[0], failed
        assert not [r for r in caplog.records if "internal error" in r.getMessage()]
    finally:
        zk.stop()
        zk.close()
        srv.stop()


@pytest.mark.parametrize(
    ("jaas", "message"),
    [
        ("missing", "does not exist"),
        ("wrong-principal", "zookeeper/otherhost@TRIZK.TEST"),
        ("not-service-host", "is not service/host@REALM"),
    ],
)
def test_start_up_failures_are_one_line(
    realm: Realm, tmp_path: Path, jaas: str, message: str
) -> None:
    """``trizk-server`` with a broken Kerberos login: exit 1, one ERROR line, no traceback."""
    keytab = {"missing": tmp_path / "none.keytab"}.get(jaas, realm.server_keytab)
    principal = {
        "wrong-principal": "zookeeper/otherhost",
        "not-service-host": "zookeeper",
    }.get(jaas, "zookeeper/localhost")
    f = tmp_path / "jaas.conf"
    f.write_text(
        SERVER_JAAS.format(keytab=keytab, realm=realm.kdc.realm).replace(
            "zookeeper/localhost", principal
        )
    )
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        f"tickTime=2000\ndataDir={tmp_path / 'data'}\nclientPort={free_port()}\n"
        "clientPortAddress=127.0.0.1\n"
        f"authProvider.1={SASL_PROVIDER}\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trizk.server",
            str(cfg),
            "-D",
            f"java.security.auth.login.config={f}",
            "-D",
            f"java.security.krb5.conf={realm.kdc.krb5_conf}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "KRB5_CONFIG"},
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and message in errors[0], proc.stderr


# ---------------------------------------------------------------------------- Java and C clients

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"


def _zkcli(realm: Realm, tmp: Path, port: int, *command: str, **props: str) -> str:
    """zkCli.sh of ZooKeeper 3.8.0 logged in as ``zkcli/localhost`` from its keytab (a JAAS
    ``Client`` section; the server principal ``zookeeper/localhost`` from the
    ``zookeeper.sasl.client.username`` default and the host it connects to)."""
    jaas = tmp / "client-jaas.conf"
    jaas.write_text(
        CLIENT_JAAS.format(
            keytab=realm.zkcli_keytab, principal=f"zkcli/localhost@{realm.kdc.realm}"
        )
    )
    flags = [
        f"-Djava.security.auth.login.config={jaas}",
        *realm.kdc.java_options(),
        *(f"-D{k}={v}" for k, v in props.items()),
    ]
    proc = subprocess.run(
        [ZKCLI, "-server", f"localhost:{port}", *command],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CLIENT_JVMFLAGS": " ".join(flags), "JVMFLAGS": "-Xmx64m"},
    )
    return proc.stdout + proc.stderr


def _zkcli_story(realm: Realm, tmp: Path, port: int) -> list[str]:
    out = _zkcli(
        realm,
        tmp,
        port,
        "create",
        "/j",
        "data",
        f"sasl:zkcli/localhost@{realm.kdc.realm}:cdrwa",
    )
    lines = [line for line in out.splitlines() if "Created" in line or "Exception" in line]
    out = _zkcli(realm, tmp, port, "getAcl", "/j")
    lines += [line for line in out.splitlines() if line.startswith(("'", ":", "Insufficient"))]
    out = _zkcli(realm, tmp, port, "get", "/j")
    lines += [line for line in out.splitlines() if line == "data" or "Insufficient" in line]
    _zkcli(realm, tmp, port, "delete", "/j")
    return lines


@pytest.mark.skipif(not os.path.exists(ZKCLI), reason="ZooKeeper 3.8.0's zkCli.sh is missing")
def test_zkcli_gssapi(realm: Realm, tmp_path: Path) -> None:
    srv = _trizk(tmp_path, realm.server_props(tmp_path))
    try:
        lines = _zkcli_story(realm, tmp_path, srv.port)
    finally:
        srv.stop()
    assert lines == [
        "Created /j",
        f"'sasl,'zkcli/localhost@{realm.kdc.realm}",
        ": cdrwa",
        "data",
    ]


def _cli_mt(cli: Path, realm: Realm, port: int, command: str, who: str | None) -> list[str]:
    """One batch command of the C client's shell, logged in with GSSAPI as ``who`` (a
    principal of the realm, from its credential cache; Cyrus SASL's GSSAPI plugin) or
    anonymous (None). Returns what it printed, less what differs between runs (timings, the
    session id, the Stat dump, the client library's log lines)."""
    args = [str(cli), "-h", f"localhost:{port}", "-c", command]
    env = dict(os.environ)
    if who is not None:
        # the service principal zookeeper/localhost@REALM (-z's default service, -o the host)
        args += ["-n", "GSSAPI", "-u", who, "-l", realm.kdc.realm, "-o", "localhost"]
        ccache = {"alice": realm.alice_ccache, "zkcli/localhost": realm.zkcli_ccache}[who]
        env["KRB5CCNAME"] = f"FILE:{ccache}"
    proc = subprocess.run(
        args, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL
    )
    # the Stat dump's times and zxids differ between runs; its versions do not
    stat = ("\tctime", "\tczxid", "\tmtime", "\tmzxid", "\tephemeralOwner")
    skipped = ("time = ", "Got a new session id", "Stat:", "Batch mode", *stat)
    return [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if line.strip() and not line.startswith(skipped) and "ZOO_" not in line
    ]


def _cli_mt_story(
    cli: Path, realm: Realm, port: int, monkeypatch: pytest.MonkeyPatch
) -> dict[str, object]:
    """A node only ``sasl:alice@REALM`` may use (made by kazoo logged in as alice: cli_mt
    creates with the open ACL only), then cli_mt logged in as alice, as another principal and
    anonymous."""
    alice = _kazoo(port, realm.alice_ccache, monkeypatch)
    try:
        alice.create("/c", b"secret", acl=[make_acl("sasl", f"alice@{realm.kdc.realm}", all=True)])
        out = {
            "alice get": _cli_mt(cli, realm, port, "get /c", "alice"),
            "alice set": _cli_mt(cli, realm, port, "set /c from-c", "alice"),
            "alice create": _cli_mt(cli, realm, port, "create /c/child", "alice"),
            "alice ls": _cli_mt(cli, realm, port, "ls /c", "alice"),
            "zkcli get": _cli_mt(cli, realm, port, "get /c", "zkcli/localhost"),
            "anonymous get": _cli_mt(cli, realm, port, "get /c", None),
            "anonymous create": _cli_mt(cli, realm, port, "create /c/other", None),
            "data": alice.get("/c")[0],
            "children": alice.get_children("/c"),
        }
        alice.delete("/c", recursive=True)
    finally:
        alice.stop()
        alice.close()
    return out


@pytest.mark.oracle
def test_cli_mt_gssapi(realm: Realm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C client's Kerberos login: cli_mt built with Cyrus SASL (Debian's zookeeper-bin one
    has no SASL) logs in with GSSAPI to trizk and to ZooKeeper 3.8.0 configured identically;
    a node with a ``sasl`` ACL answers the same to it, to another principal and to an
    anonymous cli_mt."""
    from trizk.compat.ctests import build

    b = build.cached()
    if b is None or not b.cli_mt.exists():
        pytest.skip(
            "no cli_mt built with SASL in the C suite's cache "
            f"({build.cache_dir()}): build it with "
            "`TRIZK_C_SUITE=1 python -m trizk.compat.ctests.run --ci`"
        )
    with _zookeeper(realm, tmp_path) as port:
        expected = _cli_mt_story(b.cli_mt, realm, port, monkeypatch)
    srv = _trizk(tmp_path, realm.server_props(tmp_path))
    try:
        got = _cli_mt_story(b.cli_mt, realm, srv.port, monkeypatch)
    finally:
        srv.stop()
    assert got == expected, (got, expected)
    assert "/c: rc = 0" in got["alice get"] and "secret" in got["alice get"], got
    assert "/c: rc = -102" in got["anonymous get"], got  # ZNOAUTH
    assert "/c: rc = -102" in got["zkcli get"], got
    assert "\tversion=1\taversion=0" in got["alice set"], got
    assert "\tchild" in got["alice ls"], got
    assert got["data"] == b"from-c" and got["children"] == ["child"], got


# ---------------------------------------------------------------------------- ZooKeeper 3.8.0


@contextlib.contextmanager
def _zookeeper(realm: Realm, tmp: Path, **props: str) -> Iterator[int]:
    """ZooKeeper 3.8.0 with the same JAAS ``Server`` section and properties (as ``-D``)."""
    from trizk.compat.procs import servers
    from trizk.testing.probes import handshake_ok
    from trizk.testing.processes import poll_ready, spawn, stop_process

    if not servers.zookeeper_available("3.8.0"):
        pytest.skip("ZooKeeper 3.8.0 is not installed (compat/install-zookeeper.sh)")
    work = tmp / "zk"
    (work / "data").mkdir(parents=True)
    port = free_port()
    cfg = work / "zoo.cfg"
    cfg.write_text(servers.make_cfg(port, str(work / "data")))
    cmd = servers._command("zookeeper", cfg, work)
    flags = [f"-D{k}={v}" for k, v in realm.server_props(tmp, **props).items()]
    proc = spawn([cmd[0], *flags, *cmd[1:]], work, work / "server.log")
    try:
        ready = poll_ready(proc, lambda: handshake_ok("127.0.0.1", port, timeout=2.0), 60)
        assert ready, (work / "server.log").read_text(errors="replace")[-3000:]
        yield port
    finally:
        stop_process(proc, 10)


@pytest.mark.oracle
def test_same_answers_as_zookeeper(
    realm: Realm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kazoo's ACL story, the whoAmI ids of both principals (with removeHostFromPrincipal) and
    zkCli.sh's story: the same from ZooKeeper 3.8.0 and from trizk, configured identically."""
    props = {"zookeeper.kerberos.removeHostFromPrincipal": "true"}

    def run(port: int) -> dict[str, object]:
        return {
            "kazoo": _kazoo_story(port, realm, monkeypatch),
            "alice": _whoami(port, realm.alice_ccache, monkeypatch),
            "zkcli": _whoami(port, realm.zkcli_ccache, monkeypatch),
            "zkCli.sh": _zkcli_story(realm, tmp_path, port),
            "bad token": _bad_token(port),
        }

    with _zookeeper(realm, tmp_path, **props) as port:
        expected = run(port)
    srv = _trizk(tmp_path, realm.server_props(tmp_path, **props))
    try:
        got = run(srv.port)
    finally:
        srv.stop()
    assert got == expected, (got, expected)
    assert ("sasl", "zkcli@TRIZK.TEST") in got["zkcli"]  # type: ignore[operator]


# ------------------------------------------------------------------------ the documented example

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _doc_blocks() -> dict[str, str]:
    """The fenced blocks of docs/operations.md's "Kerberos" subsection, by language."""
    text = DOC.read_text()
    section = text[text.index("### Kerberos") :]
    section = section[: section.index("\n## ")]
    blocks: dict[str, str] = {}
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
        blocks.setdefault(lang, body)
    return blocks


@pytest.mark.parametrize("service", ["zookeeper", "zk"])
def test_documented_example(
    realm: Realm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service: str
) -> None:
    """The zoo.cfg, JAAS file and command of docs/operations.md, with this realm's names: the
    sasl ids lose host and realm; a service other than ``zookeeper`` is named by kazoo's
    ``service`` and the Java client's ``zookeeper.sasl.client.username``."""
    from trizk.server.config.zoocfg import load_config

    blocks = _doc_blocks()
    keytab = realm.server_keytab
    if service != "zookeeper":
        keytab = tmp_path / f"{service}.keytab"
        realm.kdc.add_principal(f"{service}/localhost", keytab)
    ccache = tmp_path / "alice.ccache"
    realm.kdc.kinit(f"alice@{realm.kdc.realm}", realm.alice_keytab, ccache)

    def local(text: str) -> str:
        return (
            text.replace("/etc/zookeeper/zookeeper.keytab", str(keytab))
            .replace("zookeeper/zk1.example.com", f"{service}/localhost")
            .replace("EXAMPLE.COM", realm.kdc.realm)
            .replace("/var/lib/zookeeper", str(tmp_path / "data"))
            .replace("clientPort=2181", f"clientPort={free_port()}\nclientPortAddress=127.0.0.1")
        )

    cfg_file, jaas = tmp_path / "zoo.cfg", tmp_path / "jaas.conf"
    cfg_file.write_text(local(blocks["properties"]))
    jaas.write_text(local(blocks["text"]))
    command = shlex.split(blocks["sh"].splitlines()[0])
    assert command[:2] == ["trizk-server", "zoo.cfg"]
    # the command's -D options, pointed at this realm's files
    local_files = {
        "java.security.auth.login.config": str(jaas),
        "java.security.krb5.conf": str(realm.kdc.krb5_conf),
    }
    keys = [arg.split("=", 1)[0] for arg in command[3::2]]
    assert command[2::2] == ["-D"] * len(keys) and sorted(keys) == sorted(local_files)
    props = [(k, local_files[k]) for k in keys]
    srv = ThreadedServer(load_config(cfg_file, properties=props)).start()
    try:
        monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")
        zk = KazooClient(
            hosts=f"localhost:{srv.port}",
            timeout=10,
            sasl_options={"mechanism": "GSSAPI", "service": service},
        )
        zk.start(timeout=15)
        try:
            zk.create("/doc", b"x", acl=[make_acl("sasl", "alice", all=True)])
            assert zk.get("/doc")[0] == b"x"
            zk.delete("/doc")
        finally:
            zk.stop()
            zk.close()
        story = _zkcli(
            realm,
            tmp_path,
            srv.port,
            "create",
            "/doc",
            "y",
            "sasl:zkcli:cdrwa",
            **{"zookeeper.sasl.client.username": service},
        )
        assert "Created /doc" in story, story
        assert "'sasl,'zkcli" in _zkcli(
            realm,
            tmp_path,
            srv.port,
            "getAcl",
            "/doc",
            **{"zookeeper.sasl.client.username": service},
        )
    finally:
        srv.stop()


def test_auth_to_local_rules_are_named_unsupported(
    realm: Realm, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Rules other than DEFAULT would change the sasl ids: one warning says they are ignored."""
    rules = "RULE:[1:$1@$0](.*@TRIZK.TEST)s/@.*//,DEFAULT"
    srv = _trizk(
        tmp_path, realm.server_props(tmp_path, **{"zookeeper.security.auth_to_local": rules})
    )
    srv.stop()
    warned = [r.getMessage() for r in caplog.records if "auth_to_local" in r.getMessage()]
    assert len(warned) == 1 and rules in warned[0]
