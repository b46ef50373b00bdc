"""The ZooKeeper release trizk answers as (``trizk.zookeeperVersion``), judged against both
live oracles.

* ``test_release_differences``: every scenario of ``compat/scenarios/zookeeper39.json`` (one
  per 3.9 behaviour change: watcher types 4/5 and mode sets, ZOOKEEPER-4472/4466; the
  notification zxid, 4655; create2 in a multi, 4026; exists without READ, 2590; a check outside
  a multi; multis that fail whole; a client's deleteContainer; checkWatches of a null path) runs
  on ZooKeeper 3.8.0, ZooKeeper 3.9.3, trizk at 3.8.0 and trizk at 3.9.3, each on a fresh
  server. trizk must answer exactly as the oracle of its release, and the two oracles must
  differ (so the scenario does test a change).
* ``test_version_strings``: ``srvr``, ``envi`` and mntr's ``zk_version`` name the release in
  ZooKeeper's shape on both oracles and on trizk at each release.
"""

from __future__ import annotations

from typing import Any

import pytest

from trizk.compat.oracle.compare import SCENARIO_DIR, diff_transcripts, load_scenarios, run_on
from trizk.compat.oracle.normalise import normalise
from trizk.compat.procs import servers
from trizk.server.common import release
from trizk.testing.probes import four_letter

from .conftest import require_zookeeper

pytestmark = pytest.mark.slow

SCENARIOS = {sc["name"]: sc for sc in load_scenarios() if sc["name"].startswith("zk39_")}


def _run(kind: str, sc: dict[str, Any]) -> Any:
    return normalise(run_on(kind, sc))


def test_the_scenarios_are_in_the_suite() -> None:
    assert (SCENARIO_DIR / "zookeeper39.json").exists()
    assert len(SCENARIOS) >= 10


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_release_differences(name: str) -> None:
    for v in release.RELEASES:
        require_zookeeper(v)
    sc = SCENARIOS[name]
    oracles = {v: _run(f"zookeeper@{v}", sc) for v in release.RELEASES}
    assert diff_transcripts(name, sc["steps"], oracles[release.ZK380], oracles[release.ZK393]), (
        f"{name}: ZooKeeper 3.8.0 and 3.9.3 answer alike; the scenario tests no change"
    )
    for v in release.RELEASES:
        diffs = diff_transcripts(name, sc["steps"], _run(f"trizk@{v}", sc), oracles[v])
        assert not diffs, "\n".join(d.render(f"trizk@{v}", f"zookeeper@{v}") for d in diffs)


@pytest.mark.parametrize("version", release.RELEASES)
def test_version_strings(version: str) -> None:
    require_zookeeper(version)
    for kind in ("zookeeper", "trizk"):
        with servers.running(f"{kind}@{version}") as srv:
            srvr = four_letter(srv.port, "srvr").splitlines()[0]
            envi = four_letter(srv.port, "envi").splitlines()[1]
            mntr = four_letter(srv.port, "mntr").splitlines()[0]
            assert srvr.startswith(f"Zookeeper version: {version}-"), (kind, srvr)
            assert envi.startswith(f"zookeeper.version={version}-"), (kind, envi)
            assert mntr.startswith(f"zk_version\t{version}-"), (kind, mntr)
            assert srvr.endswith(" UTC") and ", built on " in srvr


@pytest.mark.parametrize("version", release.RELEASES)
def test_mntr_names_in_the_releases_order(version: str) -> None:
    """mntr's names, in order, as the release prints them (3.9.3: four more counters and the
    restore_time summary, and the counters in another order)."""
    require_zookeeper(version)
    names = {}
    for kind in ("zookeeper", "trizk"):
        with servers.running(f"{kind}@{version}") as srv:
            text = four_letter(srv.port, "mntr")
            names[kind] = [line.split("\t")[0] for line in text.splitlines()]
    # per-namespace summary sets follow traffic (the readiness probe's); not compared here
    for kind in names:
        names[kind] = [n for n in names[kind] if not n.endswith("_per_namespace")]
    assert names["trizk"] == names["zookeeper"]


def test_trizk_member_answers_as_393_beside_393_members() -> None:
    """A trizk member answering as 3.9.3 between two ZooKeeper 3.9.3 members: its version line,
    a notification with the zxid of the write (made through a ZooKeeper member) and exists
    without READ as NOAUTH, as the ZooKeeper members answer."""
    require_zookeeper("3.9.3")
    from trizk.compat.oracle.rawclient import RawClient
    from trizk.compat.procs.ensemble import ProcessEnsemble
    from trizk.jute import records as R
    from trizk.jute.codes import Code, OpCode

    kinds = {1: "zookeeper", 2: "trizk", 3: "zookeeper"}
    versions = {1: "3.9.3", 2: "3.9.3", 3: "3.9.3"}
    with ProcessEnsemble(kinds, versions=versions) as ens:
        ens.wait_leader(3)
        assert four_letter(ens.port(2), "srvr").startswith("Zookeeper version: 3.9.3-trizk-")
        writer = RawClient("127.0.0.1", ens.port(1))
        writer.connect()
        acl = (R.ACL(30, R.Id("world", "anyone")),)  # everything but READ
        open_acl = (R.ACL(31, R.Id("world", "anyone")),)  # a watcher needs READ to be told
        _, made = writer.read_until_reply(
            writer.send(OpCode.CREATE, R.CreateRequest("/w", b"", acl, 0))
        )
        assert made.err == 0
        answers = {}
        for sid in (2, 1):
            c = RawClient("127.0.0.1", ens.port(sid))
            c.connect()
            _, rep = c.read_until_reply(c.send(OpCode.EXISTS, R.ExistsRequest("/w", False)))
            _, rep2 = c.read_until_reply(c.send(OpCode.EXISTS, R.ExistsRequest("/w2", True)))
            _, done = writer.read_until_reply(
                writer.send(OpCode.CREATE, R.CreateRequest("/w2", b"", open_acl, 0))
            )
            event = c.read_packet()
            answers[sid] = (rep.err, rep2.err, getattr(event, "zxid", None) == done.zxid)
            _, gone = writer.read_until_reply(
                writer.send(OpCode.DELETE, R.DeleteRequest("/w2", -1))
            )
            assert gone.err == 0
            c.close()
        writer.close()
        assert answers[2] == answers[1] == (Code.NOAUTH, Code.NONODE, True)
