"""``ssl.crl=true`` / ``ssl.ocsp=true`` on the secure client port, trizk beside Java ZooKeeper
with the same zoo.cfg: the certificates of tests/shell/revocation_pki.py (a CRL distribution
point and an OCSP responder served on 127.0.0.1 by the test), presented by a TLS client that
sends a ConnectRequest. Both servers must serve the good certificate and refuse the revoked
one, the one whose CRL point / responder is unreachable and the one that names neither (the
JDK's legacy revocation checking never soft-fails), for the same reasons: the text of the
``CertPathValidatorException`` ZooKeeper logs is the text of trizk's refusal line. And
``ssl.quorum.crl=true`` in a mixed ensemble: a member whose certificate is revoked is refused
by the ZooKeeper member and the trizk member alike."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.compat.conftest import require_zookeeper
from tests.compat.test_quorum_tls import _log, _tls_ensemble
from tests.ensemble_helpers import client
from tests.shell.quorum_certs import Stores
from tests.shell.revocation_pki import CLIENTS, Pki, responder
from tests.shell.test_revocation import served
from trizk.compat.procs import servers
from trizk.testing.ports import free_port

pytestmark = [pytest.mark.oracle, pytest.mark.slow]

_JAVA_REASON = re.compile(
    r"ValidatorException: PKIX path validation failed: "
    r"java\.security\.cert\.CertPathValidatorException: (.*)$"
)
_TRIZK_REASON = re.compile(
    r"Unsuccessful handshake with /[\d.]+: PKIX path validation failed: (.*)$"
)
_DATE = re.compile(r"revocation date: .*?, authority")


def _cfg(pki: Pki, port: int, mode: str) -> dict[str, str]:
    return {
        "secureClientPort": str(port),
        "secureClientPortAddress": "127.0.0.1",
        "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "ssl.keyStore.location": str(pki.key_store("server")),
        "ssl.keyStore.type": "PEM",
        "ssl.trustStore.location": str(pki.trust_pem),
        "ssl.trustStore.type": "PEM",
        "admin.enableServer": "false",
        f"ssl.{mode}": "true",
    }


def _reasons(log: str, pattern: re.Pattern[str]) -> list[str]:
    """The refusal reasons in order, one per connection (a Java refusal logs its exception
    twice: "Unsuccessful handshake" and "Exception caught"), revocation dates left out."""
    found: list[str] = []
    for line in log.splitlines():
        m = pattern.search(line)
        if m is None:
            continue
        reason = _DATE.sub("revocation date: <date>, authority", m.group(1).strip())
        if not found or found[-1] != reason:
            found.append(reason)
    return found


def _judge(kind: str, version: str, pki: Pki, mode: str) -> tuple[dict[str, bool], list[str]]:
    port = free_port()
    pattern = _JAVA_REASON if kind == "zookeeper" else _TRIZK_REASON
    with servers.running(kind, _cfg(pki, port, mode), version=version) as srv:
        judged = {name: served(port, pki, name) for name in CLIENTS}
        refused = sum(not ok for ok in judged.values())
        # the server writes its last refusal's exception after the client saw the close:
        # read the log until every refusal is in it (bounded)
        deadline = time.monotonic() + 15
        while True:
            reasons = _reasons(srv.log_path.read_text(errors="replace"), pattern)
            if len(reasons) >= refused or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    return judged, reasons


@pytest.mark.parametrize("version", ["3.8.0", "3.9.3"])
@pytest.mark.parametrize("mode", ["crl", "ocsp"])
def test_revocation_as_zookeeper(tmp_path: Path, version: str, mode: str) -> None:
    require_zookeeper(version)
    if (mode, version) == ("ocsp", "3.9.3"):
        _ocsp_on_39_port(tmp_path)
        return
    with responder(tmp_path / "pki") as pki:
        zk, zk_reasons = _judge("zookeeper", version, pki, mode)
        trizk, trizk_reasons = _judge("trizk", version, pki, mode)
    assert zk == {"good": True, "revoked": False, "unreachable": False, "bare": False}
    assert trizk == zk
    revoked = (
        "Certificate has been revoked, reason: KEY_COMPROMISE, revocation date: <date>, "
        "authority: CN=revocation test CA, extension OIDs: "
        + ("[2.5.29.21]" if mode == "crl" else "[]")
    )
    undetermined = [
        "Unable to determine revocation status due to network error",
        "Could not determine revocation status"
        if mode == "crl"
        else "Certificate does not specify OCSP responder",
    ]
    assert zk_reasons == [revoked, *undetermined], zk_reasons
    assert trizk_reasons == zk_reasons


def _ocsp_on_39_port(tmp_path: Path) -> None:
    """3.9.3's secure client port passes ``ssl.ocsp`` to Netty's ``enableOcsp``, which the JDK
    SslProvider refuses: ZooKeeper closes every connection before its handshake, even the good
    certificate's; trizk answering as 3.9.3 does not start, with one line saying so."""
    with responder(tmp_path / "pki") as pki:
        port = free_port()
        with servers.running("zookeeper", _cfg(pki, port, "ocsp"), version="3.9.3") as srv:
            assert not any(served(port, pki, name) for name in CLIENTS)
            log = srv.log_path.read_text(errors="replace")
        assert "OCSP is not supported with this SslProvider: JDK" in log
        assert not pki.hits
        with pytest.raises(servers.ServerStartError, match="OCSP is not supported") as refused:
            servers.start("trizk", _cfg(pki, free_port(), "ocsp"), version="3.9.3", attempts=1)
        assert "Traceback" not in str(refused.value)


# -------------------------------------------------------------------------- quorum


@pytest.mark.parametrize("odd_kind", ["zookeeper", "trizk"])
def test_a_revoked_member_is_refused_by_trizk_as_by_zookeeper(
    tmp_path: Path, odd_kind: str
) -> None:
    """``ssl.quorum.crl=true`` on every member of a mixed ensemble (ZooKeeper 3.8.0 member 1,
    trizk member 2) whose third member's certificate is on the CA's CRL: 1 and 2 serve, the
    third never joins, and both kinds refuse it for the JDK's reason (trizk: one line per
    refused connection, no traceback)."""
    require_zookeeper("3.8.0")
    with responder(tmp_path / "pki") as pki:
        trust = pki.trust_pem

        def stores(name: str) -> Stores:
            return Stores(pki.key_store(name), trust)

        kinds = {1: "zookeeper", 2: "trizk", 3: odd_kind}
        members = {1: stores("good"), 2: stores("server"), 3: stores("revoked")}
        with _tls_ensemble(kinds, members, **{"ssl.quorum.crl": "true"}) as ens:
            ens.wait_serving(members=[1, 2])
            zk = client(ens.hosts([1, 2]))
            try:
                zk.create("/revocation", b"x")
            finally:
                zk.stop()
                zk.close()
            words = "Certificate has been revoked, reason: KEY_COMPROMISE"
            pattern = re.compile(r"Refused the TLS connection of quorum peer /127\.0\.0\.1 .*")

            def java_refused() -> bool:
                """ZooKeeper's refusal in its log: the JDK's words when it connected to the
                revoked member; when the revoked member connected to it (TLS 1.3 judges the
                client's certificate after the server's Finished) 3.8.0 loses the reason and
                only logs the closed socket of the challenge it then tries to read."""
                text = _log(ens, 1)
                return words in text or "Exception reading or writing challenge" in text

            # the odd member retries with the election's backoff: a bounded wait for both
            # kinds' refusals in their logs
            deadline = time.monotonic() + 180
            while True:
                trizk_lines = [ln for ln in _log(ens, 2).splitlines() if pattern.search(ln)]
                if trizk_lines and java_refused():
                    break
                assert time.monotonic() < deadline, (trizk_lines, ens.tails())
                time.sleep(0.2)  # polling interval of a bounded wait for log lines
            assert all(words in ln for ln in trizk_lines), trizk_lines
            assert "Traceback" not in _log(ens, 2)
            assert ens.mode(3) == ""
            assert pki.hits["crl"] >= 2  # both kinds fetched the CRL


# -------------------------------------------------------------------------- AdminServer


def _admin_x509_answers(kind: str, pki: Pki) -> tuple[list[object], int]:
    """ZooKeeper 3.9's AdminServer over HTTPS with ``admin.needClientAuth`` and ``ssl.crl``:
    ``snapshot`` asked with ``Authorization: x509`` by each client certificate (the ACL of /
    names every one of them), then by the revoked one with ``ip``. Returns the answers (status
    and JSON, or "refused" when the handshake fails) and the CRL fetches."""
    import http.client
    import json
    import ssl

    from kazoo.client import KazooClient
    from kazoo.security import ACL, Id

    port = free_port()
    cfg = {
        **_cfg(pki, free_port(), "crl"),
        "admin.enableServer": "true",
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": str(port),
        "admin.forceHttps": "true",
        "admin.needClientAuth": "true",
        "admin.rateLimiterIntervalInMS": "1000000000",
        "ssl.quorum.keyStore.location": str(pki.key_store("server")),
        "ssl.quorum.keyStore.type": "PEM",
        "ssl.quorum.trustStore.location": str(pki.trust_pem),
        "ssl.quorum.trustStore.type": "PEM",
    }
    answers: list[object] = []
    pki.hits.clear()
    with servers.running(kind, cfg, version="3.9.3") as srv:
        zk = KazooClient(hosts=f"127.0.0.1:{srv.port}", timeout=10)
        zk.start(timeout=10)
        try:
            zk.set_acls("/", [ACL(31, Id("x509", f"CN={name}")) for name in CLIENTS])
        finally:
            zk.stop()
            zk.close()
        for name, auth in [(n, "x509") for n in CLIENTS] + [("revoked", "ip")]:
            ctx = ssl.create_default_context(cafile=str(pki.trust_pem))
            ctx.check_hostname = False
            ctx.load_cert_chain(str(pki.cert_pem(name)), str(pki.key_pem(name)))
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=ctx)
            try:
                conn.request(
                    "GET", "/commands/snapshot?streaming=false", headers={"Authorization": auth}
                )
                resp = conn.getresponse()
                body = resp.read()
                shown = json.loads(body) if resp.status != 200 else None
                answers.append((name, auth, resp.status, shown))
            except (ssl.SSLError, OSError):
                answers.append((name, auth, "refused"))
            finally:
                conn.close()
    return answers, pki.hits["crl"]


def test_admin_x509_authentication_checks_revocation_as_393(tmp_path: Path) -> None:
    """3.9.3 with ``ssl.crl=true``: ``X509Util.createTrustManager`` turns the JVM's default
    revocation checks on, so Jetty's handshake refuses the revoked, unreachable and bare
    certificates (whatever the scheme); the good one authenticates as ``x509``. The same
    answers from both (``X509AuthenticationProvider``'s own check, also with ``ssl.crl``,
    is not reached by a refused certificate)."""
    require_zookeeper("3.9.3")
    with responder(tmp_path / "pki") as pki:
        zk, zk_hits = _admin_x509_answers("zookeeper", pki)
        trizk, _ = _admin_x509_answers("trizk", pki)
    assert zk == [
        ("good", "x509", 200, None),
        ("revoked", "x509", "refused"),
        ("unreachable", "x509", "refused"),
        ("bare", "x509", "refused"),
        ("revoked", "ip", "refused"),
    ]
    assert zk_hits > 0
    assert trizk == zk
