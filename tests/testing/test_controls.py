"""The test controls over the wire (``trizk-server --testing``, trizk.server.ops.testcontrol).

The request → action mapping is pure and tested as a table; the endpoint is tested with real
sockets against a server run by ``app.serve(config, testing=True)`` in the test's own Trio loop
(blocking clients run in threads), and once as the ``trizk-server --testing`` command.
"""

from __future__ import annotations

import http.client
import json
import logging
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from trizk.compat.oracle.rawclient import RawClient
from trizk.jute import records as R
from trizk.jute.codes import OpCode
from trizk.server.config.zoocfg import ServerConfig
from trizk.server.ops.testcontrol import (
    Advance,
    Drop,
    Dump,
    Expire,
    Index,
    Reply,
    parse,
    parse_session_id,
    request_for,
)
from trizk.server.shell.app import serve
from trizk.testing import parse_ready_line

WAIT = 10.0
ACL = (R.ACL(31, R.Id("world", "anyone")),)


# -- pure: request -> action ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "target", "action"),
    [
        ("POST", "/expire?session=0x1a2b", Expire(0x1A2B)),
        ("POST", "/expire?session=117680607747178496", Expire(117680607747178496)),
        ("POST", "/expire?session=-1", Expire(-1)),  # Java's signed long
        ("POST", "/expire?session=0xffffffffffffffff", Expire(-1)),
        ("POST", "/expire/?session=5&session=6", Expire(5)),  # first value wins
        ("POST", "/drop", Drop(None)),
        ("POST", "/drop?session=0x10", Drop(16)),
        ("POST", "/advance?seconds=60", Advance(60_000)),
        ("POST", "/advance?seconds=0.0015", Advance(2)),
        ("GET", "/dump", Dump()),
        ("HEAD", "/dump", Dump()),
        ("GET", "/", Index()),
        ("GET", "", Index()),
    ],
)
def test_parse(method: str, target: str, action: object) -> None:
    assert parse(method, target) == action


@pytest.mark.parametrize(
    ("method", "target", "status"),
    [
        ("GET", "/expire?session=1", 405),  # actions are POST only
        ("POST", "/dump", 405),
        ("POST", "/expire", 400),
        ("POST", "/expire?session=", 400),
        ("POST", "/expire?session=zz", 400),
        ("POST", "/expire?session=0x10000000000000000", 400),
        ("POST", "/drop?session=x", 400),
        ("POST", "/advance", 400),
        ("POST", "/advance?seconds=-1", 400),
        ("POST", "/advance?seconds=nan", 400),
        ("POST", "/advance?seconds=1e300", 400),
        ("GET", "/commands/ruok", 404),
        ("GET", "//dump", 404),
    ],
)
def test_parse_refuses(method: str, target: str, status: int) -> None:
    reply = parse(method, target)
    assert isinstance(reply, Reply) and reply.status == status
    assert isinstance(reply.body, dict) and reply.body["error"]


@given(
    st.one_of(
        st.builds(Expire, st.integers(-(2**63), 2**63 - 1)),
        st.builds(Drop, st.none() | st.integers(-(2**63), 2**63 - 1)),
        st.builds(Advance, st.integers(0, 10**12)),
        st.just(Dump()),
        st.just(Index()),
    )
)
def test_request_for_reads_back(action: Any) -> None:
    assert parse(*request_for(action)) == action


def test_session_ids() -> None:
    assert parse_session_id("0X1F") == 31
    assert parse_session_id(" 42 ") == 42
    assert parse_session_id(str(2**63)) == -(2**63)
    with pytest.raises(ValueError):
        parse_session_id("0x")


def test_parse_ready_line() -> None:
    line = "trizk-server ready on 127.0.0.1:41 port=41 testing=http://127.0.0.1:42\n"
    assert parse_ready_line(line) == {"port": "41", "testing": "http://127.0.0.1:42"}
    assert parse_ready_line("trizk-server ready on 127.0.0.1:41 port=41") == {"port": "41"}
    assert parse_ready_line("some log line port=3") is None


# -- the endpoint, real sockets -------------------------------------------------------------


def request(port: int, method: str, target: str) -> tuple[int, str, Any]:
    """One request on a fresh connection: status, content type, body (JSON decoded)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request(method, target)
        resp = conn.getresponse()
        raw = resp.read()
        ctype = resp.getheader("Content-Type") or ""
        body = json.loads(raw) if ctype == "application/json" else raw.decode()
        return resp.status, ctype, body
    finally:
        conn.close()


def config(tmp_path: Path, **keys: Any) -> ServerConfig:
    keys.setdefault("admin.enableServer", "false")
    return ServerConfig.create(
        tmp_path / "data", clientPort=2181, clientPortAddress="127.0.0.1", **keys
    ).replace(client_port=0)


async def test_endpoint_over_real_sockets(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "trizk")
    async with trio.open_nursery() as nursery:
        port, cport = await nursery.start(
            lambda task_status: serve(config(tmp_path), testing=True, task_status=task_status)
        )
        assert any("TEST CONTROLS ENABLED" in r.getMessage() for r in caplog.records)

        def ask(method: str, target: str) -> tuple[int, str, Any]:
            return request(cport, method, target)

        status, ctype, index = await trio.to_thread.run_sync(ask, "GET", "/")
        assert status == 200 and ctype.startswith("text/plain") and "/expire" in index
        status, _, body = await trio.to_thread.run_sync(ask, "GET", "/expire?session=1")
        assert status == 405 and "POST" in body["error"]
        status, _, body = await trio.to_thread.run_sync(ask, "POST", "/expire?session=0x1")
        assert (status, body) == (200, {"expired": False})

        # a client session with an ephemeral node and a watch on it
        raw = RawClient("127.0.0.1", port)

        def session() -> int:
            raw.connect()
            deadline = time.monotonic() + WAIT
            xid = raw.send(OpCode.CREATE, R.CreateRequest("/eph", b"", ACL, 1))
            assert raw.read_until_reply(xid, deadline)[1].err == 0
            xid = raw.send(OpCode.EXISTS, R.ExistsRequest("/eph", True))
            assert raw.read_until_reply(xid, deadline)[1].err == 0
            return raw.session_id

        try:
            sid = await trio.to_thread.run_sync(session)
            _, _, dump = await trio.to_thread.run_sync(ask, "GET", "/dump")
            key = f"0x{sid:x}"
            assert dump["sessions"][key]["ephemerals"] == ["/eph"]
            assert dump["watches"]["data"] == {"/eph": [key]}
            assert dump["tree"]["/eph"]["ephemeral_owner"] == sid

            status, _, body = await trio.to_thread.run_sync(ask, "POST", "/advance?seconds=1")
            assert (status, body) == (200, {"clock_offset_ms": 1000})
            status, _, body = await trio.to_thread.run_sync(ask, "POST", f"/expire?session={sid}")
            assert (status, body) == (200, {"expired": True})
            # committed before the answer: the dump no longer shows the session or its node
            _, _, dump = await trio.to_thread.run_sync(ask, "GET", "/dump")
            assert key not in dump["sessions"] and "/eph" not in dump["tree"]
            # the session's connection was closed by the server (what ZooKeeper does)
            closed = await trio.to_thread.run_sync(
                lambda: raw.read_raw_until_closed(time.monotonic() + WAIT)
            )
            assert closed[1]
            status, _, body = await trio.to_thread.run_sync(ask, "POST", "/drop")
            assert (status, body) == (200, {"dropped": 0})
        finally:
            raw.close()

        # keep-alive: several requests on one connection
        def two_on_one() -> list[int]:
            conn = http.client.HTTPConnection("127.0.0.1", cport, timeout=WAIT)
            try:
                out = []
                for target in ("/dump", "/"):
                    conn.request("GET", target)
                    resp = conn.getresponse()
                    resp.read()
                    out.append(resp.status)
                return out
            finally:
                conn.close()

        assert await trio.to_thread.run_sync(two_on_one) == [200, 200]
        nursery.cancel_scope.cancel()


def first_line(proc: subprocess.Popen[bytes]) -> str:
    """The child's first stdout line, waited for at most WAIT seconds."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], WAIT)
    assert ready, "no readiness line in time"
    return proc.stdout.readline().decode()


@pytest.mark.slow
def test_command_line_flag_and_readiness_line(tmp_path: Path) -> None:
    """``trizk-server --testing``: the readiness line names the controls, the log warns; without
    the flag neither (the controls are never on by default)."""
    for testing in (False, True):
        cmd = [sys.executable, "-m", "trizk.server", "--port", "0"]
        cmd += ["-D", "zookeeper.admin.enableServer=false"]
        cmd += ["--data-dir", str(tmp_path / f"d{testing}")]
        cmd += ["--testing"] if testing else []
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        try:
            ready = parse_ready_line(first_line(proc))
            assert ready is not None
            assert ("testing" in ready) is testing
            if testing:
                url = ready["testing"]
                assert url.startswith("http://127.0.0.1:")
                status, _, body = request(int(url.rsplit(":", 1)[1]), "GET", "/dump")
                assert status == 200 and "/zookeeper" in body["tree"]
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=WAIT)
        assert (b"TEST CONTROLS ENABLED" in err) is testing
        assert proc.returncode == 0
