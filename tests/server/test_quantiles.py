"""The sliding-window quantile estimator behind the Prometheus summaries: within its rank error
of the exact quantile of the window, with simpleclient 0.9.0's rotation semantics."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.server.common.quantiles import WindowQuantiles

QS = (0.5, 0.9, 0.99)


def _within(window: list[int], q: float, eps: float, estimate: float) -> bool:
    """Whether ``estimate`` is the exact window's value at a rank in [t - eps*N, t + eps*N]
    (t = simpleclient's ``(int)(q * count)``, at least 1)."""
    ordered = sorted(window)
    n = len(ordered)
    t = max(1, int(q * n))
    lo = max(1, math.ceil(t - eps * n))
    hi = min(n, math.floor(t + eps * n))
    return ordered[lo - 1] <= estimate <= ordered[hi - 1]


def test_empty_window_is_nan() -> None:
    w = WindowQuantiles(0.05, start=1000)
    assert all(math.isnan(x) for x in w.get(QS, 1000))


def test_exact_while_small_as_simpleclient() -> None:
    # CKMSQuantiles.get on an uncompressed sample: the (int)(q * n)-th smallest (at least 1st)
    w = WindowQuantiles(0.05, start=0)
    for v in range(1, 11):
        w.insert(v, 5)
    assert w.get((0.5, 0.9, 0.99, 0.01), 5) == (5.0, 9.0, 9.0, 1.0)


def test_window_rotates_as_time_window_quantiles() -> None:
    # maxAge 10 s in 5 buckets: D = 2000 ms; the answer covers slices k-4 .. k
    w = WindowQuantiles(0.05, start=0, max_age_ms=10_000, age_buckets=5)
    w.insert(100, 1)
    w.insert(100, 2000)  # t = start + D exactly: still slice 0 (rotate needs "> D")
    w.insert(1, 2001)  # slice 1
    assert w.slice_of(2000) == 0 and w.slice_of(2001) == 1
    assert w.get((0.99,), 10_000) == (100.0,)  # slices 0..4: [1, 100, 100], rank int(2.97)
    assert w.get((0.99,), 10_001) == (1.0,)  # slices 1..5: slice 0 dropped
    assert w.get((0.99,), 12_000) == (1.0,)
    assert math.isnan(w.get((0.5,), 12_001)[0])  # slices 2..6: empty


@settings(max_examples=examples(60), deadline=None)
@given(
    n=st.integers(1, 8000),
    seed=st.integers(0, 2**32),
    skew=st.sampled_from([1, 1, 7, 1000]),
    advanced=st.booleans(),
)
def test_estimates_within_the_error_bound(n: int, seed: int, skew: int, advanced: bool) -> None:
    eps = 0.001 if advanced else 0.05
    w = WindowQuantiles(eps, start=0)
    data = [(seed + i * 7919) % 100_003 // skew for i in range(n)]  # mostly distinct
    for i, v in enumerate(data):
        w.insert(v, i // 10)  # all in one window (600 s)
    estimates = w.get(QS, len(data))
    for q, est in zip(QS, estimates, strict=True):
        assert _within(data, q, eps, est), (q, est)


@settings(max_examples=examples(40), deadline=None)
@given(
    events=st.lists(
        st.tuples(st.integers(0, 700), st.integers(0, 10_000)), min_size=1, max_size=3000
    ),
)
def test_sliding_window_within_the_error_bound(events: list[tuple[int, int]]) -> None:
    # observations spread over time; the estimate is checked against the exact window
    w = WindowQuantiles(0.01, start=0, max_age_ms=5000, age_buckets=5)
    now = 0
    seen: list[tuple[int, int]] = []
    for step, v in events:
        now += step
        w.insert(v, now)
        seen.append((w.slice_of(now), v))
    k = w.slice_of(now)
    window = [v for s, v in seen if s >= k - 4]
    (est,) = w.get((0.9,), now)
    assert _within(window, 0.9, 0.01, est)


def test_memory_stays_bounded() -> None:
    w = WindowQuantiles(0.001, start=0)
    for i in range(200_000):
        w.insert((i * 7919) % 100_003, 0)
    w.get(QS, 0)
    assert sum(len(s.summary) for s in w._slices) <= 2 / 0.001 + 2
