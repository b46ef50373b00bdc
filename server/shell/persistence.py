"""Durability for the standalone server: recovery, the group-committing log writer, snapshots.

Theory of operation
-------------------
This shell is the standalone server's :class:`~trizk.server.writes.committer.Committer` (ZooKeeper's
SyncRequestProcessor): the sequencer proposes txns to it, and it hands them, once durable, to
its commit sink (:meth:`trizk.server.roles.standalone.Standalone.commit`: apply, fire watches,
reply).

* **Committer task and fsync helper: group commit as a pipeline.** The committer task appends
  proposed txns to the :class:`~trizk.storage.disk.files.TxnLogWriter`'s queue (each with the tree
  digest prep computed for it) as soon as they are proposed; the syncer
  (:class:`_SyncProcess`) writes whatever is queued to the file (page cache) on the Trio thread
  and has a helper process (:mod:`trizk.storage.disk.fsyncd`) fdatasync it, one sync at a time.
  While sync *N* runs, the txns proposed meanwhile are appended and go with sync *N+1*, which
  is written and sent the moment *N* is answered; then batch *N* is handed to the sink. So one
  fsync covers every txn that arrived during the previous one, the disk never waits for the
  Trio thread, and throughput with many clients is bounded by the disk, not by a serial
  append → fsync → commit chain. A process, not a thread: a Python thread needs the GIL
  between its syscalls and took it from the Trio thread at every hand-off (the Trio thread
  sat ~12 % idle under a closed-loop write load; with the helper, ~10-15 % more writes per
  second, the helper costing about what the thread did). An ensemble member's logging
  (:meth:`log_entries`) goes through the same syncer.
  A txn is durable before any client can see its effects, and a reply is never sent for a
  txn that is not durable. An ``OSError`` from the disk, or the helper gone, is fatal
  (:class:`StorageFailure` stops the server, as ZooKeeper exits when it cannot write its
  log): afterwards nothing is known about what the file holds.
* **Driven by the poller** (standalone, :meth:`Persistence.drive_with`): the client poller's
  task (:mod:`trizk.server.shell.poller`) does the committer's routine work without a task switch.
  The helper's socket sits in its selector beside the client sockets, so an answer is read,
  the next sync sent and the durable batch committed and answered within one pass; what a
  pass proposed is appended (and its sync sent, if none runs) when the pass ends. Per batch
  that saves four Trio task switches and an ``epoll_ctl`` (measured: ~9 % more closed-loop
  writes per second). The committer task still appends what is proposed outside a pass
  (session expiry, TLS connections) and raises a failure. An ensemble member's poller reads
  the helper's answers the same way (:meth:`Persistence.sync_with`; what a sync made durable
  goes to :attr:`Persistence.on_durable`, whose pump pass runs when the poller's pass ends).
* **Snapshots.** After ``snapCount/2 + random(snapCount/2)`` logged txns (ZooKeeper's
  randomised roll, so servers of an ensemble do not snapshot together) the log is rolled and a
  fuzzy snapshot of the live tree is taken: the tree is walked on the Trio thread in steps of a
  few thousand nodes with checkpoints between them (the tree is only ever touched from this
  thread, so there are no races), then the bytes are written, fsynced and renamed into place in
  a worker thread. Replay makes the fuzziness harmless (:mod:`trizk.storage.formats.treeio`). One
  snapshot at a time; a request while one runs is skipped ("Too busy to snap").
* **Purge.** With ``autopurge.purgeInterval`` > 0 hours, keep the newest
  ``autopurge.snapRetainCount`` (at least 3) snapshots and the logs they need
  (DatadirCleanupManager / PurgeTxnLog).
* **Recovery** (:meth:`Persistence.load`, before serving): newest snapshot that verifies, the
  log replayed from its zxid, torn tails cut with a log line, sessions restored with their
  timeouts (they expire as usual unless their clients come back), ephemerals of sessions that
  no longer exist dropped; an empty data dir gets ``snapshot.0`` (ZooKeeper refuses to start on
  logs without a snapshot). A data dir that cannot be loaded without losing committed txns
  raises :class:`DataDirError` (the server does not start). Long loads log progress. After a
  recovery that replayed txns, a snapshot is taken in the background once serving (an
  ensemble member's first role that serves; ZooKeeper's standalone servers and leaders
  snapshot before serving, on every start, its followers not).

Settings (ZooKeeper's names): ``snapCount``, ``preAllocSize`` (KiB), ``forceSync=no`` (no
fsync: fast, not durable), ``digest.enabled``, ``snapshot.compression.method`` (gz, or
snappy: snappy-java framing around uncompressed literal blocks, which any snappy reader
accepts; we have no snappy compressor), ``snapshot.trust.empty``, ``autopurge.snapRetainCount``,
``autopurge.purgeInterval``, ``dataDir`` / ``dataLogDir``; answering as ZooKeeper 3.9
(``trizk.zookeeperVersion``), snapshots end in 3.9's last-processed-zxid section unless
``serializeLastProcessedZxid.enabled=false`` (3.8 and 3.9 read snapshots with or without it).
"""

from __future__ import annotations

import errno
import gc
import gzip
import logging
import os
import random
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import trio

from trizk.jute.javalang import (
    get_boolean,
    get_integer,
    parse_boolean,
    parse_double,
    parse_int,
    parse_long,
)
from trizk.quorum.zab.leader import committed_log_capacity
from trizk.quorum.zab.zab import Entry
from trizk.server.common import release
from trizk.server.common.servermetrics import ServerMetrics
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.writes.committer import CommitSink, Proposal
from trizk.storage.disk import files, fsyncd
from trizk.storage.formats import snapshot, treeio, txnlog
from trizk.storage.formats.txnlog import TxnEntry
from trizk.storage.tree.datatree import DataTree
from trizk.storage.tree.replica import Replica

if TYPE_CHECKING:
    from trizk.server.shell.poller import Poller

log = logging.getLogger("trizk.server.shell.persistence")

#: ZooKeeper's default snapCount (SyncRequestProcessor).
DEFAULT_SNAP_COUNT = 100_000
#: Nodes serialised between two checkpoints while snapshotting.
SNAPSHOT_STEP = 2048
#: autopurge.snapRetainCount minimum (DatadirCleanupManager).
MIN_SNAP_RETAIN_COUNT = 3
#: Trees at least this big are moved out of the cyclic collector's reach after loading.
FREEZE_MIN_NODES = 100_000
#: ``zookeeper.commitLogCount`` default (ZKDatabase.DEFAULT_COMMIT_LOG_COUNT).
COMMIT_LOG_COUNT = 500
#: Seconds between progress lines during a long load.
PROGRESS_EVERY = 2.0
#: ``zookeeper.snapshotSizeFactor`` default (ZKDatabase.DEFAULT_SNAPSHOT_SIZE_FACTOR).
DEFAULT_SNAPSHOT_SIZE_FACTOR = 0.33


class DataDirError(OSError):
    """The data directory cannot be loaded without losing committed txns (server won't start)."""


class StorageFailure(OSError):
    """Writing the txn log failed; the server stops (the state on disk is unknown)."""


def _prealloc_kb(config: ServerConfig) -> int:
    """FileTxnLog / FilePadding: ``Long.parseLong(zookeeper.preAllocSize)`` (KiB), with a warning
    and the default when it is not a long."""
    raw = config.get_property("zookeeper.preAllocSize")
    default = txnlog.DEFAULT_PREALLOC_SIZE // 1024
    if raw is None:
        return default
    kb = parse_long(raw)
    if kb is None:
        log.warning("%s is not a valid value for preAllocSize; using %d", raw, default)
        return default
    return kb


def _snapshot_size_factor(config: ServerConfig) -> float:
    """``ZKDatabase``'s constructor: ``Double.parseDouble(zookeeper.snapshotSizeFactor)``; above
    1 or not a double: the default (0.33), with a log line. Negative (or NaN) turns a leader's
    syncing from the txn log off."""
    raw = config.get_property("zookeeper.snapshotSizeFactor")
    if raw is None:
        return DEFAULT_SNAPSHOT_SIZE_FACTOR
    factor = parse_double(raw)
    if factor is None:
        log.error(
            "Error parsing zookeeper.snapshotSizeFactor, using default value %s",
            DEFAULT_SNAPSHOT_SIZE_FACTOR,
        )
        return DEFAULT_SNAPSHOT_SIZE_FACTOR
    if factor > 1:
        log.warning(
            "The configured zookeeper.snapshotSizeFactor is invalid, going to use the default %s",
            DEFAULT_SNAPSHOT_SIZE_FACTOR,
        )
        return DEFAULT_SNAPSHOT_SIZE_FACTOR
    return factor


def _commit_log_count(config: ServerConfig) -> int:
    """``ZKDatabase``'s constructor: ``Integer.parseInt(zookeeper.commitLogCount)``; below the
    default (500) the default, with a warning; not an int: the default, logged."""
    raw = config.get_property("zookeeper.commitLogCount")
    if raw is None:
        return COMMIT_LOG_COUNT
    count = parse_int(raw)
    if count is None:
        log.error("Error parsing zookeeper.commitLogCount - use default value %d", COMMIT_LOG_COUNT)
        return COMMIT_LOG_COUNT
    if count < COMMIT_LOG_COUNT:
        log.warning(
            "The configured commitLogCount %d is less than the recommended %d, going to use "
            "the recommended one",
            count,
            COMMIT_LOG_COUNT,
        )
        return COMMIT_LOG_COUNT
    return count


@dataclass(frozen=True)
class PersistenceSettings:
    data_dir: Path
    log_dir: Path
    snap_count: int = DEFAULT_SNAP_COUNT
    prealloc_size: int = txnlog.DEFAULT_PREALLOC_SIZE
    force_sync: bool = True
    digest_enabled: bool = True
    #: write ZooKeeper 3.9's last-processed-zxid section after the digest: answering as 3.9
    #: unless ``zookeeper.serializeLastProcessedZxid.enabled=false`` (3.8 writes none)
    last_zxid_trailer: bool = False
    compression: str = ""
    trust_empty: bool = False
    snap_retain_count: int = MIN_SNAP_RETAIN_COUNT
    purge_interval_hours: int = 0
    #: ``zookeeper.snapshotSizeFactor``: a leader syncs a learner from the txn log while the
    #: files read are at most this times the newest snapshot's size (negative: never)
    snapshot_size_factor: float = DEFAULT_SNAPSHOT_SIZE_FACTOR
    #: ``zookeeper.commitLogCount``: the committed log keeps this many txns and one more
    #: (:func:`~trizk.quorum.zab.leader.committed_log_capacity`)
    commit_log_count: int = COMMIT_LOG_COUNT

    @property
    def snap_dir(self) -> Path:
        return files.version_dir(self.data_dir)

    @property
    def txnlog_dir(self) -> Path:
        return files.version_dir(self.log_dir)

    @classmethod
    def from_config(cls, config: ServerConfig) -> PersistenceSettings:
        """The settings as ZooKeeper reads them (system properties and QuorumPeerConfig)."""
        props = config.properties
        # ZooKeeperServer.getSnapCount: Integer.getInteger (a malformed value: the default)
        snap_count = get_integer(props, "zookeeper.snapCount", DEFAULT_SNAP_COUNT)
        if snap_count < 2:
            # ZooKeeperServer: "SnapCount should be 2 or more. Now, snapCount is reset to 2"
            log.warning("snapCount should be 2 or more; using 2")
            snap_count = 2
        prealloc_kb = _prealloc_kb(config)
        method = (config.get_property("zookeeper.snapshot.compression.method") or "").strip()
        if method not in ("", "gz", "snappy"):
            method = ""  # SnapStream.getStreamMode: anything else is the plain CHECKED stream
        retain = config.snap_retain_count
        if retain < MIN_SNAP_RETAIN_COUNT:
            log.warning(
                "Invalid autopurge.snapRetainCount: %d. Defaulting to %d.",
                retain,
                MIN_SNAP_RETAIN_COUNT,
            )
            retain = MIN_SNAP_RETAIN_COUNT
        return cls(
            data_dir=Path(config.data_dir),
            log_dir=Path(config.data_log_dir),
            snap_count=snap_count,
            prealloc_size=max(prealloc_kb, 0) * 1024,
            force_sync=(config.get_property("zookeeper.forceSync", "yes") or "").strip() != "no",
            # ZooKeeperServer: Boolean.parseBoolean(getProperty(..., "true"))
            digest_enabled=parse_boolean(props.get("zookeeper.digest.enabled", "true")),
            # ZooKeeper 3.9's DataTree: Boolean.parseBoolean(getProperty(..., "true"))
            last_zxid_trailer=release.is_39(config.zookeeper_version)
            and parse_boolean(props.get("zookeeper.serializeLastProcessedZxid.enabled", "true")),
            compression=method,
            # FileTxnSnapLog: Boolean.getBoolean
            trust_empty=get_boolean(props, "zookeeper.snapshot.trust.empty"),
            snap_retain_count=retain,
            purge_interval_hours=config.purge_interval,
            snapshot_size_factor=_snapshot_size_factor(config),
            commit_log_count=_commit_log_count(config),
        )


@dataclass
class Loaded:
    """The state :meth:`Persistence.load` recovered."""

    replica: Replica
    snapshot_path: Path | None
    replayed: int
    seconds: float
    truncated: list[tuple[Path, int, str]] = field(default_factory=list)
    digest_mismatches: int = 0


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


class _Progress:
    """Rate-limited progress lines for long loads (count, rate)."""

    def __init__(self, what: str, unit: str) -> None:
        self.what = what
        self.unit = unit
        self.start = time.monotonic()
        self.last = self.start

    def __call__(self, done: int, total: int | None = None) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        if total:
            log.info(
                "%s: %d of %d %s (%.0f%%), %.0f %s/s",
                self.what,
                done,
                total,
                self.unit,
                100.0 * done / total,
                rate,
                self.unit,
            )
        else:
            log.info("%s: %d %s, %.0f %s/s", self.what, done, self.unit, rate, self.unit)


class Persistence:
    """The data directory of one server; see the module docstring."""

    def __init__(
        self,
        settings: PersistenceSettings,
        *,
        extended_types: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        #: randomness for the snapshot roll (passed in: no process-wide state)
        self._rng = rng if rng is not None else random.Random()
        self.extended_types = extended_types
        #: the replica recovered by :meth:`load` (what snapshots record)
        self.replica: Replica | None = None
        self.writer: files.TxnLogWriter | None = None
        #: proposed txns not yet appended to the log
        self._queue: list[Proposal] = []
        self._recent: list[TxnEntry] = []
        self._sink: CommitSink | None = None
        self._wake: Callable[[], None] = lambda: None
        self._now: Callable[[], int] = lambda: int(trio.current_time() * 1000)
        self._kick = trio.Event()
        self._since_snapshot = 0  # txns logged since the last roll
        self._rand_roll = 0
        self._inflight = 0  # txns being appended and synced
        #: appended batches not yet committed: (append number, batch), oldest first
        self._pending: deque[tuple[int, list[Proposal]]] = deque()
        #: the poller that reads the fsync helper's answers and appends at the end of each of
        #: its passes (:meth:`drive_with`); None: the committer and syncer tasks do it all
        self._poller: Poller | None = None
        #: an ensemble member's client poller, which reads the fsync helper's answers
        #: (:meth:`sync_with`); None: the syncer's own task does
        self._sync_poller: Poller | None = None
        #: inside a poller pass: a proposal is appended when the pass ends (no kick)
        self._in_pass = False
        #: the syncer (while running), appends made and appends known durable
        self._syncer: _SyncProcess | None = None
        #: starts the fsync helper process (tests give a stand-in)
        self._spawn = spawn_fsyncd
        self._appended = 0
        self._synced = 0
        #: set (and replaced) whenever a sync returns
        self._progress = trio.Event()
        #: the log failed: raised to everyone waiting for durability
        self._failure: StorageFailure | None = None
        #: called (in the Trio thread) whenever a sync returns, or the log failed
        self.on_durable: Callable[[], None] = lambda: None
        #: the server's ServerMetrics (fsynctime, snapshottime...); the shell sets its own
        self.metrics = ServerMetrics()
        #: writing the txn log failed: nothing more is written or synced
        self.failed = False
        self._snapshot_wanted = trio.Event()
        #: the server serves clients (standalone: once running; an ensemble member: from its
        #: first role that serves, :meth:`serving`): the recovery's snapshot waits for it
        self._serving = trio.Event()
        self._snapshotting = False
        self.snapshots_taken = 0
        self.last_snapshot: Path | None = None
        self.syncs = 0
        self.txns_logged = 0
        self._reset_roll()

    # ------------------------------------------------------------------ recovery
    def load(self) -> Loaded:
        """Recover the data dir (blocking: call before serving). Raises DataDirError.

        The cyclic garbage collector is paused while millions of objects are created (its
        generation-2 passes would rescan all of them again and again), and what was loaded is
        then, for big trees, frozen out of its reach (``gc.freeze``): tree nodes hold no
        reference cycles, so reference counting still frees them, and later collections do
        not walk the whole tree again. As for a SNAP (``QuorumPeer.snapshot_builder``), what
        the heap held before is collected first, while it is small, and the loaded tree is
        frozen without a collection: one would walk every object just made (~0.1 s for
        200,000 znodes, a tenth of a restart) and, measured, find no garbage.
        """
        was_enabled = gc.isenabled()
        if was_enabled:
            gc.collect()
        gc.disable()
        try:
            loaded = self._load()
            if loaded.replica.tree.node_count() >= FREEZE_MIN_NODES:
                gc.freeze()
        finally:
            if was_enabled:
                gc.enable()
        return loaded

    def _load(self) -> Loaded:
        s = self.settings
        t0 = time.monotonic()
        s.snap_dir.mkdir(parents=True, exist_ok=True)
        s.txnlog_dir.mkdir(parents=True, exist_ok=True)
        for stale in s.snap_dir.glob(".snapshot.*.tmp"):
            log.info("removing an unfinished snapshot %s", stale)
            stale.unlink(missing_ok=True)
        snaps = files.list_snapshots(s.snap_dir)
        logs = files.list_logs(s.txnlog_dir)
        if snaps or logs:
            log.info(
                "loading the data directory: %d snapshots (newest %s, %d bytes), %d txn logs",
                len(snaps),
                snaps[-1][1].name if snaps else "none",
                _size(snaps[-1][1]) if snaps else 0,
                len(logs),
            )
        try:
            rec = files.recover(
                s.snap_dir,
                s.txnlog_dir,
                trust_empty=s.trust_empty,
                progress=_Progress("reading the snapshot", "bytes"),
                raw_nodes=True,  # decoded once, straight into the tree
            )
        except files.UnrecoverableDataDir as e:
            raise DataDirError(
                f"cannot load the data directory {s.data_dir} (log dir {s.log_dir}) without "
                f"losing committed transactions: {e}"
            ) from None
        sessions: dict[int, int]
        if rec.snapshot is None:
            tree = DataTree(extended_types=self.extended_types)
            sessions = {}
            if not rec.txns:
                # ZooKeeper writes snapshot.0 on an empty data dir and refuses to start
                # later on logs without a snapshot.
                ts = time.monotonic()
                content = snapshot.initial_content()
                if s.last_zxid_trailer:  # 3.9's snapshot.0 ends in lastProcessedZxid 0 too
                    content.last_processed_zxid = 0
                path = files.write_snapshot(s.snap_dir, 0, snapshot.serialize(content))
                self.metrics.snapshottime.add(int((time.monotonic() - ts) * 1000))
                log.info("empty data directory: wrote %s", path)
        else:
            log.info(
                "read snapshot %s (%d znodes, %d sessions) in %.3f s; building the tree",
                rec.snapshot_path,
                rec.snapshot.node_count,
                len(rec.snapshot.sessions),
                time.monotonic() - t0,
            )
            tree = treeio.tree_from_snapshot(
                rec.snapshot,
                rec.snapshot_zxid,
                extended_types=self.extended_types,
                progress=_Progress("loading snapshot", "nodes"),
            )
            sessions = dict(rec.snapshot.sessions)
        t1 = time.monotonic()
        txn_progress = _Progress("replaying the txn log", "txns")
        replica = Replica(tree, sessions)
        res = treeio.replay(
            replica,
            rec.txns,
            snapshot_digest=rec.snapshot.digest if rec.snapshot is not None else None,
            check_digests=s.digest_enabled,
            progress=lambda n: txn_progress(n, len(rec.txns)),
        )
        if res.digest_mismatches:
            log.warning(
                "tree digest does not match the logged digest at %d of %d txns checked "
                "(first at zxid %#x)",
                len(res.digest_mismatches),
                res.digest_checked,
                res.digest_mismatches[0],
            )
        dead = replica.kill_dead_sessions()
        if dead:
            log.info("dropped the ephemerals of %d sessions that no longer exist", len(dead))
        t2 = time.monotonic()
        if rec.txns:
            log.info(
                "replayed %d txns (%#x..%#x) in %.3f s",
                res.applied,
                rec.txns[0].zxid,
                rec.txns[-1].zxid,
                t2 - t1,
            )
        log.info(
            "recovered %d znodes, %d sessions, last zxid %#x in %.3f s",
            tree.node_count() - 1,
            len(sessions),
            tree.last_processed_zxid,
            t2 - t0,
        )
        self.replica = replica
        # ZKDatabase.committedLog: the last txns replayed, for a leader's DIFFs
        self._recent = rec.txns[-committed_log_capacity(self.settings.commit_log_count) :]
        # ServerMetrics of FileTxnSnapLog.restore (no txn replay on an empty data dir) and
        # ZKDatabase.loadDataBase, in ms
        m = self.metrics
        m.startup_snap_load_time.add(int((t1 - t0) * 1000))
        if rec.snapshot is not None or rec.txns:
            m.startup_txns_loaded.add(res.applied)
            m.startup_txns_load_time.add(int((t2 - t1) * 1000))
        m.dbinittime.add(int((t2 - t0) * 1000))
        if rec.txns:
            # Bound the next recovery: snapshot what was replayed once serving.
            self._snapshot_wanted.set()
        return Loaded(
            replica,
            rec.snapshot_path,
            res.applied,
            t2 - t0,
            rec.truncated,
            len(res.digest_mismatches),
        )

    def attach(
        self,
        sink: CommitSink,
        wake: Callable[[], None],
        now: Callable[[], int] | None = None,
    ) -> None:
        """Commit into ``sink(batch, now)`` (after :meth:`load`); ``wake`` flushes replies after
        a commit."""
        self._sink = sink
        self._wake = wake
        if now is not None:
            self._now = now

    def recent_entries(self) -> list[TxnEntry]:
        """The newest txns of the log as last loaded (as many as the committed log holds)."""
        return list(self._recent)

    def propose(self, p: Proposal) -> None:
        """Committer: log ``p`` with the next group commit."""
        self._queue.append(p)
        if self._in_pass:
            return  # appended when the poller's pass ends
        kick = self._kick
        if not kick.is_set():  # (Event.set is a KI-protected call even when set)
            kick.set()

    def sync_with(self, poller: Poller) -> None:
        """An ensemble member, before :meth:`run`: ``poller``'s task reads the fsync helper's
        answers in its passes (beside the client sockets and the quorum links), instead of a
        task of the syncer's own; what a sync made durable reaches :attr:`on_durable` there."""
        self._sync_poller = poller

    def drive_with(self, poller: Poller) -> None:
        """Standalone, before :meth:`run`: let ``poller``'s task do the committer's routine
        work. It watches the fsync helper's socket beside the client sockets and commits a
        batch the moment the helper's answer is read, and what its pass proposed is appended
        (and its sync sent, if none runs) when the pass ends. Without this, a batch costs four
        task switches (the committer wakes to append, the syncer to wait for the answer and to
        read it, the committer to commit) and an ``epoll_ctl`` re-arming the helper's socket.
        Proposals made outside a pass (session expiry, TLS connections) still wake the
        committer task."""
        self._poller = poller
        poller.before_pass = self._begin_pass
        poller.after_pass = self._end_pass

    def _begin_pass(self) -> None:
        self._in_pass = True

    def _end_pass(self) -> None:
        self._in_pass = False
        if self._queue and self._syncer is not None:
            self._log_queued()

    @property
    def outstanding(self) -> int:
        """Txns proposed and not yet committed."""
        return len(self._queue) + self._inflight

    # ------------------------------------------------------------------ tasks
    async def run(
        self, *, committer: bool = True, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the log and run the committer (standalone; an ensemble member logs through
        :meth:`log_entries`), snapshot and purge tasks until cancelled."""
        s = self.settings
        assert self._sink is not None or not committer, "attach() before run()"
        self.writer = files.TxnLogWriter(
            s.txnlog_dir, prealloc_size=s.prealloc_size, force_sync=s.force_sync
        )
        syncer = self._syncer = _SyncProcess(lambda: self.writer, self._on_synced, self._spawn)
        try:
            syncer.start()
        except OSError as e:
            raise StorageFailure(e.errno or 0, f"cannot start the fsync helper: {e}") from e
        if not committer:
            self._poller = None  # an ensemble member: no committer (sync_with, or a task)
        poller = self._poller
        try:
            async with trio.open_nursery() as nursery:
                if poller is not None:
                    syncer.watch_with(poller, self._refill)
                elif self._sync_poller is not None and not committer:
                    syncer.watch_with(self._sync_poller, lambda: None)
                else:
                    nursery.start_soon(syncer.run)
                if committer:
                    self._serving.set()  # standalone: serving from the start
                    nursery.start_soon(self._committer)
                nursery.start_soon(self._snapshotter)
                if s.purge_interval_hours > 0:
                    nursery.start_soon(self._purger)
                else:
                    log.info("Purge task is not scheduled.")
                task_status.started()
        finally:
            syncer.stop()
            self._syncer = None
            w, self.writer = self.writer, None
            with trio.CancelScope(shield=True):
                try:
                    if w is not None:
                        w.close(sync=not self.failed)
                except OSError as e:
                    log.error("closing the txn log: %s", e)

    async def _committer(self) -> None:
        """Standalone: append what was proposed as soon as it is (the syncer picks it up
        with its next sync, while the previous one may still run), and hand each batch to the
        sink once a sync covering it has returned -- in proposal order. Driven by a poller
        (:meth:`drive_with`), this task only appends what was proposed outside its passes."""
        while True:
            if self._failure is not None:
                raise self._failure
            if self._queue:
                self._log_queued()
            self._commit_durable()
            if not self._queue and self._failure is None:
                self._kick = trio.Event()
                await self._kick.wait()

    def _log_queued(self) -> None:
        """Append the proposals queued (one batch), ask for their sync, and post what that
        made due (``forceSync=no``: durable at once)."""
        if self.failed:
            self._kick.set()  # the committer task raises the failure
            return
        self._append_queued()
        syncer = self._syncer
        assert syncer is not None
        syncer.deliver()

    def _refill(self) -> None:
        """The syncer is about to send its next sync (a poller's pass read the helper's
        answer): append what this pass proposed so far, so that sync covers it too rather than
        the one after (the helper's socket is often reported after client sockets)."""
        if self._queue and self._in_pass and not self.failed:
            self._append_queued()

    def _append_queued(self) -> None:
        batch, self._queue = self._queue, []
        digests = self.settings.digest_enabled
        framed = [
            (
                p.hdr.zxid,
                txnlog.frame_payload(
                    txnlog.encode_txn(p.hdr, p.txn, p.digest if digests else None)
                ),
            )
            for p in batch
        ]
        self._pending.append((self._append_framed(framed), batch))
        self._inflight += len(batch)

    def _commit_durable(self) -> None:
        """Hand every batch a returned sync covered to the sink, oldest first, and flush."""
        pending = self._pending
        synced = self._synced
        sink = self._sink
        committed = False
        while pending and pending[0][0] <= synced:
            assert sink is not None, "attach() before run()"
            _, batch = pending.popleft()
            self._inflight -= len(batch)
            sink(batch, self._now())
            committed = True
        if committed:
            self._wake()

    async def log_entries(self, entries: Sequence[tuple[int, bytes]]) -> None:
        """An ensemble member's txns as (zxid, marshalled entry) -- its leader's proposals, or
        its own as leader: append and fsync them; they are durable when this returns. Raises
        :class:`StorageFailure`."""
        # A checkpoint first: when the server is being cancelled, run() may already have closed
        # the writer; this raises Cancelled rather than finding it gone.
        await trio.lowlevel.checkpoint()
        await self.durable(self.append_entries(entries))

    def append_entries(self, entries: Sequence[tuple[int, bytes]]) -> int:
        """Append an ensemble member's txns as (zxid, marshalled entry) without waiting:
        durable once :attr:`synced` reaches the number returned (the syncer takes them at once,
        or right after the sync under way). Raises :class:`StorageFailure` after a failure."""
        pairs = list(entries)
        seq = self._append(lambda w: w.append_payloads(pairs), len(pairs))
        if self._sync_poller is not None and self._syncer is not None:
            self._syncer.deliver()  # due at once (nothing to sync): no task of its own posts it
        return seq

    def _append_framed(self, items: list[tuple[int, bytes]]) -> int:
        """:meth:`append_entries` of entries already framed (the standalone committer's)."""
        return self._append(lambda w: w.append_framed(items), len(items))

    @property
    def synced(self) -> int:
        """The newest append known durable. Raises :class:`StorageFailure` after a failure
        (what was not reported durable before it never will be)."""
        if self._failure is not None:
            raise self._failure
        return self._synced

    async def durable(self, seq: int | None = None) -> None:
        """Wait until append ``seq`` (default: every append so far) is durable."""
        target = self._appended if seq is None else seq
        # A checkpoint first: when the server is being cancelled, run() may already have closed
        # the writer; this raises Cancelled rather than finding it gone.
        await trio.lowlevel.checkpoint()
        while self.synced < target:
            await self._progress.wait()

    def _append(self, append: Callable[[files.TxnLogWriter], None], count: int) -> int:
        """Queue ``count`` txns (``append(writer)``) in the log writer, roll the log for a
        snapshot when it is time, and ask the syncer to write and fdatasync them;
        returns the append's number (durable once ``_synced`` reaches it)."""
        writer = self.writer
        assert writer is not None and self._syncer is not None, "run() first"
        if self.failed:
            raise StorageFailure(0, "the txn log failed earlier")
        append(writer)
        self.txns_logged += count
        self._since_snapshot += count
        if self._since_snapshot > self.settings.snap_count // 2 + self._rand_roll:
            # SyncRequestProcessor.shouldSnapshot: roll the log after this batch and
            # snapshot in the background.
            self._reset_roll()
            writer.roll()
            self._snapshot_wanted.set()
        self._appended += 1
        self._syncer.request(self._appended)
        return self._appended

    def _on_synced(self, seq: int, error: OSError | None, ms: int) -> None:
        """From the syncer: appends up to ``seq`` are durable, or the log failed."""
        if error is not None:
            # ZooKeeper: "Severe unrecoverable error, from thread : SyncThread:0", then the
            # JVM exits with code 1. Nothing unsynced was acknowledged. fsync is never
            # retried: after a failed fsync the kernel may have dropped the dirty pages, so
            # a later success would prove nothing (the restart recovers from what is on
            # disk, torn tail cut).
            log.critical("cannot write the txn log (%s); stopping the server", error)
            self.metrics.unrecoverable_error_count += 1  # ZooKeeperCriticalThread
            self.failed = True
            self._failure = StorageFailure(error.errno, f"txn log write failed: {error}")
            self._failure.__cause__ = error
        else:
            self._synced = seq
            self.syncs += 1
            # ServerMetrics.FSYNC_TIME (ms)
            self.metrics.fsynctime.add(ms)
        progress, self._progress = self._progress, trio.Event()
        progress.set()
        if error is None and self._poller is not None and self._sink is not None:
            self._commit_durable()  # right here, in the poller's pass
        else:
            self._kick.set()
        self.on_durable()

    # ------------------------------------------------------------------ a leader's DIFF
    def txnlog_source(self) -> Callable[[int], Iterable[Entry]] | None:
        """The ``txnlog`` a leader syncs learners from (``Leader(txnlog=...)``), or None when
        ``zookeeper.snapshotSizeFactor`` is negative (``ZKDatabase.isTxnLogSyncEnabled``)."""
        factor = self.settings.snapshot_size_factor
        if not factor >= 0:  # NaN too, as Java's comparison
            log.info("On disk txn sync disabled")
            return None
        log.info("On disk txn sync enabled with snapshotSizeFactor %s", factor)
        return self.proposals_from_txnlog

    def proposals_from_txnlog(self, peer_zxid: int) -> Iterable[Entry]:
        """``ZKDatabase.getProposalsFromTxnLog(peer_zxid, calculateTxnLogSizeLimit())``: the
        txns of the log files from the one holding ``peer_zxid`` on, oldest first, or nothing
        when they cannot serve a sync: the log starts after ``peer_zxid`` (purged, or the
        member joined by SNAP since), or the total length (preallocation included) of the
        files after the one holding the first txn read (``FileTxnIterator.getStorageSize``
        after ``init``: the files it has not opened yet) exceeds snapshotSizeFactor x the
        newest snapshot's length. A log of one file, however long its preallocation, is
        never over the limit (ZooKeeper 3.9.3 sends a DIFF there).

        *Committed only.* The log also holds what this leader proposed and has not committed
        (appended before its quorum ACKed), and the iterator yields it too, as ZooKeeper's
        does: the leader takes from it only up to the first zxid of its committed log
        (``queueCommittedProposals``' maxZxid = minCommittedLog, itself at most the
        lastProcessedZxid), then the committed log, so nothing uncommitted is sent as
        committed. Every txn a leader holds at or below lastProcessedZxid is in its log:
        it replayed or synced them, and applies its own only once durable.

        *On the Trio thread, bounded.* The leader machine asks for this synchronously while it
        plans a sync, and ZooKeeper too holds its log lock (which commits wait for) while it
        reads. The read here is lazy (one file mapped at a time, only up to the leader's
        committed log, padding never read), scans without decoding (checksums checked, the
        payload copied as the PROPOSAL carries it: no decode and re-encode), and the size rule
        bounds it by a third (the default factor) of the snapshot that a SNAP would otherwise
        serialize on this same thread. A limit of 0 (no snapshot, or a factor of 0) bounds
        nothing, in ZooKeeper as here.
        """
        s = self.settings
        newest = files.newest_valid_snapshot(s.snap_dir)
        limit = txnlog.txnlog_size_limit(
            files.length(newest) if newest is not None else 0, s.snapshot_size_factor
        )
        if limit < 0:
            return ()  # "Negative size limit - retrieving proposal via txnlog is disabled"
        reader = files.TxnLogReader(s.txnlog_dir, peer_zxid)
        entries = iter(reader)
        first = next(entries, None)
        if first is not None and first[0] > peer_zxid:
            log.warning("Unable to find proposals from txnlog for zxid: %#x", peer_zxid)
            return ()
        if not txnlog.txnlog_sync_allowed(reader.storage_size, limit):
            log.info("Txnlog size: %d exceeds sizeLimit: %d", reader.storage_size, limit)
            return ()
        if first is None:
            return ()
        log.info(
            "Use txnlog and committedLog for peer zxid %#x (%d bytes of txn log in %d files)",
            peer_zxid,
            reader.storage_size,
            len(reader.files),
        )
        return _as_entries(first, entries)

    def newest_snapshot_zxid(self) -> int:
        """The zxid in the name of the newest snapshot on disk (0: none)."""
        snaps = files.list_snapshots(self.settings.snap_dir)
        return snaps[-1][0] if snaps else 0

    def wipe(self) -> None:
        """A learner that cannot rebuild the state its leader asks for drops every snapshot
        and txn log (the epoch files stay) and rejoins empty (see trizk.quorum.zab.learner)."""
        s = self.settings
        if self.writer is not None:
            self.writer.close()
        gone = [p for _, p in files.list_snapshots(s.snap_dir)]
        gone += [p for _, p in files.list_logs(s.txnlog_dir)]
        for p in gone:
            p.unlink(missing_ok=True)
        files.fsync_dir(s.snap_dir)
        if s.txnlog_dir != s.snap_dir:
            files.fsync_dir(s.txnlog_dir)
        log.warning("wiped the data directory (%d files): rejoining the ensemble empty", len(gone))
        if self.writer is not None:
            self.writer = files.TxnLogWriter(
                s.txnlog_dir, prealloc_size=s.prealloc_size, force_sync=s.force_sync
            )

    def truncate(self, zxid: int) -> None:
        """A learner's TRUNC: cut the txn log right after ``zxid`` (the caller reloads the
        replica from disk with :meth:`load`)."""
        s = self.settings
        if self.writer is not None:
            self.writer.close()
        gone = files.truncate_log(s.txnlog_dir, zxid)
        log.info("truncated the txn log after %#x (%d later files removed)", zxid, len(gone))
        if self.writer is not None:
            self.writer = files.TxnLogWriter(
                s.txnlog_dir, prealloc_size=s.prealloc_size, force_sync=s.force_sync
            )

    def _reset_roll(self) -> None:
        self._since_snapshot = 0
        self._rand_roll = self._rng.randrange(max(self.settings.snap_count // 2, 1))

    def serving(self) -> None:
        """The server serves clients (an ensemble member's role reached broadcast)."""
        self._serving.set()

    async def _snapshotter(self) -> None:
        # The snapshot of what a recovery replayed waits until the server serves: a member
        # that restarted would otherwise walk its tree while it syncs with its leader (a
        # DIFF of a 200,000-znode follower took 0.1-0.15 s longer). ZooKeeper's followers
        # take none at start; its leaders (Leader.lead's loadData) and standalone servers
        # snapshot before they serve.
        await self._serving.wait()
        while True:
            await self._snapshot_wanted.wait()
            self._snapshot_wanted = trio.Event()
            await self.take_snapshot()

    async def take_snapshot(self, received: treeio.ReceivedSnapshot | None = None) -> Path | None:
        """Take one fuzzy snapshot now (None if one is already running).

        ``received``: the SNAP payload the replica was loaded from (a learner's snapshot at
        NEWLEADER); while the replica is still that one, the file is written from its bytes
        (:func:`~trizk.storage.formats.treeio.received_snapshot_parts`) instead of walking
        the tree."""
        if self._snapshotting:
            log.warning("Too busy to snap, skipping")
            return None
        replica = self.replica
        assert replica is not None
        self._snapshotting = True
        try:
            t0 = time.monotonic()
            s = self.settings
            stream: list[bytes] | Callable[[], list[bytes]] | None = None
            # the same tree, at the same zxid (sessions change only by txns)
            if received is not None and received.replica.tree is replica.tree:
                stream = treeio.received_snapshot_parts(
                    received, digest=s.digest_enabled, last_zxid=s.last_zxid_trailer
                )
            if received is not None and stream is not None:
                # the root is in the tree twice ("" and "/")
                zxid, nodes = received.zxid, replica.tree.node_count() - 1
                how = "written from the leader's SNAP"
                log.info("Snapshotting: %#x to %s (%s)", zxid, s.snap_dir, how)
            else:
                fs = treeio.FuzzySnapshot(
                    replica.tree,
                    replica.sessions,
                    digest=s.digest_enabled,
                    last_zxid=s.last_zxid_trailer,
                )
                log.info("Snapshotting: %#x to %s", fs.zxid, s.snap_dir)
                while not fs.step(SNAPSHOT_STEP):
                    await trio.sleep(0)
                zxid, nodes, how, stream = fs.zxid, fs.nodes, "walked the tree", fs.finish
            path, size = await trio.to_thread.run_sync(self._write_snapshot, zxid, stream)
            self.snapshots_taken += 1
            # ServerMetrics.SNAPSHOT_TIME (ms)
            self.metrics.snapshottime.add(int((time.monotonic() - t0) * 1000))
            self.last_snapshot = path
            log.info(
                "snapshot %s: %d znodes, %d bytes in %.3f s (%s)",
                path.name,
                nodes,
                size,
                time.monotonic() - t0,
                how,
            )
            return path
        except OSError as e:
            # ZooKeeper logs "Unexpected exception" and carries on: the log still has it all.
            log.error("snapshot failed: %s", e)
            return None
        finally:
            self._snapshotting = False

    def _write_snapshot(
        self, zxid: int, stream: list[bytes] | Callable[[], list[bytes]]
    ) -> tuple[Path, int]:
        """Write snapshot.<zxid> atomically (temp file, fsync, rename, fsync dir) from the
        uncompressed stream's parts (or what makes them: ``FuzzySnapshot.finish``, run
        here); worker thread."""
        s = self.settings
        parts = stream() if callable(stream) else stream
        d = s.snap_dir
        final = d / snapshot.snapshot_name(zxid, s.compression)
        tmp = d / f".{final.name}.tmp"
        try:
            with open(tmp, "wb") as f:
                if s.compression == "gz":
                    with gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
                        for p in parts:
                            gz.write(p)
                elif s.compression == "snappy":
                    for block in snappy_java_literal_stream(parts):
                        f.write(block)
                else:
                    for p in parts:
                        f.write(p)
                f.flush()
                if s.force_sync:
                    os.fsync(f.fileno())
                size = f.tell()
            os.replace(tmp, final)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        if s.force_sync:
            files.fsync_dir(d)
        return final, size

    async def _purger(self) -> None:
        s = self.settings
        log.info(
            "autopurge.snapRetainCount set to %d, autopurge.purgeInterval set to %d",
            s.snap_retain_count,
            s.purge_interval_hours,
        )
        while True:
            await self.purge()
            await trio.sleep(s.purge_interval_hours * 3600)

    async def purge(self) -> list[Path]:
        s = self.settings
        log.info("Purge task started.")
        try:
            gone = await trio.to_thread.run_sync(
                lambda: files.purge(s.snap_dir, s.txnlog_dir, retain=s.snap_retain_count)
            )
        except OSError as e:
            log.error("purge failed: %s", e)
            return []
        log.info("Purge task completed (%d files removed).", len(gone))
        return gone


def _as_entries(first: tuple[int, bytes], rest: Iterator[tuple[int, bytes]]) -> Iterator[Entry]:
    yield Entry(*first)
    for zxid, data in rest:
        yield Entry(zxid, data)


class HelperProcess(Protocol):
    """What the syncer needs of its helper process (a ``subprocess.Popen``)."""

    pid: int

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


def spawn_fsyncd() -> tuple[socket.socket, HelperProcess]:
    """Start the fsync helper (:mod:`trizk.storage.disk.fsyncd`) on one end of a Unix socket pair;
    returns the other end (non-blocking) and the process. Raises OSError."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", fsyncd.__file__, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    ours.setblocking(False)
    return ours, proc


class _SyncProcess:
    """The txn log's syncer: writes what is queued on the Trio thread and has the fsync
    helper process (:mod:`trizk.storage.disk.fsyncd`, see there why a process) make it durable,
    one sync in flight at a time. Appends made while a sync runs are written and synced by the
    next one, sent the moment the helper answers: the disk is never idle while txns wait, and
    the Trio thread keeps preparing, applying and answering meanwhile (group commit as a
    pipeline).

    Invariant: the append number reported durable is the newest one requested *before* the
    write that the answered sync covered, so every append up to it is on disk. After a
    failure (a write error, a sync error, the helper gone) the error is reported once and
    nothing is written or synced again. ``post(seq, error, ms)`` is called on the Trio thread,
    never from inside :meth:`request`."""

    def __init__(
        self,
        writer: Callable[[], files.TxnLogWriter | None],
        post: Callable[[int, OSError | None, int], None],
        spawn: Callable[[], tuple[socket.socket, HelperProcess]] = spawn_fsyncd,
    ) -> None:
        self._writer = writer
        self._post = post
        self._spawn = spawn
        self._sock: socket.socket | None = None
        self._proc: HelperProcess | None = None
        self._requested = 0
        self._target = 0  # the append number the sync in flight covers
        self._replies = 0  # replies the sync in flight still waits for (0: none in flight)
        self._t0 = 0.0
        self._dead = False
        self._later: list[tuple[int, OSError | None]] = []  # posts due, outside request()
        self._wakeup = trio.Event()
        #: the poller whose task reads the answers (:meth:`watch_with`); None: :meth:`run`
        self._poller: Poller | None = None
        self._refill: Callable[[], None] = lambda: None

    def start(self) -> None:
        """Start the helper (raises OSError)."""
        self._sock, self._proc = self._spawn()

    def request(self, seq: int) -> None:
        """Appends up to ``seq`` are in the writer's queue: sync them."""
        self._requested = seq
        if not self._replies and not self._dead:
            self._send()

    def _send(self) -> None:
        """Write what is queued and send its sync (or post it done, with nothing to sync)."""
        target = self._requested
        writer = self._writer()
        try:
            written = writer.write() if writer is not None else None
            fds: list[int] = []
            kinds = bytearray()
            dirs: list[int] = []
            if written is not None:
                fds += written.datasync
                kinds += bytes([fsyncd.DATASYNC]) * len(written.datasync)
                for d in written.new_dirs:
                    dirs.append(os.open(d, os.O_RDONLY))
                fds += dirs
                kinds += bytes([fsyncd.FSYNC]) * len(dirs)
            try:
                replies = 0
                for i in range(0, len(fds), fsyncd.MAX_FDS):
                    self._send_request(kinds[i : i + fsyncd.MAX_FDS], fds[i : i + fsyncd.MAX_FDS])
                    replies += 1
            finally:
                # the helper holds its own copies of what was sent
                for fd in dirs:
                    os.close(fd)
                if written is not None:
                    for fd in written.finished:
                        os.close(fd)
        except OSError as e:
            self._fail(target, e)
            return
        if not replies:
            self._due(target, None)  # nothing to sync (forceSync=no, or only a roll)
            return
        self._target, self._replies, self._t0 = target, replies, time.monotonic()
        if self._poller is None:
            self._wakeup.set()  # run() waits for the answer now

    def _send_request(self, kinds: bytes | bytearray, fds: list[int]) -> None:
        assert self._sock is not None
        try:
            n = socket.send_fds(self._sock, [bytes(kinds)], fds)
        except BlockingIOError:
            n = -1  # nothing else is in flight: the socket buffer cannot be full
        if n != len(kinds):
            raise OSError(errno.EIO, "the fsync helper did not take a request")

    def _fail(self, seq: int, error: OSError) -> None:
        self._dead = True
        self._unwatch()
        self._due(seq, error)

    def _due(self, seq: int, error: OSError | None) -> None:
        self._later.append((seq, error))
        if self._poller is None:
            self._wakeup.set()

    def _unwatch(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None and self._sock is not None:
            poller.unwatch(self._sock)

    def deliver(self) -> None:
        """Post what became due without a sync (nothing to sync, or a failure) -- called after
        :meth:`request`, never from inside it."""
        later = self._later
        while later:
            seq, error = later.pop(0)
            self._post(seq, error, 0)

    def on_readable(self) -> None:
        """The helper's socket is readable: take its answer; on the last one of the sync in
        flight, send the next sync (what was appended meanwhile) first, so the disk works
        while the Trio thread commits, then post this one durable."""
        sock = self._sock
        if sock is None or self._dead:
            return
        err: OSError | None = None
        try:
            data = sock.recv(fsyncd.REPLY.size)
        except BlockingIOError:
            return
        except OSError as e:
            data, err = b"", e
        target = self._target
        if len(data) < fsyncd.REPLY.size or not self._replies:
            # the helper died (or broke the protocol): nothing more can be made durable
            why = err or OSError(errno.EIO, "the fsync helper process exited")
            self._fail(target, why)
        elif code := fsyncd.REPLY.unpack(data)[0]:
            self._fail(target, OSError(code, os.strerror(code)))
        else:
            self._replies -= 1
            if not self._replies:
                ms = int((time.monotonic() - self._t0) * 1000)
                self._refill()  # (a request() made there sends at once)
                if self._requested > target and not self._replies and not self._dead:
                    self._send()
                self._post(target, None, ms)
        self.deliver()

    def watch_with(self, poller: Poller, refill: Callable[[], None]) -> None:
        """Have ``poller``'s task call :meth:`on_readable` (instead of :meth:`run`);
        ``refill()`` is called before each next sync is sent (it may append, and request)."""
        assert self._sock is not None, "start() first"
        self._poller = poller
        self._refill = refill
        poller.watch(self._sock, self.on_readable)

    async def run(self) -> None:
        """Read the helper's answers and post what they make durable, until cancelled."""
        sock = self._sock
        assert sock is not None, "start() first"
        while True:
            self.deliver()
            if self._dead:
                await trio.sleep_forever()
            if not self._replies:
                self._wakeup = trio.Event()
                await self._wakeup.wait()
                continue
            await trio.lowlevel.wait_readable(sock)
            self.on_readable()

    def stop(self) -> None:
        """Close the socket (the helper finishes the sync under way, if any, and exits) and
        reap the helper."""
        self._dead = True
        self._unwatch()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.wait(timeout=_HELPER_EXIT_S)
            except subprocess.TimeoutExpired:
                log.error("the fsync helper (pid %d) did not exit; killing it", proc.pid)
                proc.kill()
                proc.wait()


#: how long a stopping server waits for its fsync helper to finish a sync under way
_HELPER_EXIT_S = 30.0


#: snappy-java's SnappyOutputStream: magic, version 1, compatible version 1; 32 KiB blocks.
_SNAPPY_HEADER = b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
_SNAPPY_BLOCK = 32 * 1024


def snappy_java_literal_stream(parts: list[bytes]) -> Iterator[bytes]:
    """The bytes of a snappy-java stream holding ``parts``, each block one raw snappy block
    made of a single literal (snappy's format_description: varint length, then a literal tag
    ``61 << 2`` with a 2-byte little-endian length - 1). Valid for every snappy reader; it
    frames without compressing."""
    yield _SNAPPY_HEADER
    data = memoryview(b"".join(parts))
    for i in range(0, len(data), _SNAPPY_BLOCK):
        chunk = data[i : i + _SNAPPY_BLOCK]
        n = len(chunk)
        varint = bytearray()
        v = n
        while v >= 0x80:
            varint.append((v & 0x7F) | 0x80)
            v >>= 7
        varint.append(v)
        raw = bytes(varint) + bytes([61 << 2]) + (n - 1).to_bytes(2, "little")
        yield (len(raw) + n).to_bytes(4, "big") + raw + chunk
