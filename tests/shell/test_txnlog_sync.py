"""A leader's DIFF from its on-disk txn log (:meth:`Persistence.proposals_from_txnlog`, the
``txnlog`` a trizk leader is given): ``zookeeper.snapshotSizeFactor`` read as ZKDatabase reads
it, the size rule against the newest snapshot, a purged log, and the sync the pure leader plans
from the files (``LearnerHandler.syncFollower``: DIFF, TRUNC, SNAP on a gap)."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from tests.storage.test_txnlog_sync import entry, write_logs
from trizk.quorum.zab.leader import sync_follower
from trizk.quorum.zab.zab import Entry
from trizk.quorum.zab.zabwire import PacketType, make_zxid
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.shell.persistence import Persistence, PersistenceSettings
from trizk.storage.disk import files
from trizk.storage.formats import snapshot, txnlog


def config(data_dir: Path | str = "/d", **keys: str | int) -> PersistenceSettings:
    return PersistenceSettings.from_config(
        ServerConfig.create(str(data_dir), clientPort=2181, **keys)  # type: ignore[arg-type]
    )


def factor(value: str) -> float:
    return config(**{"snapshotSizeFactor": value}).snapshot_size_factor


def test_snapshot_size_factor_as_zkdatabase_reads_it(caplog: pytest.LogCaptureFixture) -> None:
    assert config().snapshot_size_factor == 0.33
    assert factor("0.5") == 0.5
    assert factor(" 1 ") == 1.0
    assert factor("-1") == -1.0  # off
    assert factor("0") == 0.0
    assert factor("1.01") == 0.33  # above 1: the default, with a warning
    assert factor("Infinity") == 0.33
    assert factor("lots") == 0.33  # NumberFormatException: the default, logged
    assert "Error parsing zookeeper.snapshotSizeFactor" in caplog.text
    assert "zookeeper.snapshotSizeFactor is invalid" in caplog.text


def test_negative_or_nan_factor_turns_txnlog_sync_off(tmp_path: Path) -> None:
    for value in ("-1", "-0.01", "NaN"):
        p = Persistence(config(tmp_path, snapshotSizeFactor=value))
        assert p.txnlog_source() is None
    assert Persistence(config(tmp_path, snapshotSizeFactor="-0")).txnlog_source() is not None


def setup_dir(tmp_path: Path, factor: str, runs: list[range]) -> Persistence:
    p = Persistence(config(tmp_path, snapshotSizeFactor=factor))
    d = p.settings.txnlog_dir
    d.mkdir(parents=True)
    write_logs(d, runs, prealloc=0)
    return p


def snap(p: Persistence, zxid: int, size: int) -> None:
    """A snapshot file that looks valid (``isValidSnapshot``), ``size`` bytes long."""
    body = snapshot.serialize(snapshot.initial_content())
    assert size >= len(body)
    # the check reads the tail only: pad in front of a real snapshot's seal
    files.write_snapshot(p.settings.snap_dir, zxid, b"\0" * (size - len(body)) + body)


def zxids(source: object) -> list[int]:
    return [e.zxid for e in source]  # type: ignore[attr-defined]


def test_size_rule_against_the_newest_snapshot(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    p = setup_dir(tmp_path, "0.5", [range(1, 51), range(51, 101)])
    # what counts: the files after the one holding the first txn read (getStorageSize)
    size = (p.settings.txnlog_dir / "log.33").stat().st_size
    assert zxids(p.proposals_from_txnlog(10)) == list(range(9, 101))  # no snapshot: no bound
    snap(p, 0, 2 * size)
    assert zxids(p.proposals_from_txnlog(10)) == list(range(9, 101))  # exactly at the limit
    snap(p, 5, 2 * size - 2)
    assert list(p.proposals_from_txnlog(10)) == []
    assert f"Txnlog size: {size} exceeds sizeLimit: {size - 1}" in caplog.text
    # an invalid newest snapshot is skipped (findMostRecentSnapshot looks for a valid one)
    (p.settings.snap_dir / "snapshot.9").write_bytes(b"garbage that is no snapshot")
    assert list(p.proposals_from_txnlog(10)) == []
    p0 = Persistence(config(tmp_path, snapshotSizeFactor="0"))
    assert zxids(p0.proposals_from_txnlog(10)) == list(range(9, 101))  # 0: no bound
    # from the last file on, nothing is left to count: within any limit (ZooKeeper's DIFF
    # from one long preallocated log)
    assert zxids(p.proposals_from_txnlog(60)) == list(range(59, 101))


def test_commit_log_count_as_zkdatabase_reads_it(caplog: pytest.LogCaptureFixture) -> None:
    assert config().commit_log_count == 500
    assert config(commitLogCount="800").commit_log_count == 800
    assert config(commitLogCount="499").commit_log_count == 500  # below: the recommended
    assert "less than the recommended 500" in caplog.text
    assert config(commitLogCount="lots").commit_log_count == 500
    assert "Error parsing zookeeper.commitLogCount" in caplog.text


def test_a_purged_log_cannot_serve(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = setup_dir(tmp_path, "0.33", [range(50, 60), range(60, 70)])
    assert list(p.proposals_from_txnlog(49)) == []
    assert "Unable to find proposals from txnlog for zxid: 0x31" in caplog.text
    assert zxids(p.proposals_from_txnlog(50)) == list(range(50, 70))
    assert zxids(p.proposals_from_txnlog(65)) == list(range(64, 70))


def E(z: int) -> Entry:
    return Entry(z, b"")


def plan(p: Persistence, peer: int, last: int, committed: list[int]) -> tuple[object, ...]:
    need_snap, current, out = sync_follower(
        peer, last, [E(z) for z in committed], p.txnlog_source()
    )
    props = [q.zxid for q in out if q.type == PacketType.PROPOSAL]
    op = (PacketType(out[0].type).name, out[0].zxid) if out else None
    return need_snap, op, props[:2], props[-1:], current


def test_the_leader_plans_a_diff_from_the_files(tmp_path: Path) -> None:
    e = make_zxid(3, 0)
    p = setup_dir(tmp_path, "0.33", [range(e + 1, e + 4001), range(e + 4001, e + 10_001)])
    last = e + 10_000
    committed = list(range(last - 499, last + 1))  # the newest 500 (commitLogCount)
    # the peer away since e+100: DIFF with everything after it, from the log then the
    # committed log, each txn once, up to the last committed (not beyond it)
    need_snap, op, head, tail, current = plan(p, e + 100, last, committed)
    assert (need_snap, op, head, tail, current) == (
        False,
        ("DIFF", last),
        [e + 101, e + 102],
        [last],
        last,
    )
    # the txns come from the files as the leader logged them
    _, _, out = sync_follower(e + 100, last, [E(z) for z in committed], p.txnlog_source())
    first = next(q for q in out if q.type == PacketType.PROPOSAL)
    assert first.data == txnlog.encode_payload(entry(e + 101))
    # a peer with a txn the leader never had in this epoch: TRUNC to the one before it
    p2 = setup_dir(tmp_path / "b", "0.33", [range(e + 1, e + 50), range(e + 51, e + 1001)])
    assert plan(p2, e + 50, e + 1000, list(range(e + 600, e + 1001)))[:2] == (
        False,
        ("TRUNC", e + 49),
    )
    # a gap between the end of the log and the committed log: SNAP
    p3 = setup_dir(tmp_path / "c", "0.33", [range(e + 1, e + 300)])
    assert plan(p3, e + 100, e + 1000, list(range(e + 600, e + 1001)))[0] is True


def test_what_the_leader_logged_beyond_its_committed_log_is_not_sent(tmp_path: Path) -> None:
    """Proposals logged but not committed (after lastProcessedZxid) sit in the same files; the
    DIFF stops at the newest committed txn."""
    p = setup_dir(tmp_path, "0.33", [range(1, 1001)])
    need_snap, op, _, tail, current = plan(p, 10, 900, list(range(401, 901)))
    assert (need_snap, op, tail, current) == (False, ("DIFF", 900), [900], 900)
    # an empty committed log: min = max = lastProcessedZxid
    assert plan(p, 10, 700, [])[1:] == (("DIFF", 700), [11, 12], [700], 700)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3), st.integers(1, 4)), min_size=1, max_size=40),
    st.sets(st.integers(0, 39), max_size=4),
    st.integers(0, 45),
    st.integers(0, 12),
    st.data(),
)
def test_the_plan_from_the_files_is_the_plan_from_every_txn_they_hold(
    steps: list[tuple[int, int]],
    rolls: set[int],
    peer_at: int,
    committed_n: int,
    data: st.DataObject,
) -> None:
    """What the reader leaves out (the txns below the peer's zxid but the newest) changes
    nothing in ``LearnerHandler.syncFollower``'s plan against ``FileTxnIterator``'s whole
    files."""
    zxids: list[int] = []
    epoch, counter = 1, 0
    for de, dc in steps:  # epochs and counters that go up, with gaps
        if de > 1:
            epoch, counter = epoch + de - 1, 0
        counter += dc
        zxids.append(make_zxid(epoch, counter))
    runs: list[range] = []
    start = 0
    for i in sorted(rolls | {len(zxids)}):
        if start < i <= len(zxids):
            runs.append(range(start, i))
            start = i
    with tempfile.TemporaryDirectory() as d:
        p = Persistence(config(d))
        p.settings.txnlog_dir.mkdir(parents=True)
        w = files.TxnLogWriter(p.settings.txnlog_dir, prealloc_size=0, force_sync=False)
        for run in runs:
            w.append(entry(zxids[i]) for i in run)
            w.sync()
            w.roll()
        w.close()
        every = data.draw(st.sampled_from(zxids))
        peer = data.draw(st.sampled_from([every, every - 1, every + 1, zxids[0] - 1]))
        if peer_at < len(zxids):
            peer = zxids[peer_at] - (peer_at % 2)
        last = zxids[-1]
        committed = [E(z) for z in zxids[len(zxids) - min(committed_n, len(zxids)) :]]

        def whole_files(z: int) -> list[Entry]:
            reader = files.TxnLogReader(p.settings.txnlog_dir, z)
            out = []
            for path in reader.files:
                out += [Entry(e.entry.zxid, b"") for e in txnlog.scan(path.read_bytes())[0]]
            return out if out and out[0].zxid <= z else []

        def plan_of(source: Callable[[int], Iterable[Entry]]) -> tuple[object, ...]:
            need, current, out = sync_follower(peer, last, committed, source)
            return need, current, [(q.type, q.zxid) for q in out]

        assert plan_of(p.proposals_from_txnlog) == plan_of(whole_files)
