"""Partitions of chosen links in real process ensembles: every member reaches every other
through the link proxies of trizk.testing.linkproxy (no root needed), and the test cuts links.

* A follower that loses only its link to the leader (it still reaches the other follower)
  stops serving -- the other follower's FOLLOWING vote alone does not let it follow a leader it
  cannot hear -- while the majority carries on; after the heal it rejoins and catches up.
* A leader cut off from both followers stops serving; the followers elect a new leader and take
  writes; after the heal every member agrees, tree for tree.

The second runs with three trizk members and with an Apache ZooKeeper member among two trizk
ones (per-member server lines are fine for ZooKeeper: see trizk.testing.linkproxy); when the trizk
member 3 leads first, as it usually does, the ZooKeeper member leads the new epoch and the old
leader rejoins it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tests.ensemble_helpers import DEADLINE, assert_identical, client
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.servers import zookeeper_available
from trizk.testing.linkproxy import LinkNet

TRIZK = {1: "trizk", 2: "trizk", 3: "trizk"}
MIXED = {1: "trizk", 2: "zookeeper", 3: "trizk"}


def _needs(kinds: dict[int, str], release: str | None = None) -> None:
    if "zookeeper" in kinds.values() and not zookeeper_available(*filter(None, [release])):
        pytest.skip(f"Apache ZooKeeper {release or ''} is not installed")


def _until(cond: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)  # polling interval of a bounded wait


@contextmanager
def _ensemble(
    kinds: dict[int, str], release: str | None = None
) -> Iterator[tuple[ProcessEnsemble, LinkNet, int]]:
    """A serving ensemble behind link proxies, its proxies and its leader; ``release``: every
    member's ZooKeeper release (the one trizk members answer as too), by default the default
    one (3.9.3)."""
    _needs(kinds, release)
    versions = dict.fromkeys(kinds, release) if release else None
    with ProcessEnsemble(kinds, links=True, versions=versions) as ens:
        assert ens.links is not None
        ens.wait_serving(DEADLINE)
        leader = ens.leader()
        assert leader is not None
        yield ens, ens.links, leader


def _write(ens: ProcessEnsemble, sids: list[int], path: str) -> None:
    zk = client(ens.hosts(sids))
    try:
        zk.create(path, path.encode())
    finally:
        zk.stop()
        zk.close()


def _agree(ens: ProcessEnsemble, *paths: str) -> None:
    modes = ens.wait_serving(DEADLINE)
    assert list(modes.values()).count("leader") == 1
    final = assert_identical(ens)
    for p in paths:
        assert p in final, f"{p} lost"


def test_follower_cut_from_the_leader_only_stops_serving_and_rejoins() -> None:
    kinds = TRIZK
    with _ensemble(kinds) as (ens, links, leader):
        cut, other = (s for s in kinds if s != leader)
        _write(ens, list(kinds), "/before")
        links.cut(cut, leader)
        _until(lambda: ens.mode(cut) == "", f"member {cut} stops serving")
        assert ens.mode(leader) == "leader" and ens.mode(other) == "follower"
        _write(ens, [leader, other], "/during")
        # it still hears the other follower, yet stays out: no LEADING vote from the leader
        assert ens.mode(cut) == ""
        links.heal()
        _agree(ens, "/before", "/during")
        assert ens.leader() == leader


@pytest.mark.parametrize(
    ("kinds", "release"),
    [(TRIZK, None), (MIXED, None), (MIXED, "3.8.0")],
    ids=["3-trizk", "mixed", "mixed-3.8.0"],
)
def test_isolated_leader_stops_majority_elects_heal_agrees(
    kinds: dict[int, str], release: str | None
) -> None:
    """``mixed``: a ZooKeeper 3.9.3 member (the default release) beside trizk members;
    ``mixed-3.8.0``: ZooKeeper 3.8.0 and trizk at 3.8.0."""
    with _ensemble(kinds, release) as (ens, links, old):
        majority = [s for s in kinds if s != old]
        _write(ens, list(kinds), "/before")
        links.isolate(old)
        modes = ens.wait_serving(DEADLINE, members=majority)
        assert sorted(modes.values()) == ["follower", "leader"]
        _until(lambda: ens.mode(old) == "", "the old leader stops serving")
        _write(ens, majority, "/during")
        links.heal()
        _agree(ens, "/before", "/during")
        assert ens.mode(old) == "follower"
