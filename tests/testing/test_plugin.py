"""The pytest plugin (trizk.pytest_plugin), run by pytest's own ``pytester`` in child pytest
processes: fixtures, xdist, failures and interruptions, and nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

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
    found = [str(p) for p in base.rglob("trizk-testing-*")]
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
