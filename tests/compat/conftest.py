"""Fixtures of the compatibility suite: real ZooKeeper and trizk as separate processes.

Each fixture starts its server with :mod:`trizk.compat.procs.servers` (free loopback port, own temp
directory, readiness = a real session handshake, stopped by PID). Without a ZooKeeper
installation the tests are skipped, except under CI (``CI`` set), where a missing oracle is a
failure: ``compat/install-zookeeper.sh`` is supposed to have installed it. ZooKeeper 3.9.3 (the
second oracle, unpacked privately by the same script) has its own check:
``require_zookeeper("3.9.3")`` and the ``needs_zookeeper39`` fixture.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from trizk.compat.procs import servers


def require_zookeeper(version: str = "3.8.0") -> None:
    if servers.zookeeper_available(version):
        return
    if os.environ.get("CI"):
        pytest.fail(f"ZooKeeper {version} is not installed: run compat/install-zookeeper.sh")
    if version == "3.8.0":
        pytest.skip("ZooKeeper (Debian zookeeper package) is not installed")
    pytest.skip(
        f"ZooKeeper {version} is not installed (compat/install-zookeeper.sh unpacks it into "
        f"{servers.ZK39_DIR})"
    )


def trizk_answers_as(version: str) -> bool:
    """Whether trizk has the setting to answer as ZooKeeper ``version`` (3.8.0 is what it
    answers as without one)."""
    from trizk.server.common.coreconfig import CoreConfig

    fields = getattr(CoreConfig, "__dataclass_fields__", {})
    return version == "3.8.0" or "zookeeper_version" in fields


def require_trizk_version(version: str) -> None:
    """Skip a comparison of trizk with ZooKeeper ``version`` that needs trizk to answer as that
    release, until trizk can (issue 27's version setting)."""
    if not trizk_answers_as(version):
        pytest.skip("trizk version setting pending")


@pytest.fixture
def needs_zookeeper() -> None:
    require_zookeeper()


@pytest.fixture
def needs_zookeeper39() -> None:
    require_zookeeper("3.9.3")


@pytest.fixture
def zookeeper_server() -> Iterator[servers.Server]:
    require_zookeeper()
    with servers.running("zookeeper") as srv:
        yield srv


@pytest.fixture
def trizk_process_server() -> Iterator[servers.Server]:
    with servers.running("trizk") as srv:
        yield srv
