"""Per-link partitions of an ensemble: one TCP proxy per directed pair of members and port.

Theory
------
Member ``i`` reaches member ``j`` (quorum port and election port) only through the proxies of the
directed pair ``(i, j)``, so a test can cut the links it chooses -- ``cut(1, 3)``,
``isolate(2)``, ``partition({1, 2}, {3})`` -- and ``heal()`` them, where a network namespace
(trizk.compat.procs.netns) can only cut whole hosts.

Each member therefore has its **own** configuration (:meth:`LinkNet.server_lines`): its own
``server.i`` line is its real bind address, every other ``server.j`` line names the proxies
``(i, j)``. That is safe for trizk and Apache ZooKeeper 3.8 members alike, with reconfig off
(the default), because the server lines are only used to bind (own line) and to connect (the
others):

* FastLeaderElection notifications carry the sender's config text (``version=0``); the receiver
  parses it and acts only when its version is higher than its own (``WorkerReceiver``), never
  here; trizk ignores it.
* NEWLEADER carries the leader's config; a ZooKeeper learner hands it to
  ``setLastSeenQuorumVerifier``/``processReconfig``, which return at once with reconfig disabled;
  trizk ignores it too. A learner connects to the leader's quorum address from its *own* view
  (``Learner.findLeader``): the proxy ``(learner, leader)``. LearnerInfo's configVersion is 0
  everywhere.
* ``/zookeeper/config`` holds each member's own view (written without a txn; nodes under
  ``/zookeeper/`` are outside the tree digest), so it differs between members: compare trees
  without it.
* The election port's initial message carries the *connecting* member's election address, and a
  receiver with the higher sid closes the connection and connects back to **that** address
  (``QuorumCnxManager.handleConnection`` → ``connectOne(sid, electionAddr)``; trizk does the
  same). Unchanged it would be the member's real address and the connect-back would bypass the
  proxies; so the election proxy ``(i, j)`` rewrites the address in member ``i``'s initial
  message to the proxy ``(j, i)``, as a NAT would, and sends the rewritten header in one write
  (Java reads the address with a single ``read()``).

A cut pipe closes its established connections (with RST) at once and treats new ones by its
mode: ``"refuse"`` (accepted and reset straight away: the connecting member sees a refused or
reset connection) or ``"blackhole"`` (accepted and held silent until the heal, which closes
them: the connecting member waits for its own timeouts, as in a real partition). An open pipe
retries a refused connect to its member for a few seconds before it gives up and closes: the
member connecting through it cannot be refused (the proxy already accepted), and a connection
closed at once would read as a leader that hung up rather than one not listening yet.

Invariants
----------
* Every listening socket is bound at construction (ports known before any config is written)
  and kept until :meth:`LinkNet.close`: no port is given up and re-taken between cut and heal.
* Loopback only. A pipe buffers at most one initial message (election) and one read chunk per
  direction; held (blackholed) connections are bounded per pipe (beyond it they are refused).
* The control methods are safe from any thread: they run inside the proxies' Trio loop.
"""

from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import trio

from trizk.quorum.election.messages import (
    ElectionWireError,
    encode_initial_message,
    parse_initial_message,
)
from trizk.testing.loop import LoopThread
from trizk.testing.ports import MemberAddrs, listener_avoiding, server_lines

__all__ = ["BLACKHOLE", "REFUSE", "LinkNet", "Pipe"]

log = logging.getLogger("trizk.testing.linkproxy")

REFUSE = "refuse"
BLACKHOLE = "blackhole"
QUORUM = "quorum"
ELECTION = "election"

_CHUNK = 65536
#: connections a blackholed pipe holds before it refuses more
MAX_HELD = 64
#: how long a connection through a pipe waits for the real member to accept it (s), and the
#: interval between tries (see Pipe._connect_upstream)
CONNECT_WINDOW = 3.0
CONNECT_RETRY = 0.02


def _reset(sock: Any) -> None:
    """Close a socket with RST (SO_LINGER 0): the other side sees the link break at once."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def _close(sock: Any) -> None:
    sock.close()


def rewrite_initial_message(
    buf: bytes | bytearray, src: int, addr: tuple[str, int]
) -> tuple[bytes, int] | None:
    """The initial message at the start of ``buf`` with member ``src``'s election address
    replaced by ``addr``: (bytes to send, bytes consumed), or None while more bytes are needed.
    Anything else (the bare-sid form, another sid, bytes ZooKeeper would refuse) passes
    unchanged: the member behind the proxy judges it."""
    try:
        parsed = parse_initial_message(buf)
    except ElectionWireError:
        return bytes(buf), len(buf)
    if parsed is None:
        return None
    msg, used = parsed
    if msg.protocol_version is None or msg.sid != src:
        return bytes(buf[:used]), used
    return encode_initial_message(msg.sid, *addr), used


class Pipe:
    """The proxy of one directed pair ``(src, dst)`` for one port ``kind``: connections member
    ``src`` opens towards member ``dst``'s ``target`` address."""

    def __init__(
        self,
        src: int,
        dst: int,
        kind: str,
        target: tuple[str, int],
        sock: socket.socket,
        rewrite_to: tuple[str, int] | None = None,
    ) -> None:
        self.src, self.dst, self.kind = src, dst, kind
        self.target = target
        self.sock = sock
        #: election pipes: the address put in src's initial message (the proxy (dst, src))
        self.rewrite_to = rewrite_to
        #: None (open), REFUSE or BLACKHOLE
        self.cut_mode: str | None = None
        self._live: set[trio.CancelScope] = set()
        self._held: set[trio.SocketStream] = set()
        #: connections carried since start (for tests of the proxy itself)
        self.accepted = 0

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return host, port

    def cut(self, mode: str = REFUSE) -> None:
        if mode not in (REFUSE, BLACKHOLE):
            raise ValueError(f"mode must be {REFUSE!r} or {BLACKHOLE!r}, not {mode!r}")
        self.cut_mode = mode
        for scope in list(self._live):
            scope.cancel()

    def heal(self) -> None:
        self.cut_mode = None
        for stream in list(self._held):
            _reset(stream.socket)
        self._held.clear()

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(self.sock))
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                stream = await listener.accept()
                if self.cut_mode == BLACKHOLE and len(self._held) < MAX_HELD:
                    self._held.add(stream)
                elif self.cut_mode is not None:
                    _reset(stream.socket)
                else:
                    self.accepted += 1
                    nursery.start_soon(self._carry, stream)

    async def _carry(self, down: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:
            self._live.add(scope)
            up: trio.SocketStream | None = None
            try:
                up = await self._connect_upstream()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pump, down, up, self.rewrite_to, nursery.cancel_scope)
                    nursery.start_soon(self._pump, up, down, None, nursery.cancel_scope)
            except (OSError, trio.TooSlowError) as e:
                log.debug("link %d->%d %s: %s", self.src, self.dst, self.kind, e)
            finally:
                self._live.discard(scope)
                # a cut breaks both ends (RST); an end that closed is passed on as a close
                end = _reset if scope.cancel_called else _close
                end(down.socket)
                if up is not None:
                    end(up.socket)

    async def _connect_upstream(self) -> trio.SocketStream:
        """Connect to the real member, retrying a refused connect for up to
        :data:`CONNECT_WINDOW`: the member connecting through us already has its connection
        (the kernel accepted it), so a refusal passed on at once would look like a member that
        took the connection and closed it (a learner gives up on its leader for that, where a
        refused connect is retried) -- e.g. a leader not yet listening on its quorum port."""
        with trio.fail_after(CONNECT_WINDOW):
            while True:
                try:
                    return await trio.open_tcp_stream(*self.target)
                except OSError:
                    await trio.sleep(CONNECT_RETRY)  # the retry interval of a bounded wait

    async def _pump(
        self,
        a: trio.SocketStream,
        b: trio.SocketStream,
        rewrite_to: tuple[str, int] | None,
        done: trio.CancelScope,
    ) -> None:
        """Copy a → b until a closes (then close the whole connection)."""
        head = bytearray()
        try:
            while True:
                data = await a.receive_some(_CHUNK)
                if not data:
                    return
                if rewrite_to is not None:
                    head += data
                    out = rewrite_initial_message(head, self.src, rewrite_to)
                    if out is None:
                        continue
                    first, used = out
                    data = first + bytes(head[used:])
                    rewrite_to = None
                    head.clear()
                await b.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return
        finally:
            done.cancel()


def _each(pipes: list[Pipe], method: Callable[..., None], *args: Any) -> None:
    for p in pipes:
        method(p, *args)


class LinkNet:
    """Proxies for every directed pair of ``members`` (sid -> real addresses); see the module
    docstring. Run it with :meth:`serve` inside a Trio loop, or :meth:`start_thread` from
    synchronous code; give member ``i`` :meth:`server_lines` ``(i)`` as its ``server.N`` lines.
    """

    def __init__(self, members: Mapping[int, MemberAddrs], host: str = "127.0.0.1") -> None:
        self.members = dict(members)
        self.pipes: dict[tuple[int, int, str], Pipe] = {}
        self._token: Any = None
        self._loop: LoopThread | None = None
        socks: dict[tuple[int, int, str], socket.socket] = {}
        # The members' own ports were found free and given up (ports.allocate); the
        # kernel may hand one of them to a proxy here, and the member could not bind it
        # (seen in CI as "election port of server.2 conflicts with quorum port of server.1").
        # Such a socket is set aside, held until every proxy has its port, then closed.
        theirs = {p for m in self.members.values() for p in (m.quorum_port, m.election_port)}
        theirs |= {m.client_port for m in self.members.values()}
        set_aside: list[socket.socket] = []
        try:
            for src in self.members:
                for dst in self.members:
                    if src == dst:
                        continue
                    for kind in (QUORUM, ELECTION):
                        socks[src, dst, kind] = listener_avoiding(host, theirs, set_aside)
        except BaseException:
            for s in socks.values():
                s.close()
            raise
        finally:
            for s in set_aside:
                s.close()
        for (src, dst, kind), s in socks.items():
            m = self.members[dst]
            target = (m.host, m.quorum_port if kind == QUORUM else m.election_port)
            back = socks[dst, src, ELECTION].getsockname()[:2] if kind == ELECTION else None
            self.pipes[src, dst, kind] = Pipe(src, dst, kind, target, s, back)

    # ------------------------------------------------------------------ configs
    def view(self, sid: int) -> dict[int, MemberAddrs]:
        """Member ``sid``'s view of the ensemble: itself at its real address, every other
        member at the proxies (sid, other)."""
        out = {}
        for other, m in self.members.items():
            if other == sid:
                out[other] = m
                continue
            q = self.pipes[sid, other, QUORUM].address
            e = self.pipes[sid, other, ELECTION].address
            out[other] = replace(m, quorum_port=q[1], election_port=e[1], host=q[0])
        return out

    def server_lines(self, sid: int) -> dict[str, str]:
        """The ``server.N`` zoo.cfg lines for member ``sid``."""
        return server_lines(self.view(sid))

    # ------------------------------------------------------------------ running
    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Carry connections until cancelled."""
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            for pipe in self.pipes.values():
                await nursery.start(pipe.serve)
            task_status.started()

    def start_thread(self, timeout: float = 10.0) -> LinkNet:
        """Serve in a daemon thread with its own Trio loop (for synchronous tests)."""
        self._loop = LoopThread("trizk-linkproxy").start(timeout)
        self._loop.start_task(self.serve)
        return self

    def close(self) -> None:
        """Stop the thread (if :meth:`start_thread` started one) and close every socket."""
        try:
            if self._loop is not None:
                loop, self._loop = self._loop, None
                loop.stop()
        finally:
            for pipe in self.pipes.values():
                pipe.sock.close()

    def __enter__(self) -> LinkNet:
        return self.start_thread()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _control(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` inside the proxies' loop (directly when already there)."""
        if self._token is None:
            fn()  # not serving yet: nothing is in flight
            return
        try:
            here = trio.lowlevel.current_trio_token()
        except RuntimeError:
            here = None
        if here is self._token:
            fn()
        else:
            trio.from_thread.run_sync(fn, trio_token=self._token)

    # ------------------------------------------------------------------ cuts
    def _pairs(self, a: int, b: int, both_ways: bool) -> list[Pipe]:
        for s in (a, b):
            if s not in self.members:
                raise KeyError(f"no member {s}")
        ends = [(a, b), (b, a)] if both_ways else [(a, b)]
        return [self.pipes[s, d, k] for s, d in ends for k in (QUORUM, ELECTION)]

    def cut(self, a: int, b: int, *, both_ways: bool = True, mode: str = REFUSE) -> None:
        """Cut the link between members ``a`` and ``b`` (both ways, or only the connections
        ``a`` opens towards ``b``): established connections are closed, new ones refused (or
        blackholed)."""
        pipes = self._pairs(a, b, both_ways)
        self._control(lambda: _each(pipes, Pipe.cut, mode))

    def isolate(self, sid: int, *, mode: str = REFUSE) -> None:
        """Cut every link of member ``sid``."""
        pipes = [p for p in self.pipes.values() if sid in (p.src, p.dst)]
        self._control(lambda: _each(pipes, Pipe.cut, mode))

    def partition(self, *groups: Iterable[int], mode: str = REFUSE) -> None:
        """Cut every link between members of different groups (links within a group, and of
        members in no group, are left as they are)."""
        side: dict[int, int] = {}
        for n, g in enumerate(groups):
            for s in g:
                if s not in self.members:
                    raise KeyError(f"no member {s}")
                if s in side:
                    raise ValueError(f"member {s} is in two groups")
                side[s] = n
        pipes = [
            p
            for p in self.pipes.values()
            if p.src in side and p.dst in side and side[p.src] != side[p.dst]
        ]
        self._control(lambda: _each(pipes, Pipe.cut, mode))

    def heal(self, a: int | None = None, b: int | None = None) -> None:
        """Heal every link (or only the link between ``a`` and ``b``, both ways)."""
        if a is None or b is None:
            pipes = list(self.pipes.values())
        else:
            pipes = self._pairs(a, b, True)
        self._control(lambda: _each(pipes, Pipe.heal))

    def is_cut(self, a: int, b: int) -> bool:
        """Whether any pipe between ``a`` and ``b`` (either way) is cut."""
        return any(p.cut_mode is not None for p in self._pairs(a, b, True))
