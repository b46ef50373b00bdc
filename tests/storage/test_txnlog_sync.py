"""Reading the on-disk txn log for a leader's DIFF (``FileTxnIterator`` with fastForward off,
``ZKDatabase.getProposalsFromTxnLog``'s size rule): which files are read, which of them the
size rule counts, lazy reading, and where a damaged file ends the iteration."""

from __future__ import annotations

from pathlib import Path

from trizk.jute.codes import OpCode
from trizk.jute.records import SetDataTxn, TxnHeader
from trizk.storage.disk import files
from trizk.storage.formats import txnlog
from trizk.storage.formats.txnlog import TxnEntry


def entry(zxid: int) -> TxnEntry:
    return TxnEntry(
        TxnHeader(1, zxid & 0xFFFF, zxid, 0, OpCode.SETDATA),
        SetDataTxn("/a", b"x" * 10, zxid & 0xFFFF),
        txnlog.make_digest(zxid * 7),
    )


def write_logs(d: Path, runs: list[range], prealloc: int = 4096) -> None:
    """One log file per run of zxids (the writer rolls between them)."""
    w = files.TxnLogWriter(d, prealloc_size=prealloc, force_sync=False)
    for run in runs:
        w.append(entry(z) for z in run)
        w.sync()
        w.roll()
    w.close()


def test_iterator_files_as_zookeeper_chooses_them() -> None:
    logs = [(1, "a"), (10, "b"), (20, "c")]
    sel = txnlog.iterator_files
    assert sel(logs, 15) == [(10, "b"), (20, "c")]
    assert sel(logs, 25) == [(20, "c")]
    # a file named exactly the zxid brings in the one before it (strict <)
    assert sel(logs, 10) == [(1, "a"), (10, "b"), (20, "c")]
    assert sel(logs, 20) == [(10, "b"), (20, "c")]
    # older than every file: all of them (their first txn is then after the zxid)
    assert sel(logs, 0) == logs
    assert sel([], 5) == []


def test_size_rule() -> None:
    limit, allowed = txnlog.txnlog_size_limit, txnlog.txnlog_sync_allowed
    assert limit(1000, 0.33) == 330
    assert limit(1001, 0.5) == 500  # (long) truncates
    assert limit(0, 0.33) == 0  # no snapshot
    assert limit(1000, -1.0) == -1000
    assert limit(1000, -0.0001) == 0  # a negative factor truncated to 0: no bound at all
    assert limit(5, float("nan")) == 0
    assert allowed(330, 330) and not allowed(331, 330)
    assert allowed(10**12, 0)  # 0 bounds nothing
    assert not allowed(0, -1)


def test_reader_yields_payloads_from_the_file_holding_the_zxid(tmp_path: Path) -> None:
    write_logs(tmp_path, [range(1, 11), range(11, 21), range(21, 31)])
    r = files.TxnLogReader(tmp_path, 15)
    assert [p.name for p in r.files] == ["log.b", "log.15"]
    got = list(r)
    # of the txns below 15 only the newest (a TRUNC's target); checksums of all verified
    assert [z for z, _ in got] == list(range(14, 31))
    assert all(data == txnlog.encode_payload(entry(z)) for z, data in got)


def test_reader_is_lazy(tmp_path: Path) -> None:
    write_logs(tmp_path, [range(1, 11), range(11, 21)])
    r = files.TxnLogReader(tmp_path, 1)
    (tmp_path / "log.b").write_bytes(b"not a log at all")  # never opened below
    it = iter(r)
    assert [next(it)[0] for _ in range(10)] == list(range(1, 11))
    it.close()  # the mapping of log.1 is released (no BufferError)


def test_a_torn_tail_goes_on_with_the_next_file_a_bad_checksum_stops(tmp_path: Path) -> None:
    write_logs(tmp_path, [range(1, 6), range(6, 11)], prealloc=0)
    first = tmp_path / "log.1"
    data = first.read_bytes()
    first.write_bytes(data[:-5])  # torn last entry (zxid 5)
    assert [z for z, _ in files.TxnLogReader(tmp_path, 1)] == [1, 2, 3, 4, *range(6, 11)]
    entries, _ = txnlog.scan(data)
    bad = bytearray(data)
    bad[entries[2].offset + 12] ^= 0xFF  # zxid 3's payload: checksum mismatch
    first.write_bytes(bytes(bad))
    assert [z for z, _ in files.TxnLogReader(tmp_path, 1)] == [1, 2]


def test_the_newest_txn_below_the_zxid_comes_first_whatever_file_it_is_in(tmp_path: Path) -> None:
    write_logs(tmp_path, [range(1, 11), range(12, 21)])
    assert [z for z, _ in files.TxnLogReader(tmp_path, 11)] == [10, *range(12, 21)]
    assert [z for z, _ in files.TxnLogReader(tmp_path, 12)] == [10, *range(12, 21)]
    assert [z for z, _ in files.TxnLogReader(tmp_path, 99)] == [20]  # all below: the newest
    # a txn repeated after the zxid was reached is yielded again (the leader skips it)
    write_logs(tmp_path / "dup", [range(1, 6), range(3, 8)])
    got = [z for z, _ in files.TxnLogReader(tmp_path / "dup", 2)]
    assert got == [1, 2, 3, 4, 5, 3, 4, 5, 6, 7]


def test_entry_spans_read_as_zookeeper_reads(tmp_path: Path) -> None:
    write_logs(tmp_path, [range(1, 4)], prealloc=4096)
    data = (tmp_path / "log.1").read_bytes()
    spans = txnlog.entry_spans(data)
    got = []
    while True:
        try:
            got.append(next(spans))
        except StopIteration as end:
            reason = end.value
            break
    assert [z for z, _, _ in got] == [1, 2, 3] and reason is txnlog.StopReason.EOF
    _, start, stop = got[1]
    assert data[start:stop] == txnlog.encode_payload(entry(2))
    # skip_below: of the entries below it only the newest, wherever the file ends
    assert [z for z, _, _ in txnlog.entry_spans(data, 3)] == [2, 3]
    assert [z for z, _, _ in txnlog.entry_spans(data, 9)] == [3]
    assert [z for z, _, _ in txnlog.entry_spans(data, 1)] == [1, 2, 3]


def test_no_logs_and_a_log_without_a_header(tmp_path: Path) -> None:
    assert list(files.TxnLogReader(tmp_path, 5)) == []
    (tmp_path / "log.1").write_bytes(b"")
    write_logs(tmp_path, [range(2, 5)])
    # FileTxnIterator fails on a file without a whole header: nothing after it is read
    assert list(files.TxnLogReader(tmp_path, 1)) == []
    assert [z for z, _ in files.TxnLogReader(tmp_path, 3)] == [2, 3, 4]


def test_storage_size_counts_the_files_after_the_one_holding_the_first_txn(tmp_path: Path) -> None:
    """``getStorageSize`` as ``getProposalsFromTxnLog`` calls it: ``init`` has opened the
    oldest file (``goToNextLog`` took it off ``storedFiles``) and read its first txn, so only
    the files not yet opened count, padding included; one file counts 0 however long."""
    write_logs(tmp_path / "one", [range(1, 11)], prealloc=1 << 20)
    r = files.TxnLogReader(tmp_path / "one", 5)
    assert next(iter(r))[0] == 4
    assert r.storage_size == 0
    assert (tmp_path / "one" / "log.1").stat().st_size >= 1 << 20
    write_logs(tmp_path / "three", [range(1, 11), range(11, 21), range(21, 31)])
    d = tmp_path / "three"
    size = {p.name: p.stat().st_size for p in d.iterdir()}
    assert min(size.values()) >= 4096  # padding counts (File.length)
    r = files.TxnLogReader(d, 15)
    assert r.storage_size == size["log.b"] + size["log.15"]  # nothing read yet: all of them
    assert next(iter(r))[0] == 14
    assert r.storage_size == size["log.15"]
    # a file named exactly the zxid brings in the one before it: that one holds the first txn
    r = files.TxnLogReader(d, 11)
    list(r)
    assert [p.name for p in r.files] == ["log.1", "log.b", "log.15"]
    assert r.storage_size == size["log.b"] + size["log.15"]
    # a first file without txns (all padding) is passed over, as FileTxnIterator.next does
    e = tmp_path / "empty-first"
    write_logs(e, [range(2, 11), range(11, 21)])
    (e / "log.1").write_bytes((e / "log.2").read_bytes()[:16] + b"\0" * 4096)
    r = files.TxnLogReader(e, 1)
    assert [p.name for p in r.files] == ["log.1", "log.2", "log.b"]
    assert next(iter(r))[0] == 2
    assert r.storage_size == (e / "log.b").stat().st_size
    # no txn at all: every file was opened, none left to count
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "log.1").write_bytes((d / "log.1").read_bytes()[:16] + b"\0" * 4096)
    r = files.TxnLogReader(tmp_path / "none", 5)
    assert list(r) == [] and r.storage_size == 0
