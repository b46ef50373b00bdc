"""What a learner can make a leader hold is bounded: a raw quorum-port peer that registers as
an observer, syncs, and then floods REQUESTs, PINGs with huge touch lists, or a packet over
the size cap loses its link (with a log line); the ensemble carries on serving.

ZooKeeper's LearnerHandler hands REQUESTs straight to the leader's prep queue, unbounded; trizk
feeds them to the sequencer under the leader's globalOutstandingLimit and closes a link with
too many waiting (see ``trizk.quorum.zab.leader``'s docstring).
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.shell.test_ensemble import DEADLINE, Ensemble
from trizk.jute import records as R
from trizk.jute.codes import OpCode
from trizk.quorum.zab import leader as leader_mod
from trizk.quorum.zab.zabwire import (
    PacketType,
    QuorumStreamDecoder,
    encode_ackepoch_data,
    encode_learner_info,
    encode_packet,
    encode_touches,
    packet,
)

P = PacketType
RAW_SID = 99


class RawLearner:
    """A quorum-port peer speaking just enough Zab to reach BROADCAST as an observer."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.sock = socket.create_connection(addr, timeout=DEADLINE)
        self.decoder = QuorumStreamDecoder()

    def send(self, qp: R.QuorumPacket) -> None:
        self.sock.sendall(encode_packet(qp))

    def receive(self) -> R.QuorumPacket | None:
        """The next packet (SNAP payloads skipped); None at end of stream."""
        while True:
            ev = self.decoder.next_event()
            if isinstance(ev, R.QuorumPacket):
                return ev
            if ev is not None:
                continue
            try:
                data = self.sock.recv(1 << 16)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.decoder.feed(data)

    def sync(self) -> None:
        """OBSERVERINFO, ACKEPOCH, the leader's sync up to NEWLEADER, its ACK, UPTODATE."""
        self.send(packet(P.OBSERVERINFO, 0, encode_learner_info(RAW_SID)))
        info = self.receive()
        assert info is not None and info.type == P.LEADERINFO, info
        self.send(packet(P.ACKEPOCH, 0, encode_ackepoch_data(0)))
        while (qp := self.receive()) is not None and qp.type != P.NEWLEADER:
            pass
        assert qp is not None, "the leader closed the link during sync"
        self.send(packet(P.ACK, qp.zxid))
        while (qp := self.receive()) is not None and qp.type != P.UPTODATE:
            pass
        assert qp is not None, "no UPTODATE"

    def closed_by_leader(self) -> bool:
        """Read (answering nothing) until the leader closes the link; False on a timeout."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            try:
                if self.receive() is None:
                    return True
            except (TimeoutError, OSError):
                return False
        return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def ensemble(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ensemble]:
    # small caps so that a test's flood passes them quickly (the Leader reads them at start)
    monkeypatch.setattr(leader_mod, "MAX_LEARNER_REQUESTS", 300)
    monkeypatch.setattr(leader_mod, "MAX_TOUCHES", 1000)
    ens = Ensemble(tmp_path, 3, globalOutstandingLimit=20)
    try:
        ens.wait_serving()
        yield ens
    finally:
        ens.close()


def raw_learner(ens: Ensemble) -> RawLearner:
    raw = RawLearner(ens.members[ens.leader()].quorum)
    raw.sync()
    return raw


def still_serving(ens: Ensemble, leader: int) -> None:
    """The same leader, and a write through a follower reaches every member."""
    assert ens.leader() == leader
    follower = next(i for i in ens.servers if i != leader)
    zk = ens.client(follower)
    try:
        zk.create("/after", b"ok")
    finally:
        zk.stop()
        zk.close()
    for i in ens.servers:
        zk = ens.client(i)
        try:
            zk.sync("/")
            assert zk.get("/after")[0] == b"ok"
        finally:
            zk.stop()
            zk.close()


def request(cxid: int) -> R.QuorumPacket:
    body = R.SetDataRequest("/flood", b"x" * 16, -1).encode()
    data = struct.pack(">qii", 0x1234, cxid, OpCode.SETDATA) + body
    return R.QuorumPacket(int(P.REQUEST), -1, data, None)


def flood_of_requests() -> bytes:
    return b"".join(encode_packet(request(i)) for i in range(1, 5001))


def huge_touch_list() -> bytes:
    return encode_packet(packet(P.PING, 0, encode_touches({0x5000 + i: 4000 for i in range(1001)})))


def oversized_packet() -> bytes:
    # a REQUEST whose data length claims 64 MiB: refused from its header, nothing buffered
    return struct.pack(">iqi", int(P.REQUEST), -1, 64 << 20) + b"\0" * 4096


@pytest.mark.parametrize(
    ("garbage", "logged"),
    [
        (flood_of_requests, "REQUESTs"),
        (huge_touch_list, "session touches"),
        (oversized_packet, "bad bytes on a quorum link"),
    ],
    ids=["request-flood", "touch-list", "oversized-packet"],
)
def test_a_learner_sending_too_much_loses_its_link(
    ensemble: Ensemble,
    caplog: pytest.LogCaptureFixture,
    garbage: Callable[[], bytes],
    logged: str,
) -> None:
    caplog.set_level(logging.WARNING, logger="trizk.quorum")
    leader = ensemble.leader()
    raw = raw_learner(ensemble)
    try:
        try:
            raw.sock.sendall(garbage())
        except OSError:
            pass  # closed while we were still sending: fine
        assert raw.closed_by_leader()
    finally:
        raw.close()
    assert any("closing" in m and logged in m for m in caplog.messages), caplog.messages
    still_serving(ensemble, leader)
