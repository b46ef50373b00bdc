"""Capture a real ZooKeeper 3.8 leader's quorum stream, posing as a follower (run by hand).

    python tests/quorum/capture_zab_golden.py [out_dir]     (default tests/data/zab)

Starts a 3-member Apache ZooKeeper ensemble on 127.0.0.1 (free ports), writes a few znodes with
kazoo, then connects to the leader's quorum port twice as sid 4 (a learner that is not in the
config, so it does not vote):

* ``diff``: ACKEPOCH with the zxid of the first write -> DIFF + PROPOSAL/COMMIT + NEWLEADER;
  after UPTODATE one more write arrives as PROPOSAL/COMMIT, and a PING is answered;
* ``snap``: ACKEPOCH with zxid 0 -> SNAP + snapshot + NEWLEADER + UPTODATE;
* ``observer``: OBSERVERINFO as sid 5, in sync -> empty DIFF ...; a write arrives as INFORM.

Each run's bytes from the leader are saved raw (``<name>.leader.bin``), what we sent as
``<name>.learner.bin``, plus ``meta.json`` (the epoch, config and zxids). Every process started
is stopped by its PID.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kazoo.client import KazooClient

from trizk.compat.procs.servers import _command
from trizk.jute.records import QuorumPacket
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    SnapshotPayload,
    encode_ackepoch_data,
    encode_learner_info,
    packet,
)
from trizk.testing.ports import free_port
from trizk.testing.probes import four_letter

P = PacketType


def four(port: int, cmd: bytes) -> str:
    return four_letter(port, cmd.decode(), 2)


class Link:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.dec = QuorumStreamDecoder()
        self.rx = bytearray()
        self.tx = bytearray()

    def send(self, qp: QuorumPacket) -> None:
        b = qp.encode()
        self.tx += b
        self.sock.sendall(b)

    def next(self) -> QuorumPacket | SnapshotPayload:
        deadline = time.monotonic() + 20
        while True:
            ev = self.dec.next_event()
            if ev is not None:
                return ev
            if time.monotonic() > deadline:
                raise TimeoutError("no packet from the leader")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("leader closed")
            self.rx += chunk
            self.dec.feed(chunk)

    def until(self, t: int) -> list[QuorumPacket | SnapshotPayload]:
        seen = []
        while True:
            ev = self.next()
            seen.append(ev)
            if isinstance(ev, QuorumPacket) and ev.type == t:
                return seen


def session(
    port: int, peer_zxid: int, zk: KazooClient | None, observer: bool = False
) -> tuple[Link, dict[str, int]]:
    ln = Link(port)
    kind = P.OBSERVERINFO if observer else P.FOLLOWERINFO
    ln.send(packet(kind, 0, encode_learner_info(5 if observer else 4)))
    li = ln.next()
    assert isinstance(li, QuorumPacket) and li.type == P.LEADERINFO, li
    ln.send(packet(P.ACKEPOCH, peer_zxid, encode_ackepoch_data(0)))
    evs = ln.until(P.NEWLEADER)
    nl = evs[-1]
    assert isinstance(nl, QuorumPacket)
    ln.send(packet(P.ACK, nl.zxid))
    ln.until(P.UPTODATE)
    ln.send(packet(P.ACK, nl.zxid))
    info = {"newleader_zxid": nl.zxid}
    if zk is not None and observer:
        zk.create("/golden/observed", b"seen")
        inform = ln.until(P.INFORM)[-1]
        assert isinstance(inform, QuorumPacket)
        info["inform_zxid"] = inform.zxid
    elif zk is not None:
        zk.create("/golden/after", b"late")
        prop = ln.until(P.PROPOSAL)[-1]
        assert isinstance(prop, QuorumPacket)
        ln.send(packet(P.ACK, prop.zxid))
        ln.until(P.COMMIT)
        info["late_zxid"] = prop.zxid
    ping = ln.until(P.PING)[-1]
    assert isinstance(ping, QuorumPacket)
    ln.send(QuorumPacket(int(P.PING), ping.zxid, b"", ping.authinfo))
    ln.until(P.PING)
    ln.sock.close()
    return ln, info


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/zab")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="trizk-zabgold-"))
    members = {i: (free_port(), free_port(), free_port()) for i in (1, 2, 3)}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, (cport, _, _) in members.items():
            d = work / f"m{i}"
            (d / "data").mkdir(parents=True)
            (d / "data" / "myid").write_text(f"{i}\n")
            lines = [
                "tickTime=200",
                "initLimit=20",
                "syncLimit=10",
                f"dataDir={d / 'data'}",
                f"clientPort={cport}",
                "clientPortAddress=127.0.0.1",
                "admin.enableServer=false",
                "4lw.commands.whitelist=*",
            ] + [f"server.{j}=127.0.0.1:{q}:{e}" for j, (_, q, e) in members.items()]
            (d / "zoo.cfg").write_text("\n".join(lines) + "\n")
            log = open(d / "server.log", "wb")
            procs.append(
                subprocess.Popen(
                    _command("zookeeper", d / "zoo.cfg", d),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=d,
                )
            )
            log.close()
        leader = None
        deadline = time.monotonic() + 60
        while leader is None and time.monotonic() < deadline:
            for i, (cport, _, _) in members.items():
                if "Mode: leader" in four(cport, b"srvr"):
                    leader = i
            time.sleep(0.2)  # bounded readiness poll
        assert leader is not None, "no leader elected"
        hosts = ",".join(f"127.0.0.1:{c}" for c, _, _ in members.values())
        zk = KazooClient(hosts=hosts, timeout=10)
        zk.start(timeout=20)
        zk.create("/golden", b"root")
        first = zk.create("/golden/a", b"A", sequence=True)
        zk.set("/golden", b"root2")
        zk.delete(first)
        zxids = [zk.exists("/golden").mzxid, zk.exists("/golden").czxid]
        qport = members[leader][1]
        diff, dinfo = session(qport, min(zxids), zk)
        snap, sinfo = session(qport, 0, None)
        obs, oinfo = session(qport, dinfo["late_zxid"], zk, observer=True)
        zk.stop()
        zk.close()
        for name, ln in (("diff", diff), ("snap", snap), ("observer", obs)):
            (out / f"{name}.leader.bin").write_bytes(bytes(ln.rx))
            (out / f"{name}.learner.bin").write_bytes(bytes(ln.tx))
        meta = {
            "zookeeper": "3.8.0 (Debian)",
            "leader": leader,
            "members": {str(k): list(v) for k, v in members.items()},
            "diff_peer_zxid": min(zxids),
            "diff": dinfo,
            "snap": sinfo,
            "observer": oinfo,
        }
        (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(json.dumps(meta, indent=1))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
