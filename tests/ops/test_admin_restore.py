"""ZooKeeper 3.9's AdminServer ``restore`` command (:mod:`trizk.server.ops.admin`,
:func:`trizk.server.roles.factory.restore`): the stream reader, a live trizk answering real
HTTP requests with kazoo clients watching the state change under them, and the same
conversations with a live ZooKeeper 3.9.3 (``oracle``), which must give the answers the trizk
tests expect; and restore on the members of a trizk ensemble."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss
from kazoo.security import make_digest_acl

from tests.conftest import ThreadedServer, free_port, make_config
from tests.ops.test_admin_auth import Answer, _header, _request
from trizk.storage.formats import snapshot as snapfmt
from trizk.storage.formats import treeio


def _client(port: int, timeout: float) -> KazooClient:
    zk = KazooClient(hosts=f"127.0.0.1:{port}", timeout=timeout)
    zk.start(timeout=15)
    return zk


def _close(*clients: KazooClient) -> None:
    for zk in clients:
        zk.stop()
        zk.close()


# -- the stream reader (pure) ----------------------------------------------------------------


def _content() -> snapfmt.SnapshotContent:
    content = snapfmt.initial_content()
    content.sessions[0x1234] = 30000
    content.digest = snapfmt.SnapshotDigest(7, content.tree_digest(), snapfmt.DIGEST_VERSION)
    content.last_processed_zxid = 7
    return content


def test_restore_stream_reader() -> None:
    data = snapfmt.serialize(_content())
    tree, sessions = treeio.restore_from_stream(data)
    assert sessions == {0x1234: 30000}
    assert tree.last_processed_zxid == 7
    # ZKDatabase.deserializeSnapshot never reads past the last section
    tree, _ = treeio.restore_from_stream(data + b"anything")
    assert tree.last_processed_zxid == 7
    # no SnapStream around the archive: a compressed stream fails the magic check
    with pytest.raises(snapfmt.SnapshotFormatError, match="magic"):
        treeio.restore_from_stream(gzip.compress(data))
    with pytest.raises(snapfmt.SnapshotFormatError):
        treeio.restore_from_stream(b"")
    with pytest.raises(snapfmt.SnapshotFormatError):
        treeio.restore_from_stream(data[: len(data) // 2])
    # a 3.8 snapshot (no trailer): the new DataTree's lastProcessedZxid stays 0
    old = _content()
    old.last_processed_zxid = None
    tree, _ = treeio.restore_from_stream(snapfmt.serialize(old))
    assert tree.last_processed_zxid == 0


def test_restore_swaps_a_standalone_role_in_place() -> None:
    """roles.factory.restore on a standalone role: the replica object stays (every piece holds
    it), its state is the snapshot's; the session tracker holds exactly the snapshot's
    sessions, alive for their timeout from the restore and then expired; zxids go on; every
    watch is gone."""
    from trizk.jute.codes import OpCode
    from trizk.server.common.coreconfig import CoreConfig
    from trizk.server.roles.factory import restore
    from trizk.server.roles.standalone import Standalone
    from trizk.server.writes.committer import MemoryCommitter
    from trizk.storage.tree.datatree import DataTree
    from trizk.storage.tree.replica import Replica

    wall = 1_700_000_000_000
    committer = MemoryCommitter()
    replica = Replica(DataTree())
    node = Standalone(CoreConfig(tick_time=2000), replica, committer, now=0, wall=wall)
    committer.sink = node.commit
    seq = node.sequencer
    kept = seq.create_session(4000, 0, wall)
    gone = seq.create_session(4000, 0, wall)
    committer.flush()
    assert set(replica.sessions) == {kept, gone}
    zxid = seq.last_zxid
    node.front.watches.data.add("/a", "someone")
    watches = node.front.watches
    content = _content()
    content.sessions = {kept: 6000, 0x99: 30000}
    tree, sessions = treeio.restore_from_stream(snapfmt.serialize(content))
    restore(node, tree, sessions, 1000, wall + 1000)
    assert node.replica is replica and replica.tree is tree and seq.pending.tree is tree
    assert replica.sessions == {kept: 6000, 0x99: 30000}
    assert node.front.watches is not watches and "/a" not in node.front.watches.data.by_path
    assert seq.touch(kept, 1000) and seq.touch(0x99, 1000)
    assert not seq.touch(gone, 1000)  # unknown: its requests are dropped
    assert seq.last_zxid == zxid  # hzxid is not reset
    seq.tick(1000 + 6000 + 2000, wall + 9000)
    closes = [p for p in committer.queue if p.hdr.type == OpCode.CLOSESESSION]
    assert [p.hdr.clientId for p in closes] == [kept]
    assert closes[0].hdr.zxid == zxid + 1


# -- one conversation, for trizk and ZooKeeper alike -----------------------------------------

#: every server of these tests: a short tick, so that a session the restore drops times out
#: and is expired within a couple of seconds
_TICK = {"tickTime": "500"}


def _admin_keys(port: int, interval: str, **extra: str) -> dict[str, str]:
    return {
        "admin.enableServer": "true",
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": str(port),
        "admin.rateLimiterIntervalInMS": interval,
        **_TICK,
        **extra,
    }


def _shown(answer: Answer, snap_zxid: int | None = None) -> Any:
    """What a client sees of an answer: status, content type, the JSON (``last_zxid`` as
    whether it is the zxid the snapshot's header gave)."""
    status, headers, body = answer
    ctype = _header(headers, "Content-Type")
    shown: Any = None
    if ctype == "application/json":
        shown = json.loads(body)
        if "last_zxid" in shown:
            shown["last_zxid"] = shown["last_zxid"] == snap_zxid
    return status, ctype, shown


def _metrics(port: int) -> dict[str, Any]:
    _, _, body = _request(port, "GET", "/commands/monitor")
    m = json.loads(body)
    keys = ["restore_error_count", "restore_rate_limited_count", "cnt_restore_time"]
    if m["snapshot_rate_limited_count"] or m["snapshot_error_count"]:
        keys += ["snapshot_rate_limited_count", "snapshot_error_count"]
    return {k: m[k] for k in keys}


def _round_trip(client_port: int, admin_port: int) -> list[Any]:
    """Snapshot, change the tree, restore: answers, then what kazoo clients see."""
    seen: list[Any] = []
    a = _client(client_port, 30)
    events: list[Any] = []
    try:
        a.create("/a", b"v1")
        a.create("/eph", b"", ephemeral=True)
        status, headers, snap = _request(admin_port, "GET", "/commands/snapshot", "ip")
        assert status == 200
        snap_zxid = int(_header(headers, "last_zxid") or "", 16)
        a.set("/a", b"v2")
        a.create("/b", b"")
        a.get("/a", watch=lambda e: events.append(("data", e.type, e.path)))
        a.exists("/c", watch=lambda e: events.append(("exists", e.type, e.path)))
        b = _client(client_port, 2)  # a session the snapshot does not hold
        lost = threading.Event()
        b.add_listener(lambda s: lost.set() if s == KazooState.LOST else None)
        try:
            for method, path, auth, body in [
                ("POST", "/commands/restore", None, snap),
                ("POST", "/commands/rest", "bogus", snap),
                ("GET", "/commands/restore", "ip", None),
                ("POST", "/commands/restore", "ip", b""),
                ("POST", "/commands/restore", "ip", b"not a snapshot" * 8),
                ("POST", "/commands/restore", "ip", gzip.compress(snap)),
                ("POST", "/commands/restore", "ip", snap[: len(snap) // 2]),
                ("POST", "/commands/rest", "ip", snap),
            ]:
                answer = _request(admin_port, method, path, auth, body)
                seen.append((method, path, auth, _shown(answer, snap_zxid)))
            # the restored state, as the session the snapshot holds sees it
            seen.append(("a", a.get("/a")[0], a.exists("/b"), a.exists("/eph") is not None))
            a.set("/a", b"v3")
            a.create("/c", b"")
            a.sync("/")
            seen.append(("events after the restore", list(events)))  # the watches are gone
            # b's requests are dropped: its read times out, its reconnect is expired
            try:
                b.get("/a")
                seen.append(("b", "answered"))
            except ConnectionLoss:
                seen.append(("b", "connection loss"))
            seen.append(("b lost its session", lost.wait(20)))
        finally:
            _close(b)
        seen.append(("metrics", _metrics(admin_port)))
    finally:
        _close(a)
    return seen


def _rate_limited(client_port: int, admin_port: int) -> list[Any]:
    """restore's limiter reads the interval as ms: a failed restore spends the one token."""
    _, _, snap = _request(admin_port, "GET", "/commands/snapshot", "ip")
    seen = [
        _shown(_request(admin_port, "POST", "/commands/restore", "ip", b"x")),
        _shown(_request(admin_port, "POST", "/commands/restore", "ip", snap)),
        # snapshot's limiter (the same interval, read as microseconds: still 1000 s)
        _shown(_request(admin_port, "GET", "/commands/snapshot?streaming=false", "ip")),
        _metrics(admin_port),
    ]
    return seen


def _disabled(client_port: int, admin_port: int) -> list[Any]:
    zk = _client(client_port, 10)
    try:
        zk.set_acls("/", [make_digest_acl("alice", "secret", all=True)])
    finally:
        _close(zk)
    return [
        _shown(_request(admin_port, "POST", "/commands/restore", None, b"x")),
        _shown(_request(admin_port, "POST", "/commands/restore", "ip", b"x")),
        _shown(_request(admin_port, "POST", "/commands/restore", "digest alice:secret", b"x")),
        _metrics(admin_port),
    ]


# What ZooKeeper 3.9.3 answers to each conversation (test_same_restore_as_zookeeper_393 holds a
# live 3.9.3 to these; the trizk tests below hold trizk to them).
_JSON = "application/json"
_EMPTY = {"command": "restore", "error": None}
_NO_AUTH = "Auth info is missing for the command"

_ROUND_TRIP = [
    ("POST", "/commands/restore", None, (401, _JSON, {**_EMPTY, "error": _NO_AUTH})),
    (
        "POST",
        "/commands/rest",
        "bogus",
        (401, _JSON, {"command": "rest", "error": "Not authenticated"}),
    ),
    ("GET", "/commands/restore", "ip", (500, "text/html;charset=iso-8859-1", None)),
    ("POST", "/commands/restore", "ip", (500, _JSON, _EMPTY)),  # empty
    ("POST", "/commands/restore", "ip", (500, _JSON, _EMPTY)),  # not a snapshot
    ("POST", "/commands/restore", "ip", (500, _JSON, _EMPTY)),  # gzip
    ("POST", "/commands/restore", "ip", (500, _JSON, _EMPTY)),  # truncated
    ("POST", "/commands/rest", "ip", (200, _JSON, {"last_zxid": True, **_EMPTY})),
    ("a", b"v1", None, True),
    ("events after the restore", []),
    ("b", "connection loss"),
    ("b lost its session", True),
    (
        "metrics",
        {"restore_error_count": 4, "restore_rate_limited_count": 0, "cnt_restore_time": 1},
    ),
]
_RATE_LIMITED = [
    (500, _JSON, _EMPTY),
    (429, _JSON, _EMPTY),
    (429, _JSON, {"command": "snapshot", "error": None}),
    {
        "restore_error_count": 1,
        "restore_rate_limited_count": 1,
        "cnt_restore_time": 0,
        "snapshot_rate_limited_count": 1,
        "snapshot_error_count": 0,
    },
]
_DISABLED = [
    (401, _JSON, {**_EMPTY, "error": _NO_AUTH}),
    (403, _JSON, {**_EMPTY, "error": "Not authorized"}),  # auth comes first
    (503, _JSON, _EMPTY),
    {"restore_error_count": 0, "restore_rate_limited_count": 0, "cnt_restore_time": 0},
]

Scenario = Callable[[int, int], list[Any]]

#: (scenario, rate limiter interval, more keys, ZooKeeper 3.9.3's answers)
_SCENARIOS: list[tuple[Scenario, str, dict[str, str], list[Any]]] = [
    (_round_trip, "-1", {}, _ROUND_TRIP),  # a negative interval never limits
    (_rate_limited, "1000000000", {}, _RATE_LIMITED),
    (_disabled, "-1", {"admin.restore.enabled": "false"}, _DISABLED),
]


# -- a live trizk ----------------------------------------------------------------------------


@pytest.fixture
def trizk_admin(tmp_path: Path) -> Iterator[Callable[..., tuple[int, int]]]:
    started: list[ThreadedServer] = []

    def start(interval: str, **extra: str) -> tuple[int, int]:
        admin_port = free_port()
        keys = _admin_keys(admin_port, interval, **extra)
        srv = ThreadedServer(make_config(tmp_path / str(len(started)), **keys)).start()
        started.append(srv)
        assert srv.server is not None and srv.server.admin_port == admin_port
        return srv.port, admin_port

    yield start
    for srv in started:
        srv.stop()


def test_restore_round_trip(trizk_admin: Callable[..., tuple[int, int]]) -> None:
    assert _round_trip(*trizk_admin("-1")) == _ROUND_TRIP


def test_restore_rate_limit_and_switch(trizk_admin: Callable[..., tuple[int, int]]) -> None:
    assert _rate_limited(*trizk_admin("1000000000")) == _RATE_LIMITED
    assert _disabled(*trizk_admin("-1", **{"admin.restore.enabled": "false"})) == _DISABLED
    # without 3.9's lastProcessedZxid trailer there is no restore (checked before the limiter)
    _, admin_port = trizk_admin("1000000000", **{"serializeLastProcessedZxid.enabled": "false"})
    for _ in range(2):
        answer = _request(admin_port, "POST", "/commands/restore", "ip", b"x")
        assert _shown(answer) == (500, _JSON, _EMPTY)
    assert _metrics(admin_port)["restore_rate_limited_count"] == 0


def test_no_restore_as_380(tmp_path: Path) -> None:
    admin_port = free_port()
    keys = _admin_keys(admin_port, "-1", **{"trizk.zookeeperVersion": "3.8.0"})
    srv = ThreadedServer(make_config(tmp_path, **keys)).start()
    try:
        status, _, body = _request(admin_port, "GET", "/commands/restore")
        assert (status, json.loads(body)) == (
            200,
            {"command": "restore", "error": "Unknown command: restore"},
        )
        status, _, _ = _request(admin_port, "POST", "/commands/restore", "ip", b"x")
        assert status == 405
        _, _, body = _request(admin_port, "GET", "/commands/monitor")
        assert not any("restore" in k for k in json.loads(body))
    finally:
        srv.stop()


# -- side by side with ZooKeeper 3.9.3 -------------------------------------------------------


@pytest.mark.oracle
@pytest.mark.slow
def test_same_restore_as_zookeeper_393() -> None:
    """The conversations above, with a live ZooKeeper 3.9.3 (trizk gives the same answers
    in the tests above: one 3.9.3 process per scenario, no trizk process)."""
    from trizk.compat.procs import servers

    if not servers.zookeeper_available("3.9.3"):
        pytest.skip("ZooKeeper 3.9.3 is not installed")
    for scenario, interval, extra, expected in _SCENARIOS:
        admin_port = free_port()
        keys = _admin_keys(admin_port, interval, **extra)
        with servers.running("zookeeper@3.9.3", keys) as srv:
            assert scenario(srv.port, admin_port) == expected, scenario.__name__


def _ensemble_flow(
    client_ports: dict[int, int], admin_ports: dict[int, int], leader: int
) -> list[Any]:
    """Snapshots of a follower and of the leader, a write, then each restored: what clients of
    the restored member, and of the member left alone, see."""
    seen: list[Any] = []
    follower, other = (s for s in sorted(client_ports) if s != leader)
    writer = KazooClient(hosts=f"127.0.0.1:{client_ports[other]}", timeout=10)
    writer.start(timeout=15)
    try:
        writer.create("/x", b"1")
        writer.sync("/")
        snaps: dict[int, tuple[int, bytes]] = {}
        for sid in (follower, leader):
            status, headers, body = _request(admin_ports[sid], "GET", "/commands/snapshot", "ip")
            assert status == 200
            snaps[sid] = (int(_header(headers, "last_zxid") or "", 16), body)
        writer.create("/y", b"2")
        writer.sync("/")
        for role, sid in (("follower", follower), ("leader", leader)):
            zxid, body = snaps[sid]
            answer = _request(admin_ports[sid], "POST", "/commands/restore", "ip", body)
            seen.append((role, _shown(answer, zxid)))
            reader = KazooClient(hosts=f"127.0.0.1:{client_ports[sid]}", timeout=10)
            reader.start(timeout=15)
            try:
                seen.append((role, reader.exists("/x") is not None, reader.exists("/y") is None))
                writer.create(f"/after-{role}", b"")
                reader.sync("/")
                seen.append((role, "later write seen", reader.exists(f"/after-{role}") is not None))
            finally:
                _close(reader)
        seen.append(("left alone", writer.exists("/y") is not None))
    finally:
        _close(writer)
    return seen


#: what a ZooKeeper 3.9.3 ensemble answers (test_same_ensemble_restore_as_zookeeper_393)
_ENSEMBLE = [
    ("follower", (200, _JSON, {"last_zxid": True, **_EMPTY})),
    ("follower", True, True),
    ("follower", "later write seen", True),
    ("leader", (200, _JSON, {"last_zxid": True, **_EMPTY})),
    ("leader", True, True),
    ("leader", "later write seen", True),
    ("left alone", True),
]


def test_restore_on_ensemble_members() -> None:
    """ZooKeeper's RestoreCommand runs on any ZooKeeperServer and restores that member alone:
    its clients see the snapshot's tree, the other members keep theirs, and the txns
    committed afterwards apply on top of the restored tree (a follower's and a leader's)."""
    from trizk.testing.ensemble import Ensemble

    ports = {sid: free_port() for sid in (1, 2, 3)}
    member = {sid: _admin_keys(port, "-1") for sid, port in ports.items()}
    with Ensemble(3, member_properties=member) as ens:
        leader = ens.leader()
        assert leader is not None
        clients = {sid: ens.port(sid) for sid in ports}
        assert _ensemble_flow(clients, ports, leader) == _ENSEMBLE


@pytest.mark.oracle
@pytest.mark.slow
def test_same_ensemble_restore_as_zookeeper_393() -> None:
    from trizk.compat.procs import servers
    from trizk.compat.procs.ensemble import ProcessEnsemble

    if not servers.zookeeper_available("3.9.3"):
        pytest.skip("ZooKeeper 3.9.3 is not installed")
    keys = _admin_keys(0, "-1")
    del keys["admin.serverPort"], keys["tickTime"]  # one port per member, below
    kinds = dict.fromkeys((1, 2, 3), "zookeeper")
    with ProcessEnsemble(kinds, start=False, extra=keys, versions={}) as ens:
        ports = {sid: free_port() for sid in kinds}
        for sid, m in ens.members.items():
            with open(m.cfg_path, "a") as f:
                f.write(f"admin.serverPort={ports[sid]}\n")
            ens.start(sid)
        ens.wait_leader(3)
        clients = {sid: m.addrs.client_port for sid, m in ens.members.items()}
        assert _ensemble_flow(clients, ports, 3) == _ENSEMBLE
