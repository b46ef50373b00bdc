"""The pytest plugin (trizk.pytest_plugin), run by pytest's own ``pytester`` in child pytest
processes: fixtures, xdist, failures and interruptions, and nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

#: every test runs pytest in child processes (10-30 s each)
pytestmark = pytest.mark.slow

CLIENT = """
from kazoo.client import KazooClient


def client(hosts):
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=10)
    return zk
"""

USES_FIXTURES = (
    CLIENT
    + """

def test_chroot_a(trizk_chroot):
    zk = client(trizk_chroot.connect_string)
    assert zk.get_children("/") == []
    zk.create("/mine", b"a")
    zk.stop(); zk.close()


def test_chroot_b(trizk_chroot, trizk_session_server):
    assert trizk_chroot.server is trizk_session_server
    zk = client(trizk_chroot.connect_string)
    assert zk.get_children("/") == []  # test_chroot_a's node is in another chroot
    zk.stop(); zk.close()


def test_fresh(trizk_fresh_server, trizk_session_server):
    assert trizk_fresh_server.port != trizk_session_server.port
    zk = client(trizk_fresh_server.connect_string)
    assert "trizk-tests" not in zk.get_children("/")
    trizk_fresh_server.restart()
    zk.stop(); zk.close()


def test_fresh_again(trizk_fresh_server):
    assert trizk_fresh_server.running
"""
)


def leftovers(base: Path) -> list[str]:
    """trizk data dirs under ``base`` and live processes whose command line names ``base``."""
    found = [str(p) for p in (*base.rglob("trizk-testing-*"), *base.rglob("trizk-ensemble-*"))]
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"trizk.server" in cmd and str(base).encode() in cmd:
            found.append(f"pid {pid}: {cmd.decode(errors='replace')}")
    return found


@pytest.mark.parametrize("mode", ["in-process", "process"])
def test_fixtures(pytester: pytest.Pytester, mode: str) -> None:
    pytester.makepyfile(test_inner=USES_FIXTURES)
    base = pytester.path / "base"
    result = pytester.runpytest_subprocess(f"--trizk-mode={mode}", f"--basetemp={base}")
    result.assert_outcomes(passed=4)
    assert leftovers(base) == []


def test_one_mode_knob(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRIZK_MODE alone (no option) makes the fixtures' servers children; the option sets the
    same variable, which the kazoo drop-in reads."""
    pytester.makepyfile(
        test_inner="""
import os


def test_mode(trizk_fresh_server):
    assert trizk_fresh_server.mode == os.environ["EXPECTED"]
    assert os.environ["TRIZK_MODE"] == os.environ["EXPECTED"]
"""
    )
    monkeypatch.setenv("TRIZK_MODE", "process")
    monkeypatch.setenv("EXPECTED", "process")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    monkeypatch.delenv("TRIZK_MODE")
    monkeypatch.setenv("EXPECTED", "in-process")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trizk-mode=in-process")
    result.assert_outcomes(passed=1)


def test_failure_is_reported_cleanly_and_nothing_is_left(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_inner="""
def test_fails(trizk_fresh_server, trizk_chroot):
    assert trizk_fresh_server.port == 1, "the port is not 1"


def test_passes(trizk_fresh_server):
    pass
"""
    )
    base = pytester.path / "base"
    result = pytester.runpytest_subprocess("--trizk-mode=process", f"--basetemp={base}")
    result.assert_outcomes(passed=1, failed=1, errors=0)
    result.stdout.fnmatch_lines(["*AssertionError: the port is not 1*"])
    assert leftovers(base) == []


def test_interrupted_run_leaves_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_inner="""
def test_interrupted(trizk_fresh_server, trizk_session_server):
    raise KeyboardInterrupt


def test_never_run(trizk_fresh_server):
    pass
"""
    )
    base = pytester.path / "base"
    result = pytester.runpytest_subprocess("--trizk-mode=process", f"--basetemp={base}")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert leftovers(base) == []


def test_under_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_inner=USES_FIXTURES)
    base = pytester.path / "base"
    result = pytester.runpytest_subprocess("-n", "2", f"--basetemp={base}")
    result.assert_outcomes(passed=4)
    assert leftovers(base) == []


USES_ENSEMBLE = (
    CLIENT
    + """
import pytest


def test_leader_kill(trizk_ensemble):
    assert trizk_ensemble.members == (1, 2, 3)
    leader = trizk_ensemble.leader()
    zk = client(trizk_ensemble.connect_string)
    zk.create("/x", b"1")
    trizk_ensemble.kill(leader)
    assert leader not in trizk_ensemble.wait_for_quorum()
    assert zk.retry(zk.get, "/x")[0] == b"1"
    zk.stop(); zk.close()


@pytest.mark.trizk_ensemble(n=3, observers=1)
def test_marker_shapes_it(trizk_ensemble):
    assert trizk_ensemble.observers == (4,)
    assert trizk_ensemble.wait_for_quorum()[4] == "observer"


def test_fails(trizk_ensemble):
    trizk_ensemble.isolate(1)
    assert trizk_ensemble.leader() == 99, "no such leader"
"""
)


def test_ensemble_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=USES_ENSEMBLE)
    base = pytester.path / "base"
    result = pytester.runpytest_subprocess(f"--basetemp={base}")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: no such leader*"])
    assert leftovers(base) == []
