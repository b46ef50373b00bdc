"""ZooKeeper 3.9's AdminServer authentication and its ``snapshot`` command
(:mod:`trizk.server.ops.admin`): the pure auth step and rate limiter, a live trizk, and the
same requests against ZooKeeper 3.9.3 side by side (``oracle``)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl

from tests.conftest import ThreadedServer, free_port, make_config
from trizk.jute import records as r
from trizk.server.auth import acl as aclmod
from trizk.server.ops import admin
from trizk.server.ops.http import HttpRequest
from trizk.storage.formats import snapshot as snapfmt

Answer = tuple[int, list[tuple[str, str]], bytes]


def _request(
    port: int, method: str, path: str, auth: str | None = None, body: bytes | None = None
) -> Answer:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        c.request(method, path, body=body, headers={"Authorization": auth} if auth else {})
        resp = c.getresponse()
        return resp.status, resp.getheaders(), resp.read()
    finally:
        c.close()


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name.lower()), None)


# -- pure ------------------------------------------------------------------------------------

_WORLD = (r.ACL(31, r.Id("world", "anyone")),)
_ALICE = (r.ACL(31, r.Id("digest", aclmod.digest_of("alice:secret"))),)


def _auth(root_acl: tuple[r.ACL, ...], **cfg: Any) -> admin.AdminAuth:
    return admin.AdminAuth(aclmod.AuthConfig(**cfg), lambda p: root_acl if p == "/" else None)


def test_authorization_header_parsing() -> None:
    cfg = aclmod.AuthConfig()
    assert admin.admin_ids("digest alice:secret", "127.0.0.1", cfg) == [
        ("digest", aclmod.digest_of("alice:secret"))
    ]
    # String.split(" "): trailing empty strings dropped, inner ones kept
    assert admin.admin_ids("digest alice:secret ", "127.0.0.1", cfg) is not None
    assert admin.admin_ids("digest  alice:secret", "127.0.0.1", cfg) is None
    assert admin.admin_ids("digest a b", "127.0.0.1", cfg) is None
    assert admin.admin_ids("digest", "127.0.0.1", cfg) is None  # no credentials
    assert admin.admin_ids("bogus x", "127.0.0.1", cfg) is None
    assert admin.admin_ids("", "127.0.0.1", cfg) is None
    assert admin.admin_ids("ip", "10.1.2.3", cfg) == [("ip", "10.1.2.3")]
    assert admin.admin_ids("x509", "127.0.0.1", aclmod.AuthConfig(x509=True)) is None
    sup = aclmod.AuthConfig(super_digest=aclmod.digest_of("root:pw"))
    assert admin.admin_ids("digest root:pw", "127.0.0.1", sup) == [
        ("super", ""),
        ("digest", aclmod.digest_of("root:pw")),
    ]


async def test_check_auth_answers() -> None:
    want = admin.ALL_ON_ROOT
    assert await admin.check_auth("snap", want, None, "127.0.0.1", _auth(_WORLD)) == (
        401,
        {"command": "snap", "error": "Auth info is missing for the command"},
    )
    assert await admin.check_auth("snapshot", want, "bogus", "127.0.0.1", _auth(_WORLD)) == (
        401,
        {"command": "snapshot", "error": "Not authenticated"},
    )
    assert await admin.check_auth("snapshot", want, "ip", "127.0.0.1", _auth(_WORLD)) is None
    assert await admin.check_auth("snapshot", want, "digest bob:x", "127.0.0.1", _auth(_ALICE)) == (
        403,
        {"command": "snapshot", "error": "Not authorized"},
    )
    assert (
        await admin.check_auth("snapshot", want, "digest alice:secret", "", _auth(_ALICE)) is None
    )
    # checkACL grants when the ACL entry shares any bit with the permission asked: READ
    # alone on / is enough for "ALL" (as ZooKeeper 3.9.3 answers: see the oracle test)
    read_only = (r.ACL(1, r.Id("digest", aclmod.digest_of("alice:secret"))),)
    assert (
        await admin.check_auth("snapshot", want, "digest alice:secret", "", _auth(read_only))
        is None
    )
    # super (superDigest) passes any ACL
    sup = _auth(_ALICE, super_digest=aclmod.digest_of("root:pw"))
    assert await admin.check_auth("snapshot", want, "digest root:pw", "", sup) is None
    ip_acl = (r.ACL(31, r.Id("ip", "10.0.0.0/8")),)
    assert await admin.check_auth("snapshot", want, "ip", "10.9.8.7", _auth(ip_acl)) is None
    assert await admin.check_auth("snapshot", want, "ip", "127.0.0.1", _auth(ip_acl))
    missing = admin.AdminAuth(aclmod.AuthConfig(), lambda p: None)
    assert await admin.check_auth("snapshot", want, "ip", "", missing) == (
        500,
        {"command": "snapshot", "error": "Error occurred during auth"},
    )


async def test_check_auth_x509() -> None:
    want = admin.ALL_ON_ROOT
    cert_acl = (r.ACL(31, r.Id("x509", "CN=client")),)
    asked: list[Sequence[bytes]] = []

    async def subject(chain: Sequence[bytes]) -> str | None:
        asked.append(chain)
        return "CN=client" if tuple(chain) == (b"der",) else None

    auth = admin.AdminAuth(aclmod.AuthConfig(x509=True), lambda p: cert_acl, subject)
    assert await admin.check_auth("snapshot", want, "x509", "", auth, (b"der",)) is None
    # no certificate, or one the provider's trust manager refuses: not authenticated
    assert (await admin.check_auth("snapshot", want, "x509", "", auth))[0] == 401  # type: ignore[index]
    refused = await admin.check_auth("snapshot", want, "x509", "", auth, (b"other",))
    assert refused is not None and refused[0] == 401
    # the provider (its trust manager may fetch CRLs, ask OCSP) is asked only for scheme x509
    asked.clear()
    refused = await admin.check_auth("snapshot", want, "digest a:b", "", auth, (b"der",))
    assert refused is not None and refused[0] == 403 and asked == []
    # without the provider registered, no x509 id and no x509 ACL match
    unregistered = admin.AdminAuth(aclmod.AuthConfig(), lambda p: cert_acl, subject)
    refused = await admin.check_auth("snapshot", want, "x509", "", unregistered, (b"der",))
    assert refused is not None and refused[0] == 401


def test_x_forwarded_for() -> None:
    req = HttpRequest("GET", "/", (("x-forwarded-for", "10.1.1.1 , 10.2.2.2"),), b"", "1.2.3.4")
    assert admin._client_ip(req, True) == "10.1.1.1"
    assert admin._client_ip(req, False) == "1.2.3.4"


def test_rate_limiter() -> None:
    lim = admin.RateLimiter(1, 300, now_ms=1000)
    assert lim.allow(1000)  # created full
    assert not lim.allow(1300)  # not *more* than the interval yet
    assert lim.allow(1301)
    assert not lim.allow(1302)


def test_commands_of_each_release() -> None:
    assert admin.lookup("snap", zk39=True) is not None
    assert admin.lookup("snapshot") is None
    assert '/snapshot"' in admin.command_links("/commands", zk39=True)
    assert '/snapshot"' not in admin.command_links("/commands")
    assert admin.route("PUT", "/commands/ruok", "/commands", zk39=True).body == b""
    assert admin.route("PUT", "/commands/ruok", "/commands").status == 405
    post = admin.route("POST", "/commands/ruok?x=1", "/commands", zk39=True)
    assert post.command == "ruok" and not post.kwargs
    assert admin.route("POST", "/commands/ruok", "/commands").status == 405


# -- a live trizk ----------------------------------------------------------------------------


def _admin_cfg(tmp_path: Path, **extra: Any) -> Any:
    keys: dict[str, Any] = {
        "admin.enableServer": "true",
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": free_port(),
    }
    keys.update(extra)
    return make_config(tmp_path, **keys)


@pytest.fixture
def locked_server(tmp_path: Path) -> Iterator[ThreadedServer]:
    # a rate limit interval of 10^9 "ms" (read as microseconds: 10^6 ms) keeps the second
    # snapshot refused however slow the machine is
    srv = ThreadedServer(
        _admin_cfg(tmp_path, **{"admin.rateLimiterIntervalInMS": "1000000000"})
    ).start()
    yield srv
    srv.stop()


def test_snapshot_needs_all_on_root(locked_server: ThreadedServer) -> None:
    assert locked_server.server is not None
    port = locked_server.server.admin_port
    assert port is not None
    zk = KazooClient(hosts=f"127.0.0.1:{locked_server.port}", timeout=10)
    zk.start(timeout=10)
    try:
        zk.create("/kept", b"v1")
        zk.set_acls("/", [make_digest_acl("alice", "secret", all=True)])
    finally:
        zk.stop()
        zk.close()
    status, _, body = _request(port, "GET", "/commands/snap")
    assert (status, json.loads(body)) == (
        401,
        {"command": "snap", "error": "Auth info is missing for the command"},
    )
    status, _, body = _request(port, "GET", "/commands/snapshot", "digest bob:x")
    assert (status, json.loads(body)["error"]) == (403, "Not authorized")
    status, _, body = _request(port, "GET", "/commands/snapshot", "ip")
    assert status == 403
    status, headers, body = _request(port, "GET", "/commands/snapshot", "digest alice:secret")
    assert status == 200
    assert _header(headers, "Content-Type") == "application/octet-stream"
    assert _header(headers, "snapshot_size") == str(len(body))
    zxid = int(_header(headers, "last_zxid") or "", 16)
    assert zxid > 0
    # the body is a snapshot trizk's (and ZooKeeper's) loader reads, with the node in it
    content = snapfmt.parse(body)
    assert any(n.path == "/kept" for n in content.nodes)
    assert content.last_processed_zxid == zxid  # 3.9's trailer
    status, _, body = _request(port, "GET", "/commands/snapshot", "digest alice:secret")
    assert (status, json.loads(body)) == (429, {"command": "snapshot", "error": None})
    # POST on a GET command: ZooKeeper's servlet fails (500)
    status, _, _ = _request(port, "POST", "/commands/ruok", body=b"")
    assert status == 500


def test_snapshot_disabled_and_not_streaming(tmp_path: Path) -> None:
    srv = ThreadedServer(_admin_cfg(tmp_path, **{"admin.snapshot.enabled": "false"})).start()
    try:
        assert srv.server is not None and srv.server.admin_port is not None
        status, _, body = _request(srv.server.admin_port, "GET", "/commands/snap", "ip")
        assert (status, json.loads(body)) == (503, {"command": "snapshot", "error": None})
        status, _, body = _request(srv.server.admin_port, "GET", "/commands/snap")
        assert status == 401  # auth comes first
    finally:
        srv.stop()
    srv = ThreadedServer(_admin_cfg(tmp_path / "b")).start()
    try:
        assert srv.server is not None and srv.server.admin_port is not None
        port = srv.server.admin_port
        status, headers, body = _request(port, "GET", "/commands/snap?streaming=false", "ip")
        assert (status, json.loads(body)) == (200, {"command": "snapshot", "error": None})
        assert int(_header(headers, "snapshot_size") or "0") > 0
    finally:
        srv.stop()


def test_no_snapshot_command_as_380(tmp_path: Path) -> None:
    srv = ThreadedServer(_admin_cfg(tmp_path, **{"trizk.zookeeperVersion": "3.8.0"})).start()
    try:
        assert srv.server is not None and srv.server.admin_port is not None
        status, _, body = _request(srv.server.admin_port, "GET", "/commands/snapshot", "ip")
        assert (status, json.loads(body)["error"]) == (200, "Unknown command: snapshot")
        status, _, _ = _request(srv.server.admin_port, "POST", "/commands/ruok", body=b"")
        assert status == 405
    finally:
        srv.stop()


# -- side by side with ZooKeeper 3.9.3 -------------------------------------------------------


def _conversation(kind: str) -> list[Any]:
    """The same requests to a server of ``kind``: what a client sees of each answer."""
    from trizk.compat.procs import servers

    port = free_port()
    extra = {
        "admin.enableServer": "true",
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": str(port),
        "admin.rateLimiterIntervalInMS": "1000000000",
    }
    seen: list[Any] = []
    with servers.running(kind, extra) as srv:
        zk = KazooClient(hosts=f"127.0.0.1:{srv.port}", timeout=10)
        zk.start(timeout=10)
        try:
            zk.create("/kept", b"v1")
            # READ alone: checkACL grants ALL on a shared bit
            zk.set_acls("/", [make_digest_acl("alice", "secret", read=True)])
        finally:
            zk.stop()
            zk.close()
        steps: list[tuple[str, str, str | None]] = [
            ("GET", "/commands/snap", None),
            ("GET", "/commands/snapshot", "bogus x"),
            ("GET", "/commands/snapshot", "digest"),
            ("GET", "/commands/snapshot", "digest  alice:secret"),
            ("GET", "/commands/snapshot", "digest bob:x"),
            ("GET", "/commands/snapshot", "ip"),
            ("GET", "/commands/snapshot", "digest alice:secret"),
            ("GET", "/commands/snapshot?streaming=false", "digest alice:secret"),
            ("POST", "/commands/ruok", None),
            ("POST", "/commands/nosuch", None),
            ("PUT", "/commands/ruok", None),
        ]
        for method, path, auth in steps:
            status, headers, body = _request(
                port, method, path, auth, b"" if method != "GET" else None
            )
            ctype = _header(headers, "Content-Type")
            if ctype == "application/json":
                shown: Any = json.loads(body)
            elif ctype == "application/octet-stream":
                content = snapfmt.parse(body)
                shown = (
                    sorted(n.path for n in content.nodes),
                    content.last_processed_zxid,
                    _header(headers, "last_zxid"),
                    _header(headers, "snapshot_size") == str(len(body)),
                )
            else:
                shown = None
            seen.append((method, path, auth, status, ctype, shown))
    return seen


@pytest.mark.oracle
@pytest.mark.slow
def test_same_answers_as_zookeeper_393() -> None:
    from trizk.compat.procs import servers

    if not servers.zookeeper_available("3.9.3"):
        pytest.skip("ZooKeeper 3.9.3 is not installed")
    theirs = _conversation("zookeeper@3.9.3")
    ours = _conversation("trizk@3.9.3")
    for a, b in zip(theirs, ours, strict=True):
        assert a == b


def _x509_conversation(kind: str, stores: Path) -> list[Any]:
    """x509 over HTTPS with ``admin.needClientAuth``: the same requests to ``kind``."""
    import ssl

    from kazoo.security import ACL, Id

    from trizk.compat.procs import servers

    port = free_port()
    store = {"location": str(stores / "k.p12"), "password": "pw1234"}
    trust = {"location": str(stores / "ca.pem")}
    extra = {
        "admin.enableServer": "true",
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": str(port),
        "admin.forceHttps": "true",
        "admin.needClientAuth": "true",
        "admin.rateLimiterIntervalInMS": "1000000000",
        "secureClientPort": str(free_port()),
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
    }
    for prefix in ("ssl.", "ssl.quorum."):
        extra.update({f"{prefix}keyStore.{k}": v for k, v in store.items()})
        extra.update({f"{prefix}trustStore.{k}": v for k, v in trust.items()})
    seen: list[Any] = []
    with servers.running(kind, extra) as srv:
        zk = KazooClient(hosts=f"127.0.0.1:{srv.port}", timeout=10)
        zk.start(timeout=10)
        try:
            # X500Principal.getName(): RFC 2253, the last RDN first, "," escaped
            zk.set_acls("/", [ACL(31, Id("x509", "O=Acme\\, Inc,CN=127.0.0.1"))])
        finally:
            zk.stop()
            zk.close()
        for auth, with_cert in [("ip", True), ("x509", True), ("x509 x", True), ("x509", False)]:
            ctx = ssl.create_default_context(cafile=str(stores / "ca.pem"))
            if with_cert:
                ctx.load_cert_chain(str(stores / "c.pem"), str(stores / "c.key"))
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=ctx)
            try:
                conn.request(
                    "GET", "/commands/snapshot?streaming=false", headers={"Authorization": auth}
                )
                resp = conn.getresponse()
                seen.append((auth, with_cert, resp.status, json.loads(resp.read())))
            except (ssl.SSLError, OSError):
                seen.append((auth, with_cert, "refused"))
            finally:
                conn.close()
    return seen


@pytest.mark.oracle
@pytest.mark.slow
def test_x509_as_zookeeper_393(tmp_path: Path) -> None:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    from trizk.compat.procs import servers

    if not servers.zookeeper_available("3.9.3"):
        pytest.skip("ZooKeeper 3.9.3 is not installed")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc"),
        ]
    )
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
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "k.p12").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"k", key, cert, None, serialization.BestAvailableEncryption(b"pw1234")
        )
    )
    (tmp_path / "ca.pem").write_bytes(pem)
    (tmp_path / "c.pem").write_bytes(pem)
    (tmp_path / "c.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    theirs = _x509_conversation("zookeeper@3.9.3", tmp_path)
    ours = _x509_conversation("trizk@3.9.3", tmp_path)
    assert theirs == ours
    assert [s[2] for s in ours] == [403, 200, 429, "refused"]


def test_snapshot_on_every_ensemble_member() -> None:
    """ZooKeeper's SnapshotCommand runs on any ZooKeeperServer: leader and followers alike
    answer their own replica's snapshot."""
    from trizk.testing.ensemble import Ensemble

    ports = {sid: free_port() for sid in (1, 2, 3)}
    member = {
        sid: {
            "admin.enableServer": "true",
            "admin.serverAddress": "127.0.0.1",
            "admin.serverPort": str(port),
        }
        for sid, port in ports.items()
    }
    with Ensemble(3, member_properties=member) as ens:
        zk = KazooClient(hosts=ens.connect_string, timeout=10)
        zk.start(timeout=10)
        try:
            zk.create("/x", b"1")
            zk.sync("/")
        finally:
            zk.stop()
            zk.close()
        holding = 0
        for port in ports.values():
            status, headers, body = _request(port, "GET", "/commands/snapshot", "ip")
            assert status == 200 and _header(headers, "snapshot_size") == str(len(body))
            content = snapfmt.parse(body)
            assert content.last_processed_zxid == int(_header(headers, "last_zxid") or "", 16)
            holding += any(n.path == "/x" for n in content.nodes)
        assert holding >= 1  # the member that answered the create has applied it
