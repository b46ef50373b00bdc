"""Quorum TLS in mixed ensembles of real processes: trizk and Apache ZooKeeper 3.8.0 members
with the same ``sslQuorum``/``portUnification``/``ssl.quorum.*`` zoo.cfg keys (PEM key and
trust stores made by tests/shell/quorum_certs.py; each member its own certificate, naming
127.0.0.1 as hostnameVerification wants).

* ``sslQuorum=true``, a trizk leader and a ZooKeeper leader: the ensemble forms over TLS (both
  kinds log their handshakes), serves writes, and loses no acknowledged write when its leader
  is killed under load.
* A member with a certificate of another CA, or an expired one, is refused by the trizk
  member and by the ZooKeeper member alike: the two others serve, it never does; trizk says
  why in one log line per refused connection, no traceback, with the words Java's PKIX
  validator uses in ZooKeeper's log.
* ZooKeeper's rolling switch: a plain mixed ensemble restarted member by member with
  ``portUnification=true``, then ``sslQuorum=true``, then ``portUnification=false``, serving
  (and keeping every write) after every restart.
* sslQuorumReloadCertFiles: a refused member whose key store file is replaced joins without
  a restart.
* docs/operations.md's quorum TLS example, as written (PKCS12 stores named ``.jks``, a password
  file), on every member of an ensemble: trizk members, and a ZooKeeper member when one is
  installed."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from tests.compat.conftest import require_zookeeper
from tests.compat.test_ensembles import Writers
from tests.ensemble_helpers import assert_identical, client
from tests.shell.quorum_certs import Stores, make_stores, quorum_tls_keys
from tests.test_docs import fenced
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.servers import zookeeper_available

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _keys(m_cfg: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in m_cfg.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k] = v
    return out


def set_keys(ens: ProcessEnsemble, sid: int, keys: dict[str, str]) -> None:
    """Change member ``sid``'s zoo.cfg keys (takes effect at its next start)."""
    m = ens.members[sid]
    m.write({**_keys(m.cfg_path), **keys})


def _tls_ensemble(
    kinds: dict[int, str],
    stores: dict[int, Stores],
    versions: dict[int, str] | None = None,
    **more: str,
) -> ProcessEnsemble:
    ens = ProcessEnsemble(kinds, start=False, versions=versions)
    try:
        for sid in kinds:
            set_keys(ens, sid, quorum_tls_keys(stores[sid], **more))
        for sid in kinds:
            ens.start(sid)
    except BaseException:
        ens.close()
        raise
    return ens


def _log(ens: ProcessEnsemble, sid: int) -> str:
    return ens.members[sid].log_path.read_text(errors="replace")


MIXED = {
    "trizk-leads": {1: "zookeeper", 2: "trizk", 3: "trizk"},
    "zookeeper-leads": {1: "trizk", 2: "zookeeper", 3: "zookeeper"},
}


@pytest.mark.oracle
@pytest.mark.parametrize(
    ("name", "release"),
    [
        *(pytest.param(name, "3.8.0", id=name) for name in MIXED),
        # 3.9.3 members, trizk answering as 3.9.3: TLSv1.3 by default on both kinds
        pytest.param("trizk-leads", "3.9.3", id="trizk-leads-3.9.3"),
    ],
)
def test_mixed_ensemble_over_tls_survives_a_leader_kill(
    name: str, release: str, tmp_path: Path
) -> None:
    require_zookeeper(release)
    kinds = MIXED[name]
    made = make_stores(tmp_path, "ca", [f"m{s}" for s in kinds])
    stores = {s: made[f"m{s}"] for s in kinds}
    versions = {s: release for s in kinds} if release != "3.8.0" else None
    with _tls_ensemble(kinds, stores, versions) as ens:
        ens.wait_leader(3)
        for sid, kind in kinds.items():
            text = _log(ens, sid)
            # trizk and QuorumCnxManager say so when they open a TLS link, UnifiedServerSocket
            # when it accepts one
            assert re.search(r"SSL handshake complete|Accepted TLS connection", text), (
                sid,
                kind,
                ens.tails(),
            )
        w = Writers(ens)
        try:
            w.wait_for(100)
            ens.kill(3)  # the leader, of the kind the name says
            before = len(w.acked)
            w.wait_for(before + 100)  # writes resumed on the new leader
        finally:
            w.finish()
        modes = ens.wait_serving()
        # either survivor may lead: the one that logged the killed leader's last proposal wins
        # FastLeaderElection (higher zxid), else the higher sid, 2
        assert sorted(modes.values()) == ["follower", "leader"], modes
        final = assert_identical(ens)
        assert [p for p in w.acked if "/" + p.lstrip("/") not in final] == []
        ens.start(3)  # back over TLS: synced by the new leader
        ens.wait_serving()
        assert "/" + w.acked[-1].lstrip("/") in assert_identical(ens)
        for sid in kinds:
            assert "Traceback" not in _log(ens, sid) or kinds[sid] == "zookeeper"
        if release == "3.9.3":
            assert all("TLSv1.3" in _log(ens, s) for s in kinds if kinds[s] == "trizk")


#: (the odd member's kind, what is wrong with its certificate, the words of the refusal)
ODD = {
    "trizk-of-another-ca": ("trizk", "rogue", "PKIX path building failed"),
    "zookeeper-expired": ("zookeeper", "old", "validity check failed"),
}


@pytest.mark.oracle
@pytest.mark.parametrize("name", list(ODD))
def test_an_untrusted_member_is_refused_by_trizk_as_by_zookeeper(name: str, tmp_path: Path) -> None:
    require_zookeeper()
    kind, cert, words = ODD[name]
    made = make_stores(tmp_path, "ca", ["m1", "m2", "old"], expired={"old"})
    made |= make_stores(tmp_path, "otherca", ["rogue"])
    # the odd member trusts the ensemble's CA: only its own certificate is wrong
    odd = Stores(made[cert].key_store, made["m1"].trust_store)
    kinds = {1: "zookeeper", 2: "trizk", 3: kind}
    with _tls_ensemble(kinds, {1: made["m1"], 2: made["m2"], 3: odd}) as ens:
        ens.wait_serving(members=[1, 2])
        zk = client(ens.hosts([1, 2]))
        try:
            zk.create("/secured", b"x")
        finally:
            zk.stop()
            zk.close()
        # the odd member retries with the election's backoff (notification timeouts double up
        # to 60 s), so a loaded machine may take a while to show both kinds' refusals
        deadline = time.monotonic() + 180
        pattern = re.compile(r"Refused the TLS connection of quorum peer /127\.0\.0\.1 .*")
        while True:
            trizk_lines = [ln for ln in _log(ens, 2).splitlines() if pattern.search(ln)]
            if trizk_lines and words in _log(ens, 1):
                break
            assert time.monotonic() < deadline, (trizk_lines, words in _log(ens, 1), ens.tails())
            time.sleep(0.2)  # polling interval of a bounded wait for log lines
        # trizk: one line per refused connection naming why; no traceback
        assert all(words in ln for ln in trizk_lines), trizk_lines
        assert "Traceback" not in _log(ens, 2)
        # ZooKeeper refused it for the same reason (its exception's message in its log)
        assert words in _log(ens, 1)
        # the odd member never joins
        assert ens.mode(3) == ""
        print(f"\ntrizk: {trizk_lines[0]}")
        java = [ln for ln in _log(ens, 1).splitlines() if words in ln]
        print(f"ZooKeeper: {java[0]}")


@pytest.mark.oracle
def test_rolling_switch_to_tls_with_port_unification(tmp_path: Path) -> None:
    require_zookeeper()
    kinds = {1: "zookeeper", 2: "trizk", 3: "trizk"}
    made = make_stores(tmp_path, "ca", [f"m{s}" for s in kinds])
    stores = {s: made[f"m{s}"] for s in kinds}
    # the stores are configured from the start; TLS is off
    with _tls_ensemble(kinds, stores, sslQuorum="false") as ens:
        ens.wait_serving()
        written: list[str] = []

        def write(tag: str) -> None:
            zk = client(ens.hosts())
            try:
                zk.create(f"/{tag}", tag.encode())
            finally:
                zk.stop()
                zk.close()
            written.append(f"/{tag}")

        write("plain")
        for step, keys in enumerate(
            [{"portUnification": "true"}, {"sslQuorum": "true"}, {"portUnification": "false"}]
        ):
            for sid in kinds:
                ens.stop(sid)
                set_keys(ens, sid, keys)
                ens.start(sid)
                ens.wait_serving()
                write(f"step{step}-m{sid}")
        final = assert_identical(ens)
        assert [p for p in written if p not in final] == []
        # the ensemble now runs over TLS only: every member opened TLS links
        for sid in kinds:
            text = _log(ens, sid)
            assert re.search(r"SSL handshake complete|Accepted TLS connection", text), ens.tails()


def _docs_example() -> str:
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("\n### Quorum TLS\n") :]
    section = section[: section.index("\n## ", 1)]
    (example,) = [body for lang, body in fenced(section) if lang == "properties"]
    return example


def _java_stores(directory: Path, pem: Stores, password: bytes) -> None:
    """/etc/zookeeper/ssl of the example from one member's PEM stores: quorum.jks (PKCS12
    bytes, as Java 17's keytool writes under that name), truststore.jks, keystore.pass."""
    directory.mkdir(parents=True)
    data = pem.key_store.read_bytes()
    key = serialization.load_pem_private_key(data, None)
    chain = x509.load_pem_x509_certificates(data)
    ca = x509.load_pem_x509_certificates(pem.trust_store.read_bytes())
    (directory / "quorum.jks").write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"member",
            key,  # type: ignore[arg-type]
            chain[0],
            chain[1:],
            serialization.BestAvailableEncryption(password),
        )
    )
    (directory / "truststore.jks").write_bytes(
        pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(c, b"ca") for c in ca],
            serialization.BestAvailableEncryption(password),
        )
    )
    (directory / "keystore.pass").write_text(password.decode() + "\n")


def test_the_docs_example_runs(tmp_path: Path) -> None:
    example = _docs_example()
    kinds = {1: "zookeeper" if zookeeper_available() else "trizk", 2: "trizk", 3: "trizk"}
    made = make_stores(tmp_path / "pem", "ca", [f"m{s}" for s in kinds])
    ens = ProcessEnsemble(kinds, start=False)
    with ens:
        for sid in kinds:
            ssl_dir = tmp_path / f"m{sid}-ssl"
            _java_stores(ssl_dir, made[f"m{sid}"], b"changeit")
            text = example.replace("/etc/zookeeper/ssl", str(ssl_dir))
            keys = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            set_keys(ens, sid, keys)
        for sid in kinds:
            ens.start(sid)
        ens.wait_leader(3)
        zk = client(ens.hosts())
        try:
            zk.create("/over-tls", b"x")
        finally:
            zk.stop()
            zk.close()
        assert "/over-tls" in assert_identical(ens)
        for sid in kinds:
            text = _log(ens, sid)
            assert re.search(r"SSL handshake complete|Accepted TLS connection", text), ens.tails()


@pytest.mark.oracle
def test_a_member_whose_key_store_is_replaced_joins_without_a_restart(tmp_path: Path) -> None:
    """sslQuorumReloadCertFiles=true: member 3 starts with another CA's certificate (refused by
    the ZooKeeper and the trizk member); its key store file is replaced by one the ensemble
    trusts, and its next connections present the new certificate: it joins, not restarted."""
    require_zookeeper()
    made = make_stores(tmp_path, "ca", ["m1", "m2", "m3"])
    made |= make_stores(tmp_path, "otherca", ["rogue"])
    key_store = tmp_path / "member3.pem"
    shutil.copy(made["rogue"].key_store, key_store)
    kinds = {1: "zookeeper", 2: "trizk", 3: "trizk"}
    stores = {1: made["m1"], 2: made["m2"], 3: Stores(key_store, made["m3"].trust_store)}
    with _tls_ensemble(kinds, stores, sslQuorumReloadCertFiles="true") as ens:
        ens.wait_serving(members=[1, 2])
        assert ens.mode(3) == ""
        shutil.copy(made["m3"].key_store, key_store)
        ens.wait_serving()
        assert ens.running(3)
        assert "Reloaded the quorum TLS stores" in _log(ens, 3)
        assert_identical(ens)
