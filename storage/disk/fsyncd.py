"""The txn log's fsync helper: a small child process that makes the server's writes durable.

Why a process
-------------
The server writes each group-commit batch to the log file on its Trio thread (a ``pwrite`` into
the page cache) and must not wait for the ``fdatasync`` that follows. A worker *thread* can
wait for it, but a Python thread needs the GIL for every line it runs between its syscalls:
waking it, taking the batch and posting the result back each take the GIL from the Trio
thread, which then stalls on the hand-offs. On a closed-loop write load (32 sessions, one
write in flight each) the Trio thread sat ~12 % idle waiting for them. A process has its own
interpreter: the server hands it the file descriptors to sync over a Unix socket
(``SCM_RIGHTS``) and reads the answer when its event loop sees it, and nothing is shared.

Protocol (one request in flight at a time, one reply each)
----------------------------------------------------------
* request: one ``sendmsg`` of one byte per descriptor, ``d`` (``fdatasync``) or ``f``
  (``fsync``: a directory), with the descriptors, in the same order, as ``SCM_RIGHTS``; at
  most :data:`MAX_FDS` of them. The helper closes its copies once synced.
* reply: :data:`REPLY` -- 0 when every one is durable, else the ``errno`` of the first
  failure. After a failure the helper exits: an fsync is never retried (after a failed fsync
  the kernel may have dropped the dirty pages, so a later success would prove nothing).
* end: the server closes its end (or dies): the helper exits.

This module runs as a script, ``python -I -S fsyncd.py FD`` (standard library only, so it
starts in a few milliseconds); the server side is ``trizk.server.shell.persistence``.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import struct
import sys

#: descriptors in one request (Linux allows 253 per message)
MAX_FDS = 64
DATASYNC = ord("d")
FSYNC = ord("f")
#: the reply: 0, or the errno of the first failure
REPLY = struct.Struct(">i")


def sync_one(kind: int, fd: int) -> None:
    """fdatasync (``DATASYNC``; fsync where there is none, as on macOS) or fsync ``fd``."""
    if kind == DATASYNC and hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def serve(sock: socket.socket) -> None:
    """Answer requests on ``sock`` until its other end closes or a sync fails."""
    while True:
        try:
            msg, fds, flags, _ = socket.recv_fds(sock, MAX_FDS, MAX_FDS)
        except OSError:
            return
        if not msg and not fds:
            return  # the server closed its end
        err = 0
        if len(msg) != len(fds) or flags & socket.MSG_CTRUNC:
            err = errno.EPROTO  # never claim durable what was not named right
        for i, fd in enumerate(fds):
            try:
                if not err:
                    sync_one(msg[i], fd)
            except OSError as e:
                err = e.errno or errno.EIO
            finally:
                os.close(fd)
        try:
            sock.sendall(REPLY.pack(err))
        except OSError:
            return
        if err:
            return


def main(argv: list[str]) -> int:
    # Ctrl-C in a terminal signals the whole process group, and a service manager may signal
    # the whole group on stop: the helper ends when the server closes the socket, not before
    # (a sync the server is waiting for must still be answered; a helper gone would make the
    # stopping server report its log failed).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[1]))
    sock.setblocking(True)
    try:
        serve(sock)
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
