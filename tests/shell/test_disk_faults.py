"""A full disk under the txn log, on a real small filesystem (a tmpfs the test mounts; root only).

ZooKeeper 3.8.0, checked side by side here: the SyncThread fails with "No space left on
device", the server exits with code 1 ("Severe unrecoverable error"), no write it acknowledged
is lost, and after space is freed a restart recovers them all (the torn tail of the log cut).
trizk must do the same, or something safer.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.retry import KazooRetry

from trizk.compat.procs import servers
from trizk.testing.ports import free_port
from trizk.testing.probes import handshake_ok

#: the tmpfs: room for the filler plus ~3 MB of data
FS_SIZE = "8m"
FILLER = 5 * 1024 * 1024
NODE = b"v" * 4000
MAX_WRITES = 3000  # the disk is full long before this


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_SIZE}", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _start(kind: str, cfg: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log = workdir / f"{kind}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            servers._command(kind, cfg, workdir),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    return proc, log


def _wait_ready(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited while starting"
        if handshake_ok("127.0.0.1", port, timeout=2.0):
            return
        time.sleep(0.05)  # polling interval of a bounded readiness loop
    raise AssertionError("server not ready within 60 s")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["trizk", pytest.param("zookeeper", marks=pytest.mark.oracle)])
def test_full_disk_stops_the_server_and_loses_no_acknowledged_write(
    kind: str, small_fs: Path, tmp_path: Path
) -> None:
    if kind == "zookeeper" and not servers.zookeeper_available():
        pytest.skip("Apache ZooKeeper is not installed")
    data = small_fs / "data"
    data.mkdir()
    filler = small_fs / "filler"
    filler.write_bytes(b"\0" * FILLER)
    port = free_port()
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        servers.make_cfg(port, str(data), {"preAllocSize": "16", "snapCount": "1000000"})
    )
    proc, log = _start(kind, cfg, tmp_path)
    try:
        _wait_ready(proc, port)
        zk = KazooClient(
            hosts=f"127.0.0.1:{port}",
            timeout=5,
            connection_retry=KazooRetry(max_tries=1),
            command_retry=KazooRetry(max_tries=0),
        )
        zk.start(timeout=30)
        acked: list[int] = []
        try:
            for i in range(MAX_WRITES):
                zk.create(f"/n{i}", NODE)
                acked.append(i)
        except KazooException:
            pass
        finally:
            zk.stop()
            zk.close()
        assert 0 < len(acked) < MAX_WRITES, "the disk never filled"
        assert proc.wait(30) == 1  # stops, as ZooKeeper does (ExitCode.UNEXPECTED_ERROR)
        text = log.read_text(errors="replace")
        assert "No space left on device" in text
        assert "Severe unrecoverable error" in text

        filler.unlink()  # space freed: restart on the same data directory
        proc, log = _start(kind, cfg, tmp_path)
        _wait_ready(proc, port)
        zk = KazooClient(hosts=f"127.0.0.1:{port}", timeout=10)
        zk.start(timeout=30)
        try:
            missing = [i for i in acked if zk.get(f"/n{i}")[0] != NODE]
            assert missing == []
        finally:
            zk.stop()
            zk.close()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
