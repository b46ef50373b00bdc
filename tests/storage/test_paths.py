"""PathUtils.validatePath's rules: the regex fast path accepts exactly what the character walk
accepts, and the walk names ZooKeeper's reasons."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.storage.tree import paths
from trizk.storage.tree.paths import InvalidPath, validate_path


def _walk_accepts(path: str) -> bool:
    """The character walk alone (the fast path switched off)."""
    try:
        saved, paths.is_plain = paths.is_plain, lambda _p: None
        try:
            validate_path(path)
        finally:
            paths.is_plain = saved
    except InvalidPath:
        return False
    return True


def _accepts(path: str) -> bool:
    try:
        validate_path(path)
    except InvalidPath:
        return False
    return True


# components built from the characters each rule is about, and any code point
_TRICKY = st.sampled_from(
    [
        "/",
        ".",
        "a",
        "\0",
        "\x1f",
        "\x7f",
        "\x9f",
        "\xa0",
        "\ud800",
        "\uf8ff",
        "\uf900",
        "\ufff0",
        "\uffff",
        "\U00010000",
        "é",
    ]
)
_PATHS = st.one_of(
    st.lists(_TRICKY, max_size=12).map(lambda cs: "/" + "".join(cs)),
    st.text(max_size=12).map(lambda t: "/" + t),
    st.text(max_size=8),
)


@pytest.mark.slow
@settings(max_examples=examples(3000), deadline=None)
@given(_PATHS)
def test_fast_path_agrees_with_the_walk(path: str) -> None:
    assert _accepts(path) == _walk_accepts(path)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/a/../b", "relative paths not allowed @4"),
        ("/a/./b", "relative paths not allowed @3"),
        ("/a//b", "empty node name specified @3"),
        ("/a\0", "null character not allowed @2"),
        ("/a\ud800", "invalid character @2"),
        ("/a/", None),
    ],
)
def test_reasons(path: str, reason: str | None) -> None:
    with pytest.raises(InvalidPath) as e:
        validate_path(path)
    if reason is not None:
        assert str(e.value).endswith(reason)
    else:
        assert str(e.value) == "Path must not end with / character"


@pytest.mark.parametrize("path", ["/", "/a", "/a/b", "/...", "/.a", "/a.", "/\xa0", "/\uf900"])
def test_accepted(path: str) -> None:
    validate_path(path)
