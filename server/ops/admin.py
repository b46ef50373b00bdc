"""The AdminServer: ZooKeeper 3.8's HTTP command API (``JettyAdminServer`` + ``Commands``).

Theory of operation
===================
Kubernetes probes, testcontainers' wait strategies and monitoring agents poll
``http://host:8080/commands/<name>``. ZooKeeper serves it with Jetty; trizk with h11 (the
sans-IO HTTP/1.1 state machine) on Trio. Three layers, pure to impure:

1. :data:`COMMANDS` — one row per command ZooKeeper 3.8 registers (``Commands`` static block):
   its names (primary first, then the 4lw-style aliases), whether it needs a running server,
   the 4lw side effect it shares with the four-letter words (``crst``/``srst``/``stmk``), and a
   builder turning the status model (:class:`~trizk.server.ops.status.StatusView` and the
   values derived from it, the *same* statistics ``mntr``/``stat`` print: there is no second
   copy) into the response's members, in ZooKeeper's order.
2. :func:`run_command` (``Commands.runCommand`` + ``CommandResponse.toMap``) and
   :func:`jackson_json` (Jackson's ``ObjectMapper`` with ``INDENT_OUTPUT``: ``"key" : value``,
   two-space indents per object level, arrays inline ``[ 1, 2 ]``, empty ``[ ]``/``{ }``,
   doubles as Java's ``Double.toString``); :func:`route` maps method + target to a response.
3. :func:`serve_admin` — the Trio shell: the HTTP server shared with ``/metrics`` and the test
   controls (:mod:`trizk.server.ops.http`: one task per connection, keep-alive,
   ``admin.idleTimeout``).

ZooKeeper behaviour reproduced (checked against ZooKeeper 3.8.0 with its Jetty AdminServer):

* Every command answers HTTP 200 with ``Content-Type: application/json``; errors are only in
  the JSON ``error`` member. Unknown names: ``{"command": <name>, "error": "Unknown command:
  <name>"}``; a command that needs a server while none serves: ``"This ZooKeeper instance is
  not currently serving requests"`` with the name as asked (not the primary name).
* ``CommandResponse.toMap`` puts ``command`` and ``error`` after the members, except that a
  member named ``error`` (``leader`` standalone, ``set_trace_mask`` without an argument) keeps
  its first position, followed by ``command``.
* ``GET <commandURL>`` and ``<commandURL>/`` list the primary names, sorted, as HTML lines
  ``<a href="/commands/x">x</a>`` / ``<br/>`` (no Content-Type). Other paths: 404; methods other
  than GET/HEAD: 405, TRACE: 403 (``constrainTraceMethod``). The path is percent-decoded
  (``/commands/%72uok`` is ruok); query parameters are keyword arguments, first value wins.
* ``admin.enableServer`` is on unless exactly ``false``; ``admin.serverAddress`` 0.0.0.0,
  ``admin.serverPort`` 8080, ``admin.idleTimeout`` 30000 ms, ``admin.commandURL``
  ``/commands``; unparsable integers fall back to the default (``Integer.getInteger``).
* A port in use is logged and the server carries on without the AdminServer, as a
  ``QuorumPeer`` does (``Problem starting AdminServer``). Standalone ZooKeeper 3.8.0 exits with
  code 4 instead ("Unable to start AdminServer, exiting abnormally"): trizk does not, on purpose
  (a development server must not die because something else holds 8080).

HTTPS (``admin.forceHttps``, ``admin.portUnification``): :func:`_https`.

ZooKeeper 3.9 (``trizk.zookeeperVersion=3.9.3``, checked request by request against a live
3.9.3): ``CommandServlet`` also has ``doPost`` (the body is the command's input; a GET command
POSTed returns null there and Jetty answers 500; other methods 405, empty body), and a command
may carry an :class:`AuthRequest` (``Command.getAuthRequest``): after the unknown-command and
not-serving checks, :func:`check_auth` reads the ``Authorization`` header ``<scheme>
[<credentials>]`` (``String.split(" ")``: one or two parts), asks the scheme's provider
(:func:`admin_ids`: digest, ip -- the peer address or, with
``zookeeper.IPAuthenticationProvider.usexforwardedfor``, the first ``X-Forwarded-For`` entry)
and checks the node's ACL with ``checkACL`` (any shared permission bit grants). The two such
commands served are ``snapshot`` (``SnapshotCommand``: feature flag, lastProcessedZxid trailer,
:class:`RateLimiter` whose interval 3.9.3 reads as microseconds, ``streaming``) and ``restore``
(``RestoreCommand``, a POST command: feature flag ``zookeeper.admin.restore.enabled``, on by
default, the trailer flag, a rate limiter of the same property read as milliseconds, then
``restoreFromSnapshot`` of the body: :func:`~trizk.server.roles.factory.restore`); both are run
by the shell (:func:`answer_request`), through the server's own snapshot writer and restore.
``x509``: with ``admin.needClientAuth`` the HTTPS handshake asks for a client certificate
(judged by the ``ssl.quorum.*`` trust store, as Jetty's, with revocation checks when
``ssl.crl`` / ``ssl.ocsp`` turned the JVM's on: :func:`_jvm_revocation`); the provider's own
trust manager (the ``ssl.*`` trust store with the ``ssl.crl`` / ``ssl.ocsp`` revocation checks,
as 3.9.3's ``X509AuthenticationProvider`` builds it) then gives its subject
(:attr:`AdminAuth.x509_subject`).

Every connection is listed under ``connections``; ``secure_connections`` is always empty (the
view does not tell TLS connections apart yet).
"""

from __future__ import annotations

import logging
import math
import os
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from trizk.jute import records as r
from trizk.jute.codes import Perms
from trizk.jute.javalang import get_boolean, get_integer, java_split, parse_boolean, parse_long
from trizk.server.auth import acl as aclmod
from trizk.server.common import release
from trizk.server.common.servermetrics import ServerMetrics
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.ops import status
from trizk.server.ops.http import (
    DEFAULT_IDLE_TIMEOUT,
    HttpAnswer,
    HttpRequest,
    Prepare,
    error_page,
    serve_http,
)
from trizk.server.ops.javatext import java_double, java_hex, java_socket_address
from trizk.server.ops.status import StatusView
from trizk.storage.disk import files
from trizk.storage.formats.txnlog import zxid_from_name

if TYPE_CHECKING:
    from trizk.server.auth.revocation import RevocationPolicy

__all__ = [
    "COMMANDS",
    "DEFAULT_COMMAND_URL",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_PORT",
    "AdminAuth",
    "AdminContext",
    "AdminHooks",
    "AdminSettings",
    "AuthRequest",
    "Command",
    "RateLimiter",
    "admin_ids",
    "check_auth",
    "command_links",
    "jackson_json",
    "lookup",
    "route",
    "run_command",
    "serve_admin",
]

log = logging.getLogger("trizk.server.ops.admin")

#: ``JettyAdminServer`` defaults.
DEFAULT_PORT = 8080
DEFAULT_COMMAND_URL = "/commands"
DEFAULT_ADDRESS = "0.0.0.0"

Members = list[tuple[str, Any]]


# -- settings -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AdminSettings:
    """The ``zookeeper.admin.*`` properties (zoo.cfg ``admin.*`` keys)."""

    enabled: bool = True
    address: str = DEFAULT_ADDRESS
    port: int = DEFAULT_PORT
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT
    command_url: str = DEFAULT_COMMAND_URL
    #: ``zookeeper.admin.forceHttps``: HTTPS only, from the ``ssl.quorum.*`` stores
    force_https: bool = False
    #: ``zookeeper.admin.portUnification``: HTTPS and HTTP on one port (Jetty's
    #: UnifiedConnectionFactory: a first byte 0x16 is a TLS handshake)
    port_unification: bool = False
    #: ``trizk.zookeeperVersion``: 3.9 adds POST, authentication and ``snapshot``
    zookeeper_version: str = release.DEFAULT_RELEASE
    #: ``zookeeper.admin.snapshot.enabled`` (3.9; ``Boolean.parseBoolean``, default true)
    snapshot_enabled: bool = True
    #: ``zookeeper.admin.restore.enabled`` (3.9; ``Boolean.parseBoolean``, default true: read
    #: by ``RestoreCommand.runPost`` at each request, here once at start-up)
    restore_enabled: bool = True
    #: ``zookeeper.admin.rateLimiterIntervalInMS`` (3.9; ``Integer.parseInt``, default 300000)
    rate_limiter_interval: int = 300_000
    #: ``zookeeper.IPAuthenticationProvider.usexforwardedfor`` (``Boolean.getBoolean``)
    use_x_forwarded_for: bool = False
    #: ``zookeeper.admin.needClientAuth`` (3.9, ``Boolean.getBoolean``): HTTPS clients must
    #: present a certificate the ``ssl.quorum.*`` trust store accepts
    need_client_auth: bool = False

    @property
    def zk39(self) -> bool:
        return release.is_39(self.zookeeper_version)

    @classmethod
    def from_config(cls, config: ServerConfig) -> AdminSettings:
        p = config.get_property
        props = config.properties
        return cls(
            enabled=config.admin_server_enabled,
            address=p("zookeeper.admin.serverAddress") or DEFAULT_ADDRESS,
            port=get_integer(props, "zookeeper.admin.serverPort", DEFAULT_PORT),
            idle_timeout_ms=get_integer(props, "zookeeper.admin.idleTimeout", DEFAULT_IDLE_TIMEOUT),
            command_url=p("zookeeper.admin.commandURL") or DEFAULT_COMMAND_URL,
            force_https=get_boolean(props, "zookeeper.admin.forceHttps"),
            port_unification=get_boolean(props, "zookeeper.admin.portUnification"),
            zookeeper_version=config.zookeeper_version,
            snapshot_enabled=parse_boolean(props.get("zookeeper.admin.snapshot.enabled", "true")),
            restore_enabled=parse_boolean(props.get("zookeeper.admin.restore.enabled", "true")),
            rate_limiter_interval=_parse_int(
                props.get("zookeeper.admin.rateLimiterIntervalInMS", "300000"), 300_000
            ),
            use_x_forwarded_for=get_boolean(
                props, "zookeeper.IPAuthenticationProvider.usexforwardedfor"
            ),
            need_client_auth=release.is_39(config.zookeeper_version)
            and get_boolean(props, "zookeeper.admin.needClientAuth"),
        )


def _micros_to_millis(interval: int) -> int:
    """``TimeUnit.MICROSECONDS.toMillis``: Java's long division, towards zero."""
    return -(-interval // 1000) if interval < 0 else interval // 1000


def _parse_int(text: str, default: int) -> int:
    # Commands' static Integer.parseInt: a bad value fails ZooKeeper's class initialisation
    # (no AdminServer command works); trizk keeps the default instead.
    try:
        return int(text.strip()) if text.strip().lstrip("+-").isdigit() else default
    except ValueError:
        return default


# -- what the commands read besides the status view -----------------------------------------


@dataclass(frozen=True, slots=True)
class AdminContext:
    """Facts the four-letter words do not print but some commands return."""

    #: wall-clock ms minus the monotonic ms the server's expiry queues use (``dump`` answers
    #: the raw monotonic bucket times, as ``ExpiryQueue.getExpiryMap``).
    wall_minus_monotonic_ms: int = 0
    #: (zxid, mtime in s) of the last snapshot taken or loaded (``SnapshotInfo``), or None.
    last_snapshot: tuple[int, int] | None = None
    #: ``system_properties`` (sorted on output, as ZooKeeper's TreeMap).
    system_properties: Mapping[str, str] = field(default_factory=dict)


# -- authentication (3.9) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuthRequest:
    """``AuthRequest``: the permission (``ZooDefs.Perms``) needed on the node at ``path``."""

    permission: int
    path: str


#: ``new AuthRequest(ZooDefs.Perms.ALL, ROOT_PATH)``: what ``snapshot`` and ``restore`` ask
ALL_ON_ROOT = AuthRequest(int(Perms.ALL), "/")


async def _no_x509_subject(chain: Sequence[bytes]) -> str | None:
    """No x509 provider trust manager: no chain authenticates."""
    return None


@dataclass(frozen=True, slots=True)
class AdminAuth:
    """What ``Commands.runCommand`` consults to authenticate and authorize a command: the
    providers (the server's :class:`~trizk.server.auth.acl.AuthConfig`) and a node's ACL."""

    config: aclmod.AuthConfig
    #: the ACL of a node, or None when it does not exist
    acl_of: Callable[[str], Sequence[r.ACL] | None]
    #: ``X509AuthenticationProvider.handleAuthentication(certChain)``: the subject of a client
    #: chain (DER, leaf first) its trust manager accepts, or None. That trust manager is
    #: ``X509Util.createTrustManager`` of the ``ssl.*`` trust store *with* ``ssl.crl`` /
    #: ``ssl.ocsp`` (ZooKeeper 3.9.3's provider constructor), so the judgement may fetch CRLs
    #: and ask OCSP responders: awaitable, run by the shell.
    x509_subject: Callable[[Sequence[bytes]], Awaitable[str | None]] = _no_x509_subject


def admin_ids(
    auth_info: str,
    remote_ip: str,
    config: aclmod.AuthConfig,
    *,
    x509_subject: str | None = None,
) -> list[aclmod.Id] | None:
    """``Commands.handleAuthentication``: the ``Authorization`` header ``<scheme>
    [<credentials>]`` (split on single spaces as Java's ``String.split(" ")``: one or two
    parts) handed to the scheme's provider -- ``digest user:password``, ``ip`` (the client's
    address), ``x509`` (the client certificate of an HTTPS connection). None is
    AuthFailedException ("Not authenticated")."""
    parts = java_split(auth_info, " ")
    if len(parts) not in (1, 2):
        return None
    scheme = parts[0]
    auth = parts[1].encode("utf-8") if len(parts) == 2 else None
    ids = aclmod.authenticate(scheme, auth, remote_ip, config=config, x509_subject=x509_subject)
    return ids or None


def _client_ip(request: HttpRequest, use_x_forwarded_for: bool) -> str:
    # IPAuthenticationProvider.getClientIPAddress: the first X-Forwarded-For entry when
    # zookeeper.IPAuthenticationProvider.usexforwardedfor is set, else getRemoteAddr.
    forwarded = request.header("X-Forwarded-For") if use_x_forwarded_for else None
    if forwarded is None:
        return request.remote_ip
    tokens = [t for t in forwarded.split(",") if t]
    return tokens[0].strip() if tokens else request.remote_ip


async def check_auth(
    name: str,
    wanted: AuthRequest,
    auth_info: str | None,
    client_ip: str,
    auth: AdminAuth,
    peer_certs: Sequence[bytes] = (),
) -> tuple[int, dict[str, Any]] | None:
    """``Commands.runCommand``'s auth step: None when the caller may run the command, else
    the status and JSON object ZooKeeper 3.9 answers (401 "Auth info is missing for the
    command" / "Not authenticated", 403 "Not authorized", 500 "Error occurred during auth"
    when the node is missing). ``name`` as asked. The x509 provider (:attr:`AdminAuth.x509_subject`)
    is consulted only when the header names the ``x509`` scheme and that provider is
    registered, as ``ProviderRegistry.getServerProvider(schema)`` picks one provider."""
    if auth_info is None:
        log.warning("Auth info is missing for command")
        return 401, _to_map(name, "Auth info is missing for the command", [])
    ip = aclmod.java_host_address(client_ip) if client_ip else client_ip
    subject: str | None = None
    if peer_certs and auth.config.x509 and java_split(auth_info, " ")[:1] == ["x509"]:
        subject = await auth.x509_subject(peer_certs)
    ids = admin_ids(auth_info, ip, auth.config, x509_subject=subject)
    if ids is None:
        return 401, _to_map(name, "Not authenticated", [])
    node_acl = auth.acl_of(wanted.path)
    if node_acl is None:  # NoNodeException: the catch-all branch
        log.warning("Error occurred during auth for command: no node %s", wanted.path)
        return 500, _to_map(name, "Error occurred during auth", [])
    # the ids carry the server's providers (x509 and sasl ACLs match only when registered)
    if not aclmod.check(node_acl, wanted.permission, aclmod.AuthInfo(auth.config, ids)):
        return 403, _to_map(name, "Not authorized", [])
    return None


class RateLimiter:
    """``org.apache.zookeeper.server.util.RateLimiter``: ``rate`` calls per interval; the
    count is refilled by the first call more than ``interval_ms`` after the last refill
    (the limiter is created full, and its clock starts at creation). Times in ms, passed
    in."""

    def __init__(self, rate: int, interval_ms: int, now_ms: int) -> None:
        self.rate = rate
        self.interval_ms = interval_ms
        self.last_reset = now_ms
        self.remained = rate

    def allow(self, now_ms: int) -> bool:
        if now_ms > self.last_reset + self.interval_ms:
            self.remained = self.rate
            self.last_reset = now_ms
        if self.remained > 0:
            self.remained -= 1
            return True
        return False


# -- the commands ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    """One ``CommandBase``: names (primary first), ``serverRequired``, the shared 4lw side
    effect (applied by the shell before answering), and the members builder."""

    names: tuple[str, ...]
    build: Callable[[StatusView, AdminContext, Mapping[str, str]], Members]
    server_required: bool = True
    effect: str | None = None
    #: ``Command.getAuthRequest()`` (3.9): the permission the caller needs on a node
    auth: AuthRequest | None = None
    #: registered by ZooKeeper 3.9 only
    since_39: bool = False
    #: a ``PostCommand`` (3.9): run on POST with the body as its input; its ``runGet``
    #: returns null, which Jetty answers 500
    post: bool = False

    @property
    def primary(self) -> str:
        return self.names[0]


def _client_response(view: StatusView) -> Members:
    # ServerStats.getClientResponseStats (BufferStats): -1 until a response was sent.
    m = view.metrics
    return [
        ("last_buffer_size", m.get("last_client_response_size", -1)),
        ("min_buffer_size", m.get("min_client_response_size", -1)),
        ("max_buffer_size", m.get("max_client_response_size", -1)),
    ]


def _remote(c: status.ConnectionInfo) -> str:
    # Jackson's InetSocketAddressSerializer: "127.0.0.1:5000", "[0:0:0:0:0:0:0:1]:5000".
    return java_socket_address(c.host, c.port).lstrip("/")


def _connection(c: status.ConnectionInfo, brief: bool) -> dict[str, Any]:
    # ServerCnxn.getConnectionInfo(brief)
    info: dict[str, Any] = {
        "remote_socket_address": _remote(c),
        "interest_ops": c.interest_ops,
        "outstanding_requests": c.queued,
        "packets_received": c.received,
        "packets_sent": c.sent,
    }
    if not brief:
        info.update(
            session_id=c.session_id,
            last_operation=c.last_operation,
            established=c.established_ms,
            session_timeout=c.session_timeout,
            last_cxid=c.last_cxid,
            last_zxid=c.last_zxid,
            last_response_time=c.last_response_ms,
            last_latency=c.last_latency,
            min_latency=c.min_latency,
            avg_latency=c.avg_latency,
            max_latency=c.max_latency,
        )
    return info


def _server_stats(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    # SrvrCommand; "server_stats" is ServerStats by Jackson (getter order, snake_case).
    lat = view.latency
    stats = {
        "packets_sent": view.packets_sent,
        "packets_received": view.packets_received,
        "fsync_threshold_exceed_count": view.metrics.get("fsync_threshold_exceed_count", 0),
        "client_response_stats": dict(_client_response(view)),
        "data_dir_size": view.data_dir_size,
        "log_dir_size": view.log_dir_size,
        "provider_null": False,
        "server_state": view.server_state,
        "last_processed_zxid": view.last_zxid,
        "outstanding_requests": view.outstanding_requests,
        "avg_latency": lat.avg,
        "max_latency": lat.max,
        "min_latency": lat.shown_min,
        "num_alive_client_connections": len(view.connections),
        "auth_failed_count": view.metrics.get("auth_failed_count", 0),
        "non_mtlsremote_conn_count": view.metrics.get("non_mtls_remote_conn_count", 0),
        "non_mtlslocal_conn_count": view.metrics.get("non_mtls_local_conn_count", 0),
        "uptime": view.uptime_ms,
    }
    return [
        ("version", status.server_version(view)),
        ("read_only", view.read_only),
        ("server_stats", stats),
        ("client_response", dict(_client_response(view))),
        ("node_count", view.node_count),
    ]


def _stats(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    return [
        *_server_stats(view, ctx, kw),
        ("connections", [_connection(c, True) for c in view.connections]),
        ("secure_connections", []),
    ]


def _configuration(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    # ZooKeeperServerConf.toMap (standalone)
    cfg = view.config
    return [
        ("client_port", view.client_port),
        ("data_dir", view.snap_dir),
        ("data_log_dir", view.log_dir),
        ("tick_time", cfg.tick_time),
        ("max_client_cnxns", cfg.max_client_cnxns),
        ("min_session_timeout", cfg.min_session_timeout),
        ("max_session_timeout", cfg.max_session_timeout),
        ("server_id", 0),
        ("client_port_listen_backlog", -1),
    ]


def _dump(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    # SessionTrackerImpl.getSessionExpiryMap: bucket (monotonic ms) -> session ids;
    # DataTree.getEphemerals: every session that ever owned an ephemeral.
    buckets: dict[str, list[int]] = {}
    # a learner's expiry map is its local sessions' only (LearnerSessionTracker); a leader's,
    # its local sessions' and then its global ones' (LeaderSessionTracker)
    tracked = list(view.local_sessions or ())
    if view.learner_sessions is None:
        tracked += view.sessions
    for s in tracked:
        key = str(s.expire_at_ms - ctx.wall_minus_monotonic_ms)
        buckets.setdefault(key, []).append(s.session_id)
    ephemerals = {
        str(s.session_id): list(s.ephemerals or ())
        for s in view.sessions
        if s.ephemerals is not None
    }
    return [
        ("expiry_time_to_session_ids", buckets),
        ("session_id_to_ephemeral_paths", ephemerals),
    ]


def _environment(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    return [("zookeeper.version", status.server_version(view)), *view.environment]


def _last_snapshot(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    zxid, stamp = ctx.last_snapshot if ctx.last_snapshot is not None else (-1, -1)
    return [("zxid", java_hex(zxid)), ("timestamp", stamp)]


def _set_trace_mask(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    mask = parse_trace_mask(kw)
    if isinstance(mask, str):
        return [("error", mask)]
    return [("tracemask", mask)]


def parse_trace_mask(kw: Mapping[str, str]) -> int | str:
    """``SetTraceMaskCommand``'s argument: the long, or the error text."""
    raw = kw.get("traceMask")
    if raw is None:
        return "setTraceMask requires long traceMask argument"
    n = parse_long(raw)  # Long.parseLong
    if n is None:
        return f"setTraceMask requires long traceMask argument, got {raw}"
    return n


def _watch_summary(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    # DataTree.getWatchesSummary (data watches only, as wchs).
    connections, paths, total = status.watch_summary(view)
    return [
        ("num_connections", connections),
        ("num_paths", paths),
        ("num_total_watches", total),
    ]


def _watches(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    by_session = {str(sid): list(ps) for sid, ps in view.data_watches if ps}
    return [("session_id_to_watched_paths", by_session)]


def _watches_by_path(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    return [("path_to_session_ids", status.watches_by_path(view))]


def _nothing(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
    return []


def _fixed(*members: tuple[str, Any]) -> Callable[..., Members]:
    def build(view: StatusView, ctx: AdminContext, kw: Mapping[str, str]) -> Members:
        return list(members)

    return build


def _simple(
    fn: Callable[[StatusView, AdminContext], Members],
) -> Callable[[StatusView, AdminContext, Mapping[str, str]], Members]:
    return lambda view, ctx, kw: fn(view, ctx)


#: ``Commands``' static block, in registration order (names as in 3.8.0's constructors).
COMMANDS: tuple[Command, ...] = (
    Command(("connection_stat_reset", "crst"), _nothing, effect="crst"),
    Command(("configuration", "conf", "config"), _configuration),
    Command(
        ("connections", "cons"),
        _simple(
            lambda v, c: [
                ("connections", [_connection(x, False) for x in v.connections]),
                ("secure_connections", []),
            ]
        ),
    ),
    Command(("hash",), _simple(lambda v, c: [("digests", _digests(v))])),
    Command(
        ("dirs",),
        _simple(lambda v, c: [("datadir_size", v.data_dir_size), ("logdir_size", v.log_dir_size)]),
    ),
    Command(("dump",), _dump),
    Command(("environment", "env", "envi"), _environment, server_required=False),
    Command(
        ("get_trace_mask", "gtmk"),
        _simple(lambda v, c: [("tracemask", v.trace_mask)]),
        server_required=False,
    ),
    Command(
        ("initial_configuration", "icfg"),
        _simple(lambda v, c: [("initial_configuration", v.config.initial_config)]),
    ),
    Command(("is_read_only", "isro"), _simple(lambda v, c: [("read_only", v.read_only)])),
    Command(("last_snapshot", "lsnp"), _last_snapshot),
    # LeaderCommand: not a QuorumZooKeeperServer -> an "error" member.
    Command(("leader", "lead"), _fixed(("error", "server is not initialized"))),
    Command(
        ("monitor", "mntr"),
        _simple(lambda v, c: list(status.mntr_values(v))),
        server_required=False,
    ),
    Command(("observer_connection_stat_reset", "orst"), _nothing),
    Command(("ruok",), _nothing),
    Command(("set_trace_mask", "stmk"), _set_trace_mask, server_required=False, effect="stmk"),
    Command(("server_stats", "srvr"), _server_stats),
    Command(("stats", "stat"), _stats),
    Command(("stat_reset", "srst"), _nothing, effect="srst"),
    Command(("observers", "obsr"), _fixed(("synced_observers", 0), ("observers", []))),
    Command(
        ("system_properties", "sysp"),
        _simple(lambda v, c: sorted(c.system_properties.items())),
        server_required=False,
    ),
    Command(("voting_view",), _fixed(("current_config", {}))),
    Command(("watches", "wchc"), _watches),
    Command(("watches_by_path", "wchp"), _watches_by_path),
    Command(("watch_summary", "wchs"), _watch_summary),
    Command(("zabstate",), _fixed(("voting", False), ("zabstate", "")), server_required=False),
    # 3.9's SnapshotCommand: run by the shell (answer_request), which takes the snapshot
    Command(("snapshot", "snap"), _nothing, auth=ALL_ON_ROOT, since_39=True),
    # 3.9's RestoreCommand (a PostCommand): run by the shell (answer_request), which hands the
    # body to the server's restore
    Command(("restore", "rest"), _nothing, auth=ALL_ON_ROOT, since_39=True, post=True),
)


def _digests(view: StatusView) -> list[dict[str, Any]]:
    # DataTree.getDigestLog: ZxidDigest beans, in the order ZooKeeper 3.8.0's Jackson writes
    # them (zxid, digest, digest_version; checked against the live server).
    return [{"zxid": z, "digest": d, "digest_version": 2} for z, d in view.digest_log]


_BY_NAME: dict[str, Command] = {n: c for c in COMMANDS for n in c.names}


def lookup(name: str, zk39: bool = False) -> Command | None:
    """The command registered under ``name`` (primary name or alias) in that release."""
    command = _BY_NAME.get(name)
    if command is not None and command.since_39 and not zk39:
        return None
    return command


def command_links(command_url: str, zk39: bool = False) -> str:
    """``CommandServlet`` without a command: every primary name, sorted, as HTML lines."""
    names = sorted(c.primary for c in COMMANDS if zk39 or not c.since_39)
    return "".join(f'<a href="{command_url}/{c}">{c}</a>\n<br/>\n' for c in names)


def run_command(
    name: str,
    view: StatusView | None,
    ctx: AdminContext,
    kwargs: Mapping[str, str] | None = None,
    *,
    zk39: bool = False,
) -> dict[str, Any]:
    """``Commands.runCommand`` + ``CommandResponse.toMap``: the JSON object for ``name``.
    ``view`` is None while no server runs. Pure: the side effect (``Command.effect``) is the
    caller's."""
    kw = kwargs or {}
    command = lookup(name, zk39)
    if command is None:
        return _to_map(name, f"Unknown command: {name}", [])
    if command.server_required and (view is None or not view.serving):
        return _to_map(name, status.NOT_SERVING, [])
    if view is None:
        raise ValueError(f"{name} needs a view")
    return _to_map(command.primary, None, command.build(view, ctx, kw))


def _to_map(command: str, error: str | None, data: Members) -> dict[str, Any]:
    # CommandResponse.toMap: copy(data); put(command); put(error); putAll(data) -- a member
    # named "error" keeps its place and its value.
    out: dict[str, Any] = dict(data)
    out["command"] = command
    out["error"] = error
    out.update(data)
    return out


# -- Jackson's pretty printer ---------------------------------------------------------------

_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_JSON_ESCAPES["\t"] = "\\t"


def _json_string(s: str) -> str:
    out = []
    for ch in s:
        esc = _JSON_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _json_value(v: Any, depth: int) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        # Jackson writes non-finite doubles as strings ("NaN") unless asked otherwise.
        text = java_double(v)
        return text if math.isfinite(v) else f'"{text}"'
    if isinstance(v, str):
        return _json_string(v)
    if isinstance(v, Mapping):
        if not v:
            return "{ }"
        pad = "  " * (depth + 1)
        members = ",\n".join(
            f"{pad}{_json_string(str(k))} : {_json_value(x, depth + 1)}" for k, x in v.items()
        )
        return "{\n" + members + "\n" + "  " * depth + "}"
    if isinstance(v, (list, tuple, set, frozenset)):
        if not v:
            return "[ ]"
        # DefaultPrettyPrinter: arrays inline (FixedSpaceIndenter), no nesting level added.
        return "[ " + ", ".join(_json_value(x, depth) for x in v) + " ]"
    raise TypeError(f"not JSON: {type(v).__name__}")


def jackson_json(obj: Mapping[str, Any]) -> str:
    """``ObjectMapper`` with ``INDENT_OUTPUT`` (DefaultPrettyPrinter), no trailing newline."""
    return _json_value(obj, 0)


# -- HTTP routing (pure) --------------------------------------------------------------------


def route(method: str, target: str, command_url: str, zk39: bool = False) -> HttpAnswer:
    """What ``JettyAdminServer`` answers for ``method target``, except a command's JSON body,
    which the shell fills in (``answer.command`` set): pure routing, no server state.
    ZooKeeper 3.9's ``CommandServlet`` also serves POST (``doPost``: the body is the
    command's input), and Jetty 9.4.57 answers other methods 405 with an empty body."""
    raw_path, _, query = target.partition("?")
    path = urllib.parse.unquote(raw_path, errors="replace")
    if method == "TRACE":
        return HttpAnswer(403, (), b"")
    base = command_url.rstrip("/")
    if path != base and not path.startswith(base + "/"):
        return error_page(404, path, "Not Found")
    allowed = ("GET", "HEAD", "POST") if zk39 else ("GET", "HEAD")
    if method not in allowed:
        if zk39:
            return HttpAnswer(405, (), b"")
        return error_page(405, path, "HTTP method " + method + " is not supported by this URL")
    rest = path[len(base) + 1 :]
    if not rest:
        return HttpAnswer(200, (), command_links(base, zk39).encode())
    if method == "POST":
        # doPost reads no query parameters: the command gets the body instead
        return HttpAnswer(200, (("Content-Type", "application/json"),), b"", rest, {})
    kwargs: dict[str, str] = {}
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
        kwargs.setdefault(k, v)  # getParameterMap values[0]
    return HttpAnswer(200, (("Content-Type", "application/json"),), b"", rest, kwargs)


# -- the Trio shell -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AdminHooks:
    """What the server hands the AdminServer: the status view (None while not
    serving), the four-letter words' side effects (``crst``/``srst``/``stmk`` with its 8-byte
    argument), and the last snapshot file taken or loaded."""

    view: Callable[[], StatusView | None]
    act: Callable[[str, bytes], None]
    last_snapshot: Callable[[], Path | None] = lambda: None
    #: The server's system properties (its config's ``properties``).
    properties: Callable[[], Mapping[str, str]] = dict
    #: 3.9's authenticated commands: the providers and the tree's ACLs (None: every
    #: authenticated command answers "Error occurred during auth")
    auth: AdminAuth | None = None
    #: take a snapshot now (``ZooKeeperServer.takeSnapshot``): its file, or None on failure
    take_snapshot: Callable[[], Awaitable[Path | None]] | None = None
    #: whether snapshots carry 3.9's lastProcessedZxid trailer
    #: (``isSerializeLastProcessedZxidEnabled``)
    last_zxid_trailer: Callable[[], bool] = lambda: False
    #: replace the server's state by the snapshot stream given
    #: (``ZooKeeperServer.restoreFromSnapshot``): the restored tree's last processed zxid;
    #: raises on a stream that is not a snapshot (None: the server cannot restore)
    restore: Callable[[bytes], Awaitable[int]] | None = None
    #: the server's ServerMetrics (the commands' counters), or None
    metrics: ServerMetrics | None = None


def _newest_snapshot(snap_dir: str | None) -> Path | None:
    # Before the server takes its first snapshot, the one it loaded (or wrote on an empty
    # data dir, as ZooKeeper does) is the newest in the directory.
    snaps = files.list_snapshots(Path(snap_dir)) if snap_dir else []
    return snaps[-1][1] if snaps else None


def _context(hooks: AdminHooks, name: str, snap_dir: str | None = None) -> AdminContext:
    last: tuple[int, int] | None = None
    if name in ("last_snapshot", "lsnp"):
        path = hooks.last_snapshot() or _newest_snapshot(snap_dir)
        if path is not None:
            try:
                last = (zxid_from_name(path.name, "snapshot"), int(path.stat().st_mtime))
            except OSError:
                last = None
    props: dict[str, str] = {}
    if name in ("system_properties", "sysp"):
        props = _system_properties(hooks.properties())
    wall_minus_mono = int(time.time() * 1000) - int(trio.current_time() * 1000)
    return AdminContext(wall_minus_mono, last, props)


def _system_properties(config_properties: Mapping[str, str]) -> dict[str, str]:
    props = dict(status.process_environment())
    props.update(
        {
            "file.encoding": "UTF-8",
            "file.separator": os.sep,
            "line.separator": "\n",
            "path.separator": os.pathsep,
        }
    )
    props.update(config_properties)
    return props


def answer(
    hooks: AdminHooks, method: str, target: str, command_url: str, zk39: bool = False
) -> HttpAnswer:
    """Route one request and, for a command, run it against a fresh view."""
    a = route(method, target, command_url, zk39)
    if a.command is None:
        return a
    name = a.command
    view = hooks.view()
    command = lookup(name, zk39)
    if command is not None and command.effect is not None:
        serving = view is not None and view.serving
        if serving or not command.server_required:
            if command.effect == "stmk":
                mask = parse_trace_mask(a.kwargs)
                if isinstance(mask, int):
                    hooks.act("stmk", (mask & (2**64 - 1)).to_bytes(8, "big"))
            else:
                hooks.act(command.effect, b"")
    ctx = _context(hooks, name, view.snap_dir if view is not None else None)
    body = jackson_json(run_command(name, view, ctx, a.kwargs, zk39=zk39))
    return HttpAnswer(a.status, a.headers, body.encode())


_JSON = (("Content-Type", "application/json"),)


def _json_answer(status_code: int, obj: Mapping[str, Any]) -> HttpAnswer:
    return HttpAnswer(status_code, _JSON, jackson_json(obj).encode())


@dataclass(slots=True)
class _Limiters:
    """The commands' rate limiters (static in ZooKeeper's ``Commands``: one per server)."""

    snapshot: RateLimiter
    restore: RateLimiter


async def answer_request(
    hooks: AdminHooks,
    settings: AdminSettings,
    limiters: _Limiters,
    request: HttpRequest,
) -> HttpAnswer:
    """ZooKeeper 3.9's ``CommandServlet`` (``doGet``/``doPost`` → ``Commands.runGetCommand``/
    ``runPostCommand``): the command's auth step (:func:`check_auth`), then the command; the
    3.8 commands answer as :func:`answer` does."""
    a = route(request.method, request.target, settings.command_url, zk39=True)
    if a.command is None:
        return a
    name = a.command
    command = lookup(name, zk39=True)
    view = hooks.view()
    serving = view is not None and view.serving
    if command is None or (command.server_required and not serving):
        if command is None:
            log.warning("Unknown command")
        return answer(hooks, "GET", request.target, settings.command_url, zk39=True)
    if command.auth is not None:
        if hooks.auth is None:
            return _json_answer(500, _to_map(name, "Error occurred during auth", []))
        refused = await check_auth(
            name,
            command.auth,
            request.header("Authorization"),
            _client_ip(request, settings.use_x_forwarded_for),
            hooks.auth,
            request.peer_certs,
        )
        if refused is not None:
            return _json_answer(*refused)
    is_snapshot = command.primary == "snapshot"
    if (request.method == "POST") != command.post:
        # GetCommand.runPost / PostCommand.runGet return null: the servlet's
        # NullPointerException is Jetty's 500 page
        return error_page(
            500, urllib.parse.unquote(request.target.partition("?")[0]), "Server Error"
        )
    if command.primary == "restore":
        return await _restore(hooks, settings, limiters, request.body)
    if is_snapshot:
        return await _snapshot(hooks, settings, limiters, a.kwargs)
    return answer(hooks, request.method, request.target, settings.command_url, zk39=True)


async def _snapshot(
    hooks: AdminHooks, settings: AdminSettings, limiters: _Limiters, kwargs: Mapping[str, str]
) -> HttpAnswer:
    """``SnapshotCommand.runGet``: take a snapshot now and send it as the body (``streaming``
    unless ``?streaming=`` is not "true"), its zxid and size as the ``last_zxid`` and
    ``snapshot_size`` headers."""
    response = _to_map("snapshot", None, [])
    if not settings.snapshot_enabled:
        log.warning("Snapshot command is disabled")
        return _json_answer(503, response)
    if hooks.take_snapshot is None or not hooks.last_zxid_trailer():
        log.warning(
            "Snapshot command requires serializeLastProcessedZxidEnable flag is set to true"
        )
        return _json_answer(500, response)
    if not limiters.snapshot.allow(int(trio.current_time() * 1000)):
        log.warning("Snapshot request was rate limited")
        if hooks.metrics is not None:
            hooks.metrics.snapshot_rate_limited_count += 1
        return _json_answer(429, response)
    streaming = True
    if "streaming" in kwargs:
        streaming = parse_boolean(kwargs["streaming"])
    path = await hooks.take_snapshot()
    if path is None:
        log.warning("Exception occurred when taking the snapshot via the snapshot admin command")
        if hooks.metrics is not None:
            hooks.metrics.snapshot_error_count += 1
        return _json_answer(500, response)
    try:
        data = await trio.to_thread.run_sync(path.read_bytes)
    except OSError as e:
        log.warning(
            "Exception occurred when taking the snapshot via the snapshot admin command: %s", e
        )
        if hooks.metrics is not None:
            hooks.metrics.snapshot_error_count += 1
        return _json_answer(500, response)
    zxid = zxid_from_name(path.name, "snapshot")
    headers = (("last_zxid", f"0x{zxid:x}"), ("snapshot_size", str(len(data))))
    if not data:
        log.warning("Snapshot file %s is empty", path)
        return HttpAnswer(500, headers + _JSON, jackson_json(response).encode())
    if streaming:
        return HttpAnswer(200, (*headers, ("Content-Type", "application/octet-stream")), data)
    return HttpAnswer(200, headers + _JSON, jackson_json(response).encode())


async def _restore(
    hooks: AdminHooks, settings: AdminSettings, limiters: _Limiters, body: bytes
) -> HttpAnswer:
    """``RestoreCommand.runPost``: the feature flag (503), the lastProcessedZxid trailer
    (500), the rate limit (429, counted), then ``restoreFromSnapshot`` of the request body:
    ``{"last_zxid": <the restored tree's last processed zxid>}``, or 500 (counted) when the
    body is not a snapshot. Jetty always hands the servlet an input stream, empty or not, so
    the 400 for a null one never happens; an empty body is a failed restore."""
    response = _to_map("restore", None, [])
    if not settings.restore_enabled:
        log.warning("Restore command is disabled")
        return _json_answer(503, response)
    if hooks.restore is None or not hooks.last_zxid_trailer():
        log.warning("Restore command requires serializeLastProcessedZxidEnable flag is set to true")
        return _json_answer(500, response)
    metrics = hooks.metrics
    if not limiters.restore.allow(int(trio.current_time() * 1000)):
        log.warning("Restore request was rate limited")
        if metrics is not None:
            metrics.restore_rate_limited_count += 1
        return _json_answer(429, response)
    start = trio.current_time()
    try:
        last_zxid = await hooks.restore(body)
    except Exception as e:  # RestoreCommand catches every Exception of the restore
        log.warning("Exception occurred when restore snapshot via the restore command: %s", e)
        if metrics is not None:
            metrics.restore_error_count += 1
        return _json_answer(500, response)
    if metrics is not None:
        metrics.restore_time.add(int((trio.current_time() - start) * 1000))
    return _json_answer(200, _to_map("restore", None, [("last_zxid", last_zxid)]))


async def serve_admin(
    settings: AdminSettings,
    hooks: AdminHooks,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the AdminServer until cancelled; ``task_status.started(port)`` with the bound port,
    or ``None`` when it is disabled or its port cannot be bound (logged; the server goes on)."""
    if not settings.enabled:
        task_status.started(None)
        return
    where = (
        f"address {settings.address}, port {settings.port} and command URL {settings.command_url}"
    )

    prepare: Prepare | None = None
    if settings.force_https or settings.port_unification:
        prepare = _https(settings, hooks.properties())
        if prepare is None:
            task_status.started(None)
            return

    def respond(method: str, target: str) -> HttpAnswer:
        return answer(hooks, method, target, settings.command_url)

    now_ms = int(trio.current_time() * 1000)
    limiters = _Limiters(
        # SnapshotCommand's RateLimiter is built with TimeUnit.MICROSECONDS: the interval
        # property is read as microseconds (300000 -> 300 ms), as ZooKeeper 3.9.3 does;
        # RestoreCommand's with MILLISECONDS (300000 -> 5 minutes). Both start full.
        RateLimiter(1, _micros_to_millis(settings.rate_limiter_interval), now_ms),
        RateLimiter(1, settings.rate_limiter_interval, now_ms),
    )

    async def respond_request(request: HttpRequest) -> HttpAnswer:
        return await answer_request(hooks, settings, limiters, request)

    def started(port: int) -> None:
        log.info(
            "Started AdminServer on address %s, port %d and command URL %s",
            settings.address,
            port,
            settings.command_url,
        )

    await serve_http(
        settings.address,
        settings.port,
        respond,
        settings.idle_timeout_ms,
        on_error=f"Problem starting AdminServer on {where}",
        on_started=started,
        logger=log,
        prepare=prepare,
        respond_request=respond_request if settings.zk39 else None,
        task_status=task_status,
    )


#: SecureRequestCustomizer(stsMaxAge = JettyAdminServer.DEFAULT_STS_MAX_AGE, includeSubDomains)
_STS = ("Strict-Transport-Security", "max-age=86400; includeSubDomains")
#: how long a connection may take to send its first byte or finish its TLS handshake
_HANDSHAKE_TIMEOUT = 10.0


def _jvm_revocation(props: Mapping[str, str]) -> RevocationPolicy:
    """The revocation checks (CRL, OCSP) of the JVM's *default* PKIX trust manager, which
    Jetty's ``SslContextFactory`` judges admin client certificates with: off, until
    ``X509Util.createTrustManager`` is called with ``crlEnabled || ocspEnabled`` -- it then
    sets ``com.sun.net.ssl.checkRevocation`` and ``com.sun.security.enableCRLDP`` (and the
    ``ocsp.enable`` security property with OCSP) process-wide. ``ssl.crl`` / ``ssl.ocsp`` do
    so (the secure client port's and X509AuthenticationProvider's trust managers): ZooKeeper
    3.9.3 with ``ssl.crl=true`` refuses a revoked admin client certificate in the handshake,
    measured (tests/compat/test_revocation_oracle.py). ``ssl.quorum.crl`` would too once the
    quorum's trust manager exists (``sslQuorum``): not modelled (unmeasured)."""
    from trizk.server.shell import tls

    return tls.revocation_of(props)


def _https(settings: AdminSettings, props: Mapping[str, str]) -> Prepare | None:
    """JettyAdminServer's TLS connector from the ``ssl.quorum.*`` key and trust stores (both
    required, as ``X509Util.loadKeyStore``/``loadTrustStore`` are both called), or None when
    they cannot be read: ZooKeeper then logs "Unable to start JettyAdminServer" and runs
    without an AdminServer (AdminServerFactory's DummyAdminServer), and so does trizk."""
    import dataclasses
    import datetime

    from cryptography.hazmat.primitives.serialization import Encoding

    from trizk.server.shell import tls
    from trizk.server.shell.tlsstream import OpenSSLServerStream

    try:
        base = tls.TLSSettings.from_properties(props, tls.QUORUM_PREFIX)
        if base.trust_store is None:
            raise tls.TLSConfigError(
                f"{tls.QUORUM_PREFIX}trustStore.location not specified: the AdminServer's "
                "HTTPS needs a trust store (JettyAdminServer loads both stores)"
            )
        # Jetty's SslContextFactory.Server asks for no client certificate, unless 3.9's
        # admin.needClientAuth (setNeedClientAuth) is set
        client_auth = "need" if settings.need_client_auth else "none"
        jvm = _jvm_revocation(props)
        server_tls = tls.server_context(
            dataclasses.replace(base, client_auth=client_auth, crl=jvm.crl, ocsp=jvm.ocsp)
        )
    except tls.TLSConfigError as e:
        log.warning("Unable to start JettyAdminServer: %s", e)
        return None
    assert base.key_store is not None and base.trust_store is not None
    log.info("Successfully loaded private key from %s", base.key_store.location)
    log.info("Successfully loaded certificate authority from %s", base.trust_store.location)
    unified = not settings.force_https

    async def prepare(
        stream: trio.SocketStream,
    ) -> tuple[trio.abc.Stream, list[tuple[str, str]], tuple[bytes, ...]] | None:
        first = b""
        try:
            with trio.fail_after(_HANDSHAKE_TIMEOUT):
                if unified:
                    first = await stream.receive_some(1)
                    if first[:1] != b"\x16":
                        return _Replay(stream, first), [], ()
                s = OpenSSLServerStream(stream, server_tls.context, first)
                await s.do_handshake()
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError) as e:
            log.debug("AdminServer TLS handshake failed: %s", e)
            with trio.CancelScope(shield=True):
                await stream.aclose()
            return None
        chain = s.peer_chain()
        if settings.need_client_auth:
            # Jetty's trust manager (the ssl.quorum.* trust store) judges the chain, with the
            # JVM-wide revocation checks when they are on (_jvm_revocation)
            refused = await server_tls.judge_client(chain, datetime.datetime.now(datetime.UTC))
            if refused is not None:
                log.warning("AdminServer TLS handshake refused: %s", refused)
                with trio.CancelScope(shield=True):
                    await s.aclose()
                return None
        return s, [_STS], tuple(c.public_bytes(Encoding.DER) for c in chain)

    return prepare


class _Replay(trio.abc.Stream):
    """A stream whose first bytes were already read (the port-unification sniff)."""

    def __init__(self, inner: trio.SocketStream, head: bytes) -> None:
        self._inner = inner
        self._head = head

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            return head
        return await self._inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._inner.aclose()
