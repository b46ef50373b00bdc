"""Running a scenario under a chroot: its paths moved below a node of its own (pure).

Theory
------
A chroot is the client's business in ZooKeeper: ``ClientCnxn`` prepends it to every path it
sends (``ZooKeeper.prependChroot``: ``"/"`` becomes the chroot itself, any other path is
appended to it) and strips it from every path it receives (a create's path, a notification's
path). The server never hears of it. So a scenario can run on a server that others use, and
many scenarios on one server, by rewriting its steps before they are sent
(:func:`chroot_steps`) and its transcript after it was recorded (:func:`unchroot_transcript`);
a scenario run this way on two servers is compared exactly as a fresh run is.

Rules:

* A path is rewritten when it is text starting with ``/``. Anything else (``null``, ``""``,
  ``"t"``) is sent unchanged: prefixing it would turn an invalid path into a valid one.
  ``{"hex": ...}`` paths (bad UTF-8) are rewritten on their bytes.
* Paths are the ``path`` and ``prefix`` arguments of a step, those of each op of a multi, the
  lists of setWatches / setWatches2, and the ``ustring`` / ``strings`` fields of a malformed
  ``request`` built field by field (including ``req`` and ``multi`` fields). Raw bytes
  (``frames``, ``raw``, a ``request`` given as ``body_hex``) cannot be rewritten:
  :func:`chroot_obstacle` says so, and such a scenario needs a server of its own. So does the
  empty path (:func:`has_empty_path`): sent unchanged, some operations answer it from the
  server's root, where other runs and other users leave their nodes.
* In the transcript, a ``path`` field or an entry of an ``ephemerals`` list equal to the
  chroot becomes ``/``, one below it loses the prefix; anything else is left alone (a path
  outside the chroot is a difference worth seeing).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from trizk.compat.oracle.normalise import Transcript
from trizk.compat.oracle.scenario import Step

#: the step arguments that are paths
PATH_ARGS = ("path", "prefix")
#: the setWatches / setWatches2 arguments that are lists of paths
WATCH_LISTS = ("data", "exist", "child", "persistent", "persistentRecursive")
#: step operations whose bytes are sent as they are
RAW_OPS = frozenset({"frames", "raw", "open"})


def chroot_path(chroot: str, path: Any) -> Any:
    """``path`` as a client chrooted at ``chroot`` sends it (module docstring's rules)."""
    if isinstance(path, str):
        if not path.startswith("/"):
            return path
        return chroot if path == "/" else chroot + path
    if isinstance(path, dict) and "hex" in path:
        raw = bytes.fromhex(path["hex"])
        if not raw.startswith(b"/"):
            return path
        new = chroot.encode() if raw == b"/" else chroot.encode() + raw
        return {"hex": new.hex()}
    return path


def _args(chroot: str, a: Mapping[str, Any], op: str = "") -> dict[str, Any]:
    out = dict(a)
    for k in PATH_ARGS:
        if k in out:
            out[k] = chroot_path(chroot, out[k])
    if "ops" in out:
        out["ops"] = [[sub[0], _args(chroot, sub[1] if len(sub) > 1 else {})] for sub in out["ops"]]
    if op in ("setWatches", "setWatches2"):
        for k in WATCH_LISTS:
            if k in out and out[k] is not None:
                out[k] = [chroot_path(chroot, p) for p in out[k]]
    if "fields" in out:
        out["fields"] = [_field(chroot, f) for f in out["fields"]]
    return out


def _field(chroot: str, f: list[Any]) -> list[Any]:
    kind = f[0]
    if kind == "ustring":
        return ["ustring", chroot_path(chroot, f[1])]
    if kind == "strings" and f[1] is not None:
        return ["strings", [chroot_path(chroot, p) for p in f[1]]]
    if kind == "req":
        return ["req", f[1], _args(chroot, f[2] if len(f) > 2 else {}, f[1])]
    if kind == "multi":
        return ["multi", [[o[0], _args(chroot, o[1] if len(o) > 1 else {}, o[0])] for o in f[1]]]
    return list(f)


def chroot_obstacle(sc: Mapping[str, Any]) -> str | None:
    """Why ``sc`` cannot run under a chroot (raw bytes with paths inside), or None."""
    for st in sc["steps"]:
        op = st[1]
        a = st[2] if len(st) > 2 else {}
        if op in RAW_OPS:
            return f"raw bytes ({op} step)"
        if op == "request" and "fields" not in a:
            return "a request given as raw bytes"
        if has_empty_path(st):
            return "an empty path (answered from the server's root)"
    return None


def _paths(v: Any, key: str = "") -> Iterator[Any]:
    """Every value a step's arguments carry as a path (module docstring's places)."""
    if isinstance(v, dict):
        for k, x in v.items():
            if k in PATH_ARGS:
                yield x
            elif k in WATCH_LISTS and isinstance(x, list) and key == "watches":
                yield from x
            else:
                yield from _paths(x, k)
    elif isinstance(v, list):
        if len(v) == 2 and v[0] == "ustring":
            yield v[1]
        else:
            for x in v:
                yield from _paths(x, key)


def has_empty_path(st: Step) -> bool:
    """Whether a step sends the empty path: a server answers some operations on it from its
    root (getAllChildrenNumber, checkWatches ...), outside any chroot."""
    a = st[2] if len(st) > 2 else {}
    return any(p == "" for p in _paths(a, "watches" if st[1].startswith("setWatches") else ""))


def chroot_steps(chroot: str, steps: list[Step]) -> list[Step]:
    """The steps as a client chrooted at ``chroot`` sends them."""
    return [
        [st[0], st[1], _args(chroot, st[2], st[1])] if len(st) > 2 else list(st) for st in steps
    ]


def unchroot_path(chroot: str, path: Any) -> Any:
    if not isinstance(path, str):
        return path
    if path == chroot:
        return "/"
    if path.startswith(chroot + "/"):
        return path[len(chroot) :]
    return path


def _strip(chroot: str, v: Any) -> Any:
    if isinstance(v, dict):
        out: dict[str, Any] = {}
        for k, x in v.items():
            if k == "path":
                out[k] = unchroot_path(chroot, x)
            elif k == "ephemerals" and isinstance(x, list):
                out[k] = [unchroot_path(chroot, p) for p in x]
            else:
                out[k] = _strip(chroot, x)
        return out
    if isinstance(v, list):
        return [_strip(chroot, x) for x in v]
    return v


def unchroot_transcript(chroot: str, t: Transcript) -> Transcript:
    """The transcript as a client chrooted at ``chroot`` sees it."""
    return {label: [_strip(chroot, e) for e in entries] for label, entries in t.items()}
