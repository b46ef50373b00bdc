"""How much randomness one test run spends: every seed and example count of the suite, each
reachable by an environment variable.

The defaults are sized for CI (the whole suite in minutes, every path still exercised); a long
run raises them, a quick look lowers them::

    TRIZK_HYPOTHESIS_SCALE=20 python -m pytest -q tests/jute tests/storage     # 20x examples
    ZAB_SIM_SEEDS=2000 python -m pytest -q tests/quorum/sim/test_zab_sim.py
    TRIZK_WIREFUZZ_CASES=1000 python -m pytest -q tests/compat/test_wirefuzz.py

A count variable replaces its default; the scale multiplies the Hypothesis defaults it covers.

==========================  ================================================================
variable                    what (default)
==========================  ================================================================
TRIZK_HYPOTHESIS_SCALE      factor on every Hypothesis test's ``max_examples`` (1): the counts
                            written in the tests and Hypothesis' own default of 100
TRIZK_PROP_EXAMPLES         tests/quorum/test_election.py, any input sequence keeps the rules
                            (300; set, it wins over the scale)
TRIZK_FUZZ_EXAMPLES         tests/server/test_fuzz_requests.py, every fuzzer there (150; set, it
                            wins over the scale)
ZAB_SIM_SEEDS               tests/quorum/sim/test_zab_sim.py, seeds per configuration
                            (``CI_SEEDS`` there: 40 to 400)
ZAB_SIM_FIRST               the first of those seeds (0)
TRIZK_SIM_SEEDS             tests/quorum/sim/test_election_sim.py, seeds per configuration (1000)
TRIZK_SIM_SEED              one election seed only (a replay)
TRIZK_DISK_CRASH_SEEDS      tests/storage/test_treeio.py, seeded crashes of a disk that loses
                            unsynced bytes (12)
TRIZK_CRASH_ROUNDS          tests/crash, SIGKILL rounds of the crash loop (5)
TRIZK_COMPAT_RANDOM_SEEDS   tests/compat/test_compat.py, random scenarios per random-mode run
                            against ZooKeeper (2)
TRIZK_WIREFUZZ_CASES        tests/compat/test_wirefuzz.py, fuzzed frames sent to ZooKeeper and
                            trizk (70)
==========================  ================================================================

Fixed on purpose: the regression seeds (each once failed), the mutation checks that search a few
seeds until a planted bug is caught, and the seeds that golden outputs were recorded with.
"""

from __future__ import annotations

import os


def count(variable: str, default: int) -> int:
    """The environment variable ``variable`` as a count when it is set, else ``default``."""
    text = os.environ.get(variable, "").strip()
    return int(text) if text else default


def scale() -> float:
    """TRIZK_HYPOTHESIS_SCALE (1.0 when unset)."""
    text = os.environ.get("TRIZK_HYPOTHESIS_SCALE", "").strip()
    return float(text) if text else 1.0


def examples(default: int, variable: str | None = None) -> int:
    """A Hypothesis ``max_examples``: ``variable`` when that is set, else ``default`` times
    TRIZK_HYPOTHESIS_SCALE (at least one example)."""
    if variable is not None and os.environ.get(variable, "").strip():
        return count(variable, default)
    return max(1, round(default * scale()))
