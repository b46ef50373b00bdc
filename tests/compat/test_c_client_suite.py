"""Apache ZooKeeper's own C client test suite (``zktest-mt``, 3.8.0) against trizk.

Opt-in (``TRIZK_C_SUITE=1``): on a clean machine the build takes 2-3 minutes and the subset
2-3 more, beyond what the 25-minute CI budget leaves; ``TRIZK_C_SUITE=1
sh compat/install-zookeeper.sh`` installs the build tools, then ``TRIZK_C_SUITE=1 python -m
pytest -q tests/compat/test_c_client_suite.py``.

The suite is built from Debian's source package (cached; :mod:`trizk.compat.ctests.build`) and
its CI subset (``run.CI_TESTS``: two reconfig tests on three-member ensembles started through
``$ZKROOT``, one read-only test) runs against ZooKeeper 3.8.0 and then against trizk: every
test that passes on ZooKeeper must pass on trizk. All reconfig and read-only tests:
``python -m trizk.compat.ctests.run --reconfig-ro``; the whole suite, side by side:
``python -m trizk.compat.ctests.run`` (compat/README.md).
"""

from __future__ import annotations

import os

import pytest

from trizk.compat.ctests import build, results, run

pytestmark = [pytest.mark.oracle, pytest.mark.slow]


def test_c_client_suite_ci_subset(needs_zookeeper38: None) -> None:
    if os.environ.get("TRIZK_C_SUITE") != "1":
        pytest.skip("TRIZK_C_SUITE=1 builds and runs ZooKeeper's C client suite (~5 min)")
    b = build.cached()
    if b is None or not b.cli_mt.exists():  # (cli_mt: test_kerberos.py's C client login)
        missing = build.missing_tools()
        if missing:
            pytest.skip(
                "the C client suite's build tools are missing (Debian packages: "
                f"{' '.join(missing)}; compat/install-zookeeper.sh installs them)"
            )
        b = build.build()
    zookeeper = run.run_side(b, "zookeeper", run.CI_TESTS)
    trizk = run.run_side(b, "trizk", run.CI_TESTS)
    cmp = results.Comparison(zookeeper.outcomes, trizk.outcomes)
    assert cmp.both(), f"no test passed on both sides:\n{cmp.table()}"
    assert not cmp.only_zookeeper(), (
        f"passed on ZooKeeper, not on trizk (outputs in {build.cache_dir() / 'logs'}):\n"
        f"{cmp.table()}"
    )
