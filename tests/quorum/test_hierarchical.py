"""Hierarchical quorums (``group.G=...``, ``weight.S=...``): trizk's QuorumHierarchical against
ZooKeeper's.

* Golden: 150 seeded configs and 5 broken ones answered by Apache ZooKeeper 3.8.0's own
  ``QuorumHierarchical`` class (tests/quorum/capture_hierarchical_golden.py): ``toString()``
  byte for byte, ``containsQuorum`` of 12 sets of participants each, and the error texts.
* Live: the config string a 3.8.0 ensemble with groups, weights (one of 0) and an observer
  showed in ``/zookeeper/config`` (read with zkCli.sh).
* Properties: the fast predicate equals an obviously correct one, any two quorums share a
  member of non-zero weight, a superset of a quorum is a quorum.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.quorum.election.election import ElectionView, FastLeaderElection
from trizk.quorum.verifier import (
    Address,
    LearnerType,
    QuorumConfigError,
    QuorumHierarchical,
    QuorumServer,
    QuorumVerifier,
    parse_config_string,
)
from trizk.server.config.zoocfg import ConfigError, parse_config

DATA = Path(__file__).parents[1] / "data" / "quorum"
GOLDEN = json.loads((DATA / "hierarchical_golden.json").read_text())


def entries(config: str) -> list[tuple[str, str]]:
    return [tuple(line.split("=", 1)) for line in config.splitlines()]  # type: ignore[misc]


# ids by position: str hashes differ between processes (xdist workers must agree)
@pytest.mark.parametrize("case", GOLDEN, ids=[f"case{i}" for i in range(len(GOLDEN))])
def test_as_zookeepers_quorum_hierarchical(case: dict[str, object]) -> None:
    config = str(case["config"])
    if "error" in case:
        with pytest.raises(QuorumConfigError) as e:
            QuorumVerifier.from_properties(entries(config))
        assert str(e.value) == str(case["error"]).split(": ", 1)[1]
        return
    qv = QuorumVerifier.from_properties(entries(config))
    assert isinstance(qv, QuorumHierarchical)
    assert qv.to_string() == case["to_string"]
    for sids, expected in case["quorums"]:  # type: ignore[attr-defined]
        assert qv.contains_quorum(sids) is expected, (sids, config)
    # what a peer sends parses back to the same verifier (its text may list sids of one
    # HashMap bin in another order: the insertion order is the Properties' order, as in Java)
    assert parse_config_string(qv.to_string()) == qv


def test_golden_covers_the_interesting_cases() -> None:
    ok = [c for c in GOLDEN if "to_string" in c]
    assert len(ok) >= 150
    assert any("=0\n" in str(c["to_string"]) for c in ok)  # weight 0
    assert any(":observer" in str(c["to_string"]) for c in ok)
    answers = [q[1] for c in ok for q in c["quorums"]]
    assert 0.2 < sum(answers) / len(answers) < 0.8


#: /zookeeper/config of a live ZooKeeper 3.8.0 ensemble (zkCli.sh get) for these zoo.cfg lines
LIVE_CFG = """\
tickTime=200
initLimit=10
syncLimit=5
dataDir=/tmp/d1
clientPort=45719
server.1=127.0.0.1:45865:46601
server.2=127.0.0.1:44561:35203
server.3=127.0.0.1:53889:38433
server.4=127.0.0.1:45111:44225:observer
group.2=3
group.1=2:1
weight.1=2
weight.3=0
weight.2=1
"""
LIVE_CONFIG = """\
server.1=127.0.0.1:45865:46601:participant
server.2=127.0.0.1:44561:35203:participant
server.3=127.0.0.1:53889:38433:participant
server.4=127.0.0.1:45111:44225:observer
group.1=1:2
group.2=3
weight.1=2
weight.2=1
weight.3=0
version=0"""


def test_zoo_cfg_with_groups_prints_as_live_zookeeper() -> None:
    c = parse_config(LIVE_CFG, myid="1")
    qv = c.quorum
    assert isinstance(qv, QuorumHierarchical)
    assert qv.to_string() == LIVE_CONFIG
    assert "group.1" not in " ".join(c.unsupported)
    # group 2 weighs 0: one group counts, and in it server 1 alone (2 of 3) is a quorum;
    # ZooKeeper elected server 2 (server 3 has weight 0 and never leads)
    assert qv.num_groups == 1
    assert qv.contains_quorum({1}) and not qv.contains_quorum({2, 3, 4})
    assert qv.weight(3) == 0 and qv.weight(1) == 2


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("group.1=1:2\n", "Server 3is not in a group"),
        ("group.1=1:2:3\ngroup.2=3\n", "Server 3is in multiple groups"),
        ("group.1=1:2:3\nweight.2=-1\n", "weight.2=-1: a weight must not be negative"),
        ("group.1=1:2:3:4\n", "server 4 of group.1 has no weight"),
        ("group.1=1:2:3\nweight.x=1\n", 'For input string: "x"'),
    ],
)
def test_bad_groups_and_weights_are_config_errors(lines: str, message: str) -> None:
    text = (
        "dataDir=/d\nclientPort=2181\ninitLimit=5\nsyncLimit=2\n"
        "server.1=127.0.0.1:1:2\nserver.2=127.0.0.1:3:4\nserver.3=127.0.0.1:5:6\n"
        "server.4=127.0.0.1:7:8:observer\n" + lines
    )
    with pytest.raises(ConfigError) as e:
        parse_config(text, myid="1")
    assert message in str(e.value)


# -- properties -------------------------------------------------------------------------------


def reference(groups: dict[int, dict[int, int]], sids: set[int]) -> bool:
    """The rule as the ZooKeeper docs state it, written plainly: more than half of the
    groups that weigh something have more than half of their weight in ``sids``."""
    heavy = [g for g in groups.values() if sum(g.values()) > 0]
    won = [g for g in heavy if 2 * sum(w for s, w in g.items() if s in sids) > sum(g.values())]
    return 2 * len(won) > len(heavy)


layouts = st.lists(
    st.dictionaries(st.integers(0, 3), st.integers(0, 4), min_size=1, max_size=4),
    min_size=1,
    max_size=4,
)


def build(layout: list[dict[int, int]]) -> tuple[QuorumHierarchical, dict[int, dict[int, int]]]:
    groups: dict[int, dict[int, int]] = {}
    members = []
    weights = []
    sid = 0
    for gid, group in enumerate(layout, start=1):
        groups[gid] = {}
        for w in group.values():
            sid += 1
            groups[gid][sid] = w
            weights.append((sid, w))
            members.append(QuorumServer(sid, Address("h", 2 * sid), Address("h", 2 * sid + 1)))
    qv = QuorumHierarchical(members, [(g, list(m)) for g, m in groups.items()], weights, version=0)
    return qv, groups


@settings(max_examples=examples(300), deadline=None)
@given(layouts, st.data())
def test_predicate_equals_the_reference(layout: list[dict[int, int]], data: st.DataObject) -> None:
    qv, groups = build(layout)
    everyone = sorted(qv.members)
    sids = set(data.draw(st.lists(st.sampled_from(everyone), unique=True)))
    assert qv.contains_quorum(sids) is reference(groups, sids)


@settings(max_examples=examples(300), deadline=None)
@given(layouts, st.data())
def test_quorums_intersect_and_grow(layout: list[dict[int, int]], data: st.DataObject) -> None:
    qv, _ = build(layout)
    everyone = sorted(qv.members)
    a = set(data.draw(st.lists(st.sampled_from(everyone), unique=True)))
    b = set(data.draw(st.lists(st.sampled_from(everyone), unique=True)))
    if qv.contains_quorum(a) and qv.contains_quorum(b):
        assert any(qv.weight(s) > 0 for s in a & b)
    if qv.contains_quorum(a):
        assert qv.contains_quorum(a | b)


def test_observers_and_non_members_never_count() -> None:
    members = [
        QuorumServer(1, Address("h", 1), Address("h", 2)),
        QuorumServer(2, Address("h", 3), Address("h", 4)),
        QuorumServer(3, Address("h", 5), Address("h", 6), LearnerType.OBSERVER),
    ]
    qv = QuorumHierarchical(members, [(1, [1, 2])], [(3, 5)])
    assert qv.contains_quorum({1, 2}) and not qv.contains_quorum({1, 3, 9})
    # an observer in a group weighs in its group's total as in Java (computeGroupWeight), but
    # its acks never count (Java's leader asks about voters only): 2 of 7 is no majority
    qv = QuorumHierarchical(members, [(1, [1, 2, 3])], [(3, 5)])
    assert not qv.contains_quorum({1, 2, 3})


# -- the election ---------------------------------------------------------------------------------


def test_a_member_of_weight_zero_never_leads() -> None:
    qv = QuorumVerifier.from_properties(entries(LIVE_CONFIG))
    view = ElectionView.from_verifier(qv)
    assert view.voters == {1, 2, 3}
    assert [view.weight(s) for s in (1, 2, 3, 4)] == [2, 1, 0, 0]
    fle = FastLeaderElection(1, view)
    # server 3 has the newest zxid but weight 0: no vote for it beats anything
    assert not fle.beats((3, 100, 5), (1, 0, 0))
    assert fle.beats((2, 0, 0), (1, 0, 0))
    # a quorum of votes: server 1 alone carries its group (the other group weighs 0)
    assert view.quorum({1}) and not view.quorum({2, 3})
