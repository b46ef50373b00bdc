"""The only storage module that touches files: log writer, snapshot files, recovery.

Layout (as ZooKeeper's FileTxnSnapLog): snapshots in ``<dataDir>/version-2/``, logs in
``<dataLogDir>/version-2/`` (dataLogDir defaults to dataDir). Formats: :mod:`.txnlog`,
:mod:`.snapshot`.

Writing the log (group commit)
------------------------------
:class:`TxnLogWriter` separates *append* from *sync*. ``append(entries)`` only encodes and
queues (cheap, thread-safe, never blocks on the disk); ``sync()`` writes everything queued so
far and makes it durable with one ``fdatasync`` per file touched (FileTxnLog.commit uses
``FileChannel.force(false)``), then returns the last zxid now durable. ``sync`` is
``write()`` (to the page cache; it returns a :class:`Written`: which fds and directories to
sync) then ``Written.sync()``. The server writes on its Trio thread and has its fsync helper
process (:mod:`.fsyncd`) do the syncing; txns that arrive meanwhile queue up and ride the next
write: one fsync covers every txn that arrived during the previous one. An ``OSError`` from
either is fatal (ZooKeeper exits when it cannot
write its log): the queued batch is gone and the file state is unknown. Replies for a txn
must wait until a ``sync`` that returned a zxid >= its own. ``force_sync=False``
(``forceSync=no``) skips the fdatasync, not the write.

Files grow by ``prealloc_size`` zero bytes whenever the write position comes within 4 KiB of
the allocated size (FilePadding), so most fdatasyncs need no metadata update. ``roll()`` makes
the next appended txn start a new file ``log.<its zxid>`` (call it right before taking a
snapshot, as ZooKeeper does). A new file's directory entry is fsynced once, on creation.

Snapshots
---------
:func:`write_snapshot` writes ``snapshot.<hex zxid>`` atomically: temp file in the same
directory, fsync, rename, fsync of the directory. A crash leaves the old set of snapshots or
the new one, never a partial file under a snapshot name.

Recovery (:func:`recover`)
--------------------------
1. Newest snapshot that looks valid (SnapStream.isValidSnapshot), parses and whose seals
   verify; a corrupt one is logged and skipped for the previous one. Snapshot files present
   but none valid: :class:`UnrecoverableDataDir`.
   No snapshot but log entries: error too (ZooKeeper's "No snapshot found, but there are log
   entries"), unless ``trust_empty`` (zookeeper.snapshot.trust.empty).
2. Logs from the one that starts at or before the snapshot zxid on, scanned in order; every
   txn with zxid > snapshot zxid is returned for replay (the snapshot may be fuzzy: replay is
   idempotent).
3. A file that stops uncleanly (torn, checksum, 0x42, length) is cut at its last good entry
   with a log line, unless a checksum-valid entry follows the bad one (corruption in the
   middle, not a tail) or the txns after the cut do not continue the zxid sequence: then
   committed txns would be lost and we raise :class:`UnrecoverableDataDir`. So we do for a
   checksum-valid entry we cannot decode and for any zxid gap (within an epoch the counter
   steps by one; a new epoch may start anywhere).

:func:`purge` deletes what recovery from the newest N snapshots no longer needs (PurgeTxnLog).

Reading for a leader's DIFF
---------------------------
:class:`TxnLogReader` reads what ``FileTxnIterator(logDir, zxid, false)`` reads for
``ZKDatabase.getProposalsFromTxnLog``: the files chosen by name
(:func:`~trizk.storage.formats.txnlog.iterator_files`), the length the ``snapshotSizeFactor``
rule counts (the files after the one holding the first txn), and their txns lazily, as the
marshalled payloads a PROPOSAL carries. It never truncates or writes; the writer appends on
the same (Trio) thread, so a reader sees whole entries up to the zero padding.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from trizk.storage.disk import fsyncd
from trizk.storage.formats import snapshot as snap
from trizk.storage.formats import txnlog
from trizk.storage.formats.snapshot import SnapshotContent, SnapshotFormatError
from trizk.storage.formats.txnlog import LogScanner, StopReason, TxnEntry

log = logging.getLogger("trizk.storage")

VERSION_DIR = "version-2"


class UnrecoverableDataDir(RuntimeError):
    """The data directory cannot be loaded without losing committed txns."""


def version_dir(base: str | os.PathLike[str]) -> Path:
    """``<base>/version-2`` (FileTxnSnapLog.version + VERSION)."""
    return Path(base) / VERSION_DIR


# ------------------------------------------------------------------------------ listing


def list_logs(log_dir: Path) -> list[tuple[int, Path]]:
    """``log.*`` files as (first zxid, path), ascending; names that do not parse are ignored."""
    return _list(log_dir, txnlog.LOG_PREFIX)


def list_snapshots(snap_dir: Path) -> list[tuple[int, Path]]:
    """``snapshot.*`` files (any compression suffix) as (zxid, path), ascending."""
    return _list(snap_dir, snap.SNAP_PREFIX)


def _list(d: Path, prefix: str) -> list[tuple[int, Path]]:
    if not d.is_dir():
        return []
    out = []
    for p in d.iterdir():
        if not p.name.startswith(prefix + ".") or not p.is_file():
            continue
        z = txnlog.zxid_from_name(p.name, prefix)
        if z != -1:
            out.append((z, p))
    out.sort(key=lambda t: (t[0], t[1].name))
    return out


def logs_from(logs: list[tuple[int, Path]], zxid: int) -> list[tuple[int, Path]]:
    """FileTxnLog.getLogFiles: the last log starting at or before ``zxid``, and all later ones."""
    start = 0
    for i, (z, _) in enumerate(logs):
        if z <= zxid:
            start = i
        else:
            break
    return logs[start:]


# ------------------------------------------------------------------------------ small file ops


def read_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


#: a trailing data extent this small is read to see whether it only holds zeros (ZooKeeper's
#: FilePadding writes one zero byte at the end of each preallocation)
_ZERO_EXTENT_CHECK = 1 << 20


def read_log_bytes(path: Path) -> tuple[bytes, int]:
    """A txn log's bytes up to the end of what the file system stores of it, and the file's
    size: the zeros a preallocated log ends in (64 MiB by default) are a hole after the last
    record -- trizk pads with ``ftruncate``, ZooKeeper by writing one zero byte at the end --
    and reading them cost a restart ~0.1 s per log file. What is left out reads as zeros.
    Without ``SEEK_DATA`` (or on a file system that reports no holes) the whole file."""
    with open(path, "rb") as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        end = _stored_end(fd, size)
        return f.read(end), size


def _stored_end(fd: int, size: int) -> int:
    """Where the file's trailing zeros begin, as far as holes tell (``size`` if unknown)."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return size
    extents: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < size:
            try:
                start = os.lseek(fd, pos, seek_data)
            except OSError as e:
                if e.errno == errno.ENXIO:  # no data from pos on
                    break
                raise
            pos = min(os.lseek(fd, start, seek_hole), size)
            extents.append((start, pos))
        while extents and extents[-1][1] - extents[-1][0] <= _ZERO_EXTENT_CHECK:
            start, stop = extents[-1]
            if not txnlog.all_zero(memoryview(os.pread(fd, stop - start, start))):
                break
            extents.pop()  # a block of zeros (FilePadding's last byte)
    except OSError:
        return size
    finally:
        os.lseek(fd, 0, os.SEEK_SET)
    return extents[-1][1] if extents else 0


def fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _datasync(fd: int) -> None:
    fsyncd.sync_one(fsyncd.DATASYNC, fd)  # as the fsync helper does it


def truncate_file(path: Path, length: int, *, sync: bool = True) -> None:
    """Cut ``path`` to ``length`` bytes (the tail after the last good entry) and fsync it."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, length)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_snapshot(
    snap_dir: Path,
    zxid: int,
    data: bytes,
    *,
    compression: str = "",
    sync: bool = True,
) -> Path:
    """Atomically create ``snapshot.<hex zxid>[.gz]`` holding ``data`` (already serialised)."""
    snap_dir.mkdir(parents=True, exist_ok=True)
    final = snap_dir / snap.snapshot_name(zxid, compression)
    tmp = snap_dir / f".{final.name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
    if sync:
        fsync_dir(snap_dir)
    return final


def looks_valid_snapshot(path: Path) -> bool:
    """SnapStream.isValidSnapshot: the cheap check used to pick snapshots (not a full parse).

    Plain: at least 10 bytes ending in ustring "/"; gzip/snappy: the magic bytes.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if path.name.endswith(".gz"):
                return head.startswith(snap.GZIP_MAGIC)
            if path.name.endswith(".snappy"):
                return head == snap.SNAPPY_MAGIC
            size = os.fstat(f.fileno()).st_size
            if size < 10:
                return False
            f.seek(size - 5)
            return snap.plausible_tail(b"\0" * 5 + f.read(5))
    except OSError:
        return False


def purge(snap_dir: Path, log_dir: Path | None = None, *, retain: int = 3) -> list[Path]:
    """Delete snapshots and logs not needed to recover from the newest ``retain`` snapshots.

    PurgeTxnLog.purge (autopurge.snapRetainCount, at least 3): keep the ``retain`` newest
    valid-looking snapshots; delete every snapshot and log named below the oldest kept one,
    except the log that starts at or before it (it may hold txns after it). Returns the paths
    deleted.
    """
    if retain < 3:
        raise ValueError("snapRetainCount must be at least 3")
    log_dir = snap_dir if log_dir is None else log_dir
    kept = [(z, p) for z, p in reversed(list_snapshots(snap_dir)) if looks_valid_snapshot(p)]
    kept = kept[:retain]
    if not kept:
        return []
    least = kept[-1][0]
    logs = list_logs(log_dir)
    needed = {p for _, p in logs_from(logs, least)}
    doomed = [p for z, p in logs if z < least and p not in needed]
    doomed += [p for z, p in list_snapshots(snap_dir) if z < least]
    for p in doomed:
        log.info("Removing file: %s", p)
        p.unlink(missing_ok=True)
    return doomed


# ------------------------------------------------------------------------------ log writer


class _Roll:
    pass


@dataclass
class Written:
    """What one :meth:`TxnLogWriter.write` put in the files and what makes it durable: an
    fdatasync of each of ``datasync`` (empty with ``force_sync=False``) and an fsync of each
    directory of ``new_dirs`` (a log file created by this write); the fds of ``finished``
    (files the log rolled away from, also in ``datasync`` when syncing is on) are closed once
    synced."""

    last: int | None = None  # the newest zxid written (None: only rolls)
    datasync: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    new_dirs: list[Path] = field(default_factory=list)

    def sync(self) -> None:
        """Make it durable from this process (blocking), then close the finished files."""
        try:
            for fd in self.datasync:
                _datasync(fd)
            for d in self.new_dirs:
                fsync_dir(d)
        finally:
            for fd in self.finished:
                os.close(fd)


_ROLL = _Roll()


class TxnLogWriter:
    """Append-only writer of ``log.<zxid>`` files with group commit (see module docstring)."""

    def __init__(
        self,
        log_dir: Path,
        *,
        prealloc_size: int = txnlog.DEFAULT_PREALLOC_SIZE,
        force_sync: bool = True,
        dbid: int = 0,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.prealloc_size = prealloc_size
        self.force_sync = force_sync
        self.dbid = dbid
        self._lock = threading.Lock()  # guards the queue
        self._sync_lock = threading.Lock()  # one sync at a time
        self._queue: list[tuple[int, bytes] | _Roll] = []
        self._last_appended: int | None = None
        self._fd: int | None = None
        self._path: Path | None = None
        self._pos = 0
        self._size = 0
        self.last_synced_zxid: int | None = None  # newest zxid sync() made durable here
        self.syncs = 0  # fsync batches, for tests and metrics

    @property
    def current_path(self) -> Path | None:
        return self._path

    def append(self, entries: Iterable[TxnEntry]) -> None:
        """Queue entries (in zxid order) for the next :meth:`sync`."""
        self._queue_items([(e.header.zxid, txnlog.encode_entry(e)) for e in entries])

    def append_payloads(self, entries: Iterable[tuple[int, bytes]]) -> None:
        """Queue (zxid, payload) pairs whose payload is already a marshalled txn entry
        (``Util.marshallTxnEntry``: what a PROPOSAL carries) -- no decode and re-encode."""
        self.append_framed([(z, txnlog.frame_payload(data)) for z, data in entries])

    def append_framed(self, items: list[tuple[int, bytes]]) -> None:
        """Queue (zxid, entry) pairs already framed (:func:`txnlog.frame_payload`)."""
        self._queue_items(items)

    def _queue_items(self, items: list[tuple[int, bytes]]) -> None:
        with self._lock:
            for z, _ in items:
                if self._last_appended is not None and z <= self._last_appended:
                    # FileTxnLog.append only warns; we keep the order we are given.
                    log.warning("zxid %#x appended after %#x", z, self._last_appended)
                self._last_appended = z
            self._queue.extend(items)

    def roll(self) -> None:
        """The next appended txn starts a new log file (FileTxnLog.rollLog)."""
        with self._lock:
            self._queue.append(_ROLL)

    def pending(self) -> int:
        with self._lock:
            return sum(1 for i in self._queue if not isinstance(i, _Roll))

    def write(self) -> Written | None:
        """Write what is queued to the files, without syncing; None when nothing was queued
        since the previous write. The txns are durable once :meth:`Written.sync` (or another
        process holding the same files) has synced what it names."""
        with self._sync_lock:
            with self._lock:
                batch, self._queue = self._queue, []
            if not batch:
                return None
            out = Written()
            # The entries of a file are written with one pwrite; the file grows exactly as
            # entry by entry appends grow it (FilePadding before each entry, from its position).
            run: list[bytes] = []
            run_len = 0
            for item in batch:
                if isinstance(item, _Roll):
                    if run:
                        self._write(b"".join(run))
                        run, run_len = [], 0
                    if self._fd is not None:
                        # written to in this batch or earlier (then already synced): synced
                        # once more either way, then closed
                        if self._fd not in out.datasync:
                            out.datasync.append(self._fd)
                        out.finished.append(self._fd)
                        self._fd = None
                        self._path = None
                    continue
                zxid, data = item
                if self._fd is None:
                    self._open(zxid)
                    assert self._fd is not None
                    if self.force_sync:
                        out.new_dirs.append(self.log_dir)  # the new file's directory entry
                if self._fd not in out.datasync:
                    out.datasync.append(self._fd)
                if self._pos + run_len + 4096 >= self._size:  # else _pad would not grow it
                    self._pad(self._pos + run_len)
                run.append(data)
                run_len += len(data)
                out.last = zxid
            if run:
                self._write(b"".join(run))
            if not self.force_sync:
                out.datasync = []
            self.syncs += 1
            return out

    def sync(self) -> int | None:
        """Write what is queued and make it durable here (fdatasync once per touched file);
        return the last zxid synced, None when nothing had been queued since the previous
        sync. Blocking."""
        written = self.write()
        if written is None:
            return None
        written.sync()
        if written.last is not None:
            self.last_synced_zxid = written.last
        return written.last

    def _open(self, zxid: int) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / txnlog.log_name(zxid)
        if path.exists():
            # Only a file without a single good txn may be replaced (a torn start, cut back
            # by recovery); anything else would destroy committed txns.
            sc = LogScanner(read_bytes(path), decode=False)
            try:
                n = sum(1 for _ in sc)
            except txnlog.LogFormatError:
                n = 1
            if n:
                raise FileExistsError(f"{path} already holds txns; refusing to overwrite it")
        log.info("Creating new log file: %s", path.name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._fd, self._path, self._pos, self._size = fd, path, 0, 0
        self._write(txnlog.encode_file_header(self.dbid))
        self._size = self._pos

    def _pad(self, position: int) -> None:
        """FilePadding.padFile before an entry is appended at ``position``."""
        assert self._fd is not None
        new = txnlog.padded_size(position, self._size, self.prealloc_size)
        if new != self._size:
            os.ftruncate(self._fd, new)  # zero-fills: FilePadding writes one byte at new-1
            self._size = new

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            k = os.pwrite(self._fd, view, self._pos)
            self._pos += k
            view = view[k:]

    def close(self, *, sync: bool = True) -> None:
        """Sync what is queued (unless ``sync`` is false: after a failed fsync, which must not
        be retried) and close the current file."""
        if sync:
            self.sync()
        with self._sync_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                self._path = None


# ------------------------------------------------------------------------------ recovery


@dataclass
class Recovered:
    """What :func:`recover` found. Apply ``txns`` to the tree built from ``snapshot``."""

    snapshot: SnapshotContent | None
    snapshot_zxid: int  # -1: no snapshot (fresh data dir)
    snapshot_path: Path | None
    txns: list[TxnEntry]
    last_zxid: int  # highest zxid known: last txn, else snapshot zxid
    dbid: int = 0
    truncated: list[tuple[Path, int, str]] = field(default_factory=list)
    skipped_snapshots: list[tuple[Path, str]] = field(default_factory=list)


def _epoch(z: int) -> int:
    return z >> 32


def _continues(prev: int, nxt: int) -> bool:
    """nxt may follow prev in a log: next counter, or a later epoch."""
    return nxt == prev + 1 or _epoch(nxt) > _epoch(prev)


def load_snapshot(
    snap_dir: Path,
    progress: Callable[[int, int], None] | None = None,
    *,
    raw_nodes: bool = False,
) -> tuple[SnapshotContent | None, int, Path | None, list[tuple[Path, str]]]:
    """Newest verified snapshot: (content, zxid, path, skipped[(path, why)]).

    ``progress(done, total)`` gets byte offsets while a snapshot is parsed (long loads);
    ``raw_nodes``: its nodes are checked, not decoded (``snapshot.parse``)."""
    skipped: list[tuple[Path, str]] = []
    snaps = list_snapshots(snap_dir)
    for zxid, path in reversed(snaps):
        if not looks_valid_snapshot(path):
            # FileSnap.findNValidSnapshots skips these before parsing; so do we, so that both
            # servers pick the same snapshot.
            log.warning("invalid snapshot %s; trying the previous one", path)
            skipped.append((path, "does not end in a seal"))
            continue
        try:
            content = snap.parse(read_bytes(path), progress=progress, raw_nodes=raw_nodes)
        except (SnapshotFormatError, OSError) as e:
            log.warning("problem reading snap file %s: %s; trying the previous one", path, e)
            skipped.append((path, str(e)))
            continue
        log.info("Reading snapshot %s", path)
        return content, zxid, path, skipped
    if snaps:
        raise UnrecoverableDataDir(
            f"Not able to find valid snapshots in {snap_dir}: "
            + "; ".join(f"{p.name}: {why}" for p, why in skipped)
        )
    return None, -1, None, skipped


def recover(
    snap_dir: Path,
    log_dir: Path | None = None,
    *,
    trust_empty: bool = False,
    truncate: bool = True,
    progress: Callable[[int, int], None] | None = None,
    raw_nodes: bool = False,
) -> Recovered:
    """Load a data dir (``version-2`` directories); see the module docstring for the rules.

    Nothing on disk changes unless the whole directory is recoverable; then torn tails are
    cut (``truncate=False``: only reported). ``raw_nodes``: the snapshot's nodes are left
    for ``treeio.tree_from_snapshot`` to decode (``snapshot.parse``).
    """
    log_dir = snap_dir if log_dir is None else log_dir
    content, snap_zxid, snap_path, skipped = load_snapshot(snap_dir, progress, raw_nodes=raw_nodes)
    files = logs_from(list_logs(log_dir), snap_zxid) if content is not None else list_logs(log_dir)
    txns: list[TxnEntry] = []
    cuts: list[tuple[Path, int, str]] = []
    dbid = 0
    expect: int | None = snap_zxid if content is not None else None
    for i, (_, path) in enumerate(files):
        data, size = read_log_bytes(path)
        scanner = LogScanner(data)
        try:
            entries = list(scanner)
            torn = scanner.stop is not None and scanner.stop.reason is StopReason.TORN
            if torn and len(data) < size:
                # a record runs into the zeros left unread: scan the whole file, so that the
                # stop is classified as with every byte (a checksum or EOR failure)
                data = read_bytes(path)
                scanner = LogScanner(data)
                entries = list(scanner)
        except txnlog.LogFormatError as e:
            raise UnrecoverableDataDir(f"{path}: {e}") from None
        stop = scanner.stop
        assert stop is not None
        if scanner.file_header is not None and i == 0:
            dbid = scanner.file_header.dbid
        for se in entries:
            z = se.entry.zxid
            if content is not None and z <= snap_zxid:
                continue  # already in the snapshot (FileTxnIterator fast-forwards past it)
            if expect is not None:
                if z <= expect:
                    # FileTxnSnapLog.fastForwardFromEdits logs this and applies the txn anyway.
                    log.error("%#x (highest zxid) >= %#x (next log) in %s", expect, z, path.name)
                elif not _continues(expect, z):
                    raise UnrecoverableDataDir(
                        f"zxid gap in {path.name}: {z:#x} follows {expect:#x}; "
                        "committed txns are missing from the log"
                    )
            txns.append(se.entry)
            expect = z if expect is None else max(expect, z)
        if stop.reason is StopReason.PAYLOAD:
            raise UnrecoverableDataDir(
                f"{path.name} offset {stop.good_end}: undecodable txn with a valid checksum "
                f"({stop.detail})"
            )
        if not stop.reason.clean:
            if txnlog.valid_entry_follows(data, stop.good_end):
                raise UnrecoverableDataDir(
                    f"{path.name} is corrupt at offset {stop.good_end} ({stop.detail}) but valid "
                    "txns follow: truncating would lose committed txns"
                )
            # Later files, if any, must carry on where the good part ends: the gap check on
            # their first txn enforces it.
            cuts.append((path, stop.good_end, stop.detail))
    if content is None and txns and not trust_empty:
        raise UnrecoverableDataDir(
            "No snapshot found, but there are log entries. Something is broken! "
            "(trust_empty / zookeeper.snapshot.trust.empty replays the logs from empty)"
        )
    if content is not None and content.digest is not None:
        dz = content.digest.zxid
        last_txn = txns[-1].zxid if txns else snap_zxid
        if dz > last_txn:
            log.warning(
                "Highest txn zxid %#x is not covering the snapshot digest zxid %#x, "
                "which might lead to inconsistent state",
                last_txn,
                dz,
            )
    truncated = [_cut(p, off, why, truncate) for p, off, why in cuts]
    last = txns[-1].zxid if txns else snap_zxid
    return Recovered(content, snap_zxid, snap_path, txns, last, dbid, truncated, skipped)


def _cut(path: Path, offset: int, why: str, really: bool) -> tuple[Path, int, str]:
    size = path.stat().st_size
    if offset < txnlog.FILE_HEADER_SIZE:
        log.warning("log %s has a torn file header (%s); removing it", path, why)
        if really:
            path.unlink()
        return path, 0, why
    log.warning(
        "log %s: torn or corrupt tail at offset %d of %d (%s); truncating to the last good txn",
        path,
        offset,
        size,
        why,
    )
    if really:
        truncate_file(path, offset)
    return path, offset, why


# ------------------------------------------------------------------------------ reading for a sync


class TxnLogReader:
    """The txns of the on-disk log from the file holding ``zxid`` on (``FileTxnIterator(logDir,
    zxid, false)``): what a leader syncs a learner from when its committed log is too short.

    ``files`` (oldest first) are chosen once, by name (:func:`txnlog.iterator_files`).
    :attr:`storage_size` is what ``getStorageSize`` returns when ``getProposalsFromTxnLog``
    asks, right after ``init`` opened the oldest file and read the first txn: the lengths
    (zero padding included) of the files *not yet opened*, the ones after the file that
    first txn came from (``goToNextLog`` takes a file off ``storedFiles`` as it opens it).
    So a log of one file counts 0 however long it is preallocated.
    Iterating yields (zxid, payload), the payload being the marshalled entry a PROPOSAL
    carries (what ``Util.marshallTxnEntry`` rebuilds from the decoded txn, byte for byte),
    mapping one file at a time and only as far as it is read: a caller that stops early reads
    no further file, and the preallocated zeros after the last txn are never read.

    Of the txns below ``zxid`` only the newest is yielded (as ZooKeeper, every checksum is
    verified): ``queueCommittedProposals`` skips them all and remembers only the newest (the
    TRUNC point), and the first txn yielded is above ``zxid`` exactly when the log holds
    nothing at or below it (the "Unable to find proposals" case). From the first txn at or
    above ``zxid`` on, everything is yielded, in file order.

    As ``FileTxnIterator.next``: a file ends at its zero padding or at a torn, short or
    unterminated record (then the next file is read); a checksum mismatch, a negative length
    or a file without a whole, right header ends the iteration (an ``IOException`` there
    makes ``TxnLogProposalIterator`` stop).
    """

    def __init__(self, log_dir: Path, zxid: int) -> None:
        self.zxid = zxid
        self.files = [p for _, p in txnlog.iterator_files(list_logs(log_dir), zxid)]
        #: the index in ``files`` of the file the first txn was read from (None: none yet)
        self.first_file: int | None = None

    @property
    def storage_size(self) -> int:
        """``FileTxnIterator.getStorageSize`` once ``init`` has read the first txn: the
        lengths of the files after the one holding it (all of them before any txn was read:
        then the first-txn file is not known yet; read one first)."""
        start = 0 if self.first_file is None else self.first_file + 1
        return sum(length(p) for p in self.files[start:])

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        zxid = self.zxid
        reached = False  # a txn at or above zxid was seen
        held: tuple[int, bytes] | None = None  # the newest txn below zxid, not yet yielded
        for index, path in enumerate(self.files):
            try:
                with open(path, "rb") as f:
                    if os.fstat(f.fileno()).st_size < txnlog.FILE_HEADER_SIZE:
                        break
                    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except OSError as e:
                log.error("Unable to read txnlog from disk: %s", e)
                break
            view = memoryview(mm)
            spans = None
            try:
                try:
                    txnlog.decode_file_header(view)
                except txnlog.LogFormatError as e:
                    log.error("Unable to read txnlog %s: %s", path, e)
                    break
                spans = txnlog.entry_spans(view, None if reached else zxid)
                while True:
                    try:
                        z, start, stop = next(spans)
                    except StopIteration as end:
                        reason: StopReason = end.value
                        break
                    if self.first_file is None:
                        self.first_file = index
                    if reached:
                        yield z, bytes(view[start:stop])
                    elif z < zxid:
                        held = (z, bytes(view[start:stop]))
                    else:
                        reached = True
                        if held is not None:
                            yield held
                            held = None
                        yield z, bytes(view[start:stop])
            finally:
                if spans is not None:
                    spans.close()
                view.release()
                mm.close()
            if reason is not StopReason.EOF:
                log.error("Unable to read txnlog %s: %s", path, reason)
                break
        if held is not None:
            yield held
        if self.first_file is None:
            # no txn in any file: FileTxnIterator.init opened them all looking for one
            self.first_file = len(self.files) - 1


def length(p: Path) -> int:
    """``File.length()``: 0 for a file that is gone."""
    try:
        return p.stat().st_size
    except OSError:
        return 0


def newest_valid_snapshot(snap_dir: Path) -> Path | None:
    """``FileSnap.findMostRecentSnapshot``: the newest snapshot that looks valid (not parsed)."""
    for _, path in reversed(list_snapshots(snap_dir)):
        if looks_valid_snapshot(path):
            return path
    return None


# ------------------------------------------------------------------------------ TRUNC


def truncate_log(log_dir: Path, zxid: int) -> list[Path]:
    """Cut the txn log right after the entry ``zxid`` and delete the log files after it
    (``FileTxnLog.truncate``, a learner's TRUNC). Returns the files deleted. The writer must
    be closed meanwhile; the next append starts a new file."""
    logs = list_logs(log_dir)
    deleted: list[Path] = []
    for start, path in reversed(logs):
        if start <= zxid:
            break
        path.unlink()
        deleted.append(path)
    kept = [(s, p) for s, p in logs if s <= zxid]
    if kept:
        _, path = kept[-1]
        data = read_bytes(path)
        cut: int | None = None
        for se in LogScanner(data, decode=False):
            if se.entry.zxid > zxid:
                cut = se.offset
                break
        if cut is not None:
            truncate_file(path, cut)
    if deleted:
        fsync_dir(log_dir)
    return deleted
