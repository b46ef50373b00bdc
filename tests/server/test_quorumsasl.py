"""Quorum SASL's pure exchanges (server/auth/quorumsasl.py): a learner and a server machine
talking to each other byte by byte, ZooKeeper's settings checks, JAAS sections and the
authorization rule of ``SaslQuorumServerCallbackHandler`` (3.8 and 3.9)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.jute.records import QuorumAuthPacket
from trizk.server.auth.quorumsasl import (
    MAGIC,
    AuthOut,
    PacketReader,
    QuorumAuthLearner,
    QuorumAuthServer,
    QuorumAuthSettings,
    QuorumLearnerLogin,
    QuorumServerLogin,
    Status,
    Verdict,
    authorize,
    encode_packet,
    logins_from_jaas,
    server_principal,
)
from trizk.server.auth.sasl import JaasError

USERS = {"learner": "s3cret"}
SERVER = QuorumServerLogin(users=USERS, authz_hosts=frozenset({"127.0.0.1"}))


def learner(password: str = "s3cret", required: bool = True) -> QuorumAuthLearner:
    return QuorumAuthLearner(
        QuorumLearnerLogin(username="learner", password=password),
        required,
        "zkquorum/localhost",
        "127.0.0.1",
        "cnonce-0123456789",
    )


def run(
    lrn: QuorumAuthLearner, srv: QuorumAuthServer, after: bytes = b"", chunk: int = 0
) -> tuple[AuthOut, AuthOut]:
    """Shuttle bytes between the two machines until both have a verdict; ``after``: what the
    learner sends right behind its last packet (the election's notifications, FOLLOWERINFO);
    ``chunk``: feed the server that many bytes at a time. The server's ``rest`` gathers
    what it did not consume."""
    out_l = lrn.start()
    to_server = out_l.send + (after if out_l.verdict is not None else b"")
    out_s = AuthOut()
    rest = b""
    for _ in range(10):
        size = chunk or max(len(to_server), 1)
        pieces = [to_server[i : i + size] for i in range(0, len(to_server), size)]
        reply = b""
        for i, piece in enumerate(pieces):
            out_s = srv.data_received(piece)
            reply += out_s.send
            if out_s.verdict is not None:
                rest = out_s.rest + b"".join(pieces[i + 1 :])
                break
        if out_l.verdict is None and reply:
            out_l = lrn.data_received(reply)
            to_server = out_l.send + (after if out_l.verdict is not None else b"")
        if out_s.verdict is not None:
            out_s.rest = rest + (to_server if out_l.verdict is not None else b"")
            break
    assert out_s.verdict is not None
    return out_l, out_s


def test_magic_is_javas_value() -> None:
    # -0xa0dbcafecafe1234L in Java: the literal is a negative long, negated positive
    assert MAGIC == 0x5F2435013501EDCC
    pkt = encode_packet(Status.IN_PROGRESS, b"")
    assert pkt == bytes.fromhex("5f2435013501edcc" + "00000000" + "00000000")
    assert encode_packet(Status.SUCCESS, None).endswith(b"\xff\xff\xff\xff")
    assert QuorumAuthPacket.decode(pkt).magic == MAGIC


@pytest.mark.parametrize("chunk", [0, 1, 7])
def test_digest_md5_exchange_passes_and_keeps_what_follows(chunk: int) -> None:
    srv = QuorumAuthServer(SERVER, True, "nonce-abcdefghijklmnopqrstuvwxyz0123456")
    lrn = learner()
    out_l, out_s = run(lrn, srv, after=b"NOTIFICATION", chunk=chunk)
    assert out_l.verdict is Verdict.PASS and out_s.verdict is Verdict.PASS
    assert out_s.peer == "learner"
    assert out_s.rest == b"NOTIFICATION"


def test_wrong_password_is_refused_with_javas_reason() -> None:
    srv = QuorumAuthServer(SERVER, True, "nonce-abcdefghijklmnopqrstuvwxyz0123456")
    out_l, out_s = run(learner("wrong"), srv)
    assert out_s.verdict is Verdict.REFUSE
    assert "Failed to authenticate using SASL: DIGEST-MD5:" in out_s.reason
    assert "Mismatched response" in out_s.reason
    assert out_l.verdict is Verdict.REFUSE
    assert "Authentication failed against server addr" in out_l.reason


def test_unknown_user_is_refused() -> None:
    srv = QuorumAuthServer(
        QuorumServerLogin(users={"other": "x"}), True, "nonce-abcdefghijklmnopqrstuvwxyz0123456"
    )
    _, out_s = run(learner(), srv)
    assert out_s.verdict is Verdict.REFUSE and "cannot acquire password" in out_s.reason


def test_rolling_enablement() -> None:
    # a learner that does not require SASL sends nothing: a server that requires it refuses
    # on the first 8 bytes that are not the magic; one that does not lets them through
    lrn = learner(required=False)
    assert lrn.start() == AuthOut(verdict=Verdict.PASS)
    follower_info = bytes.fromhex("0000000b") + bytes(12)
    srv = QuorumAuthServer(SERVER, True, "n" * 40)
    assert srv.data_received(follower_info[:5]).verdict is None  # peeks 8 bytes
    out = srv.data_received(follower_info[5:])
    assert out.verdict is Verdict.REFUSE and "Learner not trying to authenticate" in out.reason
    assert out.send == b""
    srv = QuorumAuthServer(SERVER, False, "n" * 40)
    out = srv.data_received(follower_info)
    assert out.verdict is Verdict.PASS and out.rest == follower_info
    # a failed exchange is let through (after ERROR) when the server does not require SASL
    srv = QuorumAuthServer(SERVER, False, "n" * 40)
    out_l, out_s = run(learner("wrong"), srv)
    assert out_s.verdict is Verdict.PASS and out_l.verdict is Verdict.REFUSE
    # a peer gone before 8 bytes (a lower sid dropping its election connection)
    srv = QuorumAuthServer(SERVER, False, "n" * 40)
    assert srv.connection_lost().verdict is Verdict.PASS
    srv = QuorumAuthServer(SERVER, True, "n" * 40)
    assert srv.connection_lost().verdict is Verdict.REFUSE


def test_error_and_garbage_answers() -> None:
    lrn = learner()
    lrn.start()
    out = lrn.data_received(encode_packet(Status.ERROR, b""))
    assert out.verdict is Verdict.REFUSE
    lrn = learner()
    lrn.start()
    out = lrn.data_received(encode_packet(Status.IN_PROGRESS, None))
    assert out.verdict is Verdict.REFUSE and "saslToken is null" in out.reason
    srv = QuorumAuthServer(SERVER, True, "n" * 40)
    bad = MAGIC.to_bytes(8, "big") + bytes(4) + (-5).to_bytes(4, "big", signed=True)
    out = srv.data_received(bad)
    assert out.verdict is Verdict.REFUSE and "Unreasonable length" in out.reason
    reader = PacketReader(encode_packet(Status.SUCCESS, b"ab") + b"x")
    assert reader.next() == QuorumAuthPacket(MAGIC, 1, b"ab")
    assert reader.next() is None and reader.rest() == b"x"


def test_settings_checks_as_quorum_peer_config() -> None:
    assert QuorumAuthSettings().check() is None
    assert "quorum.auth.enableSasl is disabled, so cannot enable quorum.auth.serverRequireSasl" == (
        QuorumAuthSettings(server_required=True).check()
    )
    assert "cannot enable quorum.auth.learnerRequireSasl" in str(
        QuorumAuthSettings(learner_required=True).check()
    )
    assert (
        QuorumAuthSettings(enabled=True, server_required=True).check()
        == "quorum.auth.learnerRequireSasl is disabled, so cannot enable "
        "quorum.auth.serverRequireSasl"
    )


def test_host_pattern() -> None:
    assert server_principal("zkquorum/_HOST", "MyHost.example") == "zkquorum/myhost.example"
    assert server_principal("zkquorum/_HOST@R", "h") == "zkquorum/_HOST@R"
    assert server_principal("zkquorum/localhost", "h") == "zkquorum/localhost"


@pytest.mark.parametrize(
    ("digest_only", "authn", "authz", "ok"),
    [
        (True, "learner", "learner", True),
        (True, "learner", "other", False),
        (True, "a/otherhost@R", "a/otherhost@R", True),  # no host check for DIGEST-MD5
        (False, "zkquorum/localhost@R", "zkquorum/localhost@R", True),
        (False, "zkquorum/otherhost@R", "zkquorum/otherhost@R", False),
        (False, "zkquorum/localhost@R", "zkquorum/localhost@S", False),
        (False, "zkquorum@R", "zkquorum@R", False),  # CVE-2023-44981: Kerberos ids in 3 parts
    ],
)
def test_authorization(digest_only: bool, authn: str, authz: str, ok: bool) -> None:
    login = QuorumServerLogin(authz_hosts=frozenset({"localhost"}), digest_only=digest_only)
    assert authorize(login, authn, authz) is ok


JAAS = """
QuorumServer {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_learner="s3cret";
};
QuorumLearner {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="learner"
    password="s3cret";
};
"""


def test_jaas_sections() -> None:
    server, lrn = logins_from_jaas(JAAS, QuorumAuthSettings(enabled=True), "f", frozenset())
    assert server.users == {"learner": "s3cret"} and server.kerberos is None
    assert (lrn.username, lrn.password) == ("learner", "s3cret")
    with pytest.raises(JaasError, match="section 'Elsewhere' could not be found"):
        logins_from_jaas(
            JAAS, QuorumAuthSettings(enabled=True, server_context="Elsewhere"), "f", frozenset()
        )
    with pytest.raises(JaasError, match="username and password"):
        logins_from_jaas(
            JAAS.replace('password="s3cret"', ""),
            QuorumAuthSettings(enabled=True),
            "f",
            frozenset(),
        )


@given(st.lists(st.binary(max_size=40), max_size=8), st.booleans())
@settings(max_examples=examples(200), deadline=None)
def test_any_bytes_end_in_a_verdict_or_wait(chunks: list[bytes], required: bool) -> None:
    """Whatever a peer sends, the server machine answers with packets and at most one
    verdict, never an exception; a closed connection always ends it."""
    srv = QuorumAuthServer(SERVER, required, "n" * 40)
    magic = MAGIC.to_bytes(8, "big")
    for i, chunk in enumerate(chunks):
        data = magic + chunk if i == 0 else chunk
        out = srv.data_received(data)
        if out.verdict is not None:
            break
    else:
        assert srv.connection_lost().verdict is (Verdict.REFUSE if required else Verdict.PASS)
    lrn = learner()
    lrn.start()
    for chunk in chunks:
        if lrn.data_received(magic + chunk).verdict is not None:
            break
