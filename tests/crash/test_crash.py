"""The SIGKILL crash loop (trizk.compat.procs.crashtest), a fast subset.

The full run is ``python -m trizk.compat.procs.crashtest`` (100 rounds); here 5 rounds
(``TRIZK_CRASH_ROUNDS``) with a fixed seed, shorter loads, so the suite stays quick. Each round
kills the server process with SIGKILL during a concurrent write load and checks, after the
restart, that every acknowledged write is there, that multis are all-or-nothing, that nothing
unsent appears and that the writers' sessions survived.
"""

from __future__ import annotations

import io

from tests import seeds
from trizk.compat.procs import crashtest


def test_sigkill_crash_loop_keeps_every_acknowledged_write() -> None:
    rounds = seeds.count("TRIZK_CRASH_ROUNDS", 5)  # tests/seeds.py
    out = io.StringIO()
    res = crashtest.run(rounds, writers=3, depth=8, seed=20240601, max_load_seconds=0.5, out=out)
    assert res.rounds == rounds
    assert res.acknowledged > 0, out.getvalue()
    assert len(res.recovery_seconds) == rounds
