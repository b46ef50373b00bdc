"""The reconfig scenario of tests/shell/test_reconfig_ensemble.py (refusals; a follower removed
and added back; the leader removed; the membership set back non-incrementally; every voter
showing one ``/zookeeper/config`` and every write) on a ZooKeeper 3.8.0 ensemble -- the
reference -- and on mixed ensembles: ZooKeeper members following a trizk leader, trizk members
following a ZooKeeper leader (sids 2 and 3 of one kind, one of them leads a fresh ensemble),
with ZooKeeper 3.8.0 and 3.9.3 members."""

from __future__ import annotations

import pytest

from tests.compat.conftest import require_zookeeper
from tests.shell.test_reconfig_ensemble import EXTRA, line, run_scenario
from trizk.compat.procs.ensemble import ProcessEnsemble


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kinds", "version"),
    [
        ("zookeeper,zookeeper,zookeeper", "3.8.0"),
        ("zookeeper,trizk,trizk", "3.8.0"),
        ("trizk,zookeeper,zookeeper", "3.8.0"),
        ("zookeeper,trizk,trizk", "3.9.3"),
        ("trizk,zookeeper,zookeeper", "3.9.3"),
    ],
    ids=[
        "zookeeper",
        "trizk-leader",
        "zookeeper-leader",
        "trizk-leader-3.9",
        "zookeeper-3.9-leader",
    ],
)
def test_reconfig_scenario(kinds: str, version: str) -> None:
    require_zookeeper(version)
    members = dict(enumerate(kinds.split(","), 1))
    versions = {s: version for s, k in members.items() if k == "zookeeper"}
    with ProcessEnsemble(members, extra=EXTRA, versions=versions) as ens:
        seen = run_scenario(ens)
        assert seen["refusals"] == "ok" and seen["final version"]
        assert seen["final lines"] == sorted(line(ens, s) for s in members)
