"""Is it serving? Blocking probes of a ZooKeeper-protocol server (trizk or Apache ZooKeeper).

Theory
------
ZooKeeper answers a four-letter word before it accepts sessions, and an ensemble member
accepts none until an election and Zab's synchronisation are over; so "serving" means a real
session handshake succeeded (:func:`handshake_ok`, the session then closed cleanly so that it
leaves no expiry behind), or a request was answered on it (:func:`probe`: the handshake, then
``exists /``). An ensemble member's role comes from ``srvr``'s ``Mode:`` line
(:func:`member_mode`); :func:`wait_serving` polls both until every member has a role, exactly
one leads, and every one accepts a session.

Invariants
----------
* Every probe is bounded by its socket timeout and answers False or '' rather than raising
  when nothing (or something else) answers (:func:`ask`, the four-letter word sender under
  :func:`four_letter`, is the strict one: it raises OSError); :func:`wait_serving` is
  bounded by its deadline and fails with a TimeoutError naming the modes it saw.
* A handshake is sent as ZooKeeper 3.8 clients send it: ConnectRequest with the readOnly byte.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Mapping

from trizk.jute.codes import OpCode
from trizk.jute.framing import frame
from trizk.jute.records import ConnectRequest, ConnectResponse, ExistsRequest, RequestHeader

__all__ = [
    "ask",
    "four_letter",
    "handshake_bytes",
    "handshake_ok",
    "member_mode",
    "probe",
    "wait_serving",
]

#: the largest reply a probe reads (jute.maxbuffer's default)
_MAX_FRAME = 0xFFFFF


def handshake_bytes(
    timeout_ms: int = 30000, session_id: int = 0, passwd: bytes = b"\0" * 16, last_zxid: int = 0
) -> bytes:
    """A ConnectRequest frame as ZooKeeper 3.8 clients send it (with the readOnly byte)."""
    req = ConnectRequest(
        protocolVersion=0,
        lastZxidSeen=last_zxid,
        timeOut=timeout_ms,
        sessionId=session_id,
        passwd=passwd,
    )
    return frame(req.encode() + b"\0")


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    """One length-prefixed frame's payload (blocking, within the socket's timeout)."""
    (n,) = struct.unpack(">i", _recv_exact(sock, 4))
    if n < 0 or n > _MAX_FRAME:
        raise ConnectionError(f"bad frame length {n}")
    return _recv_exact(sock, n)


def _session(sock: socket.socket) -> bool:
    """Send a handshake on ``sock``: whether the server gave a session."""
    sock.sendall(handshake_bytes())
    resp = ConnectResponse.decode_from(read_frame(sock), 0)[0]
    return resp.sessionId != 0


def _close_session(sock: socket.socket, xid: int) -> None:
    """closeSession, and its reply read if it comes (so the session leaves no expiry behind)."""
    try:
        sock.sendall(frame(RequestHeader(xid=xid, type=OpCode.CLOSESESSION).encode()))
        read_frame(sock)
    except OSError:
        pass


def handshake_ok(host: str, port: int, timeout: float = 2.0) -> bool:
    """True if a session can be established (and is then closed cleanly)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            if not _session(s):
                return False
            _close_session(s, 1)
            return True
    except (OSError, ValueError):
        return False


def probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """One handshake + ``exists /``: True when the server answered both."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            if not _session(s):
                return False
            body = (
                RequestHeader(xid=1, type=OpCode.EXISTS).encode()
                + ExistsRequest(path="/", watch=False).encode()
            )
            s.sendall(frame(body))
            ok = struct.unpack_from(">i", read_frame(s), 0)[0] == 1
            _close_session(s, 2)
            return ok
    except (OSError, ValueError):
        return False


def ask(port: int, word: str | bytes, timeout: float = 3.0, host: str = "127.0.0.1") -> bytes:
    """Send a four-letter word to host:port and read its whole answer (the server closes the
    connection after it). Strict, unlike the probes: OSError (a timeout among them) when
    nothing answers in ``timeout`` s."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode() if isinstance(word, str) else word)
        out = bytearray()
        while chunk := s.recv(65536):
            out += chunk
    return bytes(out)


def four_letter(
    port: int, word: str = "srvr", timeout: float = 3.0, host: str = "127.0.0.1"
) -> str:
    """Send a four-letter word to host:port; the answer ('' if nothing answers)."""
    try:
        return ask(port, word, timeout, host).decode(errors="replace")
    except OSError:
        return ""


def member_mode(host: str, port: int) -> str:
    """A member's ``Mode`` in ``srvr`` (leader / follower / observer / standalone), or '' when
    it is down or not serving."""
    for line in four_letter(port, host=host).splitlines():
        if line.startswith("Mode: "):
            return line[6:].strip()
    return ""


def wait_serving(
    addrs: Mapping[int, tuple[str, int]],
    timeout: float,
    tails: Callable[[], str] = lambda: "",
) -> dict[int, str]:
    """Wait until every member of ``addrs`` (sid -> client address) has a role and accepts a
    session, exactly one of them the leader; their modes. Bounded: past ``timeout`` a
    TimeoutError with the modes seen and ``tails()`` (the members' logs)."""
    deadline = time.monotonic() + timeout
    while True:
        modes = {s: member_mode(*a) for s, a in addrs.items()}
        roles = list(modes.values())
        if (
            roles.count("leader") == 1
            and all(roles)
            and all(handshake_ok(*addrs[s], timeout=2.0) for s in modes)
        ):
            return modes
        if time.monotonic() > deadline:
            raise TimeoutError(f"ensemble not serving within {timeout}s: {modes}\n{tails()}")
        time.sleep(0.05)  # polling interval of a bounded wait
