"""The AdminServer's pure parts: settings, the command table, CommandResponse.toMap order,
Jackson's layout and the HTTP routing (facts captured from ZooKeeper 3.8.0's Jetty server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trizk.server.config.zoocfg import ServerConfig
from trizk.server.ops import admin, fourlw, status

CTX = admin.AdminContext()


def view(tmp_path: Path, **kw: object) -> status.SimpleView:
    return status.SimpleView(config=ServerConfig.create(tmp_path, clientPort=2181), **kw)  # type: ignore[arg-type]


def test_settings_defaults_and_java_parsing(tmp_path: Path) -> None:
    s = admin.AdminSettings.from_config(ServerConfig.create(tmp_path, clientPort=1))
    assert s == admin.AdminSettings(True, "0.0.0.0", 8080, 30000, "/commands")
    cfg = ServerConfig.create(
        tmp_path,
        clientPort=1,
        **{
            "admin.enableServer": "FALSE",  # only exactly "false" turns it off
            "admin.serverPort": "x12",  # Integer.getInteger: the default
            "admin.serverAddress": "127.0.0.1",
            "admin.commandURL": "/cmd",
            "admin.idleTimeout": "500",
        },
    )
    assert admin.AdminSettings.from_config(cfg) == admin.AdminSettings(
        True, "127.0.0.1", 8080, 500, "/cmd"
    )
    off = ServerConfig.create(tmp_path, clientPort=1, **{"admin.enableServer": "false"})
    assert not admin.AdminSettings.from_config(off).enabled


def test_every_zookeeper_command_and_alias_is_registered() -> None:
    names = {n for c in admin.COMMANDS if not c.since_39 for n in c.names}
    expected = {
        "connection_stat_reset", "crst", "configuration", "conf", "config", "connections",
        "cons", "hash", "dirs", "dump", "environment", "env", "envi", "get_trace_mask", "gtmk",
        "initial_configuration", "icfg", "is_read_only", "isro", "last_snapshot", "lsnp",
        "leader", "lead", "monitor", "mntr", "observer_connection_stat_reset", "orst", "ruok",
        "set_trace_mask", "stmk", "server_stats", "srvr", "stats", "stat", "stat_reset", "srst",
        "observers", "obsr", "system_properties", "sysp", "voting_view", "watches", "wchc",
        "watches_by_path", "wchp", "watch_summary", "wchs", "zabstate",
    }  # fmt: skip
    assert names == expected
    assert len([c.primary for c in admin.COMMANDS if not c.since_39]) == 26
    # ZooKeeper 3.9 adds snapshot/snap and restore/rest
    assert {n for c in admin.COMMANDS if c.since_39 for n in c.names} == {
        "snapshot",
        "snap",
        "restore",
        "rest",
    }


def test_command_list_is_zookeepers_html() -> None:
    text = admin.command_links("/commands")
    assert text.startswith('<a href="/commands/configuration">configuration</a>\n<br/>\n')
    assert text.endswith('<a href="/commands/zabstate">zabstate</a>\n<br/>\n')
    assert len(text) == 1424  # Content-Length of ZooKeeper 3.8.0's page


def test_to_map_order_and_errors(tmp_path: Path) -> None:
    v = view(tmp_path)
    assert list(admin.run_command("ruok", v, CTX)) == ["command", "error"]
    # a member named "error" keeps its first place (CommandResponse.toMap)
    assert admin.run_command("lead", v, CTX) == {
        "error": "server is not initialized",
        "command": "leader",
    }
    assert list(admin.run_command("lead", v, CTX)) == ["error", "command"]
    assert admin.run_command("nope", v, CTX) == {
        "command": "nope",
        "error": "Unknown command: nope",
    }
    assert admin.run_command("stmk", v, CTX, {"traceMask": "12"})["tracemask"] == 12
    assert admin.run_command("stmk", v, CTX, {"traceMask": "0x1"})["error"] == (
        "setTraceMask requires long traceMask argument, got 0x1"
    )
    # not serving: the name as asked; commands without serverRequired still answer
    down = view(tmp_path, serving=False)
    assert admin.run_command("srvr", down, CTX) == {
        "command": "srvr",
        "error": "This ZooKeeper instance is not currently serving requests",
    }
    assert admin.run_command("gtmk", down, CTX)["tracemask"] == 306


def test_monitor_is_mntr_typed(tmp_path: Path) -> None:
    v = view(tmp_path, latency=status.LatencyStats(5, 11, 0, 5))
    m = admin.run_command("mntr", v, CTX)
    text = fourlw.respond("mntr", v).decode()
    keys = [line.split("\t")[0].removeprefix("zk_") for line in text.splitlines()]
    assert list(m)[:-2] == keys
    assert m["avg_latency"] == 2.2 and isinstance(m["min_latency"], int)
    assert m["command"] == "monitor"


def test_jackson_layout() -> None:
    obj = {
        "a": [{"x": 1, "y": 0.0}],
        "b": [],
        "c": {},
        "d": {"k": [1, 2]},
        "e": None,
        "f": 'q"\n\x01é',
        "g": True,
    }
    assert admin.jackson_json(obj) == (
        "{\n"
        '  "a" : [ {\n'
        '    "x" : 1,\n'
        '    "y" : 0.0\n'
        "  } ],\n"
        '  "b" : [ ],\n'
        '  "c" : { },\n'
        '  "d" : {\n'
        '    "k" : [ 1, 2 ]\n'
        "  },\n"
        '  "e" : null,\n'
        '  "f" : "q\\"\\n\\u0001é",\n'
        '  "g" : true\n'
        "}"
    )
    assert admin.jackson_json({"big": 1e7, "small": 2.2}) == (
        '{\n  "big" : 1.0E7,\n  "small" : 2.2\n}'
    )


@pytest.mark.parametrize(
    ("method", "target", "status", "command"),
    [
        ("GET", "/commands", 200, None),
        ("GET", "/commands/", 200, None),
        ("GET", "/commands?x=1", 200, None),
        ("GET", "/commands/ruok", 200, "ruok"),
        ("HEAD", "/commands/ruok", 200, "ruok"),
        ("GET", "/commands/%72uok", 200, "ruok"),
        ("GET", "/commands/ruok/x", 200, "ruok/x"),
        ("GET", "/", 404, None),
        ("GET", "/commandsx", 404, None),
        ("POST", "/commands/ruok", 405, None),
        ("TRACE", "/commands/ruok", 403, None),
    ],
)
def test_route(method: str, target: str, status: int, command: str | None) -> None:
    a = admin.route(method, target, "/commands")
    assert (a.status, a.command) == (status, command)
    if command is not None:
        assert dict(a.headers)["Content-Type"] == "application/json"


def test_route_keyword_arguments_first_value_wins() -> None:
    a = admin.route("GET", "/commands/stmk?traceMask=306&traceMask=5", "/commands")
    assert a.kwargs == {"traceMask": "306"}


def test_dump_uses_monotonic_buckets(tmp_path: Path) -> None:
    sessions = [
        status.SessionInfo(7, 10_500, ("/a",)),
        status.SessionInfo(8, 10_500),
        status.SessionInfo(9, 12_500, ()),
    ]
    d = admin.run_command(
        "dump", view(tmp_path, sessions=sessions), admin.AdminContext(wall_minus_monotonic_ms=500)
    )
    assert d["expiry_time_to_session_ids"] == {"10000": [7, 8], "12000": [9]}
    assert d["session_id_to_ephemeral_paths"] == {"7": ["/a"], "9": []}


def test_last_snapshot(tmp_path: Path) -> None:
    v = view(tmp_path)
    assert admin.run_command("lsnp", v, CTX) == {
        "zxid": "ffffffffffffffff",
        "timestamp": -1,
        "command": "last_snapshot",
        "error": None,
    }
    got = admin.run_command("lsnp", v, admin.AdminContext(last_snapshot=(0x1A, 1795470112)))
    assert (got["zxid"], got["timestamp"]) == ("1a", 1795470112)
