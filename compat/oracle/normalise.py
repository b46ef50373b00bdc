"""Normalisation of transcripts before two servers' answers are compared.

Two correct servers given the same scenario differ only where the protocol leaves room: the
session ids they hand out, the wall-clock times they stamp, and the absolute zxids (a fresh
server's first zxid depends on how many sessions the readiness probe opened, its epoch on its
history). Everything else must be equal. The rules, applied to a whole scenario transcript
(every session) at once:

1. **Session ids** (``sessionId`` of connect responses, in order of appearance across sessions
   in declaration order) become ``S1``, ``S2`` ...; ``ephemeralOwner`` (and ``sessionId``
   anywhere else) equal to one of them becomes that label. 0 stays 0. Other values (container
   ``0x8000000000000000``, TTL owners with 0xFF in the top byte) are kept as they are: they are
   constants, so they must be equal.
2. **Times** ``ctime`` and ``mtime`` become ``"T"`` when positive (0 and negative values are
   kept: they mean something).
3. **Zxids** (``zxid`` of reply headers and events, ``czxid``, ``mzxid``, ``pzxid``,
   ``lastZxidSeen``) become ``Z<rank>``: the rank of the value among all distinct zxids of the
   transcript, ascending, from 1. Two transcripts are equal after this mapping iff there is an
   order-preserving bijection between their zxids that maps one onto the other: equal zxids stay
   equal, and the relative order (e.g. ``pzxid`` after ``czxid``, a later write's zxid larger)
   must hold. The values -1 and 0 are kept as they are (they are protocol constants: events
   carry -1, a never-written pzxid...).
4. **Passwords** are recorded by length and whether they are all zero (an expired or refused
   session gets 16 zero bytes); the executor never records the bytes themselves.
5. Everything else is compared as it is: error codes, data, versions, cversion, aversion,
   dataLength, numChildren, sequential suffixes in paths, event types/states/paths, the position
   of events relative to replies, xids, and raw undecoded tails.
6. **Child lists** are compared in the order the server sent them (Apache ZooKeeper's order is
   its ``HashSet<String>`` iteration order, which trizk reproduces). With ``sort_children=True``
   the ``children`` lists are sorted first, for servers that only promise the set.
7. The ``step`` tag of each entry is kept: it is the scenario step during which the entry
   arrived, so an event arriving one step late is a difference.
8. **An UNIMPLEMENTED reply and the close after it** (only replies to pings between them)
   become the close alone, at the reply's step. ZooKeeper 3.9.3 answers a standalone ``check``
   with UNIMPLEMENTED and closes the connection; its close can overtake the queued reply, or
   come after the next ping's reply, so one run of it shows the reply and the close, another
   the close alone, another the reply, a ping's reply and the close (all seen in CI,
   ZooKeeper against itself).

The normaliser is pure: transcript in, new transcript out. That ZooKeeper against a second
ZooKeeper reports no differences is the test that these rules are fair.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

ZXID_FIELDS = frozenset({"zxid", "czxid", "mzxid", "pzxid", "lastZxidSeen"})
TIME_FIELDS = frozenset({"ctime", "mtime"})
SESSION_FIELDS = frozenset({"sessionId", "ephemeralOwner"})
KEPT_ZXIDS = frozenset({-1, 0})

Transcript = dict[str, list[dict[str, Any]]]


def _walk(v: Any) -> Iterator[tuple[str, Any]]:
    """Every (field name, value) pair inside nested dicts/lists."""
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, dict | list):
                yield from _walk(x)
            else:
                yield k, x
    elif isinstance(v, list):
        for x in v:
            yield from _walk(x)


def _rewrite(v: Any, fn: Any, sort_children: bool) -> Any:
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if isinstance(x, dict | list):
                y = _rewrite(x, fn, sort_children)
                if k == "children" and sort_children and isinstance(y, list):
                    y = sorted(y)
                out[k] = y
            else:
                out[k] = fn(k, x)
        return out
    if isinstance(v, list):
        return [_rewrite(x, fn, sort_children) for x in v]
    return v


def session_labels(t: Transcript) -> dict[int, str]:
    labels: dict[int, str] = {}
    for entries in t.values():
        for e in entries:
            if e.get("kind") == "connect":
                sid = e.get("sessionId")
                if isinstance(sid, int) and sid != 0 and sid not in labels:
                    labels[sid] = f"S{len(labels) + 1}"
    return labels


def zxid_ranks(t: Transcript) -> dict[int, str]:
    values = {
        x
        for k, x in _walk(t)
        if k in ZXID_FIELDS and isinstance(x, int) and not isinstance(x, bool)
    }
    values -= KEPT_ZXIDS
    return {z: f"Z{i + 1}" for i, z in enumerate(sorted(values))}


def normalise(t: Transcript, *, sort_children: bool = False) -> Transcript:
    """The normalised copy of a transcript (see the module docstring for the rules)."""
    sessions = session_labels(t)
    zxids = zxid_ranks(t)

    def fn(k: str, x: Any) -> Any:
        if isinstance(x, bool) or not isinstance(x, int):
            return x
        if k in SESSION_FIELDS:
            return sessions.get(x, x)
        if k in TIME_FIELDS:
            return "T" if x > 0 else x
        if k in ZXID_FIELDS:
            return zxids.get(x, x)
        return x

    return {
        label: _close_overtakes_unimplemented(_rewrite(copy.deepcopy(entries), fn, sort_children))
        for label, entries in t.items()
    }


def _close_overtakes_unimplemented(entries: list[Any]) -> list[Any]:
    """Rule 8: a reply with ``err`` UNIMPLEMENTED followed by ``closed`` (with only replies to
    pings between them) becomes that ``closed`` at the reply's step."""
    out: list[Any] = []
    for e in entries:
        if isinstance(e, dict) and e.get("kind") == "closed":
            k = len(out)
            while k and isinstance(out[k - 1], dict) and out[k - 1].get("op") == "PING":
                k -= 1
            prev = out[k - 1] if k else None
            if (
                isinstance(prev, dict)
                and prev.get("kind") == "reply"
                and prev.get("err") == "UNIMPLEMENTED"
            ):
                del out[k:]
                out[-1] = {**e, "step": prev.get("step")}
                continue
        out.append(e)
    return out
