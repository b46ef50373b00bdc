"""The snapshot format of Apache ZooKeeper 3.8 and 3.9 (``FileSnap``) and the tree digest, pure.

Grammar
-------
Big-endian Jute encoding (see :mod:`trizk.jute.primitives`), of the *uncompressed* stream::

    Snapshot    := FileHeader Sessions AclCache Nodes Seal (Digest LastZxid?)?
    FileHeader  := magic:int = 0x5A4B534E ("ZKSN")  version:int = 2  dbid:long = -1
    Sessions    := count:int  (id:long timeout:int)*count        (SerializeUtils.serializeSnapshot)
    AclCache    := count:int  (ref:long acls:vector<ACL>)*count  (ReferenceCountedACLCache)
                   ref -1 is OPEN_ACL_UNSAFE and is never stored; nodes refer to refs
    Nodes       := (path:ustring Node)*  "/":ustring              (DataTree.serializeNode)
                   pre-order walk from the root, whose path is "" (not "/"); a parent always
                   precedes its children; "/" ends the list
    Node        := data:buffer  acl:long  StatPersisted          (DataNode.serialize)
    Seal        := checksum:long  "/":ustring                    (SnapStream.sealStream)
                   checksum = Adler32 of every byte before it in the stream
    Digest      := zxid:long version:int digest:long  Seal       (DataTree.ZxidDigest, 3.6+)
                   (version < 2: digest is a hex ustring); only written with
                   zookeeper.digest.enabled; zxid 0 means "no digest"; a reader finding EOF
                   (or a torn digest section) after the first Seal treats the snapshot as
                   digest-less. The second Seal's
                   checksum covers everything before it, first Seal included.
    LastZxid    := lastZxid:long  Seal               (DataTree.serializeLastProcessedZxid, 3.9+)
                   the tree's lastProcessedZxid when serialisation ended (with the
                   digest section: the digest's zxid); written by ZooKeeper 3.9 unless
                   zookeeper.serializeLastProcessedZxid.enabled=false, for its AdminServer's
                   snapshot/restore commands. Read as 3.9's FileSnap.deserialize reads it: EOF
                   in the long means an older snapshot without it; once the long is read, its
                   Seal (over everything before it) must be there and match, or the snapshot
                   is not valid. Loading a data directory then takes the zxid from the file
                   name, as FileSnap does (``dt.lastProcessedZxid = snapZxid``), so the value
                   is checked and kept (:attr:`SnapshotContent.last_processed_zxid`), not used.
                   ZooKeeper 3.8 stops reading after the digest section and ignores these 21
                   bytes, so 3.8 starts on a 3.9 snapshot and 3.9 on a 3.8 one.

Written by :func:`encode_head` (FileHeader Sessions AclCache), :func:`encode_node` (one entry
of Nodes), :data:`NODES_END` and :func:`seal` (both Seals and the Digest section): the one
encoder of this grammar, used by :func:`serialize` and by the incremental writer
(:class:`trizk.storage.formats.treeio.FuzzySnapshot`).

Compression (``zookeeper.snapshot.compression.method``) wraps the whole stream and shows in the
file name: ``snapshot.<hex zxid>`` plain, ``.gz`` gzip, ``.snappy`` snappy-java framing
(magic ``\\x82SNAPPY\\x00``, two ints, then blocks of ``length:int`` + raw snappy). We read all
three (snappy by a small pure-Python decompressor below) and write plain or gzip.

A snapshot is *fuzzy*: ZooKeeper serialises the live tree while txns keep applying, so the
content can include txns after the zxid in its name; replaying the log from that zxid is
correct because every txn is idempotent. The digest section records (zxid, tree digest) of
the last txn applied when serialisation finished, for the replay to check.

Tree digest (DigestCalculator, version 2)
-----------------------------------------
``node_digest = CRC32(path UTF-8 bytes ++ data ++ czxid mzxid pzxid ctime mtime (longs)
version cversion aversion (ints) ephemeralOwner (long))``, with path "/" hashed as "" and
0 for paths under ``/zookeeper/`` (``/zookeeper`` itself counts). The tree digest is the
sum of the node digests as a Java long (AdHash), so it updates incrementally: subtract the
old node digest, add the new one.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from trizk.jute.primitives import JuteDecodeError, Record
from trizk.jute.records import ACL, FileHeader, Id, StatPersisted

#: ``ZKSN`` as a big-endian int (FileSnap.SNAP_MAGIC).
SNAP_MAGIC = 0x5A4B534E
SNAP_VERSION = 2
#: FileSnap.dbId.
SNAP_DBID = -1
SNAP_PREFIX = "snapshot"
DIGEST_VERSION = 2
#: ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID: nodes with OPEN_ACL_UNSAFE use ref -1.
OPEN_UNSAFE_ACL_REF = -1
ZOOKEEPER_SUBTREE: Final = "/zookeeper/"

GZIP_MAGIC = b"\x1f\x8b"
SNAPPY_MAGIC = b"\x82SNAPPY\x00"
#: Seal terminator: ustring "/".
_SLASH: Final = b"\x00\x00\x00\x01/"
_NULL: Final = b"\xff\xff\xff\xff"  # a null buffer

_I: Final = struct.Struct(">i")
_Q: Final = struct.Struct(">q")
_QI: Final = struct.Struct(">qi")
_QIQ: Final = struct.Struct(">qiq")
_DIGEST_STAT: Final = struct.Struct(">qqqqqiiiq")
#: What follows a node's data: its ACL ref (long), then its StatPersisted (czxid mzxid ctime
#: mtime version cversion aversion ephemeralOwner pzxid), decoded in one unpack
NODE_TAIL: Final = struct.Struct(">qqqqqiiiqq")
NODE_TAIL_SIZE: Final = 68  # NODE_TAIL.size (the tests check it)


class SnapshotFormatError(ValueError):
    """Bytes that are not a complete, intact ZooKeeper snapshot."""


class SnapshotTruncated(SnapshotFormatError):
    """The stream ends early."""


@dataclass(frozen=True, slots=True)
class SnapNode:
    """One serialized node. ``path`` is as on disk: the root is ``""``."""

    path: str
    data: bytes | None
    acl: int
    stat: StatPersisted


@dataclass(frozen=True, slots=True)
class SnapshotDigest:
    """DataTree.ZxidDigest: the tree digest after txn ``zxid``."""

    zxid: int
    digest: int
    version: int = DIGEST_VERSION


@dataclass(slots=True)
class SnapshotContent:
    """What a snapshot holds, in file order (dicts keep insertion order).

    Serialising parsed content gives back the same bytes (for uncompressed snapshots).
    """

    sessions: dict[int, int] = field(default_factory=dict)  # session id -> timeout ms
    acls: dict[int, tuple[ACL, ...]] = field(default_factory=dict)  # ref -> ACL list
    nodes: list[SnapNode] = field(default_factory=list)
    digest: SnapshotDigest | None = None
    dbid: int = SNAP_DBID
    #: ZooKeeper 3.9's trailer (LastZxid in the grammar above): None when absent; written
    #: (after a digest section, which it needs) when not None
    last_processed_zxid: int | None = None
    #: ``parse(..., raw_nodes=True)`` leaves ``nodes`` empty and keeps the Nodes section
    #: undecoded instead (checked by :func:`scan_nodes`): the decompressed stream, the offset
    #: of its first node and that of the "/" ending the section, and the number of nodes.
    #: A loader then decodes each node once, straight into its own objects
    #: (:func:`trizk.storage.formats.treeio.tree_from_snapshot`), without a SnapNode and a
    #: StatPersisted record per node in between.
    #: (Bookkeeping of parse, left out of comparisons: equal content compares equal however
    #: it was read.)
    raw: bytes | None = field(default=None, compare=False, repr=False)
    nodes_start: int = field(default=0, compare=False, repr=False)
    nodes_end: int = field(default=0, compare=False, repr=False)
    node_count: int = field(default=0, compare=False, repr=False)

    def tree_digest(self) -> int:
        return tree_digest((n.path, n.data, n.stat) for n in self.nodes)


# --------------------------------------------------------------------------- digest


def calculate_digest(
    path: str,
    data: bytes | None,
    czxid: int,
    mzxid: int,
    pzxid: int,
    ctime: int,
    mtime: int,
    version: int,
    cversion: int,
    aversion: int,
    ephemeral_owner: int,
) -> int:
    """DigestCalculator.calculateDigest (version 2); an unsigned 32-bit value. The one place
    the formula lives: the tree, prep's pending records and snapshots all call it."""
    if path.startswith(ZOOKEEPER_SUBTREE):
        return 0
    return encoded_digest(
        b"" if path == "/" else path.encode("utf-8"),
        data,
        czxid,
        mzxid,
        pzxid,
        ctime,
        mtime,
        version,
        cversion,
        aversion,
        ephemeral_owner,
    )


def encoded_digest(
    path: bytes,
    data: bytes | None,
    czxid: int,
    mzxid: int,
    pzxid: int,
    ctime: int,
    mtime: int,
    version: int,
    cversion: int,
    aversion: int,
    ephemeral_owner: int,
) -> int:
    """:func:`calculate_digest` of a node outside ``/zookeeper/`` whose path is given as the
    bytes it hashes (its UTF-8, empty for the root): a loader that has them at hand."""
    tail = _DIGEST_STAT.pack(
        czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion, ephemeral_owner
    )
    # one CRC over the concatenation: what updating it part by part gives, in one call
    return zlib.crc32(b"".join((path, data or b"", tail)))


def node_digest(path: str, data: bytes | None, stat: StatPersisted) -> int:
    """:func:`calculate_digest` of a snapshot node."""
    return calculate_digest(
        path,
        data,
        stat.czxid,
        stat.mzxid,
        stat.pzxid,
        stat.ctime,
        stat.mtime,
        stat.version,
        stat.cversion,
        stat.aversion,
        stat.ephemeralOwner,
    )


def to_java_long(v: int) -> int:
    """``v`` wrapped to a Java long (64-bit two's complement), as Java's arithmetic leaves it:
    the tree digest's sum, the session id counter, a quota's byte count."""
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= 1 << 63 else v


def tree_digest(nodes: Iterable[tuple[str, bytes | None, StatPersisted]]) -> int:
    """AdHash over all nodes (root as "" or "/", counted once): a Java long."""
    return to_java_long(sum(node_digest(p, d, s) for p, d, s in nodes))


# --------------------------------------------------------------------------- compression


def compression_of(data: bytes | memoryview) -> str:
    """'' (plain), 'gz' or 'snappy', judged by the magic bytes."""
    head = bytes(data[:8])
    if head.startswith(GZIP_MAGIC):
        return "gz"
    if head == SNAPPY_MAGIC:
        return "snappy"
    return ""


def decompress(data: bytes) -> bytes:
    """Undo gzip or snappy-java framing if present; plain bytes come back unchanged."""
    kind = compression_of(data)
    if kind == "gz":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise SnapshotFormatError(f"bad gzip stream: {e}") from None
    if kind == "snappy":
        return snappy_java_decompress(data)
    return data


def snappy_java_decompress(data: bytes) -> bytes:
    """snappy-java's SnappyOutputStream framing: magic, version, compat, (len:int block)*.

    Concatenated streams (a header again in place of a block) are accepted, as
    SnappyInputStream does.
    """
    out = bytearray()
    p = 0
    n = len(data)
    while p < n:
        if data[p : p + 8] == SNAPPY_MAGIC:
            if p + 16 > n:
                raise SnapshotFormatError("snappy stream header torn")
            p += 16
            continue
        if p + 4 > n:
            raise SnapshotFormatError("snappy block length torn")
        (ln,) = _I.unpack_from(data, p)
        p += 4
        if ln < 0 or p + ln > n:
            raise SnapshotFormatError(f"snappy block of {ln} bytes runs past end")
        out += snappy_raw_decompress(data[p : p + ln])
        p += ln
    return bytes(out)


def snappy_raw_decompress(block: bytes) -> bytes:
    """Decode one raw snappy block (format_description.txt of google/snappy)."""
    n = len(block)
    p = 0
    ulen = 0
    shift = 0
    while True:
        if p >= n or shift > 32:
            raise SnapshotFormatError("snappy: bad length varint")
        c = block[p]
        p += 1
        ulen |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            break
    out = bytearray()
    try:
        while p < n:
            tag = block[p]
            p += 1
            kind = tag & 3
            if kind == 0:  # literal
                ln = tag >> 2
                if ln >= 60:
                    nb = ln - 59
                    ln = int.from_bytes(block[p : p + nb], "little")
                    p += nb
                ln += 1
                if p + ln > n:
                    raise SnapshotFormatError("snappy: literal past end")
                out += block[p : p + ln]
                p += ln
                continue
            if kind == 1:
                ln = 4 + ((tag >> 2) & 7)
                off = ((tag >> 5) << 8) | block[p]
                p += 1
            elif kind == 2:
                ln = 1 + (tag >> 2)
                off = int.from_bytes(block[p : p + 2], "little")
                p += 2
            else:
                ln = 1 + (tag >> 2)
                off = int.from_bytes(block[p : p + 4], "little")
                p += 4
            if off == 0 or off > len(out):
                raise SnapshotFormatError("snappy: bad copy offset")
            start = len(out) - off
            if off >= ln:
                out += out[start : start + ln]
            else:  # overlapping copy repeats the last `off` bytes
                for i in range(ln):
                    out.append(out[start + i])
    except IndexError:
        raise SnapshotFormatError("snappy: block torn") from None
    if len(out) != ulen:
        raise SnapshotFormatError(f"snappy: {len(out)} bytes decoded, header says {ulen}")
    return bytes(out)


# --------------------------------------------------------------------------- parse


class _Reader:
    __slots__ = ("b", "p")

    def __init__(self, b: bytes) -> None:
        self.b = b
        self.p = 0

    def need(self, k: int, what: str) -> None:
        if self.p + k > len(self.b):
            raise SnapshotTruncated(f"snapshot truncated in {what} at offset {self.p}")

    def i32(self, what: str) -> int:
        self.need(4, what)
        (v,) = _I.unpack_from(self.b, self.p)
        self.p += 4
        return int(v)

    def i64(self, what: str) -> int:
        self.need(8, what)
        (v,) = _Q.unpack_from(self.b, self.p)
        self.p += 8
        return int(v)

    def ustring(self, what: str) -> str | None:
        v = self.buffer(what)
        return None if v is None else v.decode("utf-8", "replace")

    def buffer(self, what: str) -> bytes | None:
        n = self.i32(what)
        if n == -1:
            return None
        if n < 0:
            raise SnapshotFormatError(f"bad {what} length {n} at offset {self.p - 4}")
        self.need(n, what)
        v = self.b[self.p : self.p + n]
        self.p += n
        return v

    def record(self, cls: type[Record], what: str) -> object:
        try:
            rec, self.p = cls.decode_from(self.b, self.p)
        except JuteDecodeError as e:
            raise SnapshotFormatError(f"bad {what} at offset {self.p}: {e}") from None
        return rec

    def seal(self, what: str) -> None:
        expect = zlib.adler32(memoryview(self.b)[: self.p])
        val = self.i64(what)
        self.ustring(what)  # "/" (SnapStream.checkSealIntegrity reads and ignores it)
        if val != expect:
            raise SnapshotFormatError(f"{what}: checksum {val:#x} != Adler32 {expect:#x}")


def parse(
    data: bytes,
    *,
    progress: Callable[[int, int], None] | None = None,
    raw_nodes: bool = False,
    stream: bool = False,
) -> SnapshotContent:
    """Parse and verify a snapshot (plain, gzip or snappy). Raises :class:`SnapshotFormatError`.

    ``progress(done, total)`` is called now and then with byte offsets in the uncompressed
    stream. ``raw_nodes``: check the Nodes section but leave it undecoded (see
    :attr:`SnapshotContent.raw`); the content's ``nodes`` list stays empty.

    ``stream``: read ``data`` as ``ZKDatabase.deserializeSnapshot(ia, cis)`` reads the
    AdminServer ``restore`` command's input (ZooKeeper 3.9): a plain ``BinaryInputArchive``
    with no ``SnapStream`` around it (a gzip or snappy stream fails the magic check), and
    whatever follows the last section is never read (no trailing-bytes error).
    """
    raw = bytes(data) if stream else decompress(bytes(data))
    r = _Reader(raw)
    total = len(raw)
    r.need(16, "file header")
    hdr = r.record(FileHeader, "file header")
    assert isinstance(hdr, FileHeader)
    if hdr.magic != SNAP_MAGIC:
        raise SnapshotFormatError(f"mismatching magic headers {hdr.magic:#x} != {SNAP_MAGIC:#x}")
    content = SnapshotContent(dbid=hdr.dbid)
    _read_sections(r, content, progress, raw_nodes)
    r.seal("seal")
    if r.p < total:
        try:
            zxid = r.i64("digest zxid")
            version = r.i32("digest version")
            if version < 2:
                s = r.ustring("digest")
                digest = int(s, 16) if s else 0
            else:
                digest = r.i64("digest")
            r.seal("digest seal")
            content.digest = SnapshotDigest(zxid, digest, version)
        except SnapshotTruncated:
            # DataTree.deserializeZxidDigest: EOF in the digest section reads as a snapshot
            # without digest (the tree itself is sealed above); FileSnap accepts it.
            r.p = total
    if r.p < total and content.digest is not None:
        # DataTree.deserializeLastProcessedZxid: EOF in the long is "an older snapshot"
        if r.p + 8 <= total:
            last = r.i64("last processed zxid")
            try:
                r.seal("last processed zxid seal")
            except SnapshotTruncated:
                raise SnapshotFormatError(
                    "snapshot truncated in the seal after the last processed zxid"
                ) from None
            content.last_processed_zxid = last
        else:
            r.p = total
    if r.p != total and not stream:
        raise SnapshotFormatError(f"{total - r.p} trailing bytes after the snapshot")
    if progress is not None:
        progress(total, total)
    return content


def scan_nodes(
    raw: bytes, p: int, progress: Callable[[int, int], None] | None = None
) -> tuple[int, int]:
    """Check the Nodes section of ``raw`` that starts at ``p``: every entry's lengths within
    the stream, up to the ustring "/" that ends it. Returns the offset of that "/" and the
    number of nodes. Raises :class:`SnapshotFormatError` (:class:`SnapshotTruncated` for a
    stream that ends early) as the grammar's readers do. ``progress(done, total)`` is called
    now and then with byte offsets.

    Only lengths are read (two ints per node), so a caller can decode each node once, knowing
    the section is whole (:func:`decode_nodes`, or a loader's own loop over the same layout:
    ``path:ustring data:buffer`` then :data:`NODE_TAIL`)."""
    total = len(raw)
    unpack = _I.unpack_from
    step = max(total // 100, 1 << 16)
    next_report = p + step
    count = 0
    while True:
        if p + 4 > total:
            raise SnapshotTruncated(f"snapshot truncated in node path at offset {p}")
        (n,) = unpack(raw, p)
        if n < 0:
            if n == -1:
                raise SnapshotFormatError(f"null node path at offset {p}")
            raise SnapshotFormatError(f"bad node path length {n} at offset {p}")
        if p + 4 + n > total:
            raise SnapshotTruncated(f"snapshot truncated in node path at offset {p + 4}")
        if n == 1 and raw[p + 4] == 0x2F:  # "/": the end of Nodes
            return p, count
        p += 4 + n
        if p + 4 > total:
            raise SnapshotTruncated(f"snapshot truncated in node data at offset {p}")
        (n,) = unpack(raw, p)
        if n < -1:
            raise SnapshotFormatError(f"bad node data length {n} at offset {p}")
        p += 4
        if n > 0:
            p += n
            if p > total:
                raise SnapshotTruncated(f"snapshot truncated in node data at offset {p - n}")
        p += NODE_TAIL_SIZE
        if p > total:
            raise SnapshotTruncated(
                f"snapshot truncated in node stat at offset {p - NODE_TAIL_SIZE}"
            )
        count += 1
        if progress is not None and p >= next_report:
            progress(p, total)
            next_report = p + step


def node_span(raw: bytes, p: int, end: int, path: str) -> tuple[int, int] | None:
    """Where the node ``path`` lies in a Nodes section from ``p`` to ``end`` (the "/" ending
    it) that :func:`scan_nodes` has checked: (start, end) offsets of its entry, or None.
    Only lengths are read, and the path of an entry of the right length."""
    want = path.encode("utf-8")
    size = len(want)
    unpack = _I.unpack_from
    while p < end:
        start = p
        (n,) = unpack(raw, p)
        p += 4
        hit = n == size and raw[p : p + n] == want
        p += n
        (n,) = unpack(raw, p)
        p += 4 + max(n, 0) + NODE_TAIL_SIZE
        if hit:
            return start, p
    return None


def decode_nodes(raw: bytes, p: int, end: int) -> list[SnapNode]:
    """The nodes of a Nodes section from ``p`` to ``end`` (the "/" ending it), which
    :func:`scan_nodes` has checked."""
    unpack = _I.unpack_from
    tail = NODE_TAIL.unpack_from
    out: list[SnapNode] = []
    while p < end:
        (n,) = unpack(raw, p)
        p += 4
        path = raw[p : p + n].decode("utf-8", "replace")
        p += n
        (n,) = unpack(raw, p)
        p += 4
        data: bytes | None = None
        if n >= 0:
            data = raw[p : p + n]
            p += n
        (acl, czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid) = tail(raw, p)
        p += NODE_TAIL_SIZE
        stat = StatPersisted(czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid)
        out.append(SnapNode(path, data, acl, stat))
    return out


def _read_sections(
    r: _Reader,
    content: SnapshotContent,
    progress: Callable[[int, int], None] | None,
    raw_nodes: bool,
) -> None:
    """Sessions, AclCache and Nodes into ``content``, from ``r``'s offset to just past the
    "/" that ends Nodes."""
    raw = r.b
    count = r.i32("session count")
    if count < 0:
        raise SnapshotFormatError(f"bad session count {count}")
    for _ in range(count):
        r.need(12, "sessions")
        sid, to = _QI.unpack_from(raw, r.p)
        r.p += 12
        content.sessions[sid] = to
    count = r.i32("acl cache count")
    if count < 0:
        raise SnapshotFormatError(f"bad acl cache count {count}")
    for _ in range(count):
        ref = r.i64("acl ref")
        k = r.i32("acl list")
        if k < 0:
            raise SnapshotFormatError("Incorrect format: missing acls")
        acls = []
        for _ in range(k):
            acl = r.record(ACL, "acl")
            assert isinstance(acl, ACL)
            acls.append(acl)
        content.acls[ref] = tuple(acls)
    start = r.p
    end, count = scan_nodes(raw, start, progress)
    if raw_nodes:
        content.raw = raw
        content.nodes_start = start
        content.nodes_end = end
    else:
        content.nodes = decode_nodes(raw, start, end)
    content.node_count = count
    r.p = end + len(_SLASH)


def parse_body(body: bytes, *, raw_nodes: bool = False) -> SnapshotContent:
    """A snapshot's body alone: Sessions AclCache Nodes, with no FileHeader before it and no
    Seal after it (``ZKDatabase.serializeSnapshot``: what a quorum SNAP carries). Raises
    :class:`SnapshotFormatError`; ``raw_nodes`` as for :func:`parse`."""
    r = _Reader(body)
    content = SnapshotContent()
    _read_sections(r, content, None, raw_nodes)
    if r.p != len(body):
        raise SnapshotFormatError(f"{len(body) - r.p} trailing bytes after the snapshot body")
    return content


def plausible_tail(data: bytes) -> bool:
    """SnapStream.isValidCheckedStream for plain snapshots: >= 10 bytes ending in ustring "/"."""
    return len(data) >= 10 and data[-5:] == _SLASH


# --------------------------------------------------------------------------- serialize


def encode_head(
    sessions: Mapping[int, int],
    acls: Iterable[tuple[int, Sequence[ACL]]],
    dbid: int = SNAP_DBID,
) -> bytes:
    """FileHeader, Sessions (id -> timeout ms) and AclCache (ref, ACL list), in that order."""
    out: list[bytes] = [FileHeader(SNAP_MAGIC, SNAP_VERSION, dbid).encode()]
    out.append(_I.pack(len(sessions)))
    out.extend(_QI.pack(sid, to) for sid, to in sessions.items())
    acls = list(acls)
    out.append(_I.pack(len(acls)))
    for ref, acl in acls:
        out.append(_Q.pack(ref))
        out.append(_I.pack(len(acl)))
        out.extend(a.encode() for a in acl)
    return b"".join(out)


def encode_node(path: str, data: bytes | None, acl: int, stat: bytes) -> bytes:
    """One entry of Nodes: its path (the root's is ""), then Node with ``stat`` the encoded
    StatPersisted."""
    p = path.encode("utf-8")
    if data is None:
        return b"".join((_I.pack(len(p)), p, _NULL, _Q.pack(acl), stat))
    return b"".join((_I.pack(len(p)), p, _I.pack(len(data)), data, _Q.pack(acl), stat))


#: The end of Nodes: the ustring "/".
NODES_END = _SLASH


def seal(
    parts: list[bytes], digest: SnapshotDigest | None = None, last_zxid: int | None = None
) -> list[bytes]:
    """Append the Seal and, for a ``digest``, the Digest section with its Seal to ``parts``
    (the stream so far, through :data:`NODES_END`), and after it, for a ``last_zxid``, 3.9's
    LastZxid section (:func:`last_zxid_trailer`; nothing without a digest); returns ``parts``.
    The checksums run over the parts in order, so no part is copied."""
    crc = 1  # Adler32 of nothing
    for part in parts:
        crc = zlib.adler32(part, crc)
    parts.append(_Q.pack(crc) + _SLASH)
    if digest is None:
        return parts
    crc = zlib.adler32(parts[-1], crc)
    if digest.version < 2:
        s = f"{digest.digest & 0xFFFFFFFFFFFFFFFF:x}".encode()
        tail = _Q.pack(digest.zxid) + _I.pack(digest.version) + _I.pack(len(s)) + s
    else:
        tail = _QIQ.pack(digest.zxid, digest.version, to_java_long(digest.digest))
    crc = zlib.adler32(tail, crc)
    end = _Q.pack(crc) + _SLASH
    parts.append(tail + end)
    if last_zxid is not None:
        parts.append(last_zxid_trailer(last_zxid, zlib.adler32(end, crc)))
    return parts


def serialize(content: SnapshotContent, *, compression: str = "") -> bytes:
    """The snapshot bytes for ``content``; ``compression`` '' or 'gz'.

    Nodes must be in an order where every parent precedes its children (ZooKeeper's
    deserialiser looks each parent up); the root's path is "".
    """
    if content.last_processed_zxid is not None and content.digest is None:
        # ZooKeeper 3.9 would read the long as the digest section's zxid
        raise ValueError("a snapshot's last processed zxid needs its digest section")
    parts = [encode_head(content.sessions, content.acls.items(), content.dbid)]
    parts.extend(encode_node(n.path, n.data, n.acl, n.stat.encode()) for n in content.nodes)
    parts.append(NODES_END)
    body = b"".join(seal(parts, content.digest, content.last_processed_zxid))
    if compression == "gz":
        return gzip.compress(body, mtime=0)
    if compression:
        raise ValueError(f"cannot write {compression!r} snapshots (plain or 'gz' only)")
    return body


def last_zxid_trailer(zxid: int, checksum: int) -> bytes:
    """ZooKeeper 3.9's LastZxid section (see the grammar): ``zxid`` and its seal.

    ``checksum`` is the Adler32 of every byte of the stream before the section (the digest
    section's seal included), as ``zlib.adler32`` computes it; the seal covers those and the
    long.
    """
    head = _Q.pack(zxid)
    return head + _Q.pack(zlib.adler32(head, checksum)) + _SLASH


def snapshot_name(zxid: int, compression: str = "") -> str:
    """``snapshot.<hex zxid>`` plus ``.gz``/``.snappy`` (Util.makeSnapshotName)."""
    name = f"{SNAP_PREFIX}.{zxid & 0xFFFFFFFFFFFFFFFF:x}"
    return f"{name}.{compression}" if compression else name


def make_acl(perms: int, scheme: str, ident: str) -> ACL:
    return ACL(perms, Id(scheme, ident))


def initial_content() -> SnapshotContent:
    """The tree of a fresh ZooKeeper (DataTree's constructor), as its ``snapshot.0`` holds it.

    Root (path ""), ``/zookeeper``, ``/zookeeper/config`` (READ_ACL_UNSAFE, ACL ref 1, aversion
    -1 after setACL with version -1) and ``/zookeeper/quota``; all stats zero; empty digest.
    ZooKeeper writes this as snapshot.0 when it starts on an empty data dir, and refuses to
    start on logs without any snapshot, so trizk should do the same before its first txn.
    """
    zero = StatPersisted(0, 0, 0, 0, 0, 0, 0, 0, 0)
    return SnapshotContent(
        sessions={},
        acls={1: (ACL(1, Id("world", "anyone")),)},
        nodes=[
            SnapNode("", b"", OPEN_UNSAFE_ACL_REF, zero),
            SnapNode("/zookeeper", b"", OPEN_UNSAFE_ACL_REF, zero),
            SnapNode("/zookeeper/config", b"", 1, StatPersisted(0, 0, 0, 0, 0, 0, -1, 0, 0)),
            SnapNode("/zookeeper/quota", b"", OPEN_UNSAFE_ACL_REF, zero),
        ],
        digest=SnapshotDigest(0, 0, DIGEST_VERSION),
    )
