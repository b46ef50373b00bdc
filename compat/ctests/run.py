"""Run ZooKeeper's C client suite against ZooKeeper and trizk, side by side.

``python -m trizk.compat.ctests.run`` builds the suite if needed (:mod:`.build`, cached), runs
every test suite of ``zktest-mt`` against real ZooKeeper 3.8 and then against trizk, and
prints one line per test with both outcomes and the counts (passed on both, only on
ZooKeeper, only on trizk). Exit status 1 when a test passed on ZooKeeper and not on trizk.

    python -m trizk.compat.ctests.run                      # everything (~10 min per side)
    python -m trizk.compat.ctests.run --ci                 # the CI subset (CI_TESTS)
    python -m trizk.compat.ctests.run --reconfig-ro        # every reconfig and read-only test
    python -m trizk.compat.ctests.run Zookeeper_readOnly TestReconfigServer::testRemoveFollower
    python -m trizk.compat.ctests.run --server trizk       # one side only

Each named test path (a CppUnit suite, or ``Suite::test``) runs in a binary of its own, so
that a test that aborts the binary (an assertion failing in a client thread does) costs that
suite only; and the tests of the suite that the aborted binary did not reach then run one by
one (a name the sources declare but the build does not register reports nothing).

The suite's servers listen on fixed ports (22181, 22281, 2000+N, 3000+N, 4000+N for the
reconfig ensembles) and share ``/tmp/certs``: one run at a time on a machine.

ZooKeeper side: the suite's own ``tests/zkServer.sh`` starts ZooKeeper with the installed jars
(``CLASSPATH``: the ones :mod:`trizk.compat.procs.servers` runs 3.8.0 with), followed by
:func:`.shims.wait_started` (the same readiness rule as trizk's side: where the script only
sleeps 4 s, a JVM on a loaded machine was not listening yet and ZooKeeper failed the read-only
tests), and ``$ZKROOT/bin/zkServer.sh`` is Debian's ``/usr/share/zookeeper/bin/zkServer.sh``.
trizk side: the binary runs in a directory whose
``tests/zkServer.sh`` and ``$ZKROOT/bin/zkServer.sh`` are :mod:`.shims`.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trizk.compat.ctests import results
from trizk.compat.ctests.build import Build, BuildError, build, cache_dir, cached, missing_tools
from trizk.compat.procs.servers import ZK_ADMIN_JARS, ZK_JARS, ZK_NETTY_JARS

#: Debian's ZooKeeper 3.8 server script (``zookeeper`` package)
DEBIAN_ZKSERVER = "/usr/share/zookeeper/bin/zkServer.sh"
#: The CI subset: two of the suite's five reconfig tests (each on a fresh ensemble of three
#: started through ``$ZKROOT``: non-incremental, and removing the follower a client is
#: connected to) and its plain read-only test; about a minute per side on an idle machine
#: (the whole of TestReconfigServer and Zookeeper_readOnly take three: ``--reconfig-ro``)
CI_TESTS = (
    "TestReconfigServer::testNonIncremental",
    "TestReconfigServer::testRemoveConnectedFollower",
    "Zookeeper_readOnly::testReadOnly",
)
#: Every reconfig and read-only test
RECONFIG_RO_TESTS = ("TestReconfigServer", "Zookeeper_readOnly")
#: A test path's binary is killed after this long (the slowest suite, SASL, takes ~2.5 min)
RUN_TIMEOUT = 600.0
KINDS = ("zookeeper", "trizk")


@dataclass
class Run:
    """One side's run: outcomes by test, and the raw output of each test path."""

    kind: str
    outcomes: dict[str, str]
    outputs: dict[str, str]
    seconds: float


def test_sources(b: Build) -> list[Path]:
    """The suite's test sources in the order its Makefile.am lists them (the run order)."""
    makefile = (b.client_dir / "Makefile.am").read_text()
    order = dict.fromkeys(re.findall(r"tests/(Test\w+\.cc)", makefile))
    return [b.tests_dir / name for name in order if (b.tests_dir / name).exists()]


def all_names(b: Build) -> list[str]:
    return results.test_names(p.read_text(errors="replace") for p in test_sources(b))


def all_suites(b: Build) -> list[str]:
    return list(dict.fromkeys(results.suite_of(n) for n in all_names(b)))


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def prepare(b: Build, kind: str, base: Path) -> tuple[Path, dict[str, str]]:
    """The working directory and environment of ``kind``'s run."""
    env = dict(os.environ)
    py = sys.executable
    if kind == "zookeeper":
        workdir = base / "run-zookeeper"
        tests = workdir / "tests"
        tests.mkdir(parents=True, exist_ok=True)
        # the suite's script reads tests/zoo.cfg and tests/../ssl/gencerts.sh from its cwd
        for link, target in (
            (tests / "zoo.cfg", b.tests_dir / "zoo.cfg"),
            (tests / "zkServer.orig.sh", b.tests_dir / "zkServer.sh"),
            (workdir / "ssl", b.client_dir / "ssl"),
        ):
            link.unlink(missing_ok=True)
            link.symlink_to(target)
        _script(
            tests / "zkServer.sh",
            './tests/zkServer.orig.sh "$@" || exit $?\n'
            f'exec {py} -m trizk.compat.ctests.shims wait-started "$@"',
        )
        zkroot = base / "zkroot-zookeeper"
        _script(zkroot / "bin" / "zkServer.sh", f'exec {DEBIAN_ZKSERVER} "$@"')
        jars = [*ZK_JARS, *(j for j in (*ZK_ADMIN_JARS, *ZK_NETTY_JARS) if os.path.exists(j))]
        env["CLASSPATH"] = ":".join(jars)
        env["ZKROOT"] = str(zkroot)
        return workdir, env
    if kind != "trizk":
        raise ValueError(f"unknown kind {kind!r}")
    workdir = base / "run-trizk"
    _script(
        workdir / "tests" / "zkServer.sh",
        f'exec {py} -m trizk.compat.ctests.shims single {b.tests_dir} "$@"',
    )
    zkroot = workdir / "zkroot"
    _script(zkroot / "bin" / "zkServer.sh", f'exec {py} -m trizk.compat.ctests.shims ensemble "$@"')
    env["ZKROOT"] = str(zkroot)
    env["TRIZK_CTESTS_STATE"] = str(base / "state-trizk")
    return workdir, env


def _cleanup(workdir: Path, env: dict[str, str]) -> None:
    """Stop what a run left behind: its single server (the script's ``stop``) and the members
    of its ensembles (SIGKILL by the pid files their scripts wrote)."""
    subprocess.run(
        [str(workdir / "tests" / "zkServer.sh"), "stop"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
        timeout=60,
    )
    for pidfile in Path(env["ZKROOT"]).glob("build/test/test-cppunit/data*/zookeeper_server.pid"):
        try:
            os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
        pidfile.unlink(missing_ok=True)


#: The suite's fixed client ports (its single server's plain and TLS ports): free before a run
SUITE_PORTS = (22181, 22281)


class PortsInUse(RuntimeError):
    """A port the suite needs is taken (another run, or a server a crashed run left)."""


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def run_side(
    b: Build, kind: str, paths: Sequence[str], base: Path | None = None, *, echo: bool = False
) -> Run:
    """Run each test path of ``paths`` in its own ``zktest-mt`` against ``kind``; each one's
    output is kept in ``base/logs/KIND-PATH.log``. Raises :class:`PortsInUse`."""
    base = cache_dir() if base is None else base
    workdir, env = prepare(b, kind, base)
    names = all_names(b)
    outcomes: dict[str, str] = {}
    outputs: dict[str, str] = {}
    start = time.monotonic()
    logs = base / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    queue = list(paths)
    while queue:
        path = queue.pop(0)
        taken = [p for p in SUITE_PORTS if _port_taken(p)]
        if taken:
            raise PortsInUse(
                f"port(s) {taken} in use before {kind}'s {path}: another run of the suite, or a"
                " server left by one (the suite's ports are fixed; stop it first)"
            )
        if echo:
            print(f"[{kind}] {path} ...", file=sys.stderr, flush=True)
        try:
            proc = subprocess.run(
                [str(b.binary), path],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=RUN_TIMEOUT,
                check=False,
            )
            out = proc.stdout.decode(errors="replace")
            normal = proc.returncode in (0, 1)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace")
            normal = False
        finally:
            _cleanup(workdir, env)
        outputs[path] = out
        (logs / f"{kind}-{path.replace('::', '.')}.log").write_text(out)
        got = results.parse(out, names, ended_normally=normal)
        outcomes.update(got)
        if not normal and "::" not in path:
            # the binary died in one test: the suite's tests it did not reach run one by one
            queue[:0] = [n for n in names if results.suite_of(n) == path and n not in outcomes]
        if echo:
            for n, o in got.items():
                print(f"[{kind}]   {n}: {o}", file=sys.stderr, flush=True)
    return Run(kind, outcomes, outputs, time.monotonic() - start)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trizk.compat.ctests.run", description=__doc__)
    p.add_argument("tests", nargs="*", help="test paths (Suite or Suite::test); default: all")
    p.add_argument("--ci", action="store_true", help=f"the CI subset: {' '.join(CI_TESTS)}")
    p.add_argument(
        "--reconfig-ro",
        action="store_true",
        help=f"every reconfig and read-only test: {' '.join(RECONFIG_RO_TESTS)}",
    )
    p.add_argument("--server", choices=(*KINDS, "both"), default="both")
    p.add_argument("--show", action="store_true", help="print each test's output too")
    args = p.parse_args(argv)
    b = cached()
    if b is None or not b.cli_mt.exists():  # (a cache built before cli_mt was: make it)
        missing = missing_tools()
        if missing:
            print(f"build tools missing (Debian packages): {' '.join(missing)}", file=sys.stderr)
            return 2
        try:
            b = build()
        except BuildError as e:
            print(str(e), file=sys.stderr)
            return 2
    if args.tests:
        paths = list(args.tests)
    elif args.ci:
        paths = list(CI_TESTS)
    elif args.reconfig_ro:
        paths = list(RECONFIG_RO_TESTS)
    else:
        paths = all_suites(b)
    kinds = KINDS if args.server == "both" else (args.server,)
    try:
        runs = {k: run_side(b, k, paths, echo=True) for k in kinds}
    except PortsInUse as e:
        print(str(e), file=sys.stderr)
        return 2
    for r in runs.values():
        print(f"{r.kind}: {len(r.outcomes)} tests in {r.seconds:.0f} s")
        if args.show:
            for path, out in r.outputs.items():
                print(f"---- {r.kind} {path}\n{out}")
    zk = runs["zookeeper"].outcomes if "zookeeper" in runs else {}
    tz = runs["trizk"].outcomes if "trizk" in runs else {}
    cmp = results.Comparison(zk, tz)
    print(cmp.table())
    return 1 if len(kinds) == 2 and cmp.only_zookeeper() else 0


if __name__ == "__main__":
    sys.exit(main())
