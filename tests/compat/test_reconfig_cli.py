"""``zkCli.sh reconfig`` (ZooKeeper 3.8.0's CLI) against a 3-member reconfig-enabled ensemble:
the transcript on trizk equals the one on ZooKeeper, normalised as compat's CLI comparison does
(ports, times, zxids ranked) and with each member's ports named. Members 1 and 3 start first
(3 leads, in both), zkCli talks to member 1 as the super user: ``config``; ``-remove 2``;
``-add`` it back; ``-members`` with all three; a stale ``-v``; a bad joiner; a bad ``-file``
-less option."""

from __future__ import annotations

import pytest

from tests.compat.conftest import require_zookeeper
from tests.shell.test_reconfig_ensemble import EXTRA, line
from trizk.compat.oracle.cli import normalise_cli, run_zkcli
from trizk.compat.procs.ensemble import ProcessEnsemble


def _transcript(kind: str) -> list[list[str]]:
    with ProcessEnsemble({1: kind, 2: kind, 3: kind}, extra=EXTRA, start=False) as ens:
        ens.start(1)
        ens.start(3)
        ens.wait_serving(90.0, members=[1, 3])
        ens.start(2)
        ens.wait_serving(90.0)
        assert ens.leader() == 3
        two, all3 = line(ens, 2), ",".join(line(ens, s) for s in (1, 2, 3))
        script = [
            "addauth digest super:test",
            "config",
            "reconfig -remove 2",
            f"reconfig -add {two}",
            f"reconfig -members {all3}",
            "reconfig -remove 2 -v 1",
            "reconfig -add server.9=127.0.0.1:1",
            "config -s",
        ]
        segments, _raw = run_zkcli(ens.hosts([1]), script)
        out, _events = normalise_cli("zkCli", segments)
        for sid, m in ens.members.items():
            a = m.addrs
            for name, port in (("q", a.quorum_port), ("e", a.election_port), ("c", a.client_port)):
                out = [[x.replace(f":{port}", f":<{name}{sid}>") for x in seg] for seg in out]
        return out


@pytest.mark.slow
def test_zkcli_reconfig_transcript_as_zookeeper() -> None:
    require_zookeeper()
    want = _transcript("zookeeper")
    assert any("version=" in x for x in want[2])
    assert _transcript("trizk") == want
