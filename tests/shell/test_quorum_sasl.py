"""Quorum SASL in a trizk ensemble (``trizk.testing.Ensemble``, members in this process,
reaching each other through link proxies): with DIGEST-MD5 required on both ports the members
authenticate each other on every election connection and every learner link, serve, and elect
again after the leader is killed; the mixed ensembles with ZooKeeper are in
tests/compat/test_quorum_sasl.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from trizk.testing import Ensemble

JAAS = """QuorumServer {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_learner="s3cret";
};
QuorumLearner {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="learner"
    password="s3cret";
};
"""
REQUIRED = {
    "quorum.auth.enableSasl": "true",
    "quorum.auth.learnerRequireSasl": "true",
    "quorum.auth.serverRequireSasl": "true",
}


def _write(hosts: str, path: str) -> None:
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=30)
    try:
        zk.create(path, b"x")
        zk.sync(path)
    finally:
        zk.stop()
        zk.close()


@pytest.mark.slow
def test_required_digest_ensemble(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    caplog.set_level(logging.INFO, logger="trizk.quorum.auth")
    with Ensemble(
        3, properties=REQUIRED, system_properties={"java.security.auth.login.config": str(jaas)}
    ) as ens:
        _write(ens.connect_string, "/a")
        leader = ens.leader()
        assert leader is not None
        ens.kill(leader)
        others = [s for s in ens.members if s != leader]
        ens.wait_for_quorum(members=others)
        _write(ens.hosts(others), "/b")
        ens.start_member(leader)
        ens.wait_for_quorum()
    text = caplog.text
    assert "Successfully authenticated learner: authenticationID=learner" in text
    assert "Successfully completed the authentication using SASL. learner addr" in text
    assert "Successfully completed the authentication using SASL. server addr" in text
    # no exchange failed (a killed member's connections may end mid-exchange: those lines
    # say EOF or a read timeout, as ZooKeeper's say EOFException or SocketTimeoutException)
    assert not [m for m in caplog.messages if "quorum SASL:" in m and "DIGEST-MD5" in m]


def test_enable_sasl_without_a_jaas_file_stops_the_start(tmp_path: Path) -> None:
    from trizk.server.auth.sasl import JaasError
    from trizk.server.config.zoocfg import ServerConfig
    from trizk.server.shell.ensemble import EnsembleSpec

    (tmp_path / "myid").write_text("1\n")
    config = ServerConfig.create(
        tmp_path,
        myid=1,
        clientPort=2181,
        initLimit=5,
        syncLimit=2,
        **{"server.1": "127.0.0.1:1:2", "server.2": "127.0.0.1:3:4", **REQUIRED},
    )
    with pytest.raises(JaasError, match="no JAAS configuration is given"):
        EnsembleSpec.from_config(config)
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS.replace("QuorumLearner", "Elsewhere"))
    config = config.replace(properties={"java.security.auth.login.config": str(jaas)})
    with pytest.raises(JaasError, match="section 'QuorumLearner' could not be found"):
        EnsembleSpec.from_config(config)


@pytest.mark.slow
def test_required_digest_with_an_observer(tmp_path: Path) -> None:
    """An observer (the highest sid) authenticates to the voters on the election port (only
    voters are authenticated to: ``getVotingView``) and to the leader on the quorum port."""
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    with Ensemble(
        3,
        observers=1,
        properties=REQUIRED,
        system_properties={"java.security.auth.login.config": str(jaas)},
    ) as ens:
        observer = ens.observers[0]
        assert ens.mode_of(observer) == "observer"
        _write(ens.hosts([observer]), "/through-the-observer")


@pytest.mark.parametrize(
    ("keys", "code", "message"),
    [
        # QuorumPeerConfig's IllegalArgumentException: an invalid config (exit 2)
        (
            {"quorum.auth.serverRequireSasl": "true"},
            2,
            "quorum.auth.enableSasl is disabled, so cannot enable quorum.auth.serverRequireSasl",
        ),
        ({"quorum.auth.enableSasl": "yes"}, 2, "Invalid option yes for quorum.auth.enableSasl"),
        # enableSasl with no JAAS section to log in with: the start fails (exit 1)
        (REQUIRED, 1, "section 'QuorumServer' could not be found"),
    ],
)
def test_start_up_errors_are_one_line(
    tmp_path: Path, keys: dict[str, str], code: int, message: str
) -> None:
    from tests.config.test_startup_errors import problems, run_server
    from trizk.testing.ports import free_port

    data = tmp_path / "data"
    data.mkdir()
    (data / "myid").write_text("1\n")
    ports = [free_port() for _ in range(7)]
    servers = "".join(
        f"server.{i}=127.0.0.1:{ports[2 * i - 1]}:{ports[2 * i]}\n" for i in (1, 2, 3)
    )
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        f"tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir={data}\nclientPort={ports[0]}\n"
        + servers
        + "".join(f"{k}={v}\n" for k, v in keys.items())
    )
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS.replace("QuorumServer", "Server"))
    done = run_server(cfg, "-D", f"java.security.auth.login.config={jaas}")
    assert done.returncode == code, done.stderr
    (line,) = problems(done.stderr)
    assert message in line, line


@pytest.mark.slow
@pytest.mark.parametrize("learner_required", [False, True])
def test_rolling_steps_in_process(tmp_path: Path, learner_required: bool) -> None:
    """``enableSasl=true`` with nothing required: no member authenticates, every server peeks
    at the first 8 bytes and lets the learner through (the bytes read again by the link);
    then ``learnerRequireSasl=true``: every member authenticates to servers that do not
    require it."""
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    keys = {"quorum.auth.enableSasl": "true"}
    if learner_required:
        keys["quorum.auth.learnerRequireSasl"] = "true"
    with Ensemble(
        3, properties=keys, system_properties={"java.security.auth.login.config": str(jaas)}
    ) as ens:
        follower = next(s for s in ens.members if s != ens.leader())
        _write(ens.hosts([follower]), "/rolling")
