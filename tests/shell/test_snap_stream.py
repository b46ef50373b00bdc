"""A leader streams a SNAP body while its pump goes on: a learner that takes the SNAP of a large
tree and reads nothing more stalls the walk (the link's writer makes a piece only as the socket
takes the last), and meanwhile a write through another follower commits and is answered; the
packets for the stalled learner are held behind its body and reach it in order once it reads
(``LearnerHandler``: the snapshot written onto the socket, ``queuedPackets`` sent after it).

In-process members (tests/shell/test_ensemble.py's Ensemble) and a raw quorum-port observer
with a small receive buffer, over loopback; every wait bounded.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.shell.test_ensemble import DEADLINE, Ensemble
from trizk.jute import records as R
from trizk.quorum.zab.zab import Timing
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    SnapshotPayload,
    encode_ackepoch_data,
    encode_learner_info,
    encode_packet,
    packet,
)
from trizk.server.shell.ensemble import leading
from trizk.storage.formats import treeio

P = PacketType
RAW_SID = 99
#: 20,000 znodes of 800 bytes: a ~17 MB body, several times what the loopback sockets between
#: the leader and a learner that does not read can hold (tcp_wmem's 4 MiB at most, plus the
#: learner's 64 KiB receive buffer)
NODES = 20_000
DATA = b"d" * 800
#: initLimit 10 s: the raw learner's sync lasts as long as the test keeps it stalled
TIMING = Timing(tick_ms=100, init_limit=100, sync_limit=10)


def populate(zk: KazooClient) -> None:
    zk.create("/t", b"")
    for start in range(0, NODES, 400):
        tx = zk.transaction()
        for i in range(start, min(start + 400, NODES)):
            tx.create(f"/t/n{i:05d}", DATA)
        assert all(r is True or isinstance(r, str) for r in tx.commit())


class StalledLearner:
    """An observer that registers, gets the leader's SNAP packet and then reads nothing until
    asked (a 64 KiB receive buffer, set before connecting so the window stays small)."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        self.sock.settimeout(DEADLINE)
        self.sock.connect(addr)
        self.decoder = QuorumStreamDecoder(max_length=1 << 30)

    def send(self, qp: R.QuorumPacket) -> None:
        self.sock.sendall(encode_packet(qp))

    def event(self) -> R.QuorumPacket | SnapshotPayload:
        while (ev := self.decoder.next_event()) is None:
            data = self.sock.recv(1 << 16)
            assert data, "the leader closed the link"
            self.decoder.feed(data)
        assert isinstance(ev, R.QuorumPacket | SnapshotPayload)
        return ev

    def until_snap(self) -> int:
        self.send(packet(P.OBSERVERINFO, 0, encode_learner_info(RAW_SID)))
        info = self.event()
        assert isinstance(info, R.QuorumPacket) and info.type == P.LEADERINFO, info
        self.send(packet(P.ACKEPOCH, 0, encode_ackepoch_data(0)))
        snap = self.event()  # what the decoder took beyond it waits in the socket's buffers
        assert isinstance(snap, R.QuorumPacket) and snap.type == P.SNAP, snap
        return snap.zxid

    def close(self) -> None:
        self.sock.close()


def snap_links(ens: Ensemble, sid: int) -> list[bool]:
    """Whether each of member ``sid``'s quorum links is streaming a body."""
    server = ens.servers[sid].server
    assert server is not None and server.peer is not None
    peer = server.peer
    return list(ens.servers[sid].call(lambda: [lk.streaming for lk in peer.links()]))


def test_a_commit_to_another_follower_is_not_held_behind_a_long_snap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="trizk.quorum")
    # smaller pieces than production's: many of them in a body of test size
    monkeypatch.setattr(leading, "SNAP_STREAM_STEP", 512)
    ens = Ensemble(tmp_path, 3, timing=TIMING)
    raw: StalledLearner | None = None
    try:
        ens.wait_serving()
        leader = ens.leader()
        follower = next(i for i in ens.servers if i != leader)
        zk = ens.client(leader)
        try:
            populate(zk)
        finally:
            zk.stop()
            zk.close()
        caplog.clear()  # the members' own syncs logged theirs
        raw = StalledLearner(ens.members[leader].quorum)
        snap_zxid = raw.until_snap()
        # the learner reads no more: the leader's walk stalls once the sockets are full
        zk = ens.client(follower)
        try:
            st = zk.set("/t/n00000", b"during the SNAP")
            written = st.mzxid
            assert zk.get("/t/n00000")[0] == b"during the SNAP"
        finally:
            zk.stop()
            zk.close()
        assert written > snap_zxid
        # committed and answered through the follower while the body is still being walked
        assert "SNAP to link" not in caplog.text  # the walk's end is logged
        assert True in snap_links(ens, leader)
        # now it reads: the whole body, then what was held behind it, in order
        payload = raw.event()
        assert isinstance(payload, SnapshotPayload)
        loaded = treeio.load_snapshot_body(payload.body, snap_zxid).replica.tree
        assert sum(1 for p in loaded.nodes if p.startswith("/t/")) == NODES
        after: list[R.QuorumPacket] = []
        while not after or after[-1].type != P.UPTODATE:
            ev = raw.event()
            assert isinstance(ev, R.QuorumPacket), "a second payload"
            after.append(ev)
            if ev.type == P.NEWLEADER:
                raw.send(packet(P.ACK, ev.zxid))
        kinds = [(PacketType(q.type).name, q.zxid) for q in after if q.type != P.PING]
        assert kinds.index(("NEWLEADER", kinds[0][1])) == 0, kinds
        assert ("INFORM", written) in kinds, kinds
        assert "SNAP to link" in caplog.text
        assert True not in snap_links(ens, leader)
    finally:
        if raw is not None:
            raw.close()
        ens.close()
