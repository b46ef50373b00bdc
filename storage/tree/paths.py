"""ZooKeeper path rules (``PathUtils.validatePath``) and parent/child helpers.

Java strings are UTF-16: a character outside the Basic Multilingual Plane is a surrogate pair
there, and surrogates (U+D800..U+F8FF) are rejected by ZooKeeper, so we reject any code point
above U+FFFF as well.
"""

from __future__ import annotations

import re


class InvalidPath(ValueError):
    """The path breaks ZooKeeper's path rules (the server answers BADARGUMENTS)."""


def _bad_char(c: str) -> bool:
    o = ord(c)
    return (
        (0 < o <= 0x1F)
        or (0x7F <= o <= 0x9F)
        or (0xD800 <= o <= 0xF8FF)
        or (0xFFF0 <= o <= 0xFFFF)
        or o > 0xFFFF
    )


#: A path every rule below accepts: components that are neither empty, ``.`` nor ``..`` and
#: hold no character _bad_char rejects (nor NUL). Matching it is the fast path; anything else
#: takes the character walk, which names ZooKeeper's reason.
_PLAIN = re.compile(r"(?:/(?!\.\.?(?:/|$))[^/\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]+)+")
#: ``is_plain(path)`` is truthy for a path every rule accepts (the root ``/`` aside); falsy
#: does not mean invalid -- :func:`validate_path` decides.
is_plain = _PLAIN.fullmatch


def validate_path(path: str | None) -> None:
    """Raise :class:`InvalidPath` with ZooKeeper's reason if ``path`` is not a valid znode path."""
    if path and is_plain(path):
        return
    if path is None:
        raise InvalidPath("Path cannot be null")
    if not path:
        raise InvalidPath("Path length must be > 0")
    if path[0] != "/":
        raise InvalidPath("Path must start with / character")
    if len(path) == 1:
        return
    if path[-1] == "/":
        raise InvalidPath("Path must not end with / character")
    reason = None
    last = "/"
    n = len(path)
    for i in range(1, n):
        c = path[i]
        if c == "\0":
            reason = f"null character not allowed @{i}"
        elif c == "/" and last == "/":
            reason = f"empty node name specified @{i}"
        elif c == "." and last == ".":
            if path[i - 2] == "/" and (i + 1 == n or path[i + 1] == "/"):
                reason = f"relative paths not allowed @{i}"
        elif c == ".":
            if path[i - 1] == "/" and (i + 1 == n or path[i + 1] == "/"):
                reason = f"relative paths not allowed @{i}"
        elif _bad_char(c):
            reason = f"invalid character @{i}"
        if reason:
            raise InvalidPath(f'Invalid path string "{path}" caused by {reason}')
        last = c


def split(path: str) -> tuple[str, str]:
    """``/a/b`` -> (``/a``, ``b``); ``/a`` -> (``""``, ``a``) as ZooKeeper's lastIndexOf split.

    The root's key is ``""`` in ZooKeeper's node map (it is also reachable as ``/``).
    """
    i = path.rfind("/")
    return path[:i], path[i + 1 :]


def watch_path(parent: str) -> str:
    """The path a child watch on ``parent`` is registered under (``""`` means ``/``)."""
    return parent or "/"
