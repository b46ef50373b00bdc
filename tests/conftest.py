"""Shared fixtures: a trizk server on a free loopback port, run in its own thread with its own
Trio loop, so blocking clients (kazoo, the raw client) can talk to it from the test thread."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trizk.server.config.zoocfg import ServerConfig
from trizk.server.shell.app import TrizkServer
from trizk.server.shell.ensemble import EnsembleSpec


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ThreadedServer:
    """A TrizkServer running in a background thread; ``stop()`` cancels it and joins."""

    def __init__(self, config: ServerConfig, ensemble: EnsembleSpec | None = None) -> None:
        self.config = config
        self.ensemble = ensemble
        self.port = 0
        self.server: TrizkServer | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._scope: trio.CancelScope | None = None
        self._token: Any = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            with trio.CancelScope() as scope:
                self._scope = scope
                self._token = trio.lowlevel.current_trio_token()
                self.server = TrizkServer(self.config, self.ensemble)
                async with trio.open_nursery() as nursery:
                    self.port = await nursery.start(self.server.run)
                    self._ready.set()

        try:
            trio.run(main)
        except BaseException as e:  # surfaced by start()/stop()
            self._error = e
            self._ready.set()

    def start(self) -> ThreadedServer:
        self._thread.start()
        if not self._ready.wait(10) or self._error is not None:
            raise RuntimeError(f"trizk did not start: {self._error!r}")
        return self

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` inside the server's Trio thread (to inspect its state safely)."""
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def stop(self) -> None:
        if self._scope is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
        self._thread.join(10)
        assert not self._thread.is_alive(), "trizk server thread did not stop"
        if self._error is not None:
            raise self._error

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
