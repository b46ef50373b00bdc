"""Loading scenarios, running one on two servers, and reporting the differences.

Theory
------
A scenario is run on a fresh server of each kind (own port, own data directory), each run
yields a transcript (:mod:`trizk.compat.oracle.scenario`), both are normalised
(:mod:`trizk.compat.oracle.normalise`) and compared session by session. Entries are aligned with
:class:`difflib.SequenceMatcher`, so one missing or extra event is one difference, not a
cascade; each non-equal block is one :class:`Difference`, reported with the step that was
running (the op) and both servers' answers.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from trizk.compat.oracle.normalise import Transcript, normalise
from trizk.compat.oracle.scenario import describe_step, run_steps
from trizk.compat.procs import servers

SCENARIO_DIR = Path(__file__).parents[1] / "scenarios"
Tamper = Callable[[Transcript], Transcript]


class Endpoint(Protocol):
    """A server the suite talks to: one it started (:class:`servers.Server`) or one someone
    else runs (:class:`trizk.compat.oracle.conformance.ExternalServer`)."""

    kind: str
    host: str
    port: int

    def alive(self) -> bool: ...

    def stop(self) -> None: ...


#: Starts a server of a kind with extra zoo.cfg keys (:func:`servers.start`, or a conformance
#: run's oracle and candidate launchers).
Launch = Callable[[str, Mapping[str, str] | None], Endpoint]


class ScenarioRunner(Protocol):
    """Runs a scenario on some server of a kind: :class:`ServerPool`, or a conformance run's
    fresh-server and chroot runners (:mod:`trizk.compat.oracle.conformance`)."""

    def run(self, kind: str, sc: Mapping[str, Any]) -> Transcript: ...


class Runner(ScenarioRunner, Protocol):
    """A scenario runner with long-lived servers (the wire fuzzer's bystanders need them)."""

    def server(self, kind: str, cfg: Mapping[str, str] | None = None) -> Endpoint: ...

    def close(self) -> None: ...


@dataclass
class Difference:
    scenario: str
    session: str
    step: int
    op: str
    left: list[dict[str, Any]]
    right: list[dict[str, Any]]

    def render(self, left_name: str, right_name: str) -> str:
        def fmt(es: list[dict[str, Any]]) -> str:
            if not es:
                return "    (nothing)"
            return "\n".join("    " + json.dumps(e, sort_keys=True) for e in es)

        return (
            f"[{self.scenario}] session {self.session}, step {self.step}: {self.op}\n"
            f"  {left_name}:\n{fmt(self.left)}\n  {right_name}:\n{fmt(self.right)}"
        )


def load_scenarios(directory: Path = SCENARIO_DIR) -> list[dict[str, Any]]:
    """Every scenario of every ``*.json`` file, in file then list order; names are unique."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for p in sorted(directory.glob("*.json")):
        for sc in json.loads(p.read_text()):
            sc.setdefault("file", p.name)
            if sc["name"] in seen:
                raise ValueError(f"duplicate scenario name {sc['name']!r} in {p.name}")
            seen.add(sc["name"])
            out.append(sc)
    return out


def _step_name(steps: Sequence[Any], i: int) -> str:
    if 0 <= i < len(steps):
        return describe_step(steps[i])
    if i == -1:
        return "(session setup)"
    return "(final drain: ping every session)"


def diff_transcripts(
    name: str, steps: Sequence[Any], left: Transcript, right: Transcript
) -> list[Difference]:
    diffs: list[Difference] = []
    for label in list(dict.fromkeys([*left, *right])):
        a = left.get(label, [])
        b = right.get(label, [])
        ka = [json.dumps(e, sort_keys=True) for e in a]
        kb = [json.dumps(e, sort_keys=True) for e in b]
        sm = difflib.SequenceMatcher(a=ka, b=kb, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                continue
            first = (a[i1:i2] or b[j1:j2])[0]
            step = int(first.get("step", -1))
            diffs.append(Difference(name, label, step, _step_name(steps, step), a[i1:i2], b[j1:j2]))
    return diffs


def run_on(kind: str, sc: Mapping[str, Any]) -> Transcript:
    """Run a scenario on a fresh server of ``kind``; the raw transcript."""
    with servers.running(kind, sc.get("cfg")) as srv:
        if "base" in sc and not reset_base(srv, sc["base"], create=True):
            raise servers.ServerStartError(f"cannot create {sc['base']} on {kind}")
        return run_steps(srv.host, srv.port, sc.get("sessions", {"A": {}}), sc["steps"])


def compare_scenario(
    sc: Mapping[str, Any],
    left_kind: str,
    right_kind: str,
    *,
    sort_children: bool = False,
    tamper: Tamper | None = None,
    pools: tuple[ScenarioRunner, ScenarioRunner] | None = None,
) -> tuple[list[Difference], Transcript, Transcript]:
    """Run ``sc`` on a fresh server of each kind, or with the runners of ``pools`` (the
    long-lived servers of a :class:`ServerPool`, for scenarios with a ``base``), and diff.
    ``tamper`` (tests only) rewrites the right side's raw transcript, to inject a known
    difference."""
    left_run, right_run = (pools[0].run, pools[1].run) if pools else (run_on, run_on)
    left = normalise(left_run(left_kind, sc), sort_children=sort_children)
    raw = right_run(right_kind, sc)
    right = normalise(tamper(raw) if tamper else raw, sort_children=sort_children)
    return diff_transcripts(sc["name"], sc["steps"], left, right), left, right


def reset_base(srv: Endpoint, base: str, create: bool) -> bool:
    """Delete ``base`` and its quota subtree (``/zookeeper/quota`` + ``base``) recursively,
    then (``create``) create ``base`` empty; False on any failure."""
    from trizk.compat.oracle.rawclient import RawClient, WireTimeout
    from trizk.compat.oracle.scenario import OPEN_ACL
    from trizk.jute import records as R
    from trizk.jute.codes import Code, OpCode

    try:
        c = RawClient(srv.host, srv.port, io_timeout=5.0)
        if c.connect() is None:
            return False

        def call(op: int, rec: Any) -> Any:
            xid = c.send(op, rec)
            _, r = c.read_until_reply(xid)
            return r

        def delete_tree(path: str) -> bool:
            r = call(OpCode.GETCHILDREN, R.GetChildrenRequest(path, False))
            if r.err == Code.NONODE:
                return True
            if r.err != 0:
                return False
            for ch in r.body.children or ():
                if not delete_tree(f"{path}/{ch}"):
                    return False
            r = call(OpCode.DELETE, R.DeleteRequest(path, -1))
            return r.err in (0, Code.NONODE)

        ok = delete_tree("/zookeeper/quota" + base) and delete_tree(base)
        if ok and create:
            r = call(OpCode.CREATE, R.CreateRequest(base, b"", OPEN_ACL, 0))
            ok = r.err == 0
        c.close_session()
        return ok
    except (OSError, WireTimeout, Exception):  # any failure: replace the server
        return False


class ServerPool:
    """One long-lived server per kind, for many runs of scenarios that declare a ``base`` node.

    Before each run the base node is created fresh, after it the base is deleted recursively
    (with every session closed by the executor's drain), so a run sees the same state on every
    server whatever ran before (see :mod:`trizk.compat.oracle.randomgen`). A server that dies or
    cannot be reset is replaced by a fresh one.
    """

    def __init__(self, io_timeout: float = 10.0, launch: Launch | None = None) -> None:
        self.io_timeout = io_timeout  # each read's bound in a run (scenario.run_steps)
        #: how a server is started (default :func:`servers.start`)
        self.launch: Launch = launch or servers.start
        #: by (kind, the scenario's zoo.cfg keys)
        self._servers: dict[tuple[str, str], Endpoint] = {}

    def _server(self, key: tuple[str, str], cfg: Mapping[str, str] | None) -> Endpoint:
        srv = self._servers.get(key)
        if srv is None or not srv.alive():
            if srv is not None:
                srv.stop()
            srv = self._servers[key] = self.launch(key[0], cfg)
        return srv

    @staticmethod
    def _key(kind: str, cfg: Mapping[str, str] | None) -> tuple[str, str]:
        return kind, repr(sorted((cfg or {}).items()))

    def server(self, kind: str, cfg: Mapping[str, str] | None = None) -> Endpoint:
        """The long-lived server of ``kind`` with ``cfg`` (started, or replaced, as needed)."""
        return self._server(self._key(kind, cfg), cfg)

    def run(self, kind: str, sc: Mapping[str, Any]) -> Transcript:
        base = sc["base"]
        cfg = sc.get("cfg")
        key = self._key(kind, cfg)
        srv = self._server(key, cfg)
        if not reset_base(srv, base, create=True):
            srv.stop()
            del self._servers[key]
            srv = self._server(key, cfg)
            if not reset_base(srv, base, create=True):
                raise servers.ServerStartError(f"cannot prepare {base} on a fresh {kind}")
        t = run_steps(
            srv.host,
            srv.port,
            sc.get("sessions", {"A": {}}),
            sc["steps"],
            io_timeout=self.io_timeout,
        )
        if not reset_base(srv, base, create=False):
            srv.stop()
            del self._servers[key]
        return t

    def close(self) -> None:
        for srv in self._servers.values():
            srv.stop()
        self._servers.clear()

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
