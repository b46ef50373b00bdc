"""Ask Apache ZooKeeper 3.8.0's own ``QuorumHierarchical`` about hierarchical configs (run by
hand; needs java, javac and zookeeper.jar).

    python tests/quorum/capture_hierarchical_golden.py [out]
    (default: tests/data/quorum/hierarchical_golden.json)

Seeded random configs (members with sids chosen to share Java HashMap bins, observers, groups
with gids in any order, weights including 0, a few broken ones) go to a small Java driver
compiled here against zookeeper.jar. For each config it records ``toString()`` (or the
exception's class and message) and ``containsQuorum`` of random sets of participants.
The test module :mod:`tests.quorum.test_hierarchical` replays them against
:class:`trizk.quorum.verifier.QuorumHierarchical`.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from trizk.compat.procs.servers import zookeeper_jars

DRIVER = r"""
import java.io.*;
import java.util.*;
import org.apache.zookeeper.server.quorum.flexible.QuorumHierarchical;

public class HierDriver {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        StringBuilder props = new StringBuilder();
        List<String> queries = new ArrayList<>();
        String line;
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        while ((line = in.readLine()) != null) {
            if (line.equals("----")) {
                Properties p = new Properties();
                p.load(new StringReader(props.toString()));
                try {
                    QuorumHierarchical qh = new QuorumHierarchical(p);
                    out.println("OK " + qh.toString().replace("\n", "\\n"));
                    for (String q : queries) {
                        Set<Long> set = new HashSet<>();
                        for (String s : q.split(",")) {
                            if (!s.isEmpty()) set.add(Long.parseLong(s));
                        }
                        out.println("Q " + qh.containsQuorum(set));
                    }
                } catch (Exception e) {
                    out.println("ERR " + e.getClass().getSimpleName() + ": " + e.getMessage());
                }
                out.println("END");
                props.setLength(0);
                queries.clear();
            } else if (line.startsWith("?")) {
                queries.add(line.substring(1));
            } else {
                props.append(line).append("\n");
            }
        }
    }
}
"""


def random_case(rng: random.Random) -> tuple[list[str], list[list[int]]]:
    pool = [1, 2, 3, 4, 5, 6, 7, 17, 18, 33, 34, 49, 100, 1000]
    n = rng.randint(2, 9)
    sids = rng.sample(pool, n)
    observers = set(rng.sample(sids, rng.randint(0, 2))) if n > 3 else set()
    participants = [s for s in sids if s not in observers]
    lines = []
    port = 10000
    for s in sids:
        kind = ":observer" if s in observers else ""
        lines.append(f"server.{s}=127.0.0.1:{port + 2 * s}:{port + 2 * s + 1}{kind}")
    ngroups = rng.randint(1, min(4, len(participants)))
    gids = rng.sample([1, 2, 3, 16, 17, 32, 5], ngroups)
    shuffled = participants[:]
    rng.shuffle(shuffled)
    groups: dict[int, list[int]] = {g: [] for g in gids}
    for i, s in enumerate(shuffled):
        groups[gids[i % ngroups]].append(s)
    for g, members in groups.items():
        if members:
            lines.append(f"group.{g}={':'.join(str(s) for s in members)}")
    for s in participants:
        r = rng.random()
        if r < 0.3:
            continue  # default weight 1
        lines.append(f"weight.{s}={rng.choice([0, 0, 1, 2, 3, 5])}")
    if observers and rng.random() < 0.3:
        lines.append(f"weight.{next(iter(observers))}=2")
    rng.shuffle(lines)
    if rng.random() < 0.2:
        lines.append(f"version={rng.choice(['0', '100000000', 'abc'])}")
    queries = []
    for _ in range(12):
        k = rng.randint(0, len(participants))
        queries.append(sorted(rng.sample(participants, k)))
    return lines, queries


BROKEN = [
    ["server.1=127.0.0.1:1:2", "server.2=127.0.0.1:3:4", "group.1=1"],
    ["server.1=127.0.0.1:1:2", "server.2=127.0.0.1:3:4", "group.1=1:2", "group.2=2"],
    ["server.1=127.0.0.1:1:2", "group.x=1"],
    ["server.1=127.0.0.1:1:2", "group.1=1:a"],
    ["server.1=127.0.0.1:1:2", "group.1=1", "weight.1=heavy"],
]


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/quorum/hierarchical_golden.json")
    rng = random.Random(20261127)
    cases = [random_case(rng) for _ in range(150)] + [(b, []) for b in BROKEN]
    jars = ":".join(zookeeper_jars("3.8.0"))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "HierDriver.java").write_text(DRIVER)
        subprocess.run(["javac", "-cp", jars, "HierDriver.java"], cwd=tmp, check=True)
        stdin = ""
        for lines, queries in cases:
            stdin += "".join(x + "\n" for x in lines)
            stdin += "".join("?" + ",".join(map(str, q)) + "\n" for q in queries)
            stdin += "----\n"
        done = subprocess.run(
            ["java", "-Dlog4j.configuration=none", "-cp", f"{tmp}:{jars}", "HierDriver"],
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
    blocks = done.stdout.split("END\n")
    results = []
    for (lines, queries), block in zip(cases, blocks, strict=False):
        rows = block.splitlines()
        head = rows[0]
        case: dict[str, object] = {"config": "\n".join(lines)}
        if head.startswith("OK "):
            case["to_string"] = head[3:].replace("\\n", "\n")
            case["quorums"] = [
                [q, row == "Q true"] for q, row in zip(queries, rows[1:], strict=True)
            ]
        else:
            case["error"] = head[4:]
        results.append(case)
    assert len(results) == len(cases)
    out.parent.mkdir(parents=True, exist_ok=True)
    # one case a line
    out.write_text("[\n" + ",\n".join(json.dumps(c) for c in results) + "\n]\n")
    print(f"{len(results)} cases written to {out}")


if __name__ == "__main__":
    main()
