"""Read-only mode on a real trizk ensemble (``-Dreadonlymode.enabled=true``), real sockets and
real clients: a member cut off from its quorum serves a kazoo ``read_only=True`` client's
reads, answers its writes NOTREADONLY (kazoo's NotReadOnlyCallError), refuses plain clients
and global sessions, says ``ro`` to ``isro``, ``Mode: read-only`` to ``srvr`` and
``read_only: true`` to the AdminServer's ``is_read_only``; after the
heal the client is read-write again. The expected values are what a 3-member Apache
ZooKeeper 3.8.0 ensemble showed in the same scenario (tests/compat/test_readonly.py runs both
and compares them)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from tests.readonly_helpers import LOCAL_SESSIONS, READ_ONLY, observe
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
