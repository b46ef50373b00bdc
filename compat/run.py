"""``python -m trizk.compat.run``: the compatibility suite, in full, from one command.

Runs every scenario of ``compat/scenarios/`` on trizk and on real Apache ZooKeeper (fresh
servers each time), normalises both transcripts (:mod:`trizk.compat.oracle.normalise`), and prints
``N scenarios, M differences`` followed by each difference (the op, and both answers).

Options::

    --oracle-vs-oracle    ZooKeeper against a second ZooKeeper (must report 0 differences:
                          the proof that the normaliser is fair)
    --oracle VERSION      the ZooKeeper release to compare with, 3.9.3 (default) or 3.8.0;
                          trizk answers as the same release (trizk.zookeeperVersion)
    --ci                  only the fast subset marked "ci" in the scenario files
    -k NAME               only scenarios whose name contains NAME (repeatable)
    --random N --seed S   also N random scenarios from the grammar (seeds S, S+1, ...),
                          each difference shrunk to a shortest reproducing sequence
    --length L            steps per random scenario (default 60)
    --sort-children       compare child lists as sets (default: as sent, HashSet order)
    --no-cli              skip the zkCli.sh / cli_mt scripted sessions (run by default;
                          also skipped with -k, --ci or --no-scenarios)
    --no-scenarios        only the random mode
    --show                print both normalised transcripts of each scenario

Conformance of any ZooKeeper server (:mod:`trizk.compat.oracle.conformance`; every scenario,
random sequences and the wire fuzzer, then a feature-by-feature report)::

    --oracle VERSION      the judge: Apache ZooKeeper 3.9.3 (default) or 3.8.0
    --candidate HOST:PORT a server someone else runs (scenarios under chroots; those that need
                          a server of their own are skipped)
    --candidate-cmd CMD   a server this tool starts as often as needed: CMD names {cfg}, the
                          zoo.cfg it writes ({port}, {dataDir} and {dir} are filled in too)
    --candidate-template FILE   the zoo.cfg of --candidate-cmd, with {port} and {dataDir}
    --candidate-cfg KEY=VALUE   a zoo.cfg key the candidate runs with (the oracle gets it too)
    --random N            random sequences (default 20 in a conformance run)
    --fuzz-seconds S      seconds of the wire fuzzer (default 60 in a conformance run)

Exit status: 0 when there are no differences, 1 otherwise, 2 when the candidate cannot be
used (a one-line error).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from trizk.compat.oracle.compare import (
    Difference,
    ServerPool,
    Tamper,
    compare_scenario,
    load_scenarios,
)
from trizk.compat.oracle.randomgen import count_malformed, generate, shrink
from trizk.compat.oracle.scenario import Step, describe_step
from trizk.compat.procs import servers


def _print_diffs(diffs: list[Difference], left: str, right: str, limit: int = 20) -> None:
    for d in diffs[:limit]:
        print(d.render(left, right))
    if len(diffs) > limit:
        print(f"  ... and {len(diffs) - limit} more differences in this scenario")


@dataclass
class Shrunk:
    seed: int
    steps: list[Step]
    diffs: list[Difference]  # on fresh servers (empty: did not reproduce)


def run_random(
    n: int,
    seed: int,
    length: int,
    left: str,
    right: str,
    sort_children: bool = False,
    *,
    tamper: Tamper | None = None,
    shrink_budget: int = 200,
) -> tuple[int, int, list[Shrunk]]:
    """N random scenarios on one long-lived server pair; each difference shrunk and confirmed
    on fresh servers. Returns (scenarios, differences, shrunk sequences)."""
    count = 0
    ndiff = 0
    malformed = 0
    found: list[Shrunk] = []
    with ServerPool() as lp, ServerPool() as rp:

        def compare(sc: dict[str, Any]) -> list[Difference]:
            d, _, _ = compare_scenario(
                sc, left, right, sort_children=sort_children, tamper=tamper, pools=(lp, rp)
            )
            return d

        for k in range(n):
            sc = generate(seed + k, length)
            count += 1
            malformed += count_malformed(sc["steps"])
            diffs = compare(sc)
            if not diffs:
                print(f"random seed {seed + k}: no difference", flush=True)
                continue
            ndiff += len(diffs)
            print(f"random seed {seed + k}: {len(diffs)} differences; shrinking...", flush=True)

            def differs(steps: list[Step], sc: dict[str, Any] = sc) -> bool:
                return bool(compare(dict(sc, steps=steps)))

            small = shrink(sc["steps"], differs, budget=shrink_budget)
            small_sc = dict(sc, name=sc["name"] + "-shrunk", steps=small)
            # Confirm on fresh servers: the reported sequence reproduces from scratch.
            d2, _, _ = compare_scenario(
                small_sc, left, right, sort_children=sort_children, tamper=tamper
            )
            found.append(Shrunk(seed + k, small, d2))
            print(f"shortest reproducing sequence ({len(small)} of {len(sc['steps'])} steps):")
            for i, st in enumerate(small):
                print(f"  {i}: {describe_step(st)}")
            print("  as scenario data: " + json.dumps(small_sc))
            if not d2:
                print("  (did not reproduce on fresh servers: history- or timing-dependent?)")
            _print_diffs(d2, left, right)
    print(f"random mode: {count} sequences, {malformed} malformed requests among their steps")
    return count, ndiff, found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m trizk.compat.run",
        description=(__doc__ or "").split("Options::")[0].strip(),
        epilog="Options::" + (__doc__ or "").split("Options::")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--oracle-vs-oracle", action="store_true")
    ap.add_argument("--ci", action="store_true")
    ap.add_argument("-k", action="append", default=[])
    ap.add_argument("--random", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--length", type=int, default=60)
    ap.add_argument("--no-scenarios", action="store_true", help="only the random mode")
    ap.add_argument("--sort-children", action="store_true")
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--show", action="store_true", help="print both normalised transcripts")
    ap.add_argument("--oracle", default=servers.DEFAULT_VERSION, choices=servers.ZK_VERSIONS)
    ap.add_argument("--candidate", metavar="HOST:PORT")
    ap.add_argument("--candidate-cmd", metavar="COMMAND")
    ap.add_argument("--candidate-template", metavar="FILE")
    ap.add_argument("--candidate-cfg", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--fuzz-seconds", type=float, default=None)
    args = ap.parse_args(argv)
    if args.candidate or args.candidate_cmd:
        from trizk.compat.oracle import conformance

        return conformance.main(args)

    # the kinds carry the release (servers.split_kind): the oracle's, and the one trizk answers as
    oracle = f"zookeeper@{args.oracle}"
    left, right = (oracle, oracle) if args.oracle_vs_oracle else (f"trizk@{args.oracle}", oracle)
    lname, rname = (
        ("zookeeper#1", "zookeeper#2") if args.oracle_vs_oracle else ("trizk", "zookeeper")
    )
    total = 0
    ndiff = 0
    if not args.no_scenarios:
        for sc in load_scenarios():
            if args.ci and not sc.get("ci"):
                continue
            if args.k and not any(k in sc["name"] for k in args.k):
                continue
            total += 1
            try:
                diffs, lt, rt = compare_scenario(sc, left, right, sort_children=args.sort_children)
            except Exception as e:  # a server that does not start is a difference, not a crash
                print(f"[{sc['name']}] could not run: {type(e).__name__}: {e}")
                ndiff += 1
                continue
            status = "ok" if not diffs else f"{len(diffs)} differences"
            if args.show:
                for name, t in ((lname, lt), (rname, rt)):
                    print(f"--- {sc['name']} on {name}")
                    for label, entries in t.items():
                        for entry in entries:
                            step = entry.get("step", -1)
                            where = (
                                describe_step(sc["steps"][step])
                                if 0 <= step < len(sc["steps"])
                                else ""
                            )
                            line = json.dumps(entry, sort_keys=True)
                            print(f"  {label} {line}   # {where}")
            print(f"{sc['name']}: {status}", flush=True)
            ndiff += len(diffs)
            _print_diffs(diffs, lname, rname)
    if args.random:
        c, d, _ = run_random(args.random, args.seed, args.length, left, right, args.sort_children)
        total += c
        ndiff += d
    if not args.no_cli and not args.no_scenarios and not args.ci:
        from trizk.compat.oracle.cli import run_cli_suite

        c, d = run_cli_suite(left, right, lname, rname, args.k or ())
        total += c
        ndiff += d
    print(f"{total} scenarios, {ndiff} differences")
    return 0 if ndiff == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
