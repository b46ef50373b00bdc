"""Enforced authentication (``AuthenticationHelper``): the configuration rules, then a server
with ``sessionRequireClientSASLAuth=true`` and a JAAS ``Server`` section over real sockets --
kazoo logged in with SASL DIGEST-MD5 works, a client without SASL is closed with
SESSIONCLOSEDREQUIRESASLAUTH, and a failed SASL exchange is answered -124 (not AUTHFAILED) even
with ``allowSaslFailedClients=true``. The same answers from ZooKeeper 3.8.0 are pinned in
tests/compat/test_enforce_auth.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from puresasl.client import SASLClient

from tests.conftest import ThreadedServer, free_port
from trizk.compat.oracle.rawclient import RawClient
from trizk.jute import records as R
from trizk.jute.codes import Code, OpCode
from trizk.server.auth.acl import SASL_PROVIDER, AuthConfig, AuthEnforcementError
from trizk.server.config.zoocfg import ServerConfig

JAAS = """
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_bob="bobsecret";
};
"""


def _cfg(**props: str) -> AuthConfig:
    return AuthConfig.from_properties(
        {"zookeeper." + k: v for k, v in props.items()}, secure_port=False
    )


def test_enforcement_settings() -> None:
    off = _cfg()
    assert not off.enforce_auth and not off.enforced_on([])
    assert off.enforcement_lines() == [
        "zookeeper.enforce.auth.enabled = false",
        "zookeeper.enforce.auth.schemes = []",
    ]
    # sessionRequireClientSASLAuth: sasl alone, whatever enforce.auth.* say
    sasl = _cfg(
        **{
            "authProvider.1": SASL_PROVIDER,
            "sessionRequireClientSASLAuth": "TRUE",
            "enforce.auth.schemes": "digest",
        }
    )
    assert sasl.enforce_schemes == ("sasl",) and sasl.sasl_auth_required
    assert sasl.enforced_on([("ip", "127.0.0.1"), ("digest", "bob:x")])
    assert not sasl.enforced_on([("ip", "127.0.0.1"), ("sasl", "bob")])
    both = _cfg(**{"enforce.auth.enabled": "true", "enforce.auth.schemes": " digest , ip,"})
    assert both.enforce_schemes == ("digest", "ip") and not both.sasl_auth_required
    assert not both.enforced_on([("ip", "10.0.0.1")])
    assert both.enforcement_lines()[1] == "zookeeper.enforce.auth.schemes = [digest, ip]"
    # schemes without enforcement: nothing enforced
    assert not _cfg(**{"enforce.auth.schemes": "digest"}).enforced_on([])
    with pytest.raises(AuthEnforcementError, match="schemes must be  configured"):
        _cfg(**{"enforce.auth.enabled": "true"})
    with pytest.raises(AuthEnforcementError, match=r"^Authentication scheme sasl is not avail"):
        _cfg(**{"sessionRequireClientSASLAuth": "true"})  # no SASL provider
    with pytest.raises(AuthEnforcementError, match="scheme digest is not available"):
        _cfg(
            **{
                "enforce.auth.enabled": "true",
                "enforce.auth.schemes": "digest",
                "DigestAuthenticationProvider.enabled": "false",
            }
        )


@pytest.fixture
def sasl_required(tmp_path: Path) -> Iterator[ThreadedServer]:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    cfg = ServerConfig.create(
        tmp_path / "data",
        properties={
            "zookeeper.authProvider.1": SASL_PROVIDER,
            "zookeeper.sessionRequireClientSASLAuth": "true",
            "zookeeper.allowSaslFailedClients": "true",  # moot when SASL is required
            "java.security.auth.login.config": str(jaas),
        },
        clientPort=free_port(),
        clientPortAddress="127.0.0.1",
    )
    srv = ThreadedServer(cfg).start()
    yield srv
    srv.stop()


def test_sasl_required_server(sasl_required: ThreadedServer) -> None:
    zk = KazooClient(
        hosts=sasl_required.hosts,
        timeout=10,
        sasl_options={"mechanism": "DIGEST-MD5", "username": "bob", "password": "bobsecret"},
    )
    zk.start(timeout=10)
    try:
        zk.create("/by-bob", b"ok")
        assert zk.get("/by-bob")[0] == b"ok"
    finally:
        zk.stop()
        zk.close()
    # no SASL: the first request is refused and the connection closed
    c = RawClient("127.0.0.1", sasl_required.port)
    try:
        assert c.connect() is not None
        xid = c.send(OpCode.EXISTS, R.ExistsRequest(path="/by-bob", watch=False))
        _, reply = c.read_until_reply(xid)
        assert (reply.err, reply.zxid, reply.raw) == (Code.SESSIONCLOSEDREQUIRESASLAUTH, 0, b"")
        assert c.read_raw_until_closed(time.monotonic() + 5) == (b"", "closed")
    finally:
        c.close()
    # a failed SASL exchange: -124 and closed (allowSaslFailedClients does not keep it open)
    c = RawClient("127.0.0.1", sasl_required.port)
    try:
        assert c.connect() is not None
        cli = SASLClient(
            "zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5", username="bob",
            password="wrong",
        )  # fmt: skip
        xid = c.send(OpCode.SASL, R.GetSASLRequest(b""))
        _, reply = c.read_until_reply(xid)
        challenge = R.SetSASLResponse.decode(reply.raw).token
        xid = c.send(OpCode.SASL, R.GetSASLRequest(cli.process(challenge)))
        _, reply = c.read_until_reply(xid)
        assert (reply.err, reply.zxid) == (Code.SESSIONCLOSEDREQUIRESASLAUTH, 0)
        assert c.read_raw_until_closed(time.monotonic() + 5) == (b"", "closed")
    finally:
        c.close()
