"""Sliding-window quantiles with simpleclient 0.9.0's window semantics. Pure: time is passed in.

Theory of operation
===================
ZooKeeper 3.8's Prometheus provider builds every summary as simpleclient 0.9.0's
``Summary.build(name, name).quantile(0.5, 0.05)`` (and, for ``DetailLevel.ADVANCED``,
``.quantile(0.9, 0.01).quantile(0.99, 0.001)``) with the builder's defaults
``maxAgeSeconds = 600`` and ``ageBuckets = 5``. simpleclient's ``TimeWindowQuantiles`` keeps a
ring of ``ageBuckets`` CKMS estimators, inserts every observation into all of them and answers
from the current one; ``rotate()`` (run on every insert and every read) resets the current
estimator and moves to the next one each time more than ``maxAge / ageBuckets`` ms (D) have
passed since the last rotation. Rotations are therefore a function of time alone: at time
``now`` the number of rotations done is ``k(now) = max(0, ceil((now - start) / D) - 1)`` and
the current estimator holds exactly the observations made in *slices* ``k-(ageBuckets-1) .. k``,
where an observation made at ``t`` falls in slice ``k(t)`` (at ``t = start + j*D`` exactly,
rotation j has not happened yet: ``>`` in ``rotate``).

This module keeps one compact summary per slice instead of ``ageBuckets`` full estimators
(each observation is appended once to a buffer, not inserted five times), and answers a
quantile from the live slices. A summary is Greenwald and Khanna's: a sorted list of
``(v, rmin, rmax)``, bounds of the rank of the element ``v`` among the ``n`` summarised. Its
error certificate is the largest gap ``rmax(next) - rmin(prev)``: when every gap is at most
``2e + 1`` (the first and last entries exact), some entry has both bounds within ``e`` of any
rank ``t``. Merging two summaries adds their ``e``; pruning drops entries while the gaps stay
at most ``2 * floor(eps * n) + 1``. A slice merges its buffer (an exact summary) every 1024
observations and prunes, so its error stays within ``eps * n_s`` in O(1/eps) entries; a read
merges the live slices (error ``eps * N`` over the window's N observations, eps = the smallest
error the summary was built with: CKMS's bound) and answers the rank ``t = max(1, floor(q * N))``
(simpleclient's ``desired = (int)(q * count)``): with an exact window, the ``t``-th smallest
value, as ``CKMSQuantiles.get``. An empty window answers NaN.
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["AGE_BUCKETS", "MAX_AGE_MS", "WindowQuantiles"]

#: simpleclient ``Summary.Builder`` defaults (ZooKeeper's provider sets neither).
MAX_AGE_MS = 600_000
AGE_BUCKETS = 5
#: observations buffered per slice before they are merged into its entries
_BUFFER = 1024


Summary = list[tuple[int, int, int]]  # (v, rmin, rmax), ascending v


def _exact(ordered: list[int]) -> Summary:
    return [(v, i, i) for i, v in enumerate(ordered, 1)]


def merge(a: Summary, na: int, b: Summary, nb: int) -> Summary:
    """The summary of the union (GK merge: ties put ``a``'s elements first); its error is
    the sum of theirs."""
    out: Summary = []
    i = j = 0
    while i < len(a) or j < len(b):
        if j >= len(b) or (i < len(a) and a[i][0] <= b[j][0]):
            v, lo, hi = a[i]
            # b's elements before v: those < v
            lo += b[j - 1][1] if j > 0 else 0
            hi += b[j][2] - 1 if j < len(b) else nb
            i += 1
        else:
            v, lo, hi = b[j]
            # a's elements before v: those <= v (all of a[:i])
            lo += a[i - 1][1] if i > 0 else 0
            hi += a[i][2] - 1 if i < len(a) else na
            j += 1
        out.append((v, lo, hi))
    return out


def prune(s: Summary, threshold: int) -> Summary:
    """Drop entries while every gap ``rmax(next) - rmin(prev)`` stays at most ``2 *
    threshold + 1`` (gaps already within it stay so); the first and last entries are kept."""
    if len(s) <= 2:
        return s
    out = [s[0]]
    limit = 2 * threshold + 1
    for k in range(1, len(s) - 1):
        # keep s[k] only when skipping it would open a gap over the limit
        if s[k + 1][2] - out[-1][1] > limit:
            out.append(s[k])
    out.append(s[-1])
    return out


def query(s: Summary, t: int) -> int:
    """The value whose rank bounds are nearest ``t`` (within the summary's error)."""
    best, best_err = s[0][0], None
    for v, lo, hi in s:
        err = max(t - lo, hi - t)
        if best_err is None or err < best_err:
            best, best_err = v, err
    return best


class _Slice:
    __slots__ = ("buffer", "index", "n", "summary")

    def __init__(self, index: int) -> None:
        self.index = index
        self.n = 0  # observations in the summary
        self.summary: Summary = []
        self.buffer: list[int] = []

    def flush(self, eps: float) -> None:
        if not self.buffer:
            return
        self.buffer.sort()
        m = len(self.buffer)
        merged = merge(self.summary, self.n, _exact(self.buffer), m)
        self.n += m
        self.buffer = []
        self.summary = prune(merged, math.floor(eps * self.n))


class WindowQuantiles:
    """The quantiles ``qs`` of the observations of the last ``max_age_ms`` (in
    ``age_buckets`` steps), each within rank error ``eps * N``. ``start`` is the creation time
    (ms, the clock every later ``now`` is read from)."""

    __slots__ = ("_current", "_slice_end", "_slices", "age_buckets", "eps", "slice_ms", "start")

    def __init__(
        self,
        eps: float,
        start: int,
        *,
        max_age_ms: int = MAX_AGE_MS,
        age_buckets: int = AGE_BUCKETS,
    ) -> None:
        self.eps = eps
        self.start = start
        self.age_buckets = age_buckets
        # TimeUnit.SECONDS.toMillis(maxAgeSeconds) / ageBuckets (integer division)
        self.slice_ms = max(1, max_age_ms // age_buckets)
        self._current = _Slice(0)
        self._slices: deque[_Slice] = deque([self._current])
        self._slice_end = start + self.slice_ms

    def slice_of(self, now: int) -> int:
        """Rotations done by ``now`` (the index of the slice an observation at ``now`` is in)."""
        return max(0, -(-(now - self.start) // self.slice_ms) - 1)

    def _rotate(self, now: int) -> None:
        k = max(self.slice_of(now), self._current.index)  # a clock never runs back here
        if k > self._current.index:
            self._current.flush(self.eps)
            self._current = _Slice(k)
            self._slices.append(self._current)
        oldest = k - (self.age_buckets - 1)
        while self._slices[0].index < oldest:
            self._slices.popleft()
        self._slice_end = self.start + (k + 1) * self.slice_ms

    def insert(self, value: int, now: int) -> None:
        if now > self._slice_end:
            self._rotate(now)
        buf = self._current.buffer
        buf.append(value)
        if len(buf) >= _BUFFER:
            self._current.flush(self.eps)

    def get(self, qs: tuple[float, ...], now: int) -> tuple[float, ...]:
        """The estimates of ``qs`` at ``now`` (NaN each when the window is empty)."""
        self._rotate(now)
        total = 0
        window: Summary = []
        for sl in self._slices:
            sl.flush(self.eps)
            window = merge(window, total, sl.summary, sl.n)
            total += sl.n
        if total == 0:
            return tuple(math.nan for _ in qs)
        return tuple(float(query(window, max(1, int(q * total)))) for q in qs)
