"""kazoo's own test suite, side by side: kazoo's harness launching Java ZooKeeper, then trizk's
drop-in (``pytest --trizk-kazoo``), the same tests from the same kazoo install, one after the
other so that both see the same machine.

Run by hand (not in CI; six to twelve minutes on a small busy machine)::

    python -m trizk.compat.bench.kazoo_suite [--only java|trizk] [--repeat N]
        [--tests kazoo.tests.test_client ...] [-k EXPR] [--keep DIR]

What runs, for each side: ``python -m pytest -p no:cacheprovider -p no:trio
--import-mode=append -rs --pyargs <tests>`` in a child process, with a JUnit XML report that
gives every test's outcome (``-p no:trio``: pytest-trio imports hypothesis, whose module-level
``TreeNode`` kazoo's tree-cache leak checks would count; ``--import-mode=append``: pytest's
default would put site-packages, kazoo's rootdir, before the java side's ``PYTHONPATH``).

* **java**: kazoo's unchanged harness (``kazoo.testing``) with the Debian install of Apache
  ZooKeeper 3.8.0 (``ZOOKEEPER_VERSION=3.8.0`` and ``ZOOKEEPER_CLASSPATH``: the jars of
  ``/usr/share/java`` that ``QuorumPeerMain`` with kazoo's ``NettyServerCnxnFactory`` needs,
  :data:`JAVA_CLASSPATH`); ``ZOOKEEPER_PORT_OFFSET`` is a free block of ports, so that two runs
  on one machine do not collide (kazoo's fixed default is 20000). kazoo 2.11's harness makes
  its certificates with ``X509.add_extensions``, which pyOpenSSL 24.3 removed (trizk needs 25
  or later): this side runs with pyOpenSSL 24.2.1 and cryptography 43 first on ``PYTHONPATH``,
  a directory ``pip install --target`` fills on first use (:data:`JAVA_SITE_PINS`,
  ``--java-site``), and without trizk's pytest plugin (``-p no:trizk``).
* **trizk**: the same command with ``--trizk-kazoo`` (``kazoo.testing`` is then
  :mod:`trizk.kazoo_harness`) and no ``ZOOKEEPER_*`` variable: the drop-in's defaults.

The kazoo tests come from the installed kazoo distribution (its wheel and sdist both ship
``kazoo/tests``; ``pip install kazoo==2.11.0``), as in ``tests/testing/test_kazoo_harness.py``.
kazoo's optional test dependencies decide what is skipped on both sides alike (gevent,
eventlet, objgraph: ``pip install gevent eventlet objgraph``).

Printed per run: passed / failed / skipped / errors, the wall time, the CPU time of the run's
processes (pytest and, for java, the JVMs it reaped), and the machine's 1-minute load average
sampled every second during the run (mean, min-max); then the ratio of the wall times and the
tests that passed under Java and not under trizk (the criterion of issue 28: none). The exit
status is 0 when that set is empty.
"""

from __future__ import annotations

import argparse
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


@dataclass
class Run:
    side: str
    wall: float
    cpu: float
    loads: list[float]
    returncode: int
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> outcome

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    def line(self) -> str:
        load = (
            f"load {sum(self.loads) / len(self.loads):.1f} ({min(self.loads):.1f}-"
            f"{max(self.loads):.1f})"
            if self.loads
            else "load ?"
        )
        return (
            f"{self.side:6} passed {self.count('passed'):4}  failed {self.count('failed'):3}"
            f"  skipped {self.count('skipped'):3}  errors {self.count('error'):3}"
            f"  wall {self.wall:7.1f} s  cpu {self.cpu:7.1f} s  {load}"
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


def run_side(side: str, tests: list[str], extra: list[str], workdir: Path, site: Path) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOOKEEPER_", "TRIZK_"))}
    args = [sys.executable, "-m", "pytest", *PYTEST_ARGS, *extra]
    if side == "java":
        env.update(java_env(site))
        args += ["-p", "no:trizk"]
    else:
        args.append("--trizk-kazoo")
    report = workdir / f"{side}.xml"
    args += ["--junitxml", str(report), "--pyargs", *tests]
    out = workdir / f"{side}.log"
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(1.0):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    sampler.start()
    with open(out, "wb") as f:
        # the work directory is pytest's rootdir: no configuration or conftest of trizk's
        rc = subprocess.call(args, env=env, cwd=workdir, stdout=f, stderr=subprocess.STDOUT)
    wall = time.monotonic() - start
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    outcomes = parse_junit(report) if report.exists() else {}
    return Run(side, wall, cpu, loads, rc, outcomes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["java", "trizk"], default=None)
    ap.add_argument("--repeat", type=int, default=1, help="java then trizk, this many times")
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
    extra = ["-k", opts.keyword] if opts.keyword else []
    sides = [opts.only] if opts.only else ["java", "trizk"]
    workdir = opts.keep or Path(tempfile.mkdtemp(prefix="trizk-kazoo-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"kazoo suite {' '.join(opts.tests)}; {os.cpu_count()} cores; logs in {workdir}")
    status = 0
    for n in range(opts.repeat):
        runs: dict[str, Run] = {}
        for side in sides:
            print(f"[{time.strftime('%H:%M:%S')}] {side}: running ...", flush=True)
            runs[side] = run = run_side(side, opts.tests, extra, workdir, opts.java_site)
            print(run.line(), flush=True)
        if len(runs) == 2:
            java, trizk = runs["java"], runs["trizk"]
            print(f"ratio java/trizk wall: {java.wall / trizk.wall:.2f}")
            lost = sorted(
                t
                for t, o in java.outcomes.items()
                if o == "passed" and trizk.outcomes.get(t) != "passed"
            )
            print(f"passed under java, not under trizk: {len(lost)}")
            for t in lost:
                print(f"  {t}: {trizk.outcomes.get(t, 'not run')}")
            if lost:
                status = 1
        if n + 1 < opts.repeat:
            print()
    if opts.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
