"""Reconfig-enabled ensembles (``reconfigEnabled=true``) against ZooKeeper 3.8.0: the files a
member writes and ``/zookeeper/config``.

A 3-member ensemble started from zoo.cfg files holding their ``server.N`` lines: once a leader
is established every member has ``zoo.cfg.bak`` (the zoo.cfg as written),
``zoo.cfg.dynamic.100000000`` (the membership at the version of the first epoch's NEWLEADER
zxid) and a zoo.cfg rewritten without its membership, pointing at that file; and
``/zookeeper/config`` holds the configuration with ``version=100000000``, its Stat mzxid that
version, version -1, aversion -1, ACL world:anyone READ. After every member is restarted from
the rewritten zoo.cfg (a new epoch, a new leader) nothing changes. The same transcript --
paths, ports and mtime normalised -- is taken of an all-ZooKeeper ensemble, an all-trizk one
and mixed ones (a trizk leader with a ZooKeeper follower, a ZooKeeper leader with trizk
followers: sids 2 and 3 are of one kind, and one of them leads), and they must be equal, with
``/zookeeper/config`` equal on every member. A single member with ``standaloneEnabled=false``
is a one-member ensemble and does the same.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.compat.conftest import require_zookeeper
from trizk.compat.procs.ensemble import ProcessEnsemble

EXTRA = {"reconfigEnabled": "true", "4lw.commands.whitelist": "*"}


def _normalise(text: str, ens: ProcessEnsemble) -> str:
    for sid, m in ens.members.items():
        text = text.replace(str(m.workdir.resolve()), f"<m{sid}>")
        text = text.replace(str(m.workdir), f"<m{sid}>")
        a = m.addrs
        for name, port in (("q", a.quorum_port), ("e", a.election_port), ("c", a.client_port)):
            text = re.sub(rf"(?<=[:=]){port}(?!\d)", f"<{name}{sid}>", text)
    return text


def _transcript(ens: ProcessEnsemble) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for sid, m in ens.members.items():
        files = sorted(f for f in os.listdir(m.workdir) if f.startswith("zoo.cfg"))
        out[f"files {sid}"] = files
        for f in files:
            out[f"{f} {sid}"] = _normalise((m.workdir / f).read_text(), ens)
        zk = KazooClient(hosts=f"127.0.0.1:{ens.port(sid)}", timeout=10)
        zk.start(timeout=20)
        try:
            data, st = zk.get("/zookeeper/config")
            acls, _ = zk.get_acls("/zookeeper/config")
        finally:
            zk.stop()
            zk.close()
        out[f"/zookeeper/config {sid}"] = _normalise(data.decode(), ens)
        out[f"stat {sid}"] = (st.czxid, st.mzxid, st.ctime, st.version, st.aversion, st.pzxid)
        out[f"acl {sid}"] = [(a.perms, a.id.scheme, a.id.id) for a in acls]
    return out


def _run(kinds: dict[int, str], extra: dict[str, str] = EXTRA) -> list[dict[str, Any]]:
    with ProcessEnsemble(kinds, extra=extra) as ens:
        ens.wait_serving()
        first = _transcript(ens)
        first["leader"] = ens.leader()
        for sid in kinds:
            ens.stop(sid)
        for sid in kinds:
            ens.start(sid)
        ens.wait_serving()
        again = _transcript(ens)
        return [first, again]


@pytest.fixture(scope="module")
def zookeeper_transcript() -> list[dict[str, Any]]:
    require_zookeeper()
    return _run({1: "zookeeper", 2: "zookeeper", 3: "zookeeper"})


@pytest.mark.slow
@pytest.mark.xdist_group("reconfig_files")
@pytest.mark.parametrize(
    "kinds",
    ["trizk,trizk,trizk", "zookeeper,trizk,trizk", "trizk,zookeeper,zookeeper"],
    ids=["trizk", "trizk-leader", "zookeeper-leader"],
)
def test_reconfig_files_as_zookeeper(
    kinds: str, zookeeper_transcript: list[dict[str, Any]]
) -> None:
    members = dict(enumerate(kinds.split(","), 1))
    got = _run(members)
    first, again = zookeeper_transcript
    # the leader is 2 or 3 (whichever the first two members to start elect)
    assert members[got[0].pop("leader")] == members[3]
    assert {**got[0], "leader": first["leader"]} == first
    assert got[1] == again
    # what ZooKeeper shows (pinned, so that an oracle change is noticed)
    assert first["files 1"] == ["zoo.cfg", "zoo.cfg.bak", "zoo.cfg.dynamic.100000000"]
    assert first["stat 1"] == (0, 0x100000000, 0, -1, -1, 0)
    assert first["acl 1"] == [(1, "world", "anyone")]
    for t in (first, again):
        shown = {t[f"/zookeeper/config {sid}"] for sid in (1, 2, 3)}
        assert len(shown) == 1 and shown.pop().endswith("\nversion=100000000")


@pytest.mark.slow
def test_single_member_with_standalone_disabled() -> None:
    require_zookeeper()
    extra = {**EXTRA, "standaloneEnabled": "false"}
    want = _run({1: "zookeeper"}, extra)
    assert want[0]["/zookeeper/config 1"].endswith("\nversion=100000000")
    assert _run({1: "trizk"}, extra) == want
