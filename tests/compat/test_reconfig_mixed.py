"""The reconfig scenario of tests/shell/test_reconfig_ensemble.py (refusals; a follower removed
and added back; the leader removed; the membership set back non-incrementally; every voter
showing one ``/zookeeper/config`` and every write) on a ZooKeeper 3.8.0 ensemble -- the
reference -- and on mixed ensembles: ZooKeeper members following a trizk leader, trizk members
following a ZooKeeper leader (sids 2 and 3 of one kind, one of them leads a fresh ensemble)."""

from __future__ import annotations

import pytest

from tests.compat.conftest import require_zookeeper
from tests.shell.test_reconfig_ensemble import EXTRA, line, run_scenario
from trizk.compat.procs.ensemble import ProcessEnsemble


@pytest.mark.slow
@pytest.mark.parametrize(
    "kinds",
    ["zookeeper,zookeeper,zookeeper", "zookeeper,trizk,trizk", "trizk,zookeeper,zookeeper"],
    ids=["zookeeper", "trizk-leader", "zookeeper-leader"],
)
def test_reconfig_scenario(kinds: str) -> None:
    require_zookeeper()
    members = dict(enumerate(kinds.split(","), 1))
    with ProcessEnsemble(members, extra=EXTRA) as ens:
        seen = run_scenario(ens)
        assert seen["refusals"] == "ok" and seen["final version"]
        assert seen["final lines"] == sorted(line(ens, s) for s in members)
