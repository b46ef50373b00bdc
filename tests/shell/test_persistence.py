"""Durability settings as ZooKeeper reads them (server/shell/persistence.py)."""

from __future__ import annotations

import errno
import os
import select
import socket
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import trio

from trizk.jute import records as r
from trizk.jute.codes import OpCode
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.shell.persistence import Persistence, PersistenceSettings, StorageFailure
from trizk.server.shell.poller import Poller
from trizk.server.writes.committer import Proposal
from trizk.storage.disk import files, fsyncd
from trizk.storage.formats import txnlog


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


def test_each_number_as_zookeeper_parses_it(caplog: pytest.LogCaptureFixture) -> None:
    # snapCount: Integer.getInteger (Integer.decode, silently the default); preAllocSize:
    # Long.parseLong (decimal only) with FileTxnLog's warning.
    assert settings(snapCount="0x10").snap_count == 16
    assert settings(snapCount="010").snap_count == 8
    assert settings(snapCount="1_000").snap_count == 100_000
    assert settings(preAllocSize="+8").prealloc_size == 8 * 1024
    assert settings(preAllocSize="0x10").prealloc_size == 64 * 1024 * 1024
    assert "0x10 is not a valid value for preAllocSize" in caplog.text
    assert settings(**{"digest.enabled": ""}).digest_enabled is False  # parseBoolean("")


def test_snappy_literal_stream_reads_back() -> None:
    import os

    from trizk.server.shell.persistence import snappy_java_literal_stream
    from trizk.storage.formats import snapshot

    for n in (0, 1, 100, 32 * 1024, 32 * 1024 + 1, 100_000):
        data = os.urandom(n)
        out = b"".join(snappy_java_literal_stream([data[: n // 3], data[n // 3 :]]))
        assert out.startswith(snapshot.SNAPPY_MAGIC)
        assert snapshot.snappy_java_decompress(out) == data


class StandInHelper:
    """Plays the fsync helper (trizk.storage.disk.fsyncd) on the other end of a socket pair, in a
    thread: each request's descriptors go to ``answer``, whose return value is the reply (0,
    or an errno), as the real helper's; the test decides when it answers."""

    def __init__(self, answer: Callable[[list[int]], int]) -> None:
        self.answer = answer
        self.requests = 0
        self.pid = -1
        self._thread: threading.Thread | None = None

    def spawn(self) -> tuple[socket.socket, StandInHelper]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._thread = threading.Thread(target=self._serve, args=(theirs,), daemon=True)
        self._thread.start()
        ours.setblocking(False)
        return ours, self

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            while True:
                msg, fds, _, _ = socket.recv_fds(sock, 64, 64)
                if not msg:
                    return
                self.requests += 1
                try:
                    err = self.answer(fds)
                finally:
                    for fd in fds:
                        os.close(fd)
                sock.sendall(fsyncd.REPLY.pack(err))
                if err:
                    return

    def wait(self, timeout: float | None = None) -> int:
        assert self._thread is not None
        self._thread.join(timeout)
        return 0

    def kill(self) -> None:
        raise AssertionError("the stand-in helper exits when its socket closes")


class Driven:
    """Runs a Persistence as the server does: committer and syncer tasks (``mode="task"``),
    or driven by a poller (``"poller"``, the standalone server's way), where a proposal is made
    inside a pass -- as a client's request is -- by the callback of a socket pair the poller
    watches, and the fsync helper's answers are read and committed in the poller's passes."""

    def __init__(self, p: Persistence, mode: str) -> None:
        self.p = p
        self.mode = mode
        self.waiting: list[Proposal] = []
        self.poller: Poller | None = None
        self._pair: tuple[socket.socket, socket.socket] | None = None
        if mode == "poller":
            self.poller = Poller(
                None,  # type: ignore[arg-type]  # (no client sockets)
                lambda: 0,
                receive_size=4096,
                soft_limit=1 << 20,
                hard_limit=1 << 21,
                linger_ms=0,
            )
            p.drive_with(self.poller)

    async def start(self, nursery: trio.Nursery) -> None:
        await nursery.start(self.p.run)
        if self.poller is not None:
            ours, theirs = socket.socketpair()
            ours.setblocking(False)
            theirs.setblocking(False)
            self._pair = (ours, theirs)
            self.poller.watch(theirs, self._in_pass)
            nursery.start_soon(self.poller.run)

    def _in_pass(self) -> None:
        assert self._pair is not None
        self._pair[1].recv(4096)
        batch, self.waiting = self.waiting, []
        for x in batch:
            self.p.propose(x)

    def propose(self, x: Proposal) -> None:
        if self._pair is None:
            self.p.propose(x)
        else:
            self.waiting.append(x)
            self._pair[0].send(b"x")


def create_session(zxid: int) -> Proposal:
    return Proposal(r.TxnHeader(zxid, 1, zxid, 0, OpCode.CREATESESSION), r.CreateSessionTxn(5000))


def first_failure(exc: BaseException) -> BaseException:
    """A StorageFailure, alone or (trio >= 0.25, strict exception groups) in a group."""
    while isinstance(exc, BaseExceptionGroup):
        assert len(exc.exceptions) == 1
        exc = exc.exceptions[0]
    return exc


MODES = pytest.mark.parametrize("mode", ["task", "poller"])


@MODES
async def test_failed_fsync_stops_the_committer_without_acknowledging(
    tmp_path: Path, mode: str
) -> None:
    """EIO from fsync: the committer stops with StorageFailure; nothing of the batch reaches
    the commit sink (no reply), and fsync is not tried again."""
    helper = StandInHelper(lambda fds: errno.EIO)
    p = Persistence(settings(dataDir=str(tmp_path)))
    p._spawn = helper.spawn
    p.load()
    committed: list[object] = []
    p.attach(lambda batch, now: committed.extend(batch), lambda: None, lambda: 0)
    driven = Driven(p, mode)
    with trio.fail_after(10):
        with pytest.raises((StorageFailure, BaseExceptionGroup)) as info:
            async with trio.open_nursery() as nursery:
                await driven.start(nursery)
                driven.propose(create_session(1))
                await trio.sleep_forever()
    failure = first_failure(info.value)
    assert isinstance(failure, StorageFailure)
    assert failure.errno == errno.EIO
    assert committed == [] and helper.requests == 1


@MODES
async def test_dead_fsync_helper_stops_the_server_without_acknowledging(
    tmp_path: Path, mode: str
) -> None:
    """The real helper process killed: the next batch cannot be made durable, so it is not
    committed and the log fails (as ZooKeeper's server stops when its SyncThread dies)."""
    p = Persistence(settings(dataDir=str(tmp_path)))
    p.load()
    committed: list[int] = []
    p.attach(lambda batch, now: committed.extend(x.hdr.zxid for x in batch), lambda: None)
    driven = Driven(p, mode)
    with trio.fail_after(10):
        with pytest.raises((StorageFailure, BaseExceptionGroup)) as info:
            async with trio.open_nursery() as nursery:
                await driven.start(nursery)
                driven.propose(create_session(1))
                while committed != [1]:  # the helper works...
                    await trio.sleep(0.001)
                assert p._syncer is not None and p._syncer._proc is not None
                helper = p._syncer._proc
                helper.kill()  # ...until it is gone
                helper.wait()
                driven.propose(create_session(2))
                await trio.sleep_forever()
    failure = first_failure(info.value)
    assert isinstance(failure, StorageFailure)
    assert committed == [1]


def serving_fsyncd() -> tuple[socket.socket, threading.Event]:
    """The real helper's loop on one end of a socket pair, in a thread (it closes its end
    when the loop ends, as its main() does); the other end, and an event set when it ended."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    done = threading.Event()

    def serve() -> None:
        with theirs:
            fsyncd.serve(theirs)
        done.set()

    threading.Thread(target=serve, daemon=True).start()
    return ours, done


def test_fsyncd_answers_zero_for_synced_files_and_the_errno_of_a_failure(tmp_path: Path) -> None:
    """The real helper's loop: a file and a directory are synced (0); a request whose kinds
    do not match its descriptors is refused (EPROTO), never answered 0; a descriptor that
    cannot be fdatasynced (a pipe: EINVAL) is reported. Either ends the helper."""
    f = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    d = os.open(tmp_path, os.O_RDONLY)
    rd, wr = os.pipe()
    try:
        os.write(f, b"x")
        ours, done = serving_fsyncd()
        with ours:
            socket.send_fds(ours, [b"df"], [f, d])
            assert ours.recv(4) == fsyncd.REPLY.pack(0)
            socket.send_fds(ours, [b"dd"], [f])
            assert ours.recv(4) == fsyncd.REPLY.pack(errno.EPROTO)
            assert done.wait(10) and ours.recv(4) == b""  # it ended and closed its end
        ours, done = serving_fsyncd()
        with ours:
            socket.send_fds(ours, [b"d"], [rd])
            assert ours.recv(4) == fsyncd.REPLY.pack(errno.EINVAL)
            assert done.wait(10) and ours.recv(4) == b""
        ours, done = serving_fsyncd()
        ours.close()  # the server closed its end: the helper ends
        assert done.wait(10)
    finally:
        for fd in (f, d, rd, wr):
            os.close(fd)


class GatedDisk:
    """A slow disk for the stand-in helper: sync ``n`` records the zxids the log file holds
    when it is asked for (``written[n]``), sets ``started[n]`` and waits for ``release[n]``."""

    def __init__(self, log_dir: Path, syncs: int = 3) -> None:
        self.log_dir = log_dir
        self.started = [threading.Event() for _ in range(syncs)]
        self.release = [threading.Event() for _ in range(syncs)]
        self.written: list[list[int]] = []

    def answer(self, fds: list[int]) -> int:
        n = len(self.written)
        (log_file,) = self.log_dir.glob("log.*")
        scan = txnlog.LogScanner(log_file.read_bytes(), decode=False)
        self.written.append([e.entry.header.zxid for e in scan])
        self.started[n].set()
        assert self.release[n].wait(10), "the test did not release the sync"
        os.fdatasync(fds[0])
        return 0


def on_gated_disk(tmp_path: Path) -> tuple[GatedDisk, StandInHelper, Persistence]:
    """A loaded Persistence in ``tmp_path`` whose stand-in helper syncs on a GatedDisk."""
    disk = GatedDisk(tmp_path / "version-2")
    helper = StandInHelper(disk.answer)
    p = Persistence(settings(dataDir=str(tmp_path)))
    p._spawn = helper.spawn
    p.load()
    return disk, helper, p


async def until(ev: threading.Event) -> None:
    while not ev.is_set():
        await trio.sleep(0.001)  # a bounded poll of another thread's event


@pytest.mark.slow
@MODES
async def test_group_commit_pipeline_commits_each_batch_after_a_sync_that_covers_it(
    tmp_path: Path, mode: str
) -> None:
    """While sync N runs, the txns proposed meanwhile are appended and go with sync N+1, which
    starts the moment sync N is answered; batch N is committed (handed to the sink) only once
    the sync covering it has been answered -- never earlier, in proposal order."""
    disk, helper, p = on_gated_disk(tmp_path)
    started, release, written = disk.started, disk.release, disk.written
    committed: list[int] = []
    in_pass: list[bool] = []  # each commit made inside a poller pass?

    def sink(batch: Sequence[Proposal], now: int) -> None:
        committed.extend(x.hdr.zxid for x in batch)
        in_pass.append(p._in_pass)

    p.attach(sink, lambda: None)
    driven = Driven(p, mode)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await driven.start(nursery)
            driven.propose(create_session(1))
            await until(started[0])  # sync 1 covers txn 1 and is running
            driven.propose(create_session(2))
            driven.propose(create_session(3))
            while p.outstanding != 3 or p._appended < 2:  # appended while sync 1 runs
                await trio.sleep(0.001)
            assert committed == []  # nothing is committed while its sync runs
            release[0].set()
            await until(started[1])  # sync 2 starts right after sync 1, with txns 2 and 3
            while committed != [1]:
                await trio.sleep(0.001)
            assert written == [[1], [1, 2, 3]]  # each written before its sync was asked for
            release[1].set()
            while committed != [1, 2, 3]:
                await trio.sleep(0.001)
            release[2].set()
            nursery.cancel_scope.cancel()
    assert p.syncs == 2 and helper.requests == 2
    # driven by a poller, each batch is committed where the helper's answer is read
    assert in_pass == [mode == "poller"] * 2
    assert [e.header.zxid for e in files.recover(tmp_path / "version-2").txns] == [1, 2, 3]


@pytest.mark.slow
async def test_a_pass_s_proposals_join_the_sync_its_helper_answer_sends(tmp_path: Path) -> None:
    """Driven by a poller: txns proposed in a pass before the helper's answer is read there
    go with the sync that answer sends (appended first), not with the one after it."""
    disk, helper, p = on_gated_disk(tmp_path)
    started, release, written = disk.started, disk.release, disk.written
    committed: list[int] = []
    p.attach(lambda batch, now: committed.extend(x.hdr.zxid for x in batch), lambda: None)
    driven = Driven(p, "poller")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await driven.start(nursery)
            driven.propose(create_session(1))
            await until(started[0])  # sync 1 (txn 1) runs
            driven.propose(create_session(2))
            while p._appended < 2:  # txn 2 appended in a pass of its own, waiting for sync 2
                await trio.sleep(0.001)
            # One pass sees both: the proposal of txn 3 (ready first), then the helper's answer.
            driven.propose(create_session(3))
            release[0].set()
            assert p._syncer is not None and p._syncer._sock is not None
            ready, _, _ = select.select([p._syncer._sock], [], [], 10)  # (blocks this thread)
            assert ready
            await until(started[1])
            assert written == [[1], [1, 2, 3]]  # txn 3 did not wait for a third sync
            release[1].set()
            while committed != [1, 2, 3]:
                await trio.sleep(0.001)
            release[2].set()
            nursery.cancel_scope.cancel()
    assert p.syncs == 2 and helper.requests == 2


async def test_a_sync_of_more_fds_than_one_request_takes_is_split_and_posted_once(
    tmp_path: Path,
) -> None:
    """More descriptors than one request may carry (many log rolls in one batch) go in
    several requests, in order; the appends are posted durable once, after the last answer."""
    from trizk.server.shell.persistence import _SyncProcess

    n = fsyncd.MAX_FDS + 6
    f = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    seen: list[int] = []

    class Writer:
        def write(self) -> files.Written:
            fds = [os.dup(f) for _ in range(n)]
            return files.Written(last=7, datasync=fds, finished=fds)

    def answer(fds: list[int]) -> int:
        seen.append(len(fds))
        return 0

    helper = StandInHelper(answer)
    posts: list[tuple[int, OSError | None]] = []
    syncer = _SyncProcess(
        lambda: Writer(),  # type: ignore[arg-type,return-value]
        lambda seq, err, ms: posts.append((seq, err)),
        helper.spawn,
    )
    syncer.start()
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(syncer.run)
                syncer.request(1)
                while not posts:
                    await trio.sleep(0.001)
                nursery.cancel_scope.cancel()
    finally:
        syncer.stop()
        os.close(f)
    assert seen == [fsyncd.MAX_FDS, 6] and posts == [(1, None)]
