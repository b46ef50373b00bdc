"""kazoo's own test suite, side by side: kazoo's harness launching Java ZooKeeper, and trizk's
drop-in (``pytest --trizk-kazoo``), the same tests from the same kazoo install, interleaved so
that both sides see the same machine.

Run by hand (not in CI; fifteen to forty minutes on a small busy machine)::

    python -m trizk.compat.bench.kazoo_suite [--order jttj] [--nice 10]
        [--tests kazoo.tests.test_client ...] [-k EXPR] [--keep DIR]

The passes run one at a time in the order ``--order`` gives (``j`` Java, ``t`` trizk). The
default, ABBA (Java, trizk, trizk, Java), gives each side one pass early and one late: a load
that rises or falls through the run weighs on both sides alike, which two back-to-back passes
(the bench's earlier form) did not -- its ratios of 4.78 and 6.02 came from halves run at load
averages 64 against 43 and 36 against 16. ``--nice`` (default 10) lowers the bench's priority
and its children's (the JVMs, pytest, trizk's servers), so that the machine's other work keeps
its share and both sides compete with it alike.

What runs in each pass: ``python -m pytest -p no:cacheprovider -p no:trio
--import-mode=append -rs --pyargs <tests>`` in a child process, with a JUnit XML report that
gives every test's outcome (``-p no:trio``: pytest-trio imports hypothesis, whose module-level
``TreeNode`` kazoo's tree-cache leak checks would count; ``--import-mode=append``: pytest's
default would put site-packages, kazoo's rootdir, before the java side's ``PYTHONPATH``).

* **java**: kazoo's unchanged harness (``kazoo.testing``) with the Debian install of Apache
  ZooKeeper 3.8.0 (``ZOOKEEPER_VERSION=3.8.0`` and ``ZOOKEEPER_CLASSPATH``: the jars of
  ``/usr/share/java`` that ``QuorumPeerMain`` with kazoo's ``NettyServerCnxnFactory`` needs,
  :data:`JAVA_CLASSPATH`); ``ZOOKEEPER_PORT_OFFSET`` is a free block of ports, so that two runs
  on one machine do not collide (kazoo's fixed default is 20000). With a ``ZOOKEEPER_VERSION``
  of 3.5 or later kazoo's harness writes ``reconfigEnabled=true``, ``4lw.commands.whitelist=*``
  and ``localSessionsEnabled`` into every member's zoo.cfg and starts every JVM with
  ``-Dreadonlymode.enabled=true``: 3 members, observers none. kazoo 2.11's harness makes its
  certificates with ``X509.add_extensions``, which pyOpenSSL 24.3 removed (trizk needs 25 or
  later): this side runs with pyOpenSSL 24.2.1 and cryptography 43 first on ``PYTHONPATH``, a
  directory ``pip install --target`` fills on first use (:data:`JAVA_SITE_PINS`,
  ``--java-site``), and without trizk's pytest plugin (``-p no:trizk``).
* **trizk**: the same command with ``--trizk-kazoo`` (``kazoo.testing`` is then
  :mod:`trizk.kazoo_harness`, whose members also run with ``reconfigEnabled=true`` and
  read-only mode, as kazoo's) and no ``ZOOKEEPER_*`` variable: the drop-in's defaults.

The kazoo tests come from the installed kazoo distribution (its wheel and sdist both ship
``kazoo/tests``; ``pip install kazoo==2.11.0``), as in ``tests/testing/test_kazoo_harness.py``.
kazoo's optional test dependencies decide what is skipped on both sides alike (gevent,
eventlet, objgraph: ``pip install gevent eventlet objgraph``; without objgraph kazoo's
``test_cache`` module does not even import).

Printed per pass: passed / failed / skipped / errors, the wall time, the CPU time of the pass's
processes (pytest and, for java, the JVMs it reaped), the machine's 1-minute load average just
before and just after the pass, and its mean and range sampled every second during the pass.
Then, over all passes: each side's total wall time and the ratio of the totals (and of the
means of each side's passes), and the sets of tests by outcome -- passed on both sides, passed
only under Java, passed only under trizk (a test "passed" on a side when it passed in every
pass of that side; one that passed in some passes only is listed as unsteady with its
outcomes). ``summary.json`` in the work directory holds all of it. The exit status is 0 when
no test that passed in every Java pass failed in a trizk pass (the criterion of issue 28).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

#: the jars Apache ZooKeeper 3.8.0's QuorumPeerMain needs from Debian's /usr/share/java, with
#: the Netty ones kazoo's zoo.cfg asks for (serverCnxnFactory=NettyServerCnxnFactory, TLS port)
JAVA_JARS = (
    "zookeeper",
    "zookeeper-jute",
    "slf4j-api",
    "slf4j-log4j12",
    "log4j-1.2",
    "commons-cli",
    "commons-io",
    "metrics-core",
    "snappy-java",
    "jackson-annotations",
    "jackson-core",
    "jackson-databind",
    "netty-buffer",
    "netty-codec",
    "netty-common",
    "netty-handler",
    "netty-resolver",
    "netty-transport",
    "netty-transport-native-epoll",
    "netty-transport-native-unix-common",
)
JAVA_DIR = Path("/usr/share/java")
JAVA_CLASSPATH = ":".join(str(JAVA_DIR / f"{jar}.jar") for jar in JAVA_JARS)
#: what kazoo 2.11's harness needs of pyOpenSSL (``X509.add_extensions``: gone in 24.3)
JAVA_SITE_PINS = ("pyOpenSSL==24.2.1", "cryptography==43.0.3")
DEFAULT_JAVA_SITE = Path.home() / ".cache" / "trizk" / "kazoo-bench-java-site"
PYTEST_ARGS = ("-p", "no:cacheprovider", "-p", "no:trio", "--import-mode=append", "-rs", "-q")
DEFAULT_TESTS = ("kazoo.tests",)
#: kazoo's harness takes ports offset .. offset + 10 * size + 4
PORT_BLOCK = 64


SIDES = {"j": "java", "t": "trizk"}


@dataclass
class Run:
    side: str
    wall: float
    cpu: float
    loads: list[float]
    returncode: int
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> outcome
    load_before: float = 0.0
    load_after: float = 0.0
    started: str = ""

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def line(self) -> str:
        load = (
            f"load {self.load_before:.1f} -> {self.load_after:.1f}, mean "
            f"{sum(self.loads) / len(self.loads):.1f} ({min(self.loads):.1f}-"
            f"{max(self.loads):.1f})"
            if self.loads
            else f"load {self.load_before:.1f} -> {self.load_after:.1f}"
        )
        return (
            f"{self.side:6} passed {self.count('passed'):4}  failed {self.count('failed'):3}"
            f"  skipped {self.count('skipped'):3}  errors {self.count('error'):3}"
            f"  wall {self.wall:7.1f} s  cpu {self.cpu:7.1f} s  {load}"
        )

    def summary(self) -> dict[str, object]:
        return {
            "side": self.side,
            "started": self.started,
            "wall": round(self.wall, 1),
            "cpu": round(self.cpu, 1),
            "load_before": round(self.load_before, 2),
            "load_after": round(self.load_after, 2),
            "load_mean": round(sum(self.loads) / len(self.loads), 2) if self.loads else None,
            "load_min": round(min(self.loads), 2) if self.loads else None,
            "load_max": round(max(self.loads), 2) if self.loads else None,
            "returncode": self.returncode,
            "counts": {o: self.count(o) for o in ("passed", "failed", "skipped", "error")},
            "not_passed": {t: o for t, o in sorted(self.outcomes.items()) if o != "passed"},
        }


@dataclass
class Comparison:
    """The tests by outcome over every pass of each side."""

    both: list[str]
    only_java: list[str]
    only_trizk: list[str]
    unsteady: dict[str, dict[str, list[str]]]  # test -> side -> its outcomes pass by pass
    lost: list[str]  # passed in every Java pass, not in some trizk pass

    @classmethod
    def of(cls, runs: list[Run]) -> Comparison:
        per: dict[str, dict[str, list[str]]] = {
            test: {"java": [], "trizk": []} for run in runs for test in run.outcomes
        }
        for run in runs:
            for test, outcomes in per.items():
                outcomes[run.side].append(run.outcomes.get(test, "not run"))

        def always(test: str, side: str) -> bool:
            return all(o == "passed" for o in per[test][side])

        def ever(test: str, side: str) -> bool:
            return any(o == "passed" for o in per[test][side])

        tests = sorted(per)
        return cls(
            both=[t for t in tests if always(t, "java") and always(t, "trizk")],
            only_java=[t for t in tests if ever(t, "java") and not ever(t, "trizk")],
            only_trizk=[t for t in tests if ever(t, "trizk") and not ever(t, "java")],
            unsteady={
                t: per[t]
                for t in tests
                if any(ever(t, s) and not always(t, s) for s in ("java", "trizk"))
            },
            lost=[t for t in tests if always(t, "java") and not always(t, "trizk")],
        )


def free_port_block(size: int = PORT_BLOCK) -> int:
    """A base port whose next ``size`` ports are all free now (kazoo's harness binds a fixed
    block from ``ZOOKEEPER_PORT_OFFSET``)."""
    for base in range(21000, 60000, size):
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + size):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free block of ports")


def java_site(directory: Path) -> Path:
    """The directory with kazoo's harness's pyOpenSSL (installed there on first use)."""
    marker = directory / ".complete"
    if not marker.exists():
        print(f"installing {' '.join(JAVA_SITE_PINS)} into {directory}", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--target", str(directory)]
        subprocess.run([*pip, *JAVA_SITE_PINS], check=True)
        marker.touch()
    return directory


def java_env(site: Path) -> dict[str, str]:
    missing = [j for j in JAVA_JARS if not (JAVA_DIR / f"{j}.jar").exists()]
    if missing or shutil.which("java") is None:
        raise SystemExit(f"Java ZooKeeper 3.8.0 is not installed here (missing: {missing})")
    path = os.environ.get("PYTHONPATH")
    return {
        "ZOOKEEPER_VERSION": "3.8.0",
        "ZOOKEEPER_CLASSPATH": JAVA_CLASSPATH,
        "ZOOKEEPER_PORT_OFFSET": str(free_port_block()),
        "PYTHONPATH": f"{java_site(site)}:{path}" if path else str(java_site(site)),
    }


def parse_junit(path: Path) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        if "skipped" in kinds:
            outcome = "skipped"
        elif "error" in kinds:
            # an error in a test's teardown after it passed is a second entry: keep the worse
            outcome = "error"
        elif "failure" in kinds:
            outcome = "failed"
        else:
            outcome = "passed"
        if outcomes.get(name) in (None, "passed"):
            outcomes[name] = outcome
    return outcomes


def run_side(
    side: str, n: int, tests: list[str], extra: list[str], workdir: Path, site: Path
) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOOKEEPER_", "TRIZK_"))}
    args = [sys.executable, "-m", "pytest", *PYTEST_ARGS, *extra]
    if side == "java":
        env.update(java_env(site))
        args += ["-p", "no:trizk"]
    else:
        args.append("--trizk-kazoo")
    report = workdir / f"{n}-{side}.xml"
    args += ["--junitxml", str(report), "--pyargs", *tests]
    out = workdir / f"{n}-{side}.log"
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(1.0):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.strftime("%H:%M:%S", time.gmtime())
    load_before = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    sampler.start()
    with open(out, "wb") as f:
        # the work directory is pytest's rootdir: no configuration or conftest of trizk's
        rc = subprocess.call(args, env=env, cwd=workdir, stdout=f, stderr=subprocess.STDOUT)
    wall = time.monotonic() - start
    load_after = os.getloadavg()[0]
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    outcomes = parse_junit(report) if report.exists() else {}
    return Run(side, wall, cpu, loads, rc, outcomes, load_before, load_after, started)


def report(runs: list[Run], workdir: Path) -> int:
    """Print the side-by-side figures of ``runs``; write them to ``summary.json``; the exit
    status (1 when a test that passed in every Java pass failed in a trizk pass)."""
    walls = {s: [r.wall for r in runs if r.side == s] for s in ("java", "trizk")}
    summary: dict[str, object] = {"passes": [r.summary() for r in runs]}
    for side, w in walls.items():
        if w:
            print(f"{side:6} {len(w)} pass(es), wall {' + '.join(f'{x:.1f}' for x in w)} s")
    if not (walls["java"] and walls["trizk"]):
        (workdir / "summary.json").write_text(json.dumps(summary, indent=1))
        return 0
    java = sum(walls["java"]) / len(walls["java"])
    trizk = sum(walls["trizk"]) / len(walls["trizk"])
    print(f"ratio java/trizk of the mean walls: {java / trizk:.2f}")
    cmp = Comparison.of(runs)
    print(
        f"passed on both: {len(cmp.both)}; only under java: {len(cmp.only_java)}; "
        f"only under trizk: {len(cmp.only_trizk)}; unsteady: {len(cmp.unsteady)}"
    )
    for title, tests in (("only under java", cmp.only_java), ("only under trizk", cmp.only_trizk)):
        for t in tests:
            print(f"  {title}: {t}")
    for t, sides in cmp.unsteady.items():
        print(f"  unsteady: {t}: " + "; ".join(f"{s} {' '.join(o)}" for s, o in sides.items()))
    print(f"passed in every java pass, not in every trizk pass: {len(cmp.lost)}")
    for t in cmp.lost:
        print(f"  {t}")
    summary.update(
        ratio=round(java / trizk, 2),
        both=len(cmp.both),
        only_java=cmp.only_java,
        only_trizk=cmp.only_trizk,
        unsteady=cmp.unsteady,
        lost=cmp.lost,
    )
    (workdir / "summary.json").write_text(json.dumps(summary, indent=1))
    return 1 if cmp.lost else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--order",
        default="jttj",
        help="the passes, one letter each: j (Java) or t (trizk); default jttj (ABBA)",
    )
    ap.add_argument("--nice", type=int, default=10, help="niceness added to the bench's")
    ap.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS), help="--pyargs targets")
    ap.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    ap.add_argument("--keep", type=Path, default=None, help="keep logs and reports here")
    ap.add_argument(
        "--java-site",
        type=Path,
        default=DEFAULT_JAVA_SITE,
        help="where the java side's pyOpenSSL is (installed on first use)",
    )
    opts = ap.parse_args(argv)
    if not opts.order or set(opts.order) - set(SIDES):
        ap.error("--order takes letters j and t")
    if opts.nice:
        os.nice(opts.nice)
    extra = ["-k", opts.keyword] if opts.keyword else []
    workdir = opts.keep or Path(tempfile.mkdtemp(prefix="trizk-kazoo-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(
        f"kazoo suite {' '.join(opts.tests)}; passes {opts.order}; {os.cpu_count()} cores; "
        f"niceness {os.nice(0)}; logs in {workdir}"
    )
    runs: list[Run] = []
    for n, letter in enumerate(opts.order, 1):
        side = SIDES[letter]
        print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {n} {side}: running ...", flush=True)
        run = run_side(side, n, opts.tests, extra, workdir, opts.java_site)
        runs.append(run)
        print(run.line(), flush=True)
    status = report(runs, workdir)
    if opts.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
