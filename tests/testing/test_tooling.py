"""The shared test tooling of trizk.testing on its own: the loop thread, the port allocator, the
members' directories and zoo.cfg files (no server started), and the direction of imports
(trizk.testing never imports trizk.compat)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trizk.testing.loop import LoopThread
from trizk.testing.ports import allocate, free_ports, server_lines
from trizk.testing.processes import MemberSet, member_cfg


def test_the_testing_package_imports_nothing_of_compat() -> None:
    code = (
        "import sys, trizk.testing, trizk.testing.ensemble, trizk.testing.linkproxy,"
        " trizk.testing.loop, trizk.testing.ports, trizk.testing.probes,"
        " trizk.testing.processes, trizk.testing.server, trizk.pytest_plugin,"
        " trizk.kazoo_harness;"
        "print(sorted(m for m in sys.modules if m.startswith('trizk.compat')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_free_ports_of_one_call_are_distinct() -> None:
    ports = free_ports(30)
    assert len(set(ports)) == 30 and all(0 < p < 65536 for p in ports)
    addrs = allocate([1, 2, 3], frozenset({3}))
    mine = [p for a in addrs.values() for p in (a.quorum_port, a.election_port, a.client_port)]
    assert len(set(mine)) == 9
    assert [a.observer for a in addrs.values()] == [False, False, True]


def test_loop_thread_starts_tasks_and_keeps_a_failure() -> None:
    loop = LoopThread("trizk-test-loop").start(10)
    try:
        release = loop.run_sync(trio.Event)

        async def task(*, task_status: Any) -> None:
            task_status.started(42)
            await release.wait()
            raise RuntimeError("boom")

        async def refuses(*, task_status: Any) -> None:
            raise ValueError("not started")

        assert loop.start_task(task) == 42
        with pytest.raises(ValueError, match="not started"):
            loop.start_task(refuses)  # raised here; the loop carries on
        assert loop.run_sync(lambda: 7) == 7

        async def never(*, task_status: Any) -> None:
            await trio.sleep_forever()

        with pytest.raises(trio.TooSlowError):
            loop.start_task(never, timeout=0.01)
        assert loop.alive
        loop.run_sync(release.set)  # the started task fails: the loop ends with its error
    finally:
        loop.stop(10)
    assert not loop.alive
    # Trio before 0.25 raises the task's error itself; later releases wrap it in a group
    err = loop.error
    if isinstance(err, BaseExceptionGroup):
        err = err.subgroup(RuntimeError)
        assert err is not None
        err = err.exceptions[0]
    assert isinstance(err, RuntimeError) and str(err) == "boom"


def test_loop_thread_stopped_has_no_error() -> None:
    loop = LoopThread("trizk-test-loop").start(10)

    async def sleeper(*, task_status: Any) -> None:
        task_status.started()
        await trio.sleep_forever()

    loop.start_task(sleeper)
    loop.stop(10)
    assert not loop.alive and loop.error is None
    with pytest.raises(trio.RunFinishedError):
        loop.run_sync(lambda: None)


def _cfg(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_member_set_writes_each_members_directory() -> None:
    with MemberSet({1: "trizk", 2: "trizk", 3: "trizk"}, observers=[3], base={"a": "1"}) as ms:
        root = ms.root
        addrs = {s: m.addrs for s, m in ms.members.items()}
        for sid, m in ms.members.items():
            assert (m.data_dir / "myid").read_text() == f"{sid}\n"
            cfg = _cfg(m.cfg_path)
            assert cfg == member_cfg(m.addrs, m.data_dir, server_lines(addrs), base={"a": "1"})
            assert cfg["server.3"].endswith(f":observer;127.0.0.1:{addrs[3].client_port}")
            assert ("peerType" in cfg) == (sid == 3)
            assert not ms.running(sid) and ms.mode(sid) == ""
        assert ms.hosts([1, 2]) == f"127.0.0.1:{ms.port(1)},127.0.0.1:{ms.port(2)}"
        assert ms.leader() is None
    assert not root.exists()


def test_member_set_with_links_gives_each_member_its_own_view() -> None:
    with MemberSet({1: "trizk", 2: "trizk"}, extra={"server.9": "x"}, links=True) as ms:
        assert ms.links is not None
        one, two = _cfg(ms.members[1].cfg_path), _cfg(ms.members[2].cfg_path)
        real = server_lines({s: m.addrs for s, m in ms.members.items()})
        # its own line is real, the other names the proxies towards it
        assert one["server.1"] == real["server.1"] and one["server.2"] != real["server.2"]
        assert two["server.2"] == real["server.2"] and two["server.1"] != real["server.1"]
        assert one["server.9"] == "x"  # extra keys are every member's
        ms.links.cut(1, 2)
        assert ms.links.is_cut(1, 2)
