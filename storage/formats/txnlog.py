"""The transaction log format of Apache ZooKeeper 3.8 (``FileTxnLog``), as pure functions.

Grammar
-------
All integers big-endian, Jute encoding (see :mod:`trizk.jute.primitives`)::

    LogFile     := FileHeader Entry* Tail
    FileHeader  := magic:int = 0x5A4B4C47 ("ZKLG")  version:int = 2  dbid:long (0)
    Entry       := checksum:long  length:int  Payload[length]  0x42
                   checksum = Adler32(Payload), an unsigned 32-bit value in a long
                   (FileTxnLog.append; despite FileTxnLog's class comment, the length and the
                   0x42 end-of-record byte are *not* covered)
    Payload     := TxnHeader Body? TxnDigest?                     (Util.marshallTxnEntry)
    TxnHeader   := clientId:long cxid:int zxid:long time:long type:int
    Body        := the txn record chosen by TxnHeader.type (TXN_RECORDS below):
                     create(1), create2(15)       CreateTxn (or CreateTxnV0, pre-3.3 logs)
                     delete(2), deleteContainer(20) DeleteTxn
                     setData(5), reconfig(16)     SetDataTxn
                     setACL(7)                    SetACLTxn
                     check(13)                    CheckVersionTxn (only inside multi)
                     multi(14)                    MultiTxn = vector<Txn{type:int, data:buffer}>,
                                                  each data the encoded sub-txn record
                                                  (an ErrorTxn per op when the multi failed)
                     createContainer(19)          CreateContainerTxn
                     createTTL(21)                CreateTTLTxn
                     createSession(-10)           CreateSessionTxn{timeOut}
                     closeSession(-11)            CloseSessionTxn{paths2Delete}; absent in logs
                                                  written before 3.6 or with
                                                  zookeeper.closeSessionTxn.enabled=false
                     error(-1)                    ErrorTxn{err}
    TxnDigest   := version:int (2) treeDigest:long   present when zookeeper.digest.enabled
                   (default true in 3.8; every 3.8 txn carries one, PrepRequestProcessor)
    Tail        := ZeroPad | (nothing)
    ZeroPad     := 0x00* -- preallocation (FilePadding): whenever the write position gets
                   within 4 KiB of the allocated size, the file grows by preAllocSize bytes
                   (default 64 MiB) with zeros. A zero checksum and zero length read as EOF.

A payload carries no explicit markers for the optional parts: SerializeUtils.deserializeTxn
parses the body, falls back (CreateTxnV0; closeSession without body) on EOF, then reads a
TxnDigest if bytes remain. We decide the same way but exactly: the parse whose parts consume
the payload to its last byte wins, so a decoded entry re-encodes byte-identically.

Files are named ``log.<hex zxid of the first entry>`` (Util.makeLogName) and a new file is
started after every snapshot (rollLog).

Reading
-------
:class:`LogScanner` walks the bytes of one file and yields :class:`ScannedEntry` until the
first point where the file stops being a clean sequence of entries; afterwards ``stop``
says where (``good_end``: the offset just after the last good entry) and why
(:class:`StopReason`). Clean stops are the end of the bytes and the zero padding; everything
else (short record, checksum mismatch, missing 0x42, bad length) is a torn or corrupt tail that
recovery truncates at ``good_end``, except ``PAYLOAD`` (checksum right, body not a txn we can
read), which is never a torn write and must not be truncated away.

Syncing a learner from the log
------------------------------
A leader whose committed log does not reach back to a learner's zxid reads the log files from
the one holding it (:func:`iterator_files`: ``FileTxnIterator.init``'s choice) when the total
length of those after the file holding the first txn (``getStorageSize`` once ``init`` has
opened that file) is within ``snapshotSizeFactor`` x the newest snapshot's length
(:func:`txnlog_size_limit`, :func:`txnlog_sync_allowed`: ``ZKDatabase``'s rule).
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from trizk.jute.codes import OpCode
from trizk.jute.primitives import JuteDecodeError, Record
from trizk.jute.records import (
    CheckVersionTxn,
    CloseSessionTxn,
    CreateContainerTxn,
    CreateSessionTxn,
    CreateTTLTxn,
    CreateTxn,
    CreateTxnV0,
    DeleteTxn,
    ErrorTxn,
    FileHeader,
    MultiTxn,
    SetACLTxn,
    SetDataTxn,
    Txn,
    TxnDigest,
    TxnHeader,
)
from trizk.storage.formats.snapshot import to_java_long

#: ``ZKLG`` as a big-endian int (FileTxnLog.TXNLOG_MAGIC).
TXNLOG_MAGIC = 0x5A4B4C47
#: FileTxnLog.VERSION.
TXNLOG_VERSION = 2
FILE_HEADER_SIZE = 16
#: End-of-record byte ('B').
EOR = 0x42
#: DigestCalculator.DIGEST_VERSION in 3.8.
DIGEST_VERSION = 2
#: ZooKeeper's default preallocation step (FilePadding.preAllocSize, 64 MiB).
DEFAULT_PREALLOC_SIZE = 64 * 1024 * 1024
LOG_PREFIX = "log"

_ENTRY_HEAD = struct.Struct(">qi")  # checksum, length
_DIGEST = struct.Struct(">iq")  # TxnDigest: version, treeDigest
_ZXID = struct.Struct(">q")  # TxnHeader.zxid, 12 bytes into the payload
_TXN_HEADER_SIZE = 28
_LONG_MAX = (1 << 63) - 1
_F = TypeVar("_F")
_DIGEST_SIZE = 12

#: Txn record class per TxnHeader.type (SerializeUtils.deserializeTxn; check for multi ops).
TXN_RECORDS: dict[int, type[Record]] = {
    OpCode.CREATE: CreateTxn,
    OpCode.CREATE2: CreateTxn,
    OpCode.DELETE: DeleteTxn,
    OpCode.DELETECONTAINER: DeleteTxn,
    OpCode.SETDATA: SetDataTxn,
    OpCode.RECONFIG: SetDataTxn,
    OpCode.SETACL: SetACLTxn,
    OpCode.CHECK: CheckVersionTxn,
    OpCode.MULTI: MultiTxn,
    OpCode.CREATECONTAINER: CreateContainerTxn,
    OpCode.CREATETTL: CreateTTLTxn,
    OpCode.CREATESESSION: CreateSessionTxn,
    OpCode.CLOSESESSION: CloseSessionTxn,
    OpCode.ERROR: ErrorTxn,
}

#: Request.op2String, for dumps and messages.
OP_NAMES: dict[int, str] = {
    0: "notification",
    1: "create",
    2: "delete",
    3: "exists",
    4: "getData",
    5: "setData",
    6: "getACL",
    7: "setACL",
    8: "getChildren",
    9: "sync",
    11: "ping",
    12: "getChildren2",
    13: "check",
    14: "multi",
    15: "create2",
    16: "reconfig",
    17: "checkWatches",
    18: "removeWatches",
    19: "createContainer",
    20: "deleteContainer",
    21: "createTtl",
    22: "multiRead",
    100: "auth",
    101: "setWatches",
    102: "sasl",
    103: "getEphemerals",
    104: "getAllChildrenNumber",
    105: "setWatches2",
    107: "whoAmI",
    -10: "createSession",
    -11: "closeSession",
    -1: "error",
}


def op_name(op: int) -> str:
    return OP_NAMES.get(op, f"unknown {op}")


class LogFormatError(ValueError):
    """Bytes that are not a ZooKeeper transaction log (or not a txn payload we can read)."""


# its own __init__, compiled: see Entry in quorum/zab/zab.py
@dataclass(slots=True, init=False, unsafe_hash=True)
class TxnEntry:
    """One logged transaction.

    ``txn`` is the body record (``None`` only for a closeSession logged without body);
    ``CreateTxnV0`` is kept as such so that old logs re-encode identically — treat it as a
    CreateTxn with parentCVersion -1 (ZooKeeper's fix-up). ``digest`` is the tree digest
    *after* this txn, or None when the writer had digests disabled.
    """

    header: TxnHeader
    txn: Record | None
    digest: TxnDigest | None

    def __init__(
        self,
        header: TxnHeader,
        txn: Record | None,
        digest: TxnDigest | None = None,
    ) -> None:
        self.header = header
        self.txn = txn
        self.digest = digest

    @property
    def zxid(self) -> int:
        return self.header.zxid

    @property
    def type(self) -> int:
        return self.header.type


# ------------------------------------------------------------------------------ encoding


def encode_file_header(dbid: int = 0) -> bytes:
    return FileHeader(TXNLOG_MAGIC, TXNLOG_VERSION, dbid).encode()


def decode_file_header(b: bytes | memoryview) -> FileHeader:
    if len(b) < FILE_HEADER_SIZE:
        raise LogFormatError(f"short file header ({len(b)} bytes)")
    hdr, _ = FileHeader.decode_from(b, 0)
    if hdr.magic != TXNLOG_MAGIC:
        raise LogFormatError(f"invalid magic number {hdr.magic:#x} != {TXNLOG_MAGIC:#x} (ZKLG)")
    return hdr


def encode_payload(entry: TxnEntry) -> bytes:
    """TxnHeader + body + optional TxnDigest (Util.marshallTxnEntry)."""
    digest = entry.digest.encode() if entry.digest is not None else None
    return _marshal(entry.header, entry.txn, digest)


def encode_txn(header: TxnHeader, txn: Record | None, tree_digest: int | None) -> bytes:
    """:func:`encode_payload` of a txn this server made, with :func:`make_digest`'s TxnDigest
    of ``tree_digest`` (None: digests off), built without the intermediate records."""
    digest = None
    if tree_digest is not None:
        digest = _DIGEST.pack(DIGEST_VERSION, to_java_long(tree_digest))
    return _marshal(header, txn, digest)


def _marshal(header: TxnHeader, txn: Record | None, digest: bytes | None) -> bytes:
    parts: list[bytes] = []
    header._encode_into(parts)
    if txn is not None:
        txn._encode_into(parts)
    if digest is not None:
        parts.append(digest)
    return b"".join(parts)


def frame_payload(payload: bytes) -> bytes:
    """checksum + length + payload + 0x42."""
    return _ENTRY_HEAD.pack(zlib.adler32(payload), len(payload)) + payload + b"B"


def encode_entry(entry: TxnEntry) -> bytes:
    """One framed log entry, exactly as FileTxnLog.append writes it."""
    return frame_payload(encode_payload(entry))


def make_digest(tree_digest: int) -> TxnDigest:
    """A TxnDigest for a tree digest (a Java long: wrapped to signed 64 bits)."""
    return TxnDigest(DIGEST_VERSION, to_java_long(tree_digest))


# ------------------------------------------------------------------------------ decoding


# Parses to try per txn type, in order (SerializeUtils.deserializeTxn's fallbacks).
_CANDIDATES: dict[int, tuple[type[Record] | None, ...]] = {
    int(op): (cls,) for op, cls in TXN_RECORDS.items()
}
_CANDIDATES[int(OpCode.CREATE)] = (CreateTxn, CreateTxnV0)  # "perhaps this is a V0 Create"
# closeSession logged without a body (before 3.6, or closeSessionTxn disabled).
_CANDIDATES[int(OpCode.CLOSESESSION)] = (CloseSessionTxn, None)


def decode_payload(payload: bytes | memoryview) -> TxnEntry:
    """Decode TxnHeader + body + optional digest; raise :class:`LogFormatError` if no parse fits."""
    b = memoryview(payload)
    end = len(b)
    if end < _TXN_HEADER_SIZE:
        raise LogFormatError(f"payload of {end} bytes is shorter than a TxnHeader")
    hdr, p = TxnHeader.decode_from(b, 0)
    candidates = _CANDIDATES.get(hdr.type)
    if candidates is None:
        raise LogFormatError(f"unsupported txn type {hdr.type} at zxid {hdr.zxid:#x}")
    for cand in candidates:
        if cand is None:
            q, txn = p, None
        else:
            try:
                txn, q = cand.decode_from(b, p)
            except JuteDecodeError:
                continue
        if q == end:
            return TxnEntry(hdr, txn, None)
        if end - q == _DIGEST_SIZE:
            return TxnEntry(hdr, txn, TxnDigest.decode_from(b, q)[0])
    raise LogFormatError(
        f"cannot decode {op_name(hdr.type)} txn at zxid {hdr.zxid:#x} ({end} byte payload)"
    )


def decode_multi(multi: MultiTxn) -> list[tuple[int, Record]]:
    """The sub-txns of a MultiTxn as (type, record) (DataTree.processTxn's multi branch)."""
    out: list[tuple[int, Record]] = []
    for sub in multi.txns or ():
        cls = TXN_RECORDS.get(sub.type)
        if cls is None or cls is MultiTxn:
            raise LogFormatError(f"unsupported sub-txn type {sub.type} in multi")
        out.append((sub.type, cls.decode(sub.data or b"")))
    return out


def encode_multi(ops: list[tuple[int, Record]]) -> MultiTxn:
    return MultiTxn(tuple(Txn(t, rec.encode()) for t, rec in ops))


# ------------------------------------------------------------------------------ scanning


class StopReason(StrEnum):
    EOF = "eof"  # the bytes end exactly after an entry (or the header)
    PADDING = "padding"  # zero checksum + zero length, zeros to the end: preallocation
    TORN = "torn"  # a record (or the header) runs past the end of the bytes
    CHECKSUM = "checksum"  # Adler32 mismatch
    EOR = "eor"  # the byte after the payload is not 0x42
    LENGTH = "length"  # negative length, or a zero-length record with non-zero bytes around
    PAYLOAD = "payload"  # checksum right but the payload is not a txn we can decode

    @property
    def clean(self) -> bool:
        return self in (StopReason.EOF, StopReason.PADDING)

    @property
    def truncatable(self) -> bool:
        """A torn/corrupt tail that recovery may cut off (never a checksum-valid entry)."""
        return self is not StopReason.PAYLOAD


@dataclass(frozen=True, slots=True)
class ScanStop:
    reason: StopReason
    good_end: int  # offset just after the last good entry (or the header)
    detail: str
    last_zxid: int | None  # zxid of the last good entry


@dataclass(frozen=True, slots=True)
class ScannedEntry:
    offset: int  # of the checksum field
    end: int  # just after the 0x42
    entry: TxnEntry


_ZEROS = bytes(1 << 20)


def all_zero(b: memoryview) -> bool:
    """Whether every byte is zero; compares 1 MiB chunks (a 64 MiB padded tail is common) as
    bytes: a memoryview's ``!=`` compares item by item, 25 times slower than the copy and
    memcmp (a restarting member's 64 MiB tail took 0.15-0.4 s, now under 10 ms)."""
    for i in range(0, len(b), len(_ZEROS)):
        chunk = b[i : i + len(_ZEROS)].tobytes()
        if chunk != _ZEROS[: len(chunk)]:
            return False
    return True


class LogScanner:
    """Iterate the entries of one log file's bytes; see the module docstring.

    ``file_header`` is set once the header is read; ``stop`` once iteration ends.
    ``decode=False`` skips payload decoding (checksums still verified) for fast scans;
    entries then carry only the header.
    """

    def __init__(self, data: bytes | bytearray | memoryview, *, decode: bool = True) -> None:
        self.data = memoryview(data)
        self.decode = decode
        self.file_header: FileHeader | None = None
        self.stop: ScanStop | None = None
        self.count = 0

    def _finish(self, reason: StopReason, pos: int, detail: str, last: int | None) -> None:
        self.stop = ScanStop(reason, pos, detail, last)

    def __iter__(self) -> Iterator[ScannedEntry]:
        b = self.data
        n = len(b)
        if n < FILE_HEADER_SIZE:
            self._finish(StopReason.TORN, 0, f"file header torn ({n} of 16 bytes)", None)
            return
        self.file_header = decode_file_header(b)
        pos = FILE_HEADER_SIZE
        last: int | None = None
        while True:
            if pos == n:
                self._finish(StopReason.EOF, pos, "end of data", last)
                return
            if pos + _ENTRY_HEAD.size > n:
                if all_zero(b[pos:]):
                    self._finish(StopReason.PADDING, pos, "zero padding", last)
                else:
                    self._finish(StopReason.TORN, pos, "entry head torn", last)
                return
            crc, length = _ENTRY_HEAD.unpack_from(b, pos)
            if length == 0:
                # Util.readTxnBytes: an empty record is EOF, "since we preallocate".
                if crc == 0 and all_zero(b[pos:]):
                    self._finish(StopReason.PADDING, pos, "zero padding", last)
                else:
                    self._finish(
                        StopReason.LENGTH, pos, "zero-length record amid non-zero bytes", last
                    )
                return
            if length < 0:
                self._finish(StopReason.LENGTH, pos, f"negative length {length}", last)
                return
            start = pos + _ENTRY_HEAD.size
            stop = start + length
            if stop + 1 > n:
                self._finish(
                    StopReason.TORN,
                    pos,
                    f"record of {length} bytes runs past end of data ({n - start} left)",
                    last,
                )
                return
            payload = b[start:stop]
            actual = zlib.adler32(payload)
            if crc != actual:
                self._finish(
                    StopReason.CHECKSUM,
                    pos,
                    f"checksum {crc:#x} != Adler32 {actual:#x} of {length} byte payload",
                    last,
                )
                return
            if b[stop] != EOR:
                self._finish(StopReason.EOR, pos, f"end-of-record byte {b[stop]:#x} != 0x42", last)
                return
            if self.decode:
                try:
                    entry = decode_payload(payload)
                except LogFormatError as e:
                    self._finish(StopReason.PAYLOAD, pos, str(e), last)
                    return
            else:
                if length < _TXN_HEADER_SIZE:
                    self._finish(StopReason.PAYLOAD, pos, "payload shorter than TxnHeader", last)
                    return
                entry = TxnEntry(TxnHeader.decode_from(payload, 0)[0], None, None)
            last = entry.header.zxid
            self.count += 1
            yield ScannedEntry(pos, stop + 1, entry)
            pos = stop + 1


def entry_spans(
    data: bytes | memoryview, skip_below: int | None = None
) -> Generator[tuple[int, int, int], None, StopReason]:
    """(zxid, payload start, payload end) of each entry after the file header, checksums
    verified, as ``FileTxnIterator.next`` reads them without decoding the txn: lean, for
    reading many entries. With ``skip_below``, of the entries before the first one at or
    above it only the newest is yielded (every checksum is still verified).

    Returns why the file ended: EOF (the end of the bytes, a zero length -- the padding, not
    read further --, a torn or unterminated record, a payload shorter than a TxnHeader:
    ``Util.readTxnBytes`` and ``TxnHeader`` reading EOF, after which ZooKeeper reads the next
    file) or CHECKSUM / LENGTH (an ``IOException``: nothing further is read). The caller
    checks the header (:func:`decode_file_header`)."""
    n = len(data)
    head = _ENTRY_HEAD.unpack_from
    zxid_at = _ZXID.unpack_from
    adler32 = zlib.adler32
    pos = FILE_HEADER_SIZE
    held: tuple[int, int, int] | None = None
    reason = StopReason.EOF
    while pos + _ENTRY_HEAD.size <= n:
        crc, length = head(data, pos)
        if length == 0:
            break
        if length < 0:
            reason = StopReason.LENGTH
            break
        start = pos + _ENTRY_HEAD.size
        stop = start + length
        if stop >= n or data[stop] != EOR:
            break
        if adler32(data[start:stop]) != crc:
            reason = StopReason.CHECKSUM
            break
        if length < _TXN_HEADER_SIZE:
            break
        pos = stop + 1
        zxid = zxid_at(data, start + 12)[0]
        if skip_below is not None:
            if zxid < skip_below:
                held = (zxid, start, stop)
                continue
            skip_below = None
            if held is not None:
                yield held
                held = None
        yield zxid, start, stop
    if held is not None:
        yield held
    return reason


def scan(data: bytes | bytearray | memoryview) -> tuple[list[ScannedEntry], ScanStop]:
    """All entries of one file and where/why the scan stopped."""
    sc = LogScanner(data)
    entries = list(sc)
    assert sc.stop is not None
    return entries, sc.stop


# ------------------------------------------------------------------------------ names, padding


def log_name(zxid: int) -> str:
    """``log.<hex zxid>`` (Util.makeLogName: Long.toHexString, lower case, no padding)."""
    return f"{LOG_PREFIX}.{zxid & 0xFFFFFFFFFFFFFFFF:x}"


def zxid_from_name(name: str, prefix: str) -> int:
    """Util.getZxidFromName: the hex after ``prefix.``; -1 if the name does not match."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[0] == prefix:
        try:
            v = int(parts[1], 16)
        except ValueError:
            return -1
        if parts[1].startswith(("+", "-")) or not 0 <= v < 1 << 64:
            return -1
        return to_java_long(v)
    return -1


def iterator_files(logs: Sequence[tuple[int, _F]], zxid: int) -> list[tuple[int, _F]]:
    """The log files ``FileTxnIterator(logDir, zxid, false)`` reads, oldest first: every file
    named ``zxid`` or later, and the newest one named below it (``FileTxnIterator.init``).

    ``logs`` is (first zxid, file) ascending (:func:`zxid_from_name` order). Unlike recovery's
    choice (the last file starting *at or before* a zxid), a file named exactly ``zxid``
    brings in the one before it too, as ZooKeeper's strict ``<`` does: the iterator's first
    txn is then the older file's, and the file named ``zxid`` counts in
    :func:`txnlog_sync_allowed`'s size.
    """
    out: list[tuple[int, _F]] = []
    for start, f in reversed(logs):
        out.append((start, f))
        if start < zxid:
            break
    out.reverse()
    return out


def txnlog_size_limit(snapshot_size: int, factor: float) -> int:
    """``ZKDatabase.calculateTxnLogSizeLimit``: ``(long) (snapSize * snapshotSizeFactor)``,
    ``snapshot_size`` the length of the newest snapshot file (0: none)."""
    limit = snapshot_size * factor
    if math.isnan(limit):
        return 0
    if math.isinf(limit):
        return _LONG_MAX if limit > 0 else -_LONG_MAX - 1
    return max(min(int(limit), _LONG_MAX), -_LONG_MAX - 1)  # Java's (long) cast truncates


def txnlog_sync_allowed(storage_size: int, limit: int) -> bool:
    """``ZKDatabase.getProposalsFromTxnLog``'s size rule: a negative limit turns syncing from
    the log off; a positive one bounds ``storage_size``, the total length of the files the
    iterator reads *after* the one its first txn came from (``FileTxnIterator.getStorageSize``
    once ``init`` has opened that file: :attr:`trizk.storage.disk.files.TxnLogReader.storage_size`),
    preallocated padding included (``File.length()``); a limit of 0 (no snapshot, or a product
    that truncates to 0) bounds nothing."""
    if limit < 0:
        return False
    return limit == 0 or storage_size <= limit


def padded_size(position: int, file_size: int, prealloc: int) -> int:
    """FilePadding.calculateFileSizeWithPadding: the size to grow the file to before a write.

    Grows only when the write position is within 4 KiB of the allocated size.
    """
    if prealloc > 0 and position + 4096 >= file_size:
        if position > file_size:
            file_size = position + prealloc
            file_size -= file_size % prealloc
        else:
            file_size += prealloc
    return file_size


def valid_entry_follows(data: bytes | bytearray | memoryview, offset: int) -> bool:
    """Whether a checksum-valid entry sits right after the (bad) record at ``offset``.

    Used to tell a corrupt *tail* (nothing good after it: truncate) from a corrupt record in
    the middle of a file (truncating would drop the good entries after it). Only possible
    when the bad record's length field is intact enough to skip it.
    """
    b = memoryview(data)
    if offset < FILE_HEADER_SIZE or offset + _ENTRY_HEAD.size > len(b):
        return False
    _, length = _ENTRY_HEAD.unpack_from(b, offset)
    if length <= 0:
        return False
    nxt = offset + _ENTRY_HEAD.size + length + 1
    if nxt + _ENTRY_HEAD.size > len(b):
        return False
    crc, ln = _ENTRY_HEAD.unpack_from(b, nxt)
    end = nxt + _ENTRY_HEAD.size + ln
    if ln < _TXN_HEADER_SIZE or end + 1 > len(b) or b[end] != EOR:
        return False
    return bool(zlib.adler32(b[nxt + _ENTRY_HEAD.size : end]) == crc)
