"""Quorum-port links: one connection's output queue and writer, and the reader that feeds a
Zab machine.

A :class:`Link`'s output is a byte buffer the pump appends encoded packets to and one task
writes out (a leader measures each learner's queue as ZooKeeper does: :class:`QueueMeter`); it is
capped (:data:`LINK_OUTPUT_LIMIT`: a peer that stopped reading loses the
link). :func:`read_link` decodes a link's bytes (``quorum/zab/zabwire.py``'s stream decoder,
which caps what a peer can make us buffer) and hands every packet and SNAP payload to the
machine; a peer that sends bytes that cannot be a quorum stream loses its link.

A leader's SNAP body is *streamed* (:meth:`Link.stream_pieces`): its writer task makes the
body piece by piece (:class:`PieceSource`) as the socket takes them, between the pump's passes, so
the walk of a large tree neither holds up the pump's other work (COMMITs to the other
followers, client replies) nor buffers the whole body. ZooKeeper's LearnerHandler does the
same on its own thread: it writes ``serializeSnapshot`` onto the socket while the leader goes on
committing, and the packets queued for the learner meanwhile (``startForwarding`` put it
among the forwarding handlers) wait in ``queuedPackets`` until its sender thread starts after
the snapshot. Here they wait in the link's *held* bytes: while a stream is under way, what is
sent on the link is held and follows the body's last piece, in the order it was sent.

Invariants
----------
* Bytes leave in the order they were sent; a streamed body's pieces come after what was sent
  before :meth:`Link.stream_pieces`, and everything sent during the stream after its last piece.
* A piece is made only once the socket has taken everything before it (the socket's own
  buffer is the pipeline): a learner that does not read stalls the walk, not the pump, and
  the link holds at most one piece unsent.
* The held bytes and the output count together against :data:`LINK_OUTPUT_LIMIT`.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    QuorumStreamError,
    StreamEvent,
)
from trizk.server.common.servermetrics import Summary
from trizk.server.shell.poller import Poller

__all__ = [
    "LINK_OUTPUT_LIMIT",
    "MARKER_PACKET_INTERVAL",
    "RECEIVE_SIZE",
    "Link",
    "PieceSource",
    "QueueMeter",
    "read_link",
    "until_done",
]

log = logging.getLogger("trizk.quorum")

#: Unsent bytes a quorum link may hold before the link is dropped (a learner that stopped
#: reading; ZooKeeper's LearnerHandler queue is unbounded, its syncLimit check catches it).
LINK_OUTPUT_LIMIT = 256 * 1024 * 1024
#: what a link reads at once: receive_some(n) allocates n bytes and shrinks them, so n stays
#: under glibc's default mmap threshold (128 KiB) or every read maps and unmaps
RECEIVE_SIZE = 64 * 1024


#: ``LearnerHandler.markerPacketInterval``: every so many queued packets a marker measures
#: the queue's latency
MARKER_PACKET_INTERVAL = 1000
#: packets a LearnerHandler writes to the socket itself, outside its queue
_UNQUEUED = frozenset({PacketType.LEADERINFO, PacketType.SNAP})
#: packets it adds to the queue without ``queuePacket`` (no marker counting)
_UNMARKED = frozenset({PacketType.NEWLEADER, PacketType.UPTODATE})


class QueueMeter:
    """One learner handler's ``queuedPackets`` as ZooKeeper 3.8 measures it (pure).

    ``LearnerHandler.sendPackets`` adds, for every item it takes from the queue, the queue's
    remaining size to ``LEARNER_HANDLER_QP_SIZE`` (summary set ``learner_handler_qp_size``,
    key = the learner's sid); ``queuePacket`` puts a marker after every
    :data:`MARKER_PACKET_INTERVAL`-th packet (the first included), and taking a marker adds its
    time in the queue (ms) to ``LEARNER_HANDLER_QP_TIME`` (``learner_handler_qp_time_ms``).
    Here the queue is the link's unsent output; the writer takes it whole."""

    def __init__(self, sizes: Summary, times: Summary) -> None:
        self.sizes = sizes
        self.times = times
        #: queued items: None a packet, an int a marker (the time it was queued)
        self.items: deque[int | None] = deque()
        self.counter = 0

    def queued(self, ptype: int, now: int) -> None:
        if ptype in _UNQUEUED:
            return
        self.items.append(None)
        if ptype not in _UNMARKED:
            if self.counter % MARKER_PACKET_INTERVAL == 0:
                self.items.append(now)
            self.counter += 1

    def taken(self, now: int) -> None:
        items = self.items
        while items:
            item = items.popleft()
            self.sizes.add(len(items))
            if item is not None:
                self.times.add(now - item)


class PieceSource(Protocol):
    """What a link streams (:meth:`Link.stream_pieces`): its bytes, one piece per call."""

    def next_piece(self) -> tuple[bytes, bool]:
        """The next piece, and whether it is the last."""
        ...


class Link:
    """A quorum-port connection's output: packets queued by the pump, sent inline or by one
    task.

    On a plain TCP link (a :class:`trio.SocketStream`) :meth:`send` writes at once with one
    non-blocking ``write`` while nothing is queued or being sent: a PROPOSAL, ACK or COMMIT
    leaves in the pump's own pass, as a LearnerHandler's sender thread writes what it takes
    from its queue, instead of a task switch per packet to the writer (measured: the writer
    task woke 0.1-0.5 ms after the pump queued, on a loaded 2-core machine). What the socket
    does not take, and everything on a TLS or SASL-wrapped link, goes out through
    :meth:`writer` in queue order (only one of the two writes at a time)."""

    def __init__(self, link: int, stream: trio.abc.Stream) -> None:
        self.link = link
        self.stream = stream
        self.out = bytearray()
        self.ready = trio.Event()
        self.closed = False
        #: the leader's measure of this learner's queue (once its sid is known)
        self.meter: QueueMeter | None = None
        self.now: Callable[[], int] | None = None
        #: the socket written inline (None: a wrapped stream, only the writer task writes)
        self._socket = stream.socket if type(stream) is trio.SocketStream else None
        #: the writer task is inside ``send_all`` (inline writes would interleave)
        self._sending = False
        #: sends are gathered until :meth:`uncork`
        self._corked = False
        #: the body being streamed (None: none), and what was sent meanwhile
        self._stream: PieceSource | None = None
        self._held = bytearray()

    @property
    def streaming(self) -> bool:
        """A streamed body is under way (what is sent now is held until its end)."""
        return self._stream is not None

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        if self._stream is not None:
            self._held += data
            self._check_limit()
        elif self._corked or self.out or self._sending or self._socket is None:
            self._queue(data)
        else:
            self._write(data)

    def stream_pieces(self, source: PieceSource) -> None:
        """After what was sent so far, the pieces of ``source``, made by the writer task one at
        a time as the socket takes them; what is sent until the last piece is held and
        follows it (see the module docstring)."""
        assert self._stream is None, "one stream at a time"
        if self.closed:
            return
        self._stream = source
        self.ready.set()

    def _next_piece(self) -> None:
        """The writer's turn to make a piece (nothing else is queued): into the output, and
        after the last one the held bytes."""
        source = self._stream
        assert source is not None
        try:
            piece, last = source.next_piece()
        except Exception:  # the link's failure, not the leader's
            log.exception("quorum link %d: the streamed body failed; closing it", self.link)
            self._stream = None
            self.close()
            return
        self.out += piece
        if last:
            self._stream = None
            if self._held:
                self.out += self._held
                self._held = bytearray()

    def cork(self) -> None:
        """Until :meth:`uncork`, gather what is sent: a pump pass's packets (the PROPOSALs and
        COMMITs of several Readies, a learner's ACKs) leave in one write, as a
        LearnerHandler's buffered stream flushes once its queue is empty."""
        self._corked = True

    def uncork(self) -> None:
        self._corked = False
        if not self.out or self.closed:
            return
        if self._socket is not None and not self._sending:
            data = bytes(self.out)
            self.out.clear()
            self._write(data)
        else:
            self.ready.set()

    def _write(self, data: bytes) -> None:
        """Write inline (nothing queued, nothing being sent); queue what the socket did not
        take."""
        sock = self._socket
        assert sock is not None
        # (fileno() is -1 once the socket is closed: its number may belong to another file)
        fd = sock.fileno()
        if fd < 0:
            self._queue(data)
            return
        try:
            n = os.write(fd, data)
        except BlockingIOError:
            n = 0
        except OSError as e:  # the reader sees the link end too
            log.info("quorum link %d: send failed (%s)", self.link, e)
            self.close()
            return
        if self.meter is not None and self.now is not None:
            self.meter.taken(self.now())
        if n < len(data):
            self._queue(data[n:])

    def _queue(self, data: bytes) -> None:
        self.out += data
        self._check_limit()
        if not self._corked:
            self.ready.set()

    def _check_limit(self) -> None:
        unsent = len(self.out) + len(self._held)
        if unsent > LINK_OUTPUT_LIMIT and not self.closed:
            log.warning("quorum link %d: %d bytes unsent, closing it", self.link, unsent)
            self.close()

    def close(self) -> None:
        self.closed = True
        self.ready.set()

    async def writer(self) -> None:
        try:
            while True:
                if self.out:
                    data = bytes(self.out)
                    self.out.clear()
                    if self.meter is not None and self.now is not None:
                        self.meter.taken(self.now())
                    self._sending = True
                    try:
                        await self.stream.send_all(data)
                    finally:
                        self._sending = False
                    continue
                if self.closed:
                    return
                if self._stream is not None:
                    self._next_piece()
                    continue
                self.ready = trio.Event()
                await self.ready.wait()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.closed = True


async def read_link(
    stream: trio.abc.Stream,
    step: Callable[[StreamEvent], None],
    kick: Callable[[], None],
    decoder: QuorumStreamDecoder | None = None,
    poller: Poller | None = None,
) -> str:
    """Feed a quorum link's packets (and SNAP payloads) to ``step`` until the peer closes it,
    it breaks, or it carries bytes that cannot be a quorum stream; returns why it ended.
    ``decoder``: one made with a snapshot sink (a learner building its tree as a SNAP comes).
    ``kick()`` follows each chunk's packets.

    With the member's client ``poller``, a plain TCP link is read in the poller's passes (see
    :func:`_read_in_passes`); otherwise, and for a wrapped stream (TLS, SASL), by this task."""
    if decoder is None:
        decoder = QuorumStreamDecoder()
    sock = stream.socket if type(stream) is trio.SocketStream else None
    if sock is not None and poller is not None:
        return await _read_in_passes(sock, poller, step, kick, decoder)
    while True:
        try:
            if sock is None:
                data = await stream.receive_some(RECEIVE_SIZE)
            else:
                data = await _receive(sock)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            return f"connection broke: {e}"
        if not data:
            return "connection closed by the peer"
        if isinstance(data, bytearray):
            data = bytes(data)
        if (reason := _handle(data, decoder, step)) is not None:
            return reason
        kick()


def _handle(
    data: bytes, decoder: QuorumStreamDecoder, step: Callable[[StreamEvent], None]
) -> str | None:
    """Step every packet ``data`` completes; why the link ends if it cannot be a quorum
    stream, else None."""
    try:
        decoder.feed(data)
        while (ev := decoder.next_event()) is not None:
            step(ev)
    except QuorumStreamError as e:
        log.warning("bad bytes on a quorum link (%s); closing it", e)
        return f"bad stream: {e}"
    return None


async def _read_in_passes(
    sock: trio.socket.SocketType,
    poller: Poller,
    step: Callable[[StreamEvent], None],
    kick: Callable[[], None],
    decoder: QuorumStreamDecoder,
) -> str:
    """:func:`read_link` in the client poller's passes: the link's socket sits in the poller's
    selector beside the client sockets and the fsync helper's, and a pass reads whatever of
    them is ready -- one wake-up of one task for a client's frame, a PROPOSAL and a sync's
    answer that arrive together, instead of one per reader task, each with its ``epoll``
    re-arm (ZooKeeper's learner reads its leader on a thread of its own; here the pump's
    Readies that the pass makes run once, when it ends: ``QuorumPeer.end_client_pass``).
    This task only waits for the link's end; an exception met in a pass is raised here, as
    the reading task would have."""
    ended: list[str] = []
    failed: list[BaseException] = []
    done = trio.Event()

    def end(reason: str) -> None:
        ended.append(reason)
        poller.unwatch(sock)
        done.set()

    def readable() -> None:
        if ended:
            return
        fd = sock.fileno()
        if fd < 0:  # closed under the poller (its owner unwatches first: not expected)
            end("connection broke: the socket was closed")
            return
        try:
            data = os.read(fd, RECEIVE_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            end(f"connection broke: {e}")
            return
        if not data:
            end("connection closed by the peer")
            return
        try:
            reason = _handle(data, decoder, step)
            if reason is None:
                kick()
        except Exception as e:  # the reader's failure, not the poller's
            failed.append(e)
            end("failed")
            return
        if reason is not None:
            end(reason)

    poller.watch(sock, readable)
    try:
        await done.wait()
    finally:
        if not ended:  # cancelled
            ended.append("cancelled")
            poller.unwatch(sock)
    if failed:
        raise failed[0]
    return ended[0]


async def _receive(sock: trio.socket.SocketType) -> bytes:
    """What a plain TCP link's ``receive_some`` returns, with less around it: wait until the
    socket is readable, then one ``read``. Trio's ``recv`` tries first and waits after an
    ``EAGAIN``, inside an error-translating context manager and two checkpoints; on a link the
    next chunk has rarely arrived when the last one has been handled (a write's PROPOSAL,
    ACK and COMMIT are apart by a round trip), so that first try mostly fails."""
    while True:
        await trio.lowlevel.wait_readable(sock)
        fd = sock.fileno()
        if fd < 0:  # closed meanwhile (its number may already be another file's)
            raise trio.ClosedResourceError("the link's socket was closed")
        try:
            return os.read(fd, RECEIVE_SIZE)
        except BlockingIOError:
            continue


async def until_done(task: Callable[[], Awaitable[None]], scope: trio.CancelScope) -> None:
    """Run ``task``; when it returns, cancel ``scope`` (its sibling tasks)."""
    await task()
    scope.cancel()
