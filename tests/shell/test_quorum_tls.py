"""Quorum TLS (server/shell/quorumtls.py): the settings as ZooKeeper reads them, the first-bytes
test of UnifiedServerSocket, and two members' ends of a link over real loopback sockets --
trusted, untrusted (another CA), expired, a certificate that does not name the address,
plain text refused under sslQuorum and let through under portUnification, and a store
reloaded after its file changed (sslQuorumReloadCertFiles). Then an in-process trizk
ensemble with sslQuorum=true forms and serves writes."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from tests.shell.quorum_certs import Stores, make_stores, quorum_tls_keys
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.shell.quorumtls import (
    DEFAULT_CIPHERS,
    QuorumTLS,
    QuorumTLSConfig,
    looks_like_tls,
    openssl_cipher,
)
from trizk.server.shell.tls import TLSConfigError

# -------------------------------------------------------------------------- pure parts


def test_first_bytes_tell_tls_from_the_quorum_protocols() -> None:
    # a TLS 1.2/1.3 ClientHello record header
    assert looks_like_tls(bytes([22, 3, 1, 0x02, 0x00]))
    # the election's initial message: protocol version -65536 (0xffffffffffff0000)
    assert not looks_like_tls(bytes.fromhex("ffffffffffff0000")[:5])
    # the old initial message: a small sid as a long
    assert not looks_like_tls((3).to_bytes(8, "big")[:5])
    # FOLLOWERINFO (type 11) then its zxid
    assert not looks_like_tls(bytes.fromhex("0000000b00"))
    # fewer than 5 bytes: plain text (UnifiedSocket.detectMode)
    assert not looks_like_tls(bytes([22, 3, 1]))
    # a zero-length TLS record is not one
    assert not looks_like_tls(bytes([22, 3, 3, 0, 0]))


def test_java_cipher_names() -> None:
    assert openssl_cipher("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA") == "ECDHE-ECDSA-AES256-SHA"
    assert openssl_cipher("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256") == "ECDHE-RSA-AES128-SHA256"
    assert openssl_cipher("TLS_RSA_WITH_AES_256_GCM_SHA384") == "AES256-GCM-SHA384"
    assert (
        openssl_cipher("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256")
        == "ECDHE-RSA-CHACHA20-POLY1305"
    )
    assert openssl_cipher("TLS_NOPE_WITH_RC4_MD5") is None
    assert all(openssl_cipher(c) is not None for c in DEFAULT_CIPHERS)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Stores]:
    d = tmp_path_factory.mktemp("qtls")
    far = {"far": (("10.9.9.9",), ("far.example",))}
    good = make_stores(d, "ca", ["m1", "m2", "m3", "old", "far"], expired={"old"}, names=far)
    return {**good, **make_stores(d, "otherca", ["rogue"])}


def _props(stores: Stores, **more: str) -> dict[str, str]:
    keys = quorum_tls_keys(stores, **more)
    return {"zookeeper." + k: v for k, v in keys.items() if k.startswith("ssl.")}


def _config(
    stores: Stores,
    *,
    ssl_quorum: bool = True,
    port_unification: bool = False,
    zookeeper_version: str = "3.8.0",
    props: dict[str, str] | None = None,
) -> QuorumTLSConfig:
    cfg = QuorumTLSConfig.from_properties(
        {**_props(stores), **(props or {})},
        ssl_quorum=ssl_quorum,
        port_unification=port_unification,
        zookeeper_version=zookeeper_version,
    )
    assert cfg is not None
    return cfg


def test_defaults_follow_the_release(ca: dict[str, Stores]) -> None:
    c38 = _config(ca["m1"], zookeeper_version="3.8.0")
    assert (c38.protocol, c38.enabled_protocols) == ("TLSv1.2", ("TLSv1.2",))
    assert c38.settings.client_auth == "need" and c38.settings.client_hostname_verification
    c39 = _config(ca["m1"], zookeeper_version="3.9.3")
    assert (c39.protocol, c39.enabled_protocols) == ("TLSv1.3", ("TLSv1.3", "TLSv1.2"))
    assert QuorumTLSConfig.from_properties({}, ssl_quorum=False, port_unification=False) is None


def test_settings_that_cannot_be_used(ca: dict[str, Stores]) -> None:
    with pytest.raises(TLSConfigError, match=r"keyStore\.location not specified"):
        QuorumTLSConfig.from_properties({}, ssl_quorum=True, port_unification=False)
    bad = {"zookeeper.ssl.quorum.ciphersuites": "TLS_FOO_WITH_BAR"}
    with pytest.raises(TLSConfigError, match="unsupported cipher suite 'TLS_FOO_WITH_BAR'"):
        _config(ca["m1"], props=bad)
    bad = {"zookeeper.ssl.quorum.enabledProtocols": "TLSv1.2,SSLv9"}
    with pytest.raises(TLSConfigError, match="unsupported protocol 'SSLv9'"):
        _config(ca["m1"], props=bad)


def test_zoo_cfg_keys(tmp_path: Path, ca: dict[str, Stores]) -> None:
    cfg = ServerConfig.create(
        tmp_path,
        clientPort=2181,
        **{"portUnification": "true", "ssl.quorum.protocol": "TLSv1.3"},
        **quorum_tls_keys(ca["m1"]),
    )
    assert cfg.ssl_quorum and cfg.port_unification and not cfg.ssl_quorum_reload_cert_files
    assert cfg.properties["zookeeper.ssl.quorum.protocol"] == "TLSv1.3"
    assert not {"sslQuorum", "portUnification", "ssl.quorum.protocol"} & set(cfg.unsupported)


# -------------------------------------------------------------------------- two ends

Ends = tuple["trio.abc.Stream | None", "trio.abc.Stream | None"]


async def _pair(
    server: QuorumTLS,
    client: QuorumTLS,
    first: Callable[[trio.abc.Stream | None], Awaitable[None]] | None = None,
    *,
    plain_client: bool = False,
) -> Ends:
    """Accept on ``server``'s end, connect with ``client``'s (plain bytes with
    ``plain_client``); each end sends a line the other must read."""
    got: dict[str, trio.abc.Stream | None] = {}  # and "heard": what the acceptor read
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def accept_one() -> None:
        stream = await listeners[0].accept()
        got["server"] = s = await server.accept(stream, "election", 5)
        if s is not None:
            try:
                await s.send_all(b"hello from the acceptor\n")
                got["heard"] = await s.receive_some(100)  # type: ignore[assignment]
            except trio.BrokenResourceError:
                pass  # the connecting end refused us

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(accept_one)
            raw = await trio.open_tcp_stream("127.0.0.1", port)
            if plain_client:
                c: trio.abc.Stream | None = raw
            else:
                c = await client.connect(raw, "member 9's election port", 5)
            got["client"] = c
            if c is not None:
                await c.send_all(b"hello from the connector\n")
                try:
                    data = await c.receive_some(100)
                except trio.BrokenResourceError:
                    data = b""
                assert data in (b"", b"hello from the acceptor\n")
        for listener in listeners:
            await listener.aclose()
    return got.get("server"), got.get("client")


async def test_trusted_members_talk(ca: dict[str, Stores]) -> None:
    a, b = QuorumTLS(_config(ca["m1"])), QuorumTLS(_config(ca["m2"]))
    s, c = await _pair(a, b)
    assert s is not None and c is not None
    for version in ("3.8.0", "3.9.3"):
        a = QuorumTLS(_config(ca["m1"], zookeeper_version=version))
        s, c = await _pair(a, a)
        assert s is not None and c is not None


@pytest.mark.parametrize(
    ("who", "why"),
    [
        ("rogue", "PKIX path building failed"),
        ("old", "validity check failed"),
        ("far", "Failed to verify both host address and host name"),
    ],
)
async def test_a_member_the_other_does_not_trust_is_refused_by_both(
    ca: dict[str, Stores], who: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    good = _config(ca["m1"])
    # the odd member trusts the good CA (only its own certificate is wrong)
    odd_props = _props(ca[who])
    odd_props["zookeeper.ssl.quorum.trustStore.location"] = str(ca["m1"].trust_store)
    odd = QuorumTLSConfig.from_properties(odd_props, ssl_quorum=True, port_unification=False)
    assert odd is not None
    caplog.set_level(logging.INFO, "trizk.quorum.tls")
    s, _ = await _pair(QuorumTLS(good), QuorumTLS(odd))  # the odd one connects
    assert s is None
    lines = [r for r in caplog.records if "Refused the TLS connection" in r.getMessage()]
    assert len(lines) == 1 and why in lines[0].getMessage() and lines[0].exc_info is None
    caplog.clear()
    _, c = await _pair(QuorumTLS(odd), QuorumTLS(good))  # the odd one accepts
    assert c is None
    lines = [r for r in caplog.records if "Cannot open secure channel" in r.getMessage()]
    assert len(lines) == 1 and why in lines[0].getMessage() and lines[0].exc_info is None


async def test_without_hostname_verification_the_address_is_not_checked(
    ca: dict[str, Stores],
) -> None:
    off = {"zookeeper.ssl.quorum.hostnameVerification": "false"}
    good = QuorumTLS(_config(ca["m1"], props=off))
    far = QuorumTLS(_config(ca["far"], props=off))
    s, c = await _pair(good, far)
    assert s is not None and c is not None
    s, c = await _pair(far, good)
    assert s is not None and c is not None


async def test_plain_text_blocked_under_ssl_quorum_served_under_port_unification(
    ca: dict[str, Stores], caplog: pytest.LogCaptureFixture
) -> None:
    tls_only = QuorumTLS(_config(ca["m1"]))
    s, _ = await _pair(tls_only, tls_only, plain_client=True)
    assert s is None
    assert "Blocked insecure connection attempt from /127.0.0.1" in caplog.text
    unified = QuorumTLS(_config(ca["m1"], ssl_quorum=False, port_unification=True))
    s, c = await _pair(unified, unified, plain_client=True)
    assert s is not None and c is not None
    # and TLS on the same port
    s, c = await _pair(unified, QuorumTLS(_config(ca["m2"])))
    assert s is not None and c is not None
    # a member without sslQuorum connects in plain text
    assert await unified.connect(c, "x", 1) is c  # type: ignore[arg-type]


async def test_stores_are_reloaded_when_their_files_change(
    ca: dict[str, Stores], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = tmp_path / "member.pem"
    shutil.copy(ca["rogue"].key_store, key)
    props = _props(Stores(key, ca["m1"].trust_store))
    cfg = QuorumTLSConfig.from_properties(
        props, ssl_quorum=True, port_unification=False, reload_cert_files=True
    )
    assert cfg is not None
    member, good = QuorumTLS(cfg), QuorumTLS(_config(ca["m2"]))
    s, _ = await _pair(good, member)
    assert s is None  # another CA's certificate
    shutil.copy(ca["m1"].key_store, key)  # the operator replaces it
    caplog.set_level(logging.INFO, "trizk.quorum.tls")
    s, c = await _pair(good, member)
    assert s is not None and c is not None
    assert "Reloaded the quorum TLS stores" in caplog.text
    key.write_text("not a store")  # a broken file keeps the working contexts
    s, c = await _pair(good, member)
    assert s is not None and c is not None
    assert "Failed to reload the quorum TLS stores" in caplog.text
