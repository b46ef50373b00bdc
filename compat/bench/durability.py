"""Restart time and snapshot size, trizk vs Apache ZooKeeper, on the same data directory.

``python -m trizk.compat.bench.durability [--nodes 1000000] [--trials 3] [--json F]``

Theory
------
Both servers read the same on-disk format, so the fairest restart comparison starts both on
*identical* bytes: we generate one data dir holding a single snapshot of ``--nodes`` znodes
(``--parents`` parents, 100-byte data each, with the tree digest, as ZooKeeper 3.8 writes it)
and start each server on a fresh copy of it, ABBA order over ``--trials`` trials. The restart
figure is the wall time from ``Popen`` to the first answered request (session handshake +
``exists /``), which includes interpreter/JVM start-up, loading the snapshot and whatever the
server does before it serves (ZooKeeper takes a snapshot of the loaded tree first). The node
count each server reports (``srvr``) is checked, so a server that loaded less fails loudly.

The data dir also holds a log with one txn after the snapshot (a setData), so both servers
replay it and then write a snapshot of the whole tree: ZooKeeper synchronously before serving
(``ZooKeeperServer.loadData`` always snapshots), trizk in the background once serving (it
snapshots after any replay). Snapshot size is that file, ``snapshot.<zxid of the txn>``, as
each server wrote it for the same tree (we wait for it, bounded, before stopping the server).
Both use the same format (FileSnap), so sizes differ only by ACL-cache numbering;
``--compression gz`` sets ``snapshot.compression.method`` for both.

More cells on the same data (``--parents 20`` gives 200,000 znodes with ~10,000 children
under each parent):

* **getChildren of a wide node**: once a server has restarted, one session asks
  ``getChildren /p0000`` (``--children-calls`` times, one request in flight, the reply read
  whole but not decoded); median latency, the server's CPU per call, and whether both servers
  answered the same bytes (the same children in the same HashSet order).
* **Follower SNAP sync** (``--sync``): a 3-member ensemble of each kind on copies of the data
  dir; a follower is killed, a write goes through the leader, the follower's ``version-2``
  is wiped and the follower restarted; the figure is the time from its start to serving as a
  follower with the whole tree (the leader walks its tree onto the link, the follower builds
  its own from it and writes a snapshot at NEWLEADER), with the follower's RSS.
* **Follower DIFF sync** (``--sync``, ``--diff-txns N``, default 400: within both leaders'
  in-memory committed log of 500 txns; 0 for none): on the same ensemble, the follower is
  killed, N setData go through the leader (pipelined) and the follower restarts on its own
  data (it loads its snapshot; the leader sends the N txns as a DIFF, from its committed log
  or its txn log as ZooKeeper decides: the leader's ``zk_diff_count`` must grow); the figure
  is the time from its start to serving as a follower at the leader's last zxid (``srvr``),
  with its RSS.

Each sync trial prints the 1-minute load average after it; ``--rounds N`` runs the sync cells
N times, the two kinds in turn (ABBA), so that both meet the same moods of a shared machine.

Not a test; run by hand. Only processes started here are signalled, by PID.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

from trizk.compat.bench.load import BlockingSession, req, set_frame
from trizk.compat.procs.ensemble import ProcessEnsemble
from trizk.compat.procs.launcher import PAGE, child_pids, start_server
from trizk.jute.codes import OpCode
from trizk.jute.records import GetChildrenRequest, SetDataTxn, StatPersisted, TxnHeader
from trizk.storage.disk import files
from trizk.storage.formats import snapshot, txnlog
from trizk.storage.formats.snapshot import SnapNode, SnapshotContent, SnapshotDigest
from trizk.testing.probes import ask

OPEN = -1
DATA = b"x" * 100


def make_content(nodes: int, parents: int) -> tuple[SnapshotContent, int]:
    """A snapshot of ``nodes`` znodes (parents + children), zxids 1..n in creation order."""
    base = snapshot.initial_content()
    out = list(base.nodes)
    zxid = 0
    t = 1_700_000_000_000
    per = max((nodes - parents) // parents, 1)
    kids: list[list[SnapNode]] = []
    for p in range(parents):
        zxid += 1
        pz = zxid
        children = []
        for c in range(min(per, nodes - parents - p * per)):
            zxid += 1
            st = StatPersisted(zxid, zxid, t, t, 0, 0, 0, 0, zxid)
            children.append(SnapNode(f"/p{p:04d}/n{c:06d}", DATA, OPEN, st))
        last = children[-1].stat.czxid if children else pz
        out_parent = SnapNode(
            f"/p{p:04d}", DATA, OPEN, StatPersisted(pz, pz, t, t, 0, len(children), 0, 0, last)
        )
        kids.append([out_parent, *children])
    root = base.nodes[0]
    root_stat = StatPersisted(0, 0, 0, 0, 0, parents, 0, 0, kids[-1][0].stat.czxid)
    out[0] = SnapNode("", root.data, root.acl, root_stat)
    for group in kids:
        out.extend(group)
    content = SnapshotContent({}, dict(base.acls), out, None)
    digest = content.tree_digest()
    content.digest = SnapshotDigest(zxid, digest)
    return content, zxid


def four(port: int, word: bytes) -> str:
    return ask(port, word, 30).decode()


def node_count(port: int) -> int:
    for line in four(port, b"srvr").splitlines():
        if line.startswith("Node count:"):
            return int(line.split(":")[1])
    return -1


def children_cell(port: int, path: str, calls: int, cpu: object) -> tuple[float, float, str, int]:
    """``calls`` getChildren of ``path``, one in flight: (median latency in µs, the server's
    CPU per call in µs, a hash of the reply body, the number of children). ``cpu`` is the
    server's ``cpu_seconds``."""
    sess = BlockingSession("127.0.0.1", port, timeout=60)
    try:
        fr = req(1, OpCode.GETCHILDREN, GetChildrenRequest(path, False).encode())
        body = sess.request(fr)[16:]
        (count,) = struct.unpack_from(">i", body, 0)
        for _ in range(min(calls, 20)):  # warm-up (trizk builds its cached reply here)
            sess.call(fr)
        assert callable(cpu)
        c0 = cpu()
        lat: list[int] = []
        clock = time.perf_counter_ns
        for _ in range(calls):
            t0 = clock()
            if sess.call(fr):
                raise RuntimeError(f"getChildren {path} failed")
            lat.append(clock() - t0)
        used = cpu() - c0
    finally:
        sess.close()
    digest = hashlib.sha1(body).hexdigest()[:12]
    return statistics.median(lat) / 1000, used / calls * 1e6, digest, count


def _rss(pid: int) -> int:
    pages = 0
    for p in (pid, *child_pids(pid)):
        try:
            with open(f"/proc/{p}/statm") as f:
                pages += int(f.read().split()[1])
        except OSError:
            continue
    return pages * PAGE


def srvr_zxid(port: int) -> int:
    for line in four(port, b"srvr").splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":")[1], 16)
    return -1


def diff_count(port: int) -> int:
    """The leader's ``diff_count`` (``mntr``): DIFF (and TRUNC) syncs it has sent."""
    for line in four(port, b"mntr").splitlines():
        if line.startswith("zk_diff_count"):
            return int(line.split()[1])
    return -1


def write_txns(port: int, count: int, parents: int, tag: str) -> int:
    """``count`` setData of the parents through one session, pipelined 100 at a time; the
    zxid of the last one."""
    sess = BlockingSession("127.0.0.1", port, timeout=60)
    try:
        for first in range(0, count, 100):
            xids = range(first + 1, min(first + 100, count) + 1)
            sess.sock.sendall(
                b"".join(
                    set_frame(x, f"/p{x % parents:04d}", f"{tag}{x}".encode() * 10) for x in xids
                )
            )
            for _ in xids:
                payload = sess.frame()
                _xid, zxid, err = struct.unpack_from(">iqi", payload, 0)
                if err:
                    raise RuntimeError(f"setData through the leader failed: {err}")
        return int(zxid)
    finally:
        sess.close()


def _wait_follower(ens: ProcessEnsemble, kind: str, expected: int, zxid: int, t0: float) -> None:
    deadline = t0 + 600
    while True:
        try:
            if (
                ens.mode(1) == "follower"
                and node_count(ens.port(1)) == expected
                and srvr_zxid(ens.port(1)) >= zxid
            ):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{kind} follower did not sync:\n{ens.tails()}")
        time.sleep(0.05)


#: one sync trial: seconds to serving, the follower's RSS, the 1-minute load average after it
Trial = tuple[float, int, float]


def sync_cell(
    kind: str,
    src: Path,
    expected: int,
    trials: int,
    diff_txns: int = 0,
    parents: int = 20,
) -> tuple[list[Trial], list[Trial]]:
    """Follower SNAP sync on a 3-member ensemble of ``kind`` (see the module docstring):
    [(seconds from the follower's start to serving the whole tree, its RSS, the 1-minute load
    average then)] per trial; then (``diff_txns``) the DIFF sync of a follower restarted on its
    data after missing that many txns, the same figures."""
    out: list[Trial] = []
    diffs: list[Trial] = []
    # ZooKeeper's default tickTime (not the test ensembles' 200 ms): initLimit and syncLimit
    # then leave a large tree's sync the time ZooKeeper's sample configuration gives it
    with ProcessEnsemble(
        {1: kind, 2: kind, 3: kind}, start=False, extra={"tickTime": "2000"}
    ) as ens:
        for m in ens.members.values():
            shutil.copytree(src, m.data_dir / "version-2")
        os.sync()
        for sid in ens.members:
            ens.start(sid)
        ens.wait_leader(3, timeout=600)
        down = [sid for sid in ens.members if not ens.running(sid)]
        if down:  # e.g. a port taken by another process meanwhile
            raise RuntimeError(f"{kind} members {down} did not start:\n{ens.tails()}")
        for t in range(trials):
            ens.kill(1)
            sess = BlockingSession("127.0.0.1", ens.port(3), timeout=60)
            try:
                if sess.call(set_frame(1, "/p0000", f"w{t}".encode())):
                    raise RuntimeError("setData through the leader failed")
            finally:
                sess.close()
            shutil.rmtree(ens.members[1].data_dir / "version-2")
            t0 = time.monotonic()
            ens.start(1)
            _wait_follower(ens, kind, expected, 0, t0)
            took = time.monotonic() - t0
            proc = ens.members[1].proc
            assert proc is not None
            out.append((took, _rss(proc.pid), os.getloadavg()[0]))
            print(
                f"sync trial {t} {kind}: follower serving after {took:.2f} s, "
                f"RSS {out[-1][1] / 2**20:.0f} MiB, load {out[-1][2]:.1f}",
                flush=True,
            )
        for t in range(trials if diff_txns else 0):
            # the follower misses diff_txns txns, then restarts on its own data: it loads
            # its snapshot and log, and the leader sends a DIFF (from its committed log or
            # its txn log, as ZooKeeper decides; checked by the leader's diff_count)
            ens.kill(1)
            before = diff_count(ens.port(3))
            zxid = write_txns(ens.port(3), diff_txns, parents, f"d{t}-")
            t0 = time.monotonic()
            ens.start(1)
            _wait_follower(ens, kind, expected, zxid, t0)
            took = time.monotonic() - t0
            proc = ens.members[1].proc
            assert proc is not None
            diffs.append((took, _rss(proc.pid), os.getloadavg()[0]))
            if diff_count(ens.port(3)) <= before:
                raise RuntimeError(f"{kind} leader sent no DIFF:\n{ens.tails()}")
            print(
                f"diff trial {t} {kind}: follower {diff_txns} txns behind serving after "
                f"{took:.2f} s, RSS {diffs[-1][1] / 2**20:.0f} MiB, load {diffs[-1][2]:.1f}",
                flush=True,
            )
    return out, diffs


def _sync_summary(kind: str, runs: list[Trial], how: str = "SNAP") -> str:
    return (
        f"{kind}: follower {how} sync, median {statistics.median(s[0] for s in runs):.2f} s "
        f"{[round(s[0], 2) for s in runs]}, "
        f"RSS {statistics.median(s[1] for s in runs) / 2**20:.0f} MiB, "
        f"load {min(s[2] for s in runs):.1f}-{max(s[2] for s in runs):.1f}"
    )


def _summaries(kind: str, syncs: dict[str, list[Trial]], diffs: dict[str, list[Trial]]) -> None:
    if syncs.get(kind):
        print(_sync_summary(kind, syncs[kind]))
    if diffs.get(kind):
        print(_sync_summary(kind, diffs[kind], "DIFF"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trizk.compat.bench.durability")
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--parents", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--only", choices=["trizk", "zookeeper"])
    ap.add_argument("--json", metavar="OUT.jsonl")
    ap.add_argument("--compression", choices=["", "gz"], default="")
    ap.add_argument("--children-calls", type=int, default=500)
    ap.add_argument("--sync", action="store_true", help="the follower SNAP sync cell too")
    ap.add_argument("--sync-trials", type=int, default=2)
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with --sync: the sync cells this many times, the two kinds in turn (ABBA)",
    )
    ap.add_argument(
        "--diff-txns",
        type=int,
        default=400,
        help="with --sync: the DIFF sync of a follower that missed this many txns (0: none; "
        "the default stays within both leaders' committed log of 500)",
    )
    a = ap.parse_args(argv)
    kinds = [a.only] if a.only else ["zookeeper", "trizk"]
    work = Path(tempfile.mkdtemp(prefix="trizk-durbench-"))
    try:
        t0 = time.monotonic()
        content, zxid = make_content(a.nodes, a.parents)
        src = work / "src" / "version-2"
        src.mkdir(parents=True)
        raw = snapshot.serialize(content)
        files.write_snapshot(src, zxid, raw)
        expected = len(content.nodes) + 1  # ZooKeeper's node count: the root twice
        # one txn after the snapshot: setData /p0000 (version 1), with the digest after it
        first = next(n for n in content.nodes if n.path == "/p0000")
        zxid += 1
        st = first.stat
        new = StatPersisted(st.czxid, zxid, st.ctime, st.mtime + 1, 1, st.cversion, 0, 0, st.pzxid)
        assert content.digest is not None
        after = (
            content.digest.digest
            - snapshot.node_digest(first.path, first.data, st)
            + snapshot.node_digest(first.path, b"y", new)
        )
        entry = txnlog.TxnEntry(
            TxnHeader(0, 0, zxid, new.mtime, OpCode.SETDATA),
            SetDataTxn(first.path, b"y", 1),
            txnlog.make_digest(after),
        )
        (src / txnlog.log_name(zxid)).write_bytes(
            txnlog.encode_file_header() + txnlog.encode_entry(entry)
        )
        snap_name = snapshot.snapshot_name(zxid, a.compression)
        del content
        print(
            f"data dir: {a.nodes} znodes, snapshot.{zxid - 1:x} of {len(raw)} bytes + log.{zxid:x} "
            f"(generated in {time.monotonic() - t0:.1f} s)",
            flush=True,
        )
        results: dict[str, list[float]] = {k: [] for k in kinds}
        rsses: dict[str, list[int]] = {k: [] for k in kinds}
        kids: dict[str, list[tuple[float, float, str, int]]] = {k: [] for k in kinds}
        sizes: dict[str, tuple[str, int]] = {}
        for trial in range(a.trials):
            order = kinds if trial % 2 == 0 else kinds[::-1]
            for kind in order:
                d = work / f"{kind}-{trial}"
                shutil.copytree(src.parent, d)
                os.sync()
                cfg = {"dataDir": str(d)}
                if a.compression:
                    cfg["snapshot.compression.method"] = a.compression
                srv = start_server(kind, label=f"{kind}-{trial}", extra_cfg=cfg, deadline_s=600)
                try:
                    n = node_count(srv.port)
                    if n != expected:
                        raise RuntimeError(f"{kind} reports {n} znodes, expected {expected}")
                    results[kind].append(srv.startup_s)
                    rss = srv.rss_bytes()
                    rsses[kind].append(rss)
                    if a.children_calls:
                        kids[kind].append(
                            children_cell(srv.port, "/p0000", a.children_calls, srv.cpu_seconds)
                        )
                    wanted = d / "version-2" / snap_name
                    deadline = time.monotonic() + 600
                    while not wanted.exists():  # bounded wait for the post-load snapshot
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"{kind} wrote no {snap_name}")
                        time.sleep(0.1)
                finally:
                    srv.stop()
                sizes[kind] = (snap_name, wanted.stat().st_size)
                print(
                    f"trial {trial} {kind}: restart {srv.startup_s:.2f} s, "
                    f"RSS {rss / 2**20:.0f} MiB, {sizes[kind][0]} "
                    f"{sizes[kind][1]} bytes",
                    flush=True,
                )
                if kids[kind]:
                    lat, cpu_us, digest, count = kids[kind][-1]
                    print(
                        f"trial {trial} {kind}: getChildren /p0000 ({count} children) median "
                        f"{lat:.0f} µs, server CPU {cpu_us:.0f} µs per call, reply {digest}",
                        flush=True,
                    )
                shutil.rmtree(d, ignore_errors=True)
        syncs: dict[str, list[Trial]] = {k: [] for k in kinds}
        diffs: dict[str, list[Trial]] = {k: [] for k in kinds}
        for r in range(a.rounds if a.sync else 0):
            order = kinds if a.sync_trials % 2 else kinds[::-1]
            for kind in order if r % 2 == 0 else order[::-1]:
                more, more_diffs = sync_cell(
                    kind, src, expected, a.sync_trials, a.diff_txns, a.parents
                )
                syncs[kind] += more
                diffs[kind] += more_diffs
        replies = {k: {c[2] for c in kids[k]} for k in kinds}
        if len(kinds) == 2 and all(replies.values()):
            same = replies[kinds[0]] == replies[kinds[1]] and len(replies[kinds[0]]) == 1
            print(f"getChildren replies byte-identical across servers: {same}")
        for kind in kinds:
            if not results[kind]:  # --trials 0: the sync cells alone
                _summaries(kind, syncs, diffs)
                continue
            med = statistics.median(results[kind])
            rss_mib = statistics.median(rsses[kind]) / 2**20
            print(
                f"{kind}: restart with {a.nodes} znodes, median {med:.2f} s {results[kind]}, "
                f"RSS {rss_mib:.0f} MiB"
            )
            if kids[kind]:
                print(
                    f"{kind}: getChildren /p0000, median of trials "
                    f"{statistics.median(c[0] for c in kids[kind]):.0f} µs, server CPU "
                    f"{statistics.median(c[1] for c in kids[kind]):.0f} µs per call"
                )
            _summaries(kind, syncs, diffs)
            if a.json:
                with open(a.json, "a") as f:
                    f.write(
                        json.dumps(
                            {
                                "figure": "restart",
                                "server": kind,
                                "nodes": a.nodes,
                                "seconds": results[kind],
                                "median": med,
                                "snapshot": sizes[kind][0],
                                "snapshot_bytes": sizes[kind][1],
                                "input_snapshot_bytes": len(raw),
                                "rss": rsses[kind],
                                "children_us": [c[0] for c in kids[kind]],
                                "children_cpu_us": [c[1] for c in kids[kind]],
                                "sync_seconds": [s[0] for s in syncs.get(kind, [])],
                                "sync_rss": [s[1] for s in syncs.get(kind, [])],
                                "sync_load": [s[2] for s in syncs.get(kind, [])],
                                "diff_txns": a.diff_txns,
                                "diff_sync_seconds": [s[0] for s in diffs.get(kind, [])],
                                "diff_sync_rss": [s[1] for s in diffs.get(kind, [])],
                                "diff_sync_load": [s[2] for s in diffs.get(kind, [])],
                            }
                        )
                        + "\n"
                    )
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
