"""Settings and statistics shared by the roles of one server (front end, sequencer)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from . import acl as aclmod
from . import sasl as saslmod

__all__ = ["CoreConfig", "ServerStats", "Summary"]


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
    super_digest: str | None = None
    global_outstanding_limit: int = 1000
    #: authentication providers (ProviderRegistry); None: ip + digest with ``super_digest``
    auth: aclmod.AuthConfig | None = None
    #: users of the JAAS Server section; None: no SASL login configured
    sasl: saslmod.SaslServerConfig | None = None

    @property
    def min_timeout(self) -> int:
        return self.min_session_timeout if self.min_session_timeout > 0 else 2 * self.tick_time

    @property
    def max_timeout(self) -> int:
        return self.max_session_timeout if self.max_session_timeout > 0 else 20 * self.tick_time


class Summary:
    """ZooKeeper's ``AvgMinMaxPercentileCounter`` (mntr's ``avg_/min_/max_/cnt_/sum_`` and,
    for the advanced ones, ``p50_/p95_/p99_/p999_`` values of one summary). Percentiles are
    taken over the newest :data:`WINDOW` observations (ZooKeeper samples a reservoir)."""

    WINDOW = 4096
    __slots__ = ("count", "high", "low", "recent", "total")

    def __init__(self) -> None:
        self.count = self.total = self.high = 0
        self.low = -1
        self.recent: deque[int] = deque(maxlen=self.WINDOW)

    def add(self, value: int) -> None:
        self.count += 1
        self.total += value
        self.high = max(self.high, value)
        self.low = value if self.low < 0 else min(self.low, value)
        self.recent.append(value)

    def values(self, name: str, percentiles: bool) -> dict[str, int | float]:
        out: dict[str, int | float] = {
            f"avg_{name}": self.total / self.count if self.count else 0.0,
            f"min_{name}": max(self.low, 0),
            f"max_{name}": self.high,
            f"cnt_{name}": self.count,
            f"sum_{name}": self.total,
        }
        if percentiles:
            ordered = sorted(self.recent)
            for label, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)):
                out[f"{label}_{name}"] = ordered[int(q * (len(ordered) - 1))] if ordered else 0
        return out


@dataclass(slots=True)
class ServerStats:
    """Server-wide counters for the four-letter words."""

    packets_received: int = 0
    packets_sent: int = 0
    min_latency: int = -1
    max_latency: int = 0
    total_latency: int = 0
    latency_count: int = 0
    started: int = 0
    requests: dict[str, int] = field(default_factory=dict)
    #: mntr's ``<namespace>_quota_exceeded_error_per_namespace`` counters, in insertion order
    quota_exceeded: dict[str, int] = field(default_factory=dict)
    #: ServerMetrics summaries measured so far ("readlatency", "updatelatency", ...)
    summaries: dict[str, Summary] = field(default_factory=dict)

    def observe(self, name: str, value: int) -> None:
        s = self.summaries.get(name)
        if s is None:
            s = self.summaries[name] = Summary()
        s.add(value)

    def record(self, latency: int) -> None:
        if self.min_latency < 0 or latency < self.min_latency:
            self.min_latency = latency
        if latency > self.max_latency:
            self.max_latency = latency
        self.total_latency += latency
        self.latency_count += 1

    def reset(self) -> None:
        # ServerStats.reset -> ServerMetrics.resetAll: counter sets keep their keys at 0.
        for ns in self.quota_exceeded:
            self.quota_exceeded[ns] = 0
        self.packets_received = self.packets_sent = 0
        self.summaries.clear()
        self.min_latency = -1
        self.max_latency = self.total_latency = self.latency_count = 0
