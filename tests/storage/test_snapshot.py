"""Snapshot format and tree digest against snapshots written by Apache ZooKeeper 3.8."""

from __future__ import annotations

import importlib.util
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.jute.records import ACL, Id, StatPersisted
from trizk.storage.disk import files
from trizk.storage.formats import snapshot
from trizk.storage.formats.snapshot import (
    SnapNode,
    SnapshotContent,
    SnapshotDigest,
    SnapshotFormatError,
)

DATA = Path(__file__).parents[1] / "data" / "zkdata"
V2 = DATA / "version-2"
COMPRESSED = DATA / "compressed"

_spec = importlib.util.spec_from_file_location("zkrun", DATA / "zkrun.py")
assert _spec is not None and _spec.loader is not None
zkrun = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zkrun)
needs_java = pytest.mark.skipif(not zkrun.java_available(), reason="Apache ZooKeeper not installed")

STAT0 = StatPersisted(0, 0, 0, 0, 0, 0, 0, 0, 0)


def test_golden_initial_snapshot() -> None:
    c = snapshot.parse((V2 / "snapshot.0").read_bytes())
    assert c.sessions == {} and c.dbid == -1
    assert c.acls == {1: (ACL(1, Id("world", "anyone")),)}  # READ_ACL_UNSAFE for /zookeeper/config
    assert [n.path for n in c.nodes] == ["", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"]
    assert c.nodes[2].acl == 1 and c.nodes[2].stat.aversion == -1
    assert c.digest == SnapshotDigest(0, 0, 2)  # "empty digest": no txn applied yet


def test_initial_content_is_zookeepers_snapshot_0() -> None:
    assert snapshot.serialize(snapshot.initial_content()) == (V2 / "snapshot.0").read_bytes()


def test_golden_snapshot_content() -> None:
    c = snapshot.parse((V2 / "snapshot.23").read_bytes())
    assert list(c.sessions.values()) == [10000]
    sid = next(iter(c.sessions))
    by_path = {n.path: n for n in c.nodes}
    assert c.nodes[0].path == ""
    assert by_path["/app"].data == b"v17" and by_path["/app"].stat.version == 18
    assert by_path["/app/eph"].stat.ephemeralOwner == sid
    assert by_path["/cont"].stat.ephemeralOwner == -(1 << 63)  # container
    assert by_path["/ttl"].stat.ephemeralOwner >> 56 == -1  # TTL: 0xFF top byte
    assert by_path["/app/utf8-\u00e9\u4e2d"].data == "d\u00e9j\u00e0 vu".encode()
    acl = c.acls[by_path["/acl"].acl]
    assert acl[0].id.scheme == "digest" and acl[1] == ACL(1, Id("world", "anyone"))
    # Parents precede children (DataTree.deserialize requires it).
    seen = {""}
    for n in c.nodes[1:]:
        assert n.path.rsplit("/", 1)[0] in seen
        seen.add(n.path)
    assert c.digest is not None and c.digest.zxid == 0x23


def test_tree_digest_matches_zookeeper() -> None:
    """Our DigestCalculator/AdHash equals the digest ZooKeeper stored (snapshot and log)."""
    c = snapshot.parse((V2 / "snapshot.23").read_bytes())
    assert c.digest is not None
    assert c.tree_digest() == c.digest.digest == 36300875851
    from trizk.storage.formats import txnlog

    entries = {e.entry.zxid: e.entry for e in txnlog.scan((V2 / "log.1").read_bytes())[0]}
    assert entries[0x23].digest is not None
    assert entries[0x23].digest.treeDigest == c.tree_digest()
    # The initial tree: only "" and "/zookeeper" count, "/zookeeper/..." is excluded.
    c0 = snapshot.parse((V2 / "snapshot.0").read_bytes())
    assert c0.tree_digest() == entries[1].digest.treeDigest  # type: ignore[union-attr]
    assert snapshot.node_digest("/zookeeper/quota", b"x", STAT0) == 0
    assert snapshot.node_digest("/", b"", STAT0) == snapshot.node_digest("", None, STAT0)
    assert snapshot.node_digest("/zookeeper", b"", STAT0) != 0


def test_golden_snapshots_serialize_byte_identically() -> None:
    for name in ("snapshot.0", "snapshot.23"):
        data = (V2 / name).read_bytes()
        assert snapshot.serialize(snapshot.parse(data)) == data


@pytest.mark.parametrize("name", ["snapshot.19.snappy", "snapshot.20.gz"])
def test_compressed_golden_snapshots(name: str) -> None:
    c = snapshot.parse((COMPRESSED / name).read_bytes())
    paths = {n.path for n in c.nodes}
    assert {f"/n{i}" for i in range(20)} <= paths
    n5 = next(n for n in c.nodes if n.path == "/n5")
    assert n5.data == b"x" * 200 + b"\x05"
    assert c.digest is not None and c.tree_digest() == c.digest.digest
    assert snapshot.compression_of((COMPRESSED / name).read_bytes()) == name.rsplit(".", 1)[1]


def test_gzip_roundtrip() -> None:
    c = snapshot.parse((V2 / "snapshot.23").read_bytes())
    gz = snapshot.serialize(c, compression="gz")
    assert gz[:2] == b"\x1f\x8b" and snapshot.parse(gz) == c
    with pytest.raises(ValueError):
        snapshot.serialize(c, compression="snappy")


def test_snappy_raw_decoder() -> None:
    # literal "ab", then copy (1-byte offset form) len 6 offset 2: overlapping -> "abababab"
    block = bytes([8, 0b0000_0100, ord("a"), ord("b"), 0b0000_1001, 2])
    assert snapshot.snappy_raw_decompress(block) == b"abababab"
    # 2-byte-offset copy, non-overlapping
    block = bytes([8, 3 << 2, *b"wxyz", (4 - 1) << 2 | 2, 4, 0])
    assert snapshot.snappy_raw_decompress(block) == b"wxyzwxyz"
    with pytest.raises(SnapshotFormatError):
        snapshot.snappy_raw_decompress(bytes([4, 0b0000_1001, 9]))  # copy before any output
    with pytest.raises(SnapshotFormatError):
        snapshot.snappy_raw_decompress(bytes([9, 0b0000_0100, ord("a"), ord("b")]))  # short


def test_every_truncation_is_rejected_or_drops_only_the_digest() -> None:
    data = (V2 / "snapshot.23").read_bytes()
    full = snapshot.parse(data)
    tree_end = len(data) - (8 + 4 + 8 + 8 + 5)  # after the first seal
    for cut in range(tree_end):
        with pytest.raises(SnapshotFormatError):
            snapshot.parse(data[:cut])
    # A torn digest section reads as "no digest" (DataTree.deserializeZxidDigest on EOF).
    for cut in range(tree_end, len(data)):
        got = snapshot.parse(data[:cut])
        assert got.digest is None and got.nodes == full.nodes and got.acls == full.acls


def test_every_byte_flip_is_detected_except_in_the_final_seal_path() -> None:
    data = (V2 / "snapshot.23").read_bytes()
    full = snapshot.parse(data)
    # The final seal ends in ustring "/": SnapStream.checkSealIntegrity ignores its value, and
    # a length that runs past the end is EOF in the digest section (read as "no digest").
    lenient = range(len(data) - 5, len(data))
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x5A
        if i in lenient:
            got = snapshot.parse(bytes(bad))
            assert got.nodes == full.nodes and got.digest in (None, full.digest)
            continue
        with pytest.raises(SnapshotFormatError):
            snapshot.parse(bytes(bad))


def test_old_digest_version_and_no_digest() -> None:
    c = snapshot.parse((V2 / "snapshot.23").read_bytes())
    c.digest = SnapshotDigest(0x23, 0x1234ABCD, 1)  # pre-2 digests are hex strings
    assert snapshot.parse(snapshot.serialize(c)).digest == c.digest
    c.digest = None
    raw = snapshot.serialize(c)
    assert snapshot.parse(raw).digest is None
    assert snapshot.plausible_tail(raw)


stats = st.builds(
    StatPersisted,
    *(st.integers(-(2**63), 2**63 - 1) for _ in range(4)),
    *(st.integers(-(2**31), 2**31 - 1) for _ in range(3)),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
)


@settings(max_examples=examples(40), deadline=None)
@given(
    st.dictionaries(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**31 - 1), max_size=4),
    st.dictionaries(
        st.integers(1, 50),
        st.lists(
            st.builds(ACL, st.integers(0, 31), st.builds(Id, st.text(), st.text())), max_size=3
        ).map(tuple),
        max_size=3,
    ),
    st.lists(st.tuples(st.text(min_size=1), st.one_of(st.none(), st.binary()), stats), max_size=5),
    st.one_of(st.none(), st.builds(SnapshotDigest, st.integers(0, 2**40), st.integers(0, 2**40))),
)
def test_property_roundtrip(
    sessions: dict[int, int],
    acls: dict[int, tuple[ACL, ...]],
    nodes: list[tuple[str, bytes | None, StatPersisted]],
    digest: SnapshotDigest | None,
) -> None:
    content = SnapshotContent(
        sessions=sessions,
        acls=acls,
        nodes=[SnapNode("", b"", -1, STAT0)]
        + [SnapNode("/" + p.replace("/", "_"), d, 1, s) for p, d, s in nodes],
        digest=digest,
    )
    raw = snapshot.serialize(content)
    assert snapshot.parse(raw) == content
    assert snapshot.serialize(snapshot.parse(raw)) == raw


def test_write_snapshot_atomic(tmp_path: Path) -> None:
    raw = (V2 / "snapshot.23").read_bytes()
    p = files.write_snapshot(tmp_path / "v2", 0x1A2B, raw)
    assert p.name == "snapshot.1a2b" and p.read_bytes() == raw
    p2 = files.write_snapshot(tmp_path / "v2", 0x1A2C, b"gz", compression="gz")
    assert p2.name == "snapshot.1a2c.gz"
    assert sorted(x.name for x in (tmp_path / "v2").iterdir()) == [p.name, p2.name]
    assert [z for z, _ in files.list_snapshots(tmp_path / "v2")] == [0x1A2B, 0x1A2C]


# ------------------------------------------------------------------------------ live interchange


def hand_built(sid: int, zxid: int, *, digest_delta: int = 0) -> SnapshotContent:
    """A tree nobody but us serialised: root, the /zookeeper nodes, /t, /t/eph of ``sid``."""

    def stat(cz: int, mz: int, pz: int, owner: int = 0, cv: int = 0, v: int = 0) -> StatPersisted:
        return StatPersisted(cz, mz, 1_700_000_000_000 + cz, 1_700_000_000_000 + mz, v, cv, 0,
                             owner, pz)  # fmt: skip

    bob = Id("digest", "bob:kY0E1+Vm6dBQyZ6rOoOyfszFvCY=")
    acl_t = (ACL(31, bob), ACL(1, Id("world", "anyone")))
    c = SnapshotContent(
        sessions={sid: 30000},
        acls={1: (ACL(1, Id("world", "anyone")),), 2: acl_t},
        nodes=[
            SnapNode("", b"", -1, stat(0, 0, zxid - 2, cv=2)),
            SnapNode("/zookeeper", b"", -1, STAT0),
            SnapNode("/zookeeper/config", b"", 1, StatPersisted(0, 0, 0, 0, 0, 0, -1, 0, 0)),
            SnapNode("/zookeeper/quota", b"", -1, STAT0),
            SnapNode("/t", b"hello", 2, stat(zxid - 2, zxid, zxid - 1, cv=1, v=3)),
            SnapNode("/t/eph", None, -1, stat(zxid - 1, zxid - 1, zxid - 1, owner=sid)),
        ],
    )
    c.digest = SnapshotDigest(zxid, c.tree_digest() + digest_delta)
    return c


def _start_from(tmp_path: Path, content: SnapshotContent, zxid: int):  # type: ignore[no-untyped-def]
    d = files.version_dir(tmp_path)
    files.write_snapshot(d, zxid, snapshot.serialize(content))
    srv = zkrun.ZkServer(tmp_path)
    srv.start()
    return srv


@pytest.mark.oracle
@needs_java
def test_zookeeper_loads_snapshot_built_by_trizk(tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    sid, zxid = 0x1000000ABCD0001, 0x500000010
    srv = _start_from(tmp_path, hand_built(sid, zxid), zxid)
    try:
        zk = KazooClient(hosts=srv.hosts, timeout=10)
        zk.start(timeout=15)
        try:
            data, st_ = zk.get("/t")
            assert data == b"hello"
            assert (st_.czxid, st_.mzxid, st_.pzxid, st_.version) == (zxid - 2, zxid, zxid - 1, 3)
            assert (st_.numChildren, st_.cversion) == (1, 1)
            eph = zk.exists("/t/eph")
            assert eph is not None and eph.ephemeralOwner == sid  # the session was restored
            acls, _ = zk.get_acls("/t")
            assert [a.id.scheme for a in acls] == ["digest", "world"]
        finally:
            zk.stop()
            zk.close()
        srv.stop()
        log = srv.log_path.read_text()
        # The snapshot digest is compared right after loading (its zxid is the snapshot's).
        assert "The digest in the snapshot has digest version of 2" in log
        assert "not matching" not in log.lower() and "mismatch" not in log.lower()
    finally:
        srv.cleanup()


@pytest.mark.oracle
@needs_java
def test_zookeeper_notices_a_wrong_digest(tmp_path: Path) -> None:
    """Negative control for the test above: a wrong digest does show in ZooKeeper's log."""
    zxid = 0x500000010
    srv = _start_from(tmp_path, hand_built(0x1000000ABCD0001, zxid, digest_delta=1), zxid)
    try:
        srv.stop()
        assert "not matching" in srv.log_path.read_text().lower()
    finally:
        srv.cleanup()


@pytest.mark.oracle
@needs_java
def test_snapshot_checksum_seal_verified_by_zookeeper(tmp_path: Path) -> None:
    """A seal we compute wrongly would make ZooKeeper skip our snapshot; a broken one does."""
    zxid = 0x500000010
    d = files.version_dir(tmp_path)
    good = snapshot.serialize(hand_built(0x1000000ABCD0001, zxid))
    files.write_snapshot(d, zxid - 5, good)  # an older, intact one
    bad = bytearray(good)
    bad[-30 - 8] ^= 1  # inside the first seal's checksum
    with pytest.raises(SnapshotFormatError):
        snapshot.parse(bytes(bad))
    files.write_snapshot(d, zxid, bytes(bad))
    srv = zkrun.ZkServer(tmp_path)
    try:
        srv.start()
        srv.stop()
        log = srv.log_path.read_text()
        assert "problem reading snap file" in log and f"snapshot.{zxid:x}" in log
        assert f"Reading snapshot {d}/snapshot.{zxid - 5:x}" in log
    finally:
        srv.cleanup()
    # And we make the same choice.
    assert files.recover(d).snapshot_zxid == zxid - 5
    assert zlib.adler32(b"") == 1  # Adler32 starts at 1, as java.util.zip.Adler32


def test_node_tail_is_an_acl_ref_and_a_stat_persisted() -> None:
    from trizk.jute.primitives import fixed_struct

    assert (
        snapshot.NODE_TAIL.size == snapshot.NODE_TAIL_SIZE == 8 + fixed_struct(StatPersisted).size
    )
