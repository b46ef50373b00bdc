"""``trizk.zookeeperVersion``: the ZooKeeper release trizk answers as (3.8.0 or 3.9.3), read from
zoo.cfg or ``-D``, refused when unknown, and shown where ZooKeeper shows its own version (the
live servers' strings are compared in tests/compat/test_zookeeper39_answers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trizk.server.common import release
from trizk.server.common.coreconfig import CoreConfig
from trizk.server.config.zoocfg import ConfigError, ServerConfig, parse_config
from trizk.server.ops import admin, fourlw, status

CFG = "dataDir=/tmp/zk\nclientPort=2181\n"


def test_default_and_both_releases() -> None:
    # the default is the current release line (issue 27)
    assert parse_config(CFG).zookeeper_version == release.DEFAULT_RELEASE == "3.9.3"
    for v in release.RELEASES:
        assert parse_config(CFG + f"trizk.zookeeperVersion = {v}\n").zookeeper_version == v
    # -D wins over the file, as every -D option does
    cfg = parse_config(
        CFG + "trizk.zookeeperVersion=3.8.0\n", properties={"trizk.zookeeperVersion": "3.9.3"}
    )
    assert cfg.zookeeper_version == "3.9.3"
    # trizk's own key is no ZooKeeper property and no unsupported key
    cfg = parse_config(CFG + "trizk.zookeeperVersion=3.9.3\n")
    assert not cfg.unsupported and not any("trizk" in k for k in cfg.properties)


@pytest.mark.parametrize("bad", ["3.9", "3.7.1", "", "latest", "3.9.3-1"])
def test_unknown_release_is_an_error_naming_the_key(bad: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(CFG + f"trizk.zookeeperVersion={bad}\n")
    assert exc.value.line_no == 3
    assert "trizk.zookeeperVersion" in str(exc.value) and "3.8.0, 3.9.3" in str(exc.value)
    with pytest.raises(ConfigError, match=r"-D trizk\.zookeeperVersion"):
        parse_config(CFG, properties={"trizk.zookeeperVersion": bad})


def test_core_config_follows_it() -> None:
    assert CoreConfig().zk39
    assert CoreConfig(zookeeper_version="3.9.3").zk39
    assert not CoreConfig(zookeeper_version="3.8.0").zk39


def _view(tmp_path: Path, version: str) -> status.SimpleView:
    cfg = ServerConfig.create(tmp_path, clientPort=2181, **{release.PROPERTY: version})
    return status.SimpleView(config=cfg)


@pytest.mark.parametrize("version", release.RELEASES)
def test_version_strings_follow_the_release(tmp_path: Path, version: str) -> None:
    full = f"{version}-trizk-"
    v = _view(tmp_path, version)
    assert status.server_version(v).startswith(full)
    for word in ("srvr", "stat"):
        first = fourlw.respond(word, v).decode().splitlines()[0]
        assert first.startswith(f"Zookeeper version: {full}")
    envi = fourlw.respond("envi", v).decode().splitlines()
    assert envi[1].startswith(f"zookeeper.version={full}")
    mntr = fourlw.respond("mntr", v).decode().splitlines()
    assert mntr[0].startswith(f"zk_version\t{full}")
    ctx = admin.AdminContext()
    assert str(admin.run_command("srvr", v, ctx)["version"]).startswith(full)
    assert str(admin.run_command("envi", v, ctx)["zookeeper.version"]).startswith(full)
    assert str(admin.run_command("mntr", v, ctx)["version"]).startswith(full)


def test_snapshot_trailer_follows_the_release(tmp_path: Path) -> None:
    from trizk.server.shell.persistence import PersistenceSettings

    def settings(**keys: str) -> PersistenceSettings:
        return PersistenceSettings.from_config(
            ServerConfig.create(tmp_path, clientPort=2181, **keys)
        )

    assert settings().last_zxid_trailer  # the default release, 3.9.3
    assert not settings(**{release.PROPERTY: "3.8.0"}).last_zxid_trailer  # 3.8.0 writes none
    v39 = {release.PROPERTY: "3.9.3"}
    assert settings(**v39).last_zxid_trailer  # 3.9: on by default
    off = {**v39, "serializeLastProcessedZxid.enabled": "false"}
    assert not settings(**off).last_zxid_trailer
