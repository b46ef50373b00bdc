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
It is the one knob of every trizk test server: the option sets the environment variable
``TRIZK_MODE`` (which works alone too, e.g. for a pytest run you cannot add options to), and
the kazoo drop-in reads the same variable. (``TRIZK_TEST_MODE``, its first name, still works
with a DeprecationWarning.)

``--trizk-kazoo`` (or ``TRIZK_KAZOO=1``) runs a suite written for kazoo's own test harness
unchanged on trizk: ``kazoo.testing`` and ``kazoo.testing.harness`` become
:mod:`trizk.kazoo_harness` for the run, so ``pytest --trizk-kazoo --pyargs kazoo.tests`` runs
kazoo's own suite (or a project's ``from kazoo.testing import KazooTestCase`` tests) with no
JVM and no edit; the first cluster starts while pytest collects the tests
(:func:`trizk.kazoo_harness.start_ahead`).

Under pytest-xdist every worker has its own servers: free ports (bound to port 0, never
guessed), data directories under the worker's own base temp dir. Every server is stopped and
its directory deleted at fixture teardown, whether the test passed, failed or was interrupted.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from trizk.testing import IN_PROCESS, MODE_ENV, PROCESS, Server, mode_from_env

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
#: the environment variable that does what ``--trizk-kazoo`` does (``1``, ``true``, ``yes``)
KAZOO_ENV = "TRIZK_KAZOO"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trizk", "trizk ZooKeeper-compatible test servers")
    group.addoption(
        "--trizk-mode",
        choices=[IN_PROCESS, PROCESS],
        default=None,
        help="run trizk test servers (the fixtures' and the kazoo drop-in's) in a thread"
        f" (in-process, default) or as child processes (process); sets {MODE_ENV}",
    )
    group.addoption(
        "--trizk-kazoo",
        action="store_true",
        default=False,
        help="make kazoo.testing trizk's kazoo harness (trizk.kazoo_harness), so suites"
        f" written for kazoo's test harness run unchanged on trizk (or {KAZOO_ENV}=1)",
    )


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def install_kazoo_harness() -> None:
    """Make ``kazoo.testing`` and ``kazoo.testing.harness`` resolve to trizk's kazoo harness
    (also when kazoo's were imported already): what ``--trizk-kazoo`` does."""
    import kazoo

    from trizk import kazoo_harness

    package = types.ModuleType(
        "kazoo.testing", "kazoo.testing on trizk (trizk.kazoo_harness, --trizk-kazoo)"
    )
    package.KazooTestCase = kazoo_harness.KazooTestCase  # type: ignore[attr-defined]
    package.KazooTestHarness = kazoo_harness.KazooTestHarness  # type: ignore[attr-defined]
    package.harness = kazoo_harness  # type: ignore[attr-defined]
    package.__all__ = ["KazooTestHarness", "KazooTestCase"]  # type: ignore[attr-defined]
    package.__path__ = []  # a package: ``import kazoo.testing.harness`` finds it below
    sys.modules["kazoo.testing"] = package
    sys.modules["kazoo.testing.harness"] = kazoo_harness
    kazoo.testing = package


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if _wants_kazoo(config.getoption("--trizk-kazoo", default=False)) and _runs_tests_here(config):
        from trizk import kazoo_harness

        kazoo_harness.freeze_imports()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # before the terminal summary (hypothesis's plugin imports hypothesis there, whose
    # register_random looks for referrers, which it would not find among frozen objects)
    from trizk import kazoo_harness

    kazoo_harness.thaw_imports()


def _runs_tests_here(config: pytest.Config) -> bool:
    """Whether this process runs tests: not ``--collect-only``, not xdist's controller."""
    if config.getoption("collectonly", default=False):
        return False
    is_worker = hasattr(config, "workerinput")
    return is_worker or not config.getoption("numprocesses", default=None)


def _wants_kazoo(option: object) -> bool:
    return bool(option) or _truthy(os.environ.get(KAZOO_ENV))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # before any conftest is imported: a conftest's own ``from kazoo.testing import ...``
    # gets the drop-in too
    if _wants_kazoo(getattr(early_config.known_args_namespace, "trizk_kazoo", False)):
        install_kazoo_harness()


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("--trizk-mode", default=None)
    if mode is not None:
        # the one knob: the drop-in (and any child process) reads the same variable
        os.environ[MODE_ENV] = mode
    if _wants_kazoo(config.getoption("--trizk-kazoo", default=False)):
        install_kazoo_harness()
        if _runs_tests_here(config):
            from trizk import kazoo_harness

            kazoo_harness.start_ahead()  # the first test class's cluster, while pytest collects
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


def _mode(request: pytest.FixtureRequest) -> str:
    """``--trizk-mode``, else ``TRIZK_MODE``, else in-process."""
    return request.config.getoption("--trizk-mode", default=None) or mode_from_env()


def _server(request: pytest.FixtureRequest, factory: pytest.TempPathFactory) -> Server:
    return Server(mode=_mode(request), base_dir=factory.getbasetemp())


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
    kwargs.setdefault("mode", _mode(request))
    kwargs.setdefault("base_dir", tmp_path_factory.getbasetemp())
    with Ensemble(*(marker.args if marker is not None else ()), **kwargs) as ens:
        yield ens
