"""What ``zktest-mt`` says about each test, and two runs side by side (pure).

The binary's progress listener (CppUnit's ``BriefTestProgressListener`` plus the suite's
``TimingListener``, ``tests/TestDriver.cc``) writes to standard output, for each test::

    Suite::testName : elapsed 1011 : OK          (passed)
    Suite::testName : assertion : elapsed 12     (an assertion failed)
    Suite::testName : error : elapsed 12         (an exception escaped)

but the client library's log lines (``Log Message Received: ...``, the suite's own logger)
and the tests' ``printf`` land in the same stream, between the name and the outcome and even
glued to the name (``TestReconfigServer::testNonIncrementalStarting``: the test printed
"Starting" right after its name). So the parser knows the test names beforehand (every
``CPPUNIT_TEST(name)`` of every ``CPPUNIT_TEST_SUITE(Suite)`` in the sources: a superset of
what a build registers, whatever its ``#ifdef``s) and reads the stream as a sequence of
name starts and outcomes: an outcome belongs to the last name started. A name started
without an outcome is ``crashed`` when it is the last of a run that ended abnormally (the
binary aborts when an assertion fails in a client thread) and ``no outcome`` otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PASSED = "passed"
FAILED = "failed"  # an assertion failed
ERROR = "error"  # an exception escaped
CRASHED = "crashed"  # the binary died during the test
NO_OUTCOME = "no outcome"

_SUITE = re.compile(r"CPPUNIT_TEST_SUITE\(\s*(\w+)\s*\)")
_TEST = re.compile(r"CPPUNIT_TEST\(\s*(\w+)\s*\)")
_END = "CPPUNIT_TEST_SUITE_END"
_OUTCOME = re.compile(r" : (assertion|error)\b| : elapsed \d+ : OK")


def test_names(sources: Iterable[str]) -> list[str]:
    """``Suite::test`` for every test declared in the given C++ source texts, in order."""
    names: list[str] = []
    for text in sources:
        suite: str | None = None
        for line in text.splitlines():
            m = _SUITE.search(line)
            if m:
                suite = m.group(1)
                continue
            if _END in line:
                suite = None
                continue
            m = _TEST.search(line)
            if m and suite is not None:
                names.append(f"{suite}::{m.group(1)}")
    return names


def suite_of(name: str) -> str:
    return name.split("::", 1)[0]


def parse(output: str, names: Iterable[str], *, ended_normally: bool) -> dict[str, str]:
    """The outcome of every test ``output`` shows started, by name (see the module docstring)."""
    known = sorted(set(names), key=len, reverse=True)  # longest first: testX before test
    if not known:
        return {}
    starts = re.compile("|".join(re.escape(n) for n in known))
    events: list[tuple[int, str, str]] = []
    for m in starts.finditer(output):
        events.append((m.start(), "start", m.group(0)))
    for m in _OUTCOME.finditer(output):
        kind = m.group(1)
        outcome = PASSED if kind is None else FAILED if kind == "assertion" else ERROR
        events.append((m.start(), "outcome", outcome))
    events.sort()
    results: dict[str, str] = {}
    current: str | None = None
    for _, kind, value in events:
        if kind == "start":
            if current is not None and current not in results:
                results[current] = NO_OUTCOME
            current = value
        elif current is not None and current not in results:
            results[current] = value
    if current is not None and current not in results:
        results[current] = NO_OUTCOME if ended_normally else CRASHED
    return results


@dataclass(frozen=True)
class Comparison:
    """Two result sets by test name: ZooKeeper's and trizk's."""

    zookeeper: Mapping[str, str]
    trizk: Mapping[str, str]

    def names(self) -> list[str]:
        seen = dict.fromkeys([*self.zookeeper, *self.trizk])
        return list(seen)

    def both(self) -> list[str]:
        return [n for n in self.names() if self._ok(self.zookeeper, n) and self._ok(self.trizk, n)]

    def only_zookeeper(self) -> list[str]:
        """Passed on ZooKeeper, not on trizk: what trizk must fix."""
        return [
            n for n in self.names() if self._ok(self.zookeeper, n) and not self._ok(self.trizk, n)
        ]

    def only_trizk(self) -> list[str]:
        return [
            n for n in self.names() if self._ok(self.trizk, n) and not self._ok(self.zookeeper, n)
        ]

    def neither(self) -> list[str]:
        return [
            n
            for n in self.names()
            if not self._ok(self.zookeeper, n) and not self._ok(self.trizk, n)
        ]

    @staticmethod
    def _ok(results: Mapping[str, str], name: str) -> bool:
        return results.get(name) == PASSED

    def table(self) -> str:
        """One line per test: name, ZooKeeper's outcome, trizk's; then the four counts."""
        rows = self.names()
        width = max((len(n) for n in rows), default=4)
        lines = [f"{'test':<{width}}  {'zookeeper':<10}  trizk"]
        for n in rows:
            lines.append(
                f"{n:<{width}}  {self.zookeeper.get(n, 'not run'):<10}  "
                f"{self.trizk.get(n, 'not run')}"
            )
        lines.append(
            f"passed on both: {len(self.both())}, only on ZooKeeper: "
            f"{len(self.only_zookeeper())}, only on trizk: {len(self.only_trizk())}, "
            f"on neither: {len(self.neither())}"
        )
        return "\n".join(lines)
