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

Not a test; run by hand. Only processes started here are signalled, by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from trizk.compat.procs.launcher import start_server
from trizk.jute.codes import OpCode
from trizk.jute.records import SetDataTxn, StatPersisted, TxnHeader
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trizk.compat.bench.durability")
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--parents", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--only", choices=["trizk", "zookeeper"])
    ap.add_argument("--json", metavar="OUT.jsonl")
    ap.add_argument("--compression", choices=["", "gz"], default="")
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
                shutil.rmtree(d, ignore_errors=True)
        for kind in kinds:
            med = statistics.median(results[kind])
            print(f"{kind}: restart with {a.nodes} znodes, median {med:.2f} s {results[kind]}")
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
                            }
                        )
                        + "\n"
                    )
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
