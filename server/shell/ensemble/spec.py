"""What a member knows of its ensemble: the ``server.N`` lines, the timing, the quorum.

:class:`EnsembleSpec` is the static configuration of one member (``myid``, every member's
quorum and election addresses, observers, tickTime/initLimit/syncLimit and the few ensemble
flags read from zoo.cfg); :func:`leader_outstanding_limit` is the share of the leader's
globalOutstandingLimit its learners' REQUESTs may hold. Nothing here touches a socket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trizk.jute.javalang import get_integer
from trizk.quorum.election.election import ElectionView
from trizk.quorum.verifier import QuorumVerifier
from trizk.quorum.zab.zab import Quorum, Timing
from trizk.server.shell import quorumauth
from trizk.server.shell.ensemble.testhook import PROPERTY, HoldSpec, parse_hold

if TYPE_CHECKING:
    from trizk.server.config.zoocfg import ServerConfig
    from trizk.server.shell.quorumtls import QuorumTLSConfig

__all__ = ["EnsembleSpec", "Member", "leader_outstanding_limit", "members_of"]


@dataclass(frozen=True)
class Member:
    """One ``server.N`` line: quorum and election addresses, participant or observer."""

    sid: int
    quorum: tuple[str, int]
    election: tuple[str, int]
    observer: bool = False
    #: a multi-address member's further (quorum, election) addresses (``a:1:2|b:3:4``)
    more: tuple[tuple[tuple[str, int], tuple[str, int]], ...] = ()

    @property
    def quorum_addrs(self) -> tuple[tuple[str, int], ...]:
        return (self.quorum, *(q for q, _ in self.more))

    @property
    def election_addrs(self) -> tuple[tuple[str, int], ...]:
        return (self.election, *(e for _, e in self.more))


def members_of(qv: QuorumVerifier) -> dict[int, Member]:
    """The members of a configuration, as the shell reaches them."""
    return {
        sid: Member(
            sid,
            (m.addr.host, m.addr.port),
            (m.election_addr.host, m.election_addr.port),
            observer=m.is_observer,
            more=tuple(((q.host, q.port), (e.host, e.port)) for q, e in m.more),
        )
        for sid, m in qv.members.items()
    }


@dataclass(frozen=True)
class EnsembleSpec:
    """What a member needs to know of its ensemble (a static configuration)."""

    myid: int
    members: Mapping[int, Member]
    timing: Timing
    #: ``QuorumVerifier.toString()``: sent in notifications and NEWLEADER
    config: bytes = b"version=0"
    #: ``quorumListenOnAllIPs``: bind the quorum and election ports on every address
    listen_on_all_ips: bool = False
    #: ``cnxTimeout`` (ms): connecting to another member's election port
    connect_timeout_ms: int = 5000
    #: quorum SASL (``quorum.auth.enableSasl``: server/shell/quorumauth.py); None: off
    quorum_auth: quorumauth.QuorumAuth | None = None
    #: ``zookeeper.forceSnapshotSync``: a leader syncs every learner by SNAP
    force_snap_sync: bool = False
    #: ``zookeeper.leader.ackLoggingFrequency``: the leader samples ACK_LATENCY every n zxids
    ack_logging_frequency: int = 1000
    #: the quorum verifier (hierarchical quorums: groups and weights); None: a majority
    verifier: QuorumVerifier | None = None
    #: ``multiAddress.enabled``: election connections announce every address (V2)
    multi_address: bool = False
    #: ``zookeeper.electionPortBindRetry``: binds of the election port before giving up
    election_bind_tries: int = 3
    #: ``-Dreadonlymode.enabled``: serve read-only clients while LOOKING for long enough
    read_only_mode: bool = False
    #: ``localSessionsEnabled``: the read-only role creates local sessions
    local_sessions: bool = False
    #: quorum TLS (``sslQuorum``, ``portUnification``, ``ssl.quorum.*``); None: plain links
    tls: QuorumTLSConfig | None = None
    #: ``reconfigEnabled``: configurations change and are written (:mod:`.reconfig`)
    reconfig_enabled: bool = False
    #: the zoo.cfg the member was started from (a reconfig-enabled member rewrites it)
    config_file: str | None = None
    #: ``<zoo.cfg>.dynamic.next``: a configuration seen, not activated
    last_seen: QuorumVerifier | None = None
    #: ``standaloneEnabled`` (how a peer's config string is checked)
    standalone_enabled: bool = True
    #: ``multiAddress.reachabilityCheckTimeoutMs`` when ``multiAddress.reachabilityCheckEnabled``
    #: (the default, 1000), else None: which addresses of a member are tried
    #: (:mod:`trizk.server.shell.reachability`)
    reachability_timeout_ms: int | None = 1000
    #: ``-D trizk.test.reconfigHold`` (tests only: :mod:`.testhook`); None: off
    reconfig_hold: HoldSpec | None = None

    @classmethod
    def from_config(cls, config: ServerConfig) -> EnsembleSpec:
        """The ensemble a quorum member's zoo.cfg describes (``server.N`` lines, myid)."""
        qv = config.quorum
        assert qv is not None and config.my_id is not None, "not a quorum configuration"
        members = members_of(qv)
        return cls(
            config.my_id,
            members,
            Timing(config.tick_time, config.init_limit, config.sync_limit),
            qv.to_string().encode(),
            listen_on_all_ips=config.quorum_listen_on_all_ips,
            connect_timeout_ms=config.cnx_timeout,
            quorum_auth=_quorum_auth(config),
            force_snap_sync=config.flag("zookeeper.forceSnapshotSync"),
            ack_logging_frequency=config.ack_logging_frequency,
            verifier=qv,
            multi_address=config.multi_address_enabled,
            election_bind_tries=_bind_tries(config),
            read_only_mode=config.read_only_mode,
            local_sessions=config.local_sessions_enabled,
            tls=_quorum_tls(config),
            reconfig_enabled=config.reconfig_enabled,
            config_file=config.config_file,
            last_seen=config.last_seen_quorum,
            standalone_enabled=config.standalone_enabled,
            reachability_timeout_ms=(
                config.multi_address_timeout_ms if config.multi_address_reachability_check else None
            ),
            reconfig_hold=parse_hold(config.properties.get(PROPERTY)),
        )

    @property
    def voters(self) -> frozenset[int]:
        return frozenset(s for s, m in self.members.items() if not m.observer)

    @property
    def observer(self) -> bool:
        """An observer of the configuration (a member a reconfig removed is a non-voting
        participant)."""
        m = self.members.get(self.myid)
        return m is not None and m.observer

    def quorum(self) -> Quorum:
        if self.verifier is None:
            return Quorum.majority_of(self.voters, self.config)
        return Quorum(self.voters, self.verifier.contains_quorum, self.config)

    def election_view(self) -> ElectionView:
        return ElectionView(self.voters, self.config, self.verifier)


def _quorum_tls(config: ServerConfig) -> QuorumTLSConfig | None:
    from trizk.server.shell.quorumtls import QuorumTLSConfig

    return QuorumTLSConfig.from_properties(
        config.properties,
        ssl_quorum=config.ssl_quorum,
        port_unification=config.port_unification,
        reload_cert_files=config.ssl_quorum_reload_cert_files,
        zookeeper_version=config.zookeeper_version,
    )


def _bind_tries(config: ServerConfig) -> int:
    """``Integer.getInteger("zookeeper.electionPortBindRetry", 3)``; negative means 3."""
    tries = get_integer(config.properties, "zookeeper.electionPortBindRetry", 3)
    return tries if tries >= 0 else 3


def leader_outstanding_limit(global_outstanding_limit: int, voters: int) -> int:
    """``LeaderZooKeeperServer.getGlobalOutstandingLimit``: the limit shared by the followers,
    divided by (voters - 1) in ensembles of more than two voters."""
    divisor = voters - 1 if voters > 2 else 1
    return max(global_outstanding_limit // divisor, 1)


def _quorum_auth(config: ServerConfig) -> quorumauth.QuorumAuth | None:
    """The member's quorum SASL logins (reads the JAAS file and keytabs; JaasError)."""
    qv = config.quorum
    assert qv is not None
    return quorumauth.load(
        config.quorum_auth,
        config.properties,
        frozenset(m.addr.host for m in qv.members.values()),
    )
