"""Read-only mode against Apache ZooKeeper: the same scenario (tests/readonly_helpers.py) on a
3-member ZooKeeper ensemble (3.8.0 and 3.9.3), a 3-member trizk ensemble and mixed ones (with
ZooKeeper 3.8.0 or 3.9.3 members) whose cut-off member is trizk, each started as ZooKeeper's
users start one (``-Dreadonlymode.enabled=true``, ``localSessionsEnabled=true`` as kazoo's
harness sets them) behind link proxies. Every observation (the four-letter words, raw
handshakes, a kazoo read-only client's reads and NotReadOnlyCallErrors, a plain client's
refusal, the way back to read-write) must equal ZooKeeper's; ZooKeeper 3.8.0's is also the
expectation tests/shell/test_readonly.py pins. Without ``localSessionsEnabled`` the raw
handshakes of a cut-off member are compared too (a new session is refused NOTREADONLY there).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat.conftest import require_zookeeper
from tests.readonly_helpers import (
    DEADLINE,
    LOCAL_SESSIONS,
    READ_ONLY,
    observe,
    observe_handshakes,
)
from tests.shell.test_readonly import EXPECTED
from trizk.compat.procs.ensemble import ProcessEnsemble

pytestmark = pytest.mark.slow


def _run(
    kinds: dict[int, str], member: int | None = None, version: str = "3.8.0"
) -> dict[str, Any]:
    """The scenario on ``member`` (default: a follower) of an ensemble of ``kinds`` (its
    ZooKeeper members of release ``version``)."""
    versions = {sid: version for sid, kind in kinds.items() if kind == "zookeeper"}
    with ProcessEnsemble(
        kinds, links=True, extra=LOCAL_SESSIONS, system_properties=READ_ONLY, versions=versions
    ) as ens:
        assert ens.links is not None
        links = ens.links
        modes = ens.wait_serving(DEADLINE)
        if member is None:
            member = next(s for s, m in modes.items() if m == "follower")
        chosen = member
        return observe(ens.port(chosen), ens.hosts(), lambda: links.isolate(chosen), links.heal)


def test_zookeeper_shows_what_trizk_pins() -> None:
    require_zookeeper()
    assert _run({1: "zookeeper", 2: "zookeeper", 3: "zookeeper"}) == EXPECTED


def test_trizk_processes_show_what_zookeeper_shows() -> None:
    assert _run({1: "trizk", 2: "trizk", 3: "trizk"}) == EXPECTED


@pytest.mark.parametrize("version", ["3.8.0", "3.9.3"])
def test_a_cut_off_trizk_member_of_a_mixed_ensemble(version: str) -> None:
    require_zookeeper(version)
    assert _run({1: "zookeeper", 2: "trizk", 3: "zookeeper"}, 2, version) == EXPECTED


def test_zookeeper_39_shows_the_same() -> None:
    require_zookeeper("3.9.3")
    assert _run({1: "zookeeper", 2: "zookeeper", 3: "zookeeper"}, version="3.9.3") == EXPECTED


#: what ZooKeeper 3.8.0 answers without local sessions: a new session's createSession is not
#: local, so ReadOnlyRequestProcessor refuses it with a bare ReplyHeader (the connection left
#: open); a reconnect of any session that is not global is valid (touchSession takes any)
WITHOUT_LOCAL_SESSIONS = {
    "new session": ("reply", -119, "open"),
    "not read-only": ("closed",),
    "reconnect of a closed session": ("connect", True, b"\x01", "open"),
    "reconnect of a live global session": ("closed",),
}


@pytest.mark.parametrize("kind", ["zookeeper", "trizk"])
def test_without_local_sessions(kind: str) -> None:
    if kind == "zookeeper":
        require_zookeeper()
    kinds = dict.fromkeys((1, 2, 3), kind)
    with ProcessEnsemble(kinds, links=True, system_properties=READ_ONLY) as ens:
        assert ens.links is not None
        links = ens.links
        modes = ens.wait_serving(DEADLINE)
        member = next(s for s, m in modes.items() if m == "follower")
        seen = observe_handshakes(ens.port(member), lambda: links.isolate(member))
    assert seen == WITHOUT_LOCAL_SESSIONS
