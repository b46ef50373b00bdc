"""``trizk-docker-entrypoint`` on a temporary root (no container runtime): the files the
official image's docker-entrypoint.sh writes, written only when missing, the command run, and
a real server started from them answering the probes written for ZooKeeper's image."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from trizk.server.config import docker
from trizk.server.config.zoocfg import load_config
from trizk.testing.ports import free_port
from trizk.testing.probes import handshake_ok
from trizk.testing.processes import stop_process


def _env(root: Path, **extra: str) -> dict[str, str]:
    env = {
        "ZOO_CONF_DIR": str(root / "conf"),
        "ZOO_DATA_DIR": str(root / "data"),
        "ZOO_DATA_LOG_DIR": str(root / "datalog"),
        "ZOO_LOG_DIR": str(root / "logs"),
    }
    env.update(extra)
    return env


def test_default_config_is_the_official_images(tmp_path: Path) -> None:
    env = _env(tmp_path)
    calls: list[tuple[str, list[str]]] = []
    dropped: list[object] = []
    assert (
        docker.main(
            [], env=env, execvp=lambda f, a: calls.append((f, a)), drop_privileges=dropped.append
        )
        == 0
    )
    # as root, the server command runs as the zookeeper user (chown + gosu in the script)
    assert dropped == ([env] if os.getuid() == 0 else [])
    cfg = tmp_path / "conf" / "zoo.cfg"
    # what docker-entrypoint.sh of zookeeper:3.8 writes with the image's ENV
    assert cfg.read_text() == (
        f"dataDir={tmp_path}/data\n"
        f"dataLogDir={tmp_path}/datalog\n"
        "tickTime=2000\n"
        "initLimit=5\n"
        "syncLimit=2\n"
        "autopurge.snapRetainCount=3\n"
        "autopurge.purgeInterval=0\n"
        "maxClientCnxns=60\n"
        "standaloneEnabled=true\n"
        "admin.enableServer=true\n"
        "server.1=localhost:2888:3888;2181\n"
    )
    assert (tmp_path / "data" / "myid").read_text() == "1\n"
    assert (tmp_path / "datalog").is_dir()
    ((_, argv),) = calls
    assert argv[1:] == [str(cfg)] and Path(argv[0]).name == "trizk-server"
    # the server line's ";2181" is the client port, as QuorumPeerConfig.setupClientPort reads it
    config = load_config(cfg)
    assert (config.client_port, config.client_port_address) == (2181, None)
    assert config.tick_time == 2000 and config.snap_retain_count == 3


def test_variables_and_files_written_only_when_missing(tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        ZOO_MY_ID="3",
        ZOO_SERVERS="server.1=a:2888:3888;2181 server.3=c:2888:3888;127.0.0.1:2183",
        ZOO_TICK_TIME="500",
        ZOO_INIT_LIMIT="10",
        ZOO_SYNC_LIMIT="4",
        ZOO_MAX_CLIENT_CNXNS="0",
        ZOO_STANDALONE_ENABLED="false",
        ZOO_ADMINSERVER_ENABLED="false",
        ZOO_AUTOPURGE_PURGEINTERVAL="1",
        ZOO_AUTOPURGE_SNAPRETAINCOUNT="5",
        ZOO_4LW_COMMANDS_WHITELIST="srvr,ruok,mntr",
        ZOO_CFG_EXTRA="metricsProvider.httpPort=7001 globalOutstandingLimit=50",
    )
    docker.main(["true"], env=env, execvp=lambda f, a: None)
    text = (tmp_path / "conf" / "zoo.cfg").read_text().splitlines()
    assert text[2:] == [
        "tickTime=500",
        "initLimit=10",
        "syncLimit=4",
        "autopurge.snapRetainCount=5",
        "autopurge.purgeInterval=1",
        "maxClientCnxns=0",
        "standaloneEnabled=false",
        "admin.enableServer=false",
        "server.1=a:2888:3888;2181",
        "server.3=c:2888:3888;127.0.0.1:2183",
        "4lw.commands.whitelist=srvr,ruok,mntr",
        "metricsProvider.httpPort=7001",
        "globalOutstandingLimit=50",
    ]
    assert (tmp_path / "data" / "myid").read_text() == "3\n"
    config = load_config(tmp_path / "conf" / "zoo.cfg")
    assert (config.client_port, config.client_port_address) == (2183, "127.0.0.1")
    # a second start (new variables) keeps both files
    calls: list[list[str]] = []
    docker.main(["echo", "hi"], env={**env, "ZOO_MY_ID": "9", "ZOO_TICK_TIME": "1"},
                execvp=lambda f, a: calls.append(a))  # fmt: skip
    assert (tmp_path / "conf" / "zoo.cfg").read_text().splitlines()[2] == "tickTime=500"
    assert (tmp_path / "data" / "myid").read_text() == "3\n"
    assert calls == [["echo", "hi"]]  # other commands run as given


def test_the_image_starts_a_server_probes_can_use(tmp_path: Path) -> None:
    client, adm = free_port(), free_port()
    env = {
        **os.environ,
        **_env(
            tmp_path,
            ZOO_SERVERS=f"server.1=localhost:2888:3888;127.0.0.1:{client}",
            ZOO_4LW_COMMANDS_WHITELIST="*",
            ZOO_CFG_EXTRA=f"admin.serverAddress=127.0.0.1 admin.serverPort={adm}",
        ),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    log = open(tmp_path / "out.log", "wb")
    # the command as given (not zkServer.sh): a test run as root must not drop to the
    # zookeeper user, who cannot enter pytest's private temporary directory
    cfg = tmp_path / "conf" / "zoo.cfg"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trizk.server.config.docker",
            sys.executable,
            "-m",
            "trizk.server",
            str(cfg),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    log.close()
    try:
        deadline = time.monotonic() + 30
        while not handshake_ok("127.0.0.1", client, timeout=2.0):
            assert proc.poll() is None, (tmp_path / "out.log").read_text()
            assert time.monotonic() < deadline, "server not ready"
            time.sleep(0.05)  # polling interval of a bounded readiness loop
        with urllib.request.urlopen(f"http://127.0.0.1:{adm}/commands/ruok", timeout=10) as r:
            assert json.loads(r.read()) == {"command": "ruok", "error": None}
        out = (tmp_path / "out.log").read_text()
        assert f"binding to port /127.0.0.1:{client}" in out
        assert f"Started AdminServer on address 127.0.0.1, port {adm}" in out
    finally:
        stop_process(proc, 10)


@pytest.mark.parametrize("name", ["zkServer.sh", "/apache-zookeeper-3.8.0-bin/bin/zkServer.sh"])
def test_zkserver_sh_is_trizk_server(name: str) -> None:
    cmd = docker.server_command([name, "start-foreground"], Path("/conf/zoo.cfg"))
    assert cmd[1:] == ["/conf/zoo.cfg"]
