"""Quorum TLS and quorum SASL on one ensemble: TLS first, then SASL over it (as ZooKeeper)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.shell.quorum_certs import make_stores, quorum_tls_keys
from tests.shell.test_quorum_sasl import JAAS, REQUIRED, _write
from trizk.testing import Ensemble


def test_quorum_tls_and_sasl_together_survive_a_leader_kill(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stores = make_stores(tmp_path, "ca", ["m1", "m2", "m3"])
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    caplog.set_level(logging.INFO, logger="trizk.quorum.auth")
    with Ensemble(
        3,
        properties=REQUIRED,
        member_properties={i: quorum_tls_keys(stores[f"m{i}"]) for i in (1, 2, 3)},
        system_properties={"java.security.auth.login.config": str(jaas)},
    ) as ens:
        _write(ens.connect_string, "/x")
        leader = ens.leader()
        assert leader is not None
        ens.kill(leader)
        others = [s for s in ens.members if s != leader]
        ens.wait_for_quorum(members=others)
        _write(ens.hosts(others), "/y")
    assert "Successfully authenticated learner" in caplog.text
    assert "learner addr: server" in caplog.text
