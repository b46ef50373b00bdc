"""Enforced authentication on the wire, trizk beside ZooKeeper 3.8.0 with the same zoo.cfg
(``AuthenticationHelper``): ``sessionRequireClientSASLAuth=true`` and
``enforce.auth.enabled=true`` with ``enforce.auth.schemes``.

Each scenario runs against both servers and compares every byte the server sends after the
ConnectResponse until it closes the connection: a request (a ping too) before authentication
is answered ``ReplyHeader(xid, 0, SESSIONCLOSEDREQUIRESASLAUTH = -124)`` with no body and the
connection is closed; an id of an enforced scheme (``digest`` after an AuthPacket, the ``ip``
every connection holds) lets requests through. A configuration that names no scheme, or one
without a provider, stops the server with exit code 2 ("Invalid arguments, exiting
abnormally")."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.compat.conftest import require_zookeeper
from trizk.compat.oracle.rawclient import RawClient
from trizk.compat.procs import servers
from trizk.jute import records as R
from trizk.jute.codes import Code, OpCode
from trizk.server.auth.acl import SASL_PROVIDER
from trizk.storage.tree.datatree import OPEN_ACL_UNSAFE
from trizk.testing.ports import free_port

pytestmark = [pytest.mark.oracle, pytest.mark.slow]

SASL_REQUIRED = {"authProvider.1": SASL_PROVIDER, "sessionRequireClientSASLAuth": "true"}
DIGEST_ENFORCED = {"enforce.auth.enabled": "true", "enforce.auth.schemes": "digest"}
IP_ENFORCED = {"enforce.auth.enabled": "true", "enforce.auth.schemes": "ip, digest"}

Steps = Callable[[RawClient], None]


def _create(c: RawClient) -> None:
    c.send(OpCode.CREATE, R.CreateRequest(path="/x", data=b"", acl=list(OPEN_ACL_UNSAFE), flags=0))


def _ping(c: RawClient) -> None:
    c.ping()


def _auth_then_create(c: RawClient) -> None:
    c.add_auth("digest", b"bob:secret")
    _create(c)


def _transcript(kind: str, cfg: dict[str, str], steps: Steps) -> tuple[bytes, str]:
    """Everything the server sends after the ConnectResponse, and how the wait ended."""
    with servers.running(kind, cfg) as srv:
        c = RawClient(srv.host, srv.port)
        try:
            assert c.connect() is not None
            steps(c)
            return c.read_raw_until_closed(time.monotonic() + 5)
        finally:
            c.close()


def _reply(xid: int, zxid: int, err: int) -> bytes:
    return struct.pack(">iiqi", 16, xid, zxid, err)


@pytest.mark.parametrize(
    ("cfg", "steps", "expected"),
    [
        (SASL_REQUIRED, _create, (_reply(1, 0, Code.SESSIONCLOSEDREQUIRESASLAUTH), "closed")),
        (SASL_REQUIRED, _ping, (_reply(-2, 0, Code.SESSIONCLOSEDREQUIRESASLAUTH), "closed")),
        (DIGEST_ENFORCED, _create, (_reply(1, 0, Code.SESSIONCLOSEDREQUIRESASLAUTH), "closed")),
        (DIGEST_ENFORCED, _auth_then_create, None),  # passes: compared with ZooKeeper only
        (IP_ENFORCED, _create, None),
    ],
    ids=["sasl-create", "sasl-ping", "digest-unauthenticated", "digest-authenticated", "ip"],
)
def test_enforced_authentication_matches_zookeeper(
    cfg: dict[str, str], steps: Steps, expected: tuple[bytes, str] | None
) -> None:
    require_zookeeper()
    zk = _transcript("zookeeper", cfg, steps)
    tz = _transcript("trizk", cfg, steps)
    assert tz == zk
    if expected is not None:
        assert zk == expected
    else:
        assert zk[1] == "timeout"  # the connection stays open
        # the last reply (the create's) has err 0
        pos = 0
        while pos + 4 < len(zk[0]):
            last = pos
            pos += 4 + struct.unpack_from(">i", zk[0], pos)[0]
        assert struct.unpack_from(">iiqi", zk[0], last)[3] == 0


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (
            {"enforce.auth.enabled": "true"},
            "zookeeper.enforce.auth.enabled is true zookeeper.enforce.auth.schemes must be  "
            "configured.",
        ),
        (
            {"enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"},
            "Authentication scheme sasl is not available.",
        ),
    ],
)
def test_bad_enforcement_stops_both_servers(
    tmp_path: Path, cfg: dict[str, str], message: str
) -> None:
    require_zookeeper()
    codes = {}
    for kind in ("zookeeper", "trizk"):
        work = tmp_path / kind
        (work / "data").mkdir(parents=True)
        cfg_path = work / "zoo.cfg"
        cfg_path.write_text(
            servers.make_cfg(free_port(), str(work / "data"), cfg) + "admin.enableServer=false\n"
        )
        if kind == "zookeeper":
            log4j = work / "log4j.properties"
            log4j.write_text(
                "log4j.rootLogger=INFO, CONSOLE\n"
                "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
            )
            java = shutil.which("java") or "java"
            cmd = [java, f"-Dlog4j.configuration=file:{log4j}"]
            cmd += ["-cp", ":".join(servers.zookeeper_jars()), servers.ZK_MAIN]
        else:
            cmd = [sys.executable, "-m", "trizk.server"]
        done = subprocess.run(
            [*cmd, str(cfg_path)], capture_output=True, text=True, timeout=120, cwd=work
        )
        out = done.stdout + done.stderr
        assert message in out, (kind, out[-3000:])
        if kind == "trizk":
            assert "Traceback" not in out
            assert "Invalid arguments, exiting abnormally: " + message in out
        codes[kind] = done.returncode
    assert codes == {"zookeeper": 2, "trizk": 2}
