"""The feature-by-feature report of a conformance run (pure: differences in, text out).

Theory
------
A difference (:class:`trizk.compat.oracle.compare.Difference`) is one non-equal block of a
session's transcript: the step that was running, the oracle's entries and the candidate's. The
report files each difference under every *feature* it shows, in five groups:

* **op families**: the operation of the step (``create``, ``multi``, ``removeWatches``, a
  malformed request by its opcode, a wire-fuzz frame by its seed opcode, session handshakes
  and the final drain);
* **watch kinds**: the watch the step sets or removes (a one-shot data/child watch, addWatch's
  mode, removeWatches'/checkWatches' watcher type) or the notifications that differ (by event
  type, and *notification zxid* when only the zxid of an otherwise equal notification differs);
* **ACL schemes**: the schemes of the step's ACLs or auth packet, when the step is about ACLs
  (setACL, getACL, auth) or an answer is NOAUTH, INVALIDACL or AUTHFAILED;
* **error shapes**: what a reply's error code became (``exists: NONODE → NOAUTH``), a reply on
  one side only (``no reply``), a connection closed on one side only;
* **reply contents**: same error code, different body (a Stat, data, a path, a child list).

Each feature is printed with its count of differences, the count of runs (scenarios, random
sequences, fuzz cases) it appears in, and its first example. Differences the project documents
as intended (:data:`INTENDED`: e.g. ZooKeeper 3.8.0 never answers a successful standalone
check, trizk answers it) are listed apart and not counted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trizk.compat.oracle.compare import Difference
from trizk.compat.oracle.scenario import Step, describe_step

GROUPS = ("op families", "watch kinds", "ACL schemes", "error shapes", "reply contents")

#: step operation -> its family in the report
FAMILIES = {
    "create": "create",
    "create2": "create2",
    "createContainer": "createContainer",
    "createTTL": "createTTL",
    "delete": "delete",
    "setData": "setData",
    "exists": "exists",
    "getData": "getData",
    "getChildren": "getChildren",
    "getChildren2": "getChildren2",
    "getAllChildrenNumber": "getAllChildrenNumber",
    "getEphemerals": "getEphemerals",
    "sync": "sync",
    "check": "check (standalone)",
    "multi": "multi",
    "multiRead": "multiRead",
    "getACL": "getACL",
    "setACL": "setACL",
    "auth": "auth",
    "whoAmI": "whoAmI",
    "addWatch": "addWatch",
    "removeWatches": "removeWatches",
    "checkWatches": "checkWatches",
    "setWatches": "setWatches",
    "setWatches2": "setWatches2",
    "closeSession": "sessions",
    "connect": "sessions",
    "reconnect": "sessions",
    "renew": "sessions",
    "ping": "sessions",
    "drop": "sessions",
    "wait_event": "notifications (waited for)",
    "wait_closed": "session expiry / close (waited for)",
    "raw": "four-letter words / raw bytes",
    "open": "four-letter words / raw bytes",
    "frames": "wire frames",
}
WATCHER_TYPES = {1: "CHILDREN", 2: "DATA", 3: "ANY", 4: "PERSISTENT", 5: "PERSISTENT_RECURSIVE"}
ADDWATCH_MODES = {0: "PERSISTENT", 1: "PERSISTENT_RECURSIVE"}
NAMED_ACL_SCHEMES = {"open": "world", "read": "world", "creator": "auth", "empty": "(empty ACL)"}
ACL_ERRORS = frozenset({"NOAUTH", "INVALIDACL", "AUTHFAILED"})


@dataclass
class Finding:
    """One difference of one run, with what the report needs to file it."""

    source: str  # "scenario", "random" or "wirefuzz"
    run: str  # the scenario's name
    step: Step | None  # the step that was running (None: session setup or final drain)
    diff: Difference
    label: str | None = None  # the family, when the step alone does not say it (fuzz frames)

    @property
    def oracle(self) -> list[dict[str, Any]]:
        return self.diff.left

    @property
    def candidate(self) -> list[dict[str, Any]]:
        return self.diff.right


def _args(step: Step | None) -> Mapping[str, Any]:
    return step[2] if step is not None and len(step) > 2 else {}


def family(f: Finding) -> str:
    if f.label:
        return f.label
    if f.step is None:
        return "sessions (handshake)" if f.diff.step == -1 else "final drain (pending replies)"
    op = str(f.step[1])
    if op == "request":
        return f"malformed {_args(f.step).get('opcode')}"
    return FAMILIES.get(op, op)


def _events(es: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e for e in es if e.get("kind") == "event"]


def _without(e: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in e.items() if k not in keys}


def watch_kinds(f: Finding) -> list[str]:
    out: list[str] = []
    a = _args(f.step)
    op = f.step[1] if f.step is not None else ""
    if op in ("removeWatches", "checkWatches"):
        wtype = int(a.get("type", 3))
        out.append(f"{op} type {WATCHER_TYPES.get(wtype, wtype)}")
    elif op == "addWatch":
        mode = int(a.get("mode", 0))
        out.append(f"addWatch {ADDWATCH_MODES.get(mode, mode)}")
    elif op in ("setWatches", "setWatches2"):
        out.append(op)
    ev_o, ev_c = _events(f.oracle), _events(f.candidate)
    if ev_o or ev_c:
        if op in ("exists", "getData", "getChildren", "getChildren2") and a.get("watch"):
            out.append(f"one-shot watch set by {op}")
        if (
            len(ev_o) == len(ev_c)
            and [_without(e, "zxid") for e in ev_o] == [_without(e, "zxid") for e in ev_c]
            and ev_o != ev_c
        ):
            out.append("notification zxid")
        else:
            kinds_o = [str(e.get("type")) for e in ev_o]
            kinds_c = [str(e.get("type")) for e in ev_c]
            for t in dict.fromkeys(kinds_o + kinds_c):
                if kinds_o.count(t) != kinds_c.count(t):
                    out.append(f"{t} notifications")
    return out


def _acl_schemes(acl: Any) -> list[str]:
    if isinstance(acl, str):
        return [NAMED_ACL_SCHEMES.get(acl, acl)]
    if isinstance(acl, list):
        return [str(x[1]) for x in acl if isinstance(x, list) and len(x) == 3]
    return []


def acl_schemes(f: Finding) -> list[str]:
    a = _args(f.step)
    op = f.step[1] if f.step is not None else ""
    errs = {str(e.get("err")) for e in [*f.oracle, *f.candidate]}
    errs |= {str(r.get("err")) for e in [*f.oracle, *f.candidate] for r in e.get("results", [])}
    if op not in ("setACL", "getACL", "auth") and not errs & ACL_ERRORS:
        return []
    schemes: list[str] = []
    if op == "auth":
        schemes.append(str(a.get("scheme")))
    schemes += _acl_schemes(a.get("acl"))
    for sub in a.get("ops", []):
        schemes += _acl_schemes(sub[1].get("acl") if len(sub) > 1 else None)
    if not schemes and errs & ACL_ERRORS:
        schemes.append("world (default)" if op != "auth" else "?")
    return list(dict.fromkeys(schemes))


def _shape(e: Mapping[str, Any] | None) -> str:
    if e is None:
        return "nothing"
    kind = e.get("kind")
    if kind == "reply":
        return str(e.get("err"))
    if kind == "timeout":
        return "no reply"
    if kind == "closed":
        return "connection closed"
    if kind == "undecodable":
        return "undecodable reply"
    return str(kind)


#: entry kinds after which a session's later entries are consequences, not differences
_ENDS = frozenset({"closed", "undecodable", "not_connected", "connect_failed"})
#: fields whose values are zxids (after normalisation: ranks, which shift together)
ZXID_KEYS = frozenset({"zxid", "czxid", "mzxid", "pzxid", "lastZxidSeen"})


def _leaf_diffs(a: Any, b: Any, key: str = "") -> list[str]:
    """The keys of the leaves where ``a`` and ``b`` differ (list positions keep their key)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in dict.fromkeys([*a, *b]):
            out += _leaf_diffs(a.get(k), b.get(k), k)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for x, y in zip(a, b, strict=True) for d in _leaf_diffs(x, y, key)]
    return [] if a == b else [key]


def error_shapes(f: Finding) -> tuple[list[str], list[str]]:
    """(error shapes, reply contents) of a difference: entries compared position by position
    after the notifications (filed under watch kinds) are taken out, up to the first close on
    either side (what follows a close is its consequence). Contents name the differing fields
    of a reply's body; a difference in zxids alone is *zxid numbering* (one side gave a request
    a zxid the other did not, and every later zxid rank shifts)."""
    o = [e for e in f.oracle if e.get("kind") != "event"]
    c = [e for e in f.candidate if e.get("kind") != "event"]
    shapes: list[str] = []
    contents: list[str] = []
    for i in range(max(len(o), len(c))):
        eo = o[i] if i < len(o) else None
        ec = c[i] if i < len(c) else None
        so, s_c = _shape(eo), _shape(ec)
        op = str((eo or ec or {}).get("op") or family(f))
        if so != s_c:
            shapes.append(f"{op}: {so} -> {s_c}")
        elif eo is not None and ec is not None and eo.get("kind") == "reply":
            ro, rc = eo.get("results"), ec.get("results")
            if ro is not None and rc is not None and ro != rc:
                so_ = ",".join(str(r.get("err")) for r in ro)
                sc_ = ",".join(str(r.get("err")) for r in rc)
                if so_ != sc_:
                    shapes.append(f"{op} results: {so_} -> {sc_}")
                    continue
            leaves = [k for k in _leaf_diffs(_without(eo, "step"), _without(ec, "step"))]
            fields = [k for k in dict.fromkeys(leaves) if k not in ZXID_KEYS]
            if fields:
                contents.append(f"{op} {so}: {', '.join(fields)}")
            elif leaves:
                contents.append("zxid numbering")
        if {(eo or {}).get("kind"), (ec or {}).get("kind")} & _ENDS:
            break
    return shapes, contents


def features(f: Finding) -> dict[str, list[str]]:
    shapes, contents = error_shapes(f)
    return {
        "op families": [family(f)],
        "watch kinds": watch_kinds(f),
        "ACL schemes": acl_schemes(f),
        "error shapes": shapes,
        "reply contents": contents,
    }


# --------------------------------------------------------------------------- intended


def _standalone_check_answered(f: Finding, oracle_version: str) -> bool:
    """ZooKeeper 3.8.0 never answers a successful check outside a multi (a null Stat it cannot
    serialise); trizk answers OK (docs/compatibility.md)."""
    return (
        oracle_version == "3.8.0"
        and f.step is not None
        and f.step[1] == "check"
        and any(e.get("kind") == "timeout" for e in f.oracle)
        and any(e.get("op") == "CHECK" and e.get("err") == "OK" for e in f.candidate)
    )


#: Differences documented as intended: (what, predicate of a finding and the oracle version).
INTENDED: list[tuple[str, Callable[[Finding, str], bool]]] = [
    (
        "a successful standalone check is answered OK (ZooKeeper 3.8.0 sends nothing; "
        "docs/compatibility.md)",
        _standalone_check_answered,
    ),
]


# --------------------------------------------------------------------------- the report


def _entry_text(e: Mapping[str, Any], width: int = 150) -> str:
    text = json.dumps(_without(e, "step"), sort_keys=True)
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass
class Report:
    candidate: str
    oracle_version: str
    findings: list[Finding] = field(default_factory=list)
    intended: list[tuple[str, Finding]] = field(default_factory=list)
    #: runs by source ("scenario", "random", "wirefuzz"), and those with differences
    runs: dict[str, int] = field(default_factory=dict)
    differing: dict[str, set[str]] = field(default_factory=dict)
    fresh: int = 0  # scenarios run on servers of their own
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (scenario, why)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (run, error)
    fuzz_cases: int = 0  # cases that ran without a difference that repeats
    fuzz_flaky: int = 0
    fuzz_races: int = 0
    disturbed: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # chroots a run could not delete

    def add_run(
        self,
        source: str,
        sc: Mapping[str, Any],
        diffs: Sequence[Difference],
        *,
        fresh: bool = False,
        label: str | None = None,
    ) -> None:
        self.runs[source] = self.runs.get(source, 0) + 1
        self.fresh += fresh
        steps = sc["steps"]
        counted = False
        for d in diffs:
            step = steps[d.step] if 0 <= d.step < len(steps) else None
            f = Finding(source, sc["name"], step, d, label)
            why = next((w for w, p in INTENDED if p(f, self.oracle_version)), None)
            if why is not None:
                self.intended.append((why, f))
                continue
            self.findings.append(f)
            counted = True
        if counted:
            self.differing.setdefault(source, set()).add(sc["name"])

    @property
    def differences(self) -> int:
        return len(self.findings) + len(self.disturbed) + len(self.failed)

    def by_feature(self) -> dict[str, dict[str, list[Finding]]]:
        out: dict[str, dict[str, list[Finding]]] = {g: {} for g in GROUPS}
        for f in self.findings:
            for group, names in features(f).items():
                for name in dict.fromkeys(names):
                    out[group].setdefault(name, []).append(f)
        return out

    def render(self) -> str:
        lines = [
            f"Conformance of {self.candidate} against Apache ZooKeeper {self.oracle_version}",
        ]
        n_sc = self.runs.get("scenario", 0)
        if n_sc or self.skipped:
            lines.append(
                f"  scenarios: {n_sc} run ({n_sc - self.fresh} shared under a chroot, "
                f"{self.fresh} on servers of their own), "
                f"{len(self.differing.get('scenario', ()))} with differences, "
                f"{len(self.skipped)} skipped (need a server of their own)"
            )
        if self.runs.get("random"):
            lines.append(
                f"  random mode: {self.runs['random']} sequences, "
                f"{len(self.differing.get('random', ()))} with differences"
            )
        fuzz = self.runs.get("wirefuzz", 0) + self.fuzz_cases
        if fuzz:
            lines.append(
                f"  wire fuzzer: {fuzz} cases, {len(self.differing.get('wirefuzz', ()))} with "
                f"differences that repeat ({self.fuzz_flaky} that did not repeat and "
                f"{self.fuzz_races} racy cases not counted)"
            )
        lines.append(f"  {self.differences} differences")
        if self.findings:
            lines.append("  (X -> Y: the oracle answered X, the candidate Y)")
        for group, feats in self.by_feature().items():
            if not feats:
                continue
            lines.append(f"{group} that differ:")
            for name, fs in sorted(feats.items(), key=lambda kv: (-len(kv[1]), kv[0])):
                runs = len({(f.source, f.run) for f in fs})
                ex = fs[0]
                step = describe_step(ex.step) if ex.step is not None else ex.diff.op
                if len(step) > 200:  # a fuzz frame of up to 1 MiB in hex
                    step = step[:160] + f"... ({len(step)} characters)"
                lines.append(
                    f"  {name}: {len(fs)} differences in {runs} runs; "
                    f"e.g. [{ex.run}] session {ex.diff.session}, step {ex.diff.step}: {step}"
                )
                for side, es in (("oracle", ex.oracle), ("candidate", ex.candidate)):
                    shown = " | ".join(_entry_text(e) for e in es[:2]) or "(nothing)"
                    more = f" (+{len(es) - 2} more)" if len(es) > 2 else ""
                    lines.append(f"      {side}: {shown}{more}")
        for msg in self.disturbed:
            lines.append(f"bystander disturbed: {msg}")
        for name, err in self.failed:
            lines.append(f"could not run {name}: {err}")
        if self.skipped:
            lines.append("skipped (need a server of their own: give --candidate-cmd):")
            for name, why in self.skipped:
                lines.append(f"  {name}: {why}")
        if self.left:
            lines.append(
                "left behind (a scenario's ACLs forbid deleting them): " + ", ".join(self.left)
            )
        if self.intended:
            lines.append("documented intended differences (not counted):")
            whys: dict[str, list[Finding]] = {}
            for why, f in self.intended:
                whys.setdefault(why, []).append(f)
            for why, fs in whys.items():
                names = sorted({f.run for f in fs})
                lines.append(f"  {why}: {len(fs)} in {', '.join(names[:5])}")
        return "\n".join(lines)
