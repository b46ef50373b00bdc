"""A linearizability checker for histories recorded against ZooKeeper-like servers.

Wing & Gong's search with Lowe's memoisation (the algorithm of Porcupine): take the operations
in call order; repeatedly try to linearize a pending operation whose call precedes every
pending return, stepping a sequential model; backtrack on a contradiction; memoise (set of
linearized ops, model state) pairs already explored. Histories are partitioned per key
(P-compositionality: a register per znode), so each search stays small.

Model: one znode as a register ``(data, version)``:

* ``read`` returns ``(data, version)`` -- must equal the state;
* ``cas(data, expected)`` is setData with an expected version (-1: any): OK with the new version
  if it matches, else BADVERSION and no change;
* an operation whose outcome is unknown (timeout, connection loss) has ``result=None``: it may
  have taken effect at any point after its call, or never, and it may be ordered after every
  other operation (its return time is infinite).

Per-session order is implied: a client's operations do not overlap in time, so real-time order
already orders them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

BADVERSION = "badversion"


@dataclass(frozen=True)
class Op:
    """One operation: ``kind`` 'read' or 'cas'; ``arg`` (data, expected version) for cas;
    ``result``: read -> (data, version); cas -> new version or BADVERSION; None = unknown."""

    client: int
    key: str
    kind: str
    arg: Any
    call: float
    ret: float
    result: Any = None

    @property
    def unknown(self) -> bool:
        return self.result is None


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)

    def add(self, op: Op) -> None:
        self.ops.append(op)


def _step(state: tuple[Any, int], op: Op) -> tuple[bool, tuple[Any, int]]:
    """Sequential register model: (consistent?, next state)."""
    _data, version = state
    if op.kind == "read":
        return (op.unknown or op.result == state), state
    if op.kind == "cas":
        new, expected = op.arg
        applies = expected == -1 or expected == version
        if op.unknown:
            return True, ((new, version + 1) if applies else state)
        if applies:
            return op.result == version + 1, (new, version + 1)
        return op.result == BADVERSION, state
    raise ValueError(f"unknown op kind {op.kind!r}")


def check_key(ops: list[Op], initial: tuple[Any, int], budget: int = 2_000_000) -> bool:
    """Whether the operations on one register are linearizable from ``initial``."""
    # Unknown outcomes: never returned, so they stay pending (may linearize anywhere later or
    # never); an unknown read constrains nothing and is dropped.
    ops = [o for o in ops if not (o.unknown and o.kind == "read")]
    ops.sort(key=lambda o: o.call)
    n = len(ops)
    rets = [math.inf if o.unknown else o.ret for o in ops]
    must = frozenset(i for i in range(n) if not ops[i].unknown)
    seen: set[tuple[frozenset[int], Hashable]] = set()
    steps = 0

    def search(done: frozenset[int], state: tuple[Any, int]) -> bool:
        nonlocal steps
        if must <= done:
            return True
        key = (done, state)
        if key in seen:
            return False
        seen.add(key)
        steps += 1
        if steps > budget:
            raise RuntimeError("linearizability search budget exceeded")
        pending = [i for i in range(n) if i not in done]
        horizon = min(rets[i] for i in pending)  # the earliest pending return
        for i in pending:
            if ops[i].call > horizon:
                break  # sorted by call: nothing later can go first
            ok, nxt = _step(state, ops[i])
            if ok and search(done | {i}, nxt):
                return True
        return False

    return search(frozenset(), initial)


def check(history: Iterable[Op], initial: dict[str, tuple[Any, int]]) -> list[str]:
    """The keys whose operations are not linearizable (empty: the history is linearizable)."""
    by_key: dict[str, list[Op]] = {}
    for op in history:
        by_key.setdefault(op.key, []).append(op)
    return [k for k, ops in sorted(by_key.items()) if not check_key(ops, initial[k])]
