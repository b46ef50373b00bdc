"""A drop-in for ``kazoo.testing``'s harness that starts trizk instead of Java.

Change one import::

    from kazoo.testing import KazooTestCase        # before: three JVMs
    from trizk.kazoo_harness import KazooTestCase  # after: one trizk server, in-process

and the test classes keep working: the same attributes and helpers as
``kazoo.testing.harness`` -- ``self.client`` (a started client chrooted to a fresh
``/kazootests<uuid>`` per test), ``self.hosts`` (that chroot's connect string),
``self.servers``, ``self.cluster`` (iterable of servers with ``address``, ``running``,
``client_port``, ``start()``/``stop()``/``reset()``/``destroy()``, and the cluster's
``start()``/``stop()``/``terminate()``/``reset()``), ``_get_client(**options)``,
``_get_nonchroot_client()``, ``setup_zookeeper(**client_options)``/``teardown_zookeeper()``,
``lose_connection(event_factory)`` and ``expire_session(event_factory)``.

Differences, on purpose:

* ``expire_session`` has the *server* expire the client's session (kazoo fakes it inside the
  client), and ``lose_connection`` has the server close the client's connection; both then wait,
  as kazoo's do, for the client to see LOST/SUSPENDED and to be CONNECTED again. With
  ``TRIZK_TEST_MODE=process`` (a ``trizk-server`` child per cluster) the child does them,
  asked through its test controls (``trizk-server --testing``).
* The cluster is one standalone trizk server (trizk.testing.Server): the ``ZOOKEEPER_*``
  variables kazoo's harness reads (ZOOKEEPER_PATH, ZOOKEEPER_CLUSTER_SIZE, ...) are not needed
  and are ignored; ``TRIZK_TEST_MODE`` (``in-process``, the default, or ``process``) is read
  instead. Like kazoo's, the cluster is made on first use, shared by every test, stopped by
  ``KazooTestCase.tearDownClass`` and at exit; the super digest is kazoo's (``super:test``).
"""

from __future__ import annotations

import atexit
import logging
import os
import unittest
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState

from .testing import IN_PROCESS, Server

__all__ = ["KazooTestCase", "KazooTestHarness", "TrizkCluster", "get_global_cluster"]

log = logging.getLogger(__name__)

#: the super digest kazoo's harness gives ZooKeeper (user "super", password "test")
SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="


class ManagedServer(Server):
    """A :class:`trizk.testing.Server` with kazoo's ``ManagedZooKeeper`` attributes."""

    @property
    def address(self) -> str:
        return self.connect_string

    @property
    def secure_address(self) -> str:
        raise NotImplementedError("the trizk kazoo harness serves no TLS port")

    @property
    def client_port(self) -> int:
        return self.port

    def run(self) -> None:
        self.start()

    def reset(self) -> None:
        """Stop, forget the data, start afresh (on the same port)."""
        self.close()
        self.start()

    def destroy(self) -> None:
        self.close()

    def get_logs(self, num_lines: int = 100) -> list[str]:
        return []


class TrizkCluster:
    """kazoo's ``ZookeeperCluster`` shape around one trizk server."""

    def __init__(self, mode: str = IN_PROCESS) -> None:
        self._servers = [
            ManagedServer(
                mode=mode,
                properties={"DigestAuthenticationProvider.superDigest": SUPER_DIGEST},
            )
        ]

    def __getitem__(self, k: int) -> ManagedServer:
        return self._servers[k]

    def __iter__(self) -> Iterator[ManagedServer]:
        return iter(self._servers)

    def __len__(self) -> int:
        return len(self._servers)

    def start(self) -> None:
        for s in self._servers:
            if not s.running:
                s.start()

    def stop(self) -> None:
        for s in self._servers:
            s.stop()

    def terminate(self) -> None:
        for s in self._servers:
            s.close()

    def reset(self) -> None:
        for s in self._servers:
            s.reset()

    def get_logs(self) -> list[str]:
        return []


_CLUSTER: TrizkCluster | None = None
_CLUSTER_MODE: str | None = None


def get_global_cluster() -> TrizkCluster:
    """The process-wide cluster (made on first use; stopped at exit)."""
    global _CLUSTER, _CLUSTER_MODE
    mode = os.environ.get("TRIZK_TEST_MODE", IN_PROCESS)
    if _CLUSTER is not None and _CLUSTER_MODE == mode:
        return _CLUSTER
    if _CLUSTER is not None:
        _CLUSTER.terminate()
    _CLUSTER, _CLUSTER_MODE = TrizkCluster(mode), mode
    atexit.register(_CLUSTER.terminate)
    return _CLUSTER


class KazooTestHarness(unittest.TestCase):
    """``kazoo.testing.KazooTestHarness`` on trizk: call :meth:`setup_zookeeper` in ``setUp``
    and :meth:`teardown_zookeeper` in ``tearDown`` (or use :class:`KazooTestCase`)."""

    DEFAULT_CLIENT_TIMEOUT = 15

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.client: KazooClient | None = None
        self._clients: list[KazooClient] = []
        self.hosts = ""

    @property
    def cluster(self) -> TrizkCluster:
        return get_global_cluster()

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        log.log(level, msg, *args, **kwargs)

    @property
    def servers(self) -> str:
        return ",".join(s.address for s in self.cluster)

    @property
    def secure_servers(self) -> str:
        return ",".join(s.secure_address for s in self.cluster)

    def _get_nonchroot_client(self) -> KazooClient:
        c = KazooClient(self.servers)
        self._clients.append(c)
        return c

    def _get_client(self, **client_options: Any) -> KazooClient:
        client_options.setdefault("timeout", self.DEFAULT_CLIENT_TIMEOUT)
        c = KazooClient(self.hosts, **client_options)
        self._clients.append(c)
        return c

    def setup_zookeeper(self, **client_options: Any) -> None:
        """Start the cluster if it is not running; a client chrooted to a fresh path."""
        self.cluster.start()
        namespace = "/kazootests" + uuid.uuid4().hex
        self.cluster[0].load({namespace: None})  # the chroot exists before the client starts
        self.hosts = self.servers + namespace
        self.client = self._get_client(**client_options)
        self.client.start()
        self.client.ensure_path("/")

    def teardown_zookeeper(self) -> None:
        """Stop and close every client the harness made (the cluster keeps running)."""
        while self._clients:
            c = self._clients.pop()
            try:
                c.stop()
            except KazooException:
                log.exception("Failed stopping client %s", c)
            finally:
                c.close()
        self.client = None

    def lose_connection(self, event_factory: Callable[[], Any]) -> None:
        """The server closes the client's connection; returns once the client reconnected."""

        def drop(session_id: int) -> None:
            self.cluster[0].drop_connections(session_id)

        self._break(drop, KazooState.SUSPENDED, event_factory)

    def expire_session(self, event_factory: Callable[[], Any]) -> None:
        """The server expires the client's session; returns once the client has a new one."""

        def expire(session_id: int) -> None:
            self.cluster[0].expire_session(session_id)

        self._break(expire, KazooState.LOST, event_factory)

    def _break(
        self,
        server_side: Callable[[int], None],
        expected: KazooState,
        event_factory: Callable[[], Any],
    ) -> None:
        client = self.client
        assert client is not None, "setup_zookeeper() first"
        lost, safe = event_factory(), event_factory()

        def watch_loss(state: KazooState) -> bool | None:
            if state == expected:
                lost.set()
            elif lost.is_set() and state == KazooState.CONNECTED:
                safe.set()
                return True  # remove the listener
            return None

        client.add_listener(watch_loss)
        server_side(client.client_id[0])
        lost.wait(5)
        if not lost.is_set():
            raise Exception("Failed to get notified of broken connection.")
        safe.wait(15)
        if not safe.is_set():
            raise Exception("Failed to see client reconnect.")
        client.retry(client.get_async, "/")


class KazooTestCase(KazooTestHarness):
    """``kazoo.testing.KazooTestCase`` on trizk: a chrooted ``self.client`` per test."""

    def setUp(self) -> None:
        self.setup_zookeeper()

    def tearDown(self) -> None:
        self.teardown_zookeeper()

    @classmethod
    def tearDownClass(cls) -> None:
        get_global_cluster().terminate()
