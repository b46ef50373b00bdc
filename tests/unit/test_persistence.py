"""Durability settings as ZooKeeper reads them (server/persistence.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trizk.server.config import ServerConfig
from trizk.server.persistence import PersistenceSettings


def settings(**keys: str | int) -> PersistenceSettings:
    return PersistenceSettings.from_config(
        ServerConfig.create("/d", clientPort=2181, **keys)  # type: ignore[arg-type]
    )


def test_defaults_are_zookeepers() -> None:
    s = settings()
    assert s.snap_count == 100_000
    assert s.prealloc_size == 64 * 1024 * 1024
    assert s.force_sync and s.digest_enabled and not s.trust_empty
    assert s.compression == ""
    assert (s.snap_retain_count, s.purge_interval_hours) == (3, 0)
    assert s.snap_dir == s.txnlog_dir == Path("/d/version-2")


def test_keys() -> None:
    extra: dict[str, str | int] = {
        "digest.enabled": "false",
        "snapshot.compression.method": "gz",
        "snapshot.trust.empty": "true",
        "autopurge.snapRetainCount": 5,
        "autopurge.purgeInterval": 2,
        "dataLogDir": "/logs",
    }
    s = settings(snapCount=10, preAllocSize=4, forceSync="no", **extra)
    assert (s.snap_count, s.prealloc_size) == (10, 4096)
    assert not s.force_sync and not s.digest_enabled and s.trust_empty
    assert s.compression == "gz"
    assert (s.snap_retain_count, s.purge_interval_hours) == (5, 2)
    assert s.txnlog_dir == Path("/logs/version-2")


def test_zookeeper_quirks(caplog: pytest.LogCaptureFixture) -> None:
    # forceSync is off only for exactly "no"; snapCount below 2 becomes 2; a retain count
    # below 3 becomes 3; an unknown compression method is the plain stream; a bad number
    # falls back to the default (Integer.getInteger).
    assert settings(forceSync="false").force_sync
    assert settings(snapCount=1).snap_count == 2
    assert settings(**{"autopurge.snapRetainCount": 1}).snap_retain_count == 3
    assert settings(**{"snapshot.compression.method": "lz4"}).compression == ""
    assert settings(**{"snapshot.compression.method": "snappy"}).compression == "snappy"
    assert settings(snapCount="lots").snap_count == 100_000
    assert settings(**{"digest.enabled": "yes"}).digest_enabled is False  # parseBoolean
    assert any("snapCount" in r.getMessage() for r in caplog.records)


def test_snappy_literal_stream_reads_back() -> None:
    import os

    from trizk.server.persistence import snappy_java_literal_stream
    from trizk.storage import snapshot

    for n in (0, 1, 100, 32 * 1024, 32 * 1024 + 1, 100_000):
        data = os.urandom(n)
        out = b"".join(snappy_java_literal_stream([data[: n // 3], data[n // 3 :]]))
        assert out.startswith(snapshot.SNAPPY_MAGIC)
        assert snapshot.snappy_java_decompress(out) == data


async def test_failed_fsync_stops_the_committer_without_acknowledging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EIO from fsync: the committer stops with StorageFailure; nothing of the batch reaches
    the commit sink (no reply), and fsync is not tried again."""
    import errno

    import trio

    from trizk.jute import records as r
    from trizk.jute.codes import OpCode
    from trizk.server.committer import Proposal
    from trizk.server.persistence import Persistence, StorageFailure
    from trizk.storage import files

    syncs: list[int] = []

    def failing_sync(self: files.TxnLogWriter) -> None:
        syncs.append(1)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(files.TxnLogWriter, "sync", failing_sync)
    p = Persistence(settings(dataDir=str(tmp_path)))
    p.load()
    committed: list[object] = []
    p.attach(lambda batch, now: committed.extend(batch), lambda: None, lambda: 0)
    hdr = r.TxnHeader(1, 1, 1, 0, OpCode.CREATESESSION)
    p.propose(Proposal(hdr, r.CreateSessionTxn(5000)))
    with trio.fail_after(10):
        # a StorageFailure, alone or (trio >= 0.25, strict exception groups) in a group
        with pytest.raises((StorageFailure, BaseExceptionGroup)) as info:
            async with trio.open_nursery() as nursery:
                await nursery.start(p.run)
    failure = info.value
    while isinstance(failure, BaseExceptionGroup):
        assert len(failure.exceptions) == 1
        failure = failure.exceptions[0]
    assert isinstance(failure, StorageFailure)
    assert failure.errno == errno.EIO
    assert committed == [] and syncs == [1]


async def test_group_commit_pipeline_commits_each_batch_after_a_sync_that_covers_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While sync N runs, the txns proposed meanwhile are appended and go with sync N+1, which
    starts as soon as N returns; a batch reaches the commit sink only after a sync that took
    it from the writer's queue has returned -- never earlier, in proposal order."""
    import threading

    import trio

    from trizk.jute import records as r
    from trizk.jute.codes import OpCode
    from trizk.server.committer import Proposal
    from trizk.server.persistence import Persistence
    from trizk.storage import files

    real_sync, real_datasync = files.TxnLogWriter.sync, files._datasync
    started: list[threading.Event] = [threading.Event() for _ in range(3)]
    release: list[threading.Event] = [threading.Event() for _ in range(3)]
    taken: list[list[int]] = []  # zxids each sync took from the queue

    def recording_sync(self: files.TxnLogWriter) -> int | None:
        with self._lock:
            taken.append([item[0] for item in self._queue if isinstance(item, tuple)])
        return real_sync(self)

    def gated_datasync(fd: int) -> None:  # a slow disk: the fdatasync is what takes time
        n = len(taken) - 1
        started[n].set()
        assert release[n].wait(10), "the test did not release the sync"
        real_datasync(fd)

    monkeypatch.setattr(files.TxnLogWriter, "sync", recording_sync)
    monkeypatch.setattr(files, "_datasync", gated_datasync)
    p = Persistence(settings(dataDir=str(tmp_path)))
    p.load()
    committed: list[int] = []
    p.attach(lambda batch, now: committed.extend(x.hdr.zxid for x in batch), lambda: None)

    def propose(zxid: int) -> None:
        hdr = r.TxnHeader(zxid, 1, zxid, 0, OpCode.CREATESESSION)
        p.propose(Proposal(hdr, r.CreateSessionTxn(5000)))

    async def until(ev: threading.Event) -> None:
        while not ev.is_set():
            await trio.sleep(0.001)  # a bounded poll of another thread's event

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(p.run)
            propose(1)
            await until(started[0])  # sync 1 took txn 1 and is running
            propose(2)
            propose(3)
            while p.outstanding != 3 or p._appended < 2:  # appended while sync 1 runs
                await trio.sleep(0.001)
            assert committed == []  # nothing is committed while its sync runs
            release[0].set()
            await until(started[1])  # sync 2 starts right after sync 1, with txns 2 and 3
            while committed != [1]:
                await trio.sleep(0.001)
            assert taken == [[1], [2, 3]]
            release[1].set()
            while committed != [1, 2, 3]:
                await trio.sleep(0.001)
            release[2].set()
            nursery.cancel_scope.cancel()
    assert p.syncs == 2
