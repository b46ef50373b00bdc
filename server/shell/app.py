"""The Trio shell around a server's role (:mod:`trizk.server.roles`: standalone, or an ensemble
member's, changed by :mod:`trizk.server.shell.ensemble`): sockets, the clock, tasks.

Structure::

    serve(config)
      ├── ticker: sleeps until the next session-expiry bucket, calls the role's
      │     expirer.tick(now, wall) (its sequencer; a learner's local sessions)
      ├── acceptor (one per listening socket): accept → register the socket with the poller
      ├── poller (:mod:`trizk.server.shell.poller`): one task for every plain client socket; reads
      │     what is ready → core.data_received → replies sent inline (non-blocking send)
      └── TLS listener (secureClientPort), and any platform whose selector Trio cannot wait
          on: one nursery per connection (as trio-websocket's server does)
            ├── reader (this task): receive_some → core.data_received → wake the writer
            └── writer: waits for output, send_all(batch); closes the socket once the core
                        has closed the connection and its output is flushed

Time: every task and core of the server takes it from one
:class:`~trizk.server.shell.clock.Clock` (``TrizkServer.clock``), passed to the poller, the txn
log and the ensemble member; a test moves it (``trizk.testing``'s ``advance``) and every timed
task -- these, and an ensemble member's Zab tickers -- wakes and acts on the new time.

Output the core produces outside a client's own request (commit replies, watch events, a
connection closed by the server) marks connections dirty; :meth:`TrizkServer._wake_dirty`
flushes them inline (plain sockets) or wakes their writer (streams).

Bounds: a frame is at most ``jute.maxbuffer`` (the core closes the connection otherwise);
``maxClientCnxns`` connections per client address; a connection whose unsent output passes
``OUTBUF_SOFT_LIMIT`` stops being read until it drains, and one past ``OUTBUF_HARD_LIMIT`` (a
client that never reads its watch events) is closed with a log line. Nothing a client does
reaches beyond its own connection.
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import functools
import itertools
import logging
import os
import socket
import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

import trizk
from trizk.jute import records as r
from trizk.jute.javalang import decode_int, get_integer
from trizk.jute.primitives import reset_limits, set_max_buffer
from trizk.server.auth import acl as aclmod
from trizk.server.auth import sasl as saslmod
from trizk.server.common import release
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.common.servermetrics import ServerMetrics
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.frontend.connection import ClientConnection, State
from trizk.server.frontend.core import FrontEnd
from trizk.server.ops import fourlw, status
from trizk.server.roles.factory import Role, RoleFactory, SessionExpirer
from trizk.server.shell.clock import Clock
from trizk.server.shell.persistence import Persistence, PersistenceSettings
from trizk.server.shell.poller import Poller, SockPeer
from trizk.server.writes.committer import Proposal
from trizk.server.writes.containers import ContainerSettings, candidates
from trizk.server.writes.sequencer import Sequencer
from trizk.storage.tree import quota

if TYPE_CHECKING:
    from trizk.server.shell import tls
    from trizk.server.shell.ensemble import EnsembleSpec, QuorumPeer

# Imported where used, so that a standalone server answers sooner (trizk-server's start-up is
# most of a test's set-up): .ensemble and the quorum package (ensemble members only), .admin
# with h11 (admin.enableServer), .metrics (metricsProvider.className), .tls (secureClientPort).

log = logging.getLogger("trizk.server")

OUTBUF_SOFT_LIMIT = 4 * 1024 * 1024
OUTBUF_HARD_LIMIT = 64 * 1024 * 1024
RECEIVE_SIZE = 256 * 1024
#: what a Trio stream (TLS) reads at once: receive_some(n) allocates n bytes and shrinks them,
#: so n stays under glibc's default mmap threshold (128 KiB) or every read maps and unmaps
STREAM_RECEIVE_SIZE = 64 * 1024
#: frames of one connection processed per turn of the poller: a client pipelining thousands
#: of requests (watch registrations, say) delays the others by one turn, not by all of them
FRAME_BUDGET = 64
#: Netty's SslHandler default handshake timeout (10 s)
TLS_HANDSHAKE_TIMEOUT = 10.0
#: accept() failures that mean "out of descriptors or memory for now" (trio.serve_listeners'
#: list): logged, and accepting resumes after ACCEPT_BACKOFF seconds
_ACCEPT_RESOURCE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
ACCEPT_BACKOFF = 0.1
#: connections accepted per wake-up of an accept loop at most (then the others get a turn)
ACCEPT_BATCH = 64


def _no_commits(batch: Sequence[Proposal], now: int) -> None:
    """An ensemble member's txn log commits nothing: its Zab pump applies what a quorum
    committed (:mod:`trizk.server.shell.ensemble`)."""


@dataclass
class _StreamPeer:
    """A connection served by its own reader and writer tasks (TLS, or no usable selector)."""

    conn: ClientConnection
    stream: trio.abc.Stream  # a SocketStream, or an OpenSSLServerStream on the secure port
    lot: trio.lowlevel.ParkingLot
    drained: trio.Event
    #: set when a throttled connection may be read again
    unthrottled: trio.Event
    #: the front end this connection was accepted by (an ensemble member's role may change)
    core: FrontEnd
    ip: str
    secure: bool


_Peer = _StreamPeer | SockPeer


class TrizkServer:
    """A trizk server bound to ``config``: standalone, or an ensemble member (``ensemble``)."""

    def __init__(self, config: ServerConfig, ensemble: EnsembleSpec | None = None) -> None:
        self.config = config
        #: the server's one clock (a test moves it: :meth:`Clock.advance`); every task and
        #: core of this server takes its time from it
        self.clock = Clock()
        clock = self.clock
        if ensemble is None and config.is_quorum:
            from trizk.server.shell.ensemble import EnsembleSpec

            ensemble = EnsembleSpec.from_config(config)
        # -- durability: recover the data dir first; the core commits through the txn log.
        self.persistence = Persistence(
            PersistenceSettings.from_config(config), extended_types=config.extended_types_enabled
        )
        #: ServerMetrics (one per server: every role of an ensemble member adds to it)
        self.server_metrics = ServerMetrics(
            prometheus=status.prometheus_configured(config), now=clock.now()
        )
        self.persistence.metrics = self.server_metrics
        loaded = self.persistence.load()
        self.replica = loaded.replica
        self.core_config = CoreConfig(
            tick_time=config.tick_time,
            min_session_timeout=config.min_session_timeout,
            max_session_timeout=config.max_session_timeout,
            max_buffer=config.jute_max_buffer,
            extended_types=config.extended_types_enabled,
            enforce_quota=config.enforce_quota,
            reconfig_enabled=config.reconfig_enabled,
            super_digest=config.super_digest,
            global_outstanding_limit=config.global_outstanding_limit,
            auth=aclmod.AuthConfig.from_properties(
                config.properties, secure_port=config.secure_client_port > 0
            ),
            sasl=_sasl_login(config.properties),
            server_id=ensemble.myid if ensemble is not None else 1,
            zookeeper_version=config.zookeeper_version,
            # QuorumPeerConfig's keys: a standalone server (ZooKeeperServerMain) ignores them
            local_sessions=ensemble is not None and config.local_sessions_enabled,
            local_sessions_upgrading=config.local_sessions_upgrading_enabled,
        )
        assert self.core_config.auth is not None
        for line in self.core_config.auth.enforcement_lines():
            log.info("%s", line)  # AuthenticationHelper's two start lines
        #: the role being served (:mod:`trizk.server.roles`); an ensemble member changes it
        self.role: Role
        #: the role's front end (connections, reads, replies) and, on a standalone server or a
        #: leader, its sequencer (writes, sessions: what the ticker expires)
        self.core: FrontEnd
        self.sequencer: Sequencer | None = None
        #: what the session ticker drives (the sequencer; a learner's local sessions)
        self.expirer: SessionExpirer | None = None
        self.peer: QuorumPeer | None = None
        roles = RoleFactory(self.core_config, self.replica, self.server_metrics)
        if ensemble is None:
            node = roles.standalone(self.persistence, now=clock.now(), wall=clock.wall())
            self.persistence.attach(node.commit, self._wake_dirty, clock.now)
            self._install(node)
        else:
            from trizk.server.shell.ensemble import QuorumPeer

            self.peer = QuorumPeer(self, ensemble, self.core_config, roles)
            self.persistence.attach(_no_commits, self._wake_dirty, clock.now)
            self._install(self.peer.role)
        self._conn_ids = itertools.count(1)
        self.peers: dict[int, _Peer] = {}
        self.per_ip: Counter[str] = Counter()
        #: ids of the front ends whose dirty connections are being flushed right now
        self._waking: set[int] = set()
        # -- TLS (secureClientPort): its own listener and, as ZooKeeper's second connection
        # -- factory, its own per-address connection count.
        self.tls_settings: tls.TLSSettings | None = None
        self.tls: tls.ServerTLS | None = None
        if config.secure_client_port:
            from trizk.server.shell import tls

            protocols = tls.client_port_protocols(
                config.properties, release.is_39(config.zookeeper_version)
            )
            tls.check_client_port_ocsp(config.properties, release.is_39(config.zookeeper_version))
            self.tls_settings = dataclasses.replace(
                tls.TLSSettings.from_properties(config.properties), protocols=protocols
            )
            self.tls = tls.server_context(self.tls_settings)
        self.per_ip_secure: Counter[str] = Counter()
        self.secure_port = config.secure_client_port
        self.port = config.client_port
        self.started_wall = clock.wall()
        self.started = clock.now()
        #: the AdminServer's bound port, None when it is off or its port was taken
        self.admin_port: int | None = None
        #: the Prometheus /metrics port, None when that provider is off or its port was taken
        self.metrics_port: int | None = None
        self.trace_mask = 306  # ZooTrace's default mask
        self.containers = ContainerSettings.from_properties(config.properties)
        self.sessionless_timeout = _positive_int_property(
            config, "zookeeper.nio.sessionlessCnxnTimeout", status.CONNECTION_EXPIRY_INTERVAL_MS
        )
        #: plain client sockets, one task over a selector; None: one task pair per connection
        self.poller: Poller | None = None
        if Poller.supported():
            self.poller = Poller(
                self,
                clock.now,
                receive_size=RECEIVE_SIZE,
                soft_limit=OUTBUF_SOFT_LIMIT,
                hard_limit=OUTBUF_HARD_LIMIT,
                linger_ms=self.sessionless_timeout,
            )
            if self.peer is None:
                # standalone: the poller's task reads the fsync helper's answers and commits
                self.persistence.drive_with(self.poller)
            else:
                # an ensemble member: the pass also reads the quorum links and the fsync
                # helper; what it gave the role's Zab machine is handled as it ends
                self.peer.use_poller(self.poller)

    def _install(self, role: Role) -> None:
        front = role.front
        front.is_four_letter = fourlw.command_name
        front.four_letter = self._four_letter
        self.role = role
        self.core = front
        self.sequencer = role.sequencer
        self.expirer = role.expirer

    def install(self, role: Role) -> None:
        """An ensemble member changed role: serve through ``role`` from now on. Every client
        connection of the previous role is closed (``Learner.shutdown`` / ``Leader.shutdown``
        close all client connections; clients reconnect, to this member or another)."""
        old = self.core
        for p in list(self.peers.values()):
            if p.core is old:
                old.close(p.conn, "the server changed role")
        self._wake_dirty()
        self._install(role)

    def wake(self) -> None:
        """Flush what the core wrote (called by an ensemble role after it applied commits)."""
        self._wake_dirty()

    # ------------------------------------------------------------------ run
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        # jute.maxbuffer is a JVM property in ZooKeeper; here it holds for this server's tasks.
        # BinaryInputArchive: Integer.getInteger("zookeeper.jute.maxbuffer.extrasize", maxBuffer)
        extra = decode_int(self.config.get_property("zookeeper.jute.maxbuffer.extrasize"))
        token = set_max_buffer(self.config.jute_max_buffer, extra)
        try:
            await self._run(task_status)
        finally:
            reset_limits(token)

    async def _run(self, task_status: Any) -> None:
        host = self.config.client_port_address
        try:
            listeners = await trio.open_tcp_listeners(self.config.client_port, host=host)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise OSError(
                    e.errno, f"client port {host or '*'}:{self.config.client_port} is in use"
                ) from None
            raise
        self.port = listeners[0].socket.getsockname()[1]
        # NIOServerCnxnFactory.configure's line (InetSocketAddress.toString); container wait
        # strategies look for "binding to port".
        shown = f"/{host}" if host else "0.0.0.0/0.0.0.0"
        log.info("binding to port %s:%d", shown, self.port)
        if self.config.enforce_quota:
            log.info("zookeeper.enforceQuota = true, Quota Enforce enables")
        log.info(
            "trizk %s (ZooKeeper %s compatible) serving clients on %s:%d",
            trizk.__version__,
            self.config.zookeeper_version,
            host or "0.0.0.0",
            self.port,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(
                functools.partial(self.persistence.run, committer=self.peer is None)
            )
            if self.peer is not None:
                await nursery.start(self.peer.run)
            nursery.start_soon(self._ticker)
            nursery.start_soon(self._container_reaper)
            nursery.start_soon(self._connection_expirer)
            if self.poller is not None:
                nursery.start_soon(self.poller.run)
                for listener in listeners:
                    nursery.start_soon(self._accept_loop, listener)
            else:
                await nursery.start(trio.serve_listeners, self._handle, listeners)
            if self.tls is not None:
                shost = self.config.secure_client_port_address
                secure = await trio.open_tcp_listeners(self.config.secure_client_port, host=shost)
                self.secure_port = secure[0].socket.getsockname()[1]
                log.info("serving TLS clients on %s:%d", shost or "0.0.0.0", self.secure_port)
                await nursery.start(trio.serve_listeners, self._handle_secure, secure)
            if self.config.admin_server_enabled:
                from trizk.server.ops import admin

                self.admin_port = await nursery.start(
                    admin.serve_admin,
                    admin.AdminSettings.from_config(self.config),
                    admin.AdminHooks(
                        view=lambda: self._view(None),
                        act=self._side_effect,
                        last_snapshot=lambda: self.persistence.last_snapshot,
                        properties=lambda: self.config.properties,
                        auth=admin.AdminAuth(
                            self.core_config.auth or aclmod.AuthConfig(),
                            self._node_acl,
                            self._admin_x509_subject,
                        ),
                        take_snapshot=self.persistence.take_snapshot,
                        last_zxid_trailer=lambda: self.persistence.settings.last_zxid_trailer,
                        restore=self.restore_from_snapshot,
                        metrics=self.server_metrics,
                    ),
                )
            if self.config.metrics_provider.get("className"):
                from trizk.server.ops import metrics

                self.metrics_port = await nursery.start(
                    metrics.serve_metrics,
                    metrics.MetricsSettings.from_config(self.config),
                    lambda: self._view(None),
                )
            task_status.started(self.port)

    async def restore_from_snapshot(self, data: bytes) -> int:
        """``ZooKeeperServer.restoreFromSnapshot`` (the AdminServer's ``restore``): read the
        snapshot stream ``data`` off the Trio thread, then, in one step that no request
        interleaves with (ZooKeeper's ``restoreLatch`` holds requests back meanwhile), make it
        the state of the role now serving (:func:`~trizk.server.roles.factory.restore`).
        Nothing is written to disk. Returns the restored tree's last processed zxid; raises
        ``SnapshotFormatError`` / ``SnapshotLoadError`` on a stream that is not a snapshot."""
        from trizk.server.roles.factory import restore
        from trizk.storage.formats import treeio

        log.info(
            "Before restore database. lastProcessedZxid=0x%x, nodeCount=%d, sessionCount=%d",
            self.replica.last_zxid,
            self.replica.tree.node_count(),
            len(self.replica.sessions),
        )
        tree, sessions = await trio.to_thread.run_sync(
            functools.partial(
                treeio.restore_from_stream, data, extended_types=self.persistence.extended_types
            )
        )
        restore(self.role, tree, sessions, self.clock.now(), self.clock.wall())
        log.info(
            "After restore database. lastProcessedZxid=0x%x, nodeCount=%d, sessionCount=%d",
            tree.last_processed_zxid,
            tree.node_count(),
            len(sessions),
        )
        return tree.last_processed_zxid

    def _node_acl(self, path: str) -> tuple[r.ACL, ...] | None:
        """The ACL of the node at ``path`` (the AdminServer's authorization), None if none."""
        replica = self.persistence.replica
        node = replica.tree.get(path) if replica is not None else None
        return node.acl if node is not None else None

    async def _admin_x509_subject(self, chain_der: Sequence[bytes]) -> str | None:
        """``X509AuthenticationProvider.handleAuthentication`` for an AdminServer request: the
        subject of a chain its trust manager accepts; None when there is none or it refuses.
        ZooKeeper 3.9.3's provider builds that trust manager with ``X509Util.createTrustManager``
        from the ``ssl.*`` trust store and ``ssl.crl`` / ``ssl.ocsp``: the secure client port's
        trust, revocation included (:meth:`~trizk.server.shell.tls.ServerTLS.judge_client`)."""
        if self.tls is None or self.tls_settings is None or not chain_der:
            return None
        if self.tls_settings.trust_store is None:
            return None
        from cryptography import x509

        from trizk.server.shell import tls

        chain = [x509.load_der_x509_certificate(d) for d in chain_der]
        refused = await self.tls.judge_client(chain, datetime.datetime.now(datetime.UTC))
        if refused is not None:
            # X509AuthenticationProvider: "Failed to trust certificate" (ERROR), then
            # Commands: "Auth Id list is empty" -> 401 Not authenticated
            log.error("AdminServer: Failed to trust certificate: %s", refused)
            return None
        return tls.x509_subject(chain_der[0])

    async def _ticker(self) -> None:
        while True:
            seq = self.expirer
            if seq is None:  # a learner, or LOOKING: the leader expires sessions
                await self.clock.sleep_until(self.clock.now() + self.config.tick_time)
                continue
            now = self.clock.now()
            await self.clock.sleep_until(now + max(min(seq.next_tick_in(now), 1 << 30), 1))
            if seq is self.expirer:
                seq.tick(self.clock.now(), self.clock.wall())
            self._wake_dirty()

    async def _connection_expirer(self) -> None:
        """NIOServerCnxnFactory's ConnectionExpirerThread: a connection not heard from (or
        written to) for its session timeout -- ``zookeeper.nio.sessionlessCnxnTimeout`` until
        it has a session -- is closed. Connections expire in buckets of the sessionless
        timeout, as in ZooKeeper's ExpiryQueue."""
        interval = self.sessionless_timeout
        while True:
            now = self.clock.now()
            await self.clock.sleep_until(now + interval - now % interval)
            now = self.clock.now()
            for p in list(self.peers.values()):
                c = p.conn
                # NIOServerCnxn.setSessionTimeout touches the connection with the session's
                # timeout as soon as its ConnectRequest is read: a handshake waiting for its
                # createSession to commit is not sessionless any more.
                timeout = c.session_timeout or interval
                if not c.closed and status.expiry_bucket(c.last_io, timeout, interval) <= now:
                    p.core.close(c, f"connection expired (no traffic for {timeout} ms)")
                    self.server_metrics.sessionless_connections_expired += c.state is not State.OPEN
            if self.poller is not None:
                for p in self.poller.expired_lingerers(now):
                    log.info("%s: closed, its last output not taken; dropping it", p.conn)
                    self.poller.drop(p)
            self._wake_dirty()

    async def _container_reaper(self) -> None:
        s = self.containers
        next_check = self.clock.now() + s.check_interval_ms
        while True:
            # the next look is due check_interval after this one began (on the server's clock,
            # so a clock a test moved while containers were being deleted is not missed)
            await self.clock.sleep_until(next_check)
            next_check = self.clock.now() + s.check_interval_ms
            for path in candidates(self.replica.tree, self.clock.wall(), s):
                seq = self.sequencer
                if seq is None:  # only the leader (or a standalone server) deletes containers
                    break
                log.info("Attempting to delete candidate container: %s", path)
                seq.delete_container(path, self.clock.wall())
                self._wake_dirty()
                await trio.sleep(s.min_interval_ms / 1000)

    # ------------------------------------------------------------------ connections
    async def _handle_secure(self, stream: trio.SocketStream) -> None:
        await self._handle(stream, secure=True)

    async def _tls_handshake(
        self, stream: trio.SocketStream, ip: str
    ) -> tuple[trio.abc.Stream | None, str | None]:
        """NettyServerCnxnFactory's SslHandler + CertificateVerifier: the TLS stream and the
        x509 subject of a client certificate, or (None, None) when the connection is refused
        (a failed handshake, or a chain Java's trust manager would refuse)."""
        assert self.tls is not None and self.tls_settings is not None
        from trizk.server.shell.tlsstream import OpenSSLServerStream

        s = OpenSSLServerStream(stream, self.tls.context)
        try:
            with trio.fail_after(TLS_HANDSHAKE_TIMEOUT):
                await s.do_handshake()
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError) as e:
            log.error("Unsuccessful handshake with /%s: %s", ip, e)
            return None, None
        chain = s.peer_chain()
        if not chain:
            return s, None  # clientAuth=want without a certificate, or clientAuth=none
        refused: str | None
        if self.tls_settings.trust_store is None:
            # X509AuthenticationProvider: no trust store -> no trust manager -> AUTHFAILED
            refused = "No trust manager available to authenticate the client certificate"
        else:
            refused = await self.tls.judge_client(chain, datetime.datetime.now(datetime.UTC))
        if refused is not None:
            log.error("Unsuccessful handshake with /%s: %s", ip, refused)
            with trio.CancelScope(shield=True):
                await s.aclose()
            return None, None
        from cryptography.hazmat.primitives.serialization import Encoding

        from trizk.server.shell import tls

        return s, tls.x509_subject(chain[0].public_bytes(Encoding.DER))

    def _admit(self, ip: str, secure: bool) -> bool:
        """``maxClientCnxns``: count one more connection from ``ip``, or refuse it."""
        limit = self.config.max_client_cnxns
        per_ip = self.per_ip_secure if secure else self.per_ip
        if limit > 0 and per_ip[ip] >= limit:
            log.warning("Too many connections from /%s - max is %d", ip, limit)
            self.server_metrics.connection_rejected += 1
            return False
        per_ip[ip] += 1
        return True

    def _release(self, ip: str, secure: bool) -> None:
        per_ip = self.per_ip_secure if secure else self.per_ip
        per_ip[ip] -= 1
        if not per_ip[ip]:
            del per_ip[ip]

    def _new_connection(self, peer_addr: Any) -> ClientConnection:
        conn = ClientConnection(
            next(self._conn_ids),
            (str(peer_addr[0]), int(peer_addr[1])),
            self.config.jute_max_buffer,
            self.clock.wall(),
        )
        conn.last_io = self.clock.now()  # NIOServerCnxnFactory.createConnection: touchCnxn
        return conn

    def _forget(self, peer: _Peer) -> None:
        """The connection's socket is closed: drop it from the server and its front end."""
        if self.peers.pop(peer.conn.id, None) is None:
            return
        self._release(peer.ip, peer.secure)
        peer.core.connection_lost(peer.conn)
        self._wake_dirty(peer.core)

    # -- plain sockets: the poller (Owner protocol) --------------------------------
    async def _accept_loop(self, listener: trio.SocketListener) -> None:
        """Accept on the listening socket itself, every pending connection per wake-up (up to
        ACCEPT_BATCH): a SocketStream per connection cost a task switch and a setsockopt or
        two, about a sixth of opening a session with 32 handshakes in flight."""
        tsock = listener.socket
        # NIOServerCnxn sets TCP_NODELAY on every connection; set on the listening socket,
        # Linux hands it to each accepted one (looked at on the first; else set on each)
        tsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lsock = socket.socket(fileno=tsock.detach())
        lsock.setblocking(False)
        inherited: bool | None = None
        poller = self.poller
        assert poller is not None
        try:  # closed when the server stops, as trio.serve_listeners does
            while True:
                await trio.lowlevel.wait_readable(lsock)
                failed: OSError | None = None
                # the batch is one pass of the poller's: what its handshakes propose is logged
                # together when it ends
                poller.before_pass()
                try:
                    for _ in range(ACCEPT_BATCH):
                        try:
                            sock, addr = lsock.accept()
                        except (BlockingIOError, InterruptedError):
                            break
                        except OSError as e:
                            if e.errno not in _ACCEPT_RESOURCE_ERRNOS:
                                raise
                            failed = e
                            break
                        if inherited is None:
                            inherited = bool(
                                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                            )
                        if not inherited:
                            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        peer = self._adopt(sock, addr)
                        if peer is not None:
                            poller.read_now(peer)
                finally:
                    poller.after_pass()
                if failed is not None:
                    log.error("accept() failed: %s; retrying in %.1f s", failed, ACCEPT_BACKOFF)
                    await trio.sleep(ACCEPT_BACKOFF)
        finally:
            lsock.close()

    def _adopt(self, sock: socket.socket, peer_addr: Any) -> SockPeer | None:
        """A plain connection was accepted: admit it and hand its socket to the poller
        (None: refused and closed)."""
        assert self.poller is not None
        ip = str(peer_addr[0])
        if not self._admit(ip, secure=False):
            sock.close()
            return None
        conn = self._new_connection(peer_addr)
        peer = SockPeer(sock, conn, self.core, ip)
        self.peers[conn.id] = peer
        self.core.connection_made(conn)
        self.poller.add(peer)
        return peer

    def feed(self, peer: SockPeer, data: bytes) -> None:
        self._feed(peer, data)

    def finished(self, peer: SockPeer) -> None:
        self._forget(peer)

    # -- streams: TLS, or no usable selector ----------------------------------------
    async def _handle(self, stream: trio.SocketStream, *, secure: bool = False) -> None:
        try:
            peer_addr = stream.socket.getpeername()
        except OSError:
            await stream.aclose()
            return
        ip = str(peer_addr[0])
        if not self._admit(ip, secure):
            await stream.aclose()
            return
        io: trio.abc.Stream = stream
        subject: str | None = None
        if secure:
            tls_stream, subject = await self._tls_handshake(stream, ip)
            if tls_stream is None:
                self.server_metrics.tls_handshake_failed()
                self._release(ip, secure)
                with trio.CancelScope(shield=True):
                    await stream.aclose()
                return
            io = tls_stream
        conn = self._new_connection(peer_addr)
        core = self.core
        peer = _StreamPeer(
            conn, io, trio.lowlevel.ParkingLot(), trio.Event(), trio.Event(), core, ip, secure
        )
        self.peers[conn.id] = peer
        core.connection_made(conn)
        if subject is not None:
            conn.x509_subject = subject
            for ident in aclmod.x509_ids(core.auth_config, subject):
                conn.auth.add(ident)
            log.info("Authenticated Id '%s' for Scheme 'x509'", subject)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer, peer, nursery.cancel_scope)
                await self._reader(peer)
                # The core closed the connection (or the client went away): let the writer
                # flush what is queued, then it cancels the nursery.
                peer.lot.unpark_all()
        finally:
            self._forget(peer)
            with trio.CancelScope(shield=True):
                await io.aclose()

    async def _reader(self, peer: _StreamPeer) -> None:
        conn, stream = peer.conn, peer.stream
        while not conn.closed:
            eof = True
            try:
                # bytes(): trio >= 0.23 types it bytes | bytearray; a bytes object (what a
                # socket stream returns) is passed through without a copy
                data = bytes(await stream.receive_some(STREAM_RECEIVE_SIZE))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
                eof = False
            if not data:
                # NIOServerCnxn.handleFailedRead: the client closed its end (EOF, not an error)
                self.server_metrics.connection_drop_count += eof
                conn.close(conn.close_reason or "client closed the connection")
                return
            self._feed(peer, data)
            while conn.throttled and not conn.closed:
                # globalOutstandingLimit: read no more until this connection's requests drain
                peer.unthrottled = trio.Event()
                await peer.unthrottled.wait()
                if not conn.throttled:
                    self._feed(peer, b"")
            if len(conn.out) > OUTBUF_SOFT_LIMIT and not conn.closed:
                peer.drained = trio.Event()
                await peer.drained.wait()

    def _feed(self, peer: _Peer, data: bytes) -> None:
        """Hand received bytes (or, for a connection no longer throttled, nothing: its buffered
        frames) to the core, then flush what that produced."""
        conn = peer.conn
        try:
            if isinstance(peer, SockPeer):
                # a turn: at most FRAME_BUDGET frames, and none once the output is backlogged
                # (the poller gives the rest a later turn, after the other connections')
                poller = self.poller
                assert poller is not None
                soft = poller.soft_limit
                clock = self.clock
                more = peer.core.data_received(
                    conn, data, clock.now(), clock.wall(), FRAME_BUDGET, soft
                )
                # another turn at once while nobody else waits (and the output is not backlogged)
                while more and len(conn.out) <= soft and poller.alone(peer):
                    more = peer.core.data_received(
                        conn, b"", clock.now(), clock.wall(), FRAME_BUDGET, soft
                    )
                peer.more = more
            else:
                peer.core.data_received(conn, data, self.clock.now(), self.clock.wall())
        except Exception:
            # A bug must cost only this connection: the server and other clients go on.
            log.exception("%s: internal error while processing a request", conn)
            conn.close("internal error")
            peer.core.dirty.append(conn)
        self._wake_dirty(peer.core)

    async def _writer(self, peer: _StreamPeer, scope: trio.CancelScope) -> None:
        conn, stream = peer.conn, peer.stream
        try:
            while True:
                if conn.out:
                    if len(conn.out) > OUTBUF_HARD_LIMIT:
                        log.warning(
                            "%s: %d bytes of unsent output (limit %d), closing connection",
                            conn,
                            len(conn.out),
                            OUTBUF_HARD_LIMIT,
                        )
                        conn.close("output buffer limit exceeded")
                        conn.out.clear()
                        break
                    await stream.send_all(conn.take_output())
                    conn.last_io = self.clock.now()
                    continue
                peer.drained.set()
                if conn.closed:
                    break
                await peer.lot.park()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            conn.close(conn.close_reason or "send failed")
        scope.cancel()

    def _wake_dirty(self, core: FrontEnd | None = None) -> None:
        """Flush (plain sockets) or wake the writers of (streams) the connections ``core``
        marked dirty. Not re-entrant per front end: what a flush makes dirty (a closed
        connection forgotten, a throttled one fed again) is taken by the running pass."""
        if self.peer is not None:
            # what the front end did may have given the role's Zab machine work (a learner's
            # REQUEST or REVALIDATE to send, session touches)
            self.peer.kick()
        core = core or self.core
        dirty = core.dirty
        if not dirty or id(core) in self._waking:
            return
        self._waking.add(id(core))
        try:
            while dirty:
                # a connection marked twice (its request read, then its reply queued) is
                # flushed once
                batch = dict.fromkeys(dirty) if len(dirty) > 1 else dirty[:]
                dirty.clear()
                for c in batch:
                    p = self.peers.get(c.id)
                    if p is None:
                        continue
                    if isinstance(p, SockPeer):
                        assert self.poller is not None
                        if p.paused and not c.throttled:
                            # the throttle ended: the frames that waited behind it, then read
                            p.paused = False
                            self._feed(p, b"")
                        self.poller.flush(p)
                    else:
                        p.lot.unpark_all()
                        if not c.throttled:
                            p.unthrottled.set()
        finally:
            self._waking.discard(id(core))

    # ------------------------------------------------------------------ 4lw
    def _four_letter(self, word: str, conn: ClientConnection, arg: bytes) -> bytes | None:
        if not fourlw.allowed(word, self.config.four_letter_words):
            return fourlw.not_whitelisted(word)
        self._side_effect(word, arg)
        return fourlw.respond(word, self._view(conn))

    def _side_effect(self, word: str, arg: bytes) -> None:
        """The state change of ``crst``/``srst``/``stmk`` (4lw and AdminServer alike)."""
        if word == "stmk":
            (self.trace_mask,) = struct.unpack(">q", arg)
        elif word == "srst":
            self.core.stats.reset()
        elif word == "crst":
            for p in self.peers.values():
                p.conn.reset_stats()

    def _view(self, asking: ClientConnection | None) -> status.SimpleView:
        core = self.core
        st = core.stats
        wall_offset = self.clock.wall() - self.clock.now()
        conns = []
        for p in self.peers.values():
            c = p.conn
            conns.append(
                status.ConnectionInfo(
                    host=c.remote[0],
                    port=c.remote[1],
                    interest_ops=0 if c is asking else 1,
                    queued=c.outstanding,
                    received=c.packets_received + (1 if c is asking else 0),
                    sent=c.packets_sent,
                    session_id=c.session_id if c.state.value == "open" else 0,
                    last_operation=c.last_op,
                    established_ms=c.established,
                    session_timeout=c.session_timeout,
                    last_cxid=c.last_cxid,
                    last_zxid=c.last_zxid,
                    last_response_ms=c.last_response_time,
                    last_latency=c.last_latency,
                    min_latency=max(c.latency.min, 0),
                    avg_latency=c.latency.total // c.latency.count if c.latency.count else 0,
                    max_latency=c.latency.max,
                    expire_at_ms=status.expiry_bucket(
                        c.last_io,
                        c.session_timeout or status.CONNECTION_EXPIRY_INTERVAL_MS,
                        status.CONNECTION_EXPIRY_INTERVAL_MS,
                    )
                    + wall_offset,
                )
            )
        sessions = []
        tracked = self.sequencer.sessions.sessions if self.sequencer is not None else {}
        for s in tracked.values():
            eph = core.tree.ephemerals.get(s.id)
            sessions.append(
                status.SessionInfo(
                    s.id, s.expiry + wall_offset, tuple(eph) if eph is not None else None
                )
            )
        learner_sessions: list[tuple[int, int]] | None = None
        if self.role.name in ("following", "observing"):
            # a learner knows the global sessions of its database (zkDb.getSessionCount,
            # LearnerSessionTracker's globalSessionsWithTimeouts), and expires none of them
            learner_sessions = list(self.replica.sessions.items())
            for sid in self.replica.sessions:
                eph = core.tree.ephemerals.get(sid)
                sessions.append(status.SessionInfo(sid, 0, tuple(eph) if eph is not None else None))
        local = core.write_path.local_sessions
        local_sessions = (
            [
                status.SessionInfo(s.id, s.expiry + wall_offset)
                for s in local.tracker.sessions.values()
            ]
            if local is not None
            else None
        )
        by_conn: dict[int, list[str]] = {}
        for path, watchers in core.watches.data.by_path.items():
            for w in watchers:
                assert isinstance(w, ClientConnection)
                # a null path's watch (addWatch/setWatches2 with null) prints as Java's "null"
                by_conn.setdefault(w.session_id, []).append(path if path is not None else "null")
        data_dir = Path(self.config.data_dir) / "version-2"
        log_dir = Path(self.config.data_log_dir) / "version-2"
        return status.SimpleView(
            config=self.config,
            client_port=self.port,
            metrics={
                **st.view_metrics(),
                **status.fd_gauges(),
                "local_sessions": len(local) if local is not None else 0,
            },
            server_metrics=self.server_metrics,
            now_ms=self.clock.now(),
            serving=core.serving,
            # ReadOnlyZooKeeperServer.getState: "read-only" (srvr's Mode, zk_server_state)
            read_only=core.read_only is not None,
            server_state=(
                "read-only"
                if core.read_only is not None
                else self.peer.state
                if self.peer is not None
                else "standalone"
            ),
            role_metrics=self.peer.role_metrics() if self.peer is not None else (),
            proposal_sizes=self.peer.proposal_sizes() if self.peer is not None else (-1, -1, -1),
            latency=status.LatencyStats(
                st.latency.count, st.latency.total, max(st.latency.min, 0), st.latency.max
            ),
            packets_received=st.packets_received,
            packets_sent=st.packets_sent,
            outstanding_requests=core.in_process,
            last_zxid=core.tree.last_processed_zxid,
            node_count=core.tree.node_count(),
            watch_count=core.watches.data.count() + core.watches.child.count(),
            approximate_data_size=core.tree.approximate_data_size(),
            quota_gauges=quota.quota_gauges(core.tree.quota_leaves()),
            quota_counters=[
                (f"{ns}_{quota.QUOTA_EXCEEDED_ERROR_PER_NAMESPACE}", st.quota_exceeded[ns])
                for ns in quota.namespace_order(st.quota_exceeded)
            ],
            uptime_ms=self.clock.now() - self.started,
            connections=conns,
            sessions=sessions,
            local_sessions=local_sessions,
            learner_sessions=learner_sessions,
            data_watches=list(by_conn.items()),
            snap_dir=str(data_dir.absolute()),
            log_dir=str(log_dir.absolute()),
            data_dir_size=_dir_size(data_dir),
            log_dir_size=_dir_size(log_dir),
            environment=status.process_environment(),
            trace_mask=self.trace_mask,
            digest_log=tuple(core.tree.digest_log),
        )


def _positive_int_property(config: ServerConfig, name: str, default: int) -> int:
    """``Integer.getInteger(name, default)``: an unparsable value is the default; trizk also
    refuses values below 1 (with a warning) where ZooKeeper would divide by zero."""
    value = get_integer(config.properties, name, default)
    if value < 1:
        log.warning(
            "%s=%s is not a positive number; using %d", name, config.get_property(name), default
        )
        value = default
    return value


def _dir_size(d: Path) -> int:
    try:
        return sum(f.stat().st_size for f in d.iterdir() if f.is_file())
    except OSError:
        return 0


async def serve(
    config: ServerConfig, *, testing: bool = False, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    """Run a standalone trizk server until cancelled; ``task_status.started(port)``. With
    ``testing`` (``trizk-server --testing``) the test controls (:mod:`.testcontrol`) are served
    too, on their own 127.0.0.1 port: ``task_status.started((port, controls_port))``."""
    os.makedirs(config.data_dir, exist_ok=True)
    server = TrizkServer(config)
    if not testing:
        await server.run(task_status=task_status)
        return
    from trizk.server.ops import testcontrol

    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        controls = await nursery.start(
            testcontrol.serve_controls, testcontrol.Controls(server), "127.0.0.1"
        )
        task_status.started((port, controls))


def _sasl_login(properties: Mapping[str, str]) -> saslmod.SaslServerConfig | None:
    """``ServerCnxnFactory.configureSaslLogin``: the JAAS ``Server`` section, and its Kerberos
    login (keytab, acceptor) when it has a ``Krb5LoginModule``; JaasError stops the start."""
    cfg = saslmod.load_sasl_config(properties)
    if cfg is None or cfg.kerberos is None:
        return cfg
    from trizk.server.shell import kerberos

    return kerberos.login(cfg, properties)
