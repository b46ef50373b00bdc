"""``trizk-server``'s command line.

In-process tests give ``main`` a tiny stand-in for ``trizk.server.shell.app.serve`` that records the
config it was handed (no sockets). The subprocess tests run the real ``python -m trizk.server``
and talk to it over a socket; they wait on conditions with deadlines, never fixed sleeps.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trizk.server.config.main import build_parser, main
from trizk.server.config.zoocfg import ServerConfig, load_config
from trizk.testing.ports import free_port

HAVE_APP = importlib.util.find_spec("trizk.server.shell.app") is not None


class FakeServe:
    """Stands in for ``app.serve``: records the config, reports a port, then runs ``then``."""

    def __init__(self, then: Callable[[], Any] | None = None, port: int | None = None) -> None:
        self.configs: list[ServerConfig] = []
        self.data_dir_existed: list[bool] = []
        self.then = then
        self.port = port

    async def __call__(self, config: ServerConfig, *, task_status: Any = None) -> None:
        self.configs.append(config)
        self.data_dir_existed.append(Path(config.data_dir).is_dir())
        assert task_status is not None
        task_status.started(self.port if self.port is not None else config.client_port)
        if self.then is not None:
            result = self.then()
            if hasattr(result, "__await__"):
                await result

    @property
    def config(self) -> ServerConfig:
        assert len(self.configs) == 1
        return self.configs[0]


@pytest.fixture(autouse=True)
def _restore_trizk_log_level() -> Iterator[None]:
    logger = logging.getLogger("trizk")
    level = logger.level
    yield
    logger.setLevel(level)


def messages(caplog: pytest.LogCaptureFixture, level: int | None = None) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("trizk") and (level is None or r.levelno == level)
    ]


# -- arguments and configs ------------------------------------------------------------------


def test_no_arguments_is_a_development_server(caplog: pytest.LogCaptureFixture) -> None:
    serve = FakeServe()
    assert main([], serve=serve) == 0
    c = serve.config
    assert (c.client_port_address, c.client_port, c.tick_time) == ("127.0.0.1", 2181, 2000)
    assert c == ServerConfig.development(c.data_dir)
    # The temporary data dir existed while serving and is gone after a clean exit.
    assert serve.data_dir_existed == [True]
    assert not Path(c.data_dir).exists()
    first = messages(caplog)[0]
    assert first.startswith(
        f"trizk development server: 127.0.0.1:2181, data in {c.data_dir} (temporary"
    )


def test_development_server_with_data_dir_and_port(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    serve = FakeServe()
    assert main(["--data-dir", str(tmp_path / "d"), "--port", "0"], serve=serve) == 0
    assert serve.config.data_dir == tmp_path / "d"
    assert serve.config.client_port == 0
    assert "(kept)" in messages(caplog)[0]


def test_config_file_with_overrides_and_properties(tmp_path: Path) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        "tickTime=2000\ndataDir=/nowhere\nclientPort=2181\n4lw.commands.whitelist=ruok\n"
    )
    serve = FakeServe()
    argv = [
        str(cfg),
        "--port",
        "3181",
        "--data-dir",
        str(tmp_path / "data"),
        "-D",
        "zookeeper.extendedTypesEnabled=true",
        "-Dzookeeper.4lw.commands.whitelist=stat",
    ]
    assert main(argv, serve=serve) == 0
    c = serve.config
    assert (c.client_port, c.tick_time) == (3181, 2000)
    assert c.data_dir == c.data_log_dir == tmp_path / "data"
    assert c.extended_types_enabled
    assert c.four_letter_words == {"stat", "srvr"}
    expected = load_config(
        cfg,
        properties=[
            ("zookeeper.extendedTypesEnabled", "true"),
            ("zookeeper.4lw.commands.whitelist", "stat"),
        ],
        overrides={"dataDir": str(tmp_path / "data")},
    ).replace(client_port=3181)
    assert c == expected


def test_malformed_file_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text("dataDir=/d\nclientPort=2181\n\ntickTime=fast\n")
    serve = FakeServe()
    assert main([str(cfg)], serve=serve) == 2
    assert serve.configs == []
    err = capsys.readouterr().err
    assert f"invalid config {cfg}: line 4: 'tickTime=fast': tickTime must be an integer" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["missing.cfg"], "cannot read missing.cfg"),
        (["-D", "=x"], "expected name=value"),
    ],
)
def test_other_config_errors_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    os.chdir(tmp_path)
    assert main(argv, serve=FakeServe()) == 2
    assert needle in capsys.readouterr().err


def test_one_warning_names_every_unsupported_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        f"dataDir={tmp_path}\nclientPort=2181\nobserverMasterPort=2191\n"
        "admin.enableServer=false\nautopurge.purgeInterval=24\njvm.pause.monitor=true\n"
    )
    assert main([str(cfg), "-D", "zookeeper.snapSizeLimitInKb=10"], serve=FakeServe()) == 0
    warnings = messages(caplog, logging.WARNING)
    assert warnings == [
        "ignoring settings trizk does not support: observerMasterPort, jvm.pause.monitor,"
        " zookeeper.snapSizeLimitInKb"
    ]


def test_no_warning_without_unsupported_keys(caplog: pytest.LogCaptureFixture) -> None:
    assert main([], serve=FakeServe()) == 0
    assert messages(caplog, logging.WARNING) == []


def test_log_level(caplog: pytest.LogCaptureFixture) -> None:
    assert main(["--log-level", "WARN"], serve=FakeServe()) == 0
    assert logging.getLogger("trizk").level == logging.WARNING
    assert messages(caplog, logging.INFO) == []
    assert main(["--log-level", "debug"], serve=FakeServe()) == 0
    assert logging.getLogger("trizk").level == logging.DEBUG


@pytest.mark.parametrize("argv", [["--log-level", "loud"], ["--port", "70000"], ["a", "b"]])
def test_bad_arguments_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2


def test_server_that_cannot_start_exits_1(caplog: pytest.LogCaptureFixture) -> None:
    async def busy(config: ServerConfig, *, task_status: Any = None) -> None:
        raise OSError(98, "client port 127.0.0.1:2181 is in use")

    assert main([], serve=busy) == 1
    assert any("is in use" in m for m in messages(caplog, logging.ERROR))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_shuts_down_cleanly(signum: int, caplog: pytest.LogCaptureFixture) -> None:
    cancelled: list[bool] = []

    async def serve_until_cancelled() -> None:
        os.kill(os.getpid(), signum)
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(True)
            raise

    with _deadline(10):
        assert main([], serve=FakeServe(then=serve_until_cancelled)) == 0
    assert cancelled == [True]
    assert f"{signal.Signals(signum).name} received, shutting down" in messages(caplog)


def test_readiness_line_names_the_bound_port(capsys: pytest.CaptureFixture[str]) -> None:
    async def stop_at_once() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await trio.sleep_forever()

    with _deadline(10):
        assert main(["--port", "0"], serve=FakeServe(then=stop_at_once, port=45678)) == 0
    out = capsys.readouterr().out.splitlines()
    # trizk.testing (and any harness) waits for this stdout line: the port --port 0 bound
    assert out == ["trizk-server ready on 127.0.0.1:45678 port=45678"]


def test_testing_flag_names_the_controls(capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[bool] = []

    async def serve(config: ServerConfig, *, testing: bool = False, task_status: Any) -> None:
        asked.append(testing)
        task_status.started((45678, 45679))  # (client port, test controls' port)
        os.kill(os.getpid(), signal.SIGTERM)
        await trio.sleep_forever()

    with _deadline(10):
        assert main(["--port", "0", "--testing"], serve=serve) == 0
    assert asked == [True]
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "trizk-server ready on 127.0.0.1:45678 port=45678 testing=http://127.0.0.1:45679"
    ]


class _deadline:
    """Fail (via SIGALRM) if a blocking in-process main() does not return in time."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        def expired(signum: int, frame: object) -> None:
            raise AssertionError(f"main() still running after {self.seconds}s")

        self.previous = signal.signal(signal.SIGALRM, expired)
        signal.alarm(self.seconds)

    def __exit__(self, *exc: object) -> None:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)


# -- the real server in a subprocess --------------------------------------------------------


def ask(port: int, word: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(word)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def wait_until_serving(proc: subprocess.Popen[bytes], port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode} before serving")
        try:
            if ask(port, b"ruok") == b"imok":
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"server not answering ruok on {port} after {timeout}s")
        time.sleep(0.05)


def start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "trizk.server", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def stop(proc: subprocess.Popen[bytes], signum: int = signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"server ignored {signum}: {err.decode()}") from None
    return proc.returncode, err.decode()


@pytest.mark.skipif(not HAVE_APP, reason="trizk.server.shell.app (the server) is not written yet")
def test_subprocess_development_server_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    proc = start(["--port", str(port)], tmp_path)
    try:
        wait_until_serving(proc, port)
        assert ask(port, b"srvr").startswith(b"Zookeeper version: 3.9.3-")
        assert b"zookeeper.version=3.9.3-" in ask(port, b"envi")  # all 4lw enabled in dev mode
    finally:
        rc, err = stop(proc)
    assert rc == 0, err
    first = err.splitlines()[0]
    assert f"trizk development server: 127.0.0.1:{port}, data in " in first
    assert "answering as ZooKeeper 3.9.3," in first  # the default release (issue 27)
    data_dir = first.split("data in ", 1)[1].split(" (temporary", 1)[0]
    assert not Path(data_dir).exists()  # the temporary data dir is removed at exit


@pytest.mark.skipif(not HAVE_APP, reason="trizk.server.shell.app (the server) is not written yet")
def test_subprocess_without_arguments_listens_on_2181(tmp_path: Path) -> None:
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 2181))
    except OSError:
        pytest.skip("127.0.0.1:2181 is taken on this machine")
    proc = start([], tmp_path)
    try:
        wait_until_serving(proc, 2181)
    finally:
        rc, err = stop(proc, signal.SIGINT)
    assert rc == 0, err
    assert "trizk development server: 127.0.0.1:2181" in err.splitlines()[0]


def test_subprocess_invalid_config_exits_2(tmp_path: Path) -> None:
    (tmp_path / "zoo.cfg").write_text("dataDir=/d\nclientPort=2181\nnonsense\n")
    done = subprocess.run(
        [sys.executable, "-m", "trizk.server", "zoo.cfg"],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"zoo.cfg: line 3: " in done.stderr


def test_quorum_config_starts_an_ensemble_member(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        f"dataDir={tmp_path}\nclientPort=2181\ninitLimit=5\nsyncLimit=2\n"
        "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n"
    )
    (tmp_path / "myid").write_text("2\n")
    assert main([str(cfg)], serve=FakeServe()) == 0
    assert messages(caplog, logging.WARNING) == [
        "No server failure will be tolerated. You need at least 3 servers.",
    ]
    assert "ensemble member server.2 of 2 members (2 voting), initLimit 5, syncLimit 2" in messages(
        caplog, logging.INFO
    )


@pytest.mark.parametrize(
    ("myid", "needle"),
    [(None, "myid file is missing"), ("7", "My id 7 not in the peer list")],
)
def test_quorum_config_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], myid: str | None, needle: str
) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(
        f"dataDir={tmp_path}\nclientPort=2181\ninitLimit=5\nsyncLimit=2\n"
        "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n"
    )
    if myid is not None:
        (tmp_path / "myid").write_text(myid)
    assert main([str(cfg)], serve=FakeServe()) == 2
    assert needle in capsys.readouterr().err
