"""kazoo's test harness (``kazoo.testing``, kazoo 2.11) on trizk instead of Java ZooKeeper.

Two ways in, one harness:

* change one import (``from trizk.kazoo_harness import KazooTestCase``), or
* change nothing: ``pytest --trizk-kazoo`` (or ``TRIZK_KAZOO=1``) makes ``kazoo.testing`` and
  ``kazoo.testing.harness`` this module (:mod:`trizk.pytest_plugin`), so
  ``pytest --trizk-kazoo --pyargs kazoo.tests`` runs kazoo's own suite unchanged.

What it is, attribute for attribute as ``kazoo.testing.harness``: ``KazooTestHarness`` (call
``setup_zookeeper(**client_options)`` in ``setUp``, ``teardown_zookeeper()`` in ``tearDown``)
and ``KazooTestCase``; ``self.client`` (started, chrooted to a fresh ``/kazootests<uuid>`` per
test), ``self.hosts`` (that chroot's connect string), ``self.servers`` and
``self.secure_servers``, ``self.cluster``, ``_get_client(**options)``,
``_get_nonchroot_client()``, ``lose_connection(event_factory)``,
``expire_session(event_factory)``, ``get_global_cluster()``. The cluster is kazoo's
``ZookeeperCluster`` shape: indexable and iterable members with ``address``,
``secure_address``, ``client_port``, ``secure_client_port``, ``running``, ``run()``,
``stop()``, ``reset()``, ``destroy()``, ``get_logs()``; the cluster's ``start()``, ``stop()``,
``terminate()``, ``reset()``, ``get_logs()`` and ``get_ssl_client_configuration()``.

The ``ZOOKEEPER_*`` variables kazoo's harness reads, as they apply to trizk:

* ``ZOOKEEPER_CLUSTER_SIZE`` (default 3, as kazoo's) and ``ZOOKEEPER_OBSERVER_START_ID``
  (members from that id on are observers): more than one member is a
  :class:`trizk.testing.Ensemble`, one a standalone :class:`trizk.testing.Server` -- what
  ZooKeeper is with those settings. ``ZOOKEEPER_CLUSTER_SIZE=1`` is the fastest for suites
  that never stop a member.
* ``ZOOKEEPER_JAAS_AUTH=digest``: the servers get kazoo's JAAS users (``super``,
  ``jaasuser``) for SASL DIGEST-MD5. ``gssapi`` (Kerberos): trizk has none; such tests are
  skipped with that reason.
* Read-only mode is on, as kazoo's harness starts every server with
  ``-Dreadonlymode.enabled=true``: a member cut off from its quorum serves read-only clients.
  ``ZOOKEEPER_LOCAL_SESSION_RO`` (default ``false``) is written as ``localSessionsEnabled``
  and ``localSessionsUpgradingEnabled``, as kazoo's harness does (its read-only test sets it
  to ``true``, so that a read-only member can create sessions); a change of it makes the
  cluster again.
* ``ZOOKEEPER_PATH``, ``ZOOKEEPER_CLASSPATH``, ``ZOOKEEPER_VERSION`` name a Java install: not
  needed, ignored. ``ZOOKEEPER_PORT_OFFSET``: ignored, every port is a free one.
* ``TRIZK_MODE`` (``in-process``, the default, or ``process``: ``trizk-server`` children, the
  controls through their ``--testing`` endpoints) is trizk's own; pytest's ``--trizk-mode``
  sets it.

As kazoo's, every server has a TLS port (``secure_address``; the CA, server and client
certificates are made once per process, as kazoo's are, with EC keys (:class:`TLSMaterial`),
and ``cluster.get_ssl_client_configuration()`` gives the client's PEMs), the super digest
``super:test`` and the SASL provider; the cluster is made on first use, shared, stopped by
``KazooTestCase.tearDownClass`` and at exit, and made again when its settings change (the
cluster of the old settings is kept, terminated, with the clusters it started ahead, for when
they come back: :func:`get_global_cluster`).

Differences, on purpose:

* ``expire_session`` tells the client its session expired, as kazoo's does (LOST, then
  CONNECTED with a new session), and then the *servers* expire that session at once (under
  kazoo's harness it lingers until its timeout); ``lose_connection`` has the server close the
  client's connection (SUSPENDED, then CONNECTED to the same session). Both return, as kazoo's,
  once the client is CONNECTED again.
* Speed: every test class still gets a fresh cluster, but it was started ahead, while the
  previous classes ran (:class:`TrizkCluster`), and a terminated one is closed in the
  background; the first one starts while pytest collects (:func:`start_ahead`); a test's
  chroot is made through one session the cluster keeps rather than a session per test
  (kazoo's health check), a new one after a member's stop; txn logs are preallocated by 1 MiB
  (:data:`PREALLOC_KIB`), not ZooKeeper's 64 MiB, which a restarting member reads whole; and
  under ``--trizk-kazoo`` the objects alive once the tests are collected are frozen out of
  the collector's reach while they run (:func:`freeze_imports`).
* An ensemble's members reach each other directly, not through the link proxies of
  :class:`trizk.testing.Ensemble` (``links=False``): kazoo's tests never partition, and every
  server has ``reconfigEnabled=true`` as under kazoo's harness, so a reconfig hands every
  member the leader's server lines (kazoo's ``TestReconfig``).
* What trizk cannot do yet is a skip with the reason, never an error (Kerberos).
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import shutil
import tempfile
import threading
import unittest
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    SessionExpiredError,
)
from kazoo.protocol.connection import _SESSION_EXPIRED
from kazoo.protocol.states import KazooState

from trizk.testing import IN_PROCESS, Server, mode_from_env
from trizk.testing.ports import free_ports

__all__ = [
    "KazooTestCase",
    "KazooTestHarness",
    "TrizkCluster",
    "freeze_imports",
    "get_global_cluster",
    "start_ahead",
    "thaw_imports",
]

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
#: kazoo's harness defaults (``CLUSTER_DEFAULTS``) for the settings trizk honours
DEFAULT_CLUSTER_SIZE = 3
DEFAULT_OBSERVER_START_ID = -1
#: the timing kazoo's harness gives a cluster's zoo.cfg
KAZOO_TICK_TIME = 2000
KAZOO_INIT_LIMIT = 4
KAZOO_SYNC_LIMIT = 2
#: how many times a cluster is made before its start failure is the test's (kazoo's: 5)
START_TRIES = 2
#: bound of the wait for a spare cluster's start, or for a terminated one's close (s); the
#: ensemble bounds its own start by its start_timeout (30 s)
SPARE_TIMEOUT = 60.0
#: how many clusters are started ahead: two, as test classes of one or two tests are common
#: (kazoo's test_client.py) and end before one spare is up; their starts mostly wait
#: (elections, fsyncs), so two overlap well
SPARES = 2

#: the servers' preAllocSize (KiB): ZooKeeper's 65536 is read back whole on every restart
PREALLOC_KIB = 1024
#: kazoo's harness starts every server with -Dreadonlymode.enabled=true
READ_ONLY_MODE = {"readonlymode.enabled": "true"}
GSSAPI_REASON = "trizk has no Kerberos (ZOOKEEPER_JAAS_AUTH=gssapi); it serves SASL DIGEST-MD5"


# ------------------------------------------------------------------ TLS material
@dataclass(frozen=True)
class TLSMaterial:
    """kazoo's harness's certificates (``perform_ssl_certs_generation``): a CA
    (``ca.kazoo.org``), a server certificate (``localhost``) and a client certificate
    (``client``) it signed, each valid for a day; as PEM files in ``directory`` (the server's
    key store holds its key and certificate, its trust store the CA). Their keys are EC P-256
    where kazoo's are RSA 2048: no kazoo test looks at the key type, and every member of
    every cluster loads its key store when it starts -- an RSA key's load (its consistency
    check) took a tenth of a second of the GIL per member on a busy machine."""

    directory: Path
    ca_cert: bytes
    client_cert: bytes
    client_key: bytes

    @property
    def key_store(self) -> Path:
        return self.directory / "server.pem"

    @property
    def trust_store(self) -> Path:
        return self.directory / "ca.pem"

    def server_keys(self, secure_port: int) -> dict[str, str]:
        """zoo.cfg keys of a server with a TLS port (kazoo's, with PEM stores for JKS ones)."""
        return {
            "secureClientPort": str(secure_port),
            "ssl.keyStore.location": str(self.key_store),
            "ssl.trustStore.location": str(self.trust_store),
        }


_TLS: TLSMaterial | None = None
_TLS_LOCK = threading.Lock()


def tls_material() -> TLSMaterial:
    """The process's TLS material, made on first use (as kazoo's, once per cluster settings;
    here once per process) and removed at exit."""
    global _TLS
    with _TLS_LOCK:
        if _TLS is None:
            _TLS = _make_tls()
            atexit.register(shutil.rmtree, _TLS.directory, True)
        return _TLS


def _make_tls() -> TLSMaterial:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def cert(
        subject: str,
        serial: int,
        key: ec.EllipticCurvePrivateKey,
        ca_key: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        b = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name("ca.kazoo.org"))
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        if ca:
            b = (
                b.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(
                    x509.KeyUsage(
                        digital_signature=False,
                        content_commitment=False,
                        key_encipherment=False,
                        data_encipherment=False,
                        key_agreement=False,
                        key_cert_sign=True,
                        crl_sign=True,
                        encipher_only=False,
                        decipher_only=False,
                    ),
                    critical=True,
                )
                .add_extension(
                    x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
                )
            )
        return b.sign(ca_key, hashes.SHA256())

    def new_key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    ca_key, server_key, client_key = new_key(), new_key(), new_key()
    ca = cert("ca.kazoo.org", 1, ca_key, ca_key, ca=True)
    server = cert("localhost", 2, server_key, ca_key, ca=False)
    client = cert("client", 3, client_key, ca_key, ca=False)
    pem = serialization.Encoding.PEM
    directory = Path(tempfile.mkdtemp(prefix="trizk-kazoo-tls-"))
    material = TLSMaterial(
        directory, ca.public_bytes(pem), client.public_bytes(pem), key_pem(client_key)
    )
    fd = os.open(material.key_store, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_pem(server_key) + server.public_bytes(pem))
    material.trust_store.write_bytes(material.ca_cert)
    return material


# ------------------------------------------------------------------ the members
class ManagedServer(Server):
    """A standalone :class:`trizk.testing.Server` with kazoo's ``ManagedZooKeeper``
    attributes (a cluster of one)."""

    def __init__(self, secure_port: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.secure_client_port = secure_port

    @property
    def address(self) -> str:
        return self.connect_string

    @property
    def secure_address(self) -> str:
        return f"127.0.0.1:{self.secure_client_port}"

    @property
    def client_port(self) -> int:
        return self.port

    def run(self) -> None:
        if not self.running:
            self.start()

    def reset(self) -> None:
        """Stop and forget the data (the next run starts empty, on the same ports)."""
        self.close()

    def destroy(self) -> None:
        self.close()

    def get_logs(self, num_lines: int = 100) -> list[str]:
        return _log_lines(self._root / "server.log" if self._root else None, num_lines)


def _log_lines(path: Path | None, num_lines: int) -> list[str]:
    if path is None or not path.exists():
        return []  # in-process servers log through the logging module (pytest shows it)
    return path.read_text(errors="replace").splitlines(keepends=True)[-num_lines:]


class ManagedMember:
    """Member ``sid`` of the cluster's :class:`trizk.testing.Ensemble`, with kazoo's
    ``ManagedZooKeeper`` attributes. ``stop()`` stops that member only (the others keep
    serving, as a quorum allows); ``run()`` starts it again on the same ports and data."""

    def __init__(self, cluster: TrizkCluster, sid: int) -> None:
        self._cluster = cluster
        self.sid = sid
        self.host = "127.0.0.1"
        #: a start under way (:meth:`run`): the ensemble and the thread starting the member
        self._starting: tuple[Any, threading.Thread] | None = None

    def starting_in(self, ens: Any) -> threading.Thread | None:
        """The thread starting this member in ``ens``, while it runs."""
        s = self._starting
        return s[1] if s is not None and s[0] is ens and s[1].is_alive() else None

    def settle(self) -> None:
        """Wait (bounded) until a start under way has finished."""
        s, self._starting = self._starting, None
        if s is not None:
            s[1].join(SPARE_TIMEOUT)

    @property
    def _ensemble(self) -> Any:
        return self._cluster.ensemble()

    @property
    def client_port(self) -> int:
        return int(self._ensemble.port(self.sid))

    @property
    def secure_client_port(self) -> int:
        return int(self._ensemble.member_cfg[self.sid]["secureClientPort"])

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def secure_address(self) -> str:
        return f"{self.host}:{self.secure_client_port}"

    @property
    def running(self) -> bool:
        """As kazoo's: True from :meth:`run` on (its process was spawned), serving or not."""
        ens = self._cluster.started_ensemble()
        if ens is None:
            return False
        return self.starting_in(ens) is not None or bool(ens.running(self.sid))

    def run(self) -> None:
        """Start the member and return at once, as kazoo's (which spawns the JVM): the member
        loads its data and rejoins the quorum in a thread of its own; clients find it once it
        serves. (A member's restart took 1-3 s on a busy machine, kazoo's tests wait for
        clients, not for ``run()``.)"""
        ens = self._cluster.started_ensemble()
        if ens is None:
            self._cluster.start()
        elif not self.running:

            def start() -> None:
                try:
                    ens.start_member(self.sid)
                except Exception:
                    log.exception("member %d did not start", self.sid)

            t = threading.Thread(target=start, name=f"trizk-kazoo-run-{self.sid}", daemon=True)
            t.start()
            self._starting = (ens, t)

    def stop(self) -> None:
        """Stop the member, keeping its data."""
        self.settle()
        ens = self._cluster.started_ensemble()
        if ens is not None and ens.running(self.sid):
            ens.stop(self.sid)
            # the harness's own session may have been on it: rather than find out at the next
            # chroot's create (a ConnectionLoss, then kazoo's reconnection back-off: 0.4-0.7 s
            # after kazoo's test_update_host_list), a new one on the running members then
            self._cluster.drop_admin()

    def reset(self) -> None:
        """Stop the member and delete its data (all but ``myid``)."""
        self.stop()
        ens = self._cluster.started_ensemble()
        if ens is not None:
            data = Path(ens.data_dir(self.sid))
            for p in data.iterdir():
                if p.name != "myid":
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()

    def destroy(self) -> None:
        self.stop()

    def get_logs(self, num_lines: int = 100) -> list[str]:
        ens = self._cluster.started_ensemble()
        if ens is None or ens.root is None:
            return []
        return _log_lines(Path(ens.root) / f"m{self.sid}" / "server.log", num_lines)


# ------------------------------------------------------------------ the cluster
class _Spare:
    """An ensemble made and started in a thread of its own, so that it is serving before a
    test class asks for a fresh cluster."""

    def __init__(self, make: Callable[[], Any], timeout: float) -> None:
        self._timeout = timeout
        self._ensemble: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(make,), name="trizk-kazoo-spare", daemon=True
        )
        self._thread.start()

    def _run(self, make: Callable[[], Any]) -> None:
        try:
            ens = make()
            ens.start()  # bounded by the ensemble's start_timeout; closes itself on failure
            self._ensemble = ens
        except BaseException as e:
            self.error = e

    def take(self) -> Any:
        """The started ensemble (waits for it, bounded), or None if its start failed."""
        self._thread.join(self._timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the spare cluster did not start in {self._timeout} s")
        return self._ensemble


class TrizkCluster:
    """kazoo's ``ZookeeperCluster`` on trizk: ``size`` members (one: a standalone server;
    more: an ensemble whose members from ``observer_start_id`` on are observers), run as
    ``mode`` says, with kazoo's super digest, SASL provider, TLS port, read-only mode,
    ``localSessionsEnabled`` as ``local_sessions`` says and, for ``jaas_auth == "digest"``,
    its JAAS users. Started by :meth:`start` (again after :meth:`terminate`).

    Speed, with kazoo's semantics kept: as under kazoo's harness, every test class gets a
    fresh cluster (``KazooTestCase.tearDownClass`` terminates it), but an ensemble's start
    (three members, an election, a quorum: seconds on a busy machine, where kazoo's harness
    sleeps 2 s after starting its JVMs) is not waited for: once a cluster serves, the next
    ones (:data:`SPARES`) are made and started in threads (*spares*, on ports of their own)
    while the tests run, and :meth:`terminate` hands the old one to a thread that closes it.
    A spare is the cluster :meth:`start` takes next: never used before, as a cluster made
    then. With ``spares_from_first_start=False`` the spares are started from the second start
    on (a cluster of settings a single test class asks for, :func:`get_global_cluster`)."""

    def __init__(
        self,
        mode: str = IN_PROCESS,
        jaas_auth: str | None = None,
        size: int = DEFAULT_CLUSTER_SIZE,
        observer_start_id: int = DEFAULT_OBSERVER_START_ID,
        local_sessions: bool = False,
        spares_from_first_start: bool = True,
    ) -> None:
        if size < 1:
            raise ValueError(f"ZOOKEEPER_CLUSTER_SIZE={size}: a cluster has at least one member")
        self.mode = mode
        self.size = size
        self.jaas_auth = jaas_auth
        self.observers = 0
        if size > 1 and observer_start_id != -1:
            self.observers = max(0, size - max(1, observer_start_id) + 1)
            if self.observers >= size:
                raise ValueError(
                    f"ZOOKEEPER_OBSERVER_START_ID={observer_start_id}: no voting member left"
                )
        #: start clusters ahead after the first start, or only from the second on
        self._spares_from_first_start = spares_from_first_start
        #: how many times the cluster was made (started with no ensemble)
        self._starts = 0
        self._jaas_dir: str | None = None
        self._jaas_lock = threading.Lock()
        self._ensemble: Any = None
        #: the next ensembles, made and started ahead (see the class docstring)
        self._spares: deque[_Spare] = deque()
        #: threads closing terminated ensembles (joined by :meth:`close`)
        self._closing: list[threading.Thread] = []
        #: the harness's own session on the current ensemble (:meth:`make_path`)
        self._admin: KazooClient | None = None
        self._properties = {
            "DigestAuthenticationProvider.superDigest": SUPER_DIGEST,
            # kazoo's harness (ZooKeeper 3.5 on): TestReconfig adds and removes an observer
            "reconfigEnabled": "true",
            "authProvider.1": SASL_PROVIDER,
            # kazoo's harness: ZOOKEEPER_LOCAL_SESSION_RO, "required to avoid session
            # validation error in read only test"
            "localSessionsEnabled": str(local_sessions).lower(),
            "localSessionsUpgradingEnabled": str(local_sessions).lower(),
            # a restarting member reads its txn log whole, preallocated zeros included:
            # ZooKeeper's 64 MiB took 0.1 s of a member's 0.25 s rejoin (kazoo's tests that
            # stop cluster[0] wait for it); kazoo's tests write kilobytes
            "preAllocSize": str(PREALLOC_KIB),
        }
        self._servers: list[Any]
        if size == 1:
            (secure_port,) = free_ports(1)
            self._servers = [
                ManagedServer(
                    secure_port,
                    mode=mode,
                    properties={
                        **self._properties,
                        **tls_material().server_keys(secure_port),
                    },
                    system_properties=self._system_properties(),
                )
            ]
        else:
            self._servers = [ManagedMember(self, sid) for sid in range(1, size + 1)]

    def _system_properties(self) -> dict[str, str]:
        """Read-only mode and the JAAS file (``ZOOKEEPER_JAAS_AUTH=digest``) as java's ``-D``
        names them."""
        if self.jaas_auth != "digest":
            return dict(READ_ONLY_MODE)
        with self._jaas_lock:  # a spare is made in a thread of its own
            if self._jaas_dir is None:
                self._jaas_dir = tempfile.mkdtemp(prefix="trizk-kazoo-jaas-")
                jaas = os.path.join(self._jaas_dir, "jaas.conf")
                with open(jaas, "w", encoding="utf-8") as f:
                    f.write(DIGEST_JAAS)
            return {
                **READ_ONLY_MODE,
                "java.security.auth.login.config": os.path.join(self._jaas_dir, "jaas.conf"),
            }

    # -- the ensemble behind a cluster of more than one member
    def ensemble(self) -> Any:
        """The cluster's :class:`trizk.testing.Ensemble`: the spare, started, if one was made
        (:meth:`start`), else made (not started) on first use."""
        if self.size == 1:
            raise TypeError("a cluster of one member is a standalone server, not an ensemble")
        if self._ensemble is None:
            self._ensemble = self._take_spare()
        if self._ensemble is None:
            self._ensemble = self._new_ensemble()
        return self._ensemble

    def _new_ensemble(self) -> Any:
        from trizk.testing.ensemble import Ensemble

        tls = tls_material()
        return Ensemble(
            self.size - self.observers,
            self.observers,
            mode=self.mode,
            # kazoo's harness's timing (tickTime 2000, initLimit 4, syncLimit 2): what
            # its tests were written against, and a follower gives up on a leader only
            # after 4 s -- the Ensemble's 1 s is too short for a suite of threads sharing
            # the process (and a busy machine) with an in-process ensemble
            tick_time=KAZOO_TICK_TIME,
            init_limit=KAZOO_INIT_LIMIT,
            sync_limit=KAZOO_SYNC_LIMIT,
            properties=self._properties,
            # every ensemble its own TLS ports: a spare serves beside the current one
            member_properties={
                m.sid: tls.server_keys(port)
                for m, port in zip(self._servers, free_ports(self.size), strict=True)
            },
            system_properties=self._system_properties(),
            # no link proxies: with reconfigEnabled every member may take the leader's
            # server lines, which must name the members themselves (kazoo never partitions)
            links=False,
        )

    def _take_spare(self) -> Any:
        if not self._spares:
            return None
        spare = self._spares.popleft()
        ens = spare.take()
        if ens is None:
            log.warning("the spare cluster did not start; making another one", exc_info=spare.error)
        return ens

    def start_ahead(self) -> None:
        """Start the cluster's first ensemble now, in a thread, for :meth:`start` to take
        (:func:`start_ahead`)."""
        if self.size > 1 and self._ensemble is None and not self._spares:
            # imported here, not in the spare's thread: the server's modules (trio's among
            # them) are then loaded when freeze_imports runs, after the collection
            import trizk.testing.ensemble  # noqa: F401

            self._spares.append(_Spare(self._new_ensemble, SPARE_TIMEOUT))

    def _make_spares(self) -> None:
        while len(self._spares) < SPARES:
            self._spares.append(_Spare(self._new_ensemble, SPARE_TIMEOUT))

    def _close_later(self, ens: Any) -> None:
        admin, self._admin = self._admin, None
        starts = [t for m in self._servers if (t := m.starting_in(ens)) is not None]

        def close() -> None:
            for t in starts:
                t.join(SPARE_TIMEOUT)  # a member's start under way, then its close
            if admin is not None:
                _stop_client(admin)
            ens.close()

        self._in_background(close)

    def _in_background(self, work: Callable[[], None]) -> None:
        """``work`` (a close) in a thread of its own, joined by :meth:`close`."""
        self._closing = [t for t in self._closing if t.is_alive()]
        t = threading.Thread(target=work, name="trizk-kazoo-close", daemon=True)
        t.start()
        self._closing.append(t)

    def started_ensemble(self) -> Any:
        """The ensemble if it was started (and not terminated since), else None."""
        ens = self._ensemble
        return ens if ens is not None and ens.root is not None else None

    # -- kazoo's ZookeeperCluster
    def __getitem__(self, k: int) -> Any:
        return self._servers[k]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._servers)

    def __len__(self) -> int:
        return len(self._servers)

    def start(self) -> None:
        """Start every member that is not running and wait until the cluster serves."""
        if self.size == 1:
            self._servers[0].run()
            return
        ens = self.started_ensemble()
        if ens is None:
            for attempt in range(1, START_TRIES + 1):
                try:
                    ens = self.ensemble()  # the spare (serving) if there is one
                    if ens.root is None:
                        ens.start()  # every member, then wait for a quorum
                    break
                except Exception:
                    # a failed start closed the ensemble; as kazoo's harness ("nuking current
                    # cluster and making another one"), make another one
                    self._ensemble = None
                    if attempt == START_TRIES:
                        raise
                    log.warning("the cluster did not start; making another one", exc_info=True)
            self._starts += 1
            if self._spares_from_first_start or self._starts > 1:
                self._make_spares()  # the next test classes' clusters
            return
        for m in self._servers:
            m.settle()
        for sid in ens.members:
            if not ens.running(sid):
                ens.start_member(sid)
        ens.wait_for_quorum()

    def stop(self) -> None:
        """Stop every member (data kept)."""
        for s in self._servers:
            s.stop()

    def terminate(self) -> None:
        """Stop every member and delete its data (:meth:`start` makes the cluster again)."""
        if self.size == 1:
            self._servers[0].close()
        elif self._ensemble is not None:
            ens, self._ensemble = self._ensemble, None
            self._close_later(ens)  # its ports are its own: the next cluster need not wait

    def close(self) -> None:
        """:meth:`terminate`, close the spare, wait until every ensemble is closed, and
        delete the JAAS file."""
        self.terminate()
        while self._spares:
            if (ens := self._spares.popleft().take()) is not None:
                ens.close()
        for t in self._closing:
            t.join(SPARE_TIMEOUT)
        self._closing = []
        if self._jaas_dir is not None:
            shutil.rmtree(self._jaas_dir, ignore_errors=True)
            self._jaas_dir = None

    def reset(self) -> None:
        for s in self._servers:
            s.reset()

    def get_logs(self) -> list[str]:
        logs: list[str] = []
        for s in self._servers:
            logs += s.get_logs()
        return logs

    def get_ssl_client_configuration(self) -> dict[str, bytes]:
        """The client's PEMs for the TLS port, as kazoo's: ``client_key``, ``client_cert``,
        ``ca_cert``."""
        tls = tls_material()
        return {
            "client_key": tls.client_key,
            "client_cert": tls.client_cert,
            "ca_cert": tls.ca_cert,
        }

    # -- what the harness asks of the servers themselves
    def make_path(self, path: str) -> None:
        """Create the empty node ``path`` (a test's chroot) before the test's client starts.
        On an ensemble, through one session the cluster keeps for this (kazoo's harness opens
        and closes a session per test for it, its health check: a session's open and close
        are two Zab writes, and kazoo starts a connection thread per client); on a
        standalone server, as :meth:`load`."""
        if self.size == 1:
            self._servers[0].load({path: None})
            return
        ens = self.ensemble()
        if self._admin is not None and self._admin.state != KazooState.CONNECTED:
            # its member was stopped: rather than wait out its reconnection back-off, a new one
            self.drop_admin()
        if self._admin is None:
            running = [sid for sid in ens.members if ens.running(sid)]
            admin = KazooClient(hosts=ens.hosts(running), timeout=10)
            admin.start(timeout=ens.start_timeout)
            self._admin = admin
        admin = self._admin
        lost = False

        def create() -> None:
            nonlocal lost
            try:
                admin.create(path, b"", makepath=True)
            except NodeExistsError:
                if not lost:  # else the lost try created it
                    raise
            except (ConnectionLoss, SessionExpiredError):
                lost = True
                raise

        admin.retry(create)

    def drop_admin(self) -> None:
        """Close the harness's own session (:meth:`make_path`) in the background; the next
        chroot is made through a new one."""
        old, self._admin = self._admin, None
        if old is not None:
            self._in_background(lambda: _stop_client(old))

    def load(self, tree: dict[str, Any]) -> None:
        if self.size == 1:
            self._servers[0].load(tree)
        else:
            self.ensemble().load(tree)

    def drop_connections(self, session_id: int) -> int:
        if self.size == 1:
            return int(self._servers[0].drop_connections(session_id))
        return int(self.ensemble().drop_connections(session_id))

    def expire_session(self, session_id: int) -> bool:
        if self.size == 1:
            return bool(self._servers[0].expire_session(session_id))
        return bool(self.ensemble().expire_session(session_id))


#: every cluster of this process, by its settings (:func:`get_global_cluster`)
_CLUSTERS: dict[tuple[Any, ...], TrizkCluster] = {}
#: the cluster of the settings last asked for
_CLUSTER: TrizkCluster | None = None
#: whether freeze_imports froze the heap (and thaw_imports has not thawed it)
_FROZEN = False


def _cluster_conf() -> tuple[str, str | None, int, int, bool]:
    env = os.environ
    return (
        mode_from_env(),
        env.get("ZOOKEEPER_JAAS_AUTH") or None,
        int(env.get("ZOOKEEPER_CLUSTER_SIZE") or DEFAULT_CLUSTER_SIZE),
        int(env.get("ZOOKEEPER_OBSERVER_START_ID") or DEFAULT_OBSERVER_START_ID),
        # kazoo's harness writes the variable's text into zoo.cfg (parseBoolean: true or not)
        env.get("ZOOKEEPER_LOCAL_SESSION_RO", "false").lower() == "true",
    )


def _cluster_of(conf: tuple[str, str | None, int, int, bool]) -> TrizkCluster:
    cluster = _CLUSTERS.get(conf)
    if cluster is None:
        cluster = TrizkCluster(*conf, spares_from_first_start=not _CLUSTERS)
        _CLUSTERS[conf] = cluster
        atexit.register(cluster.close)
    return cluster


def start_ahead() -> None:
    """Start the cluster of the current settings now, in a thread, so that the first test
    finds it serving: ``pytest --trizk-kazoo`` calls it before it collects the tests (1.8 s
    for kazoo's suite, while an in-process ensemble's start took 0.8-1.1 s)."""
    _cluster_of(_cluster_conf()).start_ahead()


def freeze_imports() -> None:
    """Collect, then move every object the process holds now out of the collector's reach
    (``gc.freeze``): ``pytest --trizk-kazoo`` calls it once the tests are collected, before
    the first one runs. trizk's modules and their dependencies (construct, trio,
    cryptography) triple the objects that a full ``gc.collect`` walks and ``gc.get_objects``
    lists -- 52,000 instead of kazoo's 16,000, 50-100 ms a walk instead of 15 -- and kazoo's
    tree-cache leak checks walk them 30 times a test. What is frozen lives for the whole run
    anyway (modules, classes, functions; the first cluster, started ahead, whose objects then
    stay until exit); the tests' own objects are made later and collected as usual.
    (trizk's servers do the same after loading a big snapshot.) :func:`thaw_imports` puts
    them back once the tests have run (frozen objects are no one's referrers for
    ``gc.get_referrers``)."""
    global _FROZEN
    if not _FROZEN:
        gc.collect()
        gc.freeze()
        _FROZEN = True


def thaw_imports() -> None:
    """Undo :func:`freeze_imports` (``pytest --trizk-kazoo`` calls it when the session ends,
    before its summary)."""
    global _FROZEN
    if _FROZEN:
        gc.unfreeze()
        _FROZEN = False


def get_global_cluster() -> TrizkCluster:
    """The process-wide cluster of the current settings (made on first use; closed at exit).

    As kazoo's, a change of settings (a test class setting ``ZOOKEEPER_JAAS_AUTH`` or
    ``ZOOKEEPER_LOCAL_SESSION_RO`` in its ``setUp`` and popping it in its ``tearDown``)
    terminates the cluster of the old settings -- its members and data are gone -- and gives
    a cluster of the new ones. Unlike kazoo's, the old settings' :class:`TrizkCluster` is
    kept, terminated, with the clusters it started ahead: when the settings come back (the
    next test class), its next :meth:`~TrizkCluster.start` takes one of those, fresh and
    serving, instead of making the cluster again while the test waits. A cluster terminated
    on a change is closed in the background: the change waits for nothing but the new
    cluster's own start. Only the first settings of the process start clusters ahead from
    their first start; others from their second (kazoo's read-only and SASL classes change
    the settings for one class, whose spares would never be used)."""
    global _CLUSTER
    cluster = _cluster_of(_cluster_conf())
    if _CLUSTER is not None and _CLUSTER is not cluster:
        log.info("Config change detected. Reconfiguring cluster...")
        _CLUSTER.terminate()
    _CLUSTER = cluster
    return cluster


# ------------------------------------------------------------------ the harness
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

    def _callTestMethod(self, method: Callable[[], Any]) -> None:
        # What trizk cannot do yet is a skip with its reason. Checked when the test itself
        # runs: its setUp has set what it needs and its tearDown runs after the skip.
        if os.environ.get("ZOOKEEPER_JAAS_AUTH") == "gssapi":
            raise unittest.SkipTest(GSSAPI_REASON)
        super()._callTestMethod(method)  # type: ignore[misc]

    def setup_zookeeper(self, **client_options: Any) -> None:
        """Start the cluster if a member is not running; a client chrooted to a fresh path
        (``client_options``, e.g. ``use_ssl=True`` with kazoo's TLS options, go to it)."""
        cluster = self.cluster
        if not all(s.running for s in cluster):
            cluster.start()
        namespace = "/kazootests" + uuid.uuid4().hex
        cluster.make_path(namespace)  # the chroot exists before the client starts
        servers = self.secure_servers if client_options.get("use_ssl") else self.servers
        self.hosts = servers + namespace
        self.client = self._get_client(**client_options)
        self.client.start()
        self.client.ensure_path("/")

    def teardown_zookeeper(self) -> None:
        """Stop and close every client the harness made (the cluster keeps running)."""
        while self._clients:
            _stop_client(self._clients.pop())
        self.client = None

    def lose_connection(self, event_factory: Callable[[], Any]) -> None:
        """The server closes the client's connection; returns once the client reconnected."""

        def drop(session_id: int) -> None:
            self.cluster.drop_connections(session_id)

        self._break(drop, KazooState.SUSPENDED, event_factory)

    def expire_session(self, event_factory: Callable[[], Any]) -> None:
        """The client's session expires; returns once the client has a new one.

        As kazoo's harness, the client is told first (it sees LOST, not SUSPENDED: kazoo's own
        tests expect exactly LOST then CONNECTED); then the servers expire that session at
        once -- its ephemerals go and its watchers hear of it now, where ZooKeeper under
        kazoo's harness keeps the old session until its timeout."""
        client = self.client
        assert client is not None, "setup_zookeeper() first"
        old = client.client_id[0]

        def tell_client(session_id: int) -> None:
            client._call(_SESSION_EXPIRED, None)

        def expire_on_server() -> None:
            self.cluster.expire_session(old)

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


def _stop_client(c: KazooClient) -> None:
    try:
        c.stop()
    except KazooException:
        log.exception("Failed stopping client %s", c)
    finally:
        c.close()


class KazooTestCase(KazooTestHarness):
    """``kazoo.testing.KazooTestCase`` on trizk: a chrooted ``self.client`` per test."""

    def setUp(self) -> None:
        self.setup_zookeeper()

    def tearDown(self) -> None:
        self.teardown_zookeeper()

    @classmethod
    def tearDownClass(cls) -> None:
        get_global_cluster().terminate()
