"""The examples of ``docs/testing.md`` are run as written. Each is a file under
``docs/examples/`` that the page shows verbatim (``tests/test_docs.py`` holds the page's code
blocks equal to the files): the Python files are test modules of a child pytest run; the shell
files run in bash (the readiness line parsed and the controls called exactly as shown, a kazoo
session in between). With ``TRIZK_TEST_RECIPES=1`` (compilers are slow: ~10-20 s each), and
where ``javac`` and ``go`` are installed, the Java example is also compiled and run against
ZooKeeper's own client and the Go helper is compiled and run with its test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from trizk.compat.procs.servers import ZK_JARS

pytest_plugins = ["pytester"]

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
WAIT = 20.0

#: The Python examples and how many tests each holds.
PYTHON_EXAMPLES = {
    "test_fixtures.py": 2,
    "test_unittest.py": 2,
    "test_kazoo_harness.py": 1,
    "test_ensemble.py": 2,
    "test_trio.py": 1,
}


def example(name: str) -> str:
    return (EXAMPLES / name).read_text()


def env_with_trizk_server() -> dict[str, str]:
    """The environment with this Python's ``trizk-server`` first on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def test_every_example_is_run_here() -> None:
    """A new example file needs a test here (and a block in docs/testing.md)."""
    run_here = {f"python/{name}" for name in PYTHON_EXAMPLES} | {
        "shell/start-server.sh",
        "shell/controls.sh",
        "java/TrizkTestServer.java",
        "java/SessionExpiryTest.java",
        "go/go.mod",
        "go/trizk.go",
        "go/trizk_test.go",
    }
    found = {p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*") if p.is_file()}
    assert found == run_here


@pytest.mark.slow
def test_python_examples_pass(pytester: pytest.Pytester) -> None:
    for name in PYTHON_EXAMPLES:
        pytester.makepyfile(**{name.removesuffix(".py"): example(f"python/{name}")})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=sum(PYTHON_EXAMPLES.values()))


@pytest.mark.slow
def test_shell_recipe(tmp_path: Path) -> None:
    """The shell recipe: start and parse the readiness line (start-server.sh), then the curl
    commands (controls.sh) against a kazoo session made in between."""
    if shutil.which("curl") is None or shutil.which("bash") is None:
        pytest.skip("needs bash and curl")
    start, controls = example("shell/start-server.sh"), example("shell/controls.sh")
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


@pytest.mark.oracle
@pytest.mark.slow
@recipes
def test_java_recipe(tmp_path: Path) -> None:
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None or not all(os.path.exists(j) for j in ZK_JARS):
        pytest.skip("needs javac, java and ZooKeeper's jars")
    sources = [
        EXAMPLES / "java" / "TrizkTestServer.java",
        EXAMPLES / "java" / "SessionExpiryTest.java",
    ]
    cp = ":".join(ZK_JARS)
    subprocess.run(
        [javac, "-cp", cp, "-d", str(tmp_path), *map(str, sources)],
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


@pytest.mark.slow
@recipes
def test_go_recipe(tmp_path: Path) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("needs go")
    module = tmp_path / "trizktest"
    shutil.copytree(EXAMPLES / "go", module)  # go builds in the module's own directory
    env = env_with_trizk_server()
    env.update(GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local")
    run = subprocess.run(
        [go, "test", "-count=1", "./..."],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
