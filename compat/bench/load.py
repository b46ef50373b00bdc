"""The benchmark's load generator: pre-encoded frames, raw sockets, one epoll loop.

Theory
------
The generator must cost far less CPU than the server it measures, or the figure is the
generator's. So all per-request encoding is done *before* the clock starts: every request a
client will send is a complete frame (length prefix + RequestHeader + body) built once with the
``trizk.jute`` records. Inside the measured loop the per-reply Python work is one
``struct.unpack_from`` (length, xid, zxid, err) and a counter; refilling a client's pipeline
window is one ``b"".join`` of a slice of its pre-built frame list, done once at least a quarter
of the window is free (so a client keeps between 3/4 and all of ``window`` requests in flight,
and the generator makes fewer, larger sends: its cost is mostly syscalls). All clients live in one
process and one ``selectors`` (epoll) loop; sockets are non-blocking with TCP_NODELAY.

Xids: a client's frame list is a cycle; xids are the position in the cycle (1-based) and repeat
from one cycle to the next. ZooKeeper does not check request xids (it echoes them in the reply
header); replies are counted in order, per connection, and never matched by xid.

The generator's own CPU (``time.process_time`` of this process) is measured over exactly the
same interval as the server's CPU (``/proc/PID/stat``) and the reply count, and reported next to
every throughput figure, so a reader can see when the generator, not the server, was the limit.

Bounds: every wait has a deadline (connect, handshake, drain); read buffers are bounded by the
pipeline window (a client never has more than ``window`` requests outstanding); a connection
that closes or a frame longer than 1 MiB aborts the run with an error.
"""

from __future__ import annotations

import selectors
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trizk.jute.framing import frame
from trizk.jute.records import (
    ACL,
    ConnectResponse,
    CreateRequest,
    DeleteRequest,
    ExistsRequest,
    GetDataRequest,
    Id,
    RequestHeader,
    SetDataRequest,
)
from trizk.testing.probes import handshake_bytes

OPEN_ACL_UNSAFE = (ACL(perms=31, id=Id(scheme="world", id="anyone")),)
_REPLY = struct.Struct(">iiqi")  # frame length, xid, zxid, err
_LEN = struct.Struct(">i")
MAX_FRAME = 0xFFFFF
NOTIFICATION_XID = -1

OP_CREATE, OP_DELETE, OP_EXISTS, OP_GETDATA, OP_SETDATA, OP_CLOSE = 1, 2, 3, 4, 5, -11


def req(xid: int, op: int, body: bytes = b"") -> bytes:
    return frame(RequestHeader(xid=xid, type=op).encode() + body)


def get_frame(xid: int, path: str, watch: bool = False) -> bytes:
    return req(xid, OP_GETDATA, GetDataRequest(path=path, watch=watch).encode())


def exists_frame(xid: int, path: str, watch: bool = False) -> bytes:
    return req(xid, OP_EXISTS, ExistsRequest(path=path, watch=watch).encode())


def set_frame(xid: int, path: str, data: bytes) -> bytes:
    return req(xid, OP_SETDATA, SetDataRequest(path=path, data=data, version=-1).encode())


def create_frame(xid: int, path: str, data: bytes, flags: int = 0) -> bytes:
    body = CreateRequest(path=path, data=data, acl=OPEN_ACL_UNSAFE, flags=flags).encode()
    return req(xid, OP_CREATE, body)


def delete_frame(xid: int, path: str) -> bytes:
    return req(xid, OP_DELETE, DeleteRequest(path=path, version=-1).encode())


def close_frame(xid: int) -> bytes:
    return req(xid, OP_CLOSE)


# ------------------------------------------------------------------------------- blocking client


class BlockingSession:
    """One session on a blocking socket: the single-client latency probe and setup helper."""

    def __init__(
        self,
        host: str,
        port: int,
        timeout: float = 10.0,
        session_ms: int = 30000,
        session_id: int = 0,
        passwd: bytes = b"\0" * 16,
        last_zxid: int = 0,
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.sock.sendall(handshake_bytes(session_ms, session_id, passwd, last_zxid))
        resp, _ = ConnectResponse.decode_from(self.frame(), 0)
        if resp.sessionId == 0:
            self.sock.close()
            raise ConnectionError("session refused")
        self.session_id: int = resp.sessionId
        self.passwd: bytes = resp.passwd or b""
        self.timeout_ms: int = resp.timeOut
        self.last_zxid = last_zxid

    def request(self, fr: bytes) -> bytes:
        """Send one frame; return its reply payload (skipping notifications); track the zxid."""
        self.sock.sendall(fr)
        while True:
            payload = self.frame()
            xid, zxid = struct.unpack_from(">iq", payload, 0)
            if xid != NOTIFICATION_XID:
                if zxid > self.last_zxid:
                    self.last_zxid = zxid
                return payload

    def frame(self) -> bytes:
        """The next frame payload (without length)."""
        while True:
            if len(self.buf) >= 4:
                (n,) = _LEN.unpack_from(self.buf, 0)
                if n < 0 or n > MAX_FRAME:
                    raise ConnectionError(f"bad frame length {n}")
                if len(self.buf) >= 4 + n:
                    out = bytes(self.buf[4 : 4 + n])
                    del self.buf[: 4 + n]
                    return out
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk

    def call(self, fr: bytes) -> int:
        """Send one pre-built frame, wait for its reply (skipping notifications); return err."""
        self.sock.sendall(fr)
        while True:
            payload = self.frame()
            xid, _zxid, err = struct.unpack_from(">iqi", payload, 0)
            if xid != NOTIFICATION_XID:
                return int(err)

    def close(self) -> None:
        try:
            self.sock.sendall(close_frame(0x7FFFFFF0))
            self.frame()
        except OSError:
            pass
        finally:
            self.sock.close()


def timed_calls(sess: BlockingSession, frames: Sequence[bytes]) -> tuple[list[int], int]:
    """Latency (ns) of each frame sent alone; and how many got a non-zero err."""
    out: list[int] = []
    errors = 0
    clock = time.perf_counter_ns
    call = sess.call
    for fr in frames:
        t0 = clock()
        err = call(fr)
        out.append(clock() - t0)
        if err:
            errors += 1
    return out, errors


# --------------------------------------------------------------------------------- epoll engine


@dataclass
class _Client:
    sock: socket.socket
    frames: Sequence[bytes]
    cycle: bool
    next_i: int = 0
    outstanding: int = 0
    replies: int = 0
    errors: int = 0
    events: int = 0
    inbuf: bytearray = field(default_factory=bytearray)
    outbuf: bytearray = field(default_factory=bytearray)
    done_sending: bool = False


@dataclass
class LoadResult:
    replies: int  # replies counted inside the measured interval
    errors: int
    events: int
    wall_s: float
    gen_cpu_s: float
    server_cpu_s: float
    events_done_s: float | None = None  # time from start until expect_events were received

    @property
    def ops_per_s(self) -> float:
        return self.replies / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def gen_cpu_share(self) -> float:
        """Generator CPU as a fraction of one core over the measured interval."""
        return self.gen_cpu_s / self.wall_s if self.wall_s > 0 else 0.0


def open_sessions(host: str, port: int, n: int, timeout: float = 20.0) -> list[socket.socket]:
    """``n`` handshaken sessions on non-blocking sockets (used by the engine)."""
    socks = []
    for _ in range(n):
        s = BlockingSession(host, port, timeout=timeout)
        if s.buf:
            raise ConnectionError("unexpected bytes after handshake")
        s.sock.setblocking(False)
        socks.append(s.sock)
    return socks


def run_load(
    socks: Sequence[socket.socket],
    frames: Sequence[Sequence[bytes]],
    *,
    window: int,
    cycle: bool,
    ramp_s: float = 0.0,
    duration_s: float = 0.0,
    server_cpu: Callable[[], float] = lambda: 0.0,
    expect_events: int = 0,
    deadline_s: float = 120.0,
) -> LoadResult:
    """Drive ``socks[i]`` with ``frames[i]``, at most ``window`` outstanding per client.

    ``cycle=True``: repeat each frame list until ``ramp_s + duration_s`` has passed; the figures
    cover only the last ``duration_s``. ``cycle=False``: send each list once; the run (and the
    measured interval) ends when every reply and ``expect_events`` notifications have arrived.
    Fails loudly (TimeoutError) if that takes longer than ``deadline_s``.
    """
    with selectors.EpollSelector() as sel:
        clients = [_Client(s, f, cycle) for s, f in zip(socks, frames, strict=True)]
        for c in clients:
            sel.register(c.sock, selectors.EVENT_READ, c)
        refill = max(1, window // 4)

        def fill(c: _Client, k: int) -> None:
            fr = c.frames
            n = len(fr)
            if n == 0:
                c.done_sending = True
                return
            i = c.next_i
            if c.cycle:
                if i + k <= n:
                    chunk = fr[i : i + k]
                else:
                    chunk = list(fr[i:]) + list(fr[: (i + k) - n])
                c.next_i = (i + k) % n
            else:
                chunk = fr[i : i + k]
                c.next_i = i + len(chunk)
                if c.next_i >= n:
                    c.done_sending = True
            c.outstanding += len(chunk)
            data = b"".join(chunk)
            if c.outbuf:
                c.outbuf += data
                return
            sent = c.sock.send(data)
            if sent < len(data):
                c.outbuf += data[sent:]
                sel.modify(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)

        t_start = time.monotonic()
        hard_end = t_start + deadline_s
        measuring = not cycle or ramp_s <= 0
        t_meas = t_start
        base_replies = base_errors = base_events = 0
        gen0 = time.process_time()
        srv0 = server_cpu()
        sending = True
        events_done: float | None = None
        total_events = 0
        for c in clients:
            fill(c, window)
        unpack = _REPLY.unpack_from
        # recv_into one buffer: recv(256 KiB) would map and unmap that much per read (above
        # glibc's mmap threshold), costing the generator CPU the servers beside it need
        scratch = bytearray(262144)
        scratch_view = memoryview(scratch)
        while True:
            now = time.monotonic()
            if now > hard_end:
                raise TimeoutError(f"load did not finish within {deadline_s}s")
            if cycle:
                if not measuring and now - t_start >= ramp_s:
                    measuring = True
                    t_meas = now
                    base_replies = sum(c.replies for c in clients)
                    base_errors = sum(c.errors for c in clients)
                    base_events = sum(c.events for c in clients)
                    gen0 = time.process_time()
                    srv0 = server_cpu()
                if measuring and sending and now - t_meas >= duration_s:
                    # End of the measured interval: snapshot, then drain what is in flight.
                    sending = False
                    t_end = now
                    replies = sum(c.replies for c in clients) - base_replies
                    errors = sum(c.errors for c in clients) - base_errors
                    events = sum(c.events for c in clients) - base_events
                    gen1 = time.process_time()
                    srv1 = server_cpu()
            if not sending and all(c.outstanding == 0 for c in clients):
                break
            if not cycle and all(c.done_sending and c.outstanding == 0 for c in clients):
                if total_events >= expect_events:
                    t_end = time.monotonic()
                    replies = sum(c.replies for c in clients)
                    errors = sum(c.errors for c in clients)
                    events = sum(c.events for c in clients)
                    gen1 = time.process_time()
                    srv1 = server_cpu()
                    break
            for key, mask in sel.select(0.05):
                c = key.data
                if mask & selectors.EVENT_WRITE:
                    sent = c.sock.send(c.outbuf)
                    del c.outbuf[:sent]
                    if not c.outbuf:
                        sel.modify(c.sock, selectors.EVENT_READ, c)
                if mask & selectors.EVENT_READ:
                    nread = c.sock.recv_into(scratch)
                    if not nread:
                        raise ConnectionError("server closed a load connection")
                    buf = c.inbuf
                    buf += scratch_view[:nread]
                    pos = 0
                    end = len(buf)
                    got = 0
                    while end - pos >= 20:
                        n, xid, _zxid, err = unpack(buf, pos)
                        if n > MAX_FRAME or n < 16:
                            raise ConnectionError(f"bad reply frame length {n}")
                        if end - pos - 4 < n:
                            break
                        pos += 4 + n
                        if xid == NOTIFICATION_XID:
                            c.events += 1
                            total_events += 1
                            if (
                                events_done is None
                                and expect_events
                                and total_events >= expect_events
                            ):
                                events_done = time.monotonic() - t_start
                            continue
                        got += 1
                        if err:
                            c.errors += 1
                    if pos:
                        del buf[:pos]
                    if got:
                        c.replies += got
                        c.outstanding -= got
                        # Refill in batches of at least a quarter window: fewer, larger sends (the
                        # generator's cost is mostly syscalls, not Python work per request).
                        free = window - c.outstanding
                        if (
                            sending
                            and not c.done_sending
                            and (free >= refill or c.outstanding == 0)
                        ):
                            fill(c, free)
        return LoadResult(
            replies=replies,
            errors=errors,
            events=events,
            wall_s=t_end - (t_meas if cycle else t_start),
            gen_cpu_s=gen1 - gen0,
            server_cpu_s=srv1 - srv0,
            events_done_s=events_done,
        )


def close_sessions(socks: Sequence[socket.socket], deadline_s: float = 30.0) -> None:
    """closeSession on every socket, wait (bounded) for each reply, close the sockets."""
    if not socks:
        return
    try:
        run_load(
            [_nb(s) for s in socks],
            [[close_frame(0x7FFFFFF0)] for _ in socks],
            window=1,
            cycle=False,
            deadline_s=deadline_s,
        )
    except (ConnectionError, OSError):
        pass  # the server may close right after the reply; that is fine here
    finally:
        for s in socks:
            s.close()


def _nb(s: socket.socket) -> socket.socket:
    s.setblocking(False)
    return s


def open_many_sessions(
    host: str,
    port: int,
    n: int,
    concurrency: int = 32,
    deadline_s: float = 120.0,
    sources: Sequence[str] = (),
    session_ms: int = 30000,
) -> tuple[float, list[socket.socket]]:
    """Open ``n`` sessions with at most ``concurrency`` handshakes in flight; time until all are
    established. Returns (seconds, sockets) — the caller closes them. ``sources``: local
    addresses to connect from in turn (one address has ~28,000 ephemeral ports)."""
    sel = selectors.EpollSelector()
    hs = handshake_bytes(session_ms)
    done: list[socket.socket] = []
    pending: dict[socket.socket, bytearray] = {}
    started = 0
    t0 = time.monotonic()
    end = t0 + deadline_s
    try:
        while len(done) < n:
            while started < n and len(pending) < concurrency:
                src = (sources[started % len(sources)], 0) if sources else None
                s = socket.create_connection((host, port), timeout=10.0, source_address=src)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(hs)
                s.setblocking(False)
                pending[s] = bytearray()
                sel.register(s, selectors.EVENT_READ, s)
                started += 1
            if time.monotonic() > end:
                raise TimeoutError(f"{len(done)}/{n} sessions opened in {deadline_s}s")
            for key, _ in sel.select(0.05):
                s = key.data
                data = s.recv(4096)
                if not data:
                    raise ConnectionError("server closed a connecting session")
                buf = pending[s]
                buf += data
                if len(buf) >= 4 and len(buf) >= 4 + _LEN.unpack_from(buf, 0)[0]:
                    resp, _ = ConnectResponse.decode_from(bytes(buf[4:]), 0)
                    if resp.sessionId == 0:
                        raise ConnectionError("session refused")
                    sel.unregister(s)
                    del pending[s]
                    done.append(s)
        elapsed = time.monotonic() - t0
    except BaseException:
        for s in list(pending) + done:
            s.close()
        raise
    finally:
        sel.close()
    return elapsed, done
