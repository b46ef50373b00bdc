"""One read-only-mode scenario, observed the same way on any ensemble (trizk in-process or as
processes, Apache ZooKeeper, a mix), so that what trizk shows can be compared with what
ZooKeeper shows (tests/shell/test_readonly.py, tests/compat/test_readonly.py).

:func:`observe` writes a node through the member to be cut off, opens a global session there
(an ephemeral node makes it global under ``localSessionsUpgradingEnabled`` too), cuts the
member off (``isolate``), waits until ``isro`` says ``ro``, then records what clients get:
the four-letter words (isro, srvr, stat, mntr, conf), raw handshakes (read-only, not
read-only, old, a global session's reconnect), a kazoo ``read_only=True`` client's reads and
writes, a plain kazoo client's connect; then ``heal`` and the read-only client's way back to a
read-write session. Session ids and zxids are left out: they differ between any two runs.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState, KeeperState

from trizk.testing.probes import ask

#: the longest any step may take (a JVM ensemble on a loaded machine is slow)
DEADLINE = 60.0

#: what ``localSessionsEnabled`` kazoo's harness sets for its read-only test
LOCAL_SESSIONS = {"localSessionsEnabled": "true", "localSessionsUpgradingEnabled": "true"}
READ_ONLY = {"readonlymode.enabled": "true"}


def until(cond: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)  # polling interval of a bounded wait


def word(port: int, w: str) -> str:
    try:
        return ask(port, w).decode()
    except OSError:
        return ""


def raw_handshake(
    port: int, read_only: bool | None, session: tuple[int, bytes] = (0, bytes(16))
) -> tuple[Any, ...]:
    """Send a ConnectRequest (readOnly byte ``read_only``; None: an old client without it) and
    tell what comes back: ("closed",) unanswered, or the first frame (a ConnectResponse's
    timeout > 0, its readOnly byte; a bare ReplyHeader's error) and whether the connection
    was then closed or left open."""
    sid, passwd = session
    body = struct.pack(">iqiq", 0, 0, 10_000, sid) + struct.pack(">i", len(passwd)) + passwd
    if read_only is not None:
        body += b"\x01" if read_only else b"\x00"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        end = "open"
        s.settimeout(1.5)
        try:
            while chunk := s.recv(4096):
                data += chunk
            end = "closed"
        except TimeoutError:
            pass
    if not data:
        return ("closed",)
    (n,) = struct.unpack_from(">i", data)
    frame = data[4 : 4 + n]
    if n == 16:  # a ReplyHeader where the ConnectResponse should be
        return ("reply", struct.unpack_from(">iqi", frame)[2], end)
    timeout = struct.unpack_from(">i", frame, 4)[0]
    return ("connect", timeout > 0, frame[36:], end)


def _error(fn: Callable[[], object]) -> str:
    try:
        fn()
    except KazooException as e:
        return type(e).__name__
    return "ok"


def observe(
    port: int,
    all_hosts: str,
    isolate: Callable[[], None],
    heal: Callable[[], None],
    during: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The scenario of the module docstring on the member at ``port``; returns what was seen
    (with what ``during()`` returns while the member is read-only)."""
    seen: dict[str, Any] = {}
    host = f"127.0.0.1:{port}"
    seen["isro before"] = word(port, "isro")
    g = KazooClient(hosts=host, timeout=10)
    g.start(DEADLINE)
    ro: KazooClient | None = None
    try:
        g.create("/ro", b"data")
        g.create("/ro/e", b"", ephemeral=True)  # the session is global (upgraded if local)
        global_session = g.client_id
        assert global_session is not None
        isolate()
        until(lambda: word(port, "isro") == "ro", "the cut-off member serves read-only")
        srvr = word(port, "srvr")
        seen["srvr"] = [
            line for line in srvr.splitlines() if line.startswith(("Mode:", "READ-ONLY"))
        ]
        seen["stat read-only line"] = "READ-ONLY mode" in word(port, "stat")
        # a ReadOnlyZooKeeperServer is no QuorumZooKeeperServer: no quorum gauges, and its
        # conf ends at peerType (no membership)
        seen["mntr states"] = [
            line
            for line in word(port, "mntr").splitlines()
            if line.startswith(("zk_server_state", "zk_peer_state", "zk_quorum_size"))
        ]
        seen["conf ends"] = word(port, "conf").splitlines()[-1:]
        if during is not None:
            seen.update(during())
        seen["handshake read-only"] = raw_handshake(port, True)
        seen["handshake not read-only"] = raw_handshake(port, False)
        seen["handshake old client"] = raw_handshake(port, None)
        seen["reconnect of a global session"] = raw_handshake(port, True, global_session)
        plain = KazooClient(hosts=host, timeout=4)
        try:
            plain.start(5)
            seen["plain client"] = "connected"
        except KazooTimeoutError:
            seen["plain client"] = "timeout"
        finally:
            plain.stop()
            plain.close()
        ro = KazooClient(hosts=host, read_only=True, timeout=10)
        ro.start(DEADLINE)
        seen["client state"] = str(ro.client_state)
        seen["children"] = sorted(ro.get_children("/ro"))
        seen["data"] = ro.get("/ro")[0]
        seen["exists"] = ro.exists("/ro/missing")
        txn = ro.transaction()
        txn.create("/ro/t")
        seen["writes"] = {
            "create": _error(lambda: ro.create("/ro/x") if ro else None),
            "set": _error(lambda: ro.set("/ro", b"y") if ro else None),
            "delete": _error(lambda: ro.delete("/ro/e") if ro else None),
            "sync": _error(lambda: ro.sync("/") if ro else None),
            "multi": _error(txn.commit),
        }
        seen["data after"] = ro.get("/ro")[0]
        heal()
        # kazoo moves back to a read-write session once its member has a quorum again (its
        # read-only session is unknown there: a new session)
        until(
            lambda: (
                ro is not None
                and ro.state == KazooState.CONNECTED
                and ro.client_state == KeeperState.CONNECTED
            ),
            "the read-only client is read-write again",
        )
        until(lambda: word(port, "isro") == "rw", "the member is read-write again")
        seen["write after"] = _error(lambda: ro.create("/ro/after") if ro else None)
    finally:
        for c in (g, ro):
            if c is not None:
                c.stop()
                c.close()
    return seen


def observe_handshakes(port: int, isolate: Callable[[], None]) -> dict[str, Any]:
    """Without ``localSessionsEnabled``: the raw handshakes a cut-off member answers -- a new
    session (refused NOTREADONLY), a closed session's reconnect (a session that is not
    global: valid there), a live global session's reconnect (closed)."""
    host = f"127.0.0.1:{port}"
    closed = KazooClient(hosts=host, timeout=10)
    closed.start(DEADLINE)
    closed_session = closed.client_id
    closed.stop()
    closed.close()
    g = KazooClient(hosts=host, timeout=10)
    g.start(DEADLINE)
    try:
        live = g.client_id
        assert closed_session is not None and live is not None
        isolate()
        until(lambda: word(port, "isro") == "ro", "the cut-off member serves read-only")
        return {
            "new session": raw_handshake(port, True),
            "not read-only": raw_handshake(port, False),
            "reconnect of a closed session": raw_handshake(port, True, closed_session),
            "reconnect of a live global session": raw_handshake(port, True, live),
        }
    finally:
        g.stop()
        g.close()
