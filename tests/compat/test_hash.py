"""The four-letter word ``hash`` on a fresh connection, against ZooKeeper 3.8.0.

ZooKeeper answers it from its digest log (``DataTree.logZxidDigest``): a line
``<hex zxid>: <tree digest>`` for every 128th txn. The digests cover node times, so two servers
never print the same numbers; what must agree is the shape (the same zxids after the same
writes) and that each digest is the tree digest of what that server serves at that zxid. The
writes end exactly at zxid 0x100 (creates up to it after the sessions' txns), so the last line
is the digest of the tree as read back, computed with ZooKeeper's formula. The AdminServer's
``/commands/hash`` lists the same entries, as 3.8.0's Jackson writes them (key order included).
"""

from __future__ import annotations

import json
import re
import urllib.request

import pytest
from kazoo.client import KazooClient

from trizk.compat.procs import servers
from trizk.storage.formats.snapshot import calculate_digest, to_java_long
from trizk.testing.probes import four_letter


def _tree_digest(zk: KazooClient) -> int:
    total = 0
    todo = ["/"]
    while todo:
        path = todo.pop()
        data, st = zk.get(path)
        todo.extend(f"{path.rstrip('/')}/{c}" for c in zk.get_children(path))
        total += calculate_digest(
            path,
            data,
            st.czxid,
            st.mzxid,
            st.pzxid,
            st.ctime,
            st.mtime,
            st.version,
            # DataNode.copyStat shows cversion * 2 - children; the digest has the stored one
            (st.cversion + st.numChildren) // 2,
            st.aversion,
            st.ephemeralOwner,
        )
    return to_java_long(total)


def _run(kind: str) -> tuple[str, str, int, str]:
    """(hash before any write, hash after the writes, the tree digest at 0x100, the
    AdminServer's /commands/hash after the writes)."""
    admin = servers.free_port()
    cfg = {
        "admin.enableServer": "true",
        "admin.serverAddress": "127.0.0.1",
        "admin.serverPort": str(admin),
    }
    with servers.running(kind, cfg) as srv:
        fresh = four_letter(srv.port, "hash")
        zk = KazooClient(hosts=srv.address, timeout=10)
        zk.start(timeout=30)
        try:
            m = re.search(r"Zxid: 0x([0-9a-f]+)\n", four_letter(srv.port, "srvr"))
            assert m is not None
            for i in range(0x100 - int(m.group(1), 16)):
                zk.create(f"/n{i:03d}", str(i).encode())
            assert "Zxid: 0x100\n" in four_letter(srv.port, "srvr")
            digest = _tree_digest(zk)
            url = f"http://127.0.0.1:{admin}/commands/hash"
            with urllib.request.urlopen(url, timeout=10) as rsp:
                text = rsp.read().decode()
            return fresh, four_letter(srv.port, "hash"), digest, text
        finally:
            zk.stop()
            zk.close()


@pytest.mark.parametrize("kind", ["zookeeper", "trizk"])
def test_hash_prints_the_digest_log(needs_zookeeper: None, kind: str) -> None:
    fresh, after, digest, admin = _run(kind)
    assert fresh == ""  # nothing logged before zxid 0x80
    lines = after.splitlines()
    assert after.endswith("\n") and [ln.split(": ")[0] for ln in lines] == ["80", "100"]
    assert all(re.fullmatch(r"[0-9a-f]+: -?[0-9]+", ln) for ln in lines)
    assert lines[-1] == f"100: {digest}"
    entries = json.loads(admin)["digests"]
    assert [list(e) for e in entries] == [["zxid", "digest", "digest_version"]] * 2
    assert [f"{e['zxid']:x}: {e['digest']}" for e in entries] == lines
    assert {e["digest_version"] for e in entries} == {2}
