"""trizk in other people's tests: throwaway ZooKeeper-compatible servers and ensembles.

The public API (README.md, "Use trizk in your tests") is re-exported here:

* :class:`Server` / :class:`AsyncServer` (:mod:`trizk.testing.server`): one server on a free
  127.0.0.1 port with its own temporary data directory and test controls, in a thread of the
  test process or as a ``trizk-server`` child;
* :class:`Ensemble` / :class:`AsyncEnsemble` (:mod:`trizk.testing.ensemble`): voting members
  and observers with kills, restarts and per-link partitions; imported on first use, so that a
  test using a Server alone imports none of it.

Test servers are quiet unless asked: the ``trizk`` logger gets a NullHandler (configure logging
to see its records). The knob for how they run is one environment variable, ``TRIZK_MODE``
(:data:`MODE_ENV`: ``in-process`` or ``process``; pytest's ``--trizk-mode`` sets it).

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

import logging
from typing import TYPE_CHECKING, Any

from trizk.testing.server import (
    IN_PROCESS,
    MODE_ENV,
    PROCESS,
    READY_PREFIX,
    THREAD,
    AsyncServer,
    NotSupported,
    Server,
    ServerError,
    mode_from_env,
    parse_ready_line,
)

if TYPE_CHECKING:
    from trizk.testing.ensemble import AsyncEnsemble, Ensemble

# Quiet unless asked: in-process servers and ensemble members log through the logging module
# (a member leaving its follower role when a test kills the leader is a WARNING). With no
# handler configured, Python's last-resort handler would print those on stderr; this one
# keeps them silent. Configure logging (logging.basicConfig, pytest's log capture and
# --log-cli-level) and they show as any library's do.
logging.getLogger("trizk").addHandler(logging.NullHandler())

__all__ = [
    "IN_PROCESS",
    "MODE_ENV",
    "PROCESS",
    "READY_PREFIX",
    "THREAD",
    "AsyncEnsemble",
    "AsyncServer",
    "Ensemble",
    "NotSupported",
    "Server",
    "ServerError",
    "mode_from_env",
    "parse_ready_line",
]


def __getattr__(name: str) -> Any:
    # Ensemble (members, link proxies) is imported on first use, so that a test using Server
    # alone imports none of it
    if name in ("Ensemble", "AsyncEnsemble"):
        from trizk.testing import ensemble

        return getattr(ensemble, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
