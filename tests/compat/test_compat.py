"""The compatibility suite in CI: scenarios on real ZooKeeper and on trizk, compared.

* Pure cores first (no servers): the normaliser's rules (session labels, rank-mapped zxids that
  keep relative order, times), the diff's alignment, the grammar's determinism and the shrinker.
* ``test_oracle_vs_oracle``: every scenario of the fast subset (``"ci": true``) on two fresh
  ZooKeeper servers must give 0 differences: the proof that the normaliser is fair. Each test
  also checks that replies were actually compared (a transcript of nothing cannot pass).
* ``test_trizk_vs_oracle``: the same scenarios on trizk against ZooKeeper. A scenario marked
  ``trizk_xfail`` in its data is a *strict* xfail: when trizk starts passing it, the test fails
  until the mark is removed, so no test here is unable to fail.

* The oracle is ZooKeeper 3.9.3 (``servers.DEFAULT_VERSION``; trizk answers as it by default);
  ``test_against_zookeeper38`` runs a subset against ZooKeeper 3.8.0 with trizk at 3.8.0.

* Random mode: two short seeded runs of ZooKeeper against ZooKeeper (0 differences) and of
  trizk against ZooKeeper; and an injected difference (a tampered transcript) that must be
  found, shrunk to a few steps and reproduced on fresh servers.

Oracle transcripts are computed once per test session and shared by both comparisons.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests import seeds
from tests.compat.conftest import require_trizk_version
from trizk.compat.oracle import compare, conformance
from trizk.compat.oracle.normalise import normalise
from trizk.compat.oracle.randomgen import generate, shrink
from trizk.compat.procs import servers
from trizk.compat.run import run_random

SCENARIOS = compare.load_scenarios()
CI_SCENARIOS = [sc for sc in SCENARIOS if sc.get("ci")]
_ORACLE: dict[str, Any] = {}


def oracle_transcript(sc: dict[str, Any]) -> Any:
    if sc["name"] not in _ORACLE:
        _ORACLE[sc["name"]] = normalise(compare.run_on("zookeeper", sc))
    return _ORACLE[sc["name"]]


def _replies(t: Any) -> int:
    return sum(1 for entries in t.values() for e in entries if e.get("kind") == "reply")


# ----------------------------------------------------------------------------- pure cores


def _t(*entries: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {"A": [dict(e) for e in entries]}


def test_normalise_labels_sessions_times_and_ranks_zxids() -> None:
    t = _t(
        {"kind": "connect", "sessionId": 0x1000, "timeOut": 30000},
        {
            "kind": "reply",
            "zxid": 900,
            "body": {
                "stat": {
                    "czxid": 700,
                    "mzxid": 900,
                    "ctime": 123456,
                    "mtime": 0,
                    "ephemeralOwner": 0x1000,
                    "pzxid": 0,
                }
            },
        },
        {"kind": "event", "zxid": -1},
    )
    n = normalise(t)["A"]
    assert n[0]["sessionId"] == "S1"
    stat = n[1]["body"]["stat"]
    assert (stat["czxid"], stat["mzxid"], n[1]["zxid"]) == ("Z1", "Z2", "Z2")
    assert (stat["ctime"], stat["mtime"], stat["ephemeralOwner"], stat["pzxid"]) == (
        "T",
        0,
        "S1",
        0,
    )
    assert n[2]["zxid"] == -1


def test_normalise_lets_the_close_overtake_an_unimplemented_reply() -> None:
    """ZooKeeper 3.9.3's close after its UNIMPLEMENTED reply to a standalone check can overtake
    the reply: both orders normalise alike; any other reply before a close is kept."""
    replied = _t(
        {"kind": "reply", "op": "CHECK", "step": 22, "xid": 23, "zxid": -1, "err": "UNIMPLEMENTED"},
        {"kind": "closed", "step": 23},
    )
    closed = _t({"kind": "closed", "step": 22})
    assert normalise(replied) == normalise(closed) == closed
    pinged = _t(
        {"kind": "reply", "op": "CHECK", "step": 22, "xid": 23, "zxid": -1, "err": "UNIMPLEMENTED"},
        {"kind": "reply", "op": "PING", "step": 23, "xid": -2, "zxid": 21, "err": "OK"},
        {"kind": "closed", "step": 23},
    )
    assert normalise(pinged) == closed
    other = _t(
        {"kind": "reply", "op": "CHECK", "step": 22, "xid": 23, "zxid": -1, "err": "NONODE"},
        {"kind": "closed", "step": 23},
    )
    assert normalise(other) == other


def test_normalise_keeps_relative_zxid_order() -> None:
    # Same equality pattern, different order of two zxids: must not normalise equal.
    a = _t({"kind": "reply", "zxid": 5}, {"kind": "reply", "zxid": 9})
    b = _t({"kind": "reply", "zxid": 50}, {"kind": "reply", "zxid": 90})
    c = _t({"kind": "reply", "zxid": 90}, {"kind": "reply", "zxid": 50})
    assert normalise(a) == normalise(b)
    assert normalise(a) != normalise(c)


def test_normalise_children_order_is_significant_unless_sorted() -> None:
    a = _t({"kind": "reply", "body": {"children": ["b", "a"]}})
    b = _t({"kind": "reply", "body": {"children": ["a", "b"]}})
    assert normalise(a) != normalise(b)
    assert normalise(a, sort_children=True) == normalise(b, sort_children=True)


def test_normalise_keeps_unknown_owner_and_does_not_mutate() -> None:
    t = _t({"kind": "reply", "body": {"stat": {"ephemeralOwner": -0x8000000000000000}}})
    before = copy.deepcopy(t)
    assert normalise(t)["A"][0]["body"]["stat"]["ephemeralOwner"] == -0x8000000000000000
    assert t == before


def test_diff_aligns_one_missing_event_as_one_difference() -> None:
    steps = [["A", "create", {"path": "/a"}], ["A", "exists", {"path": "/a"}]]
    r1 = {"kind": "reply", "step": 0, "err": "OK"}
    ev = {"kind": "event", "step": 1, "type": "NODECREATED"}
    r2 = {"kind": "reply", "step": 1, "err": "OK"}
    diffs = compare.diff_transcripts("x", steps, _t(r1, ev, r2), _t(r1, r2))
    assert len(diffs) == 1
    assert diffs[0].step == 1 and diffs[0].left == [ev] and diffs[0].right == []
    assert "exists" in diffs[0].op


def test_random_generation_is_deterministic_and_valid() -> None:
    from trizk.compat.oracle.scenario import OPS

    a, b = generate(7, 80), generate(7, 80)
    assert a == b and a != generate(8, 80)
    assert len(a["steps"]) >= 80
    assert all(st[1] in OPS for st in a["steps"])


def test_shrink_finds_a_one_minimal_subsequence() -> None:
    steps = [["A", "op", {"n": i}] for i in range(40)]
    needed = {3, 17, 29}

    def differs(s: list[Any]) -> bool:
        return needed <= {st[2]["n"] for st in s}

    small = shrink(steps, differs)
    assert sorted(st[2]["n"] for st in small) == sorted(needed)


def test_scenario_data_is_well_formed() -> None:
    from trizk.compat.oracle.scenario import OPS

    assert len(SCENARIOS) >= 30 and len(CI_SCENARIOS) >= 10
    for sc in SCENARIOS:
        for st in sc["steps"]:
            assert isinstance(st[0], str) and st[1] in OPS, (sc["name"], st)


# ----------------------------------------------------------------------------- servers


def _scenario_group(sc: dict[str, Any]) -> pytest.MarkDecorator:
    """Both comparisons of a scenario share its oracle transcript (``_ORACLE``): under
    pytest-xdist (--dist loadgroup) they run on one worker."""
    return pytest.mark.xdist_group(f"scenario-{sc['name']}")


@pytest.mark.parametrize(
    "sc", [pytest.param(sc, id=sc["name"], marks=_scenario_group(sc)) for sc in CI_SCENARIOS]
)
def test_oracle_vs_oracle(sc: dict[str, Any], needs_zookeeper: None) -> None:
    first = oracle_transcript(sc)
    second = normalise(compare.run_on("zookeeper", sc))
    assert _replies(first) > 0
    diffs = compare.diff_transcripts(sc["name"], sc["steps"], first, second)
    assert not diffs, "\n".join(d.render("zookeeper#1", "zookeeper#2") for d in diffs)


def _trizk_params() -> list[Any]:
    out = []
    for sc in CI_SCENARIOS:
        marks = [_scenario_group(sc)]
        if sc.get("trizk_xfail"):
            marks.append(pytest.mark.xfail(reason=sc["trizk_xfail"], strict=True))
        out.append(pytest.param(sc, id=sc["name"], marks=marks))
    return out


@pytest.mark.parametrize("sc", _trizk_params())
def test_trizk_vs_oracle(sc: dict[str, Any], needs_zookeeper: None) -> None:
    expected = oracle_transcript(sc)
    got = normalise(compare.run_on("trizk", sc))
    diffs = compare.diff_transcripts(sc["name"], sc["steps"], got, expected)
    assert not diffs, "\n".join(d.render("trizk", "zookeeper") for d in diffs)


# ----------------------------------------------------------------------------- ZooKeeper 3.8.0

#: The CI scenarios run against the default oracle above (ZooKeeper 3.9.3, trizk at its default,
#: 3.9.3) and against ZooKeeper 3.8.0 (trizk at 3.8.0): a representative subset, one or two per
#: area (ACLs, plain ops and Stats, create modes, malformed multis, watches, session expiry, raw
#: bytes and four-letter words), for CI time.
OTHER_RELEASE = "3.8.0"
CI38 = (
    "acl_digest",
    "stat_fields",
    "data_and_versions",
    "create_modes",
    "malformed_multi",
    "child_watches",
    "watch_order_multi",
    "session_expiry",
    "raw_wire",
)
CI38_SCENARIOS = [sc for sc in CI_SCENARIOS if sc["name"] in CI38]
_ORACLE38: dict[str, Any] = {}


def _run38(kind: str, sc: dict[str, Any]) -> Any:
    """``sc`` on a fresh server of ``kind`` answering as ZooKeeper 3.8.0, normalised."""
    launch = (
        conformance.oracle_launch(OTHER_RELEASE)
        if kind == "zookeeper"
        else lambda k, cfg: servers.start(k, cfg, version=OTHER_RELEASE)
    )
    return normalise(conformance.FreshRunner(launch).run(kind, sc))


def oracle38_transcript(sc: dict[str, Any]) -> Any:
    if sc["name"] not in _ORACLE38:
        _ORACLE38[sc["name"]] = _run38("zookeeper", sc)
    return _ORACLE38[sc["name"]]


def test_the_default_oracle_is_trizks_default() -> None:
    """A ``zookeeper`` and a ``trizk`` started without a release are compared at one release:
    trizk's default, the current line (issue 27)."""
    from trizk.server.common import release

    assert servers.DEFAULT_VERSION == release.DEFAULT_RELEASE == "3.9.3" != OTHER_RELEASE


@pytest.mark.parametrize("kind", ["zookeeper", "trizk"])
@pytest.mark.parametrize(
    "sc", [pytest.param(sc, id=sc["name"], marks=_scenario_group(sc)) for sc in CI38_SCENARIOS]
)
def test_against_zookeeper38(sc: dict[str, Any], kind: str, needs_zookeeper38: None) -> None:
    """A second ZooKeeper 3.8.0 (the normaliser is fair to 3.8.0), and trizk answering as
    3.8.0, against ZooKeeper 3.8.0."""
    assert len(CI38_SCENARIOS) == len(CI38)
    if kind == "trizk":
        require_trizk_version(OTHER_RELEASE)
    want = oracle38_transcript(sc)
    assert _replies(want) > 0
    got = _run38(kind, sc)
    diffs = compare.diff_transcripts(sc["name"], sc["steps"], got, want)
    assert not diffs, "\n".join(d.render(kind, "zookeeper 3.8.0") for d in diffs)


def _check_fixture_server(srv: servers.Server) -> None:
    from trizk.testing.probes import handshake_ok

    assert srv.host == "127.0.0.1" and srv.cfg["clientPortAddress"] == "127.0.0.1"
    assert srv.cfg["tickTime"] == "200" and srv.cfg["admin.enableServer"] == "false"
    assert handshake_ok(srv.host, srv.port)
    proc = srv.proc
    srv.stop()
    assert proc.poll() is not None
    assert not srv.workdir.exists()
    assert not handshake_ok(srv.host, srv.port, timeout=1.0)


def test_fixture_zookeeper_server(zookeeper_server: servers.Server) -> None:
    _check_fixture_server(zookeeper_server)


def test_fixture_trizk_server(trizk_process_server: servers.Server) -> None:
    _check_fixture_server(trizk_process_server)


# ----------------------------------------------------------------------------- random mode


def _flip_nodeexists(t: Any) -> Any:
    """Pretend the right-hand server let a node be created twice (a top-level NODEEXISTS)."""
    return {
        k: [dict(e, err="OK") if e.get("err") == "NODEEXISTS" else e for e in v]
        for k, v in t.items()
    }


#: random scenarios per random-mode run (tests/seeds.py)
RANDOM_SEEDS = seeds.count("TRIZK_COMPAT_RANDOM_SEEDS", 2)


def test_random_oracle_vs_oracle(needs_zookeeper: None) -> None:
    count, ndiff, found = run_random(RANDOM_SEEDS, 1, 60, "zookeeper", "zookeeper")
    assert (count, ndiff, found) == (RANDOM_SEEDS, 0, [])


def test_random_trizk_vs_oracle(needs_zookeeper: None) -> None:
    _count, ndiff, found = run_random(RANDOM_SEEDS, 101, 60, "trizk", "zookeeper", shrink_budget=60)
    assert ndiff == 0, "\n".join(
        f"seed {f.seed}: {f.steps}\n" + "\n".join(d.render("trizk", "zookeeper") for d in f.diffs)
        for f in found
    )


def test_random_difference_is_shrunk_and_reproduced(needs_zookeeper: None) -> None:
    # An injected difference (a NODEEXISTS answered OK) must be found and shrunk to the
    # shortest sequence that still shows it on fresh servers: two creates of one path (or one
    # create of a node every server has, such as /zookeeper).
    _count, ndiff, found = run_random(1, 2, 150, "zookeeper", "zookeeper", tamper=_flip_nodeexists)
    assert ndiff > 0 and len(found) == 1
    shrunk = found[0]
    assert 1 <= len(shrunk.steps) <= 2, shrunk.steps
    # each step creates (directly or as a one-op multi) the same path
    ops = [st[2]["ops"][0] if st[1] == "multi" else st[1:] for st in shrunk.steps]
    assert all(st[1] != "multi" or len(st[2]["ops"]) == 1 for st in shrunk.steps)
    assert all(op in ("create", "create2") for op, _ in ops)
    assert len({args["path"] for _, args in ops}) == 1
    assert shrunk.diffs and all(d.op.endswith(")") for d in shrunk.diffs)
    assert any(e.get("err") == "NODEEXISTS" for d in shrunk.diffs for e in d.left)
