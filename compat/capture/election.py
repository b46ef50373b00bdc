"""Record what Apache ZooKeeper members send on the election port (golden test data).

Usage: ``python -m trizk.compat.capture.election OUTDIR``

Two Java voters (sids 2 and 3) and a Java observer (sid 4) are started with a config whose
voter 1 is this recorder. Having higher sids, all Java members connect to us and keep the
connection: we record their initial message and every frame. Once they have elected and the
observer observes, we send the voters a LOOKING notification of round 1 and record the answers
(their FOLLOWING / LEADING state), and we connect to voter 2 as the unknown sid 9 with a LOOKING
notification and record the answer a non-voter gets. Files written to OUTDIR:

* ``initial_<sid>.bin``  -- the initial message bytes as received;
* ``frames_<sid>.bin``   -- the framed stream after it (int length + payload, as received);
* ``nonvoter_9_from_2.bin`` -- voter 2's framed answer to sid 9;
* ``capture.json``       -- ports, the config string, the number of frames per sid.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from trizk.compat.procs.javaquorum import start_java_member, wait_log
from trizk.quorum.election.messages import (
    FrameDecoder,
    Notification,
    encode_frame,
    encode_initial_message,
    parse_initial_message,
)
from trizk.testing.ports import allocate, config_string


async def _capture(out: Path) -> None:
    members = allocate([1, 2, 3, 4], observers=frozenset({4}))
    cfg = config_string(members).encode()
    servers = []
    streams: dict[int, bytearray] = {}
    conns: dict[int, trio.SocketStream] = {}

    async def handle(stream: trio.SocketStream) -> None:
        buf = bytearray()
        while True:
            parsed = parse_initial_message(buf)
            if parsed is not None:
                break
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            buf += chunk
        msg, used = parsed
        (out / f"initial_{msg.sid}.bin").write_bytes(bytes(buf[:used]))
        streams[msg.sid] = bytearray(buf[used:])
        conns[msg.sid] = stream
        while True:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            streams[msg.sid] += chunk

    listeners = await trio.open_tcp_listeners(members[1].election_port, host="127.0.0.1")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, handle, listeners)
            servers = [start_java_member(sid, members) for sid in (2, 3, 4)]
            for srv in servers:
                await trio.to_thread.run_sync(
                    wait_log, srv, r"\] QuorumPeer.*: (LEADING|FOLLOWING|OBSERVING)"
                )
            with trio.fail_after(10):
                while len(conns) < 3:
                    await trio.sleep(0.05)
            note = Notification(0, 1, 0, 1, 0, config=cfg)
            before = {sid: len(b) for sid, b in streams.items()}
            for sid in (2, 3):
                await conns[sid].send_all(encode_frame(note.encode()))
            with trio.fail_after(10):
                while any(len(streams[s]) == before[s] for s in (2, 3)):
                    await trio.sleep(0.05)
            probe = await trio.open_tcp_stream("127.0.0.1", members[2].election_port)
            await probe.send_all(encode_initial_message(9, "127.0.0.1", 1))
            await probe.send_all(encode_frame(note.encode()))
            answer = b""
            with trio.fail_after(10):
                while len(answer) < 4 or len(FrameDecoder().feed(answer)) < 1:
                    chunk = await probe.receive_some(65536)
                    if not chunk:
                        break
                    answer += chunk
            await probe.aclose()
            (out / "nonvoter_9_from_2.bin").write_bytes(answer)
            await trio.sleep(0.5)  # a capture tool: let late frames arrive
            nursery.cancel_scope.cancel()
    finally:
        for srv in servers:
            srv.stop()
    ports = {s: [m.quorum_port, m.election_port, m.client_port] for s, m in members.items()}
    info: dict[str, Any] = {"ports": ports, "config": cfg.decode(), "frames": {}}
    for sid, data in streams.items():
        (out / f"frames_{sid}.bin").write_bytes(bytes(data))
        info["frames"][sid] = len(FrameDecoder().feed(bytes(data)))
    (out / "capture.json").write_text(json.dumps(info, indent=1, sort_keys=True))


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    trio.run(_capture, out)


if __name__ == "__main__":
    main()
