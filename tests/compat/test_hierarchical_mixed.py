"""The hierarchical-quorum scenario of tests/shell/test_hierarchical_ensemble.py with Apache
ZooKeeper members: servers 1 and 4 are ZooKeeper (3.8.0, or 3.9.3), the others trizk. So the
members that keep a quorum without a majority of the ensemble (4 and 5) are one ZooKeeper and
one trizk member, whichever leads; both kinds print the same ``/zookeeper/config``, and
ZooKeeper's members agree with trizk's on which sets are quorums."""

from __future__ import annotations

import pytest

from tests.shell.test_hierarchical_ensemble import HIERARCHY, OBSERVERS, run_scenario
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.servers import zookeeper_available


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.8.0", "3.9.3"])
def test_hierarchical_mixed_ensemble(version: str) -> None:
    if not zookeeper_available(version):
        pytest.skip(f"ZooKeeper {version} is not installed")
    kinds = {sid: "zookeeper" if sid in (1, 4) else "trizk" for sid in range(1, 7)}
    with ProcessEnsemble(
        kinds,
        observers=OBSERVERS,
        extra=HIERARCHY,
        versions={1: version, 4: version},
    ) as ens:
        run_scenario(ens)
