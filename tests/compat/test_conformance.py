"""The conformance tool: ``python -m trizk.compat.run --oracle V --candidate HOST:PORT``.

* Pure: a scenario under a chroot (paths in every place a step carries one, invalid paths left
  alone, raw bytes refused), the transcript with the chroot taken out again; which scenarios
  need a server of their own; the report's features (notification zxid, error shapes, zxid
  numbering, the documented standalone-check difference) and its text.
* A bad ``--candidate`` is one line on stderr and exit status 2 (no server needed).
* Against live servers (bounded subsets): ZooKeeper 3.9.3 as the candidate of the 3.8.0 oracle
  gives the upgrade report, naming the known 3.9 changes (removeWatches/checkWatches of the
  persistent types, the zxid of a notification, exists without READ, create2's Stat in a
  multi); trizk as the candidate of 3.8.0 (at an address, and started with ``--candidate-cmd``)
  gives none.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from trizk.compat import run
from trizk.compat.oracle import chroot as ch
from trizk.compat.oracle import conformance as cf
from trizk.compat.oracle.compare import Difference, load_scenarios
from trizk.compat.oracle.report import Finding, Report, error_shapes, features
from trizk.compat.procs import servers

C = "/trizk-conformance/r-1"


# ----------------------------------------------------------------------------- chroot


def test_chroot_moves_every_path_a_step_carries() -> None:
    steps: list[Any] = [
        ["A", "create", {"path": "/a", "data": "/not-a-path", "acl": "open"}],
        ["A", "getChildren", {"path": "/", "watch": True}],
        ["A", "getEphemerals", {"prefix": "/e"}],
        ["A", "multi", {"ops": [["create", {"path": "/m"}], ["check", {"path": "/m"}]]}],
        ["A", "setWatches2", {"data": ["/d"], "persistentRecursive": ["/r"]}],
        [
            "A",
            "request",
            {
                "opcode": "MULTI",
                "fields": [
                    ["mh", 1, False, -1],
                    ["ustring", "/x"],
                    ["ustring", {"hex": "2fc328"}],
                    ["ustring", None],
                    ["strings", ["/s", "t"]],
                    ["req", "create", {"path": "/q"}],
                    ["multi", [["delete", {"path": "/w"}]]],
                ],
            },
        ],
        ["A", "ping"],
    ]
    got = ch.chroot_steps(C, steps)
    assert got[0][2] == {"path": C + "/a", "data": "/not-a-path", "acl": "open"}
    assert got[1][2]["path"] == C  # "/" is the chroot itself (ZooKeeper.prependChroot)
    assert got[2][2] == {"prefix": C + "/e"}
    assert [o[1]["path"] for o in got[3][2]["ops"]] == [C + "/m", C + "/m"]
    assert got[4][2] == {"data": [C + "/d"], "persistentRecursive": [C + "/r"]}
    fields = got[5][2]["fields"]
    assert fields[1] == ["ustring", C + "/x"]
    assert fields[2] == ["ustring", {"hex": C.encode().hex() + "2fc328"}]
    assert fields[3] == ["ustring", None]
    assert fields[4] == ["strings", [C + "/s", "t"]]
    assert fields[5] == ["req", "create", {"path": C + "/q"}]
    assert fields[6] == ["multi", [["delete", {"path": C + "/w"}]]]
    assert got[6] == ["A", "ping"]
    assert steps[0][2]["path"] == "/a"  # the scenario itself is left as it was


@pytest.mark.parametrize("path", ["", "t", None, {"hex": "74c328"}])
def test_chroot_leaves_paths_not_starting_with_a_slash(path: Any) -> None:
    # prefixing "" or "t" would turn an invalid path into a valid one
    assert ch.chroot_path(C, path) == path


def test_unchroot_strips_the_chroot_from_answers_only_where_it_is() -> None:
    t = {
        "A": [
            {"kind": "event", "path": C, "type": "NODECHILDRENCHANGED"},
            {"kind": "reply", "body": {"path": C + "/a/s-0000000001"}},
            {"kind": "reply", "body": {"ephemerals": [C + "/e", "/elsewhere"]}},
            {"kind": "reply", "results": [{"body": {"path": C + "/m"}}]},
            {"kind": "reply", "body": {"path": "/trizk-conformance/r-10"}},
        ]
    }
    got = ch.unchroot_transcript(C, t)["A"]
    assert got[0]["path"] == "/"
    assert got[1]["body"]["path"] == "/a/s-0000000001"
    assert got[2]["body"]["ephemerals"] == ["/e", "/elsewhere"]
    assert got[3]["results"][0]["body"]["path"] == "/m"
    assert got[4]["body"]["path"] == "/trizk-conformance/r-10"  # another chroot: kept


def test_which_scenarios_need_a_server_of_their_own() -> None:
    def sc(steps: list[Any], **kw: Any) -> dict[str, Any]:
        return {"name": "x", "steps": steps, **kw}

    plain = sc([["A", "create", {"path": "/a"}]])
    assert cf.fresh_reason(plain, {}) is None
    ext = sc([["A", "create", {"path": "/a"}]], cfg={"extendedTypesEnabled": "true"})
    assert cf.fresh_reason(ext, {}) == "zoo.cfg extendedTypesEnabled=true"
    assert cf.fresh_reason(ext, {"extendedTypesEnabled": "true"}) is None  # declared
    assert "raw bytes" in (cf.fresh_reason(sc([["A", "frames", {"hex": "00"}]]), {}) or "")
    raw_req = sc([["A", "request", {"opcode": 1, "body_hex": "00"}]])
    assert cf.fresh_reason(raw_req, {}) == "a request given as raw bytes"
    zk = sc([["A", "getData", {"path": "/zookeeper/quota"}]])
    assert cf.fresh_reason(zk, {}) == "the /zookeeper tree"
    empty = sc([["A", "multi", {"ops": [["check", {"path": ""}]]}]])
    assert cf.fresh_reason(empty, {}) == "an empty path (answered from the server's root)"
    assert ch.has_empty_path(["A", "request", {"opcode": 1, "fields": [["ustring", ""]]}])
    assert not ch.has_empty_path(["A", "create", {"path": "/a", "data": ""}])
    short = sc([["A", "ping"]], sessions={"A": {"timeout": 400}})
    assert "session timeouts" in (cf.fresh_reason(short, {}) or "")
    # every scenario file is classified, and most of the suite runs shared
    reasons = [cf.fresh_reason(s, {}) for s in load_scenarios()]
    assert sum(r is None for r in reasons) > len(reasons) // 2


def test_candidate_template_is_filled_and_scenario_keys_replace_lines() -> None:
    text = cf.fill_template(
        "tickTime=2000\nclientPort={port}\ndataDir={dataDir}\nextendedTypesEnabled=false\n",
        2181,
        "/d",
        {"extendedTypesEnabled": "true"},
    )
    assert text == "tickTime=2000\nclientPort=2181\ndataDir=/d\nextendedTypesEnabled=true\n"


# ----------------------------------------------------------------------------- report


def _finding(step: Any, oracle: list[Any], candidate: list[Any], run_name: str = "s") -> Finding:
    d = Difference(run_name, "A", 0, "op", oracle, candidate)
    return Finding("scenario", run_name, step, d)


def test_report_features_of_differences() -> None:
    ev = {"kind": "event", "type": "NODEDATACHANGED", "path": "/w", "state": "SYNCCONNECTED"}
    f = _finding(
        ["B", "setData", {"path": "/w"}],
        [dict(ev, zxid=-1), {"kind": "reply", "op": "SETDATA", "err": "OK", "zxid": "Z3"}],
        [dict(ev, zxid="Z3"), {"kind": "reply", "op": "SETDATA", "err": "OK", "zxid": "Z3"}],
    )
    assert features(f)["watch kinds"] == ["notification zxid"]
    assert features(f)["op families"] == ["setData"]
    rw = _finding(
        ["A", "removeWatches", {"path": "/p", "type": 4}],
        [{"kind": "reply", "op": "REMOVEWATCHES", "err": "MARSHALLINGERROR"}],
        [{"kind": "reply", "op": "REMOVEWATCHES", "err": "OK"}],
    )
    fs = features(rw)
    assert fs["watch kinds"] == ["removeWatches type PERSISTENT"]
    assert fs["error shapes"] == ["REMOVEWATCHES: MARSHALLINGERROR -> OK"]
    noauth = _finding(
        ["B", "exists", {"path": "/c"}],
        [{"kind": "reply", "op": "EXISTS", "err": "OK"}],
        [{"kind": "reply", "op": "EXISTS", "err": "NOAUTH"}],
    )
    assert features(noauth)["ACL schemes"] == ["world (default)"]
    # after a close on one side, the rest is its consequence
    closed = _finding(
        ["A", "check", {"path": "/v"}],
        [
            {"kind": "reply", "op": "CHECK", "err": "BADVERSION"},
            {"kind": "reply", "op": "X", "err": "OK"},
        ],
        [{"kind": "reply", "op": "CHECK", "err": "UNIMPLEMENTED"}, {"kind": "closed"}],
    )
    assert error_shapes(closed)[0] == [
        "CHECK: BADVERSION -> UNIMPLEMENTED",
        "X: OK -> connection closed",
    ]
    # a shifted zxid rank alone is one feature, whatever the op
    shifted = _finding(
        ["A", "exists", {"path": "/v"}],
        [
            {
                "kind": "reply",
                "op": "EXISTS",
                "err": "OK",
                "zxid": "Z5",
                "body": {"stat": {"mzxid": "Z4"}},
            }
        ],
        [
            {
                "kind": "reply",
                "op": "EXISTS",
                "err": "OK",
                "zxid": "Z4",
                "body": {"stat": {"mzxid": "Z3"}},
            }
        ],
    )
    assert error_shapes(shifted) == ([], ["zxid numbering"])


def test_report_counts_features_and_sets_the_documented_difference_apart() -> None:
    r = Report("the server at h:1", "3.8.0")
    sc = {
        "name": "check_standalone_ok",
        "steps": [["A", "check", {"path": "/v", "version": 0}], ["A", "setData", {"path": "/w"}]],
    }
    answered = Difference(
        sc["name"],
        "A",
        0,
        "check",
        [{"kind": "timeout", "step": 0}],
        [{"kind": "reply", "op": "CHECK", "err": "OK", "step": 0}],
    )
    other = Difference(
        sc["name"],
        "A",
        1,
        "setData",
        [{"kind": "reply", "op": "SETDATA", "err": "OK", "step": 1}],
        [{"kind": "reply", "op": "SETDATA", "err": "NONODE", "step": 1}],
    )
    r.add_run("scenario", sc, [answered, other])
    r.add_run("scenario", {"name": "quiet", "steps": []}, [])
    r.skipped.append(("raw_wire", "raw bytes (open step)"))
    assert r.differences == 1 and len(r.intended) == 1
    text = r.render()
    assert "scenarios: 2 run (2 shared under a chroot, 0 on servers of their own), 1 with" in text
    assert "op families that differ:\n  setData: 1 differences in 1 runs" in text
    assert "error shapes that differ:\n  SETDATA: OK -> NONODE: 1 differences" in text
    assert "documented intended differences (not counted):\n  a successful standalone check" in text
    assert "raw_wire: raw bytes (open step)" in text
    # a 3.9.3 oracle answers that check itself: the same difference counts there
    r39 = Report("x", "3.9.3")
    r39.add_run("scenario", sc, [answered])
    assert r39.differences == 1 and not r39.intended


# ----------------------------------------------------------------------------- the command


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        ("nonsense", "error: --candidate 'nonsense': expected HOST:PORT"),
        ("127.0.0.1:99999", "error: --candidate '127.0.0.1:99999': expected HOST:PORT"),
        ("127.0.0.1:1", "error: cannot reach the candidate at 127.0.0.1:1: Connection refused"),
    ],
)
def test_a_bad_candidate_is_one_line(
    candidate: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run.main(["--candidate", candidate]) == 2
    out, err = capsys.readouterr()
    assert err == message + "\n" and out == ""


def test_a_bad_candidate_command_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--candidate-cmd", "/nonexistent/zk {cfg}", "-k", "sync_and_reads", "--random", "0"]
    assert run.main([*argv, "--fuzz-seconds", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --candidate-cmd: no such program '/nonexistent/zk'\n"


#: scenarios that show the known 3.8.0 -> 3.9.3 changes, for the bounded upgrade-report test
UPGRADE_SCENARIOS = (
    "add_watch_persistent",  # removeWatches/checkWatches of types 4/5 (ZOOKEEPER-4472)
    "data_watch_setdata_delete",  # a notification carries its write's zxid (4655)
    "multi_success",  # create2 in a multi returns its Stat (4026)
    "acl_digest",  # exists without READ is NOAUTH (2590)
)


def test_upgrade_report_of_zookeeper_393_against_380(
    needs_zookeeper38: None, needs_zookeeper39: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with servers.running("zookeeper", version="3.9.3") as srv:
        argv = ["--oracle", "3.8.0", "--candidate", srv.address, "--random", "0"]
        for name in UPGRADE_SCENARIOS:
            argv += ["-k", name]
        status = run.main([*argv, "--fuzz-seconds", "0"])
    out = capsys.readouterr().out
    assert status == 1, out
    report = out[out.index("Conformance of the server at") :]
    assert "scenarios: 4 run (4 shared under a chroot" in report
    for feature in (
        "checkWatches type PERSISTENT",  # a watch kind
        "REMOVEWATCHES: MARSHALLINGERROR -> ",  # an error shape
        "notification zxid",
        "EXISTS: OK -> NOAUTH",
        "MULTI OK: type, stat",  # create2 in a multi: its result type and Stat
    ):
        assert f"\n  {feature}" in report, report


def test_trizk_at_an_address_matches_its_oracle(
    needs_zookeeper38: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # trizk answering as 3.8.0 (the oracle named; its default is 3.9.3)
    with servers.running("trizk", version="3.8.0") as srv:
        argv = ["--oracle", "3.8.0", "--candidate", srv.address, "--ci", "--random", "2"]
        status = run.main([*argv, "--fuzz-seconds", "10"])
    out = capsys.readouterr().out
    report = out[out.index("Conformance of the server at") :]
    assert status == 0, report
    assert "\n  0 differences" in report
    assert "random mode: 2 sequences, 0 with differences" in report
    assert "wire fuzzer: " in report and "left behind" not in report


def test_trizk_started_by_command_matches_its_oracle(
    needs_zookeeper38: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # scenarios that need a server of their own (raw bytes, zoo.cfg keys, /zookeeper,
    # session timeouts) run on fresh servers started with the command; check_standalone_ok
    # shows the documented difference (of 3.8.0: trizk is told to answer as 3.8.0)
    cmd = f"{sys.executable} -m trizk.server {{cfg}} -D trizk.zookeeperVersion=3.8.0"
    argv = ["--oracle", "3.8.0", "--candidate-cmd", cmd, "--random", "0", "--fuzz-seconds", "0"]
    for name in ("raw_wire", "containers_and_ttl", "session_expiry", "check_standalone_ok"):
        argv += ["-k", name]
    status = run.main(argv)
    out = capsys.readouterr().out
    report = out[out.index("Conformance of the server of") :]
    assert status == 0, report
    assert "scenarios: 4 run (1 shared under a chroot, 3 on servers of their own)" in report
    assert "a successful standalone check is answered OK" in report
