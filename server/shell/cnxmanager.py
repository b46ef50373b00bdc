"""The election port's Trio shell (QuorumCnxManager) driving the pure FastLeaderElection.

Theory
------
Each pair of members keeps one TCP connection on the election ports; the member with the
higher sid must own it (``QuorumCnxManager``): the connecting side sends its initial message in
one write and, if the target's sid is higher, closes at once (the target connects back); an
accepting side that reads a lower sid closes and connects back itself (to the address in the
header, else the configured one). A kept connection replaces any older one for that sid.

Per peer there is a send slot of capacity 1 (``SEND_CAPACITY``: a newer notification replaces an
unsent older one) and the last message sent to it; a fresh connection whose slot is empty
re-sends that last message (``SendWorker.run``), so duplicates are normal and harmless.

All election logic lives in :class:`trizk.quorum.election.election.FastLeaderElection`; this shell
feeds it notifications, calls ``tick`` at its deadline and carries its outputs out. Its time is
the server's :class:`~trizk.server.shell.clock.Clock` when one is given (an ensemble member's:
moving that clock moves the election's notification timeouts too), else
``trio.current_time()`` in ms (so a MockClock works). The socket timeouts (connect,
handshake) stay on Trio's clock: they bound real network waits. Trio runs the machine's methods
atomically (no await inside), which is the ``synchronized`` of the Java code.

Multi-address members (``a:q:e|b:q2:e2``): a member binds each of its election addresses (one
that stays taken is given up with one log line while the others listen, as ZooKeeper's
ListenerHandlers), announces all of them in a version -65535 header under
``multiAddress.enabled``, and connects to all of a peer's addresses at once, keeping the first
that answers (:func:`open_first_stream`; ZooKeeper picks one by ICMP reachability). With
``multiAddress.reachabilityCheckEnabled`` (the default), a kept connection to such a member is
checked each time a notification goes to it and closed once its host stops answering, so the
next one goes through another address (:mod:`trizk.server.shell.reachability`).

Invariants
----------
* A peer's bytes are bounded: one initial message (2068 bytes) or one frame (512 KiB) buffered.
* Bad bytes (header or frame) close that connection with one log line; nothing else changes.
* Connections are bounded: at most one kept connection and one connect attempt per sid.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import trio

from trizk.quorum.election.election import Decision, ElectionView, FastLeaderElection, Output
from trizk.quorum.election.messages import (
    MAX_INITIAL_MESSAGE,
    OBSERVER_ID,
    ElectionWireError,
    FrameDecoder,
    InitialMessage,
    decode_notification,
    encode_frame,
    encode_initial_message,
    encode_initial_message_multi,
    parse_initial_message,
)
from trizk.server.shell import quorumauth
from trizk.server.shell.clock import Clock
from trizk.server.shell.reachability import is_reachable
from trizk.server.shell.streams import socket_of

if TYPE_CHECKING:
    from trizk.server.shell.quorumtls import QuorumTLS

log = logging.getLogger("trizk.quorum.election.election")

_READ = 65536

#: ``zookeeper.electionPortBindRetry`` (default 3; 0 = forever, negative = 3): binds tried
#: before the member gives up, ``ELECTION_BIND_PAUSE`` seconds apart
#: (``ListenerHandler.acceptConnections`` sleeps 1 s).
ELECTION_BIND_TRIES = 3
ELECTION_BIND_PAUSE = 1.0
#: ``ExitCode.UNABLE_TO_BIND_QUORUM_PORT``: ZooKeeper 3.8.0 exits with it when its election
#: port stays taken ("As I'm leaving the listener thread, I won't be able to participate in
#: leader election any longer: 127.0.0.1:3888", captured with the port held by another socket).
EXIT_UNABLE_TO_BIND_QUORUM_PORT = 14


class PortBindError(OSError):
    """A member's election (or quorum) port cannot be bound: ``str()`` is one line for the
    operator naming the port and the address; ``exit_code`` is ZooKeeper's exit code."""

    def __init__(self, message: str, errno: int | None, exit_code: int) -> None:
        super().__init__(errno, message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


def format_address(host: str | None, port: int) -> str:
    """``host:port`` as ZooKeeper prints a bound address (IPv6 in brackets, ``*`` for all)."""
    if host is None:
        return f"*:{port}"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def open_first_stream(
    targets: Sequence[tuple[str, int]], timeout: float
) -> trio.SocketStream:
    """Connect to every address of a multi-address member at once and keep the first that
    answers (``Learner.connectToLeader``'s LeaderConnectors; the election's
    ``MultipleAddresses.getReachableOrOne`` picks one that answers ICMP first, which needs
    privileges a TCP connect does not). Raises the last OSError, or TooSlowError."""
    if len(targets) == 1:
        with trio.fail_after(timeout):
            return await trio.open_tcp_stream(*targets[0])
    won: list[trio.SocketStream] = []
    errors: list[BaseException] = []

    async def attempt(host: str, port: int, cancel: trio.CancelScope) -> None:
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as e:
            errors.append(e)
            return
        if won:
            await stream.aclose()
            return
        won.append(stream)
        cancel.cancel()

    with trio.move_on_after(timeout) as scope:
        async with trio.open_nursery() as nursery:
            for host, port in targets:
                nursery.start_soon(attempt, host, port, nursery.cancel_scope)
    if won:
        return won[0]
    if errors and not scope.cancelled_caught:
        raise errors[-1]
    raise trio.TooSlowError


async def bind_election_ports(
    addresses: Sequence[tuple[str | None, int]],
    *,
    tries: int = ELECTION_BIND_TRIES,
    pause: float = ELECTION_BIND_PAUSE,
) -> tuple[list[trio.SocketListener], list[tuple[str | None, int]]]:
    """Bind every election address of this member (``Listener``'s one ListenerHandler per
    address, each on its own): returns the listeners bound at the first try and the
    addresses still to retry (:func:`keep_binding`), so that a member with one address taken
    serves on the others at once. Only when no address can be bound at all, after ``tries``
    each, does the member give up (:class:`PortBindError`, ZooKeeper's exit code 14)."""
    if len(addresses) == 1:
        host, port = addresses[0]
        return await bind_election_port(host, port, tries=tries, pause=pause), []
    listeners: list[trio.SocketListener] = []
    pending: list[tuple[str | None, int]] = []
    for host, port in addresses:
        try:
            listeners += await trio.open_tcp_listeners(port, host=host)
        except OSError:
            pending.append((host, port))
    if listeners:
        return listeners, pending
    failures: list[PortBindError] = []

    async def bind(host: str | None, port: int) -> None:
        try:
            listeners.extend(
                await bind_election_port(host, port, tries=max(tries - 1, 1), pause=pause)
            )
        except PortBindError as e:
            failures.append(e)

    await trio.sleep(pause)
    async with trio.open_nursery() as nursery:
        for host, port in addresses:
            nursery.start_soon(bind, host, port)
    if not listeners:
        raise PortBindError(
            "cannot bind any election address ("
            + ", ".join(format_address(h, p) for h, p in addresses)
            + "): this member cannot take part in leader election",
            failures[-1].errno if failures else None,
            EXIT_UNABLE_TO_BIND_QUORUM_PORT,
        )
    return listeners, []


async def keep_binding(
    host: str | None,
    port: int,
    handler: Callable[[trio.SocketStream], Awaitable[object]],
    *,
    tries: int = ELECTION_BIND_TRIES - 1,
    pause: float = ELECTION_BIND_PAUSE,
) -> None:
    """One more address of a member that listens already: retry its bind, then serve it; if
    it stays taken, one error line (ZooKeeper: "Leaving listener thread for address ... after
    3 errors") and the member goes on with its other addresses."""
    await trio.sleep(pause)
    try:
        listeners = await bind_election_port(host, port, tries=tries, pause=pause)
    except PortBindError as e:
        log.error("%s; listening on the other election addresses", e)
        return
    await trio.serve_listeners(handler, listeners)


async def bind_election_port(
    host: str | None,
    port: int,
    *,
    tries: int = ELECTION_BIND_TRIES,
    pause: float = ELECTION_BIND_PAUSE,
) -> list[trio.SocketListener]:
    """Bind the election port as ``QuorumCnxManager.Listener`` does: ``tries`` binds
    ``pause`` seconds apart, then :class:`PortBindError` (ZooKeeper then exits with code 14).
    ``host`` None is every address (``quorumListenOnAllIPs``)."""
    where = format_address(host, port)
    attempt = 0
    while True:
        attempt += 1
        try:
            return await trio.open_tcp_listeners(port, host=host)
        except OSError as e:
            if tries > 0 and attempt >= tries:
                raise PortBindError(
                    f"cannot bind the election port {where} ({e.strerror or e}) after "
                    f"{attempt} tries: this member cannot take part in leader election",
                    e.errno,
                    EXIT_UNABLE_TO_BIND_QUORUM_PORT,
                ) from e
            log.warning("cannot bind the election port %s (%s), retrying", where, e.strerror or e)
            await trio.sleep(pause)


class _AddressLike(Protocol):
    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...


class _ServerLike(Protocol):
    @property
    def election_addr(self) -> _AddressLike: ...


class MembersLike(Protocol):
    """The part of a QuorumVerifier (quorum/verifier.py) the shell reads."""

    @property
    def members(self) -> Mapping[int, _ServerLike]: ...


def election_addresses(qv: MembersLike) -> dict[int, tuple[str, int]]:
    """sid -> (host, port) of every member's election address (voters and observers)."""
    return {sid: (m.election_addr.host, m.election_addr.port) for sid, m in qv.members.items()}


@dataclass
class _Link:
    """One kept connection (SendWorker + RecvWorker pair)."""

    sid: int
    stream: trio.abc.Stream
    cancel: trio.CancelScope = field(default_factory=trio.CancelScope)


class ElectionPort:
    """One member's election port: listener, connections, and the election they drive.

    ``addresses`` maps sid -> (host, port) of every member's election address (voters and
    observers); ``addresses[myid]`` is bound. ``handshake_timeout`` is Java's
    ``tickTime*syncLimit`` read timeout for the initial message, ``connect_timeout`` its
    ``zookeeper.cnxTimeout`` (5 s)."""

    def __init__(
        self,
        myid: int,
        view: ElectionView,
        addresses: Mapping[int, tuple[str, int]],
        *,
        connect_timeout: float = 5.0,
        handshake_timeout: float = 5.0,
        listen_on_all_ips: bool = False,
        max_handshakes: int = 64,
        all_addresses: Mapping[int, Sequence[tuple[str, int]]] | None = None,
        multi_address: bool = False,
        bind_tries: int = ELECTION_BIND_TRIES,
        quorum_auth: quorumauth.QuorumAuth | None = None,
        clock: Clock | None = None,
        tls: QuorumTLS | None = None,
        reachability_timeout_ms: int | None = None,
    ) -> None:
        self.myid = myid
        #: quorum TLS (sslQuorum / portUnification: trizk.server.shell.quorumtls), or None
        self.tls = tls
        #: the server's clock (None: Trio's)
        self.clock = clock
        self.view = view
        self.addresses = dict(addresses)
        #: every election address of each member (multi-address members have several)
        self.all_addresses: dict[int, tuple[tuple[str, int], ...]] = {
            sid: tuple((all_addresses or {}).get(sid, ())) or (a,) for sid, a in addresses.items()
        }
        #: ``multiAddress.enabled``: announce every address (initial message V2)
        self.multi_address = multi_address
        #: ``zookeeper.electionPortBindRetry``
        self.bind_tries = bind_tries
        #: ``multiAddress.reachabilityCheckTimeoutMs`` (None: the check is disabled): a kept
        #: connection to a multi-address member whose host stops answering is closed
        self.reachability_timeout_ms = reachability_timeout_ms
        self._validating: set[int] = set()
        self.election = FastLeaderElection(myid, view)
        self.connect_timeout = connect_timeout
        self.handshake_timeout = handshake_timeout
        self.listen_on_all_ips = listen_on_all_ips
        self.max_handshakes = max_handshakes
        #: quorum SASL (``quorum.auth.enableSasl``): each connection authenticates after the
        #: initial message (QuorumCnxManager's authLearner / authServer)
        self.quorum_auth = quorum_auth
        if quorum_auth is not None:
            # quorum.cnxn.threads.size: the connection threads that run the handshakes
            self.max_handshakes = quorum_auth.max_handshakes
        self._handshakes = 0
        self.decision: Decision | None = None
        self.port = 0
        self._links: dict[int, _Link] = {}
        self._connecting: set[int] = set()
        self._slot: dict[int, bytes] = {}  # the capacity-1 send queue per sid
        self._last_sent: dict[int, bytes] = {}
        self._slot_ready: dict[int, trio.Event] = {}
        self._observer_ids = -1  # QuorumCnxManager.observerCounter
        self._wake = trio.Event()
        self._decided = trio.Event()
        self._nursery: trio.Nursery | None = None
        #: called with every notification's config string before the notification is handled
        #: (dynamic reconfig: a LOOKING member adopts a newer configuration)
        self.on_config: Callable[[bytes], None] | None = None

    # ------------------------------------------------------------------ public
    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on our election address and run until cancelled; ``started`` gives the port."""
        # quorumListenOnAllIPs binds the wildcard with each configured port (Listener)
        own = self.all_addresses[self.myid]
        wanted: list[tuple[str | None, int]] = []
        for host, port in own:
            where = (None if self.listen_on_all_ips else host, port)
            if where not in wanted:
                wanted.append(where)
        listeners, pending = await bind_election_ports(wanted, tries=self.bind_tries)
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._timer)
            nursery.start_soon(trio.serve_listeners, self._accepted, listeners)
            for retry_host, retry_port in pending:
                if self.bind_tries == 1:  # the one try is spent
                    shown = format_address(retry_host, retry_port)
                    log.error("cannot bind the election port %s; listening on the others", shown)
                    continue
                more = 0 if self.bind_tries == 0 else self.bind_tries - 1  # 0: forever
                nursery.start_soon(
                    functools.partial(keep_binding, tries=more),
                    retry_host,
                    retry_port,
                    self._accepted,
                )
            task_status.started(self.port)

    def look(self, last_zxid: int, current_epoch: int) -> None:
        """Start an election with our last logged zxid and currentEpoch."""
        self.decision = None
        self._decided = trio.Event()
        self._apply(self.election.look(self._now(), last_zxid, current_epoch))

    async def wait_decision(self) -> Decision:
        await self._decided.wait()
        assert self.decision is not None
        return self.decision

    def designate(self, leader: int, zxid: int) -> Decision:
        """No election: the leader a committed reconfig designated (``updateServerState``)."""
        self.decision = self.election.designate(leader, zxid)
        self._decided = trio.Event()
        self._decided.set()
        return self.decision

    def update_peer_epoch(self, epoch: int) -> None:
        self.election.update_peer_epoch(epoch)

    def set_view(
        self, view: ElectionView, addresses: Mapping[int, Sequence[tuple[str, int]]]
    ) -> None:
        """A configuration was activated (dynamic reconfig): notifications carry it now, and
        its members' election addresses (``addresses``: every address of each) are known."""
        self.view = self.election.view = view
        for sid, addrs in addresses.items():
            if addrs:
                self.addresses[sid] = addrs[0]
                self.all_addresses[sid] = tuple(addrs)

    # ------------------------------------------------------------------ driving the machine
    def _now(self) -> int:
        clock = self.clock
        return int(trio.current_time() * 1000) if clock is None else clock.now()

    def _apply(self, out: Output) -> None:
        for send in out.sends:
            self._enqueue(send.to, encode_frame(send.notification.encode()))
        if out.decision is not None:
            self.decision = out.decision
            log.info(
                "election %d: %s, leader %d (zxid 0x%x, round 0x%x, peerEpoch 0x%x)",
                self.myid,
                out.decision.state.name,
                out.decision.vote.leader,
                out.decision.vote.zxid,
                out.decision.vote.election_epoch,
                out.decision.vote.peer_epoch,
            )
            self._decided.set()
        self._wake.set()

    async def _timer(self) -> None:
        while True:
            self._wake = trio.Event()
            deadline = self.election.deadline
            if deadline is None:
                await self._wake.wait()
                continue
            await self._sleep_until(deadline)
            if self._now() >= deadline:
                self._apply(self.election.tick(max(self._now(), deadline)))

    async def _sleep_until(self, deadline: int) -> None:
        """Until ``deadline`` (ms, :meth:`_now`'s time) or a wake-up (:meth:`_apply`)."""
        clock = self.clock
        if clock is None:
            with trio.move_on_at(deadline / 1000):
                await self._wake.wait()
            return
        wake = self._wake
        async with trio.open_nursery() as nursery:

            async def first(wait: Callable[[], Awaitable[None]]) -> None:
                await wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(first, wake.wait)
            nursery.start_soon(first, lambda: clock.sleep_until(deadline))

    # ------------------------------------------------------------------ sending
    def _enqueue(self, sid: int, frame: bytes) -> None:
        """QuorumCnxManager.toSend: replace the slot's content, then connectOne."""
        self._slot[sid] = frame
        ev = self._slot_ready.get(sid)
        if ev is not None:
            ev.set()
        self._connect_one(sid)

    def _connect_one(self, sid: int, addrs: Sequence[tuple[str, int]] = ()) -> None:
        link = self._links.get(sid)
        if link is not None:
            self._validate_link(link)
        if sid in self._links or sid in self._connecting or self._nursery is None:
            return
        # connectOne(sid, electionAddr) after a handshake; else the configured addresses (Java
        # remembers no announced address: a later send to an unknown sid is "Invalid server id")
        targets = tuple(addrs) or self.all_addresses.get(sid, ())
        if not targets:
            log.warning("election %d: invalid server id %d (no address)", self.myid, sid)
            return
        self._connecting.add(sid)
        self._nursery.start_soon(self._initiate, sid, targets)

    def _validate_link(self, link: _Link) -> None:
        """``SendWorker.asyncValidateIfSocketIsStillReachable`` (multiAddress.enabled, the
        reachability check on, a member with several addresses): the host the kept connection
        goes to is checked in the background; if it does not answer, the connection is closed
        and the next one is made through an address that works."""
        timeout = self.reachability_timeout_ms
        if (
            timeout is None
            or not self.multi_address
            or len(self.all_addresses.get(link.sid, ())) < 2
            or link.sid in self._validating
            or self._nursery is None
        ):
            return
        self._validating.add(link.sid)
        self._nursery.start_soon(self._check_reachable, link, timeout)

    async def _check_reachable(self, link: _Link, timeout_ms: int) -> None:
        try:
            sock = socket_of(link.stream)
            try:
                host = sock.getpeername()[0] if sock is not None else None
            except OSError:
                return
            if host is None:
                return
            if not await is_reachable(host, timeout_ms) and self._links.get(link.sid) is link:
                log.warning(
                    "election %d: the address of %d's connection (%s) is not reachable, closing it",
                    self.myid,
                    link.sid,
                    host,
                )
                link.cancel.cancel()
        finally:
            self._validating.discard(link.sid)

    def _initial_message(self) -> bytes:
        """startConnection's header: V2 with every address under multiAddress.enabled."""
        host, port = self.addresses[self.myid]
        if self.multi_address:
            own = list(self.all_addresses[self.myid])
            own[0] = (host, self.port or port)
            return encode_initial_message_multi(self.myid, own)
        return encode_initial_message(self.myid, host, self.port or port)

    async def _initiate(self, sid: int, targets: Sequence[tuple[str, int]]) -> None:
        try:
            stream: trio.abc.Stream = await open_first_stream(targets, self.connect_timeout)
        except (OSError, trio.TooSlowError) as e:
            log.debug("election %d: cannot connect to %d at %s: %s", self.myid, sid, targets, e)
            self._connecting.discard(sid)
            return
        if self.tls is not None:  # initiateConnection: startHandshake() under sslQuorum
            secured = await self.tls.connect(stream, f"{sid}'s election port", self._tls_timeout)
            if secured is None:
                self._connecting.discard(sid)
                return
            stream = secured
        try:
            # startConnection: one flushed write
            await stream.send_all(self._initial_message())
        except (OSError, trio.BrokenResourceError):
            self._connecting.discard(sid)
            await stream.aclose()
            return
        rest = b""
        auth = self.quorum_auth
        if auth is not None and sid in self.view.voters:
            # startConnection: authLearner.authenticate(sock, qps.hostname), voters only,
            # before the challenge (a lower sid authenticates too, then drops the connection)
            host, port = self.addresses[sid]
            got = await auth.authenticate(
                stream,
                host,
                self.handshake_timeout,
                "election port",
                f"server {sid} ({format_address(host, port)})",
            )
            if got is None:
                self._connecting.discard(sid)
                await stream.aclose()
                return
            rest = got
        self._connecting.discard(sid)
        if sid > self.myid:
            # "Have smaller server identifier, so dropping the connection"; they connect back
            await stream.aclose()
            return
        await self._run_link(sid, stream, FrameDecoder(), rest)

    @property
    def _tls_timeout(self) -> float:
        """A TLS handshake's bound: Java's socket timeout (syncLimit ticks) bounds each read
        of it, not the whole; the connect timeout (cnxTimeout) is the longer bound here."""
        return max(self.handshake_timeout, self.connect_timeout)

    # ------------------------------------------------------------------ receiving
    async def _accepted(self, stream: trio.abc.Stream) -> None:
        if self._handshakes >= self.max_handshakes:
            log.warning("election %d: too many connections in handshake, closing one", self.myid)
            await stream.aclose()
            return
        self._handshakes += 1
        try:
            if self.tls is not None:  # a UnifiedServerSocket: TLS or plain by the first bytes
                secured = await self.tls.accept(stream, "election", self._tls_timeout)
                if secured is None:
                    return
                stream = secured
            parsed = await self._read_initial(stream)
            if parsed is not None and self.quorum_auth is not None:
                parsed = await self._authenticate(stream, *parsed)
        finally:
            self._handshakes -= 1
        if parsed is None:
            return
        msg, rest = parsed
        sid = msg.sid
        if sid == OBSERVER_ID:
            sid = self._observer_ids
            self._observer_ids -= 1
        if sid < self.myid:
            # we win the challenge: close and connect back (handleConnection)
            self._drop_link(sid)  # Java finishes the SendWorker it has for that sid
            await stream.aclose()
            self._connect_one(sid, msg.addresses)
            return
        if sid == self.myid:
            log.warning("election %d: connection from a server with our own id", self.myid)
            await stream.aclose()
            return
        await self._run_link(sid, stream, FrameDecoder(), rest)

    async def _read_initial(self, stream: trio.abc.Stream) -> tuple[InitialMessage, bytes] | None:
        """The initial message (bounded in size and time) and the bytes read after it."""
        buf = bytearray()
        try:
            with trio.fail_after(self.handshake_timeout):
                while True:
                    parsed = parse_initial_message(buf)
                    if parsed is not None:
                        msg, used = parsed
                        return msg, bytes(buf[used:])
                    data = await stream.receive_some(MAX_INITIAL_MESSAGE - len(buf))
                    if not data:
                        raise ElectionWireError("connection closed during the initial message")
                    buf += data
        except (ElectionWireError, trio.TooSlowError, OSError, trio.BrokenResourceError) as e:
            log.warning("election %d: closing incoming connection: %s", self.myid, e)
            await stream.aclose()
            return None

    async def _run_link(
        self, sid: int, stream: trio.abc.Stream, decoder: FrameDecoder, rest: bytes
    ) -> None:
        self._drop_link(sid)
        link = _Link(sid, stream)
        self._links[sid] = link
        try:
            with link.cancel:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._guarded, link, self._send_loop(link))
                    await self._guarded(link, self._recv_loop(link, decoder, rest))
        finally:
            if self._links.get(sid) is link:
                del self._links[sid]
                if sid not in self.addresses:
                    # an unknown sid (or an observer numbered -1, -2, ...) leaves nothing
                    # behind, so a peer cycling through sids cannot grow our tables
                    for table in (self._slot, self._last_sent, self._slot_ready):
                        table.pop(sid, None)
            with trio.CancelScope(shield=True):
                await stream.aclose()

    def _drop_link(self, sid: int) -> None:
        old = self._links.pop(sid, None)
        if old is not None:
            old.cancel.cancel()

    async def _authenticate(
        self, stream: trio.abc.Stream, msg: InitialMessage, rest: bytes
    ) -> tuple[InitialMessage, bytes] | None:
        """handleConnection: ``authServer.authenticate`` after the initial message, whatever
        the sid (a refused peer is not connected back to)."""
        assert self.quorum_auth is not None
        peer = f"server {msg.sid} ({quorumauth.peer_address(stream)})"
        got = await self.quorum_auth.accept(
            stream, rest, self.handshake_timeout, "election port", peer
        )
        if got is None:
            await stream.aclose()
            return None
        return msg, got

    async def _guarded(self, link: _Link, work: Coroutine[Any, Any, None]) -> None:
        """Run one half of a link; its end (EOF, error, garbage) ends the whole link."""
        try:
            await work
        except (
            ElectionWireError,
            OSError,
            trio.BrokenResourceError,
            trio.ClosedResourceError,
        ) as e:
            log.warning("election %d: closing connection of %d: %s", self.myid, link.sid, e)
        finally:
            link.cancel.cancel()

    async def _send_loop(self, link: _Link) -> None:
        sid = link.sid
        if sid not in self._slot and sid in self._last_sent:
            await link.stream.send_all(self._last_sent[sid])  # SendWorker re-sends the last one
        while True:
            frame = self._slot.pop(sid, None)
            if frame is None:
                ev = trio.Event()
                self._slot_ready[sid] = ev
                await ev.wait()
                continue
            self._last_sent[sid] = frame
            await link.stream.send_all(frame)

    async def _recv_loop(self, link: _Link, decoder: FrameDecoder, rest: bytes) -> None:
        data = rest
        while True:
            try:
                frames = decoder.feed(data)
                bad = None
            except ElectionWireError as e:
                frames, bad = e.frames, e
            for frame in frames:
                try:
                    note = decode_notification(frame)
                except ElectionWireError as e:
                    # WorkerReceiver only skips a malformed notification; the link stays
                    log.warning("election %d: skipping a notification of %d: %s",
                                self.myid, link.sid, e)  # fmt: skip
                    continue
                if note.config and self.on_config is not None:
                    self.on_config(note.config)  # FastLeaderElection's WorkerReceiver
                self._apply(self.election.on_notification(self._now(), link.sid, note))
            if bad is not None:
                raise bad
            got = await link.stream.receive_some(_READ)
            if not got:
                return
            data = bytes(got)
