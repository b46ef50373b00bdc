"""The second oracle, Apache ZooKeeper 3.9.3 (Debian trixie's jars, unpacked privately by
``compat/install-zookeeper.sh``), beside 3.8.0.

* ``test_both_releases_run_side_by_side``: :func:`trizk.compat.procs.servers.start` runs 3.9.3
  and 3.8.0 at once, each answering ``ruok``, ``srvr`` with its own version line, and serving a
  session.

Skipped (with the reason) when 3.9.3 is not installed; under CI a missing oracle fails.
"""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from trizk.compat.procs import servers
from trizk.compat.procs.ensemble import four_letter


def _kazoo(srv: servers.Server) -> KazooClient:
    zk = KazooClient(hosts=srv.address, timeout=10)
    zk.start(timeout=30)
    return zk


def test_unknown_version_is_refused() -> None:
    with pytest.raises(ValueError, match=r"3\.7\.1"):
        servers.start("zookeeper", version="3.7.1")


def test_both_releases_run_side_by_side(needs_zookeeper: None, needs_zookeeper39: None) -> None:
    with (
        servers.running("zookeeper", version="3.9.3") as new,
        servers.running("zookeeper") as old,
    ):
        assert new.version == "3.9.3" and old.version == "3.8.0"
        for srv, release in ((new, "3.9.3"), (old, "3.8.0")):
            assert four_letter(srv.port, "ruok") == "imok"
            assert four_letter(srv.port, "srvr").startswith(f"Zookeeper version: {release}-")
            zk = _kazoo(srv)
            try:
                zk.create("/side", release.encode())
                assert zk.get("/side")[0] == release.encode()
            finally:
                zk.stop()
                zk.close()
