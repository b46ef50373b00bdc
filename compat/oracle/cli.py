"""Stock command-line clients against both servers: ``zkCli.sh`` (Java) and ``cli_mt`` (C).

Theory
------
A CLI *script* is data (``compat/scenarios/cli/*.json``): a tool (``zkCli`` or ``cli_mt``) and
the command lines typed into it, and optionally ``"cfg"``: extra zoo.cfg keys, as in
``compat/scenarios/*.json`` (``{"extendedTypesEnabled": "true"}`` for ``create -t``). Every
script runs against a fresh server of each kind: the scripts of a run with the same ``cfg``
share one server, in file order, so both servers see the same history; and the output is cut
into one segment per command and normalised before comparison.

Cutting: after every command the runner types a *sentinel* command whose answer names a unique
path, printed by the same thread, in the same order, as the command's own answer:

* zkCli executes commands one at a time on its main thread: the sentinel is
  ``stat /zz-sentinel-N`` (answer ``Node does not exist: /zz-sentinel-N``). Watch notifications
  are printed by the client's event thread and may land anywhere, so their lines
  (``WATCHER::``, ``WatchedEvent ...``) are taken out of the segments and compared as one
  ordered list per script (without the final ``state:Closed`` one, which races the JVM's exit).
  One exception to that order: the ``Child``/``Data``/``PersistentWatchRemoved`` notifications
  of one ``removewatches`` are made by the client itself, from a ``HashMap`` keyed by the
  ``EventType`` enum (``ZKWatchManager.removeWatcher``; identity hash, so the order changes
  from one JVM to the next): a run of consecutive such lines for one path is sorted.
* cli_mt runs commands asynchronously and prints completions and watch notifications from its
  one completion thread, in arrival order: the sentinel is ``sync /zz-sentinel-N`` (answer
  ``[/zz-sentinel-N]: rc = 0`` / ``name = /zz-sentinel-N``), and the runner waits for it (bounded)
  before typing the next command, so notifications stay in their segment.

Normalisation (as :mod:`trizk.compat.oracle.normalise` for the wire, applied to text): the port in
``Connecting to``; ``ctime``/``mtime`` dates become ``T``; zxids (``cZxid = 0x..``, ``czxid=..``
...) become ``Z<rank>`` over the script's output; session ids (``Got a new session id: 0x..``,
``ephemeralOwner = ..``) become ``S1``, ``S2`` in order of appearance (0 kept); cli_mt's
``time = N msec`` becomes ``time = X msec``; SLF4J/log4j noise lines are dropped. Everything else
(data, versions, child order, error texts, sequential names) must be equal.

The scripts alone: ``python -m trizk.compat.oracle.cli [-k NAME]... [--oracle-vs-oracle]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trizk.compat.oracle.compare import Difference
from trizk.compat.procs import servers

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
CLI_MT = "/usr/lib/zookeeper/bin/cli_mt"
#: zkCli.sh of each ZooKeeper release, with the classpath it must run on (None: its own).
#: 3.9.3's script sources its zkEnv.sh, which sets CLASSPATH to the system zookeeper.jar
#: (bookworm's 3.8.0): the 3.9.3 jars go in CLIENT_JVMFLAGS, whose ``-cp`` comes later on the
#: java command line and wins (its ``version`` command then says 3.9.3).
ZKCLIS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "3.8.0": (ZKCLI, None),
    "3.9.3": (servers.ZK39_ZKCLI, servers.ZK39_JARS),
}
CLI_DIR = Path(__file__).parents[1] / "scenarios" / "cli"
SCRIPT_BOUND = 60.0  # seconds for a whole zkCli script
COMMAND_BOUND = 10.0  # seconds for one cli_mt command


def clis_available() -> bool:
    return os.path.exists(ZKCLI) and os.path.exists(CLI_MT) and shutil.which("java") is not None


def zkcli_available(client: str) -> bool:
    """zkCli.sh of release ``client`` (a key of :data:`ZKCLIS`) and its jars are here."""
    script, jars = ZKCLIS[client]
    return os.path.exists(script) and all(os.path.exists(j) for j in jars or ())


def load_scripts(directory: Path = CLI_DIR) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in sorted(directory.glob("*.json")):
        out.extend(json.loads(p.read_text()))
    return out


# ----------------------------------------------------------------------------- running


def _sentinel(tool: str, n: int) -> tuple[str, str]:
    """(command to type, the line that marks its answer)."""
    path = f"/zz-sentinel-{n}"
    if tool == "zkCli":
        return f"stat {path}", f"Node does not exist: {path}"
    return f"sync {path}", f"\tname = {path}"


def run_zkcli(address: str, lines: Sequence[str], client: str = "3.8.0") -> tuple[list[str], str]:
    """Run a zkCli script with zkCli.sh of release ``client`` (:data:`ZKCLIS`); returns (one
    raw output segment per command, raw whole output)."""
    typed: list[str] = []
    for i, line in enumerate(lines):
        typed += [line, _sentinel("zkCli", i)[0]]
    typed.append("quit")
    script, jars = ZKCLIS[client]
    flags = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    if jars:
        flags += " -cp " + ":".join(jars)
    env = dict(os.environ, CLIENT_JVMFLAGS=flags)
    p = subprocess.run(
        [script, "-server", address],
        input=("\n".join(typed) + "\n").encode(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=SCRIPT_BOUND,
        env=env,
    )
    text = p.stdout.decode(errors="replace")
    return _split(text, "zkCli", len(lines)), text


def _split(text: str, tool: str, n: int) -> list[str]:
    segs: list[str] = []
    rest = text
    for i in range(n):
        marker = _sentinel(tool, i)[1]
        k = rest.find(marker)
        if k < 0:
            segs.append(rest)
            rest = ""
            continue
        segs.append(rest[:k])
        rest = rest[k + len(marker) :]
    if segs:
        segs[-1] += rest  # quitting, close notifications
    return segs


class _Interactive:
    """A child process whose merged output we read with a deadline (select on the pipe)."""

    def __init__(self, argv: list[str]) -> None:
        self.p = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        self.buf = b""

    def type(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()

    def read_until(self, marker: str, bound: float) -> str:
        """Output up to and including ``marker``'s line (or all of it at EOF/deadline)."""
        assert self.p.stdout is not None
        m = marker.encode()
        deadline = time.monotonic() + bound
        while True:
            k = self.buf.find(m)
            if k >= 0:
                end = self.buf.find(b"\n", k)
                end = len(self.buf) if end < 0 else end + 1
                out, self.buf = self.buf[:end], self.buf[end:]
                return out.decode(errors="replace")
            left = deadline - time.monotonic()
            if left <= 0:
                out, self.buf = self.buf, b""
                return out.decode(errors="replace") + f"\n<no {marker!r} within {bound}s>\n"
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                data = os.read(self.p.stdout.fileno(), 65536)
                if not data:
                    out, self.buf = self.buf, b""
                    return out.decode(errors="replace") + "\n<EOF>\n"
                self.buf += data

    def finish(self, bound: float = 10.0) -> str:
        try:
            assert self.p.stdin is not None
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(bound)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(bound)
        assert self.p.stdout is not None
        rest = self.buf + self.p.stdout.read()
        self.p.stdout.close()
        return rest.decode(errors="replace")


def run_cli_mt(address: str, lines: Sequence[str]) -> tuple[list[str], str]:
    """Run a cli_mt script one command at a time; (segments, whole output)."""
    c = _Interactive([CLI_MT, address])
    head = c.read_until("Got a new session id", COMMAND_BOUND)
    segs: list[str] = []
    for i, line in enumerate(lines):
        cmd, marker = _sentinel("cli_mt", i)
        c.type(line)
        c.type(cmd)
        seg = c.read_until(marker, COMMAND_BOUND)
        segs.append(seg)
    c.type("quit")
    tail = c.finish()
    if segs:
        segs[0] = head + segs[0]
        segs[-1] += tail
    return segs, head + "".join(segs)


# ----------------------------------------------------------------------------- normalising

_NOISE = re.compile(r"^(SLF4J:|log4j:|\s*at |.*\[main-SendThread|.*\[main-EventThread)")
_SENTINEL_ECHO = re.compile(r".*zz-sentinel-\d+.*")
_ZXID = re.compile(r"\b([cmp][Zz]xid)( ?= ?)(0x)?([0-9a-fA-F]+)")
_TIME = re.compile(r"\b([cm]time)( ?= ?)(.*?)(\t|$)")
_OWNER = re.compile(r"(ephemeralOwner = |Got a new session id: |session Id = )(0x)?([0-9a-fA-F]+)")
_MSEC = re.compile(r"time = \d+ msec")
_PORT = re.compile(r"127\.0\.0\.1:\d+")
_WATCH_LINES = re.compile(r"^(WATCHER::|WatchedEvent .*)$")
_WATCH_REMOVED = re.compile(r"type:(?:Child|Data|Persistent)WatchRemoved path:(.*)$")


def _sort_removal_runs(events: Sequence[str]) -> list[str]:
    """Each maximal run of ...WatchRemoved lines for one path, sorted (see above)."""
    out: list[str] = []
    i = 0
    while i < len(events):
        m = _WATCH_REMOVED.search(events[i])
        j = i + 1
        while m and j < len(events):
            n = _WATCH_REMOVED.search(events[j])
            if not n or n.group(1) != m.group(1):
                break
            j += 1
        out.extend(sorted(events[i:j]))
        i = j
    return out


def normalise_cli(tool: str, segments: Sequence[str]) -> tuple[list[list[str]], list[str]]:
    """(normalised lines per command, watch-notification lines for zkCli)."""
    zxids: set[int] = set()
    owners: dict[int, str] = {}
    for seg in segments:
        for m in _ZXID.finditer(seg):
            zxids.add(int(m.group(4), 16))
        for m in _OWNER.finditer(seg):
            v = int(m.group(3), 16)
            if v != 0 and v not in owners:
                owners[v] = f"S{len(owners) + 1}"
    rank = {z: f"Z{i + 1}" for i, z in enumerate(sorted(zxids - {0}))}

    def fix(line: str) -> str:
        line = _PORT.sub("HOST:PORT", line)
        line = _MSEC.sub("time = X msec", line)
        line = _ZXID.sub(
            lambda m: m.group(1) + m.group(2) + rank.get(int(m.group(4), 16), m.group(4)), line
        )
        line = _TIME.sub(lambda m: m.group(1) + m.group(2) + "T" + m.group(4), line)
        line = _OWNER.sub(lambda m: m.group(1) + owners.get(int(m.group(3), 16), m.group(3)), line)
        return line

    out: list[list[str]] = []
    events: list[str] = []
    for seg in segments:
        # cli_mt's ctime_r() ends the date with a newline: join it back to its field.
        seg = re.sub(r"((?:ctime|mtime) ?= ?[^\n\t]*)\n\t", r"\1\t", seg)
        lines: list[str] = []
        for raw in seg.splitlines():
            if not raw.strip() or _NOISE.match(raw) or _SENTINEL_ECHO.match(raw):
                continue
            if tool == "zkCli" and _WATCH_LINES.match(raw):
                # The final "state:Closed" notification races the JVM's exit: not compared.
                if raw.startswith("WatchedEvent") and "state:Closed" not in raw:
                    events.append(fix(raw))
                continue
            lines.append(fix(raw))
        out.append(lines)
    return out, _sort_removal_runs(events)


# ----------------------------------------------------------------------------- comparing


def cfg_groups(scripts: Sequence[Mapping[str, Any]]) -> list[tuple[dict[str, str], list[int]]]:
    """Scripts sharing a server: (zoo.cfg extras, script indices in file order), one group per
    distinct ``cfg`` in order of first appearance (scripts without ``cfg`` form the ``{}`` one)."""
    groups: dict[str, list[int]] = {}
    for i, sc in enumerate(scripts):
        groups.setdefault(json.dumps(sc.get("cfg", {}), sort_keys=True), []).append(i)
    return [(json.loads(key), idx) for key, idx in groups.items()]


def run_scripts_on(
    kind: str,
    scripts: Sequence[Mapping[str, Any]],
    *,
    client: str = "3.8.0",
    version: str | None = None,
) -> list[Any]:
    """Every script on a fresh server of ``kind`` per ``cfg`` group; normalised (segments,
    events) per script, in the order of ``scripts``. ``client``: the release of zkCli.sh
    (cli_mt is 3.8.0's, the only C client here); ``version``: the server's release (ZooKeeper's,
    or the one trizk answers as), by default :func:`servers.start`'s."""
    results: list[Any] = [None] * len(scripts)
    for cfg, idx in cfg_groups(scripts):
        kw: dict[str, Any] = {"version": version} if version else {}
        with servers.running(kind, cfg, **kw) as srv:
            for i in idx:
                sc = scripts[i]
                if sc["tool"] == "zkCli":
                    segs, _ = run_zkcli(srv.address, sc["lines"], client)
                else:
                    segs, _ = run_cli_mt(srv.address, sc["lines"])
                results[i] = normalise_cli(sc["tool"], segs)
    return results


def diff_cli(
    scripts: Sequence[Mapping[str, Any]], left: Sequence[Any], right: Sequence[Any]
) -> list[Difference]:
    diffs: list[Difference] = []
    for sc, (lsegs, lev), (rsegs, rev) in zip(scripts, left, right, strict=True):
        name = f"cli:{sc['name']}"
        for i, line in enumerate(sc["lines"]):
            a = lsegs[i] if i < len(lsegs) else ["<missing>"]
            b = rsegs[i] if i < len(rsegs) else ["<missing>"]
            if a != b:
                diffs.append(
                    Difference(
                        name, sc["tool"], i, f"{sc['tool']}> {line}", [{"out": a}], [{"out": b}]
                    )
                )
        if lev != rev:
            diffs.append(
                Difference(
                    name,
                    sc["tool"],
                    -1,
                    "watch notifications",
                    [{"events": lev}],
                    [{"events": rev}],
                )
            )
    return diffs


def run_cli_suite(
    left_kind: str, right_kind: str, left_name: str, right_name: str, names: Sequence[str] = ()
) -> tuple[int, int]:
    """Every script (only those whose name contains one of ``names``, if given) on both kinds."""
    scripts = [sc for sc in load_scripts() if not names or any(k in sc["name"] for k in names)]
    if not scripts:
        return 0, 0
    left = run_scripts_on(left_kind, scripts)
    right = run_scripts_on(right_kind, scripts)
    diffs = diff_cli(scripts, left, right)
    for sc in scripts:
        bad = [d for d in diffs if d.scenario == f"cli:{sc['name']}"]
        print(f"cli:{sc['name']}: {'ok' if not bad else f'{len(bad)} differences'}", flush=True)
        for d in bad:
            print(d.render(left_name, right_name))
    return len(scripts), len(diffs)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trizk.compat.oracle.cli [-k NAME]... [--oracle-vs-oracle]``: the CLI scripts
    only."""
    ap = argparse.ArgumentParser(prog="python -m trizk.compat.oracle.cli", description=main.__doc__)
    ap.add_argument("-k", action="append", default=[], help="only scripts whose name has NAME")
    ap.add_argument("--oracle-vs-oracle", action="store_true")
    args = ap.parse_args(argv)
    left, lname = ("zookeeper", "zookeeper#1") if args.oracle_vs_oracle else ("trizk", "trizk")
    rname = "zookeeper#2" if args.oracle_vs_oracle else "zookeeper"
    total, ndiff = run_cli_suite(left, "zookeeper", lname, rname, args.k)
    print(f"{total} scenarios, {ndiff} differences")
    return 0 if ndiff == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
