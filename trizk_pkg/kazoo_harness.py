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

* ``expire_session`` tells the client its session expired, as kazoo's does (the client sees
  LOST, then CONNECTED with a new session), and then has the *server* expire that session at
  once (under kazoo's harness it lingers until its timeout); ``lose_connection`` has the server
  close the client's connection (SUSPENDED, then CONNECTED to the same session). Both wait, as
  kazoo's do, for the client to be CONNECTED again. With
  ``TRIZK_TEST_MODE=process`` (a ``trizk-server`` child per cluster) the child does them,
  asked through its test controls (``trizk-server --testing``).
* The cluster is one standalone trizk server (trizk.testing.Server): the ``ZOOKEEPER_*``
  variables kazoo's harness reads (ZOOKEEPER_PATH, ZOOKEEPER_CLUSTER_SIZE, ...) are not needed
  and are ignored, except ``ZOOKEEPER_JAAS_AUTH=digest`` (kazoo's SASL tests set it: the
  server gets kazoo's JAAS users); ``TRIZK_TEST_MODE`` (``in-process``, the default, or
  ``process``) is read instead. Like kazoo's, the cluster is made on first use, shared by
  every test, stopped by ``KazooTestCase.tearDownClass`` and at exit; the super digest is
  kazoo's (``super:test``), and so is the SASL provider (``authProvider.1``).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import unittest
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.connection import _SESSION_EXPIRED
from kazoo.protocol.states import KazooState

from trizk.testing import IN_PROCESS, Server

__all__ = ["KazooTestCase", "KazooTestHarness", "TrizkCluster", "get_global_cluster"]

log = logging.getLogger(__name__)

#: the super digest kazoo's harness gives ZooKeeper (user "super", password "test")
SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
#: kazoo's harness always registers the SASL provider (its zoo.cfg ``authProvider.1``)
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
#: the JAAS section kazoo's harness writes for ``ZOOKEEPER_JAAS_AUTH=digest``
DIGEST_JAAS = """
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="super_secret"
    user_jaasuser="jaas_password";
};"""


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
    """kazoo's ``ZookeeperCluster`` shape around one trizk server. ``jaas_auth`` is kazoo's
    ``ZOOKEEPER_JAAS_AUTH``: ``"digest"`` gives the server kazoo's JAAS users (``super``,
    ``jaasuser``) for SASL DIGEST-MD5; Kerberos (``"gssapi"``) is refused, trizk has none."""

    def __init__(self, mode: str = IN_PROCESS, jaas_auth: str | None = None) -> None:
        system_properties: dict[str, str] = {}
        self._jaas_dir: str | None = None
        if jaas_auth == "digest":
            self._jaas_dir = tempfile.mkdtemp(prefix="trizk-kazoo-jaas-")
            path = os.path.join(self._jaas_dir, "jaas.conf")
            with open(path, "w", encoding="utf-8") as f:
                f.write(DIGEST_JAAS)
            system_properties["java.security.auth.login.config"] = path
        elif jaas_auth:
            raise ValueError(
                f"ZOOKEEPER_JAAS_AUTH={jaas_auth!r}: the trizk harness serves SASL DIGEST-MD5"
                " ('digest') only; trizk has no Kerberos (GSSAPI)"
            )
        self._servers = [
            ManagedServer(
                mode=mode,
                properties={
                    "DigestAuthenticationProvider.superDigest": SUPER_DIGEST,
                    "authProvider.1": SASL_PROVIDER,
                },
                system_properties=system_properties,
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
        if self._jaas_dir is not None:
            shutil.rmtree(self._jaas_dir, ignore_errors=True)
            self._jaas_dir = None

    def reset(self) -> None:
        for s in self._servers:
            s.reset()

    def get_logs(self) -> list[str]:
        return []


_CLUSTER: TrizkCluster | None = None
_CLUSTER_CONF: tuple[str, str | None] | None = None


def get_global_cluster() -> TrizkCluster:
    """The process-wide cluster (made on first use; stopped at exit). As kazoo's, it is made
    again when its settings change (a test class setting ``ZOOKEEPER_JAAS_AUTH``)."""
    global _CLUSTER, _CLUSTER_CONF
    conf = (os.environ.get("TRIZK_TEST_MODE", IN_PROCESS), os.environ.get("ZOOKEEPER_JAAS_AUTH"))
    if _CLUSTER is not None and _CLUSTER_CONF == conf:
        return _CLUSTER
    if _CLUSTER is not None:
        log.info("Config change detected. Reconfiguring cluster...")
        _CLUSTER.terminate()
    _CLUSTER, _CLUSTER_CONF = TrizkCluster(*conf), conf
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
        """The client's session expires; returns once the client has a new one.

        As kazoo's harness, the client is told first (it sees LOST, not SUSPENDED: kazoo's own
        tests expect exactly LOST then CONNECTED); then the server expires that session at once
        -- its ephemerals go and its watchers hear of it now, where ZooKeeper under kazoo's
        harness keeps the old session until its timeout."""
        client = self.client
        assert client is not None, "setup_zookeeper() first"
        old = client.client_id[0]

        def tell_client(session_id: int) -> None:
            client._call(_SESSION_EXPIRED, None)

        def expire_on_server() -> None:
            self.cluster[0].expire_session(old)

        self._break(tell_client, KazooState.LOST, event_factory, after_loss=expire_on_server)

    def _break(
        self,
        breaker: Callable[[int], None],
        expected: KazooState,
        event_factory: Callable[[], Any],
        after_loss: Callable[[], None] | None = None,
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
        breaker(client.client_id[0])
        lost.wait(5)
        if not lost.is_set():
            raise Exception("Failed to get notified of broken connection.")
        if after_loss is not None:
            after_loss()
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
