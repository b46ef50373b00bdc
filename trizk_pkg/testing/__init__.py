"""trizk in other people's tests: throwaway ZooKeeper-compatible servers and ensembles.

The public API (README.md, "Use trizk in your tests") is re-exported here:

* :class:`Server` / :class:`AsyncServer` (:mod:`trizk.testing.server`): one server on a free
  127.0.0.1 port with its own temporary data directory and test controls, in a thread of the
  test process or as a ``trizk-server`` child;
* :class:`Ensemble` / :class:`AsyncEnsemble` (:mod:`trizk.testing.ensemble`): voting members
  and observers with kills, restarts and per-link partitions; imported on first use, so that a
  test using a Server alone imports none of it.

The pieces they are built from are shared with the test suite and ``trizk.compat`` (which
runs trizk side by side with Apache ZooKeeper); nothing here imports ``trizk.compat``:

* :mod:`trizk.testing.loop` -- a Trio loop in a thread (:class:`~trizk.testing.loop.LoopThread`);
* :mod:`trizk.testing.ports` -- free loopback ports, members' addresses and ``server.N`` lines;
* :mod:`trizk.testing.probes` -- is it serving: handshakes, ``srvr``'s mode, waiting for a quorum;
* :mod:`trizk.testing.processes` -- server processes and the process-ensemble harness
  (:class:`~trizk.testing.processes.MemberSet`: directories, zoo.cfg files, start, stop, kill);
* :mod:`trizk.testing.linkproxy` -- a TCP proxy per directed pair of members, to cut links.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trizk.testing.server import (
    IN_PROCESS,
    PROCESS,
    READY_PREFIX,
    THREAD,
    AsyncServer,
    NotSupported,
    Server,
    ServerError,
    parse_ready_line,
)

if TYPE_CHECKING:
    from trizk.testing.ensemble import AsyncEnsemble, Ensemble

__all__ = [
    "IN_PROCESS",
    "PROCESS",
    "READY_PREFIX",
    "THREAD",
    "AsyncEnsemble",
    "AsyncServer",
    "Ensemble",
    "NotSupported",
    "Server",
    "ServerError",
    "parse_ready_line",
]


def __getattr__(name: str) -> Any:
    # Ensemble (members, link proxies) is imported on first use, so that a test using Server
    # alone imports none of it
    if name in ("Ensemble", "AsyncEnsemble"):
        from trizk.testing import ensemble

        return getattr(ensemble, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
