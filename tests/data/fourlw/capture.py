"""Re-capture the 4lw golden files from a running Apache ZooKeeper 3.8 (standalone).

Usage: python capture.py PORT OUTDIR [fresh|busy|default]

* ``fresh``   — a just-started server with ``4lw.commands.whitelist=*``: every word once.
* ``busy``    — two kazoo sessions holding data/child/exists watches and ephemerals.
* ``default`` — a server with no whitelist: only ``srvr`` answers.

Each answer is stored byte for byte in ``OUTDIR/<scenario>_<word>.txt``. The tests rebuild
a FourLetterView from the values printed in each file and require ``respond()`` to give the
same bytes back, so formats are pinned exactly while values may differ between captures.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

WORDS = [
    "ruok", "srvr", "stat", "cons", "wchs", "wchc", "wchp", "dump", "conf", "envi", "mntr",
    "dirs", "isro", "gtmk", "hash", "crst", "srst",
]  # fmt: skip


def ask(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def main() -> None:
    port, out, scenario = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    out.mkdir(parents=True, exist_ok=True)
    if scenario == "fresh":
        for w in WORDS:
            (out / f"fresh_{w}.txt").write_bytes(ask(port, w.encode()))
        stmk = ask(port, b"stmk" + (0x1F2).to_bytes(8, "big"))
        (out / "fresh_stmk.txt").write_bytes(stmk)
        ask(port, b"stmk" + (306).to_bytes(8, "big"))  # restore the default mask
        (out / "fresh_telnet_close.txt").write_bytes(ask(port, b"\xff\xf4\xff\xfd"))
    elif scenario == "busy":
        from kazoo.client import KazooClient

        a = KazooClient(hosts=f"127.0.0.1:{port}")
        b = KazooClient(hosts=f"127.0.0.1:{port}")
        a.start()
        b.start()
        try:
            a.create("/app", b"hello")
            a.create("/eph1", b"x", ephemeral=True)
            a.create("/app/eph2", b"y", ephemeral=True)
            b.create("/beph", b"", ephemeral=True)
            a.get("/app", watch=lambda e: None)
            a.get_children("/", watch=lambda e: None)
            a.exists("/missing", watch=lambda e: None)
            b.get("/app", watch=lambda e: None)
            b.get("/eph1", watch=lambda e: None)
            info = {
                "a": {"session": a.client_id[0], "port": a._connection._socket.getsockname()[1]},
                "b": {"session": b.client_id[0], "port": b._connection._socket.getsockname()[1]},
            }
            (out / "busy_clients.json").write_text(json.dumps(info, indent=1) + "\n")
            for w in ["stat", "srvr", "cons", "wchs", "wchc", "wchp", "dump", "mntr"]:
                (out / f"busy_{w}.txt").write_bytes(ask(port, w.encode()))
        finally:
            a.stop()
            b.stop()
    elif scenario == "default":
        for w in ["ruok", "srvr", "stat", "mntr", "isro"]:
            (out / f"default_{w}.txt").write_bytes(ask(port, w.encode()))
    else:
        raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    main()
