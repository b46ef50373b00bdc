"""An ensemble member (``QuorumPeer``) and its Zab roles, split by job. A shell: not compiled.

* :mod:`.spec` -- what a member knows of its ensemble (:class:`EnsembleSpec`, :class:`Member`);
* :mod:`.links` -- quorum-port links: inline writes, output queue and writer, the reader, the
  queue meter;
* :mod:`.hosts` -- the narrow interfaces: :class:`PeerHost` (the server, seen by a member) and
  :class:`~.hosts.RolePeer` (the member, seen by its pumps);
* :mod:`.leading` -- LEADING: the leader's pump, :class:`ZabCommitter`,
  :class:`LearnerRequests`;
* :mod:`.learning` -- FOLLOWING / OBSERVING: the learner's pump;
* :mod:`.pumping` -- what both pumps share: a Ready handled in the task that made it;
* :mod:`.readonly` -- when a LOOKING member serves read-only clients (readonlymode.enabled);
* :mod:`.peer` -- :class:`QuorumPeer`: LOOKING -> a role -> LOOKING.
"""

from trizk.server.shell.ensemble.hosts import PeerHost
from trizk.server.shell.ensemble.leading import LearnerRequests, ZabCommitter
from trizk.server.shell.ensemble.links import QueueMeter
from trizk.server.shell.ensemble.peer import QuorumPeer
from trizk.server.shell.ensemble.spec import EnsembleSpec, Member, leader_outstanding_limit

__all__ = [
    "EnsembleSpec",
    "LearnerRequests",
    "Member",
    "PeerHost",
    "QueueMeter",
    "QuorumPeer",
    "ZabCommitter",
    "leader_outstanding_limit",
]
