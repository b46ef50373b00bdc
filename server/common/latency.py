"""The min/max/total/count of request latencies, one counter for the server and one per
connection.

ZooKeeper keeps the same four numbers twice: ``ServerStats.requestLatency`` (an
``AvgMinMaxCounter``, ``srvr``/``mntr``'s latencies) and each ``ServerCnxn``'s
``minLatency``/``maxLatency``/``totalLatency``/``count`` (``cons``). Both update them the same
way for every answered request, so one :class:`Latency` serves both. Invariant: ``min`` is -1
until the first :meth:`Latency.add` (readers show 0 then); ``max``, ``total`` and ``count``
start at 0. Pure (compiled with mypyc; :meth:`Latency.add` runs once per reply).
"""

from __future__ import annotations

__all__ = ["Latency"]


class Latency:
    """Smallest, largest and summed latency (ms) of ``count`` answered requests."""

    __slots__ = ("count", "max", "min", "total")

    def __init__(self) -> None:
        self.min = -1
        self.max = 0
        self.total = 0
        self.count = 0

    def add(self, latency: int) -> None:
        if self.min < 0 or latency < self.min:
            self.min = latency
        if latency > self.max:
            self.max = latency
        self.total += latency
        self.count += 1

    def reset(self) -> None:
        """Back to the start (4lw ``srst`` for the server, ``crst`` for a connection)."""
        self.min = -1
        self.max = self.total = self.count = 0
