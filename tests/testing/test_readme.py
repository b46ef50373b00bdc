"""The README's "Use trizk in your tests" examples are run as written (each python block
becomes a test module of a child pytest run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## Use trizk in your tests", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_has_the_examples() -> None:
    found = blocks()
    assert len(found) == 4
    assert "trizk_chroot" in found[0] and "unittest" in found[1] and "kazoo_harness" in found[2]
    assert "trizk_ensemble" in found[3]


def test_readme_examples_pass(pytester: pytest.Pytester) -> None:
    for i, code in enumerate(blocks()):
        pytester.makepyfile(**{f"test_readme_{i}": code})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=7)
