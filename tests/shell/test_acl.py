"""ACLs and authentication over real sockets (kazoo and the raw client), plus the provider
rules of server/auth/acl.py. Expected values are ZooKeeper 3.8.0's (checked against the real server
with the same requests: IPv4-only ip ACLs, Java ``split`` rules for digest ids, KerberosName
rules for sasl ids, whoAmI and ``auth`` expansion in ConcurrentHashMap order).

Every denial test also checks that the denied request changed nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import InvalidACLError, NoAuthError
from kazoo.security import make_acl, make_digest_acl

from tests.conftest import ThreadedServer, free_port, make_config
from trizk.compat.oracle.rawclient import ConnectionClosed, RawClient
from trizk.jute import records as R
from trizk.jute.codes import Code, OpCode
from trizk.server.auth import acl
from trizk.server.config.zoocfg import ServerConfig

SUPER = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # digest of super:test


# ---------------------------------------------------------------------------- pure rules


@pytest.mark.parametrize(
    ("scheme", "ident", "valid"),
    [
        ("ip", "::1", False),  # 3.8.0: "TODO Write the v6addr2Bytes"
        ("ip", "0:0:0:0:0:0:0:1", False),
        ("ip", "1.2.3.4/", False),  # split("/", 2) keeps the empty part
        ("ip", "010.1.1.1", True),  # Integer.parseInt: decimal, leading zeros fine
        ("ip", "+1.2.3.4", True),
        ("ip", "1.2.3.4/+8", True),
        ("ip", "1.2.3.4/33", False),
        ("ip", "127.0.0.1/8", True),
        ("ip", "1.2.3", False),
        ("digest", "a:b:", True),  # Java's split drops trailing empty strings
        ("digest", "a:", False),
        ("digest", ":b", True),
        ("digest", "a:b:c", False),
        ("digest", "::", False),
        ("sasl", "bob", True),
        ("sasl", "bob@REALM", True),
        ("sasl", "a/b@R", True),
        ("sasl", "a@b@c", False),
        ("x509", "CN=a", False),  # no x509 provider without a secure port
        ("world", "someone", False),
        ("nosuch", "x", False),
    ],
)
def test_fixup_validity_matches_zookeeper(scheme: str, ident: str, valid: bool) -> None:
    ids = acl.new_connection_ids(acl.AuthConfig(sasl=True), "127.0.0.1")
    entry = (R.ACL(31, R.Id(scheme, ident)),)
    if valid:
        assert acl.fixup(entry, ids) == entry
    else:
        with pytest.raises(acl.ACLError):
            acl.fixup(entry, ids)


def test_ip_matching() -> None:
    def ok(remote: str, expr: str) -> bool:
        ids = acl.new_connection_ids(acl.DEFAULT_AUTH, remote)
        return acl.check((R.ACL(1, R.Id("ip", expr)),), 1, ids)

    assert ok("10.1.2.3", "10.0.0.0/8") and not ok("11.1.2.3", "10.0.0.0/8")
    assert ok("10.1.2.3", "10.1.2.3") and not ok("10.1.2.4", "10.1.2.3")
    assert ok("1.2.3.4", "0.0.0.0/0")
    assert not ok("::1", "0.0.0.0/0")  # an IPv6 client never matches (3.8.0)
    assert acl.java_host_address("::1") == "0:0:0:0:0:0:0:1"
    assert acl.java_host_address("::ffff:10.0.0.1") == "10.0.0.1"


def test_x500_names_as_x500principal() -> None:
    # verdicts of Java 17's new X500Principal(name)
    good = ["", "CN=foo", "cn=foo,o=bar", "CN=foo;O=bar", "CN=a+OU=b,O=c", "CN=", "CN=a=b",
            'CN="quoted, name"', "CN=a\\,b", "CN=#0403616263", "1.2.3.4=foo", "OID.2.5.4.3=foo",
            " CN = foo , O = bar ", "EMAILADDRESS=a@b", "CN=foo bar", "CN=a\\41", 'CN="a\\"b"',
            'CN="x" ,O=y', "CN = ", "dc=example,dc=com", "CN=a\\ ", "T=x", "CN=a\\#b"]  # fmt: skip
    bad = ["garbage", "CN=a<b", "CN=a>b", 'CN=a"b', "CN=#04", "CN=#zz", "FOO=bar", "CN=foo,",
           ",CN=foo", "CN=a\\", "CN=a;", "CN=a+", "=foo", 'CN="abc"x', "CN=a\\q", "CN=a\\4",
           'CN="unterminated', "CN=#0403616263 ,O=b", "CN=#040361626364", "CN=a,,O=b"]  # fmt: skip
    assert [n for n in good if not acl.valid_x500_name(n)] == []
    assert [n for n in bad if acl.valid_x500_name(n)] == []


def test_auth_ids_iterate_in_concurrenthashmap_order() -> None:
    ids = acl.new_connection_ids(acl.AuthConfig(super_digest=SUPER), "127.0.0.1")
    for i in acl.authenticate("digest", b"super:test", "127.0.0.1", config=ids.config) or []:
        ids.add(i)
    for i in acl.authenticate("digest", b"alice:pw", "127.0.0.1", config=ids.config) or []:
        ids.add(i)
    # what ZooKeeper 3.8.0's whoAmI answered for the same connection
    assert acl.who_am_i(ids) == [
        ("super", ""),
        ("ip", "127.0.0.1"),
        ("digest", "alice"),
        ("digest", "super"),
    ]


# ---------------------------------------------------------------------------- over sockets


@pytest.fixture
def super_server(tmp_path: Path) -> Iterator[ThreadedServer]:
    cfg = make_config(tmp_path, **{"DigestAuthenticationProvider.superDigest": SUPER})
    srv = ThreadedServer(cfg).start()
    yield srv
    srv.stop()


def _kazoo(srv: ThreadedServer, *auth: tuple[str, str]) -> KazooClient:
    zk = KazooClient(hosts=srv.hosts, timeout=10, auth_data=list(auth))
    zk.start(timeout=10)
    return zk


def _raw(srv: ThreadedServer) -> RawClient:
    c = RawClient("127.0.0.1", srv.port, io_timeout=10)
    assert c.connect() is not None
    return c


def _call(c: RawClient, op: int, rec: R.Record | None) -> tuple[int, object]:
    xid = c.send(op, rec)
    _, reply = c.read_until_reply(xid)
    return reply.err, reply.body


def test_kazoo_digest_auth_and_every_denial(super_server: ThreadedServer) -> None:
    alice = _kazoo(super_server, ("digest", "alice:secret"))
    mallory = _kazoo(super_server, ("digest", "alice:guess"))
    root = _kazoo(super_server, ("digest", "super:test"))
    try:
        alice.create("/p", b"v0", acl=[make_digest_acl("alice", "secret", all=True)])
        alice.create("/p/c", b"child", acl=[make_digest_acl("alice", "secret", all=True)])
        before = alice.get("/p")
        denied = [
            lambda: mallory.get("/p"),  # READ
            lambda: mallory.get_children("/p"),  # READ
            lambda: mallory.set("/p", b"x"),  # WRITE
            lambda: mallory.create("/p/new"),  # CREATE on the parent
            lambda: mallory.delete("/p/c"),  # DELETE on the parent
            lambda: mallory.set_acls("/p", [make_acl("world", "anyone", all=True)]),  # ADMIN
            lambda: mallory.get_acls("/p"),  # READ | ADMIN
        ]
        for op in denied:
            with pytest.raises(NoAuthError):
                op()
        tx = mallory.transaction()
        tx.set_data("/p", b"multi")
        assert isinstance(tx.commit()[0], NoAuthError)  # a multi: WRITE checked per op
        # exists needs READ in 3.9 (ZOOKEEPER-2590; the default release); 3.8.0 checks no
        # permission (scenario zk39_exists_without_read, run on both releases in tests/compat)
        with pytest.raises(NoAuthError):
            mallory.exists("/p")
        # nothing a denied request asked for was changed
        assert alice.get("/p") == before
        assert alice.get_children("/p") == ["c"]
        acls, st = alice.get_acls("/p")
        assert st.aversion == 0 and [(a.id.scheme, a.perms) for a in acls] == [("digest", 31)]
        # super passes every check; ACLs are not inherited
        root.set("/p", b"by-super")
        alice.create("/open", acl=[make_acl("world", "anyone", read=True)])
        with pytest.raises(NoAuthError):
            alice.set("/open", b"x")
        assert root.set("/open", b"x").version == 1
        alice.delete("/p/c")
    finally:
        for zk in (alice, mallory, root):
            zk.stop()
            zk.close()


def test_get_acl_masks_digest_without_admin(super_server: ThreadedServer) -> None:
    alice = _kazoo(super_server, ("digest", "alice:secret"))
    other = _kazoo(super_server)
    try:
        alice.create(
            "/m",
            acl=[
                make_digest_acl("alice", "secret", all=True),
                make_acl("world", "anyone", read=True),
            ],
        )
        acls, _ = other.get_acls("/m")
        assert [(a.id.scheme, a.id.id) for a in acls] == [
            ("digest", "alice:x"),
            ("world", "anyone"),
        ]
        acls, _ = alice.get_acls("/m")
        assert acls[0].id.id == acl.digest_of("alice:secret")
        with pytest.raises(InvalidACLError):
            other.create("/n", acl=[make_acl("auth", "", all=True)])  # no authenticated id
        assert other.exists("/n") is None
    finally:
        alice.stop()
        other.stop()


def test_set_acl_stale_aversion_is_badversion(super_server: ThreadedServer) -> None:
    c = _raw(super_server)
    try:
        open_acl = (R.ACL(31, R.Id("world", "anyone")),)
        # an empty ACL list is INVALIDACL, and nothing is created
        assert _call(c, OpCode.CREATE, R.CreateRequest("/v", b"", (), 0))[0] == Code.INVALIDACL
        assert _call(c, OpCode.EXISTS, R.ExistsRequest("/v", False))[0] == Code.NONODE
        assert _call(c, OpCode.CREATE, R.CreateRequest("/v", b"", open_acl, 0))[0] == 0
        err, body = _call(c, OpCode.SETACL, R.SetACLRequest("/v", open_acl, 0))
        assert err == 0 and body.stat.aversion == 1  # type: ignore[attr-defined]
        err, _ = _call(
            c, OpCode.SETACL, R.SetACLRequest("/v", (R.ACL(1, R.Id("world", "anyone")),), 0)
        )
        assert err == Code.BADVERSION
        err, body = _call(c, OpCode.GETACL, R.GetACLRequest("/v"))
        assert err == 0 and body.acl == open_acl and body.stat.aversion == 1  # type: ignore[attr-defined]
    finally:
        c.close()


def test_auth_failed_then_closed(super_server: ThreadedServer) -> None:
    c = _raw(super_server)
    try:
        c.add_auth("nosuchscheme", b"x")
        reply = c.read_packet()
        assert (reply.xid, reply.zxid, reply.err) == (-4, 0, Code.AUTHFAILED)  # type: ignore[union-attr]
        with pytest.raises(ConnectionClosed):
            c.read_packet()
    finally:
        c.close()
    c = _raw(super_server)
    try:  # the sasl scheme has no provider here, and SASLAuthenticationProvider refuses anyway
        c.add_auth("sasl", b"bob")
        assert c.read_packet().err == Code.AUTHFAILED  # type: ignore[union-attr]
    finally:
        c.close()


def test_whoami_and_auth_belong_to_the_connection(super_server: ThreadedServer) -> None:
    c = _raw(super_server)
    try:
        c.add_auth("digest", b"alice:secret")
        assert c.read_packet().err == 0  # type: ignore[union-attr]
        _, body = _call(c, OpCode.WHOAMI, None)
        # ConcurrentHashMap order: for these two ids ZooKeeper 3.8.0 lists the digest first
        assert [(i.authScheme, i.user) for i in body.clientInfo] == [  # type: ignore[attr-defined]
            ("digest", "alice"),
            ("ip", "127.0.0.1"),
        ]
        acl_ = (R.ACL(31, R.Id("digest", acl.digest_of("alice:secret"))),)
        assert _call(c, OpCode.CREATE, R.CreateRequest("/conn", b"d", acl_, 0))[0] == 0
        sid, pw = c.session_id, c.passwd
        c.close()
        # the same session on a new connection has not authenticated (ServerCnxn.authInfo)
        c = RawClient("127.0.0.1", super_server.port, io_timeout=10)
        assert c.connect(session_id=sid, passwd=pw) is not None
        assert _call(c, OpCode.GETDATA, R.GetDataRequest("/conn", False))[0] == Code.NOAUTH
        c.add_auth("digest", b"alice:secret")
        assert c.read_packet().err == 0  # type: ignore[union-attr]
        assert _call(c, OpCode.GETDATA, R.GetDataRequest("/conn", False))[0] == 0
    finally:
        c.close()


def test_max_client_cnxns_per_address(tmp_path: Path) -> None:
    cfg = ServerConfig.create(
        tmp_path / "data", clientPort=free_port(), clientPortAddress="127.0.0.1", maxClientCnxns=2
    )
    srv = ThreadedServer(cfg).start()
    clients: list[RawClient] = []
    try:
        clients = [_raw(srv), _raw(srv)]
        third = RawClient("127.0.0.1", srv.port, io_timeout=10)
        clients.append(third)
        assert third.connect() is None  # refused: closed without a ConnectResponse
        clients[0].close()
        # a slot frees when a connection ends (bounded wait for the server to notice)
        deadline = time.monotonic() + 10
        while True:
            c = RawClient("127.0.0.1", srv.port, io_timeout=10)
            clients.append(c)
            if c.connect() is not None:
                break
            assert time.monotonic() < deadline, "slot never freed"
    finally:
        for c in clients:
            c.close()
        srv.stop()
