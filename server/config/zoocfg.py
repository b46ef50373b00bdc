"""zoo.cfg parsing: text (or a path) in, a frozen :class:`ServerConfig` out.

Theory of operation
===================
Apache ZooKeeper reads ``zoo.cfg`` with ``java.util.Properties.load`` and then walks the
entries in ``QuorumPeerConfig.parseProperties``: a fixed set of keys fills typed fields, and
*every other key* ``k=v`` becomes the JVM system property ``zookeeper.k`` (this is how
``4lw.commands.whitelist``, ``globalOutstandingLimit``, ``extendedTypesEnabled`` or
``DigestAuthenticationProvider.superDigest`` reach the code that reads them). System
properties can also be given on the java command line (``-Dzookeeper.k=v``) and those win.

trizk mirrors that in three pure steps:

1. :func:`parse_properties` — the Java Properties line grammar (subset below) turns text into
   ``(line_no, key, value)`` entries; values are trimmed as ``parseProperties`` trims them.
2. :func:`config_from_entries` — the entries are sorted out against :data:`KEYS`, the single
   table that says which ZooKeeper keys trizk knows and whether it honours them. Keys with a
   typed field are parsed (strict integers, as ``Integer.parseInt``); every key without one
   becomes a property ``zookeeper.<key>`` in ``ServerConfig.properties`` (full names).
   Command-line properties (``-D name=value``) are merged over the file's.
3. Derived values are computed exactly as ZooKeeper does: ``dataLogDir`` defaults to
   ``dataDir``; session timeouts default to 2x / 20x ``tickTime`` (an explicit ``-1`` also means
   "default"); ``minSessionTimeout > maxSessionTimeout`` and ``tickTime=0`` are errors.

Quorum settings (``QuorumPeerConfig.setupQuorumPeerConfig``)
-----------------------------------------------------------
The ``server.N`` lines make a :class:`~trizk.quorum.verifier.QuorumVerifier` (parsed and
printed as ZooKeeper does, see that module). Then, as ZooKeeper:

* ``dataDir/myid`` is read if it is a file (first line, ``Long.parseLong``: "serverid X is not
  a number"), in standalone mode too; :func:`load_config` reads it, :func:`parse_config` takes
  its text as ``myid=``.
* The config is a quorum (``isDistributed``) when ``standaloneEnabled=false`` or there are at
  least two participants; one participant with ``standaloneEnabled=true`` (the default) is a
  standalone server. ``ServerConfig.quorum`` is ``None`` for a standalone server.
* ``setupClientPort``: a ``;[host:]port`` in this member's own line sets the client address
  (``clientPort`` may then be omitted; a different ``clientPort``/``clientPortAddress`` is an
  error); otherwise the member gets ``clientPort`` as a client address that is not printed.
* ``setupPeerType``: the servers list decides the role; a different ``peerType`` is only a
  warning ("Peer type from servers list (OBSERVER) doesn't match peerType (PARTICIPANT).
  Defaulting to servers list."), collected in ``ServerConfig.warnings`` with
  ``parseDynamicConfig``'s warnings about 2 or an even number of voters.
* ``checkValidity`` in quorum mode: "initLimit is not set", "syncLimit is not set", "myid file
  is missing"; and "My id N not in the peer list" (ZooKeeper: at start-up, exit code 1).
* ``electionAlg`` other than 3, an unknown ``peerType`` and a boolean other than true/false
  (``quorumListenOnAllIPs``, ``standaloneEnabled``, ``reconfigEnabled``) are errors with
  ZooKeeper's texts in any mode. ``cnxTimeout`` is the property ``zookeeper.cnxTimeout``.

Stricter than ZooKeeper: two listeners of the ensemble on one host:port (ZooKeeper only
rejects quorum port == election port of one member), the same sid written twice
(``server.1``/``server.01``), negative sids or myids, and negative init/sync limits are errors.
Looser: server line values are trimmed (QuorumMaj reads them untrimmed, so ``h:1:2 `` fails
there). The keys an ensemble member honours (``initLimit``, ``syncLimit``, ``electionAlg``,
``peerType``, ``quorumListenOnAllIPs``, ``standaloneEnabled``, ``server.N``) are typed fields
in :data:`KEYS`; :data:`QUORUM_KEYS` are parsed into them whatever their row says (so
``reconfigEnabled`` is read, and ``true`` is still named in the start-up warning). The other
quorum keys (``observerMasterPort``, ``localSessionsEnabled``, quorum SASL, ...)
are unsupported and named in that warning. ``group.``/``weight.`` keys make the ensemble a
hierarchical quorum (:class:`~trizk.quorum.verifier.QuorumHierarchical`). Server lines with
several addresses (``a:1:2|b:3:4``) parse only with the property
``zookeeper.multiAddress.enabled=true`` (``-D``, as ZooKeeper's system property: its zoo.cfg
key ``multiAddress.enabled`` alone does not allow them); the ``multiAddress.*`` keys set the
election's behaviour.

Dynamic reconfig (``reconfigEnabled``, ``dynamicConfigFile``; file texts in
:mod:`trizk.server.config.dynamic`): with ``dynamicConfigFile=<path>`` the membership keys
(``server.N``, ``group``, ``weight``) must be in that file ("parameter: server.1 must be in a
separate dynamic config file"), whose name's hex suffix is the configuration's version
(:func:`dynamic_entries`); ``<zoo.cfg>.dynamic.next`` is read as the last seen (proposed, not
activated) membership. :func:`load_config` reads both files.

Errors are :class:`ConfigError` carrying the line number (``None`` for a ``-D`` option or a
missing key) and the offending text. ZooKeeper logs ``Invalid config, exiting abnormally``
and exits with code 2 (``ExitCode.INVALID_CONFIG``); ``trizk-server`` does the same.

Java Properties subset (``java.util.Properties.load``)
------------------------------------------------------
* Lines end at ``\\n``, ``\\r`` or ``\\r\\n``. A line whose first non-blank character is ``#``
  or ``!`` is a comment; a blank line is skipped (blank = space, tab, form feed).
* A line ending in an odd number of backslashes continues on the next line; the next line's
  leading blanks are dropped. The logical line is reported under its first line number.
* The key runs to the first unescaped ``=``, ``:`` or blank; blanks around the separator are
  skipped, and one ``=`` or ``:`` after blanks is part of the separator (``k = v``, ``k: v``,
  ``k v`` are all ``k`` → ``v``).
* Escapes ``\\t \\n \\r \\f``, ``\\uXXXX``, and ``\\c`` → ``c`` for any other character.
* Files are read as UTF-8 (ZooKeeper's stream reader is ISO-8859-1; UTF-8 paths are the
  common case on Linux, and pure-ASCII files read the same either way).

Deliberate differences (each stricter than ZooKeeper, never looser)
-------------------------------------------------------------------
* A line with a key and no separator (``garbage``) is an error. Java reads it as the key with
  an empty value, which ZooKeeper then either rejects later (``tickTime`` → NumberFormatException
  on "") or silently turns into a useless system property — it is always a typo.
* ``clientPort`` must be set (> 0). ZooKeeper starts without any client listener when it is
  missing, which is useless for trizk (there is no ``secureClientPort``).
* Integer-valued properties (``jute.maxbuffer``, ``zookeeper.globalOutstandingLimit``) must be
  integers, read as ZooKeeper's ``Integer.getInteger`` reads them (``Integer.decode``: ``0x``,
  ``#`` and octal ``0`` prefixes); ZooKeeper silently falls back to the default on anything
  else. The Java grammars are :mod:`trizk.jute.javalang`'s.
* ``jute.maxbuffer`` written in zoo.cfg is honoured. In ZooKeeper the file key becomes
  ``zookeeper.jute.maxbuffer``, which the server never reads (only ``-Djute.maxbuffer`` works);
  trizk reads ``jute.maxbuffer`` first, then ``zookeeper.jute.maxbuffer``.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trizk.jute import DEFAULT_MAX_BUFFER, javalang
from trizk.quorum.verifier import (
    Address,
    LearnerType,
    QuorumConfigError,
    QuorumServer,
    QuorumVerifier,
    check_counts,
    java_host_string,
    parse_server,
)
from trizk.server.auth.quorumsasl import (
    DEFAULT_SERVICE_PRINCIPAL,
    LEARNER_CONTEXT,
    SERVER_CONTEXT,
    QuorumAuthSettings,
    threads_size,
)
from trizk.server.common import release

__all__ = [
    "DEFAULT_CLIENT_PORT",
    "DEFAULT_CNX_TIMEOUT",
    "DEFAULT_GLOBAL_OUTSTANDING_LIMIT",
    "DEFAULT_MAX_CLIENT_CNXNS",
    "DEFAULT_TICK_TIME",
    "FOUR_LETTER_WORDS",
    "KEYS",
    "QUORUM_KEYS",
    "ConfigError",
    "Entry",
    "ServerConfig",
    "Support",
    "config_from_entries",
    "dynamic_entries",
    "load_config",
    "parse_config",
    "parse_properties",
    "parse_property_option",
    "parse_whitelist",
    "read_myid",
    "version_from_filename",
]

#: ``ZooKeeperServer.DEFAULT_TICK_TIME`` (used when zoo.cfg has no tickTime).
DEFAULT_TICK_TIME = 3000
#: The conventional client port (zoo_sample.cfg); used by the development config.
DEFAULT_CLIENT_PORT = 2181
#: ``QuorumPeerConfig.maxClientCnxns`` default; 0 means unlimited.
DEFAULT_MAX_CLIENT_CNXNS = 60
#: ``ZooKeeperServer``: ``Integer.getInteger("zookeeper.globalOutstandingLimit", 1000)``.
DEFAULT_GLOBAL_OUTSTANDING_LIMIT = 1000
#: ``QuorumCnxManager``: ``Integer.getInteger("zookeeper.cnxTimeout", 5000)`` (ms).
DEFAULT_CNX_TIMEOUT = 5000


class ConfigError(ValueError):
    """A zoo.cfg (or ``-D``) problem. ``line_no`` is 1-based, ``None`` when no line applies."""

    def __init__(self, line_no: int | None, message: str) -> None:
        super().__init__(line_no, message)
        self.line_no = line_no
        self.message = message

    def __str__(self) -> str:
        if self.line_no is None:
            return self.message
        return f"line {self.line_no}: {self.message}"


class Support(enum.Enum):
    """How trizk treats a known ZooKeeper key."""

    #: Parsed into a typed ``ServerConfig`` field.
    FIELD = "field"
    #: Passed on as the property ``zookeeper.<key>`` and read by trizk.
    PROPERTY = "property"
    #: A ``QuorumPeerConfig`` field trizk ignores: reported in ``ServerConfig.unsupported``
    #: (not a property: ZooKeeper consumes it).
    UNSUPPORTED = "unsupported"
    #: A key ZooKeeper passes on as ``zookeeper.<key>`` that trizk does not read: reported in
    #: ``ServerConfig.unsupported`` and kept in ``properties``.
    UNSUPPORTED_PROPERTY = "unsupported property"


@dataclass(frozen=True, slots=True)
class KeySpec:
    support: Support
    #: For UNSUPPORTED keys: a value (compared case-insensitively) at which ignoring the key
    #: changes nothing, because it is ZooKeeper's default and what trizk does anyway
    #: (``admin.enableServer=false``). Such entries are not reported.
    harmless_value: str | None = None


_F, _P, _U, _UP = Support.FIELD, Support.PROPERTY, Support.UNSUPPORTED, Support.UNSUPPORTED_PROPERTY

#: The one table of ZooKeeper keys trizk knows, by zoo.cfg key. Keys ending in ``.`` are
#: prefixes (``server.`` covers ``server.1``). A key in no row behaves as in ZooKeeper: it
#: silently becomes the property ``zookeeper.<key>``.
KEYS: Mapping[str, KeySpec] = {
    # -- typed fields trizk honours (QuorumPeerConfig.parseProperties) --
    "tickTime": KeySpec(_F),
    "clientPort": KeySpec(_F),
    "clientPortAddress": KeySpec(_F),
    "dataDir": KeySpec(_F),
    "dataLogDir": KeySpec(_F),
    "maxClientCnxns": KeySpec(_F),
    "minSessionTimeout": KeySpec(_F),
    "maxSessionTimeout": KeySpec(_F),
    "autopurge.snapRetainCount": KeySpec(_F),
    "autopurge.purgeInterval": KeySpec(_F),
    # trizk's own: the ZooKeeper release it answers as (trizk.server.common.release)
    "trizk.zookeeperVersion": KeySpec(_F),
    # -- keys that ZooKeeper turns into zookeeper.* properties, honoured by trizk --
    "4lw.commands.whitelist": KeySpec(_P),
    "jute.maxbuffer": KeySpec(_P),
    "globalOutstandingLimit": KeySpec(_P),
    "extendedTypesEnabled": KeySpec(_P),
    "DigestAuthenticationProvider.superDigest": KeySpec(_P),
    # durability (trizk.server.shell.persistence)
    "snapCount": KeySpec(_P),
    "preAllocSize": KeySpec(_P),
    "forceSync": KeySpec(_P),
    "digest.enabled": KeySpec(_P),
    "serializeLastProcessedZxid.enabled": KeySpec(_P),
    "snapshot.compression.method": KeySpec(_P),
    "snapshot.trust.empty": KeySpec(_P),
    # a leader's DIFF from its txn log (persistence.Persistence.proposals_from_txnlog)
    "snapshotSizeFactor": KeySpec(_P),
    # the AdminServer (trizk.server.ops.admin; HTTPS from the ssl.quorum.* stores)
    "admin.enableServer": KeySpec(_P),
    "admin.forceHttps": KeySpec(_P),
    "admin.portUnification": KeySpec(_P),
    "admin.serverAddress": KeySpec(_P),
    "admin.serverPort": KeySpec(_P),
    "admin.commandURL": KeySpec(_P),
    "admin.idleTimeout": KeySpec(_P),
    # -- access control (acl.py, sasl.py) and TLS (tls.py) --
    "secureClientPort": KeySpec(_F),
    "secureClientPortAddress": KeySpec(_F),
    "authProvider.": KeySpec(_P),
    "DigestAuthenticationProvider.enabled": KeySpec(_P),
    "X509AuthenticationProvider.superUser": KeySpec(_P),
    "SASLAuthenticationProvider.superPassword": KeySpec(_P),
    "superUser": KeySpec(_P),
    "superUser.": KeySpec(_P),
    "letAnySaslUserDoX": KeySpec(_P),
    "allowSaslFailedClients": KeySpec(_P),
    "sasl.serverconfig": KeySpec(_P),
    # enforced authentication (acl.AuthConfig.enforced_on: AuthenticationHelper)
    "sessionRequireClientSASLAuth": KeySpec(_P),
    "enforce.auth.enabled": KeySpec(_P),
    "enforce.auth.schemes": KeySpec(_P),
    "kerberos.removeHostFromPrincipal": KeySpec(_P),
    "kerberos.removeRealmFromPrincipal": KeySpec(_P),
    "ssl.keyStore.location": KeySpec(_P),
    "ssl.keyStore.password": KeySpec(_P),
    "ssl.keyStore.type": KeySpec(_P),
    "ssl.trustStore.location": KeySpec(_P),
    "ssl.trustStore.password": KeySpec(_P),
    "ssl.trustStore.type": KeySpec(_P),
    "ssl.clientAuth": KeySpec(_P),
    "ssl.authProvider": KeySpec(_P),
    "ssl.keyStore.passwordPath": KeySpec(_P),
    "ssl.trustStore.passwordPath": KeySpec(_P),
    "ssl.hostnameVerification": KeySpec(_P),
    "ssl.crl": KeySpec(_P),
    "ssl.ocsp": KeySpec(_P),
    # the quorum's and the AdminServer's stores (QuorumX509Util), read and checked at start
    "ssl.quorum.keyStore.": KeySpec(_P),
    "ssl.quorum.trustStore.": KeySpec(_P),
    "ssl.quorum.hostnameVerification": KeySpec(_P),
    "ssl.quorum.crl": KeySpec(_P),
    "ssl.quorum.ocsp": KeySpec(_P),
    # quorum TLS (trizk.server.shell.quorumtls)
    "ssl.quorum.protocol": KeySpec(_P),
    "ssl.quorum.enabledProtocols": KeySpec(_P),
    "ssl.quorum.ciphersuites": KeySpec(_P),
    "ssl.quorum.clientAuth": KeySpec(_P),
    "ssl.quorum.handshakeDetectionTimeoutMillis": KeySpec(_P),
    # -- QuorumPeerConfig.parseProperties: the ensemble (parsed from the entries, QUORUM_KEYS) --
    "initLimit": KeySpec(_F),
    "syncLimit": KeySpec(_F),
    "electionAlg": KeySpec(_F),
    "quorumListenOnAllIPs": KeySpec(_F),
    "peerType": KeySpec(_F),
    "standaloneEnabled": KeySpec(_F),
    # dynamic reconfig (server/config/dynamic.py, server/shell/ensemble/reconfig.py)
    "reconfigEnabled": KeySpec(_F),
    "dynamicConfigFile": KeySpec(_F),
    "localSessionsEnabled": KeySpec(_F),
    "localSessionsUpgradingEnabled": KeySpec(_F),
    # -- QuorumPeerConfig.parseProperties fields trizk does not implement --
    "observerMasterPort": KeySpec(_U),
    "clientPortListenBacklog": KeySpec(_U, "-1"),
    "connectToLearnerMasterLimit": KeySpec(_U),
    "syncEnabled": KeySpec(_U, "true"),
    "sslQuorum": KeySpec(_F),
    "portUnification": KeySpec(_F),
    "sslQuorumReloadCertFiles": KeySpec(_F),
    # quorum SASL (server/auth/quorumsasl.py)
    "quorum.auth.enableSasl": KeySpec(_F),
    "quorum.auth.serverRequireSasl": KeySpec(_F),
    "quorum.auth.learnerRequireSasl": KeySpec(_F),
    "quorum.auth.learner.saslLoginContext": KeySpec(_F),
    "quorum.auth.server.saslLoginContext": KeySpec(_F),
    "quorum.auth.kerberos.servicePrincipal": KeySpec(_F),
    "quorum.cnxn.threads.size": KeySpec(_F),
    "jvm.pause.info-threshold.ms": KeySpec(_U),
    "jvm.pause.warn-threshold.ms": KeySpec(_U),
    "jvm.pause.sleep.time.ms": KeySpec(_U),
    "jvm.pause.monitor": KeySpec(_U, "false"),
    # metricsProvider.className (the default provider, or the Prometheus one that
    # trizk.server.ops.metrics serves) and metricsProvider.<setting> (QuorumPeerConfig fields)
    "metricsProvider.": KeySpec(_F),
    "multiAddress.enabled": KeySpec(_F),
    "multiAddress.reachabilityCheckTimeoutMs": KeySpec(_F),
    "multiAddress.reachabilityCheckEnabled": KeySpec(_F),
    "server.": KeySpec(_F),
    # hierarchical quorums (QuorumHierarchical, quorum/verifier.py)
    "group.": KeySpec(_F),
    "weight.": KeySpec(_F),
    # -- well-known zookeeper.* properties (zookeeperAdmin.html) trizk does not implement --
    "snapSizeLimitInKb": KeySpec(_UP),
    "txnLogSizeLimitInKb": KeySpec(_UP),
    "commitLogCount": KeySpec(_UP),
    "fsync.warningthresholdms": KeySpec(_UP),
    "maxCnxns": KeySpec(_UP, "0"),
    # trizk serves TLS without Netty: the factory ZooKeeper needs for TLS changes nothing here
    "serverCnxnFactory": KeySpec(_UP, "org.apache.zookeeper.server.NettyServerCnxnFactory"),
    "admin.": KeySpec(_UP),
    "ssl.": KeySpec(_UP),
    "audit.enable": KeySpec(_UP, "false"),
    "request.throttler.": KeySpec(_UP),
    "watchManagerName": KeySpec(_UP),
    "connection_throttle_": KeySpec(_UP),
    # quorum settings read from system properties (QUORUM_KEYS parses cnxTimeout)
    "cnxTimeout": KeySpec(_P),
    # ZooKeeper reads only -Dreadonlymode.enabled (ServerConfig.read_only_mode); the file key
    # becomes zookeeper.readonlymode.enabled, which nothing reads.
    "readonlymode.enabled": KeySpec(_UP, "false"),
}

#: Keys the quorum section of :func:`config_from_entries` parses into typed fields
#: (``ServerConfig.quorum``, ``init_limit``, ...), whatever their :data:`KEYS` row says.
QUORUM_KEYS = frozenset(
    {
        "initLimit",
        "syncLimit",
        "electionAlg",
        "peerType",
        "quorumListenOnAllIPs",
        "standaloneEnabled",
        "reconfigEnabled",
        "multiAddress.enabled",
        "multiAddress.reachabilityCheckEnabled",
        "multiAddress.reachabilityCheckTimeoutMs",
    }
)


_IGNORED = (Support.UNSUPPORTED, Support.UNSUPPORTED_PROPERTY)


def key_spec(key: str) -> KeySpec | None:
    """The :data:`KEYS` row for a zoo.cfg key: exact match first, then the longest prefix."""
    spec = KEYS.get(key)
    if spec is not None:
        return spec
    best: str | None = None
    for name in KEYS:
        if name.endswith((".", "_")) and key.startswith(name):
            if best is None or len(name) > len(best):
                best = name
    return KEYS[best] if best is not None else None


@dataclass(frozen=True, slots=True)
class Entry:
    """One logical ``key=value`` line of a Properties file."""

    line_no: int
    key: str
    value: str
    text: str  # the logical line as written (for error messages)


@dataclass(frozen=True)
class ServerConfig:
    """Everything trizk reads from zoo.cfg and ``-D`` properties. Build with
    :func:`parse_config`, :func:`load_config`, :meth:`create` or :meth:`development`."""

    data_dir: Path
    data_log_dir: Path
    client_port: int = DEFAULT_CLIENT_PORT
    #: ``None`` = all interfaces (ZooKeeper: ``new InetSocketAddress(clientPort)``).
    client_port_address: str | None = None
    tick_time: int = DEFAULT_TICK_TIME
    #: Per client IP; 0 = unlimited.
    max_client_cnxns: int = DEFAULT_MAX_CLIENT_CNXNS
    min_session_timeout: int = 2 * DEFAULT_TICK_TIME
    max_session_timeout: int = 20 * DEFAULT_TICK_TIME
    #: TLS port (``secureClientPort``); 0 = none.
    secure_client_port: int = 0
    #: ``secureClientPortAddress``; ``None`` = all interfaces.
    secure_client_port_address: str | None = None
    #: Effective 4lw whitelist (:func:`parse_whitelist`): always holds ``srvr``.
    four_letter_words: frozenset[str] = frozenset({"srvr"})
    jute_max_buffer: int = DEFAULT_MAX_BUFFER
    global_outstanding_limit: int = DEFAULT_GLOBAL_OUTSTANDING_LIMIT
    #: ``zookeeper.leader.ackLoggingFrequency``: a leader samples ACK_LATENCY for the zxids
    #: divisible by it (<= 0: never)
    ack_logging_frequency: int = 1000
    #: System properties by full name (``zookeeper.extendedTypesEnabled``, ``jute.maxbuffer``):
    #: file keys without a field, then ``-D`` options over them.
    properties: dict[str, str] = field(default_factory=dict, hash=False)
    #: Known ZooKeeper keys trizk ignores, as written, in file order (for one warning line).
    unsupported: tuple[str, ...] = ()
    #: ``autopurge.snapRetainCount`` (DatadirCleanupManager raises values below 3 to 3).
    snap_retain_count: int = 3
    #: ``autopurge.purgeInterval`` in hours; 0 = no automatic purge.
    purge_interval: int = 0
    #: The zoo.cfg text as read (the AdminServer's ``initial_configuration``, as
    #: ``ZooKeeperServer.getInitialConfig``); ``None`` when not started from a file.
    initial_config: str | None = field(default=None, compare=False)
    #: ``metricsProvider.*`` keys without the prefix (``className``, ``httpPort``...).
    metrics_provider: dict[str, str] = field(default_factory=dict, hash=False)
    #: ``trizk.zookeeperVersion``: the ZooKeeper release trizk answers as
    #: (:data:`trizk.server.common.release.RELEASES`)
    zookeeper_version: str = release.DEFAULT_RELEASE

    # -- quorum (QuorumPeerConfig); see "Quorum settings" in the module docstring --
    #: The ensemble (``server.N`` lines) when this is a quorum member
    #: (``QuorumPeerConfig.isDistributed``); ``None`` for a standalone server.
    quorum: QuorumVerifier | None = field(default=None, hash=False)
    #: ``dataDir/myid`` (``None`` without that file; a standalone server needs none).
    my_id: int | None = None
    #: ``initLimit`` / ``syncLimit`` in ticks; 0 = not set (an error in quorum mode).
    init_limit: int = 0
    sync_limit: int = 0
    #: This member's role: the servers list wins over ``peerType`` (setupPeerType).
    peer_type: LearnerType = LearnerType.PARTICIPANT
    #: ``electionAlg``: only 3 (FastLeaderElection) exists.
    election_alg: int = 3
    quorum_listen_on_all_ips: bool = False
    standalone_enabled: bool = True
    #: ``reconfigEnabled``: dynamic reconfig (the membership lives in ``dynamicConfigFile``)
    reconfig_enabled: bool = False
    #: ``dynamicConfigFile`` as written (the membership came from that file), else ``None``
    dynamic_config_file: str | None = None
    #: the zoo.cfg path this config was loaded from (:func:`load_config`), else ``None``:
    #: a reconfig-enabled member rewrites that file (``QuorumPeer.setConfigFileName``)
    config_file: str | None = field(default=None, compare=False)
    #: ``<zoo.cfg>.dynamic.next``: a membership seen but not activated (the last seen
    #: verifier, ``QuorumPeerConfig.lastSeenQuorumVerifier``), else ``None``
    last_seen_quorum: QuorumVerifier | None = field(default=None, hash=False)
    #: ``zookeeper.cnxTimeout`` (ms): connect timeout of election links.
    cnx_timeout: int = DEFAULT_CNX_TIMEOUT
    #: ``multiAddress.enabled`` (else ``-Dzookeeper.multiAddress.enabled``): election
    #: connections announce every address (initial message version -65535). Server lines with
    #: ``|`` parse only with the ``-D`` property, as in ZooKeeper.
    multi_address_enabled: bool = False
    #: ``multiAddress.reachabilityCheckEnabled`` (true) / ``...TimeoutMs`` (1000)
    multi_address_reachability_check: bool = True
    multi_address_timeout_ms: int = 1000
    #: ``sslQuorum`` / ``portUnification`` / ``sslQuorumReloadCertFiles`` (Boolean.parseBoolean;
    #: trizk.server.shell.quorumtls)
    ssl_quorum: bool = False
    port_unification: bool = False
    ssl_quorum_reload_cert_files: bool = False
    #: the ``quorum.auth.*`` keys and ``quorum.cnxn.threads.size`` (quorum SASL)
    quorum_auth: QuorumAuthSettings = field(default_factory=QuorumAuthSettings)
    #: ZooKeeper's configuration warnings (odd ensemble sizes, peerType mismatch), for the log.
    warnings: tuple[str, ...] = ()
    #: ``-Dreadonlymode.enabled`` (a system property only): a member cut off from its quorum
    #: serves read-only clients (ReadOnlyZooKeeperServer)
    read_only_mode: bool = False
    #: ``localSessionsEnabled`` / ``localSessionsUpgradingEnabled`` (both false by default;
    #: ensemble members only, :mod:`trizk.server.writes.localsessions`)
    local_sessions_enabled: bool = False
    local_sessions_upgrading_enabled: bool = False

    # -- constructors --------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        data_dir: str | Path,
        *,
        properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        myid: int | str | None = None,
        **keys: str | int,
    ) -> ServerConfig:
        """Build a config from zoo.cfg keys given as keyword arguments (``tickTime=2000``;
        dotted keys via ``**{"4lw.commands.whitelist": "*", "server.1": "h:2888:3888"}``),
        with ZooKeeper's defaults. ``myid`` stands for the ``dataDir/myid`` file."""
        raw = [("dataDir", str(data_dir)), *((k, str(v)) for k, v in keys.items())]
        entries = [Entry(0, k, v, f"{k}={v}") for k, v in raw]
        return config_from_entries(
            entries, properties=properties, myid=None if myid is None else str(myid)
        )

    @classmethod
    def development(
        cls,
        data_dir: str | Path,
        *,
        properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ) -> ServerConfig:
        """A ready development server: 127.0.0.1:2181, tickTime 2000, every 4lw enabled, the
        AdminServer on 127.0.0.1:8080, everything else ZooKeeper's default. The caller creates
        ``data_dir``."""
        return cls.create(
            data_dir,
            properties=properties,
            tickTime=2000,
            clientPort=DEFAULT_CLIENT_PORT,
            clientPortAddress="127.0.0.1",
            **{"4lw.commands.whitelist": "*", "admin.serverAddress": "127.0.0.1"},
        )

    @property
    def is_quorum(self) -> bool:
        """A quorum member (``QuorumPeerConfig.isDistributed``), not a standalone server."""
        return self.quorum is not None

    @property
    def my_server(self) -> QuorumServer | None:
        """This member's ``server.<myid>`` entry (``None`` when standalone)."""
        if self.quorum is None or self.my_id is None:
            return None
        return self.quorum.get(self.my_id)

    def replace(self, **changes: object) -> ServerConfig:
        """``dataclasses.replace`` (no re-derivation: prefer overrides in :func:`parse_config`)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    # -- property access -----------------------------------------------------------------

    def get_property(self, name: str, default: str | None = None) -> str | None:
        """A system property by full name (``zookeeper.extendedTypesEnabled``)."""
        return self.properties.get(name, default)

    @property
    def admin_server_enabled(self) -> bool:
        """AdminServerFactory: on unless ``zookeeper.admin.enableServer`` is exactly
        ``false`` (``!"false".equals(System.getProperty(...))``)."""
        return self.get_property("zookeeper.admin.enableServer") != "false"

    def flag(self, name: str, default: bool = False) -> bool:
        """A boolean property as Java's ``Boolean.parseBoolean`` reads it."""
        value = self.properties.get(name)
        return default if value is None else javalang.parse_boolean(value)

    @property
    def extended_types_enabled(self) -> bool:
        """``zookeeper.extendedTypesEnabled`` (TTL nodes)."""
        return self.flag("zookeeper.extendedTypesEnabled")

    @property
    def enforce_quota(self) -> bool:
        """``zookeeper.enforceQuota`` (``enforceQuota=true`` in zoo.cfg): hard quota limits."""
        return self.flag("zookeeper.enforceQuota")

    @property
    def super_digest(self) -> str | None:
        """``zookeeper.DigestAuthenticationProvider.superDigest`` (``super:<base64 sha1>``)."""
        return self.properties.get("zookeeper.DigestAuthenticationProvider.superDigest")


# -- the four-letter words' whitelist -------------------------------------------------------

#: Every word ZooKeeper 3.8.0 knows (``FourLetterCommands`` static block).
FOUR_LETTER_WORDS: frozenset[str] = frozenset(
    {
        "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok", "stmk", "srst",
        "srvr", "stat", "wchc", "wchp", "wchs", "mntr", "isro", "hash",
    }
)  # fmt: skip
#: The command ZooKeeper registers for the bytes telnet sends when it closes
#: (:data:`trizk.server.ops.fourlw.TELNET_CLOSE`): a known command, answered with nothing.
TELNET_CLOSE_COMMAND = "telnet close"


def parse_whitelist(value: str | None, *, read_only_mode: bool = False) -> frozenset[str]:
    """The effective whitelist for ``zookeeper.4lw.commands.whitelist`` = ``value``
    (``FourLetterCommands.isEnabled``).

    ``*`` (as one comma item) enables every known command, including "telnet close";
    blank items are skipped; ``srvr`` is always added; ``isro`` too when ``read_only_mode``
    (the ``readonlymode.enabled`` property) is set. Unknown names are kept (harmless).
    """
    words: set[str] = set()
    if value is not None:
        for item in value.split(","):
            name = item.strip()
            if name == "*":
                words |= FOUR_LETTER_WORDS | {TELNET_CLOSE_COMMAND}
                break
            if name:
                words.add(name)
    if read_only_mode:
        words.add("isro")
    words.add("srvr")  # FourLetterCommands: "zkServer.sh depends on srvr"
    return frozenset(words)


# -- step 1: the Properties grammar ---------------------------------------------------------

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _ends_with_continuation(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Yield ``(first_line_no, logical_line)``, skipping comments and blank lines."""
    # Properties' LineReader ends lines at \n, \r or \r\n only (not str.splitlines' set).
    natural = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(natural):
        line_no = i + 1
        line = natural[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line):
            line = line[:-1]
            if i >= len(natural):
                break
            line += natural[i].lstrip(_BLANKS)
            i += 1
        yield line_no, line


def _unescape(s: str, line_no: int, text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                # Properties.load throws IllegalArgumentException("Malformed \\uxxxx encoding.")
                raise ConfigError(line_no, f"malformed \\uxxxx escape in {text!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def parse_properties(text: str) -> list[Entry]:
    """Split Properties text into entries (see the module docstring for the grammar).

    Keys and values are unescaped; values are trimmed like ``QuorumPeerConfig`` trims them.
    """
    entries: list[Entry] = []
    for line_no, line in _logical_lines(text):
        # Find the end of the key: first unescaped '=', ':' or blank.
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:" or c in _BLANKS:
                break
            i += 1
        raw_key, rest = line[:i], line[i:]
        if not rest:
            raise ConfigError(line_no, f"expected key=value, got {line!r}")
        # Separator: blanks, at most one '=' or ':', blanks.
        rest = rest.lstrip(_BLANKS)
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(_BLANKS)
        key = _unescape(raw_key, line_no, line).strip()
        value = _unescape(rest, line_no, line).strip()
        if not key:
            raise ConfigError(line_no, f"empty key in {line!r}")
        entries.append(Entry(line_no, key, value, line))
    return entries


# -- step 2 and 3: entries -> ServerConfig ------------------------------------------------


def _parse_int(
    raw: str,
    where: int | None,
    what: str,
    shown: str,
    grammar: Callable[[str], int | None] = javalang.parse_integer,
) -> int:
    """An int as ``Integer.parseInt`` reads it (``grammar``: ``javalang.decode_integer`` for
    ``Integer.decode``); errors quote ``shown`` (the line as written, or the option)."""
    n = grammar(raw)
    if n is None:
        raise ConfigError(where, f"{shown!r}: {what} must be an integer")
    if not javalang.INT_MIN <= n <= javalang.INT_MAX:
        raise ConfigError(where, f"{shown!r}: {what} is out of the 32-bit integer range")
    return n


#: Properties trizk reads whose values ZooKeeper parses with a Java grammar and, when the
#: value does not parse, silently replaces by the default (``Integer.getInteger``). trizk
#: does the same and says so in one warning line naming the key. By full property name.
#: (``preAllocSize`` has its own warning, FileTxnLog's, in the persistence shell.)
INTEGER_PROPERTIES: Mapping[str, Callable[[str | None], int | None]] = {
    "zookeeper.snapCount": javalang.decode_int,
    "zookeeper.admin.serverPort": javalang.decode_int,
    "zookeeper.admin.idleTimeout": javalang.decode_int,
    "zookeeper.leader.ackLoggingFrequency": javalang.decode_int,
}
#: Boolean properties read with ``Boolean.parseBoolean``: anything but ``true`` (any case) is
#: false, so ``digest.enabled=ture`` silently turns digests off in ZooKeeper. trizk reads them
#: the same way and warns about a value that is neither true nor false.
BOOLEAN_PROPERTIES = frozenset(
    {
        "zookeeper.digest.enabled",
        "zookeeper.admin.enableServer",
        "zookeeper.extendedTypesEnabled",
        "zookeeper.snapshot.trust.empty",
        "zookeeper.DigestAuthenticationProvider.enabled",
        "zookeeper.forceSnapshotSync",
    }
)


def _property_value_warnings(props: Mapping[str, str], lines: Mapping[str, Entry]) -> list[str]:
    """One warning naming the key for each property value ZooKeeper would silently read as
    its default (:data:`INTEGER_PROPERTIES`), as false (:data:`BOOLEAN_PROPERTIES`) or, for
    ``forceSync`` (``"no".equals(value)``), as yes."""
    out: list[str] = []
    for name, value in props.items():
        e = lines.get(name)
        key = name if e is None else e.key
        where = "" if e is None or not e.line_no else f"line {e.line_no}: "
        grammar = INTEGER_PROPERTIES.get(name)
        if grammar is not None and grammar(value) is None:
            out.append(f"{where}{key}={value} is not an integer; using the default")
        elif name in BOOLEAN_PROPERTIES and value.lower() not in ("true", "false"):
            out.append(f"{where}{key}={value} is neither true nor false; read as false")
        elif name == "zookeeper.forceSync" and value not in ("yes", "no"):
            out.append(f"{where}{key}={value} is neither yes nor no; read as yes")
    return out


def parse_property_option(option: str) -> tuple[str, str]:
    """``-D`` argument ``name=value`` (or ``name``, as java's ``-Dname``, meaning "")."""
    name, sep, value = option.partition("=")
    name = name.strip()
    if not name:
        raise ConfigError(None, f"-D {option!r}: expected name=value")
    return name, value.strip() if sep else ""


def config_from_entries(
    entries: Iterable[Entry],
    *,
    properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    myid: str | None = None,
    dynamic: Sequence[Entry] | None = None,
) -> ServerConfig:
    """Sort entries out against :data:`KEYS`, merge ``properties`` (full names, the ``-D``
    options) over the file's, and derive ZooKeeper's defaults. Later entries win.
    ``myid`` is the text of ``dataDir/myid`` (``None``: no such file). ``dynamic``: the
    entries of the ``dynamicConfigFile`` the entries name (:func:`dynamic_entries`), which
    then hold the membership."""
    entries = list(entries)
    dynamic_file = next((e for e in reversed(entries) if e.key == "dynamicConfigFile"), None)
    if dynamic_file is not None:
        for e in entries:
            if e.key.startswith(("server.", "group", "weight")):
                # QuorumPeerConfig.parseProperties
                raise ConfigError(
                    _where(e), f"parameter: {e.key} must be in a separate dynamic config file"
                )
        if dynamic is None:
            raise ConfigError(_where(dynamic_file), f"cannot read {dynamic_file.value}")
    fields: dict[str, Entry] = {}
    props: dict[str, str] = {}
    prop_lines: dict[str, Entry] = {}
    unsupported: list[str] = []
    for e in entries:
        spec = key_spec(e.key)
        if spec is not None and spec.support is Support.FIELD:
            fields[e.key] = e
            continue
        if spec is None or spec.support is not Support.UNSUPPORTED:
            # QuorumPeerConfig: System.setProperty("zookeeper." + key, value).
            props["zookeeper." + e.key] = e.value
            prop_lines["zookeeper." + e.key] = e
        if spec is not None and spec.support in _IGNORED:
            harmless = spec.harmless_value
            if harmless is None or e.value.lower() != harmless.lower():
                if e.key not in unsupported:
                    unsupported.append(e.key)
    items = properties.items() if isinstance(properties, Mapping) else properties
    for name, value in items:
        props[name] = value
        prop_lines.pop(name, None)
        if name.startswith("zookeeper."):
            spec = key_spec(name[len("zookeeper.") :])
            if spec is not None and spec.support in _IGNORED:
                harmless = spec.harmless_value
                if (harmless is None or value.lower() != harmless.lower()) and (
                    name not in unsupported
                ):
                    unsupported.append(name)

    def line(key: str) -> int | None:
        e = fields.get(key)
        return e.line_no if e is not None and e.line_no > 0 else None

    def int_field(key: str, default: int) -> int:
        e = fields.get(key)
        if e is None:
            return default
        return _parse_int(e.value, line(key), key, e.text)

    def bool_field(key: str) -> bool:
        """QuorumPeerConfig.parseBoolean (false when absent)."""
        e = fields.get(key)
        return False if e is None else _java_bool(e)

    def int_prop(names: tuple[str, ...], default: int) -> int:
        for name in names:
            if name in props:
                e = prop_lines.get(name)
                shown = f"-D {name}={props[name]}" if e is None else e.text
                where = None if e is None else e.line_no or None
                what = name if e is None else e.key
                return _parse_int(props[name], where, what, shown, javalang.decode_integer)
        return default

    value_warnings = _property_value_warnings(props, prop_lines)
    if "dataDir" not in fields:
        raise ConfigError(None, "dataDir is not set")
    if not fields["dataDir"].value:
        raise ConfigError(line("dataDir"), "dataDir is empty")
    data_dir = Path(fields["dataDir"].value)
    data_log_dir = Path(fields["dataLogDir"].value) if "dataLogDir" in fields else data_dir

    client_port = int_field("clientPort", 0)
    address = fields["clientPortAddress"].value if "clientPortAddress" in fields else None
    if client_port == 0 and address is not None:
        # QuorumPeerConfig: "clientPortAddress is set but clientPort is not set".
        raise ConfigError(
            line("clientPortAddress"), "clientPortAddress is set but clientPort is not set"
        )
    q = _quorum_settings(
        entries, myid, data_dir, client_port, address, int_prop, props,
        list(dynamic) if dynamic_file is not None and dynamic is not None else None,
    )  # fmt: skip
    if q.client_port:  # from this member's server line ("server.1=h:1:2;2181")
        client_port, address = q.client_port, q.client_port_address
    if client_port == 0:
        raise ConfigError(line("clientPort"), "clientPort is not set")
    if not 0 < client_port <= 65535:
        raise ConfigError(line("clientPort"), f"clientPort {client_port} is not a TCP port")

    secure_port = int_field("secureClientPort", 0)
    secure_address = (
        fields["secureClientPortAddress"].value if "secureClientPortAddress" in fields else None
    )
    if secure_port == 0 and secure_address is not None:
        raise ConfigError(
            line("secureClientPortAddress"),
            "secureClientPortAddress is set but secureClientPort is not set",
        )
    if not 0 <= secure_port <= 65535:
        raise ConfigError(
            line("secureClientPort"), f"secureClientPort {secure_port} is not a TCP port"
        )

    tick_time = int_field("tickTime", DEFAULT_TICK_TIME)
    if tick_time == 0:
        raise ConfigError(line("tickTime"), "tickTime is not set")
    # -1 (the field's initial value in ZooKeeper) also means "derive from tickTime".
    min_timeout = int_field("minSessionTimeout", -1)
    max_timeout = int_field("maxSessionTimeout", -1)
    min_timeout = tick_time * 2 if min_timeout == -1 else min_timeout
    max_timeout = tick_time * 20 if max_timeout == -1 else max_timeout
    if min_timeout > max_timeout:
        where = line("minSessionTimeout") or line("maxSessionTimeout")
        raise ConfigError(
            where,
            f"minSessionTimeout must not be larger than maxSessionTimeout "
            f"({min_timeout} > {max_timeout})",
        )

    jute_max_buffer = int_prop(("jute.maxbuffer", "zookeeper.jute.maxbuffer"), DEFAULT_MAX_BUFFER)
    if jute_max_buffer <= 0:
        raise ConfigError(None, f"jute.maxbuffer must be positive, got {jute_max_buffer}")

    return ServerConfig(
        zookeeper_version=_zookeeper_version(fields, props),
        data_dir=data_dir,
        data_log_dir=data_log_dir,
        client_port=client_port,
        client_port_address=address,
        secure_client_port=secure_port,
        secure_client_port_address=secure_address,
        tick_time=tick_time,
        max_client_cnxns=int_field("maxClientCnxns", DEFAULT_MAX_CLIENT_CNXNS),
        min_session_timeout=min_timeout,
        max_session_timeout=max_timeout,
        four_letter_words=parse_whitelist(
            props.get("zookeeper.4lw.commands.whitelist"),
            read_only_mode=javalang.parse_boolean(props.get("readonlymode.enabled", "false")),
        ),
        jute_max_buffer=jute_max_buffer,
        global_outstanding_limit=int_prop(
            ("zookeeper.globalOutstandingLimit",), DEFAULT_GLOBAL_OUTSTANDING_LIMIT
        ),
        ack_logging_frequency=int_prop(("zookeeper.leader.ackLoggingFrequency",), 1000),
        properties=props,
        unsupported=tuple(unsupported + _unknown_metrics_provider(fields)),
        metrics_provider={
            k[len(_METRICS_PREFIX) :]: e.value
            for k, e in fields.items()
            if k.startswith(_METRICS_PREFIX)
        },
        snap_retain_count=int_field("autopurge.snapRetainCount", 3),
        purge_interval=int_field("autopurge.purgeInterval", 0),
        quorum=q.quorum,
        my_id=q.my_id,
        init_limit=q.init_limit,
        sync_limit=q.sync_limit,
        peer_type=q.peer_type,
        election_alg=q.election_alg,
        quorum_listen_on_all_ips=q.quorum_listen_on_all_ips,
        standalone_enabled=q.standalone_enabled,
        reconfig_enabled=q.reconfig_enabled,
        dynamic_config_file=dynamic_file.value if dynamic_file is not None else None,
        cnx_timeout=q.cnx_timeout,
        multi_address_enabled=q.multi_address[0],
        multi_address_reachability_check=q.multi_address[1],
        multi_address_timeout_ms=q.multi_address[2],
        ssl_quorum=javalang.parse_boolean(_field_text(fields, "sslQuorum")),
        port_unification=javalang.parse_boolean(_field_text(fields, "portUnification")),
        ssl_quorum_reload_cert_files=javalang.parse_boolean(
            _field_text(fields, "sslQuorumReloadCertFiles")
        ),
        quorum_auth=_quorum_auth(fields),
        warnings=q.warnings + tuple(value_warnings),
        read_only_mode=javalang.parse_boolean(props.get("readonlymode.enabled", "false")),
        local_sessions_enabled=bool_field("localSessionsEnabled"),
        local_sessions_upgrading_enabled=bool_field("localSessionsUpgradingEnabled"),
    )


def _field_text(fields: Mapping[str, Entry], key: str) -> str | None:
    e = fields.get(key)
    return None if e is None else e.value


def _zookeeper_version(fields: Mapping[str, Entry], props: Mapping[str, str]) -> str:
    """``trizk.zookeeperVersion``: the ``-D`` property of that name wins over the zoo.cfg key
    (as ``-D`` options win over the file's); a release trizk does not answer as is an error."""
    e = fields.get(release.PROPERTY)
    value = props.get(release.PROPERTY)
    if value is not None:
        where, shown = None, f"-D {release.PROPERTY}={value}"
    elif e is not None:
        where, shown, value = _where(e), e.text, e.value
    else:
        return release.DEFAULT_RELEASE
    try:
        return release.parse_release(value)
    except ValueError as err:
        raise ConfigError(where, f"{err}: {shown}") from None


_METRICS_PREFIX = "metricsProvider."
#: ``metricsProvider.className`` values trizk serves (``MetricsProviderBootstrap`` would fail
#: to load any other class; trizk names it in the unsupported-keys warning instead).
KNOWN_METRICS_PROVIDERS = (
    "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider",
    "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider",
)


def _unknown_metrics_provider(fields: Mapping[str, Entry]) -> list[str]:
    e = fields.get(_METRICS_PREFIX + "className")
    if e is None or e.value in KNOWN_METRICS_PROVIDERS:
        return []
    return [e.key]


# -- quorum settings (QuorumPeerConfig.parseProperties + setupQuorumPeerConfig) --------------


@dataclass(frozen=True)
class _Quorum:
    quorum: QuorumVerifier | None
    my_id: int | None
    init_limit: int
    sync_limit: int
    peer_type: LearnerType
    election_alg: int
    quorum_listen_on_all_ips: bool
    standalone_enabled: bool
    reconfig_enabled: bool
    cnx_timeout: int
    warnings: tuple[str, ...]
    #: The client port (and address, None = all) from this member's server line, or 0.
    client_port: int = 0
    client_port_address: str | None = None
    #: multiAddress.enabled, .reachabilityCheckEnabled, .reachabilityCheckTimeoutMs
    multi_address: tuple[bool, bool, int] = (False, True, 1000)


_WILDCARDS = frozenset({"0.0.0.0", "0:0:0:0:0:0:0:0"})


def _where(e: Entry) -> int | None:
    return e.line_no or None


def _java_bool(e: Entry) -> bool:
    # QuorumPeerConfig.parseBoolean: only true/false (any case), else a ConfigException.
    if e.value.lower() == "true":
        return True
    if e.value.lower() == "false":
        return False
    raise ConfigError(_where(e), f"Invalid option {e.value} for {e.key}. Choose 'true' or 'false.'")


def _quorum_auth(fields: Mapping[str, Entry]) -> QuorumAuthSettings:
    """``QuorumPeerConfig.parseProperties``' ``quorum.auth.*`` keys and their checks."""

    def flag(key: str) -> bool:
        e = fields.get(key)
        return False if e is None else _java_bool(e)

    def text(key: str, default: str) -> str:
        e = fields.get(key)
        return default if e is None else e.value

    threads = 0
    e = fields.get("quorum.cnxn.threads.size")
    if e is not None:
        threads = _parse_int(e.value, _where(e), e.key, e.text)  # Integer.parseInt
    settings = QuorumAuthSettings(
        enabled=flag("quorum.auth.enableSasl"),
        server_required=flag("quorum.auth.serverRequireSasl"),
        learner_required=flag("quorum.auth.learnerRequireSasl"),
        learner_context=text("quorum.auth.learner.saslLoginContext", LEARNER_CONTEXT),
        server_context=text("quorum.auth.server.saslLoginContext", SERVER_CONTEXT),
        service_principal=text("quorum.auth.kerberos.servicePrincipal", DEFAULT_SERVICE_PRINCIPAL),
        cnxn_threads=threads_size(threads),
    )
    problem = settings.check()
    if problem is not None:
        raise ConfigError(None, problem)  # an IllegalArgumentException: no line number
    return settings


def _parse_myid(text: str, path: Path) -> int:
    # QuorumPeerConfig.setupMyId: Long.parseLong(first line); BufferedReader.readLine gives
    # null (printed "null") for an empty file.
    first = re.split(r"\r\n|\r|\n", text, maxsplit=1)[0] if text else "null"
    myid = javalang.parse_long(first)
    if myid is None:
        raise ConfigError(None, f"serverid {first} is not a number (in {path})")
    if myid < 0:
        raise ConfigError(None, f"serverid {first} is negative (in {path})")
    return myid


def _quorum_settings(
    entries: list[Entry],
    myid: str | None,
    data_dir: Path,
    client_port: int,
    client_address: str | None,
    int_prop: Callable[[tuple[str, ...], int], int],
    props: Mapping[str, str],
    membership: list[Entry] | None = None,
) -> _Quorum:
    """The quorum half of ``QuorumPeerConfig``: typed keys, the ensemble, myid, the client
    address of this member, its peer type and ``checkValidity``; plus trizk's own clash check.
    ``membership``: the dynamic file's entries (else the zoo.cfg's server lines count)."""
    members_from = entries if membership is None else membership
    last: dict[str, Entry] = {}
    for e in entries:
        if e.key in QUORUM_KEYS:
            last[e.key] = e

    def int_key(key: str, default: int) -> int:
        e = last.get(key)
        return default if e is None else _parse_int(e.value, _where(e), key, e.text)

    def bool_key(key: str, default: bool) -> bool:
        e = last.get(key)
        return default if e is None else _java_bool(e)

    init_limit = int_key("initLimit", 0)
    sync_limit = int_key("syncLimit", 0)
    election_alg = int_key("electionAlg", 3)
    if election_alg != 3:
        raise ConfigError(
            _where(last["electionAlg"]), "Invalid electionAlg value. Only 3 is supported."
        )
    configured_type = LearnerType.PARTICIPANT
    if "peerType" in last:
        e = last["peerType"]
        if e.value.lower() == "observer":
            configured_type = LearnerType.OBSERVER
        elif e.value.lower() != "participant":
            raise ConfigError(_where(e), f"peerType: Unrecognised peertype: {e.value}")
    listen_all = bool_key("quorumListenOnAllIPs", False)
    standalone_enabled = bool_key("standaloneEnabled", True)
    reconfig_enabled = bool_key("reconfigEnabled", False)
    cnx_timeout = int_prop(("zookeeper.cnxTimeout",), DEFAULT_CNX_TIMEOUT)
    # QuorumPeer.QuorumServer parses "a|b" only with the system property; QuorumPeerConfig's
    # multiAddress.* fields start from the properties and the zoo.cfg keys replace them
    multi_parse = javalang.parse_boolean(props.get("zookeeper.multiAddress.enabled", "false"))
    multi_enabled = bool_key("multiAddress.enabled", multi_parse)
    multi_check = bool_key(
        "multiAddress.reachabilityCheckEnabled",
        javalang.parse_boolean(
            props.get("zookeeper.multiAddress.reachabilityCheckEnabled", "true")
        ),
    )
    multi_timeout = int_key(
        "multiAddress.reachabilityCheckTimeoutMs",
        int_prop(("zookeeper.multiAddress.reachabilityCheckTimeoutMs",), 1000),
    )
    if cnx_timeout <= 0:
        raise ConfigError(None, f"cnxTimeout must be positive, got {cnx_timeout}")

    # The ensemble: every server.N line (the last of a key), parsed in file order so the
    # first bad line is reported with its number.
    servers: dict[str, Entry] = {}
    for e in members_from:
        if e.key.startswith("server."):
            servers[e.key] = e
    by_sid: dict[int, Entry] = {}
    parsed: dict[int, QuorumServer] = {}
    for key, e in servers.items():
        sid_text = key[len("server.") :]
        sid = javalang.parse_long(sid_text)
        if sid is None or sid < 0:
            raise ConfigError(_where(e), f"{key}: the server id must be a number >= 0")
        if sid in by_sid:
            raise ConfigError(_where(e), f"{key} and {by_sid[sid].key} both configure server {sid}")
        try:
            parsed[sid] = parse_server(sid, e.value, multi_address=multi_parse)
        except QuorumConfigError as exc:
            raise ConfigError(_where(e), f"{key}: {exc}") from None
        by_sid[sid] = e

    my_id = _parse_myid(myid, data_dir / "myid") if myid is not None else None

    # setupClientPort: this member's client address from its server line, or (not printed)
    # from clientPort/clientPortAddress.
    replaced: dict[int, QuorumServer] = {}
    own_port, own_address = 0, None
    me = parsed.get(my_id) if my_id is not None else None
    if me is not None and me.client_addr is not None:
        ca = me.client_addr
        if client_port:
            static_host = java_host_string(client_address) if client_address else "0.0.0.0"
            wildcard = static_host in _WILDCARDS
            if (not wildcard and Address(static_host, client_port) != ca) or (
                wildcard and client_port != ca.port
            ):
                raise ConfigError(
                    _where(by_sid[me.sid]),
                    f"client address for this server (id = {me.sid}) in static config file is "
                    f"{static_host}:{client_port} is different from client address found in "
                    f"dynamic file: {ca}",
                )
        own_port = ca.port
        own_address = None if ca.host in _WILDCARDS else ca.host
    elif me is not None and client_port:
        host = java_host_string(client_address) if client_address else "0.0.0.0"
        replaced[me.sid] = dataclasses.replace(
            me, client_addr=Address(host, client_port), client_addr_from_static=True
        )
    try:
        qv = QuorumVerifier.from_properties(
            [(e.key, e.value) for e in members_from],
            members=replaced,
            multi_address=multi_parse,
        )
        check_counts(qv, standalone_enabled=standalone_enabled)
    except QuorumConfigError as exc:
        raise ConfigError(None, str(exc)) from None

    warnings: list[str] = []
    voters = len(qv.voting_members)
    distributed = not standalone_enabled or voters > 1
    if distributed:
        # parseDynamicConfig(warnings=true)
        if voters <= 2:
            warnings.append("No server failure will be tolerated. You need at least 3 servers.")
        elif voters % 2 == 0:
            warnings.append("Non-optimal configuration, consider an odd number of servers.")
    # setupPeerType: the servers list wins over peerType.
    listed_type = (
        LearnerType.OBSERVER
        if my_id is not None and my_id in qv.observing_members
        else LearnerType.PARTICIPANT
    )
    if listed_type is not configured_type:
        warnings.append(
            f"Peer type from servers list ({listed_type.name}) doesn't match peerType "
            f"({configured_type.name}). Defaulting to servers list."
        )
    if not distributed:
        return _Quorum(
            None, my_id, init_limit, sync_limit, listed_type, election_alg, listen_all,
            standalone_enabled, reconfig_enabled, cnx_timeout, tuple(warnings),
            own_port, own_address, (multi_enabled, multi_check, multi_timeout),
        )  # fmt: skip
    # checkValidity
    if init_limit == 0:
        raise ConfigError(None, "initLimit is not set")
    if sync_limit == 0:
        raise ConfigError(None, "syncLimit is not set")
    for key, value in (("initLimit", init_limit), ("syncLimit", sync_limit)):
        if value < 0:
            raise ConfigError(_where(last[key]), f"{key} must be positive, got {value}")
    if my_id is None:
        raise ConfigError(None, f"myid file is missing: {data_dir / 'myid'}")
    if my_id not in qv:
        # QuorumPeer.start -> RuntimeException (ZooKeeper exits with 1 there, we with 2).
        raise ConfigError(None, f"My id {my_id} not in the peer list")
    _check_clashes(qv, by_sid)
    return _Quorum(
        qv, my_id, init_limit, sync_limit, listed_type, election_alg, listen_all,
        standalone_enabled, reconfig_enabled, cnx_timeout, tuple(warnings),
        own_port, own_address, (multi_enabled, multi_check, multi_timeout),
    )  # fmt: skip


def _check_clashes(qv: QuorumVerifier, lines: Mapping[int, Entry]) -> None:
    """trizk's check (ZooKeeper only rejects quorum port == election port of one server, and
    in a reconfig ``checkAddressDuplicate``): no two listeners of the ensemble on one
    host:port. Hosts compare as written (``localhost`` and ``127.0.0.1`` differ); a wildcard
    client address counts as the member's own host."""
    seen: dict[tuple[str, int], tuple[int, str]] = {}
    for m in qv:
        for role, a in m.addresses():
            host = m.addr.host if a.host in _WILDCARDS else a.host
            other = seen.get((host, a.port))
            if other is not None:
                sid0, role0 = other
                shown = Address(host, a.port)
                e = lines.get(m.sid)
                raise ConfigError(
                    e.line_no or None if e is not None else None,
                    f"{shown} ({role} port) of server.{m.sid} conflicts with {shown} "
                    f"({role0} port) of server.{sid0}",
                )
            seen[(host, a.port)] = (m.sid, role)


def version_from_filename(name: str) -> str | None:
    """``QuorumPeerConfig.getVersionFromFilename``: the text after the last ``.`` when it is
    a hex long (``zoo.cfg.dynamic.100000000`` → ``"100000000"``), else ``None``."""
    i = name.rfind(".")
    if i < 0:
        return None
    text = name[i + 1 :]
    return text if javalang.parse_long(text, 16) is not None else None


def dynamic_entries(text: str, name: str) -> list[Entry]:
    """The entries of a ``dynamicConfigFile`` named ``name`` (``QuorumPeerConfig.parse``):
    membership keys only (``parseDynamicConfig``: "Unrecognised parameter"), no ``version``
    key; the version is the file name's hex suffix (none: version 0), added as an entry."""
    entries = parse_properties(text)
    for e in entries:
        if e.key == "version":
            raise ConfigError(None, f"{name}: dynamic file shouldn't have version inside")
        if not e.key.startswith(("server.", "group", "weight")):
            raise ConfigError(None, f"{name}: Unrecognised parameter: {e.key}")
    version = version_from_filename(name)
    if version is not None:
        entries.append(Entry(0, "version", version, f"version={version}"))
    return entries


def parse_config(
    text: str,
    *,
    properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    overrides: Mapping[str, str] | None = None,
    myid: str | None = None,
    dynamic: str | None = None,
    next_dynamic: str | None = None,
) -> ServerConfig:
    """Parse zoo.cfg text. ``overrides`` are zoo.cfg keys that replace the file's (the
    command line's ``--port``/``--data-dir``); ``properties`` are ``-D`` options by full name;
    ``myid`` is the content of ``dataDir/myid`` (``None``: no such file); ``dynamic`` and
    ``next_dynamic`` the contents of the ``dynamicConfigFile`` the text names and of its
    ``.dynamic.next`` file (``None``: no such file)."""
    entries = parse_properties(text)
    if overrides:
        entries += [Entry(0, k, v, f"{k}={v}") for k, v in overrides.items()]
    return _with_dynamic(entries, text, properties, myid, dynamic, next_dynamic)


def _with_dynamic(
    entries: list[Entry],
    text: str,
    properties: Mapping[str, str] | Iterable[tuple[str, str]],
    myid: str | None,
    dynamic: str | None,
    next_dynamic: str | None,
) -> ServerConfig:
    names = [e.value for e in entries if e.key == "dynamicConfigFile"]
    membership = dynamic_entries(dynamic, names[-1]) if names and dynamic is not None else None
    config = config_from_entries(entries, properties=properties, myid=myid, dynamic=membership)
    last_seen = None
    if names and next_dynamic is not None:
        try:
            last_seen = QuorumVerifier.from_properties(
                [(e.key, e.value) for e in parse_properties(next_dynamic)],
                multi_address=config.multi_address_enabled,
            )
        except (QuorumConfigError, ConfigError):
            last_seen = None  # QuorumPeerConfig.parse: "NextQuorumVerifier is initiated to null"
    return dataclasses.replace(config, initial_config=text, last_seen_quorum=last_seen)


def load_config(
    path: str | Path,
    *,
    properties: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    overrides: Mapping[str, str] | None = None,
) -> ServerConfig:
    """Read and parse a zoo.cfg file (the only function here that touches the filesystem).
    An unreadable file is a ``ConfigError`` with no line number."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(None, f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # what java.util.Properties.load(InputStream) assumes
    entries = parse_properties(text)
    if overrides:
        entries += [Entry(0, k, v, f"{k}={v}") for k, v in overrides.items()]
    data_dirs = [e.value for e in entries if e.key == "dataDir"]
    myid = read_myid(Path(data_dirs[-1])) if data_dirs else None
    names = [e.value for e in entries if e.key == "dynamicConfigFile"]
    dynamic = next_dynamic = None
    if names:
        # QuorumPeerConfig.parse: the dynamic file (a path as written: relative to the working
        # directory) and <zoo.cfg>.dynamic.next beside zoo.cfg
        dynamic = _read_text(Path(names[-1]))
        next_path = Path(str(path) + ".dynamic.next")
        next_dynamic = _read_text(next_path) if next_path.exists() else None
    config = _with_dynamic(entries, text, properties, myid, dynamic, next_dynamic)
    return dataclasses.replace(config, config_file=str(path))


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(None, f"Error processing {path}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def read_myid(data_dir: Path) -> str | None:
    """The text of ``data_dir/myid``, ``None`` if it is not a file (QuorumPeerConfig.setupMyId:
    ``myIdFile.isFile()``). Only the first line counts; at most 4 KiB are read."""
    path = data_dir / "myid"
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as f:
            raw = f.read(4096)
    except OSError as exc:
        raise ConfigError(None, f"cannot read {path}: {exc.strerror or exc}") from exc
    return raw.decode("utf-8", errors="replace")
