"""trizk-dump against ZooKeeper's own TxnLogToolkit and SnapshotFormatter output."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from trizk.storage import dump
from trizk.storage.formats import txnlog

DATA = Path(__file__).parents[1] / "data" / "zkdata"
V2 = DATA / "version-2"
JARS = [
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
    "commons-cli.jar",
    "jackson-core.jar",
]
CP = ":".join(f"/usr/share/java/{j}" for j in JARS)
needs_java = pytest.mark.skipif(
    shutil.which("java") is None or not Path("/usr/share/java/zookeeper.jar").exists(),
    reason="Apache ZooKeeper not installed",
)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = dump.main(list(argv), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


def java(cls: str, *args: str) -> str:
    res = subprocess.run(
        ["java", "-Duser.timezone=UTC", "-cp", CP, cls, *args],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return res.stdout.decode("utf-8")


def test_log_text() -> None:
    rc, out, _ = run("log", str(V2 / "log.1"))
    lines = out.splitlines()
    assert rc == 0
    assert lines[0] == "ZooKeeper Transactional Log File with dbid 0 txnlog format version 2"
    assert lines[-1] == "EOF reached after 36 txns."
    assert lines[1].endswith(" session 0x100000343670000 cxid 0x0 zxid 0x1 createSession 5000")
    assert ", 9:50:48 AM UTC session" in lines[1]
    assert "zxid 0x4 create /app,app-data,[31,s{'world,'anyone}" in out


def records(text: str) -> list[str]:
    """Split dump output into txn records (a record may span lines: ACL toString ends in \\n)."""
    out: list[str] = []
    for ln in text.splitlines():
        if re.match(r"\d+/\d+/\d+, ", ln) or not out or ln.startswith(("EOF", "ZooKeeper")):
            out.append(ln)
        else:
            out[-1] += "\n" + ln
    return out


@pytest.mark.oracle
@needs_java
@pytest.mark.parametrize("name", ["log.1", "log.25"])
def test_log_text_matches_txnlogtoolkit(name: str) -> None:
    ours = records(run("log", str(V2 / name))[1])
    theirs = records(java("org.apache.zookeeper.server.persistence.TxnLogToolkit", str(V2 / name)))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        if " multi " in b:
            # The toolkit prints each sub-txn's raw bytes; we decode them.
            assert a.split(" multi ")[0] == b.split(" multi ")[0]
        else:
            assert a == b
    if name == "log.25":
        multi = next(r for r in ours if "zxid 0x3c multi" in r)
        assert multi.endswith("multi create:/never,n,[31,s{'world,'anyone}\n],false,6;error:-103")


@pytest.mark.oracle
@needs_java
@pytest.mark.parametrize("flag", [[], ["-d"]])
def test_snapshot_text_matches_snapshotformatter(flag: list[str]) -> None:
    path = str(V2 / "snapshot.23")
    ours = run("snapshot", *(["--data"] if flag else []), path)[1]
    theirs = java("org.apache.zookeeper.server.SnapshotFormatter", *flag, path)
    # We also print the digest line, which SnapshotFormatter's loader never reads.
    ours_lines = [ln for ln in ours.splitlines() if not ln.startswith("Target zxid digest")]
    assert ours_lines == theirs.splitlines()
    assert "Target zxid digest is: 23, 36300875851" in ours


def test_snapshot_text() -> None:
    rc, out, _ = run("snapshot", str(V2 / "snapshot.23"))
    assert rc == 0
    assert out.startswith("ZNode Details (count=18):\n----\n/\n  cZxid = 0x00000000000000\n")
    assert "  ephemeralOwner = 0xff0000000036ee80\n" in out  # TTL node
    assert out.endswith("----\nLast zxid: 0x23\n")
    assert "0x100000343670001, 10000, 2\n" in out


def test_log_json() -> None:
    rc, out, _ = run("log", "--json", str(V2 / "log.25"))
    rows = [json.loads(ln) for ln in out.splitlines()]
    assert rc == 0
    assert rows[0] == {"kind": "header", "dbid": 0, "version": 2}
    assert rows[-1]["kind"] == "end" and rows[-1]["count"] == 34 and rows[-1]["clean"]
    txns = rows[1:-1]
    assert [t["zxid"] for t in txns] == [hex(z) for z in range(0x25, 0x47)]
    multi = next(t for t in txns if t["zxid"] == "0x3b")
    assert [o["type"] for o in multi["ops"]] == ["create", "setData", "check", "delete"]
    assert multi["digest"]["version"] == 2
    close = next(t for t in txns if t["zxid"] == "0x40")
    assert close["type"] == "closeSession"
    assert close["txn"] == {"paths2Delete": ["/b-eph-root", "/app/b-eph"]}


def test_snapshot_json_and_compressed() -> None:
    rc, out, _ = run("snapshot", "--json", str(V2 / "snapshot.23"))
    doc = json.loads(out)
    assert rc == 0
    assert doc["zxid"] == "0x23" and doc["digest"]["digest"] == doc["treeDigest"]
    assert doc["nodes"][0]["path"] == "/" and len(doc["nodes"]) == 17
    assert doc["sessions"][0]["ephemeralCount"] == 2
    for name in ("snapshot.19.snappy", "snapshot.20.gz"):
        rc, out, _ = run("snapshot", str(DATA / "compressed" / name))
        assert rc == 0 and "\n/n19\n" in out


def test_torn_log_reports_and_fails(tmp_path: Path) -> None:
    data = (V2 / "log.25").read_bytes()
    entries, _ = txnlog.scan(data)
    torn = tmp_path / "log.25"
    torn.write_bytes(data[: entries[-1].offset + 20])
    rc, out, _ = run("log", str(torn))
    assert rc == 1
    assert out.splitlines()[-1].startswith(
        f"Log stops after 33 txns at offset {entries[-1].offset}"
    )
    rc, out, _ = run("log", "--json", str(torn))
    end = json.loads(out.splitlines()[-1])
    assert rc == 1 and end["reason"] == "torn" and not end["clean"]


def test_bad_inputs(tmp_path: Path) -> None:
    rc, _, err = run("log", str(tmp_path / "missing"))
    assert rc == 2 and "doesn't exist" in err
    rc, _, err = run("log", str(V2 / "snapshot.0"))
    assert rc == 2 and "not a ZooKeeper transaction log" in err
    bad = tmp_path / "snapshot.5"
    bad.write_bytes((V2 / "snapshot.23").read_bytes()[:-40])
    rc, _, err = run("snapshot", str(bad))
    assert rc == 1 and "not a valid snapshot" in err
    assert run("frobnicate")[0] == 2


def test_progress_on_stderr() -> None:
    rc, _, err = run("log", "--progress", str(V2 / "log.1"))
    assert rc == 0 and err.rstrip().endswith("log.1: 100%")
    rc, _, err = run("snapshot", "--progress", str(V2 / "snapshot.23"))
    assert rc == 0 and "snapshot.23: 100%" in err
    # Small files without --progress stay quiet.
    assert run("log", str(V2 / "log.1"))[2] == ""
