"""The kazoo-suite bench's bookkeeping (compat/bench/kazoo_suite.py): JUnit outcomes, the sets
over interleaved passes and the exit status. The passes themselves are run by hand."""

from __future__ import annotations

import json
from pathlib import Path

from trizk.compat.bench.kazoo_suite import Comparison, Run, parse_junit, report

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="test_client.TestClient" name="test_ok" time="0.1"/>
<testcase classname="test_client.TestClient" name="test_bad" time="0.1">
<failure message="boom">trace</failure></testcase>
<testcase classname="test_sasl.TestSASL" name="test_krb" time="0.0">
<skipped message="no KDC">skip</skipped></testcase>
<testcase classname="test_lock.TestLock" name="test_teardown" time="0.1"/>
<testcase classname="test_lock.TestLock" name="test_teardown" time="0.1">
<error message="teardown">trace</error></testcase>
</testsuite></testsuites>
"""


def test_parse_junit_keeps_the_worse_of_a_test_and_its_teardown(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_text(JUNIT)
    assert parse_junit(path) == {
        "test_client.TestClient::test_ok": "passed",
        "test_client.TestClient::test_bad": "failed",
        "test_sasl.TestSASL::test_krb": "skipped",
        "test_lock.TestLock::test_teardown": "error",
    }


def _run(side: str, wall: float, **outcomes: str) -> Run:
    return Run(side, wall, 1.0, [1.0, 2.0], 0, dict(outcomes), 1.0, 2.0, "12:00:00")


def test_sets_over_interleaved_passes() -> None:
    runs = [
        _run("java", 600.0, a="passed", b="passed", c="passed", d="failed", e="passed"),
        _run("trizk", 150.0, a="passed", b="passed", c="failed", d="passed", e="passed"),
        _run("trizk", 150.0, a="passed", b="failed", c="failed", d="passed"),
        _run("java", 800.0, a="passed", b="passed", c="passed", d="failed", e="failed"),
    ]
    cmp = Comparison.of(runs)
    assert cmp.both == ["a"]
    assert cmp.only_java == ["c"]
    assert cmp.only_trizk == ["d"]
    # b: trizk passed once; e: java passed once, trizk did not run it in its second pass
    assert cmp.unsteady == {
        "b": {"java": ["passed", "passed"], "trizk": ["passed", "failed"]},
        "e": {"java": ["passed", "failed"], "trizk": ["passed", "not run"]},
    }
    # passed in every java pass and not in every trizk pass: issue 28's criterion
    assert cmp.lost == ["b", "c"]


def test_report_writes_the_summary_and_fails_on_a_lost_test(tmp_path: Path) -> None:
    same = {"a": "passed", "b": "skipped"}
    runs = [_run("java", 700.0, **same), _run("trizk", 175.0, **same)]
    assert report(runs, tmp_path) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["ratio"] == 4.0 and summary["both"] == 1 and summary["lost"] == []
    assert [p["side"] for p in summary["passes"]] == ["java", "trizk"]
    assert summary["passes"][0]["load_before"] == 1.0
    runs.append(_run("trizk", 175.0, a="failed", b="skipped"))
    assert report(runs, tmp_path) == 1
    assert json.loads((tmp_path / "summary.json").read_text())["lost"] == ["a"]
