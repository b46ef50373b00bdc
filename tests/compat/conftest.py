"""Fixtures of the compatibility suite: real ZooKeeper and trizk as separate processes.

Each fixture starts its server with :mod:`trizk.compat.procs.servers` (free loopback port, own temp
directory, readiness = a real session handshake, stopped by PID). Without a ZooKeeper
installation the tests are skipped, except under CI (``CI`` set), where a missing oracle is a
failure: ``compat/install-zookeeper.sh`` is supposed to have installed it. The default oracle is
:data:`servers.DEFAULT_VERSION` (3.9.3, unpacked privately by the same script; trizk answers as
it by default), checked by ``require_zookeeper()`` and the ``needs_zookeeper`` fixture; the
other release has its own check: ``require_zookeeper("3.8.0")`` and ``needs_zookeeper38``
(``needs_zookeeper39`` names 3.9.3 explicitly).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from trizk.compat.procs import servers


def require_zookeeper(version: str = servers.DEFAULT_VERSION) -> None:
    if servers.zookeeper_available(version):
        return
    if os.environ.get("CI"):
        pytest.fail(f"ZooKeeper {version} is not installed: run compat/install-zookeeper.sh")
    if version == "3.8.0":
        pytest.skip("ZooKeeper 3.8.0 (Debian zookeeper package) is not installed")
    pytest.skip(
        f"ZooKeeper {version} is not installed (compat/install-zookeeper.sh unpacks it into "
        f"{servers.ZK39_DIR})"
    )


def trizk_answers_as(version: str) -> bool:
    """Whether trizk has the setting to answer as ZooKeeper ``version``."""
    from trizk.server.common import release

    return version in release.RELEASES


def require_trizk_version(version: str) -> None:
    """Skip a comparison of trizk with ZooKeeper ``version`` that needs trizk to answer as that
    release, when it cannot."""
    if not trizk_answers_as(version):
        pytest.skip(f"trizk does not answer as ZooKeeper {version}")


@pytest.fixture
def needs_zookeeper() -> None:
    """The default oracle (:data:`servers.DEFAULT_VERSION`)."""
    require_zookeeper()


@pytest.fixture
def needs_zookeeper38() -> None:
    require_zookeeper("3.8.0")


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
