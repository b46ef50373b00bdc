"""The two narrow interfaces of an ensemble member, as protocols.

* :class:`PeerHost` -- what a member (:class:`~.peer.QuorumPeer`) needs of the server around
  it (:class:`~trizk.server.shell.app.TrizkServer`): its clock, metrics and txn log, the
  installation of a role and the flush of what the role's front end wrote.
* :class:`RolePeer` -- what a role's pump (:mod:`.leading`, :mod:`.learning`) needs of its
  member: its Ready applier and the disk it persists plans on, the quorum links, the role
  factory and the member's state. The pumps see the member only through it.
"""

from __future__ import annotations

from typing import Protocol

import trio

from trizk.quorum.reconfig import LeaderConfigView
from trizk.quorum.zab.applier import Plan, ReadyApplier
from trizk.quorum.zab.zabwire import SnapshotPayload
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.common.servermetrics import ServerMetrics
from trizk.server.roles.factory import Role, RoleFactory
from trizk.server.shell.clock import Clock
from trizk.server.shell.ensemble.links import Link, QueueMeter
from trizk.server.shell.ensemble.reconfig import MemberConfigs
from trizk.server.shell.ensemble.spec import EnsembleSpec
from trizk.server.shell.persistence import Persistence
from trizk.server.shell.poller import Poller
from trizk.storage.formats.treeio import SnapshotBuilder
from trizk.storage.tree.replica import Replica

__all__ = ["PeerHost", "RolePeer"]


class PeerHost(Protocol):
    """What an ensemble member needs of the server around it (the shell,
    :class:`~trizk.server.shell.app.TrizkServer`): its clock, its metrics, its txn log, the
    installation of a role, and the flush of what the role's front end wrote."""

    @property
    def clock(self) -> Clock:
        """The server's one clock: Zab's times and ticks come from it."""
        ...

    @property
    def server_metrics(self) -> ServerMetrics:
        """ServerMetrics: one per server, every role adds to it."""
        ...

    @property
    def persistence(self) -> Persistence:
        """The data directory: txn log, snapshots (loaded)."""
        ...

    def install(self, role: Role) -> None:
        """Serve clients through ``role`` from now on (the previous role's are closed)."""
        ...

    def wake(self) -> None:
        """Flush what the front end wrote (after a Ready was applied)."""
        ...


class RolePeer(Protocol):
    """What a role's pump needs of its ensemble member (:class:`~.peer.QuorumPeer`)."""

    #: the server's clock: every time the Zab machines see
    clock: Clock
    metrics: ServerMetrics
    spec: EnsembleSpec
    core_config: CoreConfig
    #: builds the role served once established (or synced)
    roles: RoleFactory
    #: the role served now; committed txns go to its sink
    role: Role
    replica: Replica
    host: PeerHost
    #: "looking", "leader", "follower" or "observer"
    state: str
    #: reconfig enabled: the member's configurations (None: static)
    configs: MemberConfigs | None
    #: the client poller, whose passes read plain quorum links (None: readers read them)
    poller: Poller | None

    @property
    def client_pass(self) -> bool:
        """The client poller's pass is under way (it runs the pump when it ends)."""
        ...

    def kick(self) -> None:
        """Something may have given the role's Zab machine work."""
        ...

    async def wait_kick(self) -> None:
        """Wait for the next :meth:`kick`."""
        ...

    def add_link(self, stream: trio.abc.Stream) -> Link:
        """A new quorum-port connection (a leader's learner), numbered."""
        ...

    def link(self, lk: int) -> Link | None:
        """Link ``lk``, if it is still open."""
        ...

    def links(self) -> list[Link]:
        """The open quorum links."""
        ...

    def remove_link(self, lk: int) -> None: ...

    def queue_meter(self, sid: int) -> QueueMeter:
        """The measure of learner ``sid``'s queue (``learner_handler_qp_*``)."""
        ...

    #: the member's one Ready applier (each pump starts it with its machine)
    applier: ReadyApplier

    def append(self, plan: Plan) -> None:
        """A pipelined plan's entries appended, not waiting for their sync (then
        ``applier.persisted``)."""
        ...

    async def persist(self, plan: Plan) -> None:
        """A barrier plan's persistence on the data directory (then ``applier.persisted``)."""
        ...

    def advance_durable(self) -> None:
        """Advance the appends whose sync has returned since, oldest first."""
        ...

    def serve(self, role: Role, zxid: int, now: int) -> None:
        """A Zab role reached broadcast at ``zxid``: serve clients through ``role``."""
        ...

    def init_config(self) -> None:
        """/zookeeper/config shows this member's view of the ensemble."""
        ...

    def snapshot_builder(self) -> SnapshotBuilder:
        """The sink a learner's decoder builds the next SNAP payload's tree into."""
        ...

    def snapshot_arrived(self, payload: SnapshotPayload) -> None:
        """A learner's reader decoded a SNAP payload (its tree built as it came)."""
        ...

    def see_config(self, data: bytes) -> None:
        """A configuration proposed, not activated: the last seen one (reconfig enabled)."""
        ...

    def process_reconfig(self, data: bytes | None, designated: int | None = None) -> bool:
        """Activate a configuration (the last seen one when ``data`` is None), then
        /zookeeper/config shows the committed one. True: this member's role or leader
        changes with it."""
        ...

    def leader_config(self) -> LeaderConfigView:
        """A reconfig-enabled leader's configurations, for prep."""
        ...
