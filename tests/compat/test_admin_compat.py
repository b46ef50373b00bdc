"""The AdminServer against ZooKeeper 3.8.0's Jetty AdminServer: the same kazoo session on both,
then every command (primary names and aliases) over HTTP. Compared: the HTML command list
byte for byte, status and Content-Type, every answer's member names *in order* and their JSON
types (recursively), and the values that do not depend on time, ports or session ids."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

import pytest
from kazoo.client import KazooClient

from trizk.compat.procs import servers
from trizk.server.ops import admin
from trizk.testing.ports import free_port

from .conftest import require_zookeeper

#: Values compared exactly (after session ids are numbered in order of appearance).
EXACT = {
    "ruok",
    "is_read_only",
    "get_trace_mask",
    "leader",
    "observers",
    "voting_view",
    "zabstate",
    "watch_summary",
    "watches",
    "watches_by_path",
    "connection_stat_reset",
    "stat_reset",
    "observer_connection_stat_reset",
    "no_such_command",
    "set_trace_mask",
    "set_trace_mask?traceMask=abc",
    "set_trace_mask?traceMask=306",
}
#: ZooKeeper 3.9's AdminServer commands trizk does not serve yet (``snapshot`` and
#: ``restore``, behind the AdminServer's authentication, are served: tests/ops/test_admin_auth
#: and test_admin_restore).
NOT_SERVED_39: tuple[str, ...] = ()
#: Member names whose values are ZooKeeper's JVM (compared as "string map" only).
JVM_KEYED = {"system_properties", "sysp"}
#: monitor's per-namespace summary sets (``<ns>_read_per_namespace``...) appear after traffic
#: in ZooKeeper; trizk does not keep them (docs/operations.md: metrics not measured).
PER_NAMESPACE = re.compile(r"^(avg|min|max|cnt|sum)_.*_(read|write)_per_namespace$")


def _get(port: int, path: str) -> tuple[int, str | None, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode("latin-1")


def _session(srv: servers.Server) -> KazooClient:
    zk = KazooClient(hosts=srv.address, timeout=10)
    zk.start(timeout=20)
    zk.create("/e", b"x", ephemeral=True)
    zk.create("/p", b"data")
    zk.get("/zookeeper", watch=lambda e: None)
    zk.get_children("/", watch=lambda e: None)
    zk.exists("/nope", watch=lambda e: None)
    return zk


def _shape(v: Any) -> Any:
    if isinstance(v, dict):
        return [(k, _shape(x)) for k, x in v.items()]
    if isinstance(v, list):
        return [_shape(x) for x in v]
    return type(v).__name__


def _renumber(v: Any, sids: dict[int, int]) -> Any:
    """Session ids (large ints, and their decimal strings as map keys) -> 0, 1, ..."""

    def sid(n: int) -> int:
        return sids.setdefault(n, len(sids))

    if isinstance(v, dict):
        return {
            (f"sid{sid(int(k))}" if k.isdigit() and int(k) > 2**32 else k): _renumber(x, sids)
            for k, x in v.items()
        }
    if isinstance(v, list):
        return [_renumber(x, sids) for x in v]
    if isinstance(v, int) and not isinstance(v, bool) and v > 2**32:
        return f"sid{sid(v)}"
    return v


def _normalise(answer: dict[str, Any]) -> dict[str, Any]:
    """What legitimately differs between two runs of the same session."""
    out = _renumber(answer, {})
    if "server_stats" in out:
        # Jackson orders ServerStats' getters as reflection lists them: it changes from one
        # ZooKeeper run to the next (uptime first or last), so compare them sorted.
        out["server_stats"] = dict(sorted(out["server_stats"].items()))
    if "expiry_time_to_session_ids" in out:
        # monotonic bucket times; ZooKeeper's ExpiryQueue also keeps emptied buckets
        # (numbered after dropping the empty ones: an emptied bucket must not shift the names)
        buckets = [b for b in out["expiry_time_to_session_ids"].values() if b]
        out["expiry_time_to_session_ids"] = {f"t{i}": b for i, b in enumerate(buckets)}
    return out


def _all_paths() -> list[str]:
    paths = [f"/commands/{n}" for c in admin.COMMANDS for n in c.names]
    paths += [
        "/commands/no_such_command",
        "/commands/set_trace_mask?traceMask=abc",
        "/commands/set_trace_mask?traceMask=306",
    ]
    return paths


def _collect(srv: servers.Server, port: int) -> dict[str, tuple[int, str | None, str]]:
    zk = _session(srv)
    try:
        out = {p: _get(port, p) for p in _all_paths()}
        out["/commands"] = _get(port, "/commands")
        out["/commands/"] = _get(port, "/commands/")
        out["/other"] = _get(port, "/other")
    finally:
        zk.stop()
        zk.close()
    return out


def _start(kind: str, version: str = "3.8.0") -> tuple[servers.Server, int]:
    port = free_port()
    cfg = {
        "admin.enableServer": "true",
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": str(port),
    }
    return servers.start(f"{kind}@{version}", cfg), port


@pytest.mark.parametrize("version", ["3.8.0", "3.9.3"])
def test_admin_server_answers_as_zookeeper(version: str) -> None:
    """(trizk answering as ``version``, against that ZooKeeper release.)"""
    require_zookeeper(version)
    zk_srv, zk_port = _start("zookeeper", version)
    try:
        zk = _collect(zk_srv, zk_port)
    finally:
        zk_srv.stop()
    tz_srv, tz_port = _start("trizk", version)
    try:
        tz = _collect(tz_srv, tz_port)
    finally:
        tz_srv.stop()

    # the command list: same HTML, so the same set of primary names
    for page in ("/commands", "/commands/"):
        zs, zt, zb = zk[page]
        if version != "3.8.0":
            for name in NOT_SERVED_39:
                zb = zb.replace(f'<a href="/commands/{name}">{name}</a>\n<br/>\n', "")
        assert tz[page] == (zs, zt, zb)
    assert (tz["/other"][0], zk["/other"][0]) == (404, 404)

    problems = []
    for path in _all_paths():
        zs, zt, zb = zk[path]
        ts, tt, tb = tz[path]
        if (zs, zt) != (ts, tt):
            problems.append(f"{path}: HTTP {ts} {tt}, ZooKeeper {zs} {zt}")
            continue
        if zt != "application/json":
            # 3.9's POST-only restore, asked with GET: Jetty's 500 page (its stack trace is
            # Java's), compared by status and type only
            continue
        zj, tj = json.loads(zb), json.loads(tb)
        name = path.removeprefix("/commands/")
        if name in JVM_KEYED:
            assert (tj.pop("command"), tj.pop("error")) == ("system_properties", None)
            # Java's system properties vs Python's: only the zoo.cfg keys must be there (the
            # java command line adds -Dzookeeper.jmx.log4j.disable).
            zk_own = {k for k in zj if k.startswith("zookeeper.") and ".jmx." not in k}
            tz_own = {k for k in tj if k.startswith("zookeeper.")}
            if zk_own != tz_own or not all(isinstance(v, str) for v in tj.values()):
                problems.append(f"{path}: zookeeper.* properties {tz_own} != {zk_own}")
            if list(tj) != sorted(tj):
                problems.append(f"{path}: not sorted")
            continue
        if name in ("monitor", "mntr"):
            # the per-namespace summaries: the same keys (their order is a Java HashMap's)
            zns = {k for k in zj if PER_NAMESPACE.match(k)}
            tns = {k for k in tj if PER_NAMESPACE.match(k)}
            if zns != tns:
                problems.append(f"{path}: per-namespace keys {sorted(tns)} != {sorted(zns)}")
            zj = {k: v for k, v in zj.items() if k not in zns}
            tj = {k: v for k, v in tj.items() if k not in tns}
        zj, tj = _normalise(zj), _normalise(tj)
        if _shape(tj) != _shape(zj):
            problems.append(f"{path}: shape\n  trizk     {_shape(tj)}\n  zookeeper {_shape(zj)}")
            continue
        if name in EXACT and _renumber(tj, {}) != _renumber(zj, {}):
            problems.append(f"{path}: values\n  trizk     {tj}\n  zookeeper {zj}")
        # the body is Jackson's pretty printing
        if tb.strip() != admin.jackson_json(json.loads(tb)):
            problems.append(f"{path}: not in Jackson's layout")
    assert not problems, "\n".join(problems)
