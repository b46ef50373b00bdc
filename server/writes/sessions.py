"""Sessions: ids, passwords, timeouts and expiry buckets (``SessionTrackerImpl``/``ExpiryQueue``).

Pure: every method takes ``now`` (milliseconds on a monotonic clock) from the caller.

* Session ids start at ``((now_wall_ms << 24) >>> 8) | (serverId << 56)`` and count up, as
  ``SessionTrackerImpl.initializeNextSessionId``; standalone servers use serverId 0.
* The password is ``java.util.Random(sessionId ^ 0xB3415C00).nextBytes(16)`` as
  ``ZooKeeperServer.generatePasswd``, so a password is checked without storing it.
* Expiry is bucketed to multiples of tickTime: touching a session moves it to the bucket
  ``roundToNextInterval(now + timeout)``; :meth:`SessionTracker.expired` returns the sessions of
  every bucket whose time has come. A session therefore expires between ``timeout`` and
  ``timeout + tickTime`` after it was last heard from, as in ZooKeeper.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trizk.storage.formats.snapshot import to_java_long

_SUPER_SECRET = 0xB3415C00
_MASK48 = (1 << 48) - 1


class JavaRandom:
    """java.util.Random (the 48-bit LCG), enough for ``nextBytes``."""

    __slots__ = ("_seed",)

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ 0x5DEECE66D) & _MASK48

    def _next(self, bits: int) -> int:
        self._seed = (self._seed * 0x5DEECE66D + 0xB) & _MASK48
        v = self._seed >> (48 - bits)
        if v >= 1 << (bits - 1):
            v -= 1 << bits
        return v

    def next_int(self) -> int:
        return self._next(32)

    def next_bytes(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            rnd = self.next_int()
            for _ in range(min(n - len(out), 4)):
                out.append(rnd & 0xFF)
                rnd >>= 8
        return bytes(out)


def generate_password(session_id: int) -> bytes:
    return JavaRandom(to_java_long(session_id ^ _SUPER_SECRET)).next_bytes(16)


def initial_session_id(now_wall_ms: int, server_id: int = 0) -> int:
    sid = ((now_wall_ms << 24) & ((1 << 64) - 1)) >> 8
    sid |= server_id << 56
    sid = to_java_long(sid)
    if sid == -0x8000000000000000:  # EphemeralType.CONTAINER_EPHEMERAL_OWNER
        sid += 1
    return sid


#: Session.owner of sessions attached to the sequencer's own server (``ServerCnxn.me``)
LOCAL = -1


@dataclass(slots=True)
class Session:
    id: int
    timeout: int
    expiry: int = 0
    closing: bool = False
    #: authenticated ids (scheme, id), as ServerCnxn.authInfo carries them
    auth: list[tuple[str, str]] = field(default_factory=list)
    #: the server the session is attached to (SessionImpl.owner): None until a request or a
    #: revalidation sets it; LOCAL for the sequencer's own server, else a learner's sid
    owner: int | None = None


class SessionTracker:
    """Session table with tick-bucketed expiry."""

    def __init__(self, tick_ms: int, now: int, first_id: int) -> None:
        self.interval = tick_ms
        self.sessions: dict[int, Session] = {}
        self._buckets: dict[int, set[int]] = {}
        self._next_expiration = self._round(now)
        self._next_id = first_id

    def _round(self, t: int) -> int:
        return (t // self.interval + 1) * self.interval

    def allocate_id(self) -> int:
        sid = self._next_id
        self._next_id = to_java_long(self._next_id + 1)
        return sid

    def add(self, session_id: int, timeout: int, now: int) -> Session:
        s = self.sessions.get(session_id)
        if s is None:
            s = self.sessions[session_id] = Session(session_id, timeout)
        self._move(s, timeout, now)
        return s

    def touch(self, session_id: int, now: int, timeout: int | None = None) -> bool:
        s = self.sessions.get(session_id)
        if s is None or s.closing:
            return False
        # _move, with its common case (the session stays in its bucket) inline: every request
        # touches its session
        new = self._round(now + (s.timeout if timeout is None else timeout))
        if new != s.expiry:
            self._move_to(s, new)
        return True

    def _move(self, s: Session, timeout: int, now: int) -> None:
        new = self._round(now + timeout)
        if new != s.expiry:
            self._move_to(s, new)

    def _leave_bucket(self, s: Session) -> None:
        """Take ``s`` out of its expiry bucket (none while its expiry is 0)."""
        if s.expiry:
            b = self._buckets.get(s.expiry)
            if b is not None:
                b.discard(s.id)
                if not b:
                    del self._buckets[s.expiry]

    def _move_to(self, s: Session, new: int) -> None:
        self._leave_bucket(s)
        self._buckets.setdefault(new, set()).add(s.id)
        s.expiry = new

    def remove(self, session_id: int) -> None:
        s = self.sessions.pop(session_id, None)
        if s is not None:
            self._leave_bucket(s)

    def expired(self, now: int) -> list[Session]:
        """Sessions whose expiry bucket is due at ``now``; they are marked closing."""
        out: list[Session] = []
        while self._next_expiration <= now:
            for sid in sorted(self._buckets.pop(self._next_expiration, ())):
                s = self.sessions.get(sid)
                if s is not None and not s.closing:
                    s.closing = True
                    out.append(s)
            self._next_expiration += self.interval
        return out

    def wait_time(self, now: int) -> int:
        """Milliseconds until the next bucket is due (0 if due now)."""
        return max(0, self._next_expiration - now)
