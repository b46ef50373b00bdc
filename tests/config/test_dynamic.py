"""Dynamic configuration files (server/config/dynamic.py, zoocfg's ``dynamicConfigFile``) and a
member's configurations (server/shell/ensemble/reconfig.py), pinned to what ZooKeeper 3.8.0
wrote for a 3-member ensemble with ``reconfigEnabled=true`` (captured from live members:
zoo.cfg as written → zoo.cfg.bak, zoo.cfg rewritten, zoo.cfg.dynamic.100000000). The live
comparison is tests/compat/test_reconfig_files.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from trizk.quorum.verifier import QuorumVerifier, parse_config_string
from trizk.server.config.dynamic import (
    dynamic_config_text,
    dynamic_file_name,
    next_file_name,
    static_config_text,
)
from trizk.server.config.zoocfg import (
    ConfigError,
    dynamic_entries,
    load_config,
    parse_config,
    version_from_filename,
)
from trizk.server.shell.ensemble.reconfig import MemberConfigs

# As written by the harness (compat/procs), then what ZooKeeper 3.8.0 made of it.
STATIC = (
    "tickTime=200\ninitLimit=10\nsyncLimit=5\nmaxSessionTimeout=120000\n"
    "admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n"
    "dataDir=/d/m1/data\nclientPort=48633\nclientPortAddress=127.0.0.1\nreconfigEnabled=true\n"
    "server.1=127.0.0.1:43609:42505;127.0.0.1:48633\n"
    "server.2=127.0.0.1:49681:38883;127.0.0.1:38549\n"
    "server.3=127.0.0.1:49635:52233;127.0.0.1:41169\n"
)
REWRITTEN = (
    "maxSessionTimeout=120000\ndataDir=/d/m1/data\n4lw.commands.whitelist=*\nsyncLimit=5\n"
    "reconfigEnabled=true\nadmin.enableServer=false\ninitLimit=10\ntickTime=200\n"
    "maxClientCnxns=0\ndynamicConfigFile=/d/m1/zoo.cfg.dynamic.100000000\n"
)
DYNAMIC = (
    "server.1=127.0.0.1:43609:42505:participant;127.0.0.1:48633\n"
    "server.2=127.0.0.1:49681:38883:participant;127.0.0.1:38549\n"
    "server.3=127.0.0.1:49635:52233:participant;127.0.0.1:41169"
)
CONFIG_NODE = DYNAMIC + "\nversion=100000000"


def bumped() -> QuorumVerifier:
    qv = parse_config(STATIC, myid="1").quorum
    assert qv is not None and qv.version == 0
    return qv.with_version(0x100000000)


def test_dynamic_file_text_is_zookeepers() -> None:
    qv = bumped()
    assert qv.to_string() == CONFIG_NODE
    assert dynamic_config_text(qv, keep_version=False) == DYNAMIC
    # the .next file keeps its version line, sorted with the others
    assert dynamic_config_text(qv, keep_version=True) == CONFIG_NODE


def test_static_file_is_rewritten_as_zookeeper_does() -> None:
    path = "/d/m1/zoo.cfg.dynamic.100000000"
    assert static_config_text(STATIC, path, erase_client=True) == REWRITTEN
    # a member whose client address came from clientPort keeps clientPort/clientPortAddress
    kept = static_config_text(STATIC, path, erase_client=False)
    assert "clientPort=48633\n" in kept and "clientPortAddress=127.0.0.1\n" in kept
    assert "server." not in kept and kept.endswith(f"dynamicConfigFile={path}\n")
    # an older dynamicConfigFile line and peerType are dropped
    again = static_config_text(
        REWRITTEN + "peerType=participant\n", "/x.dynamic.2", erase_client=True
    )
    assert again.count("dynamicConfigFile=") == 1 and "peerType" not in again


def test_file_names_and_versions() -> None:
    assert dynamic_file_name("/d/zoo.cfg", 0x100000000) == "/d/zoo.cfg.dynamic.100000000"
    assert next_file_name("/d/zoo.cfg") == "/d/zoo.cfg.dynamic.next"
    assert version_from_filename("zoo.cfg.dynamic.100000000") == "100000000"
    assert version_from_filename("zoo.cfg.dynamic.0") == "0"
    assert version_from_filename("zoo.cfg.dynamic") is None
    assert version_from_filename("dynamic") is None


def test_config_with_a_dynamic_file() -> None:
    c = parse_config(REWRITTEN, myid="1", dynamic=DYNAMIC, next_dynamic=None)
    assert c.reconfig_enabled
    assert c.dynamic_config_file == "/d/m1/zoo.cfg.dynamic.100000000"
    assert c.quorum is not None and c.quorum.to_string() == CONFIG_NODE
    # the client address comes from the member's own line (clientPort is gone from zoo.cfg)
    assert (c.client_port, c.client_port_address) == (48633, "127.0.0.1")
    assert c.last_seen_quorum is None
    nxt = DYNAMIC.replace("41169", "41170") + "\nversion=100000005"
    c = parse_config(REWRITTEN, myid="1", dynamic=DYNAMIC, next_dynamic=nxt)
    assert c.last_seen_quorum is not None and c.last_seen_quorum.version == 0x100000005


@pytest.mark.parametrize(
    ("static", "dynamic", "needle"),
    [
        (REWRITTEN + "server.4=h:1:2\n", DYNAMIC, "parameter: server.4 must be in a separate"),
        (REWRITTEN, DYNAMIC + "\nversion=1", "dynamic file shouldn't have version inside"),
        (REWRITTEN, DYNAMIC + "\ntickTime=2", "Unrecognised parameter: tickTime"),
        (REWRITTEN, None, "cannot read /d/m1/zoo.cfg.dynamic.100000000"),
    ],
)
def test_dynamic_file_errors(static: str, dynamic: str | None, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(static, myid="1", dynamic=dynamic)
    assert needle in str(err.value)


def test_dynamic_entries_take_the_version_from_the_name() -> None:
    es = dynamic_entries(DYNAMIC, "zoo.cfg.dynamic.1a")
    assert [(e.key, e.value) for e in es][-1] == ("version", "1a")
    assert all(e.key != "version" for e in dynamic_entries(DYNAMIC, "dyn"))


def test_load_config_reads_the_dynamic_and_next_files(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "myid").write_text("1")
    dyn = tmp_path / "zoo.cfg.dynamic.100000000"
    dyn.write_text(DYNAMIC)
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        REWRITTEN.replace("/d/m1/data", str(data)).replace(
            "/d/m1/zoo.cfg.dynamic.100000000", str(dyn)
        )
    )
    c = load_config(cfg)
    assert c.config_file == str(cfg)
    assert c.quorum is not None and c.quorum.version == 0x100000000
    (tmp_path / "zoo.cfg.dynamic.next").write_text(
        DYNAMIC.replace("41169", "41170") + "\nversion=100000005"
    )
    c = load_config(cfg)
    assert c.last_seen_quorum is not None and c.last_seen_quorum.version == 0x100000005


def test_member_configs_write_zookeepers_files(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "myid").write_text("1")
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(STATIC.replace("/d/m1/data", str(data)))
    qv = parse_config(cfg.read_text(), myid="1").quorum
    assert qv is not None
    configs = MemberConfigs(1, qv, reconfig_enabled=True, config_file=str(cfg))
    configs.start()
    assert (tmp_path / "zoo.cfg.bak").read_text() == cfg.read_text()
    candidate = configs.bump_candidate()
    assert candidate is qv
    new = candidate.with_version(0x100000000)
    seen = configs.see(new.to_string().encode())
    assert seen is not None and configs.last_seen.version == 0x100000000
    assert (tmp_path / "zoo.cfg.dynamic.next").read_text() == CONFIG_NODE
    assert configs.bump_candidate() is None
    assert configs.activate(configs.last_seen) is qv
    assert configs.committed_bytes == CONFIG_NODE.encode()
    dyn = tmp_path / "zoo.cfg.dynamic.100000000"
    assert dyn.read_text() == DYNAMIC
    assert not (tmp_path / "zoo.cfg.dynamic.next").exists()
    assert cfg.read_text() == REWRITTEN.replace("/d/m1/data", str(data)).replace(
        "/d/m1/zoo.cfg.dynamic.100000000", str(dyn.resolve())
    )
    # a version never goes back, and the same version changes nothing
    assert configs.activate(qv) is None and configs.activate(new) is None
    assert configs.see(qv.to_string().encode()) is not None  # stale: logged, as ZooKeeper
    # started again from the rewritten zoo.cfg: no backup, the same configuration
    (tmp_path / "zoo.cfg.bak").unlink()
    again = load_config(cfg)
    assert again.quorum is not None and again.quorum.to_string() == CONFIG_NODE
    MemberConfigs(1, again.quorum, reconfig_enabled=True, config_file=str(cfg)).start()
    assert not (tmp_path / "zoo.cfg.bak").exists()


def test_reconfig_disabled_changes_nothing(tmp_path: Path) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(STATIC)
    qv = parse_config_string(CONFIG_NODE.replace("100000000", "0"))
    configs = MemberConfigs(1, qv, config_file=str(cfg))
    configs.start()
    assert configs.bump_candidate() is None
    assert configs.see(CONFIG_NODE.encode()) is None
    assert configs.activate(bumped()) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zoo.cfg"]
