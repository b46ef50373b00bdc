"""What :mod:`trizk.testing` (one server) and :mod:`trizk.testing_ensemble` (several) share:
the names of the modes a test server runs in and the error a server that does not start (or
stop) as asked raises. Both import it; :mod:`trizk.testing` re-exports them, so tests catch
``trizk.testing.ServerError`` whichever of the two raised it.
"""

from __future__ import annotations

__all__ = ["IN_PROCESS", "PROCESS", "ServerError"]

#: the server runs in the test's process, on a Trio loop in a thread of its own
IN_PROCESS = "in-process"
#: the server runs as a ``trizk-server`` child process
PROCESS = "process"


class ServerError(RuntimeError):
    """The server did not start (or stop) as asked."""
