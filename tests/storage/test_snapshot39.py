"""ZooKeeper 3.9's snapshot trailer (``DataTree.serializeLastProcessedZxid``): the last
processed zxid and a third seal after the digest section, against snapshots written by Apache
ZooKeeper 3.9.3 (``tests/data/zkdata39``: ``snapshot.0`` of a fresh server and ``snapshot.7``,
taken when it restarted on a tree with an ACL, binary data and an open session's ephemeral)."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from trizk.storage.formats import snapshot
from trizk.storage.formats.snapshot import SnapshotDigest, SnapshotFormatError
from trizk.storage.formats.treeio import FuzzySnapshot, tree_from_snapshot
from trizk.storage.tree.datatree import DataTree

DATA = Path(__file__).parents[1] / "data" / "zkdata39"
TRAILER = 8 + 8 + 5  # lastZxid, Adler32, "/"


def test_zookeeper_393_snapshots_parse_with_their_last_processed_zxid() -> None:
    fresh = snapshot.parse((DATA / "snapshot.0").read_bytes())
    assert fresh.last_processed_zxid == 0 and fresh.digest == SnapshotDigest(0, 0)
    assert [n.path for n in fresh.nodes] == [n.path for n in snapshot.initial_content().nodes]
    c = snapshot.parse((DATA / "snapshot.7").read_bytes())
    assert c.last_processed_zxid == 7 and c.digest is not None and c.digest.zxid == 7
    assert len(c.sessions) == 1
    (owner,) = c.sessions
    eph = [n.path for n in c.nodes if n.stat.ephemeralOwner == owner]
    assert eph == ["/e"]
    assert c.tree_digest() == c.digest.digest


@pytest.mark.parametrize("name", ["snapshot.0", "snapshot.7"])
def test_zookeeper_393_snapshots_serialize_byte_identically(name: str) -> None:
    data = (DATA / name).read_bytes()
    assert snapshot.serialize(snapshot.parse(data)) == data


def test_fuzzy_snapshot_writes_the_trailer_as_zookeeper_393_does() -> None:
    data = (DATA / "snapshot.7").read_bytes()
    content = snapshot.parse(data)
    tree = tree_from_snapshot(content, 7)
    fs = FuzzySnapshot(tree, dict(content.sessions), last_zxid=True)
    while not fs.step(3):
        pass
    out = b"".join(fs.finish())
    got = snapshot.parse(out)
    assert got.last_processed_zxid == tree.last_processed_zxid == 7
    # ACL refs are numbered afresh (in order of first use), the rest is ZooKeeper's
    assert [(n.path, n.data, n.stat) for n in got.nodes] == [
        (n.path, n.data, n.stat) for n in content.nodes
    ]
    assert got.digest == content.digest
    assert snapshot.serialize(got) == out
    # off by default: the snapshot trizk writes today ends after the digest section
    plain = FuzzySnapshot(tree, dict(content.sessions))
    while not plain.step():
        pass
    assert b"".join(plain.finish()) == out[:-TRAILER]


def test_3_8_snapshots_have_no_trailer() -> None:
    c = snapshot.initial_content()
    assert snapshot.parse(snapshot.serialize(c)).last_processed_zxid is None


def test_a_torn_last_zxid_reads_as_an_older_snapshot_and_a_torn_or_bad_seal_is_invalid() -> None:
    data = (DATA / "snapshot.7").read_bytes()
    full = snapshot.parse(data)
    start = len(data) - TRAILER
    for cut in range(start, start + 8):  # EOF in the long: deserializeLastProcessedZxid -> false
        got = snapshot.parse(data[:cut])
        assert got.last_processed_zxid is None and got.digest == full.digest
    for cut in range(start + 8, len(data)):  # the long read, its seal not: not a valid snapshot
        with pytest.raises(SnapshotFormatError):
            snapshot.parse(data[:cut])
    for i in range(start, len(data) - 5):  # the long or the checksum changed
        bad = bytearray(data)
        bad[i] ^= 0x21
        with pytest.raises(SnapshotFormatError, match="checksum"):
            snapshot.parse(bytes(bad))
    with pytest.raises(SnapshotFormatError, match="trailing"):
        snapshot.parse(data + b"\x00")


def test_the_trailer_needs_a_digest_section() -> None:
    c = snapshot.initial_content()
    c.digest = None
    c.last_processed_zxid = 5
    with pytest.raises(ValueError, match="digest"):
        snapshot.serialize(c)
    tree = DataTree()
    fs = FuzzySnapshot(tree, {}, digest=False, last_zxid=True)
    assert fs.step()
    assert snapshot.parse(b"".join(fs.finish())).last_processed_zxid is None


def test_last_zxid_trailer_seals_what_precedes_it() -> None:
    body = snapshot.serialize(snapshot.initial_content())
    t = snapshot.last_zxid_trailer(0x1_0000_0002, zlib.adler32(body))
    assert t[:8] == (0x1_0000_0002).to_bytes(8, "big") and t[-5:] == b"\x00\x00\x00\x01/"
    assert int.from_bytes(t[8:16], "big") == zlib.adler32(body + t[:8])
    c = snapshot.parse(body + t)
    assert c.last_processed_zxid == 0x1_0000_0002
