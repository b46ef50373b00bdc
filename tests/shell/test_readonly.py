"""Read-only mode on a real trizk ensemble (``-Dreadonlymode.enabled=true``), real sockets and
real clients: a member cut off from its quorum serves a kazoo ``read_only=True`` client's
reads, answers its writes NOTREADONLY (kazoo's NotReadOnlyCallError), refuses plain clients
and global sessions, says ``ro`` to ``isro``, ``Mode: read-only`` to ``srvr`` and
``read_only: true`` to the AdminServer's ``is_read_only``; after the heal the client is
read-write again. The expected values are what a 3-member Apache ZooKeeper 3.8.0 ensemble
showed in the same scenario (tests/compat/test_readonly.py runs both and compares them).
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from tests.readonly_helpers import LOCAL_SESSIONS, READ_ONLY, observe
from trizk.server.shell.clock import Clock
from trizk.server.shell.ensemble.readonly import grace_ms, look_read_only
from trizk.testing import Ensemble
from trizk.testing.ports import free_ports

#: what ZooKeeper 3.8.0 showed (tests/compat/test_readonly.py)
EXPECTED: dict[str, Any] = {
    "isro before": "rw",
    "srvr": ["READ-ONLY mode; serving only read-only clients", "Mode: read-only"],
    "stat read-only line": True,
    "mntr states": ["zk_server_state\tread-only"],
    "conf ends": ["peerType=0"],
    "handshake read-only": ("connect", True, b"\x01", "open"),
    "handshake not read-only": ("closed",),
    "handshake old client": ("closed",),
    "reconnect of a global session": ("closed",),
    "plain client": "timeout",
    "client state": "CONNECTED_RO",
    "children": ["e"],
    "data": b"data",
    "exists": None,
    "writes": {
        "create": "NotReadOnlyCallError",
        "set": "NotReadOnlyCallError",
        "delete": "NotReadOnlyCallError",
        "sync": "NotReadOnlyCallError",
        "multi": "NotReadOnlyCallError",
    },
    "data after": b"data",
    "write after": "ok",
}


@pytest.mark.slow
def test_a_cut_off_member_serves_read_only_clients_and_they_come_back() -> None:
    admin = dict(zip((1, 2, 3), free_ports(3), strict=True))
    with Ensemble(
        3,
        properties={
            **LOCAL_SESSIONS,
            "admin.enableServer": "true",
            "admin.serverAddress": "127.0.0.1",
        },
        member_properties={sid: {"admin.serverPort": str(p)} for sid, p in admin.items()},
        system_properties=READ_ONLY,
    ) as ens:
        leader = ens.leader()
        member = next(s for s in ens.members if s != leader)
        rest = [s for s in ens.members if s != member]

        def is_read_only() -> dict[str, Any]:
            # the AdminServer's is_read_only (Commands.IsReadOnlyCommand)
            url = f"http://127.0.0.1:{admin[member]}/commands/is_read_only"
            with urllib.request.urlopen(url, timeout=10) as rsp:
                return {"admin is_read_only": json.loads(rsp.read())}

        seen = observe(
            ens.port(member),
            ens.hosts(),
            lambda: ens.partition([member], rest),
            ens.heal,
            is_read_only,
        )
    assert seen.pop("admin is_read_only") == {
        "read_only": True,
        "command": "is_read_only",
        "error": None,
    }
    assert seen == EXPECTED


async def test_the_grace_period_before_serving_read_only(mock_clock: MockClock) -> None:
    """``look_read_only``: nothing is served when the election ends within
    ``max(2000, tickTime)`` ms; past it the read-only role is served, and stopped when the
    election ends (on the server's clock: moving it moves the grace period). Trio's clock
    stands still here (``mock_clock``): only ``Clock.advance`` moves time."""
    clock = Clock()
    calls: list[str] = []

    async def run(tick_ms: int, decided: trio.Event) -> None:
        async def decision() -> str:
            await decided.wait()
            return "decided"

        got = await look_read_only(
            clock, tick_ms, lambda: calls.append("serve"), lambda: calls.append("stop"), decision
        )
        assert got == "decided"

    with trio.fail_after(10):
        decided = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, 200, decided)
            await wait_all_tasks_blocked()
            clock.advance(grace_ms(200) - 1)  # 1999 ms of 2000
            await wait_all_tasks_blocked()
            decided.set()
        assert calls == []
        decided = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, 3000, decided)
            await wait_all_tasks_blocked()
            clock.advance(2500)  # tickTime 3000 > 2000: still within the grace period
            await wait_all_tasks_blocked()
            assert calls == []
            clock.advance(500)
            await wait_all_tasks_blocked()
            assert calls == ["serve"]
            decided.set()
        assert calls == ["serve", "stop"]
