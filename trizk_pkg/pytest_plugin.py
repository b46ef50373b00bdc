"""The trizk pytest plugin (registered through the ``pytest11`` entry point on ``pip install``).

Fixtures, cheapest first (figures for the default in-process mode on a small machine):

* ``trizk_chroot`` (function scope, ~5 ms): a fresh, empty znode path on the session-wide
  server and a connect string with that chroot (``127.0.0.1:PORT/trizk-tests/<test>-<n>``).
  Tests are isolated by path, not by server: sessions, the clock and server controls are
  shared, so a test that expires sessions, drops connections or moves the clock wants
  ``trizk_fresh_server``.
* ``trizk_session_server`` (session scope, one start per pytest process, ~20 ms): a
  :class:`trizk.testing.Server` shared by every test of the run (of the xdist worker).
* ``trizk_fresh_server`` (function scope, one server start and stop per test, ~20 ms
  in-process, ~0.3 s as a child process): a server of the test's own, for tests that restart,
  kill, expire sessions, drop connections or move the clock.

* ``trizk_ensemble`` (function scope, one ensemble start and stop per test: ~0.5 s to a
  serving quorum in-process, ~3 s as child processes): a :class:`trizk.testing.Ensemble` of
  three members (``@pytest.mark.trizk_ensemble(n=5, observers=1)`` for another shape), up and
  with a leader when the test starts, torn down after it -- for tests of leader loss,
  restarts and partitions (``kill``, ``restart``, ``isolate``, ``cut``, ``partition``,
  ``heal``).

``--trizk-mode=process`` makes every fixture start a real ``trizk-server`` child instead of a
thread (for ``kill()`` as SIGKILL; the controls go through its ``--testing`` HTTP endpoint).

Under pytest-xdist every worker has its own servers: free ports (bound to port 0, never
guessed), data directories under the worker's own base temp dir. Every server is stopped and
its directory deleted at fixture teardown, whether the test passed, failed or was interrupted.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from trizk.testing import IN_PROCESS, PROCESS, Server

if TYPE_CHECKING:
    from trizk.testing.ensemble import Ensemble

__all__ = [
    "Chroot",
    "trizk_chroot",
    "trizk_ensemble",
    "trizk_fresh_server",
    "trizk_session_server",
]

CHROOT_BASE = "/trizk-tests"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trizk", "trizk ZooKeeper-compatible test servers")
    group.addoption(
        "--trizk-mode",
        choices=[IN_PROCESS, PROCESS],
        default=IN_PROCESS,
        help="run trizk fixtures' servers in a thread (in-process, default) or as child"
        " processes (process)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "trizk_ensemble(n=3, observers=0, **kwargs): the shape of the trizk_ensemble fixture's"
        " ensemble (keyword arguments of trizk.testing.Ensemble)",
    )


@dataclass(frozen=True)
class Chroot:
    """A test's own path on a shared server."""

    server: Server
    #: the chroot path, e.g. ``/trizk-tests/test_x-3``
    path: str

    @property
    def connect_string(self) -> str:
        """The server's connect string with the chroot: give it to any client as is."""
        return self.server.connect_string + self.path

    hosts = connect_string


def _server(request: pytest.FixtureRequest, factory: pytest.TempPathFactory) -> Server:
    mode = request.config.getoption("--trizk-mode", default=IN_PROCESS)
    return Server(mode=mode, base_dir=factory.getbasetemp())


@pytest.fixture(scope="session")
def trizk_session_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """Session scope: one trizk server for the whole run (per xdist worker); started on first
    use (~20 ms in-process), stopped and deleted at the end of the session. Shared state:
    prefer ``trizk_chroot`` for isolation by path."""
    with _server(request, tmp_path_factory) as srv:
        yield srv


_chroot_ids = itertools.count(1)


@pytest.fixture
def trizk_chroot(trizk_session_server: Server, request: pytest.FixtureRequest) -> Chroot:
    """Function scope: a fresh empty path on the session-wide server (one create, ~5 ms).
    Use ``trizk_chroot.connect_string`` as the client's hosts. The path is not deleted after
    the test (the whole server is, at the end of the session)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    path = f"{CHROOT_BASE}/{name}-{next(_chroot_ids)}"
    trizk_session_server.load({path: None})
    return Chroot(trizk_session_server, path)


@pytest.fixture
def trizk_fresh_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """Function scope: a server of this test's own (~20 ms in-process, ~0.3 s as a child
    process), stopped and deleted after the test -- for restarts, kills, session expiry,
    dropped connections and clock moves that must not touch other tests."""
    with _server(request, tmp_path_factory) as srv:
        yield srv


@pytest.fixture
def trizk_ensemble(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ensemble]:
    """Function scope: an ensemble of this test's own (three members unless the test's
    ``trizk_ensemble`` marker says otherwise; ~0.5 s in-process, ~3 s as child processes),
    serving with a leader when the test starts; every member, proxy and directory is gone
    after the test."""
    from trizk.testing.ensemble import Ensemble

    marker = request.node.get_closest_marker("trizk_ensemble")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    kwargs.setdefault("mode", request.config.getoption("--trizk-mode", default=IN_PROCESS))
    kwargs.setdefault("base_dir", tmp_path_factory.getbasetemp())
    with Ensemble(*(marker.args if marker is not None else ()), **kwargs) as ens:
        yield ens
