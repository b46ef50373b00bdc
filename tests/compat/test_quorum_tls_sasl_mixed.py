"""Quorum TLS and quorum SASL together in a mixed ensemble of real processes: an Apache
ZooKeeper 3.8.0 member beside two trizk members, every member with ``sslQuorum=true`` (its own
PEM key store from tests/shell/quorum_certs.py, one CA) AND the three ``quorum.auth.*`` keys
that require DIGEST-MD5 on both quorum ports (its JAAS file, as
tests/compat/test_quorum_sasl.py). As in ZooKeeper, the SASL exchange runs over the TLS link.

Under a trizk leader and write load the leader is SIGKILLed: writes resume under whichever
survivor wins FastLeaderElection (the one that logged the killed leader's last proposal, else
the higher sid; the test never assumes which), no acknowledged write is lost, and the killed
member rejoins over TLS, authenticating again. Both kinds' logs show TLS handshakes and SASL
authentications.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.compat.conftest import require_zookeeper
from tests.compat.test_ensembles import Writers
from tests.compat.test_quorum_sasl import REQUIRED, SaslEnsemble, jaas
from tests.ensemble_helpers import assert_identical
from tests.shell.quorum_certs import make_stores, quorum_tls_keys

pytestmark = [pytest.mark.oracle, pytest.mark.slow]

#: QuorumCnxManager / trizk when they open a TLS link, UnifiedServerSocket when it accepts one
TLS_LINE = re.compile(r"SSL handshake complete|Accepted TLS connection")
#: a learner's side of a quorum SASL exchange (SaslQuorumAuthLearner), both kinds
LEARNER_AUTH = "Successfully completed the authentication using SASL"
#: the server's side (SaslQuorumAuthServer), both kinds
SERVER_AUTH = "Successfully authenticated learner: authenticationID=learner"


def test_tls_and_sasl_mixed_ensemble_survives_leader_kill(tmp_path: Path) -> None:
    require_zookeeper()
    kinds = {1: "zookeeper", 2: "trizk", 3: "trizk"}
    made = make_stores(tmp_path, "ca", [f"m{s}" for s in kinds])
    with SaslEnsemble(kinds, {s: jaas() for s in kinds}, extra=REQUIRED) as ens:
        for sid in kinds:
            ens.set_keys(sid, quorum_tls_keys(made[f"m{sid}"]))
        for sid in kinds:
            ens.start(sid)
        ens.wait_leader(3)  # trizk 3 leads ZooKeeper 1 and trizk 2
        w = Writers(ens)
        try:
            w.wait_for(50)
            ens.kill(3)
            before = len(w.acked)
            w.wait_for(before + 50)  # writes resumed under the new leader
        finally:
            w.finish()
        modes = ens.wait_serving(members=[1, 2])
        # either survivor may lead (FastLeaderElection.totalOrderPredicate: higher zxid, then
        # higher sid): never assume which
        assert sorted(modes.values()) == ["follower", "leader"], modes
        final = assert_identical(ens)
        assert [p for p in w.acked if "/" + p.lstrip("/") not in final] == []
        ens.start(3)  # rejoins over TLS, authenticating to the new leader
        modes = ens.wait_serving()
        assert modes[3] == "follower", modes
        assert "/" + w.acked[-1].lstrip("/") in assert_identical(ens)
        for sid, kind in kinds.items():
            text = ens.log(sid)
            assert TLS_LINE.search(text), (sid, kind, ens.tails())
            assert LEARNER_AUTH in text, (sid, kind, ens.tails())
            if kind == "trizk":
                assert "Traceback" not in text, text[-3000:]
        # the server side of the exchange in both kinds: ZooKeeper 1 accepts the election
        # connections of the higher sids; trizk 3 accepted its learners while it led
        assert SERVER_AUTH in ens.log(1), ens.tails()
        assert SERVER_AUTH in ens.log(3), ens.tails()
