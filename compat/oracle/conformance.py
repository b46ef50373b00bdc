"""Conformance runs: the compatibility suite against any ZooKeeper server, judged by an oracle.

``python -m trizk.compat.run --oracle 3.8.0|3.9.3 --candidate HOST:PORT`` (a server someone
else runs) or ``--candidate-cmd 'COMMAND {cfg}'`` (a server this tool starts, as often as it
needs, from a zoo.cfg it writes) runs every scenario of ``compat/scenarios/``, the random mode
and the wire fuzzer on the candidate and on Apache ZooKeeper of the oracle version, and prints
the feature-by-feature report of :mod:`trizk.compat.oracle.report`.

Theory
------
Every scenario runs in one of two ways, on both sides alike:

* **shared**: on one long-lived server per side, under a chroot of its own
  (:mod:`trizk.compat.oracle.chroot`: ``/trizk-conformance/<run>-<n>``, created before the run
  and deleted after it). That is how a candidate given as ``HOST:PORT`` is used, and it is the
  fast way with ``--candidate-cmd`` too.
* **fresh**: on a server started for the scenario alone, when the scenario needs one
  (:func:`fresh_reason`): zoo.cfg keys of its own, raw bytes whose paths a chroot cannot move,
  the empty path (answered from the server's root), the ``/zookeeper`` tree, or session
  timeouts (negotiated against the server's tickTime). Only
  ``--candidate-cmd`` can start a candidate, so with ``--candidate HOST:PORT`` such scenarios
  are *skipped*, each named with its reason.

The oracle is started here (:func:`oracle_launch`) with the suite's zoo.cfg
(:data:`servers.BASE_CFG`) and the keys the candidate is declared to run with
(``--candidate-cfg KEY=VALUE``: tickTime, maxSessionTimeout, extendedTypesEnabled ... of a
server someone else runs). A scenario whose own keys the declared ones contain runs shared.

The random mode runs its seeded sequences shared under a chroot (``HOST:PORT``; their steps
with the empty path left out, :func:`chroot.has_empty_path`), or as
``python -m trizk.compat.run --random`` does on long-lived servers started with the sequences'
zoo.cfg (``--candidate-cmd``); a difference is reported, not shrunk (shrinking re-runs the
sequence dozens of times; ``compat.run --random`` on a pair the suite starts does it). The wire
fuzzer (:mod:`trizk.compat.oracle.wirefuzz`) sends its mutated frames at the root: its frames
carry ``/t`` and ``/by`` as bytes. On a ``HOST:PORT`` candidate it deletes and recreates ``/t``
and ``/by`` there: give it a server for testing (``--fuzz-seconds 0`` leaves it out). A fuzz
difference counts when it repeats on a re-run (a race inside one server does not).

Invariants
----------
* The tool stops only the processes it started (by PID, :func:`processes.stop_process`), and on
  a ``HOST:PORT`` candidate it leaves nothing behind but the ``/trizk-conformance`` node (and
  ``/by`` when the fuzzer ran), except the chroots of scenarios whose ACLs let no identity of
  theirs delete a node: the report lists those (two of today's scenarios).
* Differences are reported as they are: a server's own races show as they fell (3.9.3 closing
  the connection after a standalone check's UNIMPLEMENTED, with or without the reply first, is
  the one the normaliser folds: its rule 8).
* Every wait is bounded: the executor's per-read bound, a start's readiness deadline.
* A candidate that cannot be reached is :class:`CandidateError`, one line for the user.
"""

from __future__ import annotations

import argparse
import itertools
import os
import secrets
import shlex
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from trizk.compat.oracle.chroot import (
    chroot_obstacle,
    chroot_steps,
    has_empty_path,
    unchroot_transcript,
)
from trizk.compat.oracle.compare import (
    Endpoint,
    Launch,
    Runner,
    ScenarioRunner,
    ServerPool,
    compare_scenario,
    load_scenarios,
    reset_base,
)
from trizk.compat.oracle.normalise import Transcript
from trizk.compat.oracle.randomgen import generate
from trizk.compat.oracle.rawclient import ConnectionClosed, RawClient, WireTimeout
from trizk.compat.oracle.report import Report
from trizk.compat.oracle.scenario import OPEN_ACL, run_steps
from trizk.compat.procs import servers
from trizk.jute import records as R
from trizk.jute.codes import Code, OpCode
from trizk.testing.ports import free_port
from trizk.testing.probes import handshake_ok
from trizk.testing.processes import poll_ready, spawn

ORACLE = "zookeeper"
CANDIDATE = "candidate"
#: the node under which shared runs take their chroots
CHROOT_ROOT = "/trizk-conformance"


class CandidateError(RuntimeError):
    """The candidate cannot be used (address, command, handshake): one line for the user."""


# --------------------------------------------------------------------------- the servers


def oracle_launch(version: str, declared: Mapping[str, str] | None = None) -> Launch:
    """Starts ZooKeeper ``version`` (one of :data:`servers.ZK_VERSIONS`) with the suite's
    zoo.cfg, the keys ``declared`` for the candidate and a scenario's own keys."""
    servers.zookeeper_jars(version)  # ValueError for a version that is not here
    if not servers.zookeeper_available(version):
        raise CandidateError(
            f"ZooKeeper {version} is not installed here (sh compat/install-zookeeper.sh)"
        )

    def launch(kind: str, cfg: Mapping[str, str] | None) -> Endpoint:
        return servers.start(ORACLE, {**(declared or {}), **(cfg or {})}, version=version)

    return launch


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) → (host, port); CandidateError otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CandidateError(f"--candidate {text!r}: expected HOST:PORT")
    return host, int(port)


def check_candidate(host: str, port: int, timeout: float = 5.0) -> None:
    """A session handshake with the candidate works, or CandidateError saying why not."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise CandidateError(f"cannot reach the candidate at {host}:{port}: {reason}") from None
    if not handshake_ok(host, port, timeout=timeout):
        raise CandidateError(
            f"the candidate at {host}:{port} accepts connections but refuses a ZooKeeper "
            "session handshake"
        )


@dataclass
class ExternalServer:
    """A candidate someone else runs: reached by address, never started or stopped here."""

    host: str
    port: int
    kind: str = CANDIDATE

    def alive(self) -> bool:
        return True  # not ours to watch: a dead one shows as closed connections

    def stop(self) -> None:
        pass  # not ours to stop


def fill_template(template: str, port: int, data_dir: str, extra: Mapping[str, str]) -> str:
    """A candidate's zoo.cfg: ``{port}`` (or ``{clientPort}``) and ``{dataDir}`` filled in, then
    ``extra`` keys, each replacing a line of the same key."""
    text = (
        template.replace("{clientPort}", str(port))
        .replace("{port}", str(port))
        .replace("{dataDir}", data_dir)
    )
    lines = [ln for ln in text.splitlines() if ln.split("=", 1)[0].strip() not in extra]
    return "".join(f"{ln}\n" for ln in lines) + "".join(f"{k}={v}\n" for k, v in extra.items())


def command_launch(
    command: str, template: str | None = None, ready_timeout: float = 60.0
) -> Launch:
    """Starts the candidate with ``command`` (``{cfg}`` the zoo.cfg path, ``{port}``,
    ``{dataDir}``, ``{dir}`` its working directory) on a zoo.cfg from ``template`` (default: the
    suite's own, :func:`servers.make_cfg`); ready when a session handshake works."""
    if "{cfg}" not in command and "{port}" not in command:
        raise CandidateError("--candidate-cmd must name {cfg} (the zoo.cfg it is given)")
    program = (shlex.split(command) or [""])[0]
    if shutil.which(program) is None and not os.access(program, os.X_OK):
        raise CandidateError(f"--candidate-cmd: no such program {program!r}")

    def launch(kind: str, cfg: Mapping[str, str] | None) -> Endpoint:
        workdir = Path(tempfile.mkdtemp(prefix="trizk-conformance-candidate-"))
        data_dir = workdir / "data"
        data_dir.mkdir()
        port = free_port()
        extra = {k: str(v) for k, v in (cfg or {}).items()}
        text = (
            servers.make_cfg(port, str(data_dir), extra)
            if template is None
            else fill_template(template, port, str(data_dir), extra)
        )
        cfg_path = workdir / "zoo.cfg"
        cfg_path.write_text(text)
        argv = shlex.split(
            command.replace("{cfg}", str(cfg_path))
            .replace("{port}", str(port))
            .replace("{dataDir}", str(data_dir))
            .replace("{dir}", str(workdir))
        )
        proc = spawn(argv, workdir, workdir / "server.log")
        srv = servers.Server(CANDIDATE, port, workdir, proc, dict(extra))
        if poll_ready(proc, partial(handshake_ok, srv.host, port, timeout=2.0), ready_timeout):
            return srv
        tail = srv.log_tail(5).replace("\n", " | ")
        srv.stop()
        raise CandidateError(
            f"the candidate command did not serve on port {port} within {ready_timeout:.0f}s "
            f"(exit={proc.poll()}): {tail}"
        )

    return launch


class FixedPool(ServerPool):
    """One long-lived server per kind whatever the scenario's zoo.cfg keys (a shared run)."""

    def __init__(self, launch: Launch, io_timeout: float = 10.0) -> None:
        super().__init__(io_timeout, lambda kind, _cfg: launch(kind, None))

    @staticmethod
    def _key(kind: str, cfg: Mapping[str, str] | None) -> tuple[str, str]:
        return kind, ""


class FreshRunner:
    """A server started for each scenario, stopped after it."""

    def __init__(self, launch: Launch, io_timeout: float = 10.0) -> None:
        self.launch = launch
        self.io_timeout = io_timeout

    def run(self, kind: str, sc: Mapping[str, Any]) -> Transcript:
        srv = self.launch(kind, sc.get("cfg"))
        try:
            if "base" in sc and not reset_base(srv, sc["base"], create=True):
                raise servers.ServerStartError(f"cannot create {sc['base']} on {kind}")
            return run_steps(
                srv.host,
                srv.port,
                sc.get("sessions", {"A": {}}),
                sc["steps"],
                io_timeout=self.io_timeout,
            )
        finally:
            srv.stop()


class ChrootRunner:
    """Scenarios on one long-lived server of a pool, each under a chroot of its own."""

    def __init__(
        self,
        pool: Runner,
        run_id: str,
        numbers: Iterator[int],
        io_timeout: float = 10.0,
        left: list[str] | None = None,
    ) -> None:
        self.pool = pool
        self.run_id = run_id
        self.numbers = numbers  # shared by every runner of a side: each chroot is new
        self.io_timeout = io_timeout
        #: chroots that could not be deleted (a scenario's ACLs may forbid it)
        self.left = left if left is not None else []

    def run(self, kind: str, sc: Mapping[str, Any]) -> Transcript:
        srv = self.pool.server(kind, sc.get("cfg"))
        chroot = f"{CHROOT_ROOT}/{self.run_id}-{next(self.numbers)}"
        _create(srv, CHROOT_ROOT, must=False)
        _create(srv, chroot)
        if "base" in sc:
            _create(srv, chroot + sc["base"])
        try:
            t = run_steps(
                srv.host,
                srv.port,
                sc.get("sessions", {"A": {}}),
                chroot_steps(chroot, sc["steps"]),
                io_timeout=self.io_timeout,
            )
        finally:
            if not delete_tree(srv, chroot, _auths(sc)):
                self.left.append(f"{chroot} on {srv.kind}")
        return unchroot_transcript(chroot, t)


def _auths(sc: Mapping[str, Any]) -> list[tuple[str, bytes]]:
    """The digest identities a scenario authenticates as (its nodes may be theirs alone)."""
    out: list[tuple[str, bytes]] = []
    for st in sc["steps"]:
        a = st[2] if len(st) > 2 else {}
        if st[1] == "auth" and a.get("scheme") == "digest" and isinstance(a.get("auth"), str):
            out.append(("digest", a["auth"].encode()))
    return list(dict.fromkeys(out))


def delete_tree(srv: Endpoint, path: str, auths: list[tuple[str, bytes]]) -> bool:
    """Delete ``path`` and everything below it, authenticated as ``auths``; False when some
    node stays (its parent's ACL lets none of them delete it) or the server fails."""
    c = RawClient(srv.host, srv.port, io_timeout=10.0)
    try:
        if c.connect() is None:
            return False
        for scheme, auth in auths:
            c.read_until_reply(c.add_auth(scheme, auth))

        def call(op: int, rec: Any) -> Any:
            return c.read_until_reply(c.send(op, rec))[1]

        def walk(p: str) -> bool:
            r = call(OpCode.GETCHILDREN, R.GetChildrenRequest(p, False))
            if r.err == Code.NONODE:
                return True
            ok = r.err == 0
            for ch in (r.body.children or ()) if ok else ():
                ok = walk(f"{p}/{ch}") and ok
            return call(OpCode.DELETE, R.DeleteRequest(p, -1)).err in (0, Code.NONODE) and ok

        ok = walk(path)
        c.close_session()
        return ok
    except (OSError, ConnectionClosed, WireTimeout):
        return False
    finally:
        c.close()


def _create(srv: Endpoint, path: str, must: bool = True) -> None:
    c = RawClient(srv.host, srv.port, io_timeout=10.0)
    try:
        if c.connect() is None:
            raise CandidateError(f"{srv.kind} at {srv.host}:{srv.port} refused a session")
        xid = c.send(OpCode.CREATE, R.CreateRequest(path, b"", OPEN_ACL, 0))
        _, r = c.read_until_reply(xid)
        if r.err != 0 and (must or r.err != Code.NODEEXISTS):
            raise CandidateError(f"cannot create {path} on {srv.kind}: error {r.err}")
        c.close_session()
    finally:
        c.close()


# --------------------------------------------------------------------------- which way


def _mentions_zookeeper_tree(v: Any) -> bool:
    if isinstance(v, str):
        return v == "/zookeeper" or v.startswith("/zookeeper/")
    if isinstance(v, dict):
        return any(_mentions_zookeeper_tree(x) for x in v.values())
    if isinstance(v, list):
        return any(_mentions_zookeeper_tree(x) for x in v)
    return False


def fresh_reason(sc: Mapping[str, Any], declared: Mapping[str, str]) -> str | None:
    """Why ``sc`` needs a server of its own (module docstring), or None: it can run shared."""
    cfg = sc.get("cfg") or {}
    own = {k: v for k, v in cfg.items() if declared.get(k) != str(v)}
    if own:
        return "zoo.cfg " + ", ".join(f"{k}={v}" for k, v in own.items())
    obstacle = chroot_obstacle(sc)
    if obstacle:
        return obstacle
    for spec in sc.get("sessions", {}).values():
        if "timeout" in spec:
            return "session timeouts (negotiated against the server's tickTime)"
    for st in sc["steps"]:
        a = st[2] if len(st) > 2 else {}
        if "timeout" in a:
            return "session timeouts (negotiated against the server's tickTime)"
        if _mentions_zookeeper_tree(a):
            return "the /zookeeper tree"
    return None


# --------------------------------------------------------------------------- the run


@dataclass
class Conformance:
    """One conformance run's servers: the oracle's and the candidate's launchers (the
    candidate's None when it is a server someone else runs)."""

    oracle_version: str
    candidate: str  # what the report calls it (the address, or the command)
    oracle: Launch
    candidate_launch: Launch | None = None
    candidate_address: tuple[str, int] | None = None
    declared: dict[str, str] = field(default_factory=dict)
    io_timeout: float = 10.0
    log: Callable[[str], None] = print
    run_id: str = field(default_factory=lambda: secrets.token_hex(4))

    def __post_init__(self) -> None:
        if (self.candidate_launch is None) == (self.candidate_address is None):
            raise ValueError("a candidate launcher or address, not both")
        self._pools: list[Runner] = []
        self._fixed: dict[str, Runner] = {}
        self._numbers = {ORACLE: itertools.count(1), CANDIDATE: itertools.count(1)}
        #: chroots left behind (see ChrootRunner.left)
        self.left: list[str] = []

    def _chroot_runners(self) -> tuple[ChrootRunner, ChrootRunner]:
        """The shared runners, oracle and candidate: one long-lived server each, a chroot per
        run."""
        return (
            ChrootRunner(
                self._oracle_pool(), self.run_id, self._numbers[ORACLE], self.io_timeout, self.left
            ),
            ChrootRunner(
                self._candidate_pool(),
                self.run_id,
                self._numbers[CANDIDATE],
                self.io_timeout,
                self.left,
            ),
        )

    def _candidate_pool(self) -> Runner:
        """The long-lived candidate of the shared runs (the one at the address, or one
        started with the command and the declared zoo.cfg keys)."""
        if CANDIDATE not in self._fixed:
            if self.candidate_address is not None:
                ext = ExternalServer(*self.candidate_address)
                pool: Runner = FixedPool(lambda _k, _c: ext, self.io_timeout)
            else:
                assert self.candidate_launch is not None
                launch = self.candidate_launch
                declared = dict(self.declared)
                pool = FixedPool(lambda k, _c: launch(k, declared), self.io_timeout)
            self._fixed[CANDIDATE] = pool
            self._pools.append(pool)
        return self._fixed[CANDIDATE]

    def _oracle_pool(self) -> Runner:
        """The long-lived oracle of the shared runs."""
        if ORACLE not in self._fixed:
            self._fixed[ORACLE] = FixedPool(self.oracle, self.io_timeout)
            self._pools.append(self._fixed[ORACLE])
        return self._fixed[ORACLE]

    def close(self) -> None:
        for p in self._pools:
            p.close()
        self._pools.clear()
        self._fixed.clear()

    def __enter__(self) -> Conformance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scenarios
    def run_scenarios(self, report: Report, names: tuple[str, ...] = (), ci: bool = False) -> None:
        """Every scenario (or those named / the CI subset), shared or fresh."""
        shared = self._chroot_runners()
        fresh: tuple[ScenarioRunner, ScenarioRunner] | None = None
        if self.candidate_launch is not None:
            fresh = (
                FreshRunner(self.oracle, self.io_timeout),
                FreshRunner(self.candidate_launch, self.io_timeout),
            )
        for sc in load_scenarios():
            if ci and not sc.get("ci"):
                continue
            if names and not any(k in sc["name"] for k in names):
                continue
            why = fresh_reason(sc, self.declared)
            runners: tuple[ScenarioRunner, ScenarioRunner] | None = shared
            if why is not None:
                runners = fresh
                if fresh is None:
                    report.skipped.append((sc["name"], why))
                    self.log(f"{sc['name']}: skipped (needs a server of its own: {why})")
                    continue
            try:
                diffs, _, _ = compare_scenario(sc, ORACLE, CANDIDATE, pools=runners)
            except (OSError, servers.ServerStartError, CandidateError) as e:
                report.failed.append((sc["name"], f"{type(e).__name__}: {e}"))
                self.log(f"{sc['name']}: could not run: {type(e).__name__}: {e}")
                continue
            report.add_run("scenario", sc, diffs, fresh=why is not None)
            self.log(f"{sc['name']}: {'ok' if not diffs else f'{len(diffs)} differences'}")

    # -- random mode
    def run_random(self, report: Report, n: int, seed: int, length: int = 60) -> None:
        """``n`` seeded random sequences (seeds ``seed``, ``seed + 1`` ...)."""
        if n <= 0:
            return
        pools: tuple[ScenarioRunner, ScenarioRunner]
        if self.candidate_launch is None:
            pools = self._chroot_runners()
        else:
            lp = ServerPool(self.io_timeout, self.oracle)
            rp = ServerPool(self.io_timeout, self.candidate_launch)
            self._pools += [lp, rp]
            pools = (lp, rp)
        for k in range(n):
            sc = generate(seed + k, length)
            if self.candidate_launch is None:
                # under a chroot, a step with the empty path would read the server's root
                sc["steps"] = [st for st in sc["steps"] if not has_empty_path(st)]
            try:
                diffs, _, _ = compare_scenario(sc, ORACLE, CANDIDATE, pools=pools)
            except (OSError, servers.ServerStartError, CandidateError) as e:
                report.failed.append((sc["name"], f"{type(e).__name__}: {e}"))
                continue
            report.add_run("random", sc, diffs)
            self.log(f"random seed {seed + k}: {len(diffs)} differences")

    # -- wire fuzzer
    def run_fuzz(self, report: Report, seconds: float, seed: int = 1) -> None:
        """The wire fuzzer for ``seconds``: differences that repeat on a re-run."""
        from trizk.compat.oracle import wirefuzz as wf

        if seconds <= 0:
            return
        if self.candidate_launch is None:
            pools: tuple[Runner, Runner] = (self._oracle_pool(), self._candidate_pool())
        else:
            pools = (
                ServerPool(2.0, self.oracle),
                ServerPool(2.0, self.candidate_launch),
            )
            self._pools += list(pools)
        f = wf.Fuzzer(ORACLE, CANDIDATE, pools=pools)
        deadline = time.monotonic() + seconds
        n = 0
        try:
            while time.monotonic() < deadline:
                case = wf.make_case(seed, n)
                n += 1
                diffs, disturbed = f.run_case(case)
                if not diffs and not disturbed:
                    report.fuzz_cases += 1
                    continue
                if not disturbed and not all(f.differs(case) for _ in range(wf.CONFIRM_RUNS)):
                    report.fuzz_cases += 1
                    report.fuzz_flaky += 1
                    continue
                sc = case.scenario()
                report.add_run("wirefuzz", sc, diffs, label=f"wire frames ({case.op})")
                report.disturbed += disturbed
                self.log(f"wire fuzz case {case.n} ({case.op}): {len(diffs)} differences")
        finally:
            f.close()
            report.fuzz_races = f.races


def run(
    conf: Conformance,
    *,
    names: tuple[str, ...] = (),
    ci: bool = False,
    scenarios: bool = True,
    random: int = 0,
    seed: int = 1,
    length: int = 60,
    fuzz_seconds: float = 0.0,
) -> Report:
    """A whole conformance run; the report (print it with :meth:`Report.render`)."""
    report = Report(conf.candidate, conf.oracle_version)
    with conf:
        if scenarios:
            conf.run_scenarios(report, names, ci)
        conf.run_random(report, random, seed, length)
        conf.run_fuzz(report, fuzz_seconds, seed)
    report.left = list(conf.left)
    return report


def iter_declared(items: list[str]) -> Iterator[tuple[str, str]]:
    """``KEY=VALUE`` items of ``--candidate-cfg``."""
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise CandidateError(f"--candidate-cfg {item!r}: expected KEY=VALUE")
        yield k.strip(), v.strip()


#: what a conformance run does when not told: every scenario, these many random sequences and
#: seconds of the wire fuzzer
DEFAULT_RANDOM = 20
DEFAULT_FUZZ_SECONDS = 60.0


def trizk_launch(version: str) -> Launch:
    """trizk as the candidate (``--oracle`` without ``--candidate``: trizk against that
    oracle), asked to answer as that release (:func:`servers.start`'s ``version``)."""

    def launch(kind: str, cfg: Mapping[str, str] | None) -> Endpoint:
        return servers.start("trizk", cfg, version=version)

    return launch


def main(args: argparse.Namespace) -> int:
    """``python -m trizk.compat.run`` with ``--candidate``, ``--candidate-cmd`` or ``--oracle``
    (:mod:`trizk.compat.run` parses the options); the exit status."""
    try:
        declared = dict(iter_declared(args.candidate_cfg))
        address: tuple[str, int] | None = None
        launch: Launch | None = None
        if args.candidate and args.candidate_cmd:
            raise CandidateError("give --candidate or --candidate-cmd, not both")
        if args.candidate:
            address = parse_address(args.candidate)
            check_candidate(*address)
            name = f"the server at {address[0]}:{address[1]}"
        elif args.candidate_cmd:
            template = None
            if args.candidate_template:
                try:
                    template = Path(args.candidate_template).read_text()
                except OSError as e:
                    raise CandidateError(
                        f"--candidate-template {args.candidate_template}: {e.strerror}"
                    ) from None
            launch = command_launch(args.candidate_cmd, template)
            cmd = args.candidate_cmd
            name = f"the server of {cmd if len(cmd) < 80 else cmd[:36] + ' ... ' + cmd[-36:]!r}"
        else:
            launch = trizk_launch(args.oracle)
            name = "trizk"
        oracle = oracle_launch(args.oracle, declared)
        conf = Conformance(
            args.oracle,
            name,
            oracle,
            candidate_launch=launch,
            candidate_address=address,
            declared=declared,
        )
        report = run(
            conf,
            names=tuple(args.k),
            ci=args.ci,
            scenarios=not args.no_scenarios,
            random=DEFAULT_RANDOM if args.random is None else args.random,
            seed=args.seed,
            length=args.length,
            fuzz_seconds=(DEFAULT_FUZZ_SECONDS if args.fuzz_seconds is None else args.fuzz_seconds),
        )
    except CandidateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report.render())
    return 0 if report.differences == 0 else 1
