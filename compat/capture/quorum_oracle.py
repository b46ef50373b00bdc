"""Record how Apache ZooKeeper 3.8 parses and prints quorum configurations.

A small Java program (source below, compiled into a temp dir against the installed
``zookeeper.jar``) loads each case into a ``java.util.Properties`` and calls ZooKeeper's own
``QuorumPeerConfig.parseDynamicConfig`` (``configBackwardCompatibilityMode`` false for a config
string as peers send it, true for a whole zoo.cfg), then prints ``QuorumVerifier.toString()``
or the exception's class and message. The cases are hand-written edge cases plus seeded random
configurations (sids that collide in Java's hash tables, IPv6, names, client addresses,
observers) and random mutations of valid strings (garbage). The output is
``tests/data/quorum_config_golden.json``, checked by tests/quorum/test_quorum_config.py
against :mod:`trizk.quorum.verifier`.

Usage: ``python -m trizk.compat.capture.quorum_oracle [--out PATH] [--random N] [--seed S]``. Needs
java/javac and the Debian ``zookeeper`` package; a few seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

from trizk.compat.procs.servers import ZK_JARS

JAVA = r"""
import java.io.*;
import java.util.*;
import org.apache.zookeeper.server.quorum.QuorumPeerConfig;
import org.apache.zookeeper.server.quorum.flexible.QuorumVerifier;

// stdin: JSON-free protocol. Each case is "MODE static|dynamic" then the text lines, then a
// line holding only NUL+"END". Output per case: "OK" + toString lines, or "ERR class: msg",
// then NUL+"END".
public class QvOracle {
    public static void main(String[] a) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        StringBuilder sb = new StringBuilder();
        String mode = null;
        String line;
        while ((line = r.readLine()) != null) {
            if (mode == null) { mode = line.substring(5); continue; }
            if (!line.equals("\u0000END")) { sb.append(line).append('\n'); continue; }
            String text = sb.toString();
            sb.setLength(0);
            try {
                Properties p = new Properties();
                p.load(new StringReader(text));
                QuorumVerifier qv = QuorumPeerConfig.parseDynamicConfig(
                    p, 3, false, mode.equals("static"), null);
                out.println("OK");
                out.println(qv.toString());
            } catch (Throwable t) {
                out.println("ERR " + t.getClass().getSimpleName() + ": " + t.getMessage());
            }
            out.println("\u0000END");
            mode = null;
        }
    }
}
"""

HOSTS = ["127.0.0.1", "localhost", "[::1]", "[fe80::1:2]", "zk1.example.com", "10.1.2.3"]


def _member(rng: random.Random) -> str:
    host = rng.choice(HOSTS)
    q = rng.randrange(1024, 65536)
    e = rng.randrange(1024, 65536)
    out = f"{host}:{q}:{e}"
    out += rng.choice(["", "", ":participant", ":observer", ":Observer", ":PARTICIPANT"])
    out += rng.choice(
        [
            "",
            "",
            f";{rng.randrange(1, 65536)}",
            f";127.0.0.1:{rng.randrange(65536)}",
            f";[::1]:{rng.randrange(65536)}",
            f";0.0.0.0:{rng.randrange(65536)}",
        ]
    )
    return out


def _sid(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.6:
        return rng.randrange(0, 40)
    if r < 0.8:
        return rng.choice([16, 32, 48, 64, 65536, 65537, 1 << 32, (1 << 32) + 1, 100, 116])
    return rng.randrange(0, 1 << 40)


def random_config(rng: random.Random) -> str:
    n = rng.choice([0, 1, 2, 3, 3, 5, 5, 7, 9, 13, 20])
    lines = [f"server.{_sid(rng)}={_member(rng)}" for _ in range(n)]
    if rng.random() < 0.8:
        lines.append(
            f"version={rng.choice(['0', '1', '100000000', 'a0000000b', 'ffffffffffffffff'])}"
        )
    rng.shuffle(lines)
    return "\n".join(lines) + "\n"


def random_zoo_cfg(rng: random.Random) -> str:
    base = [
        "tickTime=2000",
        "initLimit=10",
        "syncLimit=5",
        "dataDir=/var/lib/zookeeper",
        "clientPort=2181",
        "4lw.commands.whitelist=*",
        "admin.enableServer=false",
        "autopurge.snapRetainCount=3",
        "maxClientCnxns=60",
        "standaloneEnabled=true",
        "electionAlg=3",
        "quorumListenOnAllIPs=false",
        "clientPortAddress=127.0.0.1",
    ]
    cfg = random_config(rng).splitlines()
    lines = [*rng.sample(base, rng.randrange(len(base) + 1)), *cfg]
    rng.shuffle(lines)
    return "\n".join(lines) + "\n"


def mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randrange(1, 4)):
        op = rng.random()
        i = rng.randrange(len(chars) + 1)
        if op < 0.4 and chars:
            del chars[min(i, len(chars) - 1)]
        elif op < 0.8:
            chars.insert(i, rng.choice(":;|[]=.x0-9 \n#"))
        else:
            chars.insert(i, rng.choice(["server.", ":observer", ";", "]:", "version=", "abc"]))
    return "".join(chars)


HAND_CASES: list[tuple[str, str]] = [
    ("dynamic", ""),
    ("dynamic", "version=0"),
    ("dynamic", "server.1=127.0.0.1:2888:3888\nversion=0"),
    ("dynamic", "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889:observer\n"),
    ("dynamic", "server.1=127.0.0.1:2888:3888:observer\n"),
    ("dynamic", "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n"),
    ("dynamic", "server.1=127.0.0.1:2888:3888:\nserver.2=127.0.0.1:2889:3889;\n"),
    ("dynamic", "server.1=[::1]:2888:3888\nserver.2=[::1]:2889:3889;[::1]:2181\n"),
    ("dynamic", "server.1=[::1]\nserver.2=[::1]:2889:3889\n"),
    ("dynamic", "server.1=[::1:2888:3888\nserver.2=[::1]:2889:3889\n"),
    ("dynamic", "server.1=[::1]:\nserver.2=[::1]:2889:3889\n"),
    ("dynamic", "server.1=h:1:2;a:b:c\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:1:2;x\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:1:2;1;2\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:1:1\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:1:2:voter\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:1:2:participant:x\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:1:2|g:3:4\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:x:2\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:1:y\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:70000:2\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:1:2\nserver.2=h:3:4\nfoo=bar\n"),
    ("dynamic", "server.1=h:1:2\nserver.2=h:3:4\nversion=zz\n"),
    ("dynamic", "server.x=h:1:2\nserver.2=h:3:4\n"),
    ("dynamic", "server.1=h:1:2\nserver.01=h:3:4\nserver.2=h:5:6\n"),
    ("dynamic", "server.1=h:1:2\nserver.1=h:3:4\nserver.2=h:5:6\n"),
    ("dynamic", "server.1=h:1:2\nserver.17=h:3:4\nserver.33=h:5:6\nserver.49=h:7:8\n"),
    ("dynamic", "server.49=h:1:2\nserver.33=h:3:4\nserver.17=h:5:6\nserver.1=h:7:8\n"),
    ("dynamic", "".join(f"server.{i}=h:{2 * i + 1}:{2 * i + 2}\n" for i in range(0, 200, 8))),
    ("dynamic", "".join(f"server.{i * 16 + 3}=h:{2 * i + 1}:{2 * i + 2}\n" for i in range(12))),
    ("dynamic", "server.1=h:1:2\nserver.2=h:3:4\nversion=100000003\n"),
    ("dynamic", "server.1 = h:1:2\n  server.2:h:3:4\n# comment\n! other\nversion 1f\n"),
    ("dynamic", "server.1=h:1:2 \nserver.2=h:3:4:observer \nserver.3=h:5:6\n"),
    ("dynamic", "server.1=:1:2\nserver.2=h:3:4\n"),
    *(
        ("dynamic", f"server.1={h}:1:2\nserver.2=h:3:4\n")
        for h in [
            "127.1",
            "10.012.0.3",
            "1",
            "4294967295",
            "4294967296",
            "1.2.65535",
            "1.2.65536",
            "01.2.3.4",
            "1.2.3.4.5",
            "1..3",
            "256.1.1.1",
            "1.16777215",
            "0x7f.1",
            "1.2.3.",
            "[::ffff:1.2.3.4]",
            "[::1.2.3.4]",
            "[0000:0::01]",
            "[::]",
            "[fe80::1%lo]",
            "[::1]x",
            "[fe80::zz]",
            "[1:2:3:4:5:6:7:8:9]",
            "127.0.0.0001",
        ]
    ),
    ("static", "dataDir=/x\nclientPort=2181\nserver.1=127.0.0.1:2888:3888\n"),
    (
        "static",
        "dataDir=/x\nclientPort=2181\ninitLimit=5\nsyncLimit=2\n"
        "server.1=127.0.0.1:1:2\nserver.17=127.0.0.1:3:4:observer\nserver.2=localhost:5:6;7\n",
    ),
]


def run_oracle(cases: list[tuple[str, str]]) -> list[str]:
    """Run ZooKeeper's parser on each (mode, text); returns "OK\\n<toString>" or "ERR ..."."""
    javac = shutil.which("javac")
    java = shutil.which("java")
    if javac is None or java is None:
        raise SystemExit("java and javac are needed")
    cp = ":".join(ZK_JARS)
    with tempfile.TemporaryDirectory(prefix="trizk-qv-oracle-") as tmp:
        src = Path(tmp) / "QvOracle.java"
        src.write_text(JAVA)
        subprocess.run([javac, "-cp", cp, "-d", tmp, str(src)], check=True)
        stdin = "".join(
            f"MODE {m}\n{t}{'' if t.endswith(chr(10)) or not t else chr(10)}\0END\n"
            for m, t in cases
        )
        proc = subprocess.run(
            [java, "-Dlog4j.configuration=file:/dev/null", "-cp", f"{cp}:{tmp}", "QvOracle"],
            input=stdin.encode(),
            capture_output=True,
            check=True,
            timeout=300,
        )
    out = proc.stdout.decode().split("\0END\n")
    results = [o.rstrip("\n") for o in out[:-1]]
    if len(results) != len(cases):
        raise RuntimeError(f"oracle answered {len(results)} of {len(cases)} cases")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[2] / "tests/data/quorum_config_golden.json"
    ap.add_argument("--out", type=Path, default=default)
    ap.add_argument("--random", type=int, default=150)
    ap.add_argument("--seed", type=int, default=20261123)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    cases = list(HAND_CASES)
    for _ in range(args.random):
        cases.append(("dynamic", random_config(rng)))
    for _ in range(args.random // 3):
        cases.append(("static", random_zoo_cfg(rng)))
    for _ in range(args.random):
        cases.append(("dynamic", mutate(rng, random_config(rng))))
    results = run_oracle(cases)
    data = [
        {"mode": m, "text": t, "zookeeper": r} for (m, t), r in zip(cases, results, strict=True)
    ]
    lines = ",\n".join(json.dumps(d, ensure_ascii=False) for d in data)
    args.out.write_text("[\n" + lines + "\n]\n")
    print(f"{len(data)} cases -> {args.out}")


if __name__ == "__main__":
    main()
