"""Settings and statistics shared by the roles of one server (front end, sequencer)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trizk.server.auth import acl as aclmod
from trizk.server.auth import sasl as saslmod
from trizk.server.common import release
from trizk.server.common.latency import Latency
from trizk.server.common.servermetrics import ServerMetrics

__all__ = ["CoreConfig", "ServerStats"]


@dataclass(slots=True)
class CoreConfig:
    tick_time: int = 2000
    min_session_timeout: int = -1
    max_session_timeout: int = -1
    max_buffer: int = 0xFFFFF
    #: top byte of session ids; a standalone ZooKeeperServer uses 1 (createSessionTrackerServerId)
    server_id: int = 1
    extended_types: bool = False
    #: ``zookeeper.enforceQuota``: check quotas on create/setData (warn, refuse hard limits)
    enforce_quota: bool = False
    #: ``reconfigEnabled``: also read by a standalone server (ZooKeeperServerMain's
    #: ZooKeeperServer takes QuorumPeerConfig.isReconfigEnabled()), whose reconfig then passes
    #: that check and is UNIMPLEMENTED instead of RECONFIGDISABLED
    reconfig_enabled: bool = False
    super_digest: str | None = None
    global_outstanding_limit: int = 1000
    #: authentication providers (ProviderRegistry); None: ip + digest with ``super_digest``
    auth: aclmod.AuthConfig | None = None
    #: users of the JAAS Server section; None: no SASL login configured
    sasl: saslmod.SaslServerConfig | None = None
    #: ``trizk.zookeeperVersion``: the ZooKeeper release the server answers as
    #: (:mod:`trizk.server.common.release`)
    zookeeper_version: str = release.DEFAULT_RELEASE
    #: ``localSessionsEnabled`` (ensemble members only: a standalone server ignores it, as
    #: ZooKeeper's does): new sessions are local (:mod:`trizk.server.writes.localsessions`)
    local_sessions: bool = False
    #: ``localSessionsUpgradingEnabled``: an ephemeral create upgrades a local session
    local_sessions_upgrading: bool = False

    @property
    def zk39(self) -> bool:
        """Answer as the 3.9 line does (:func:`trizk.server.common.release.is_39`)."""
        return release.is_39(self.zookeeper_version)

    @property
    def min_timeout(self) -> int:
        return self.min_session_timeout if self.min_session_timeout > 0 else 2 * self.tick_time

    @property
    def max_timeout(self) -> int:
        return self.max_session_timeout if self.max_session_timeout > 0 else 20 * self.tick_time


@dataclass(slots=True)
class ServerStats:
    """Server-wide counters for the four-letter words."""

    packets_received: int = 0
    packets_sent: int = 0
    #: ``requestLatency``: every answered request's latency
    latency: Latency = field(default_factory=Latency)
    started: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    #: mntr's ``<namespace>_quota_exceeded_error_per_namespace`` counters, in insertion order
    quota_exceeded: dict[str, int] = field(default_factory=dict)
    #: the server's ServerMetrics (one per server, shared by its roles: the shell sets it)
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    #: ``clientResponseStats`` (BufferStats): sizes of the last/smallest/largest response
    #: serialized (header + body, without the length prefix), -1 before any
    last_response_size: int = -1
    min_response_size: int = -1
    max_response_size: int = -1

    def response_sent(self, size: int) -> None:
        """``ServerStats.updateClientResponseSize`` (every reply, auth and watch event
        ``ServerCnxn.serialize`` writes)."""
        self.last_response_size = size
        if self.min_response_size < 0 or size < self.min_response_size:
            self.min_response_size = size
        if size > self.max_response_size:
            self.max_response_size = size

    def view_metrics(self) -> dict[str, int | float | str]:
        """The measured mntr values: ServerMetrics' and this ServerStats' gauges."""
        out: dict[str, int | float | str] = dict(self.metrics.mntr_values())
        out["last_client_response_size"] = self.last_response_size
        out["min_client_response_size"] = self.min_response_size
        out["max_client_response_size"] = self.max_response_size
        return out

    def reset(self) -> None:
        # ServerStats.reset -> ServerMetrics.resetAll: counter sets keep their keys at 0
        # (the Prometheus provider's resetAllValues does nothing)
        if not self.metrics.prometheus:
            for ns in self.quota_exceeded:
                self.quota_exceeded[ns] = 0
        self.packets_received = self.packets_sent = 0
        self.last_response_size = self.min_response_size = self.max_response_size = -1
        self.metrics.reset()
        self.latency.reset()
