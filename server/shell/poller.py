"""Plain-TCP client connections served by one Trio task over a selector (the fast shell).

Theory
------
A ZooKeeper client mostly holds one request in flight: it sends a frame, waits for the reply,
sends the next. Served as one Trio task per connection (or two: a reader and a writer), every
such request pays for a speculative ``recv`` that fails, an ``epoll_ctl`` re-arming the socket,
a task switch to the reader, a wake-up of the writer and a second task switch -- several times
the core's own work. ZooKeeper's NIOServerCnxnFactory instead keeps every socket registered in
one selector and handles whatever is ready in one pass. This module does the same inside Trio:

* every plain client socket is registered once, in this module's own :mod:`selectors`
  selector (epoll on Linux, kqueue on BSD/macOS), and stays registered; only its interest
  changes (read, write, both, none);
* one Trio task, :meth:`Poller.run`, waits with :func:`trio.lowlevel.wait_readable` on the
  selector's own file descriptor (readable when any registered socket is ready), then takes
  every ready socket in one ``select(0)``: a readable socket is read once and its bytes go to
  the core; a writable one is flushed;
* output is written *inline* by whoever produced it: after the core answered a request, or
  after a commit produced replies and watch events, :meth:`Poller.flush` sends the
  connection's queued bytes at once with a non-blocking ``send``. Only a short send gives the
  socket write interest, and the rest goes out when the selector reports it writable.

Because the poller task waits on the selector through Trio, it yields to every other task
(ticks, the AdminServer) between passes; a pass never blocks. On a standalone server the
selector also holds the fsync helper's socket (:meth:`Poller.watch`), and the pass hooks let
the txn log append what a pass proposed when it ends, so the group commit runs in this task
too (:meth:`trizk.server.shell.persistence.Persistence.drive_with`).

Invariants
----------
* A connection is read only while it is open, not throttled (``globalOutstandingLimit``: the
  core sets ``conn.throttled``), not backlogged (more than ``soft_limit`` bytes of unsent
  output, until it drains completely) and holds no input left from its last turn.
* Turns: one read gives the core at most a turn's budget of frames (and none past the soft
  output limit); a connection with input left goes on at once while nobody else is waiting
  (:meth:`Poller.alone`: keeping a client's burst together keeps its writes in few group
  commits), else waits in ``turns`` and gets its next turn after every connection ready
  meanwhile got one. A client pipelining thousands of requests delays the others by one turn,
  and a client that does not read stops being served, not only read.
* More than ``hard_limit`` bytes of unsent output (a client that never reads its watch events)
  closes the connection with a log line.
* A closed connection's queued output is flushed before its socket is closed (a four-letter
  word's answer, the reply to closeSession); the socket is closed as soon as the output is
  gone, the peer stops reading it for ``linger_ms`` (then it is dropped), or a send fails.
* Every socket the poller owns is in ``open`` until ``finish`` unregisters it from the
  selector (if it is registered: one watched for nothing is not) and closes it, exactly once.
  When the poller's task ends (the server stops), it closes every socket it still owns.
"""

from __future__ import annotations

import logging
import selectors
import socket
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import trio

from trizk.server.frontend.connection import ClientConnection

if TYPE_CHECKING:
    from trizk.server.frontend.core import FrontEnd

log = logging.getLogger("trizk.server")

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE


class Watchable(Protocol):
    """A socket the poller can watch (a standard library or a Trio socket)."""

    def fileno(self) -> int: ...


class Owner(Protocol):
    """What the poller needs from the server that owns the connections."""

    def feed(self, peer: SockPeer, data: bytes) -> None:
        """Hand received bytes (or, after a throttle ends, nothing) to the peer's core and
        flush what that produced."""

    def finished(self, peer: SockPeer) -> None:
        """The connection's socket is closed: forget it (core, counters)."""


class SockPeer:
    """One plain client socket and its connection; ``core`` is the front end that accepted it
    (an ensemble member's role may change while it is open)."""

    __slots__ = (
        "backlogged",
        "closed_at",
        "conn",
        "core",
        "ip",
        "mask",
        "more",
        "paused",
        "queued",
        "secure",
        "sock",
    )

    def __init__(
        self, sock: socket.socket, conn: ClientConnection, core: FrontEnd, ip: str
    ) -> None:
        self.sock = sock
        self.conn = conn
        self.core = core
        self.ip = ip
        self.secure = False
        #: events the selector watches for (0: not registered)
        self.mask = 0
        #: more than the soft limit was queued: reading waits until the output has drained
        self.backlogged = False
        #: reading stopped because the core throttled the connection; its buffered frames are
        #: processed once the throttle ends
        self.paused = False
        #: the core stopped with input left (its turn's budget, or the soft output limit)
        self.more = False
        #: waiting in the poller's turn queue
        self.queued = False
        #: monotonic ms when the connection was closed with output still queued, else -1
        self.closed_at = -1


class _Watched:
    """A socket that is not a client's, watched for reading (the fsync helper's, a quorum
    link's)."""

    __slots__ = ("ready",)

    def __init__(self, ready: Callable[[], None]) -> None:
        self.ready = ready


def _nothing() -> None:
    pass


class Poller:
    """The selector, the task that waits on it, and the inline flush."""

    def __init__(
        self,
        owner: Owner,
        now: Callable[[], int],
        *,
        receive_size: int,
        soft_limit: int,
        hard_limit: int,
        linger_ms: int,
    ) -> None:
        self.owner = owner
        self._now = now
        self.receive_size = receive_size
        # One receive buffer for every socket, copied out per read. sock.recv(n) allocates n
        # bytes and shrinks them: at 256 KiB that is above glibc's mmap threshold, so each
        # read became mmap + mremap + munmap (measured: ~50 instead of ~26 us of CPU per
        # closed-loop getData, depending on whether something had raised the threshold).
        self._buffer = bytearray(receive_size)
        self._view = memoryview(self._buffer)
        self.soft_limit = soft_limit
        self.hard_limit = hard_limit
        self.linger_ms = linger_ms
        self.selector = selectors.DefaultSelector()
        #: connections whose buffered input waits for its next turn, oldest first
        self.turns: deque[SockPeer] = deque()
        #: every socket this poller owns, registered in the selector or not (a throttled
        #: connection with nothing to send is watched for nothing)
        self.open: set[SockPeer] = set()
        #: called at the start and at the end of every pass (the standalone committer appends
        #: what a pass proposed when it ends: trizk.server.shell.persistence.Persistence.drive_with)
        self.before_pass: Callable[[], None] = _nothing
        self.after_pass: Callable[[], None] = _nothing
        self._closed = False

    @staticmethod
    def supported() -> bool:
        """Trio can wait on this platform's selector only if it has a file descriptor
        (epoll, kqueue, /dev/poll; not Windows' select())."""
        sel = selectors.DefaultSelector()
        try:
            return hasattr(sel, "fileno")
        finally:
            sel.close()

    # ------------------------------------------------------------------ registration
    def add(self, peer: SockPeer) -> None:
        peer.sock.setblocking(False)
        self.open.add(peer)
        self._interest(peer)

    def _interest(self, peer: SockPeer) -> None:
        """Watch ``peer`` for what it needs now."""
        conn = peer.conn
        want = 0
        if conn.out:
            want |= _WRITE
        if conn.throttled:
            peer.paused = True
        elif not (conn.closed or peer.backlogged):
            if peer.more:
                # input left from its last turn: no more is read until that is processed
                if not peer.queued:
                    peer.queued = True
                    self.turns.append(peer)
            else:
                want |= _READ
        if want == peer.mask:
            return
        sel = self.selector
        if peer.mask == 0:
            sel.register(peer.sock, want, peer)
        elif want == 0:
            sel.unregister(peer.sock)
        else:
            sel.modify(peer.sock, want, peer)
        peer.mask = want

    def watch(self, sock: Watchable, ready: Callable[[], None]) -> None:
        """Call ``ready()`` in a pass whenever ``sock`` (not a client's: the fsync helper's,
        a quorum link's) is readable, until :meth:`unwatch` -- which its owner calls before
        it closes ``sock`` (the selector knows sockets by number, and a closed one's number
        may come back as another's)."""
        self.selector.register(sock, _READ, _Watched(ready))

    def unwatch(self, sock: Watchable) -> None:
        if not self._closed:
            self.selector.unregister(sock)

    def read_now(self, peer: SockPeer) -> None:
        """Read ``peer`` at once, as a pass would (a socket just accepted: a client sends
        its ConnectRequest right after connecting, so it has usually arrived by the time the
        accept is handled, and a poller wake-up is saved). Call it between
        :attr:`before_pass` and :attr:`after_pass`."""
        if peer in self.open and peer.mask & _READ:
            self._readable(peer)

    def finish(self, peer: SockPeer) -> None:
        """Unregister and close the socket, then tell the owner (once)."""
        if peer not in self.open:
            return
        self.open.discard(peer)
        if peer.mask:
            self.selector.unregister(peer.sock)
            peer.mask = 0
        peer.sock.close()
        self.owner.finished(peer)

    # ------------------------------------------------------------------ output
    def flush(self, peer: SockPeer) -> None:
        """Send what ``peer``'s connection has queued, without blocking; then close it if it
        is closed and drained, or adjust what the selector watches."""
        conn = peer.conn
        out = conn.out
        if peer not in self.open:
            out.clear()
            return
        if len(out) > self.hard_limit:
            log.warning(
                "%s: %d bytes of unsent output (limit %d), closing connection",
                conn,
                len(out),
                self.hard_limit,
            )
            conn.close("output buffer limit exceeded")
            out.clear()
        sent = False
        while out:
            try:
                n = peer.sock.send(out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                conn.close(conn.close_reason or "send failed")
                out.clear()
                break
            del out[:n]
            sent = True
        if sent:
            conn.last_io = self._now()
        if not out:
            peer.backlogged = False
            if conn.closed:
                self.finish(peer)
                return
        elif len(out) > self.soft_limit:
            peer.backlogged = True
        if conn.closed and peer.closed_at < 0:
            peer.closed_at = self._now()
        self._interest(peer)

    def alone(self, peer: SockPeer) -> bool:
        """No other connection waits for a turn and no other socket is ready: ``peer`` may
        go on with its input now (epoll is level-triggered: looking consumes nothing)."""
        if self.turns:
            return False
        return all(key.data is peer for key, _ in self.selector.select(0))

    def expired_lingerers(self, now: int) -> list[SockPeer]:
        """Closed connections whose peer has not taken their last output for ``linger_ms``."""
        return [p for p in self.open if 0 <= p.closed_at <= now - self.linger_ms]

    def drop(self, peer: SockPeer) -> None:
        """Close now, discarding unsent output."""
        peer.conn.out.clear()
        self.finish(peer)

    # ------------------------------------------------------------------ input
    def _readable(self, peer: SockPeer) -> None:
        conn = peer.conn
        try:
            n = peer.sock.recv_into(self._buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            n = -1
        if n <= 0:
            # NIOServerCnxn.handleFailedRead: the client closed its end (EOF, not an error)
            peer.core.stats.metrics.connection_drop_count += n == 0
            conn.close(conn.close_reason or "client closed the connection")
            self.flush(peer)
            return
        self.owner.feed(peer, self._view[:n].tobytes())

    async def run(self) -> None:
        """Serve the registered sockets until cancelled; then close every one of them (a
        stopped server leaves no client connection open)."""
        sel = self.selector
        fd = sel.fileno()
        turns = self.turns
        ready: list[tuple[selectors.SelectorKey, int]] = []
        try:
            while True:
                if turns or ready:
                    # Let the other tasks run, then take the turns and look again: while the
                    # clients keep the poller busy, a checkpoint is cheaper than waiting on the
                    # selector through Trio (its epoll re-arms the selector's fd every time).
                    await trio.lowlevel.checkpoint()
                else:
                    await trio.lowlevel.wait_readable(fd)
                ready = sel.select(0)
                self.before_pass()
                for key, events in ready:
                    peer: SockPeer = key.data
                    if peer not in self.open:
                        if peer.__class__ is _Watched:
                            peer.ready()
                        continue  # (else closed earlier in this pass)
                    if events & _WRITE:
                        self.flush(peer)
                    if events & _READ and peer.mask & _READ:
                        self._readable(peer)
                # one turn for each connection that was waiting for one when the pass began
                for _ in range(len(turns)):
                    peer = turns.popleft()
                    peer.queued = False
                    if peer in self.open and peer.more:
                        self.owner.feed(peer, b"")
                self.after_pass()
        finally:
            self._closed = True
            for peer in list(self.open):
                peer.conn.close(peer.conn.close_reason or "the server is stopping")
                self.drop(peer)
            sel.close()
