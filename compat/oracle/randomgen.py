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
              | quota(target) | malformed
    mop      := create | create2 | delete | setData | check (with the same argument grammar)
    rop      := getData(path) | getChildren(path)
    path     := a small pool of valid paths under /t (ops collide: NODEEXISTS, NOTEMPTY, watches)
              | invalid paths ("", "t", "/t/a/", "//t", "/t/./a", "/t/../a", "/t/\\u0000")
              | "/t" (reads only), "/zookeeper", "/zookeeper/quota"
    version  := -1 | 0 | 1 | 2 | 5
    data     := "" | null | "x" | "hello" | 300 bytes
    acl      := open | read | creator | empty
    mode     := PERSISTENT | EPHEMERAL | PERSISTENT_SEQUENTIAL | EPHEMERAL_SEQUENTIAL | 7 (bad)
    malformed:= a raw ``request`` step (:func:`malformed_step`): a valid record of any op with
                one field made null / of a bad length or count / bad UTF-8, cut short, or
                followed by trailing bytes; or a multi / multiRead with such an op, an op of the
                wrong kind or an unknown type, a TTL create without its TTL, no end marker,
                trailing bytes, or no ops

``quota`` is setquota/listquota/delquota on the wire, on a target in :data:`QUOTA_TARGETS`:
the creates of ``/zookeeper/quota/<target>``'s chain, its limits and its stats node (as
zkCli's ``setquota`` does, one step each), or a setData of the limits, a delete of the limits
or stats node, or a read of the stats (the usage the server keeps). Limits are always readable
StatsTrack strings: a write under an unreadable stats node stops ZooKeeper 3.8.0. Random
scenarios run with ``enforceQuota=true``, so hard limits refuse writes. The runner deletes
``/zookeeper/quota`` + BASE together with BASE (:func:`trizk.compat.oracle.compare.reset_base`).

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

from trizk.compat.oracle.scenario import Step

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
    "malformed": 6,
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


# --------------------------------------------------------------------------- malformed requests

#: Field layout of each request record the malformed grammar builds: (argument, Jute kind).
SCHEMAS: dict[str, list[tuple[str, str]]] = {
    "create": [("path", "ustring"), ("data", "buffer"), ("acl", "acl"), ("mode", "int")],
    "delete": [("path", "ustring"), ("version", "int")],
    "setData": [("path", "ustring"), ("data", "buffer"), ("version", "int")],
    "setACL": [("path", "ustring"), ("acl", "acl"), ("version", "int")],
    "check": [("path", "ustring"), ("version", "int")],
    "exists": [("path", "ustring"), ("watch", "bool")],
    "getData": [("path", "ustring"), ("watch", "bool")],
    "getChildren": [("path", "ustring"), ("watch", "bool")],
    "getChildren2": [("path", "ustring"), ("watch", "bool")],
    "getACL": [("path", "ustring")],
    "sync": [("path", "ustring")],
    "getAllChildrenNumber": [("path", "ustring")],
    "getEphemerals": [("prefix", "ustring")],
    "addWatch": [("path", "ustring"), ("mode", "int")],
    "removeWatches": [("path", "ustring"), ("type", "int")],
    "checkWatches": [("path", "ustring"), ("type", "int")],
}
OPCODES = {
    "create": "CREATE",
    "delete": "DELETE",
    "setData": "SETDATA",
    "setACL": "SETACL",
    "check": "CHECK",
    "exists": "EXISTS",
    "getData": "GETDATA",
    "getChildren": "GETCHILDREN",
    "getChildren2": "GETCHILDREN2",
    "getACL": "GETACL",
    "sync": "SYNC",
    "getAllChildrenNumber": "GETALLCHILDRENNUMBER",
    "getEphemerals": "GETEPHEMERALS",
    "addWatch": "ADDWATCH",
    "removeWatches": "REMOVEWATCHES",
    "checkWatches": "CHECKWATCHES",
}
#: a standalone check is not generated (ZooKeeper 3.8.0 never answers a successful one)
SINGLE_MALFORMED = [o for o in SCHEMAS if o != "check"]
MULTI_WRITE_OPS = ["create", "delete", "setData", "check"]
MULTI_READ_OPS = ["getData", "getChildren"]
MULTI_TYPES = {"create": 1, "delete": 2, "setData": 5, "check": 13, "getData": 4, "getChildren": 8}
#: a one-entry ACL vector (count included) whose id, or scheme, is null
NULL_ID_ACL: list[list[Any]] = [["int", 1], ["int", 31], ["ustring", "world"], ["ustring", None]]
NULL_SCHEME_ACL: list[list[Any]] = [
    ["int", 1],
    ["int", 31],
    ["ustring", None],
    ["ustring", "anyone"],
]


def _valid_fields(op: str, a: dict[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for name, _kind in SCHEMAS[op]:
        if name == "path":
            out.append(["ustring", a.get("path", "/t/a")])
        elif name == "prefix":
            out.append(["ustring", a.get("prefix", "/")])
        elif name == "data":
            out.append(["buffer", a.get("data", "")])
        elif name == "acl":
            out.append(["acl", a.get("acl", "open")])
        elif name == "mode":
            m = a.get("mode", 0)
            out.append(["int", m if isinstance(m, int) else _MODE_FLAGS[m]])
        elif name == "watch":
            out.append(["bool", 1 if a.get("watch") else 0])
        else:
            out.append(["int", int(a.get(name, -1 if name == "version" else 3))])
    return out


_MODE_FLAGS = {
    "PERSISTENT": 0,
    "EPHEMERAL": 1,
    "PERSISTENT_SEQUENTIAL": 2,
    "EPHEMERAL_SEQUENTIAL": 3,
}


def _wrong(r: random.Random, f: list[Any]) -> list[list[Any]]:
    """A malformed replacement for one field (one or more fields in its place)."""
    kind = f[0]
    if kind == "ustring":
        p = f[1] if isinstance(f[1], str) else "/t/a"
        return [
            r.choice(
                [
                    ["ustring", None],
                    ["ustring", None],
                    ["ustring", {"hex": p.encode().hex() + "c328"}],
                    ["int", -2],
                    ["int", 0x7FFFFFFF],
                ]
            )
        ]
    if kind == "buffer":
        return [r.choice([["buffer", None], ["int", -3], ["int", 0x7FFFFFFF]])]
    if kind == "acl":
        x = r.random()
        if x < 0.3:
            return [["acl", None]]
        if x < 0.5:
            return [["int", r.choice([-2, 0, 0x7FFFFFFF])]]
        return list(NULL_ID_ACL if x < 0.8 else NULL_SCHEME_ACL)
    if kind == "bool":
        return [["bool", r.choice([2, 255])]]
    return [["int", r.choice([-2, 99, 0x7FFFFFFF])]]


def _mutate(r: random.Random, fields: list[list[Any]]) -> list[list[Any]]:
    """One malformation of a valid field list: a wrong field, a truncation, trailing bytes."""
    x = r.random()
    i = r.randrange(len(fields))
    if x < 0.6:
        return fields[:i] + _wrong(r, fields[i]) + fields[i + 1 :]
    if x < 0.8:
        return fields[:i]  # truncated: the fields from i on are missing
    return [*fields, ["hex", r.choice(["00", "deadbeef", "ffffffff"])]]


def _multi_fields(r: random.Random, ops: list[str]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for o in ops:
        a = _op(r, "create" if o == "create" else o)[1] if o in SCHEMAS else {}
        out.append(["mh", MULTI_TYPES[o], False, -1])
        out.extend(_valid_fields(o, a))
    return out


def malformed_step(r: random.Random, s: str) -> Step:
    """A request with one malformed field, alone or inside a multi / multiRead (null fields,
    bad lengths and counts, truncation, trailing bytes, ops of the wrong kind, unknown op types,
    a TTL create without a TTL, a missing end marker, an empty multi)."""
    x = r.random()
    if x < 0.5:
        op = r.choice(SINGLE_MALFORMED)
        fields = _mutate(r, _valid_fields(op, _op(r, op)[1]))
        if op == "addWatch" and fields and fields[0] == ["ustring", None]:
            # Not generated: a connection holding a null-path watch makes ZooKeeper 3.8.0's
            # WatchManager.removeWatcher throw when it closes, leaking that connection's other
            # watches server-wide (seen by later checkWatches); malformed_addwatch keeps the
            # answer itself.
            fields[0] = ["ustring", {"hex": "2fc328"}]
        return [s, "request", {"opcode": OPCODES[op], "fields": fields}]
    read = x >= 0.8
    kinds = MULTI_READ_OPS if read else MULTI_WRITE_OPS
    ops = [r.choice(kinds) for _ in range(r.randint(1, 3))]
    body = _multi_fields(r, ops)
    end = [["mh", -1, True, -1]]
    y = r.random()
    if y < 0.4:  # one op's field malformed (positions after the first header)
        j = r.randrange(len(body))
        if body[j][0] != "mh":
            body = body[:j] + _wrong(r, body[j]) + body[j + 1 :]
    elif y < 0.55:  # an op of the wrong kind, or of an unknown type
        other = MULTI_WRITE_OPS if read else MULTI_READ_OPS
        wrong = r.choice([*other, "exists"])
        extra: list[list[Any]]
        if wrong == "exists":
            extra = [["mh", 3, False, -1], ["ustring", "/t"], ["bool", 0]]
        else:
            extra = _multi_fields(r, [wrong])
        body = extra + body if r.random() < 0.5 else body + extra
    elif y < 0.65:  # a create whose flags are TTL flags (no TTL field)
        body = [*body, ["mh", 1, False, -1], ["ustring", "/t/a"], ["buffer", ""]]
        body += [["acl", "open"], ["int", 5]]
    elif y < 0.75:
        end = []  # the end marker missing
    elif y < 0.85:
        end = [*end, ["hex", "deadbeef"]]  # trailing bytes
    elif y < 0.92:
        body = []  # an empty multi
    else:
        body = [*body, ["mh", r.choice([999, -1, 0]), False, -1]]
    return [s, "request", {"opcode": "MULTIREAD" if read else "MULTI", "fields": body + end}]


def count_malformed(steps: list[Step]) -> int:
    return sum(1 for st in steps if st[1] == "request")


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
        elif op == "malformed":
            steps.append(malformed_step(r, s))
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
