"""What both role pumps share: handling a Zab machine's Readies in the task that made them.

Theory
------
A write through a follower crosses three processes and, inside each, the tasks that read a
quorum link, wait for the txn log's sync and serve the client sockets. Each of these used to
*kick* the role's pump task, which then took the machine's Ready: one Trio task switch (a
scheduler pass and an ``epoll_wait``) per hop, and on a loaded 2-core machine the pump often
ran 0.1-0.2 ms after the kick (measured with a per-hop trace of one setData; docs/performance.md
has the timeline). ZooKeeper's threads hand each other requests through queues, but every
one of them runs as soon as the OS schedules it; Trio runs one task at a time, so here the
handing over itself is the wait.

So whoever gave the machine work handles its Readies at once, in its own task
(:meth:`Pump.run_now`): a link's reader after a received chunk (every packet of the chunk is
stepped first, so a pass handles them together, as a LearnerHandler drains what it read), the
txn log's syncer once a sync returned (the ACKs of what it made durable leave from there), and
the client poller at the end of a pass (the REQUESTs its clients' writes made). The pump task
(:meth:`Pump.pump`) remains for what is kicked from elsewhere (ticks, proposals of the
leader's own clients, links that close) and for a *barrier* plan, whose persistence (epoch
files, TRUNC, SNAP install, a snapshot) must be awaited: handling it anywhere else would block
the task that found it.

During a pass the role's quorum links are corked (:meth:`.links.Link.cork`): the packets of
all its Readies leave in one write per link when it ends, as the link's writer task used to
gather them (measured: written one by one, every packet was a syscall and a wake-up of the
receiving member, and writes lost 20-40 %). A pass asked for from inside a pass (the front
end's flush kicks) is not needed: the pass takes every Ready made before it ends.

Invariants
----------
* Plans are handled one at a time and in the machine's order, whatever the task: a plan is
  taken only when the previous one is finished (``ReadyApplier.take``), and :meth:`run_now`
  does nothing but kick while the pump task holds a barrier plan, while a pass is under way
  (no re-entry from inside a pass), or once the role ended or the pump is not running.
* The order inside a plan is the one of ``quorum/zab/applier.py``: messages, persistence
  (pipelined appends do not wait for their sync), committed txns, the rest, ``finish``.
* An exception in a pass run from another task is the pump's: it is kept and raised by the
  pump task (the role ends exactly as if the pump had met it), never in the reader's or the
  syncer's task.
"""

from __future__ import annotations

from trizk.quorum.zab.applier import Plan
from trizk.server.shell.ensemble.hosts import RolePeer
from trizk.server.shell.ensemble.links import Link

__all__ = ["Pump"]


class Pump:
    """A role's pump: the Ready handling both roles share (see the module docstring).
    Subclasses say what a plan sends before its persistence (:meth:`_send`) and what its
    committed txns and other fields do after it (:meth:`_apply`)."""

    def __init__(self, peer: RolePeer) -> None:
        self.peer = peer
        #: the barrier plan the pump task is persisting (None: none)
        self._barrier: Plan | None = None
        #: why the role ended (a Ready's ``role``), once it did
        self._ended: str | None = None
        #: an exception met by a pass run from another task, for the pump task to raise
        self._error: Exception | None = None
        self._passing = False
        self._running = False

    @property
    def passing(self) -> bool:
        """A pass is under way: a Ready made before it ends is handled by it (a kick from
        inside a pass is not needed)."""
        return self._passing

    # ------------------------------------------------------------------ the two entries
    def run_now(self) -> None:
        """Handle the machine's Readies now, in the caller's task (see the module
        docstring); when that cannot be done here, kick the pump task instead. Inside the
        client poller's pass, nothing: the pass runs it once when it ends."""
        if self.peer.client_pass:
            return
        if (
            not self._running
            or self._passing
            or self._barrier is not None
            or self._ended is not None
            or self._error is not None
        ):
            self.peer.kick()
            return
        try:
            self._pass()
        except Exception as e:  # the pump's failure, raised in the pump task
            self._error = e
        if self._barrier is not None or self._ended is not None or self._error is not None:
            self.peer.kick()

    async def pump(self) -> str:
        """Hand the machine's Readies through the member's applier
        (``quorum/zab/applier.py``: send, persist, apply, advance) until the role ends;
        returns why."""
        peer = self.peer
        self._running = True
        try:
            while True:
                if self._error is not None:
                    raise self._error
                if self._ended is not None:
                    return self._ended
                plan = self._barrier
                if plan is not None:
                    await peer.persist(plan)
                    self._barrier = None
                    self._passing = True
                    try:
                        peer.advance_durable()  # earlier appends first: ACKs in zxid order
                        self._finish(plan)
                    finally:
                        self._passing = False
                    continue
                self._pass()
                if self._barrier is None and self._ended is None:
                    await peer.wait_kick()
        finally:
            self._running = False

    # ------------------------------------------------------------------ a pass
    def _pass(self) -> None:
        """Every Ready the machine has, up to a barrier (left to the pump task) or the
        role's end."""
        peer, applier = self.peer, self.peer.applier
        self._passing = True
        corked = self._links()
        for link in corked:
            link.cork()
        try:
            peer.advance_durable()  # what the syncs that returned made durable: ACKs
            while (plan := applier.take()) is not None:
                # Messages never wait for this Ready's persistence (what needs it comes from
                # advance): PROPOSALs go out while the leader's own append is written.
                self._send(plan)
                if plan.barrier:
                    self._barrier = plan
                    return
                peer.append(plan)
                peer.advance_durable()  # earlier appends first: ACKs in zxid order
                self._finish(plan)
                if self._ended is not None:
                    return
        finally:
            self._passing = False
            for link in corked:
                link.uncork()

    def _finish(self, plan: Plan) -> None:
        self._apply(plan)
        self.peer.applier.finish()
        self.peer.host.wake()
        if plan.ready.role is not None:
            self._ended = plan.ready.role.reason

    # ------------------------------------------------------------------ the roles' parts
    def _links(self) -> list[Link]:
        """The quorum links a pass sends on (corked during it: one write each per pass)."""
        raise NotImplementedError

    def _send(self, plan: Plan) -> None:
        """What the plan does before its persistence: messages, closes, configurations."""
        raise NotImplementedError

    def _apply(self, plan: Plan) -> None:
        """What the plan does once persisted: its committed txns and its other fields
        (before ``finish``)."""
        raise NotImplementedError
