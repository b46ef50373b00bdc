"""Wall-clock steps of one member process with libfaketime (Debian's ``faketime`` package).

Theory
------
An NTP step, an operator's ``date -s`` or a VM restored from a snapshot moves a host's wall
clock (``CLOCK_REALTIME``) and leaves its monotonic clock alone. To do that to one member of an
ensemble, the member is started with libfaketime preloaded (``LD_PRELOAD``); the library then
answers the process's ``clock_gettime``/``gettimeofday``/``time`` with the real time plus the
offset written in a file (``FAKETIME_TIMESTAMP_FILE``, one line such as ``+3600`` or ``-3600``)
that the test rewrites at the moment it chooses (:meth:`WallClock.step`).

* ``FAKETIME_DONT_FAKE_MONOTONIC=1``: libfaketime fakes ``CLOCK_MONOTONIC`` too unless told
  not to, which is not what a step does. With it, Java's ``System.nanoTime`` and Python's
  ``time.monotonic``/``perf_counter`` (Trio's clock) run on, only ``System.currentTimeMillis``
  and ``time.time`` jump. Its price, measured with ZooKeeper 3.8.0 on Java 17: the preloaded
  JVM spins (libfaketime 0.9.10's timed condition waits return early), about ten times the CPU
  to start and a quarter of a core while idle, where a JVM with both clocks faked runs as
  usual; so a test preloads only the members whose clocks it steps.
* ``FAKETIME_CACHE_DURATION=1``: the file is read again at most a second after it changed
  (the default is 10 s; ``FAKETIME_NO_CACHE`` would read it on every clock call), so a step
  has taken effect :data:`STEP_EFFECT_S` after :meth:`WallClock.step`.
* ``FAKETIME_DONT_RESET=1``: a child process (trizk's fsync helper) keeps the same offset.

libfaketime 0.9.10 (Debian bookworm) refuses an absolute ``clock_nanosleep`` on the monotonic
clock while ``FAKETIME_DONT_FAKE_MONOTONIC`` is set (EINVAL: Python's ``time.sleep``); a trizk
member never sleeps that way (Trio waits in ``epoll_wait``), and ``tests/compat/
test_clock_steps.py`` checks that ``time.monotonic`` of a preloaded Python is not moved.

Invariants
----------
* Only the member started with :meth:`WallClock.env` is affected; its offset starts at 0.
* :meth:`WallClock.step` sets the offset from the real wall clock (not a further step).
"""

from __future__ import annotations

import glob
from pathlib import Path

__all__ = ["LIBFAKETIME", "STEP_EFFECT_S", "WallClock", "libfaketime"]

#: Debian's libfaketime (package libfaketime, pulled in by faketime), any architecture
LIBFAKETIME = "/usr/lib/*/faketime/libfaketime.so.1"
#: seconds after :meth:`WallClock.step` by which every clock call of the member sees the step
#: (FAKETIME_CACHE_DURATION=1, plus the second that libfaketime's cache check rounds to)
STEP_EFFECT_S = 2.2


def libfaketime() -> str | None:
    """The path of libfaketime.so.1, or None when the faketime package is not installed."""
    found = sorted(glob.glob(LIBFAKETIME))
    return found[0] if found else None


class WallClock:
    """The wall clock of one member process: start it with :meth:`env`, move it with
    :meth:`step`."""

    def __init__(self, path: Path) -> None:
        lib = libfaketime()
        if lib is None:
            raise RuntimeError("libfaketime is not installed (apt-get install faketime)")
        self.lib = lib
        #: the file libfaketime reads the offset from
        self.path = path
        #: the offset in seconds the member's wall clock has now (after STEP_EFFECT_S)
        self.offset = 0
        self.path.write_text("+0\n")

    def env(self) -> dict[str, str]:
        """The member's environment: libfaketime preloaded, the wall clock alone moved."""
        return {
            "LD_PRELOAD": self.lib,
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_DONT_RESET": "1",
        }

    def step(self, seconds: int) -> None:
        """Set the member's wall clock ``seconds`` away from the real one (an NTP step); in
        effect :data:`STEP_EFFECT_S` later."""
        self.offset = seconds
        self.path.write_text(f"{seconds:+d}\n")
