"""The AdminServer over real sockets: probes as written for ZooKeeper, side effects shared
with the four-letter words, keep-alive, idle timeout, a port in use, disabled."""

from __future__ import annotations

import http.client
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.conftest import ThreadedServer, free_port, make_config
from trizk.testing.probes import ask


def _admin_cfg(tmp_path: Path, port: int | None = None, **extra: Any) -> Any:
    keys = {
        "admin.enableServer": "true",
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": port if port is not None else free_port(),
    }
    keys.update(extra)
    return make_config(tmp_path, **keys)


@pytest.fixture
def admin_server(tmp_path: Path) -> Iterator[ThreadedServer]:
    srv = ThreadedServer(_admin_cfg(tmp_path)).start()
    yield srv
    srv.stop()


def _get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def _json(port: int, path: str) -> dict[str, Any]:
    status, headers, body = _get(port, path)
    assert status == 200 and headers["Content-Type"] == "application/json"
    return dict(json.loads(body))


def _fourlw(srv: ThreadedServer, word: str) -> str:
    return ask(srv.port, word, 10).decode()


def _port(srv: ThreadedServer) -> int:
    assert srv.server is not None and srv.server.admin_port is not None
    return srv.server.admin_port


def test_probe_ruok_and_a_session(admin_server: ThreadedServer) -> None:
    port = _port(admin_server)
    assert _json(port, "/commands/ruok") == {"command": "ruok", "error": None}
    zk = KazooClient(hosts=admin_server.hosts, timeout=10)
    zk.start(timeout=10)
    try:
        zk.create("/eph", b"x", ephemeral=True)
        zk.get("/eph", watch=lambda e: None)
        sid = zk.client_id[0]
        cons = _json(port, "/commands/cons")["connections"]
        assert [c["session_id"] for c in cons] == [sid]
        assert cons[0]["remote_socket_address"].startswith("127.0.0.1:")
        assert _json(port, "/commands/dump")["session_id_to_ephemeral_paths"] == {
            str(sid): ["/eph"]
        }
        assert _json(port, "/commands/wchp")["path_to_session_ids"] == {"/eph": [sid]}
        mntr = _json(port, "/commands/monitor")
        assert mntr["ephemerals_count"] == 1 and mntr["num_alive_connections"] == 1
        assert _json(port, "/commands/srvr")["node_count"] == 6
    finally:
        zk.stop()
        zk.close()


def test_side_effects_are_the_four_letter_words(admin_server: ThreadedServer) -> None:
    port = _port(admin_server)
    assert _json(port, "/commands/stmk?traceMask=99")["tracemask"] == 99
    assert _fourlw(admin_server, "gtmk") == "99"
    _fourlw(admin_server, "srvr")  # some traffic
    assert _json(port, "/commands/srst") == {"command": "stat_reset", "error": None}
    stats = _json(port, "/commands/server_stats")["server_stats"]
    assert (stats["packets_received"], stats["packets_sent"]) == (0, 0)
    bad = _json(port, "/commands/set_trace_mask")
    assert bad == {
        "error": "setTraceMask requires long traceMask argument",
        "command": "set_trace_mask",
    }
    assert _fourlw(admin_server, "gtmk") == "99"


def test_list_404_405_and_keep_alive(admin_server: ThreadedServer) -> None:
    port = _port(admin_server)
    status, headers, body = _get(port, "/commands")
    assert status == 200 and "Content-Type" not in headers
    assert body.decode().count("<br/>") == 28  # 3.9: the 3.8 commands, snapshot, restore
    assert _get(port, "/nothing")[0] == 404
    # 3.9's servlet serves POST; a GET command POSTed fails in it (500); other methods 405
    assert _get(port, "/commands/ruok", "POST")[0] == 500
    assert _get(port, "/commands/ruok", "PUT")[0] == 405
    status, headers, body = _get(port, "/commands/ruok", "HEAD")
    assert (status, body) == (200, b"") and int(headers["Content-Length"]) > 0
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for _ in range(3):  # one connection, several requests
            c.request("GET", "/commands/isro")
            assert json.loads(c.getresponse().read())["read_only"] is False
    finally:
        c.close()


def test_idle_connection_is_closed(tmp_path: Path) -> None:
    srv = ThreadedServer(_admin_cfg(tmp_path, **{"admin.idleTimeout": 100})).start()
    try:
        with socket.create_connection(("127.0.0.1", _port(srv)), timeout=10) as s:
            assert s.recv(1) == b""  # closed by the server, long before the socket timeout
    finally:
        srv.stop()


def test_port_in_use_is_logged_and_the_server_carries_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        with caplog.at_level(logging.ERROR, "trizk.server.ops.admin"):
            srv = ThreadedServer(_admin_cfg(tmp_path, taken)).start()
        try:
            assert srv.server is not None and srv.server.admin_port is None
            assert _fourlw(srv, "ruok") == "imok"
            assert any("Problem starting AdminServer" in r.message for r in caplog.records)
        finally:
            srv.stop()


def test_disabled(tmp_path: Path) -> None:
    port = free_port()
    srv = ThreadedServer(_admin_cfg(tmp_path, port, **{"admin.enableServer": "false"})).start()
    try:
        assert srv.server is not None and srv.server.admin_port is None
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        srv.stop()
