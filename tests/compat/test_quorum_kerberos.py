"""Quorum Kerberos (SASL GSSAPI between members) against a throwaway MIT KDC on loopback
(:class:`trizk.testing.kdc.LocalKdc`), the JAAS sections ZooKeeper's documentation shows:
``QuorumServer`` logs in as the service ``zkquorum/localhost`` (the default
``quorum.auth.kerberos.servicePrincipal``), ``QuorumLearner`` as ``learner/127.0.0.1``, whose host
must be one of the ensemble's server lines (``SaslQuorumServerCallbackHandler``).

* trizk members alone, then a ZooKeeper 3.8.0 member beside them (its JVM against the same KDC),
  all with ``learnerRequireSasl`` and ``serverRequireSasl``: the ensemble forms under a trizk
  and under a Java leader;
* a learner whose principal names a host outside the ensemble is refused (ZooKeeper's
  "is not authorized to connect");
* a missing keytab stops a trizk member with one line.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import require_zookeeper
from tests.compat.test_quorum_sasl import REQUIRED, SaslEnsemble, doc_blocks, doc_keys
from tests.ensemble_helpers import assert_identical, client, wait_caught_up
from trizk.testing.ports import free_port
from trizk.testing.processes import Member

pytestmark = pytest.mark.slow

kdcmod = pytest.importorskip("trizk.testing.kdc")
if kdcmod.available() is not None:
    pytest.skip(str(kdcmod.available()), allow_module_level=True)
pytest.importorskip("gssapi", reason="python-gssapi (pip install gssapi) is not installed")

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def jaas(
    keytab: Path,
    realm: str,
    learner: str = "learner/127.0.0.1",
    service: str = "zkquorum/localhost",
) -> str:
    return f"""QuorumServer {{
    {KRB5} required
    useKeyTab=true
    keyTab="{keytab}"
    storeKey=true
    useTicketCache=false
    principal="{service}@{realm}";
}};
QuorumLearner {{
    {KRB5} required
    useKeyTab=true
    keyTab="{keytab}"
    storeKey=true
    useTicketCache=false
    principal="{learner}@{realm}";
}};
"""


class KerberosEnsemble(SaslEnsemble):
    """Members that also get the realm's krb5.conf (``-Djava.security.krb5.conf``)."""

    def __init__(self, kinds: Mapping[int, str], jaas: Mapping[int, str], krb5: Path, **kw: Any):
        self.krb5 = krb5
        super().__init__(kinds, jaas, **kw)

    def command(self, m: Member) -> list[str]:
        cmd = super().command(m)
        if m.kind == "zookeeper":
            return [cmd[0], f"-Djava.security.krb5.conf={self.krb5}", *cmd[1:]]
        return [*cmd, "-D", f"java.security.krb5.conf={self.krb5}"]


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[kdcmod.LocalKdc, Path]]:
    d = tmp_path_factory.mktemp("quorum-realm")
    kdc = kdcmod.LocalKdc(d)
    keytab = d / "quorum.keytab"
    with kdc, pytest.MonkeyPatch.context() as mp:
        for k, v in kdc.env().items():
            mp.setenv(k, v)
        kdc.add_principal("zkquorum/localhost", keytab)
        kdc.add_principal("zkquorum/127.0.0.1", keytab)
        kdc.add_principal("learner/127.0.0.1", keytab)
        kdc.add_principal("learner/otherhost", keytab)
        yield kdc, keytab


def _serve_and_write(ens: SaslEnsemble, leader: int, name: str) -> None:
    modes = ens.wait_leader(leader)
    assert list(modes.values()).count("leader") == 1, modes
    zk = client(ens.hosts())
    try:
        zk.create(f"/{name}", b"k")
    finally:
        zk.stop()
        zk.close()
    assert f"/{name}" in assert_identical(ens)


@pytest.mark.parametrize("kinds", ["trizk", "mixed"])
@pytest.mark.parametrize("host", ["localhost", "_HOST"])
def test_quorum_kerberos(realm: tuple[kdcmod.LocalKdc, Path], kinds: str, host: str) -> None:
    """``localhost``: every member is ``zkquorum/localhost``, the default service principal;
    ``_HOST``: each member serves as ``zkquorum/<its server line's host>`` and learners ask
    for ``quorum.auth.kerberos.servicePrincipal=zkquorum/_HOST``."""
    kdc, keytab = realm
    members = {1: "trizk", 2: "trizk", 3: "trizk"}
    if kinds == "mixed":
        require_zookeeper()
        members[2] = "zookeeper"
    extra = dict(REQUIRED)
    service = "zkquorum/localhost"
    if host == "_HOST":
        extra["quorum.auth.kerberos.servicePrincipal"] = "zkquorum/_HOST"
        service = "zkquorum/127.0.0.1"
    files = {s: jaas(keytab, kdc.realm, service=service) for s in members}
    with KerberosEnsemble(members, files, kdc.krb5_conf, extra=extra) as ens:
        for sid in members:
            ens.start(sid)
        _serve_and_write(ens, 3, "under3")
        # equal last zxids (the election's), so the higher sid of the survivors leads: a
        # ZooKeeper leader in the mixed ensemble
        wait_caught_up(ens)
        ens.kill(3)
        modes = ens.wait_serving()
        assert modes[2] == "leader", modes
        ens.start(3)
        modes = ens.wait_serving()
        assert modes[3] == "follower"
        assert "/under3" in assert_identical(ens)
        for sid, m in members.items():
            log = ens.log(sid)
            if m == "trizk":
                assert "Traceback" not in log
                assert "QuorumLearner will use GSSAPI as SASL mechanism." in log
            assert (
                "Successfully authenticated learner: authenticationID="
                f"learner/127.0.0.1@{kdc.realm};  authorizationID=learner/127.0.0.1@{kdc.realm}"
            ) in log, log[-3000:]


@pytest.mark.parametrize("bad", ["trizk", "zookeeper"])
def test_learner_from_a_foreign_host_is_not_authorized(
    realm: tuple[kdcmod.LocalKdc, Path], bad: str
) -> None:
    kdc, keytab = realm
    require_zookeeper()
    members = {1: "zookeeper", 2: "trizk", 3: bad}
    files = {s: jaas(keytab, kdc.realm) for s in members}
    files[3] = jaas(keytab, kdc.realm, learner="learner/otherhost")
    with KerberosEnsemble(members, files, kdc.krb5_conf, extra=REQUIRED) as ens:
        for sid in members:
            ens.start(sid)
        modes = ens.wait_serving(members=[1, 2])
        assert modes == {1: "follower", 2: "leader"}, modes
        line = (
            f"SASL authorization completed, learner/otherhost@{kdc.realm} is not authorized "
            "to connect"
        )
        deadline = time.monotonic() + 60
        while not (line in ens.log(1) and line in ens.log(2)):
            assert time.monotonic() < deadline, ens.log(1)[-4000:] + ens.log(2)[-4000:]
            time.sleep(0.2)  # polling interval of a bounded wait for the log lines
        assert ens.mode(3) == ""
        assert "Traceback" not in ens.log(2)


def test_missing_keytab_is_one_line(realm: tuple[kdcmod.LocalKdc, Path], tmp_path: Path) -> None:
    kdc, _ = realm
    data = tmp_path / "data"
    data.mkdir()
    (data / "myid").write_text("1\n")
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        f"tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={data}\nclientPort={free_port()}\n"
        "server.1=127.0.0.1:1:2\nserver.2=127.0.0.1:3:4\n"
        + "".join(f"{k}={v}\n" for k, v in REQUIRED.items())
    )
    jaas_file = tmp_path / "jaas.conf"
    jaas_file.write_text(jaas(tmp_path / "none.keytab", kdc.realm))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trizk.server",
            str(cfg),
            "-D",
            f"java.security.auth.login.config={jaas_file}",
            "-D",
            f"java.security.krb5.conf={kdc.krb5_conf}",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    out = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in out, out
    errors = [ln for ln in out.splitlines() if "ERROR" in ln]
    assert len(errors) == 1 and "none.keytab does not exist" in errors[0], out


def test_documented_example(realm: tuple[kdcmod.LocalKdc, Path]) -> None:
    """docs/operations.md's Kerberos JAAS file (this realm's names and keytab) with its zoo.cfg
    keys, in an ensemble of trizk members."""
    kdc, keytab = realm
    text = doc_blocks()["text"][1]
    assert KRB5 in text
    text = (
        text.replace("/etc/zookeeper/quorum.keytab", str(keytab))
        .replace("learner/zk1.example.com", "learner/127.0.0.1")
        .replace("EXAMPLE.COM", kdc.realm)
    )
    members = {1: "trizk", 2: "trizk", 3: "trizk"}
    with KerberosEnsemble(
        members, {s: text for s in members}, kdc.krb5_conf, extra=doc_keys()
    ) as ens:
        for sid in members:
            ens.start(sid)
        _serve_and_write(ens, 3, "documented")
        assert "QuorumLearner will use GSSAPI as SASL mechanism." in ens.log(1)
