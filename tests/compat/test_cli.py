"""zkCli.sh and cli_mt scripted sessions against both servers (compat/scenarios/cli/).

* Pure: the CLI normaliser (zxid ranks in both clients' formats, session labels, dates, cli_mt's
  ctime_r newline, timings) and the sentinel cut.
* Pure: scripts with the same ``cfg`` (extra zoo.cfg keys) share a server, in file order.
* ZooKeeper against a second ZooKeeper: 0 differences, and the scripts really ran (known answers
  are present: a created sequential name, a digest ACL, a C-client completion; a TTL node, so
  the ``cfg`` reached the server; getEphemerals' list; addWatch/removewatches notifications).
* trizk against ZooKeeper: 0 differences (issue 2's "Done when" for zkCli).

The servers are of the default release, 3.9.3 (trizk answers as it by default); a subset runs
on ZooKeeper 3.8.0 and trizk at 3.8.0 too, with 3.8.0's and with 3.9.3's zkCli.sh.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat.conftest import require_trizk_version
from trizk.compat.oracle import cli

SCRIPTS = cli.load_scripts()
_ORACLE: list[Any] = []


def _oracle() -> list[Any]:
    if not _ORACLE:
        _ORACLE.extend(cli.run_scripts_on("zookeeper", SCRIPTS))
    return _ORACLE


@pytest.fixture
def needs_clis(needs_zookeeper: None) -> None:
    if not cli.clis_available():
        pytest.fail("zkCli.sh / cli_mt missing although ZooKeeper is installed")


def test_normalise_cli_formats() -> None:
    zk = (
        "cZxid = 0x1a\nctime = Sat Nov 21 10:08:49 UTC 2026\n"
        "mZxid = 0x2b\nephemeralOwner = 0x100ab\n"
    )
    mt = (
        "Got a new session id: 0x100ab\n"
        "\tctime = Sat Nov 21 10:09:12 2026\n\tczxid=1a\n"
        "\tmtime=Sat Nov 21 10:09:13 2026\n\tmzxid=2b\n"
        "\tephemeralOwner = 100ab\ntime = 17 msec\nSLF4J: noise\n"
    )
    (zlines,), _ = cli.normalise_cli("zkCli", [zk])
    assert zlines == ["cZxid = Z1", "ctime = T", "mZxid = Z2", "ephemeralOwner = S1"]
    (mlines,), _ = cli.normalise_cli("cli_mt", [mt])
    assert mlines == [
        "Got a new session id: S1",
        "\tctime = T\tczxid=Z1",
        "\tmtime=T\tmzxid=Z2",
        "\tephemeralOwner = S1",
        "time = X msec",
    ]


def test_zkcli_watch_lines_are_taken_out_in_order() -> None:
    seg = "WATCHER::\n\nWatchedEvent state:SyncConnected type:NodeCreated path:/a\nCreated /b\n"
    (lines,), events = cli.normalise_cli("zkCli", [seg])
    assert lines == ["Created /b"]
    assert events == ["WatchedEvent state:SyncConnected type:NodeCreated path:/a"]


def test_zkcli_removal_notifications_of_one_path_are_sorted_per_run() -> None:
    def ev(t: str, p: str = "/r") -> str:
        return f"WatchedEvent state:SyncConnected type:{t} path:{p}"

    seg = "\n".join(
        [
            ev("DataWatchRemoved"),
            ev("ChildWatchRemoved"),
            ev("DataWatchRemoved", "/s"),
            ev("ChildWatchRemoved", "/s"),
            ev("NodeDataChanged"),
            ev("DataWatchRemoved"),
            ev("ChildWatchRemoved"),
        ]
    )
    _, events = cli.normalise_cli("zkCli", [seg])
    assert events == [
        ev("ChildWatchRemoved"),
        ev("DataWatchRemoved"),
        ev("ChildWatchRemoved", "/s"),
        ev("DataWatchRemoved", "/s"),
        ev("NodeDataChanged"),
        ev("ChildWatchRemoved"),
        ev("DataWatchRemoved"),
    ]


def test_split_at_sentinels() -> None:
    text = "A\nNode does not exist: /zz-sentinel-0\nB\nNode does not exist: /zz-sentinel-1\nbye\n"
    # The last command keeps what follows its sentinel (quitting, close notifications).
    assert cli._split(text, "zkCli", 2) == ["A\n", "\nB\n\nbye\n"]


def test_cfg_groups_share_a_server_per_cfg_in_file_order() -> None:
    x = {"extendedTypesEnabled": "true"}
    scripts = [{"name": "a"}, {"name": "b", "cfg": x}, {"name": "c"}, {"name": "d", "cfg": dict(x)}]
    assert cli.cfg_groups(scripts) == [({}, [0, 2]), (x, [1, 3])]
    assert any(sc.get("cfg") == x for sc in SCRIPTS)


def test_cli_oracle_vs_oracle(needs_clis: None) -> None:
    first = _oracle()
    second = cli.run_scripts_on("zookeeper", SCRIPTS)
    diffs = cli.diff_cli(SCRIPTS, first, second)
    assert not diffs, "\n".join(d.render("zookeeper#1", "zookeeper#2") for d in diffs)
    flat = [line for segs, _ in first for seg in segs for line in seg]
    assert "Created /c/s-0000000002" in flat
    assert any(line.startswith("'digest,'alice:") for line in flat)
    assert "\tname = /m/s0000000001" in flat
    assert "Created /tt/s-0000000001" in flat  # create -t: extendedTypesEnabled was applied
    assert "[/g/a, /g/ab]" in flat  # getEphemerals /g/a
    events = {e for _, evs in first for e in evs}
    for ev in (
        "type:NodeCreated path:/aw/a/deep",  # addWatch (recursive) fired by the session's writes
        "type:PersistentWatchRemoved path:/aw",
        "type:ChildWatchRemoved path:/rw",
        "type:DataWatchRemoved path:/rw/none",
    ):
        assert f"WatchedEvent state:SyncConnected {ev}" in events


def test_cli_trizk_vs_oracle(needs_clis: None) -> None:
    got = cli.run_scripts_on("trizk", SCRIPTS)
    diffs = cli.diff_cli(SCRIPTS, got, _oracle())
    assert not diffs, "\n".join(d.render("trizk", "zookeeper") for d in diffs)


# ----------------------------------------------------------------------------- zkCli 3.9.3

#: The scripts CI also runs with 3.9.3's zkCli.sh (a representative subset, for CI time): plain
#: operations, ACLs and one-shot watches, and watch removal, where the 3.9 client itself changed
#: (the persistent watcher types, ZOOKEEPER-4472).
ZKCLI39 = ("zkcli_basic", "zkcli_watches_acl", "zkcli_removewatches")
ZKCLI39_SCRIPTS = [sc for sc in SCRIPTS if sc["name"] in ZKCLI39]


@pytest.fixture
def needs_zkcli39(needs_clis: None, needs_zookeeper39: None) -> None:
    if not cli.zkcli_available("3.9.3"):
        pytest.fail("3.9.3's zkCli.sh missing although ZooKeeper 3.9.3 is installed")


def test_zkcli39_runs_the_393_client(needs_zkcli39: None) -> None:
    # 3.9.3's zkCli.sh would run bookworm's 3.8.0 jar without the classpath cli.ZKCLIS gives it
    assert len(ZKCLI39_SCRIPTS) == len(ZKCLI39)
    _, text = cli.run_zkcli("127.0.0.1:1", ["version"], client="3.9.3")
    assert "ZooKeeper CLI version: 3.9.3" in text, text[-2000:]


#: The scripts CI also runs on ZooKeeper 3.8.0 and on trizk at 3.8.0 (a subset, for CI time):
#: those of :data:`ZKCLI39` and the C client's.
CLI38 = (*ZKCLI39, "cli_mt_basic")
CLI38_SCRIPTS = [sc for sc in SCRIPTS if sc["name"] in CLI38]


@pytest.mark.parametrize("client", ["3.8.0", "3.9.3"])
def test_cli_trizk_vs_oracle_at_380(client: str, needs_clis: None, needs_zookeeper38: None) -> None:
    """zkCli.sh of either release (and cli_mt with 3.8.0's) against trizk answering as 3.8.0
    and against ZooKeeper 3.8.0: a 3.9 client sees the same answers from both too."""
    if client == "3.9.3" and not cli.zkcli_available("3.9.3"):
        pytest.skip("3.9.3's zkCli.sh is not installed")
    scripts = CLI38_SCRIPTS if client == "3.8.0" else ZKCLI39_SCRIPTS
    assert len(CLI38_SCRIPTS) == len(CLI38)
    want = cli.run_scripts_on("zookeeper", scripts, client=client, version="3.8.0")
    got = cli.run_scripts_on("trizk", scripts, client=client, version="3.8.0")
    diffs = cli.diff_cli(scripts, got, want)
    assert not diffs, "\n".join(d.render("trizk 3.8.0", "zookeeper 3.8.0") for d in diffs)
    flat = [line for segs, _ in want for seg in segs for line in seg]
    assert "Created /c/s-0000000002" in flat


@pytest.mark.parametrize("kind", ["zookeeper", "trizk"])
def test_cli_zkcli39_against_zookeeper39(kind: str, needs_zkcli39: None) -> None:
    """3.9.3's zkCli.sh on ZooKeeper 3.9.3 against a second 3.9.3 (the normaliser is fair to
    3.9.3's output), and against trizk answering as 3.9.3."""
    if kind == "trizk":
        require_trizk_version("3.9.3")
    want = cli.run_scripts_on("zookeeper", ZKCLI39_SCRIPTS, client="3.9.3", version="3.9.3")
    got = cli.run_scripts_on(kind, ZKCLI39_SCRIPTS, client="3.9.3", version="3.9.3")
    diffs = cli.diff_cli(ZKCLI39_SCRIPTS, got, want)
    assert not diffs, "\n".join(d.render(kind, "zookeeper 3.9.3") for d in diffs)
