"""SASL DIGEST-MD5 (opcode 102): the pure server against pure-sasl's client, then kazoo and the
raw client over real sockets. Expected bytes are what ZooKeeper 3.8.0 sends (captured from the
real server with a JAAS ``Server`` section; see server/auth/sasl.py):

* challenge: ``realm="zk-sasl-md5",nonce="<40>",charset=utf-8,algorithm=md5-sess`` (no qop);
* success: ``rspauth=<32 hex>`` with err 0 and zxid 0; the connection gains ``sasl:<user>``
  (whoAmI lists it before ``ip``: ConcurrentHashMap order);
* failure: ``ReplyHeader(xid, 0, AUTHFAILED)`` + a null token (``ff ff ff ff``), then the
  connection closes; a token after completion fails the same way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, NoAuthError
from kazoo.protocol.states import KazooState, KeeperState
from kazoo.security import make_acl
from puresasl.client import SASLClient

from tests.conftest import ThreadedServer, free_port
from trizk.compat.oracle.rawclient import ConnectionClosed, RawClient
from trizk.jute import records as R
from trizk.jute.codes import Code, OpCode
from trizk.server.auth import sasl
from trizk.server.auth.acl import SASL_PROVIDER
from trizk.server.config.zoocfg import ServerConfig

JAAS = """
// the users ZooKeeper's SaslServerCallbackHandler reads
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="adminsecret"   /* a super user via zookeeper.superUser */
    user_bob="bobsecret";
};
"""
USERS = sasl.SaslServerConfig({"bob": "bobsecret", "super": "adminsecret"})


# ---------------------------------------------------------------------------- pure server


def _client(user: str, password: str) -> SASLClient:
    return SASLClient(
        "zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5", username=user, password=password
    )


def test_digest_md5_with_pure_sasl() -> None:
    srv = sasl.DigestMD5Server(USERS, "n" * 40)
    cli = _client("bob", "bobsecret")
    challenge = srv.evaluate(cli.process(None) or b"")
    assert challenge == (
        b'realm="zk-sasl-md5",nonce="' + b"n" * 40 + b'",charset=utf-8,algorithm=md5-sess'
    )
    assert not srv.complete
    rspauth = srv.evaluate(cli.process(challenge))
    assert rspauth.startswith(b"rspauth=") and len(rspauth) == 8 + 32
    assert srv.complete and srv.authorization_id == "bob"
    assert cli.process(rspauth) is None and cli.complete  # the client checks rspauth
    with pytest.raises(sasl.SaslError, match="already complete"):
        srv.evaluate(b"more")


@pytest.mark.parametrize(
    ("user", "password", "match"),
    [("bob", "wrong", "Mismatched response"), ("nobody", "x", "cannot acquire password")],
)
def test_digest_md5_refuses(user: str, password: str, match: str) -> None:
    srv = sasl.DigestMD5Server(USERS, "n" * 40)
    cli = _client(user, password)
    challenge = srv.evaluate(b"")
    with pytest.raises(sasl.SaslError, match=match):
        srv.evaluate(cli.process(challenge))
    assert not srv.complete and srv.authorization_id is None
    with pytest.raises(sasl.SaslError):  # a failed exchange stays failed
        srv.evaluate(b"")


def test_digest_md5_protocol_violations() -> None:
    with pytest.raises(sasl.SaslError, match="initial response"):
        sasl.DigestMD5Server(USERS, "n" * 40).evaluate(b"x")

    def respond(**kw: object) -> bytes:
        srv = sasl.DigestMD5Server(USERS, "n" * 40)
        ch = srv.evaluate(b"")
        return srv.evaluate(sasl.digest_md5_response(ch, "bob", "bobsecret", "c0ffee", **kw))  # type: ignore[arg-type]

    assert respond().startswith(b"rspauth=")
    assert respond(authzid="bob", utf8=False).startswith(b"rspauth=")
    with pytest.raises(sasl.SaslError, match="Mismatched URI"):
        respond(host="example.com")
    srv = sasl.DigestMD5Server(USERS, "n" * 40)
    ch = srv.evaluate(b"")
    good = sasl.digest_md5_response(ch, "bob", "bobsecret", "c0ffee")
    with pytest.raises(sasl.SaslError, match="Nonce count"):
        srv.evaluate(good.replace(b"nc=00000001", b"nc=00000002"))
    srv = sasl.DigestMD5Server(USERS, "n" * 40)
    ch = srv.evaluate(b"")
    with pytest.raises(sasl.SaslError, match="more than one"):
        srv.evaluate(good + b",nc=00000001")


def test_jaas_parsing() -> None:
    cfg = sasl.sasl_config_from(JAAS, {})
    assert cfg is not None and dict(cfg.users) == {"super": "adminsecret", "bob": "bobsecret"}
    # another section name (zookeeper.sasl.serverconfig); no such section: SASL is off
    assert sasl.sasl_config_from(JAAS, {"zookeeper.sasl.serverconfig": "Other"}) is None
    assert sasl.sasl_config_from(None, {}) is None
    props = {"zookeeper.SASLAuthenticationProvider.superPassword": "pw"}
    cfg2 = sasl.sasl_config_from(JAAS, props)
    assert cfg2 is not None and cfg2.password("super") == "pw" and cfg2.password("x") is None
    with pytest.raises(sasl.JaasError, match="No JAAS configuration section"):
        sasl.sasl_config_from("Server { broken", {}, "/x/jaas.conf")
    with pytest.raises(sasl.JaasError, match="needs a principal option"):
        sasl.sasl_config_from(
            "Server { com.sun.security.auth.module.Krb5LoginModule required; };", {}
        )
    with pytest.raises(sasl.JaasError, match="is not supported"):
        sasl.sasl_config_from("Server { org.example.OtherLoginModule required; };", {})
    with pytest.raises(sasl.JaasError, match="control flag"):
        sasl.parse_jaas("Server { a.B mandatory; };")


# ---------------------------------------------------------------------------- over sockets


def _server(tmp_path: Path, jaas: str | None = JAAS, **props: str) -> ThreadedServer:
    properties = {"zookeeper.authProvider.1": SASL_PROVIDER, **props}
    if jaas is not None:
        f = tmp_path / "jaas.conf"
        f.write_text(jaas)
        properties["java.security.auth.login.config"] = str(f)
    cfg = ServerConfig.create(
        tmp_path / "data",
        properties=properties,
        clientPort=free_port(),
        clientPortAddress="127.0.0.1",
        tickTime=2000,
    )
    return ThreadedServer(cfg).start()


@pytest.fixture
def sasl_server(tmp_path: Path) -> Iterator[ThreadedServer]:
    srv = _server(tmp_path, **{"zookeeper.superUser": "super"})
    yield srv
    srv.stop()


def _kazoo(srv: ThreadedServer, user: str | None, password: str = "") -> KazooClient:
    kw: dict[str, object] = {}
    if user is not None:
        kw["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": user, "password": password}
    zk = KazooClient(hosts=srv.hosts, timeout=10, **kw)  # type: ignore[arg-type]
    zk.start(timeout=10)
    return zk


def _raw_sasl(c: RawClient, token: bytes) -> tuple[int, int, bytes | None]:
    xid = c.send(OpCode.SASL, R.GetSASLRequest(token))
    _, reply = c.read_until_reply(xid)
    return reply.err, reply.zxid, R.SetSASLResponse.decode(reply.raw).token


def test_kazoo_sasl_digest_md5_acl(sasl_server: ThreadedServer) -> None:
    bob = _kazoo(sasl_server, "bob", "bobsecret")
    anon = _kazoo(sasl_server, None)
    su = _kazoo(sasl_server, "super", "adminsecret")
    try:
        bob.create("/s", b"secret", acl=[make_acl("sasl", "bob", all=True)])
        assert bob.get("/s")[0] == b"secret"
        assert [(a.id.scheme, a.id.id) for a in bob.get_acls("/s")[0]] == [("sasl", "bob")]
        # the denied session changes nothing
        with pytest.raises(NoAuthError):
            anon.get("/s")
        with pytest.raises(NoAuthError):
            anon.set("/s", b"stolen")
        with pytest.raises(NoAuthError):
            anon.create("/s/child")
        # exists needs READ in 3.9 (ZOOKEEPER-2590; the default release); 3.8.0 answers the Stat
        # (scenario zk39_exists_without_read, run on both releases in tests/compat)
        with pytest.raises(NoAuthError):
            anon.exists("/s")
        # zookeeper.superUser=super: the SASL super user passes every check
        su.set("/s", b"by-super")
        assert bob.get("/s")[0] == b"by-super" and bob.get_children("/s") == []
        # "auth" expands to the sasl id
        bob.create("/s2", acl=[make_acl("auth", "", all=True)])
        assert [(a.id.scheme, a.id.id) for a in bob.get_acls("/s2")[0]] == [("sasl", "bob")]
    finally:
        for zk in (bob, anon, su):
            zk.stop()
            zk.close()


def test_kazoo_sasl_wrong_password_fails(sasl_server: ThreadedServer) -> None:
    zk = KazooClient(
        hosts=sasl_server.hosts,
        timeout=5,
        sasl_options={"mechanism": "DIGEST-MD5", "username": "bob", "password": "nope"},
    )
    try:
        # kazoo reports CONNECTED before its SASL exchange, then turns the AUTHFAILED reply
        # (and the closed connection) into AUTH_FAILED and stops connecting
        states: list[str] = []
        zk.add_listener(states.append)
        try:
            zk.start(timeout=5)
        except AuthFailedError:
            pass
        deadline = time.monotonic() + 10
        while KazooState.LOST not in states:  # AUTH_FAILED is LOST for kazoo's listeners
            assert time.monotonic() < deadline, f"kazoo states {states}, {zk.client_state}"
            time.sleep(0.01)
        assert zk.client_state in (KeeperState.AUTH_FAILED, KeeperState.CLOSED)
        assert not zk.connected
    finally:
        zk.stop()
        zk.close()


def test_raw_sasl_bytes_and_whoami(sasl_server: ThreadedServer) -> None:
    c = RawClient("127.0.0.1", sasl_server.port, io_timeout=10)
    try:
        assert c.connect() is not None
        err, zxid, challenge = _raw_sasl(c, b"")
        assert (err, zxid) == (0, 0) and challenge is not None
        assert challenge.startswith(b'realm="zk-sasl-md5",nonce="')
        resp = sasl.digest_md5_response(challenge, "bob", "bobsecret", "abc", utf8=False)
        err, zxid, rspauth = _raw_sasl(c, resp)
        assert (err, zxid) == (0, 0) and rspauth is not None and rspauth.startswith(b"rspauth=")
        xid = c.send(OpCode.WHOAMI, None)
        _, reply = c.read_until_reply(xid)
        assert [(i.authScheme, i.user) for i in reply.body.clientInfo] == [
            ("sasl", "bob"),
            ("ip", "127.0.0.1"),
        ]
        # a token after completion: AUTHFAILED with a null token, then the connection closes
        xid = c.send(OpCode.SASL, R.GetSASLRequest(b"again"))
        _, reply = c.read_until_reply(xid)
        assert (reply.err, reply.zxid, reply.raw) == (Code.AUTHFAILED, 0, b"\xff\xff\xff\xff")
        with pytest.raises(ConnectionClosed):
            c.read_packet()
    finally:
        c.close()


def test_raw_sasl_bad_password_closes(sasl_server: ThreadedServer) -> None:
    c = RawClient("127.0.0.1", sasl_server.port, io_timeout=10)
    try:
        assert c.connect() is not None
        _, _, challenge = _raw_sasl(c, b"")
        assert challenge is not None
        resp = sasl.digest_md5_response(challenge, "bob", "not-it", "abc")
        xid = c.send(OpCode.SASL, R.GetSASLRequest(resp))
        _, reply = c.read_until_reply(xid)
        assert (reply.err, reply.zxid, reply.raw) == (Code.AUTHFAILED, 0, b"\xff\xff\xff\xff")
        with pytest.raises(ConnectionClosed):
            c.read_packet()
    finally:
        c.close()


def test_sasl_without_jaas_answers_ok_with_null_token(tmp_path: Path) -> None:
    srv = _server(tmp_path, jaas=None)
    c = RawClient("127.0.0.1", srv.port, io_timeout=10)
    try:
        assert c.connect() is not None
        assert _raw_sasl(c, b"") == (0, 0, None)
        xid = c.send(OpCode.WHOAMI, None)
        _, reply = c.read_until_reply(xid)
        assert [(i.authScheme, i.user) for i in reply.body.clientInfo] == [("ip", "127.0.0.1")]
    finally:
        c.close()
        srv.stop()


def test_sasl_acl_through_a_follower(tmp_path: Path) -> None:
    """A write a follower forwards carries its session's ids (the REQUEST packet's authinfo),
    and the leader checks them with its own providers: a ``sasl`` ACL created through a
    follower is valid, an ``auth`` ACL expands to the sasl id, and the sasl user passes the
    ACL check there (a plain list of ids knew only the default providers: INVALIDACL)."""
    from trizk.testing import Ensemble

    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    with Ensemble(
        3,
        properties={"authProvider.1": SASL_PROVIDER},
        system_properties={"java.security.auth.login.config": str(jaas)},
    ) as ens:
        follower = next(s for s in ens.members if s != ens.leader())
        bob = KazooClient(
            hosts=ens.hosts([follower]),
            sasl_options={"mechanism": "DIGEST-MD5", "username": "bob", "password": "bobsecret"},
        )
        bob.start(timeout=20)
        try:
            bob.create("/s", b"secret", acl=[make_acl("sasl", "bob", all=True)])
            bob.create("/s/child", acl=[make_acl("auth", "", all=True)])
            acls = bob.get_acls("/s/child")[0]
            assert [(a.id.scheme, a.id.id) for a in acls] == [("sasl", "bob")]
            bob.set("/s", b"changed")
            assert bob.get("/s")[0] == b"changed"
        finally:
            bob.stop()
            bob.close()
