"""A test-only hook: hold a reconfig proposal so that a test kills the leader at a known point.

Theory
------
A reconfig interrupted by a leader crash ends one of two ways, and ZooKeeper decides which by
who logged the proposal: a survivor that logged it has the longest history, wins the election
and commits it as the new leader (once a quorum of the old *and* of the proposed configuration
acknowledges its NEWLEADER); when no survivor logged it, it is gone (the old leader, back,
is truncated). A test that wants either ending must kill the leader after the proposal reached
exactly the members it chose -- not "soon after the request", which is a race. ZooKeeper has no
such control, so a trizk member offers one, only when the system property
``trizk.test.reconfigHold`` is set (never by default; the member logs a warning):

``leader:<sid>,<sid>...`` (the list may be empty: ``leader:``)
    an established leader sends its first reconfig PROPOSAL, and every packet after it, only
    to the learners listed; the others hear nothing more from it (as if their links had
    stalled). It logs ``reconfigHold: proposed 0x<zxid> to [..]`` once the proposal is in its
    own log, and ``reconfigHold: ACK of 0x<zxid> from <sid>`` as each listed learner
    acknowledges it (that learner logged it).
``follower:drop``
    a synced follower drops the first reconfig PROPOSAL unlogged, logs
    ``reconfigHold: dropped 0x<zxid>``, and from then on ignores the leader and sends it
    nothing (no ACK, no PING answer) until the link ends.
``follower:log``
    the same, except that the proposal is logged first: ``reconfigHold: logged 0x<zxid>``
    once it is durable; its ACK is never sent.

A test waits for the marker line in the member's log, then SIGKILLs the leader
(tests/compat/test_reconfig_kill.py). The hook touches nothing else: a member whose role does
not match its setting behaves as without it.

Invariants
----------
* Without the property nothing here runs (the pumps hold ``None``).
* A hold trips once, on the first reconfig PROPOSAL of the broadcast phase (proposals replayed
  while syncing a learner never trip it); after it, a follower's hold drops every packet in
  both directions and a leader's drops every packet to an unlisted learner.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

from trizk.jute import records as r
from trizk.jute.codes import OpCode
from trizk.quorum.zab.zabwire import PacketType

__all__ = ["PROPERTY", "FollowerHold", "HoldSpec", "LeaderHold", "parse_hold", "reconfig_zxid"]

log = logging.getLogger("trizk.quorum")

#: the system property that sets the hook (``-D trizk.test.reconfigHold=...``)
PROPERTY = "trizk.test.reconfigHold"

_TYPE = struct.Struct(">i")
#: offset of TxnHeader.type in a marshalled txn entry (clientId 8, cxid 4, zxid 8, time 8)
_TYPE_AT = 28


@dataclass(frozen=True)
class HoldSpec:
    """A parsed ``trizk.test.reconfigHold``: the role it applies to and what it does."""

    role: str  # "leader" or "follower"
    #: leader: the learners (sids) that still receive the proposal and what follows it
    to: frozenset[int] = frozenset()
    #: follower: log the proposal before going silent (else drop it unlogged)
    log_it: bool = False


def parse_hold(text: str | None) -> HoldSpec | None:
    """The hold ``text`` describes, None when unset; ValueError names a bad value."""
    if text is None or not text.strip():
        return None
    role, _, rest = text.strip().partition(":")
    if role == "leader":
        try:
            return HoldSpec("leader", frozenset(int(s) for s in rest.split(",") if s.strip()))
        except ValueError:
            pass
    elif role == "follower" and rest in ("drop", "log"):
        return HoldSpec("follower", log_it=rest == "log")
    raise ValueError(
        f"{PROPERTY}={text!r}: expected leader:<sid,...>, follower:drop or follower:log"
    )


def reconfig_zxid(packet: r.QuorumPacket) -> int | None:
    """The zxid of a PROPOSAL that carries a reconfig txn, else None."""
    data = packet.data
    if packet.type != PacketType.PROPOSAL or data is None or len(data) < _TYPE_AT + 4:
        return None
    if _TYPE.unpack_from(data, _TYPE_AT)[0] != OpCode.RECONFIG:
        return None
    return packet.zxid


class LeaderHold:
    """The leader side (``leader:<sids>``): which packets go out once the hold tripped."""

    def __init__(self, spec: HoldSpec) -> None:
        self.spec = spec
        #: the held reconfig's zxid, once proposed
        self.zxid: int | None = None
        self._announced = False

    def send(self, sid: int, packet: r.QuorumPacket, established: bool) -> bool:
        """Whether ``packet`` goes to learner ``sid``."""
        if self.zxid is None:
            z = reconfig_zxid(packet) if established else None
            if z is None:
                return True
            self.zxid = z
        return sid in self.spec.to

    def persisted(self, zxids: list[int]) -> None:
        """The leader's own log now holds ``zxids``."""
        if self.zxid is not None and not self._announced and self.zxid in zxids:
            self._announced = True
            log.warning("reconfigHold: proposed %#x to %s", self.zxid, sorted(self.spec.to))

    def acked(self, sid: int, packet: r.QuorumPacket) -> None:
        """A learner's packet arrived: an ACK of the held proposal is announced."""
        if (
            self.zxid is not None
            and packet.type == PacketType.ACK
            and packet.zxid == self.zxid
            and sid in self.spec.to
        ):
            log.warning("reconfigHold: ACK of %#x from %d", self.zxid, sid)


class FollowerHold:
    """The follower side (``follower:drop`` / ``follower:log``)."""

    def __init__(self, spec: HoldSpec) -> None:
        self.spec = spec
        #: the held reconfig's zxid, once received
        self.zxid: int | None = None
        self._announced = False

    def receive(self, packet: r.QuorumPacket, synced: bool) -> bool:
        """Whether the leader's ``packet`` reaches the Learner machine."""
        if self.zxid is not None:
            return False
        z = reconfig_zxid(packet) if synced else None
        if z is None:
            return True
        self.zxid = z
        if not self.spec.log_it:
            self._announced = True
            log.warning("reconfigHold: dropped %#x", z)
        return self.spec.log_it

    def sends(self) -> bool:
        """Whether the follower still sends to the leader."""
        return self.zxid is None

    def persisted(self, zxids: list[int]) -> None:
        """The follower's log now holds ``zxids``."""
        if self.zxid is not None and not self._announced and self.zxid in zxids:
            self._announced = True
            log.warning("reconfigHold: logged %#x", self.zxid)
