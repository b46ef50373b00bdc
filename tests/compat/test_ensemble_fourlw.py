"""Four-letter words of ensemble members against ZooKeeper 3.8.0 in the same role.

Mixed ensembles hold a trizk and a ZooKeeper member in the same role (two followers; and the
leader of one kind beside a follower of the other, both ways round), so each answer is
compared with ZooKeeper's for the same role of the same ensemble: ``srvr`` (Mode, the
leader's "Proposal sizes" line), ``conf`` (serverId, quorum settings, membership) and ``mntr``
(the keys in ZooKeeper's order, role values such as zk_peer_state and zk_synced_followers).
The leader's per-learner summary sets (``zk_*_<sid>_learner_handler_qp_size`` and
``_time_ms``) are compared too; ``zk_*_zookeeper_write_per_namespace`` is not produced by trizk
and is left out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from tests.ensemble_helpers import client
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.servers import zookeeper_available
from trizk.testing.probes import four_letter

pytestmark = pytest.mark.skipif(
    not zookeeper_available(), reason="Apache ZooKeeper is not installed"
)

#: conf keys whose values are per member (ports, paths, sizes, ids)
_PER_MEMBER = {
    "clientPort", "dataDir", "dataDirSize", "dataLogDir", "dataLogSize", "serverId",
    "electionPort", "quorumPort",
}  # fmt: skip
_ROLE_KEYS = (
    "zk_server_state", "zk_peer_state", "zk_quorum_size", "zk_synced_followers",
    "zk_synced_non_voting_followers", "zk_synced_observers", "zk_learners", "zk_pending_syncs",
    "zk_min_proposal_size", "zk_max_proposal_size", "zk_last_proposal_size",
)  # fmt: skip
#: ServerMetrics a follower moves for every txn of the ensemble (Follower.processPacket,
#: SyncRequestProcessor): over the same writes, the same amounts on followers of both kinds
#: (compared as deltas: wait_leader may have restarted a member, resetting its counters)
_LEARNER_COUNTS = (
    "zk_learner_proposal_received_count", "zk_learner_commit_received_count",
    "zk_cnt_proposal_latency", "zk_cnt_commit_propagation_latency",
    "zk_sync_processor_request_queued", "zk_proposal_count", "zk_commit_count",
    "zk_prep_processor_request_queued", "zk_outstanding_changes_queued",
)  # fmt: skip
#: once per election / sync: at least once on every member
_ONCE_PER_ROLE = ("zk_looking_count", "zk_cnt_election_time", "zk_cnt_unavailable_time")


def _mntr(port: int) -> tuple[list[str], dict[str, str]]:
    lines = [ln.split("\t", 1) for ln in four_letter(port, "mntr").splitlines() if "\t" in ln]
    keys = [k for k, _ in lines if "write_per_namespace" not in k]
    return keys, dict(lines)


def _conf(port: int) -> list[str]:
    out = []
    for line in four_letter(port, "conf").splitlines():
        key, sep, _ = line.partition("=")
        out.append(f"{key}=*" if sep and key in _PER_MEMBER else line)
    return out


@pytest.mark.parametrize(
    "kinds",
    [
        {1: "zookeeper", 2: "trizk", 3: "trizk"},  # trizk leader, a follower of each kind
        {1: "trizk", 2: "zookeeper", 3: "zookeeper"},  # ZooKeeper leader, the same
    ],
    ids=["trizk-leader", "zookeeper-leader"],
)
def test_fourlw_of_each_role_as_zookeeper(kinds: dict[int, str]) -> None:
    with ProcessEnsemble(kinds) as ens:
        modes = ens.wait_leader(3)
        assert modes == {1: "follower", 2: "follower", 3: "leader"}
        zk_f, tz_f = (1, 2) if kinds[1] == "zookeeper" else (2, 1)
        with _writes(ens) as before:
            _compare_roles(ens, zk_f, tz_f, before)


def _moved(before: dict[str, str], after: dict[str, str], keys: tuple[str, ...]) -> list[int]:
    return [int(after[k]) - int(before[k]) for k in keys]


def _compare_roles(
    ens: ProcessEnsemble, zk_f: int, tz_f: int, before: dict[int, dict[str, str]]
) -> None:
    """Each member's answers against ZooKeeper's for the same role."""
    # followers of both kinds, same ensemble: same keys, same order, same role values
    for a, b in [(zk_f, tz_f)]:
        ka, va = _mntr(ens.port(a))
        kb, vb = _mntr(ens.port(b))
        assert kb == ka
        assert [vb.get(k) for k in _ROLE_KEYS] == [va.get(k) for k in _ROLE_KEYS]
        moved = _moved(before[a], va, _LEARNER_COUNTS)
        assert _moved(before[b], vb, _LEARNER_COUNTS) == moved
        assert moved[0] == moved[1] >= 7  # 5 creates, a session opened and closed
        for v in (va, vb):
            assert all(int(v[k]) >= 1 for k in (*_ONCE_PER_ROLE, "zk_cnt_follower_sync_time"))
        assert _conf(ens.port(b)) == _conf(ens.port(a))
    # the leader against ZooKeeper's leader keys (captured in the other orientation,
    # so compare the leader's key order with a follower's plus the leader-only gauges)
    kl, vl = _mntr(ens.port(3))
    assert vl["zk_server_state"] == "leader"
    assert vl["zk_peer_state"] == "leading - broadcast"
    assert vl["zk_synced_followers"] == "2" and vl["zk_learners"] == "2"
    # Leader.propose / commit / tryToCommit: once per txn, as the followers received them
    counts = ("zk_proposal_count", "zk_commit_count", "zk_cnt_quorum_ack_latency")
    assert _moved(before[3], vl, counts) == [moved[0]] * 3
    assert all(int(vl[k]) >= 1 for k in (*_ONCE_PER_ROLE, "zk_cnt_leader_unavailable_time"))
    kf, _ = _mntr(ens.port(zk_f))
    if ens.members[3].kind == "trizk":
        assert [k for k in kl if k in kf] == kf  # the follower's keys, in the same order
    else:
        # ZooKeeper's leader against ZooKeeper's follower: its mntr order comes from hashed
        # maps whose sizes differ by role, and a 3.9.3 leader once printed zk_num_alive_connections
        # before zk_avg_latency where its follower had the reverse (CI, 2026-11-27); what
        # trizk's followers print is compared with the ZooKeeper follower's above
        assert set(kf) <= set(kl)
    srvr = four_letter(ens.port(3), "srvr")
    assert "Mode: leader\n" in srvr
    assert "Proposal sizes last/min/max: " in srvr
    for s in (1, 2):
        assert "Proposal sizes" not in four_letter(ens.port(s), "srvr")
    # conf: serverId, quorum settings and the membership, as ZooKeeper prints them
    conf = four_letter(ens.port(tz_f), "conf")
    assert f"serverId={tz_f}\n" in conf and "membership: \n" in conf
    assert conf.rstrip().endswith("version=0")


@contextlib.contextmanager
def _writes(ens: ProcessEnsemble) -> Iterator[dict[int, dict[str, str]]]:
    """A session on each follower (synced: every member has applied the same txns), every
    member's mntr, five creates through the leader in a session of its own, then a sync
    through each follower; yields the mntr values taken before the writes."""
    followers = [client(ens.hosts([sid])) for sid in (1, 2)]
    try:
        for zf in followers:
            zf.sync("/")
        before = {sid: _mntr(ens.port(sid))[1] for sid in (1, 2, 3)}
        zk = client(ens.hosts([3]))
        try:
            for i in range(5):
                zk.create(f"/m{i}", b"x")
        finally:
            zk.stop()
            zk.close()
        for zf in followers:
            zf.sync("/")
        yield before
    finally:
        for zf in followers:
            zf.stop()
            zf.close()


@pytest.fixture(scope="module")
def leader_keys() -> dict[str, list[str]]:
    """mntr keys of a ZooKeeper leader and of a trizk leader, each beside followers."""
    out = {}
    for kind in ("zookeeper", "trizk"):
        other = "trizk" if kind == "zookeeper" else "zookeeper"
        with ProcessEnsemble({1: other, 2: other, 3: kind}) as ens:
            ens.wait_leader(3)
            out[kind] = _mntr(ens.port(3))[0]
    return out


#: Keys whose relative order a ZooKeeper leader does not keep from run to run: their Java
#: String hashes fall in one bin of a table of up to 64 entries (bin 2 for both), and within a
#: bin a Java hash map keeps insertion order, which the leader's threads race on; in a larger
#: table they are apart (num_alive_connections first, as trizk and a standalone ZooKeeper print).
_RACED_PAIR = ("zk_num_alive_connections", "zk_avg_latency")


def test_leader_mntr_keys_in_zookeepers_order(leader_keys: dict[str, list[str]]) -> None:
    trizk, zookeeper = leader_keys["trizk"], leader_keys["zookeeper"]
    if trizk != zookeeper:
        # the one order ZooKeeper itself does not hold: the raced pair swapped, every other
        # key where it was
        first, second = _RACED_PAIR
        i = trizk.index(first)
        assert trizk[i + 1] == second
        swapped = [*trizk[:i], second, first, *trizk[i + 2 :]]
        assert swapped == zookeeper
