"""``trizk-docker-entrypoint``: the official ZooKeeper image's ``docker-entrypoint.sh`` for trizk.

Theory of operation
===================
Deployments configure the official ``zookeeper`` image (docker-library, 3.8) with ``ZOO_*``
variables; its entry point turns them into ``$ZOO_CONF_DIR/zoo.cfg`` and ``$ZOO_DATA_DIR/myid``
and then runs the command (``zkServer.sh start-foreground`` by default). This entry point does
the same, line for line, so the same variables, volumes and command give the same files:

* the config is written only when ``$ZOO_CONF_DIR/zoo.cfg`` does not exist: ``dataDir``,
  ``dataLogDir``, ``tickTime``, ``initLimit``, ``syncLimit``, ``autopurge.snapRetainCount``,
  ``autopurge.purgeInterval``, ``maxClientCnxns``, ``standaloneEnabled``,
  ``admin.enableServer``, then each word of ``ZOO_SERVERS`` (default
  ``server.1=localhost:2888:3888;2181``, whose ``;2181`` is the client port, see
  :func:`trizk.server.config.zoocfg.config_from_entries`), ``4lw.commands.whitelist`` when
  ``ZOO_4LW_COMMANDS_WHITELIST`` is set, and each word of ``ZOO_CFG_EXTRA``;
* ``myid`` is written only when missing, ``ZOO_MY_ID`` or 1;
* unset variables take the image's ``ENV`` defaults (:data:`IMAGE_DEFAULTS`); like the shell
  script, a variable set to the empty string stays empty;
* started as root with the server command, the directories are handed to the ``zookeeper``
  user and the process drops to it (the script's ``chown -R`` + ``gosu``) when that user exists;
* the command ``zkServer.sh [start-foreground]`` runs ``trizk-server $ZOO_CONF_DIR/zoo.cfg``;
  any other command is run as given (``exec "$@"``).

The pure part is :func:`zoo_cfg`; :func:`prepare` touches the files; :func:`main` execs.
"""

from __future__ import annotations

import os
import pwd
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["IMAGE_DEFAULTS", "main", "prepare", "server_command", "zoo_cfg"]

#: The official image's ``ENV`` (Dockerfile of zookeeper:3.8).
IMAGE_DEFAULTS: Mapping[str, str] = {
    "ZOO_CONF_DIR": "/conf",
    "ZOO_DATA_DIR": "/data",
    "ZOO_DATA_LOG_DIR": "/datalog",
    "ZOO_LOG_DIR": "/logs",
    "ZOO_TICK_TIME": "2000",
    "ZOO_INIT_LIMIT": "5",
    "ZOO_SYNC_LIMIT": "2",
    "ZOO_AUTOPURGE_PURGEINTERVAL": "0",
    "ZOO_AUTOPURGE_SNAPRETAINCOUNT": "3",
    "ZOO_MAX_CLIENT_CNXNS": "60",
    "ZOO_STANDALONE_ENABLED": "true",
    "ZOO_ADMINSERVER_ENABLED": "true",
}
DEFAULT_SERVERS = "server.1=localhost:2888:3888;2181"
SERVER_COMMANDS = ("zkServer.sh",)


def _env(env: Mapping[str, str], name: str) -> str:
    return env.get(name, IMAGE_DEFAULTS.get(name, ""))


def zoo_cfg(env: Mapping[str, str]) -> str:
    """The zoo.cfg text ``docker-entrypoint.sh`` writes for ``env`` (words split on blanks,
    as the shell's unquoted ``for x in $VAR``)."""
    lines = [
        f"dataDir={_env(env, 'ZOO_DATA_DIR')}",
        f"dataLogDir={_env(env, 'ZOO_DATA_LOG_DIR')}",
        f"tickTime={_env(env, 'ZOO_TICK_TIME')}",
        f"initLimit={_env(env, 'ZOO_INIT_LIMIT')}",
        f"syncLimit={_env(env, 'ZOO_SYNC_LIMIT')}",
        f"autopurge.snapRetainCount={_env(env, 'ZOO_AUTOPURGE_SNAPRETAINCOUNT')}",
        f"autopurge.purgeInterval={_env(env, 'ZOO_AUTOPURGE_PURGEINTERVAL')}",
        f"maxClientCnxns={_env(env, 'ZOO_MAX_CLIENT_CNXNS')}",
        f"standaloneEnabled={_env(env, 'ZOO_STANDALONE_ENABLED')}",
        f"admin.enableServer={_env(env, 'ZOO_ADMINSERVER_ENABLED')}",
    ]
    lines += (env.get("ZOO_SERVERS") or DEFAULT_SERVERS).split()
    if env.get("ZOO_4LW_COMMANDS_WHITELIST"):
        lines.append(f"4lw.commands.whitelist={env['ZOO_4LW_COMMANDS_WHITELIST']}")
    lines += env.get("ZOO_CFG_EXTRA", "").split()
    return "".join(line + "\n" for line in lines)


def prepare(env: Mapping[str, str]) -> Path:
    """Write zoo.cfg and myid where missing (creating the directories); the config path."""
    conf = Path(_env(env, "ZOO_CONF_DIR"))
    data = Path(_env(env, "ZOO_DATA_DIR"))
    for d in (conf, data, Path(_env(env, "ZOO_DATA_LOG_DIR"))):
        d.mkdir(parents=True, exist_ok=True)
    cfg = conf / "zoo.cfg"
    if not cfg.is_file():
        # the script appends (>>) to a file that does not exist yet
        with open(cfg, "a") as f:
            f.write(zoo_cfg(env))
    myid = data / "myid"
    if not myid.is_file():
        myid.write_text(f"{env.get('ZOO_MY_ID') or 1}\n")
    return cfg


def server_command(argv: Sequence[str], cfg: Path) -> list[str]:
    """``zkServer.sh ...`` becomes ``trizk-server <zoo.cfg>``; other commands run unchanged."""
    if argv and Path(argv[0]).name in SERVER_COMMANDS:
        return [shutil.which("trizk-server") or "trizk-server", str(cfg)]
    return list(argv)


def _drop_privileges(env: Mapping[str, str]) -> None:
    """``chown -R zookeeper`` the data, log and conf directories, then become that user."""
    try:
        user = pwd.getpwnam("zookeeper")
    except KeyError:
        return
    for name in ("ZOO_DATA_DIR", "ZOO_DATA_LOG_DIR", "ZOO_LOG_DIR"):
        top = Path(_env(env, name))
        if not top.exists():
            continue
        for root, dirs, files in os.walk(top):
            for n in (root, *(os.path.join(root, x) for x in dirs + files)):
                os.chown(n, user.pw_uid, user.pw_gid)
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)


def main(
    argv: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    execvp: Callable[[str, list[str]], object] = os.execvp,
    drop_privileges: Callable[[Mapping[str, str]], None] | None = None,
) -> int:
    """Prepare the files and exec the command; ``execvp``/``drop_privileges`` are for tests
    (an in-process test run as root must not become the zookeeper user)."""
    args = list(sys.argv[1:] if argv is None else argv) or ["zkServer.sh", "start-foreground"]
    environ = os.environ if env is None else env
    cfg = prepare(environ)
    command = server_command(args, cfg)
    if command != args and os.getuid() == 0:
        (drop_privileges or _drop_privileges)(environ)
    sys.stdout.flush()
    execvp(command[0], command)
    return 0  # only reached with a test's execvp


if __name__ == "__main__":
    raise SystemExit(main())
