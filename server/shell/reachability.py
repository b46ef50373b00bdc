"""Which of a multi-address member's addresses are reachable (``MultipleAddresses``, with
``multiAddress.reachabilityCheckEnabled`` / ``multiAddress.reachabilityCheckTimeoutMs``).

Theory
------
ZooKeeper asks ``InetAddress.isReachable(timeout)`` of an address's *host*, not of its port:
with the privilege to, an ICMP echo; without it, a TCP connection to port 7 (echo), where a
connection accepted or refused both mean the host answered. :func:`is_reachable` is the second
form (it needs no privilege, and gives the ICMP answer wherever a reachable host answers TCP):
a host is unreachable when nothing answers within the timeout, or the network says it cannot be
reached (no route, host or network unreachable).

Where the check is made, as in ZooKeeper 3.8:

* a learner connecting to its leader tries the leader's reachable quorum addresses, or all of
  them if none is (``Learner.connectToLeader``, ``getAllReachableAddressesOrAll``,
  ZOOKEEPER-3758); trizk then connects to those at once and keeps the first that answers;
* an election connection kept to a multi-address member is checked each time a notification
  is sent to it: if the host it goes to is no longer reachable, the connection is closed, so
  that the next one is made through an address that works
  (``SendWorker.asyncValidateIfSocketIsStillReachable``).

Bounded: every check ends within its timeout; checks of several addresses run at once.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence

import trio

__all__ = ["ECHO_PORT", "is_reachable", "reachable_or_all"]

#: the echo service's port, which Java's isReachable connects to without ICMP privileges
ECHO_PORT = 7

#: connect errors that mean the host answered (the port is closed, or it refused us)
_ANSWERED = frozenset({errno.ECONNREFUSED, errno.ECONNRESET})


async def is_reachable(host: str, timeout_ms: int) -> bool:
    """``InetAddress.isReachable(timeout_ms)`` as Java does it without ICMP privileges."""
    with trio.move_on_after(max(timeout_ms, 1) / 1000):
        try:
            stream = await trio.open_tcp_stream(host, ECHO_PORT)
        except OSError as e:
            if e.errno in _ANSWERED:
                return True
            # a multi-error of several resolved addresses: reachable if any of them answered
            causes = getattr(e, "__cause__", None)
            errors = getattr(causes, "exceptions", ()) if causes is not None else ()
            return any(getattr(x, "errno", None) in _ANSWERED for x in errors)
        await stream.aclose()
        return True
    return False


async def reachable_or_all(
    addrs: Sequence[tuple[str, int]], timeout_ms: int
) -> list[tuple[str, int]]:
    """``getAllReachableAddressesOrAll``: the addresses whose host is reachable, in their
    order, or every address when none is (the hosts are checked at once)."""
    if len(addrs) <= 1:
        return list(addrs)
    answers = [False] * len(addrs)

    async def check(i: int, host: str) -> None:
        answers[i] = await is_reachable(host, timeout_ms)

    async with trio.open_nursery() as nursery:
        for i, (host, _port) in enumerate(addrs):
            nursery.start_soon(check, i, host)
    kept = [a for a, ok in zip(addrs, answers, strict=True) if ok]
    return kept or list(addrs)
