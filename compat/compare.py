"""Loading scenarios, running one on two servers, and reporting the differences.

Theory
------
A scenario is run on a fresh server of each kind (own port, own data directory), each run
yields a transcript (:mod:`trizk.compat.scenario`), both are normalised
(:mod:`trizk.compat.normalise`) and compared session by session. Entries are aligned with
:class:`difflib.SequenceMatcher`, so one missing or extra event is one difference, not a
cascade; each non-equal block is one :class:`Difference`, reported with the step that was
running (the op) and both servers' answers.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import servers
from .normalise import Transcript, normalise
from .scenario import describe_step, run_steps

SCENARIO_DIR = Path(__file__).parent / "scenarios"


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
        return run_steps(srv.host, srv.port, sc.get("sessions", {"A": {}}), sc["steps"])


def compare_scenario(
    sc: Mapping[str, Any],
    left_kind: str,
    right_kind: str,
    *,
    sort_children: bool = False,
) -> tuple[list[Difference], Transcript, Transcript]:
    left = normalise(run_on(left_kind, sc), sort_children=sort_children)
    right = normalise(run_on(right_kind, sc), sort_children=sort_children)
    return diff_transcripts(sc["name"], sc["steps"], left, right), left, right
