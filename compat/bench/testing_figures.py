"""Figures for trizk in other people's tests: how long a fresh server costs a test.

Run by hand (not in CI; about three minutes on a small machine)::

    python -m trizk.compat.bench.testing_figures [--inproc 50] [--spawn 15] [--suite 200]

1. **In-process** (``trizk.testing.Server()``, what the pytest fixtures use): set-up (start, the
   port listening), then the first answered request (a session handshake + ``exists /``), then
   tear-down (stop, data directory removed); medians of ``--inproc`` fresh servers after one
   warm-up start (the first start of a process also pays for importing the server).
2. **Out-of-process, spawn to first answer**: ``Server(mode="process")`` (``trizk-server --port 0
   --testing``, readiness line, then one answered request) against Apache ZooKeeper 3.8 started
   as kazoo's harness and Curator's TestingServer do -- a ``java ... QuorumPeerMain zoo.cfg``
   child polled until a request is answered (:mod:`trizk.compat.procs.launcher`) -- and trizk
   polled the same way; interleaved, ``--spawn`` trials each, medians.
3. **A sample suite**: ``--suite`` small kazoo tests (connect, create, set, get, children,
   an ephemeral, delete), each with a fresh server of its own, run by pytest in a child
   process; wall time with the ``trizk_fresh_server`` fixture (in-process) and with a ZooKeeper
   started per test as in 2. ZooKeeper's run is cut to ``--zk-suite`` tests (default 40) and
   scaled (pytest's own start counted once) when ``--suite`` of them would take longer than
   ``--zk-budget`` seconds; the output says so.

Bytecode: this script compiles trizk's modules first (``compileall``), as ``pip install``
does; an environment with PYTHONDONTWRITEBYTECODE and an editable install would otherwise
compile every module from source at each start.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trizk
from trizk.compat.procs.launcher import start_server
from trizk.compat.procs.servers import zookeeper_available
from trizk.testing import Server
from trizk.testing.probes import probe

SUITE_TEST = """
import pytest
from kazoo.client import KazooClient


@pytest.mark.parametrize("n", range({n}))
def test_small(zk_hosts, n):
    zk = KazooClient(hosts=zk_hosts, timeout=10)
    zk.start(timeout=30)
    try:
        zk.create("/app/config", b"x=%d" % n, makepath=True)
        zk.set("/app/config", b"y")
        assert zk.get("/app/config")[0] == b"y"
        zk.create("/app/worker", ephemeral=True)
        assert sorted(zk.get_children("/app")) == ["config", "worker"]
        zk.delete("/app/worker")
    finally:
        zk.stop()
        zk.close()
"""

SUITE_CONFTEST = """
import os

import pytest


@pytest.fixture
def zk_hosts(request):
    if os.environ["FIGURES_SERVER"] == "trizk":
        yield request.getfixturevalue("trizk_fresh_server").connect_string
        return
    from trizk.compat.procs.launcher import start_server

    srv = start_server("zookeeper")
    try:
        yield srv.address
    finally:
        srv.stop()
"""


def compile_bytecode() -> None:
    roots = {Path(trizk.__file__).parent}
    for sub in ("jute", "server", "storage", "quorum", "compat"):
        mod = __import__(f"trizk.{sub}", fromlist=["_"])
        roots.add(Path(mod.__file__).parent)  # type: ignore[arg-type]
    for root in sorted(roots):
        compileall.compile_dir(str(root), quiet=1, maxlevels=0)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def med(values: list[float]) -> float:
    return statistics.median(values)


def answered(port: int) -> None:
    if not probe("127.0.0.1", port, timeout=10.0):
        raise RuntimeError(f"no answer from 127.0.0.1:{port}")


def in_process(trials: int) -> dict[str, float]:
    def once() -> tuple[float, float, float]:
        t0 = time.perf_counter()
        srv = Server()
        srv.start()
        t1 = time.perf_counter()
        answered(srv.port)
        t2 = time.perf_counter()
        srv.close()
        t3 = time.perf_counter()
        return t1 - t0, t2 - t0, t3 - t2

    cold = once()
    runs = [once() for _ in range(trials)]
    return {
        "cold_setup_to_answer": cold[1],
        "setup": med([r[0] for r in runs]),
        "setup_to_answer": med([r[1] for r in runs]),
        "teardown": med([r[2] for r in runs]),
        "setup_plus_teardown": med([r[1] + r[2] for r in runs]),
    }


def spawn(trials: int, with_zk: bool) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"trizk": [], "trizk_polled": [], "zookeeper": []}

    def trizk_harness() -> None:
        t0 = time.monotonic()
        srv = Server(mode="process")
        try:
            srv.start()
            answered(srv.port)
            times["trizk"].append(time.monotonic() - t0)
        finally:
            srv.close()

    def polled(kind: str, key: str) -> Callable[[], None]:
        def run() -> None:
            srv = start_server(kind)
            times[key].append(srv.startup_s)
            srv.stop()

        return run

    order = [trizk_harness, polled("trizk", "trizk_polled")]
    if with_zk:
        order.append(polled("zookeeper", "zookeeper"))
    for i in range(trials):
        for step in order if i % 2 == 0 else order[::-1]:  # ABBA: load drifts evenly
            step()
    return times


def suite(server: str, n: int, workdir: Path) -> float:
    d = workdir / f"suite-{server}-{n}"
    d.mkdir()
    (d / "test_suite.py").write_text(SUITE_TEST.format(n=n))
    (d / "conftest.py").write_text(SUITE_CONFTEST)
    env = dict(os.environ, FIGURES_SERVER=server)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", str(d)]
    cmd += [f"--basetemp={d / 'tmp'}"]
    t0 = time.monotonic()
    run = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if run.returncode != 0 or f"{n} passed" not in run.stdout:
        raise RuntimeError(f"the {server} suite failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    return wall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inproc", type=int, default=50, help="in-process trials (default 50)")
    p.add_argument("--spawn", type=int, default=15, help="spawn trials per server (default 15)")
    p.add_argument("--suite", type=int, default=200, help="tests in the sample suite")
    p.add_argument("--zk-suite", type=int, default=40, help="ZooKeeper suite size if cut")
    p.add_argument("--zk-budget", type=float, default=240.0, help="seconds for ZooKeeper's suite")
    args = p.parse_args(argv)
    with_zk = zookeeper_available()
    compile_bytecode()
    print(f"trizk {trizk.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs,")
    print(f"load average {os.getloadavg()[0]:.1f} at the start; bytecode compiled")
    if not with_zk:
        print("Apache ZooKeeper not installed here: its figures are left out")

    ip = in_process(args.inproc)
    print(f"\n1. in-process Server(), {args.inproc} fresh servers (after a warm-up start):")
    print(f"   set-up (port listening)        {ms(ip['setup'])}")
    print(f"   set-up to first answer         {ms(ip['setup_to_answer'])}")
    print(f"   tear-down (stop, dir removed)  {ms(ip['teardown'])}")
    print(f"   set-up + tear-down             {ms(ip['setup_plus_teardown'])}")
    print(f"   first start in a process (imports included): {ms(ip['cold_setup_to_answer'])}")

    sp = spawn(args.spawn, with_zk)
    print(f"\n2. spawn to first answered request, median of {args.spawn} (interleaved):")
    print(f"   trizk Server(mode='process'), readiness line  {ms(med(sp['trizk']))}")
    print(f"   trizk-server polled as ZooKeeper is           {ms(med(sp['trizk_polled']))}")
    if with_zk:
        zk = med(sp["zookeeper"])
        print(f"   ZooKeeper 3.8 QuorumPeerMain, polled          {ms(zk)}")
        print(f"   ratio trizk / ZooKeeper: {med(sp['trizk']) / zk:.2f} (readiness line),")
        print(f"   {med(sp['trizk_polled']) / zk:.2f} (both polled)")

    n = args.suite
    with tempfile.TemporaryDirectory(prefix="trizk-figures-") as tmp:
        work = Path(tmp)
        trizk_wall = suite("trizk", n, work)
        print(f"\n3. sample suite, {n} small kazoo tests, a fresh server per test (pytest):")
        print(f"   trizk (trizk_fresh_server, in-process)  {trizk_wall:.1f} s")
        if with_zk:
            per_test = med(sp["zookeeper"]) + 0.3  # start + stop + the test, roughly
            zk_n = n if per_test * n <= args.zk_budget else min(args.zk_suite, n)
            zk_wall = suite("zookeeper", zk_n, work)
            scaled, note = zk_wall, ""
            if zk_n != n:
                # scale the tests, not pytest's own start (a one-test trizk run, about)
                overhead = suite("trizk", 1, work)
                scaled = overhead + (zk_wall - overhead) * n / zk_n
                note = (
                    f" ({zk_n} tests run: {zk_wall:.1f} s; scaled to {n} beyond pytest's"
                    f" start of ~{overhead:.1f} s)"
                )
            print(f"   ZooKeeper per test                      {scaled:.1f} s{note}")
            print(f"   ZooKeeper / trizk: {scaled / trizk_wall:.1f}x")
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
