"""Network partitions of real ensembles: members on test hosts in network namespaces
(compat/procs/netns.py; root only, skipped elsewhere), links cut and healed by the test.

The minority side stops serving (its members answer four-letter words with "not currently
serving" and refuse sessions); the majority elects a leader and carries on taking writes;
after the heal every member agrees, tree for tree -- for trizk ensembles of 3 and 5 members
and for a mixed one with an Apache ZooKeeper member.
"""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient

from tests.ensemble_helpers import DEADLINE, assert_identical
from trizk.compat.procs import netns
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.servers import zookeeper_available

pytestmark = pytest.mark.skipif(not netns.available(), reason="needs root and network namespaces")


def _serving_inside(lab: netns.NetnsLab, ens: ProcessEnsemble, sid: int) -> bool:
    """Whether member ``sid`` serves, asked from inside its own (cut off) host."""
    code = (
        "from trizk.testing.probes import four_letter;"
        f"print(repr(four_letter(2181, 'srvr', host={ens.host(sid)!r})))"
    )
    return "Mode: " in lab.run_python(sid, code)


def _write(ens: ProcessEnsemble, sids: list[int], path: str) -> None:
    zk = KazooClient(hosts=ens.hosts(sids), timeout=10)
    zk.start(timeout=DEADLINE)
    try:
        zk.create(path, b"p")
    finally:
        zk.stop()
        zk.close()


@pytest.mark.parametrize(
    ("kinds", "cut"),
    [
        ({1: "trizk", 2: "trizk", 3: "trizk"}, "leader"),
        ({i: "trizk" for i in range(1, 6)}, "leader+1"),
        ({1: "trizk", 2: "zookeeper", 3: "trizk"}, "leader"),
        ({1: "trizk", 2: "zookeeper", 3: "trizk"}, "leader@3.8.0"),
    ],
    ids=["3-trizk", "5-trizk", "mixed", "mixed-3.8.0"],
)
def test_minority_stops_majority_carries_on_heal_agrees(kinds: dict[int, str], cut: str) -> None:
    """``mixed``: a ZooKeeper member of the default release (3.9.3); ``mixed-3.8.0``: every
    member at 3.8.0 (ZooKeeper 3.8.0, trizk answering as 3.8.0)."""
    cut, _, release = cut.partition("@")
    if "zookeeper" in kinds.values() and not zookeeper_available(*filter(None, [release])):
        pytest.skip(f"Apache ZooKeeper {release} is not installed")
    versions = dict.fromkeys(kinds, release) if release else None
    with (
        netns.NetnsLab(len(kinds)) as lab,
        ProcessEnsemble(kinds, lab=lab, versions=versions) as ens,
    ):
        ens.wait_serving()
        leader = ens.leader()
        assert leader is not None
        minority = [leader]
        if cut == "leader+1":
            minority.append(next(s for s in kinds if s != leader))
        majority = [s for s in kinds if s not in minority]
        _write(ens, list(kinds), "/before")
        for s in minority:
            lab.cut(s)
        modes = ens.wait_serving(DEADLINE, members=majority)
        assert list(modes.values()).count("leader") == 1
        _write(ens, majority, "/during")
        deadline = time.monotonic() + DEADLINE
        while any(_serving_inside(lab, ens, s) for s in minority):
            assert time.monotonic() < deadline, "the minority kept serving"
            time.sleep(0.1)  # polling interval of a bounded wait
        for s in minority:
            lab.heal(s)
        ens.wait_serving(DEADLINE)
        final = assert_identical(ens)
        assert "/before" in final and "/during" in final
