"""Fixtures of the compatibility suite: real ZooKeeper and trizk as separate processes.

Each fixture starts its server with :mod:`trizk.compat.procs.servers` (free loopback port, own temp
directory, readiness = a real session handshake, stopped by PID). Without a ZooKeeper
installation the tests are skipped, except under CI (``CI`` set), where a missing oracle is a
failure: ``compat/install-zookeeper.sh`` is supposed to have installed it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from trizk.compat.procs import servers


def require_zookeeper() -> None:
    if servers.zookeeper_available():
        return
    if os.environ.get("CI"):
        pytest.fail("ZooKeeper is not installed: run compat/install-zookeeper.sh")
    pytest.skip("ZooKeeper (Debian zookeeper package) is not installed")


@pytest.fixture
def needs_zookeeper() -> None:
    require_zookeeper()


@pytest.fixture
def zookeeper_server() -> Iterator[servers.Server]:
    require_zookeeper()
    with servers.running("zookeeper") as srv:
        yield srv


@pytest.fixture
def trizk_process_server() -> Iterator[servers.Server]:
    with servers.running("trizk") as srv:
        yield srv
