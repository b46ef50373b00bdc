"""Shared fixtures: a trizk server on a free loopback port, run in its own thread with its own
Trio loop (trizk.testing.loop.LoopThread), so blocking clients (kazoo, the raw client) can talk
to it from the test thread."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trizk.server.config.zoocfg import ServerConfig
from trizk.server.shell.app import TrizkServer
from trizk.server.shell.ensemble import EnsembleSpec
from trizk.testing.loop import LoopThread
from trizk.testing.ports import free_port

__all__ = ["ThreadedServer", "free_port", "make_config"]


class ThreadedServer:
    """A TrizkServer running in a background thread; ``stop()`` cancels it and joins."""

    def __init__(self, config: ServerConfig, ensemble: EnsembleSpec | None = None) -> None:
        self.config = config
        self.ensemble = ensemble
        self.port = 0
        self.server: TrizkServer | None = None
        self._loop = LoopThread("trizk-test-server")

    async def _serve(self, *, task_status: Any) -> None:
        self.server = TrizkServer(self.config, self.ensemble)
        await self.server.run(task_status=task_status)

    def start(self) -> ThreadedServer:
        try:
            self._loop.start(10)
            self.port = self._loop.start_task(self._serve, timeout=10)
        except BaseException as e:
            if self._loop.alive:
                self._loop.stop(10)
            raise RuntimeError(f"trizk did not start: {e!r}") from e
        return self

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` inside the server's Trio thread (to inspect its state safely)."""
        return self._loop.run_sync(fn, *args)

    def call_async(self, fn: Any, *args: Any) -> Any:
        """``await fn(*args)`` inside the server's Trio thread; its result here."""
        return self._loop.run(fn, *args)

    def stop(self) -> None:
        self._loop.stop(10)
        if self._loop.error is not None:
            raise self._loop.error

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"


def make_config(tmp_path: Path, **keys: Any) -> ServerConfig:
    base: dict[str, Any] = {
        "clientPort": free_port(),
        "clientPortAddress": "127.0.0.1",
        "tickTime": 2000,
        "4lw.commands.whitelist": "*",
        # The product default is ZooKeeper's (AdminServer on 0.0.0.0:8080); test servers run
        # by the dozen, so they keep it off unless a test asks (admin.serverPort=free_port()).
        "admin.enableServer": "false",
    }
    base.update(keys)
    return ServerConfig.create(tmp_path / "data", **base)


@pytest.fixture
def trizk_server(tmp_path: Path) -> Iterator[ThreadedServer]:
    srv = ThreadedServer(make_config(tmp_path)).start()
    yield srv
    srv.stop()


@pytest.fixture
def fast_trizk_server(tmp_path: Path) -> Iterator[ThreadedServer]:
    """tickTime 100 ms: sessions may time out after 200 ms (min timeout 2 * tickTime)."""
    srv = ThreadedServer(make_config(tmp_path, tickTime=100)).start()
    yield srv
    srv.stop()


# ---------------------------------------------------------------------------- markers by layer
#
# ``pytest -m "not slow and not oracle"`` is the fast layer (pure cores and in-process servers);
# the markers are registered in pyproject.toml. Whole folders are marked here, single tests where
# they are written (``@pytest.mark.slow``, ``@pytest.mark.oracle``).

#: folder under tests/ -> the marker every test in it (and below it) carries
LAYER_MARKS: dict[str, str] = {
    # real Apache ZooKeeper (java, zkCli, cli_mt) run side by side with trizk
    "compat": "oracle",
    # the SIGKILL crash loop: server processes killed and restarted for tens of seconds
    "crash": "slow",
    # seeded whole-ensemble simulations: thousands of runs (seed counts: tests/seeds.py)
    "quorum/sim": "slow",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        try:
            folder = item.path.parent.relative_to(root).as_posix()
        except ValueError:  # a test file outside tests/ (pytester's, a path given by hand)
            continue
        for layer, mark in LAYER_MARKS.items():
            if folder == layer or folder.startswith(layer + "/"):
                item.add_marker(mark)


def pytest_configure(config: pytest.Config) -> None:
    # TRIZK_HYPOTHESIS_SCALE (tests/seeds.py) also scales the tests on Hypothesis' own default
    # of 100 examples; the counts written in the tests are scaled where they are written
    from hypothesis import settings

    from tests import seeds

    if seeds.scale() != 1.0:
        settings.register_profile(
            "trizk-scaled", parent=settings.default, max_examples=seeds.examples(100)
        )
        settings.load_profile("trizk-scaled")
