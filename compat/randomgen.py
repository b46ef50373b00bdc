"""Seeded random scenarios from a grammar, and shrinking of a difference to a shortest sequence.

Grammar (weights in :data:`WEIGHTS`)::

    scenario := sessions {A, B, C} ; step*
    step     := session op
    session  := A | B | C
    op       := create(path, data, acl, mode) | create2(...) | delete(path, version)
              | exists(path, watch) | getData(path, watch) | setData(path, data, version)
              | getChildren(path, watch) | getChildren2(path, watch) | sync(path)
              | getACL(path) | setACL(path, acl, version)
              | multi(mop{1..4}) | multiRead(rop{1..3}) | auth(digest) | renew
              | getEphemerals(prefix) | getAllChildrenNumber(path)
              | addWatch(path, PERSISTENT | PERSISTENT_RECURSIVE)
              | removeWatches(path, CHILDREN | DATA | ANY) | checkWatches(path, ...)
              | quota(target)
    mop      := create | create2 | delete | setData | check (with the same argument grammar)
    rop      := getData(path) | getChildren(path)
    path     := a small pool of valid paths under /t (ops collide: NODEEXISTS, NOTEMPTY, watches)
              | invalid paths ("", "t", "/t/a/", "//t", "/t/./a", "/t/../a", "/t/\\u0000")
              | "/t" (reads only), "/zookeeper", "/zookeeper/quota"
    version  := -1 | 0 | 1 | 2 | 5
    data     := "" | null | "x" | "hello" | 300 bytes
    acl      := open | read | creator | empty
    mode     := PERSISTENT | EPHEMERAL | PERSISTENT_SEQUENTIAL | EPHEMERAL_SEQUENTIAL | 7 (bad)

``quota`` is setquota/listquota/delquota on the wire, on a target in :data:`QUOTA_TARGETS`:
the creates of ``/zookeeper/quota/<target>``'s chain, its limits and its stats node (as
zkCli's ``setquota`` does, one step each), or a setData of the limits, a delete of the limits
or stats node, or a read of the stats (the usage the server keeps). Limits are always readable
StatsTrack strings: a write under an unreadable stats node stops ZooKeeper 3.8.0. Random
scenarios run with ``enforceQuota=true``, so hard limits refuse writes. The runner deletes
``/zookeeper/quota`` + BASE together with BASE (:func:`trizk.compat.compare.reset_base`).

``reconnect-fresh`` is the ``renew`` step: ``closeSession`` and a new session under the same
label, in one step, so every label stays usable, no session is ever left to expire at an
unpredictable moment, and any subsequence of a sequence is still a valid scenario (no step
depends on a value returned by an earlier one). Generation is a pure function of the seed.
Paths live under ``BASE`` (see there). A standalone ``check`` is not generated (only inside
multi): ZooKeeper 3.8.0 never answers a successful one, a known difference kept in the
``check_standalone_ok`` scenario rather than in every random run.

Shrinking (:func:`shrink`) is ddmin-style: remove chunks of halving size while the difference
persists, then single steps, until no single step can be removed (1-minimal). The predicate runs
the candidate on fresh servers, so every reported sequence reproduces from scratch.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .scenario import Step

#: Every node a random scenario can create lives under BASE, which the runner creates fresh
#: before each run and deletes after it: a run's answers then do not depend on earlier runs on
#: the same server (BASE starts with cversion 0 and an empty child set), so one server pair
#: can serve many runs. "/" is not in the pool: its stat carries the server's history.
BASE = "/t"
VALID_PATHS = [
    "/t/a",
    "/t/a",
    "/t/a",
    "/t/a/b",
    "/t/a/b",
    "/t/a/b/c",
    "/t/a/d",
    "/t/e",
    "/t/e",
    "/t/e/f",
]
INVALID_PATHS = ["", "t", "/t/a/", "//t", "/t/./a", "/t/../a", "/t/\u0000"]
SPECIAL_PATHS = ["/t", "/zookeeper", "/zookeeper/quota"]
VERSIONS = [-1, -1, -1, 0, 0, 1, 2, 5]
DATA: list[Any] = ["", None, "x", "hello", {"repeat": ["z", 300]}]
ACLS = ["open"] * 8 + ["read", "creator", "empty"]
MODES: list[Any] = ["PERSISTENT"] * 5 + [
    "EPHEMERAL",
    "EPHEMERAL",
    "PERSISTENT_SEQUENTIAL",
    "EPHEMERAL_SEQUENTIAL",
    7,
]
SESSIONS = ["A", "B", "C"]
QUOTA_TARGETS = ["/t/a", "/t/a", "/t/a/b", "/t/e"]
QUOTA_LIMITS = [
    "count=2,bytes=-1=;byteHardLimit=-1;countHardLimit=-1",
    "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3",
    "count=-1,bytes=-1=;byteHardLimit=20;countHardLimit=-1",
    "count=-1,bytes=-1=;byteHardLimit=400;countHardLimit=4",
    "count=1,bytes=10",
]
#: zoo.cfg keys of every random scenario
RANDOM_CFG = {"enforceQuota": "true"}

WEIGHTS: dict[str, int] = {
    "create": 10,
    "create2": 4,
    "delete": 6,
    "exists": 6,
    "getData": 5,
    "setData": 6,
    "getChildren": 4,
    "getChildren2": 3,
    "sync": 1,
    "getACL": 1,
    "setACL": 1,
    "multi": 4,
    "auth": 1,
    "reconnect": 1,
    "getEphemerals": 1,
    "getAllChildrenNumber": 1,
    "multiRead": 1,
    "addWatch": 1,
    "removeWatches": 1,
    "checkWatches": 1,
    "quota": 3,
}


def _quota_steps(r: random.Random, s: str) -> list[Step]:
    target = r.choice(QUOTA_TARGETS)
    q = "/zookeeper/quota" + target
    limits, stats = f"{q}/zookeeper_limits", f"{q}/zookeeper_stats"
    x = r.random()
    if x < 0.35:
        parts = q.split("/")[1:]
        chain = ["/" + "/".join(parts[:i]) for i in range(3, len(parts) + 1)]
        steps: list[Step] = [[s, "create", {"path": p}] for p in chain]
        steps.append([s, "create", {"path": limits, "data": r.choice(QUOTA_LIMITS)}])
        steps.append([s, "create", {"path": stats, "data": "count=0,bytes=0"}])
        return steps
    if x < 0.7:
        return [[s, "getData", {"path": stats}]]
    if x < 0.85:
        return [[s, "setData", {"path": limits, "data": r.choice(QUOTA_LIMITS)}]]
    return [[s, "delete", {"path": r.choice([limits, limits, stats])}]]


def _path(r: random.Random, write: bool = False) -> str:
    x = r.random()
    if x < 0.85:
        return r.choice(VALID_PATHS)
    if x < 0.95:
        return r.choice(INVALID_PATHS)
    if write:
        # Writes never touch BASE itself (a sequential create of it would name a root child).
        return r.choice(SPECIAL_PATHS[1:])
    return r.choice(SPECIAL_PATHS)


def _op(r: random.Random, op: str) -> list[Any]:
    if op in ("create", "create2"):
        return [
            op,
            {
                "path": _path(r, write=True),
                "data": r.choice(DATA),
                "acl": r.choice(ACLS),
                "mode": r.choice(MODES),
            },
        ]
    if op == "delete":
        return [op, {"path": _path(r, write=True), "version": r.choice(VERSIONS)}]
    if op == "check":
        # ZooKeeper 3.8.0 never answers a successful standalone check: bound that wait short.
        return [op, {"path": _path(r), "version": r.choice(VERSIONS), "wait": 1}]
    if op in ("exists", "getData", "getChildren", "getChildren2"):
        return [op, {"path": _path(r), "watch": r.random() < 0.5}]
    if op == "setData":
        return [
            op,
            {"path": _path(r, write=True), "data": r.choice(DATA), "version": r.choice(VERSIONS)},
        ]
    if op in ("sync", "getACL", "getAllChildrenNumber"):
        return [op, {"path": _path(r)}]
    if op == "getEphemerals":
        return [op, {"prefix": r.choice(["/", "/t", "/t/a", "/t/e/"])}]
    if op == "addWatch":
        return [op, {"path": _path(r), "mode": r.choice([0, 1])}]
    if op in ("removeWatches", "checkWatches"):
        return [op, {"path": _path(r), "type": r.choice([1, 2, 3])}]
    if op == "setACL":
        return [
            op,
            {"path": _path(r, write=True), "acl": r.choice(ACLS), "version": r.choice(VERSIONS)},
        ]
    raise ValueError(op)


def generate(seed: int, length: int) -> dict[str, Any]:
    """A random scenario: a pure function of (seed, length)."""
    r = random.Random(seed)
    ops = list(WEIGHTS)
    weights = [WEIGHTS[o] for o in ops]
    steps: list[Step] = []
    while len(steps) < length:
        s = r.choice(SESSIONS)
        op = r.choices(ops, weights)[0]
        if op == "multi":
            kinds = ["create", "create2", "delete", "setData", "check"]
            sub = [_op(r, r.choice(kinds)) for _ in range(r.randint(1, 4))]
            for o in sub:
                o[1].pop("wait", None)
            steps.append([s, "multi", {"ops": sub}])
        elif op == "multiRead":
            sub = [
                [r.choice(["getData", "getChildren"]), {"path": _path(r)}]
                for _ in range(r.randint(1, 3))
            ]
            steps.append([s, "multiRead", {"ops": sub}])
        elif op == "auth":
            user = r.choice(["alice:pw", "bob:pw"])
            steps.append([s, "auth", {"scheme": "digest", "auth": user}])
        elif op == "reconnect":
            steps.append([s, "renew", {}])
        elif op == "quota":
            steps.extend(_quota_steps(r, s))
        else:
            steps.append([s, *_op(r, op)])
    return {
        "name": f"random-seed{seed}-len{length}",
        "sessions": {s: {} for s in SESSIONS},
        "cfg": dict(RANDOM_CFG),
        "base": BASE,
        "steps": steps,
    }


def shrink(
    steps: list[Step],
    still_differs: Callable[[list[Step]], bool],
    *,
    budget: int = 200,
) -> list[Step]:
    """A 1-minimal subsequence of ``steps`` for which ``still_differs`` holds (bounded tries)."""
    cur = list(steps)
    tries = 0
    n = 2
    while len(cur) >= 2 and tries < budget:
        chunk = max(1, len(cur) // n)
        reduced = False
        i = 0
        while i < len(cur) and tries < budget:
            cand = cur[:i] + cur[i + chunk :]
            tries += 1
            if cand and still_differs(cand):
                cur = cand
                reduced = True
            else:
                i += chunk
        if not reduced:
            if chunk == 1:
                break
            n = min(len(cur), n * 2)
    return cur
