"""The README's "Use trizk in your tests" examples are run as written: each python block becomes
a test module of a child pytest run; the shell blocks run in bash (the readiness line parsed
and the controls called exactly as shown, a kazoo session in between). With
``TRIZK_TEST_RECIPES=1`` (compilers are slow: ~10-20 s each), and where ``javac`` and ``go``
are installed, the Java example is also compiled and run against ZooKeeper's own client and
the Go helper is compiled and run with a test of its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from trizk.compat.procs.servers import ZK_JARS

pytest_plugins = ["pytester"]

README = Path(__file__).resolve().parents[2] / "README.md"
WAIT = 20.0


def blocks(lang: str) -> list[str]:
    text = README.read_text()
    section = text.split("## Use trizk in your tests", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def env_with_trizk_server() -> dict[str, str]:
    """The environment with this Python's ``trizk-server`` first on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def test_readme_has_the_examples() -> None:
    found = blocks("python")
    assert len(found) == 5
    assert "trizk_chroot" in found[0] and "unittest" in found[1] and "kazoo_harness" in found[2]
    assert "trizk_ensemble" in found[3] and "AsyncServer" in found[4]
    assert len(blocks("sh")) == 2 and len(blocks("java")) == 2 and len(blocks("go")) == 1


def test_readme_examples_pass(pytester: pytest.Pytester) -> None:
    for i, code in enumerate(blocks("python")):
        pytester.makepyfile(**{f"test_readme_{i}": code})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=8)


def test_readme_wire_recipe(tmp_path: Path) -> None:
    """The shell recipe: start and parse the readiness line (block 1), then the curl commands
    (block 2) against a kazoo session made in between."""
    if shutil.which("curl") is None or shutil.which("bash") is None:
        pytest.skip("needs bash and curl")
    start, controls = blocks("sh")
    script = f'{start}\necho "READY $PORT $TESTING"\nread SESSION_ID\n{controls}\necho DONE\n'
    proc = subprocess.Popen(
        ["bash", "-eu", "-c", script],
        cwd=tmp_path,
        env={**env_with_trizk_server(), "TMPDIR": str(tmp_path)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    killer = threading.Timer(WAIT, proc.kill)  # a hung recipe fails the test, bounded
    killer.start()
    try:
        line = proc.stdout.readline().split()
        assert line[0] == "READY", line
        port, testing = int(line[1]), line[2]
        assert testing.startswith("http://127.0.0.1:")
        zk = KazooClient(hosts=f"127.0.0.1:{port}", timeout=10)
        zk.start(timeout=WAIT)
        try:
            zk.create("/worker", b"", ephemeral=True)
            proc.stdin.write(f"{zk.client_id[0]}\n")  # decimal, as Java prints it
            proc.stdin.flush()
            # (the recipe stops the server right after: kazoo may not hear of the expiry
            # before that; "expired": true below says the closeSession was committed)
            out, err = proc.communicate(timeout=WAIT)
        finally:
            zk.stop()
            zk.close()
    finally:
        killer.cancel()
    assert proc.returncode == 0, err
    assert out.rstrip().endswith("DONE")
    assert '"/worker"' in out  # the dump, before the expiry
    for answer in ('"dropped": 1', '"expired": true', '"clock_offset_ms": 60000'):
        assert answer in out
    assert list(tmp_path.iterdir()) == []  # the recipe cleaned up after itself


recipes = pytest.mark.skipif(
    os.environ.get("TRIZK_TEST_RECIPES") != "1", reason="TRIZK_TEST_RECIPES=1 runs the compilers"
)


@recipes
def test_readme_java_recipe(tmp_path: Path) -> None:
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None or not all(os.path.exists(j) for j in ZK_JARS):
        pytest.skip("needs javac, java and ZooKeeper's jars")
    helper, example = blocks("java")
    (tmp_path / "TrizkTestServer.java").write_text(helper)
    (tmp_path / "SessionExpiryTest.java").write_text(example)
    cp = ":".join(ZK_JARS)
    subprocess.run(
        [javac, "-cp", cp, "-d", str(tmp_path), *map(str, tmp_path.glob("*.java"))],
        check=True,
        timeout=120,
    )
    run = subprocess.run(
        [
            java,
            "-Dlog4j.configuration=file:/dev/null",
            "-cp",
            f"{cp}:{tmp_path}",
            "SessionExpiryTest",
        ],
        env=env_with_trizk_server(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok"


GO_TEST = """package trizktest

import (
	"strings"
	"testing"
)

func TestRecipe(t *testing.T) {
	s := StartTrizk(t)
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Fatal(s.Addr)
	}
	s.Advance(t, 60)
	s.DropConnections(t)
	if s.ExpireSession(t, 12345) {
		t.Fatal("an unknown session was expired")
	}
	if !strings.Contains(s.Dump(t), `"/zookeeper"`) {
		t.Fatal("no tree in the dump")
	}
}
"""


@recipes
def test_readme_go_recipe(tmp_path: Path) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("needs go")
    (tmp_path / "go.mod").write_text("module trizktest\n\ngo 1.19\n")
    (tmp_path / "trizk.go").write_text(blocks("go")[0])
    (tmp_path / "trizk_test.go").write_text(GO_TEST)
    env = env_with_trizk_server()
    env.update(GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local")
    run = subprocess.run(
        [go, "test", "-count=1", "./..."],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
