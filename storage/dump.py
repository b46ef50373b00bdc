"""``trizk-dump``: print a txn log or snapshot, like TxnLogToolkit / SnapshotFormatter.

Usage::

    trizk-dump log FILE [--json] [--progress]
    trizk-dump snapshot FILE [--json] [--data] [--progress]

Text output follows the Java tools line for line where they are well defined: a log prints a
header line, one line per txn (``<date> session 0x.. cxid 0x.. zxid 0x.. <op> <txn>``, the txn
rendered as Jute's ToStringOutputArchive would), then ``EOF reached after N txns.``; we render
multi sub-txns decoded instead of as raw bytes. A snapshot prints every znode's stat, then the
sessions, the digest and the last zxid. ``--json`` prints JSON Lines for logs (``kind`` =
header | txn | end) and one JSON document for snapshots. Progress goes to stderr for files of
``PROGRESS_MIN_BYTES`` or more (or with ``--progress``).

Exit status: 0 clean; 1 the file is torn or corrupt (everything readable before the damage is
printed first); 2 bad invocation or not a log/snapshot file.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from trizk.jute.primitives import Record, RecordType, Vector
from trizk.jute.records import ACL, CreateContainerTxn, CreateTTLTxn, CreateTxn, MultiTxn
from trizk.jute.records import SetDataTxn as _SetDataTxn
from trizk.storage.disk.files import read_bytes
from trizk.storage.formats import snapshot as snap
from trizk.storage.formats import txnlog

PROGRESS_MIN_BYTES = 8 * 1024 * 1024


# ------------------------------------------------------------------------ Jute toString


def _escape_string(s: str | None) -> str:
    if s is None:
        return ""
    table = {"\0": "%00", "\n": "%0A", "\r": "%0D", ",": "%2C", "}": "%7D", "%": "%25"}
    return "'" + "".join(table.get(c, c) for c in s)


def _escape_buffer(b: bytes | None) -> str:
    if not b:
        return ""
    # Integer.toHexString of a (signed) byte: no padding, negative bytes sign-extended.
    return "#" + "".join(f"{x:x}" if x < 128 else f"{(x - 256) & 0xFFFFFFFF:x}" for x in b)


def jute_str(rec: Record) -> str:
    """Record.toString of the Java Jute classes (ToStringOutputArchive)."""
    return _fields(rec) + "\n"


def _fields(rec: Record) -> str:
    return ",".join(_value(getattr(rec, name), t) for name, t in rec.FIELDS)


def _value(v: Any, t: Any) -> str:
    if isinstance(t, RecordType):
        return "s{" + _fields(v) + "}"
    if isinstance(t, Vector):
        return "v{" + ",".join(_value(x, t.item) for x in (v or ())) + "}"
    if t.jute_name == "ustring":
        return _escape_string(v)
    if t.jute_name == "buffer":
        return _escape_buffer(v)
    if isinstance(v, bool):
        return "T" if v else "F"
    return str(v)


def _acl_list(acls: tuple[ACL, ...] | None) -> str:
    # java.util.List.toString of ACL records, each ending in "\n".
    return "[" + ", ".join(jute_str(a) for a in (acls or ())) + "]"


def _text(b: bytes | None) -> str:
    return b.decode("utf-8", "replace") if b else ""


def txn_str(type_: int, txn: Record | None) -> str:
    """TxnLogToolkit.getFormattedTxnStr."""
    if txn is None:
        return ""
    if isinstance(txn, CreateTxn):
        return (
            f"{txn.path},{_text(txn.data)},{_acl_list(txn.acl)},"
            f"{'true' if txn.ephemeral else 'false'},{txn.parentCVersion}"
        )
    if isinstance(txn, _SetDataTxn):
        return f"{txn.path},{_text(txn.data)},{txn.version}"
    if isinstance(txn, CreateContainerTxn):
        return f"{txn.path},{_text(txn.data)},{_acl_list(txn.acl)},{txn.parentCVersion}"
    if isinstance(txn, CreateTTLTxn):
        return f"{txn.path},{_text(txn.data)},{_acl_list(txn.acl)},{txn.parentCVersion},{txn.ttl}"
    if isinstance(txn, MultiTxn):
        parts = []
        try:
            for sub_type, sub in txnlog.decode_multi(txn):
                parts.append(f"{txnlog.op_name(sub_type)}:{txn_str(sub_type, sub).rstrip()}")
        except (txnlog.LogFormatError, ValueError):
            parts = [f"{txnlog.op_name(t.type)}:{_text(t.data)}" for t in txn.txns or ()]
        return ";".join(parts)
    return jute_str(txn)


def java_short_datetime(ms: int) -> str:
    """DateFormat.getDateTimeInstance(SHORT, LONG) in en_US: ``11/21/26, 9:50:48 AM UTC``."""
    t = time.localtime(ms / 1000)
    hour = t.tm_hour % 12 or 12
    ampm = "AM" if t.tm_hour < 12 else "PM"
    return (
        f"{t.tm_mon}/{t.tm_mday}/{t.tm_year % 100:02d}, "
        f"{hour}:{t.tm_min:02d}:{t.tm_sec:02d} {ampm} {time.strftime('%Z', t)}"
    )


def java_date(ms: int) -> str:
    """java.util.Date.toString: ``Sat Nov 21 09:50:48 UTC 2026``."""
    return time.strftime("%a %b %d %H:%M:%S %Z %Y", time.localtime(ms / 1000))


def _hex(v: int) -> str:
    return f"{v & 0xFFFFFFFFFFFFFFFF:x}"


def _hex16(v: int) -> str:
    """Java ``%#016x``."""
    return f"{v & 0xFFFFFFFFFFFFFFFF:#016x}"


# ------------------------------------------------------------------------ JSON helpers


def _jsonable(v: Any) -> Any:
    if isinstance(v, Record):
        return {name: _jsonable(getattr(v, name)) for name, _ in v.FIELDS}
    if isinstance(v, bytes):
        return {"base64": base64.b64encode(v).decode()}
    if isinstance(v, tuple | list):
        return [_jsonable(x) for x in v]
    return v


def _txn_json(e: txnlog.TxnEntry) -> dict[str, Any]:
    h = e.header
    out: dict[str, Any] = {
        "kind": "txn",
        "time": h.time,
        "session": "0x" + _hex(h.clientId),
        "cxid": h.cxid,
        "zxid": "0x" + _hex(h.zxid),
        "type": txnlog.op_name(h.type),
        "txn": _jsonable(e.txn),
    }
    if isinstance(e.txn, MultiTxn):
        try:
            out["ops"] = [
                {"type": txnlog.op_name(t), "txn": _jsonable(r)}
                for t, r in txnlog.decode_multi(e.txn)
            ]
        except (txnlog.LogFormatError, ValueError):
            pass
    if e.digest is not None:
        out["digest"] = {"version": e.digest.version, "treeDigest": e.digest.treeDigest}
    return out


# ------------------------------------------------------------------------ commands


class _Progress:
    def __init__(self, name: str, enabled: bool, err: TextIO) -> None:
        self.name = name
        self.enabled = enabled
        self.err = err
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        pct = done * 100 // total
        if pct != self.last:
            self.last = pct
            self.err.write(f"\r{self.name}: {pct}%")
            if pct >= 100:
                self.err.write("\n")
            self.err.flush()


def dump_log(
    data: bytes, out: TextIO, *, as_json: bool, progress: Callable[[int, int], None]
) -> int:
    sc = txnlog.LogScanner(data)
    it = iter(sc)
    total = len(data)
    step = max(total // 100, 1)
    next_at = step
    first = True
    count = 0
    for se in it:
        if first:
            _log_header(sc, out, as_json)
            first = False
        e = se.entry
        if as_json:
            out.write(json.dumps(_txn_json(e)) + "\n")
        else:
            h = e.header
            line = (
                f"{java_short_datetime(h.time)} session 0x{_hex(h.clientId)} "
                f"cxid 0x{_hex(h.cxid)} zxid 0x{_hex(h.zxid)} {txnlog.op_name(h.type)} "
                f"{txn_str(h.type, e.txn)}"
            )
            out.write(line if line.endswith("\n") else line + "\n")
        count += 1
        if se.end >= next_at:
            progress(se.end, total)
            next_at = se.end + step
    if first:
        _log_header(sc, out, as_json)
    stop = sc.stop
    assert stop is not None
    progress(total, total)
    if as_json:
        out.write(
            json.dumps(
                {
                    "kind": "end",
                    "count": count,
                    "reason": stop.reason.value,
                    "clean": stop.reason.clean,
                    "offset": stop.good_end,
                    "detail": stop.detail,
                }
            )
            + "\n"
        )
    elif stop.reason.clean:
        out.write(f"EOF reached after {count} txns.\n")
    else:
        out.write(
            f"Log stops after {count} txns at offset {stop.good_end}: "
            f"{stop.reason.value} ({stop.detail})\n"
        )
    return 0 if stop.reason.clean else 1


def _log_header(sc: txnlog.LogScanner, out: TextIO, as_json: bool) -> None:
    fh = sc.file_header
    if fh is None:
        return
    if as_json:
        out.write(json.dumps({"kind": "header", "dbid": fh.dbid, "version": fh.version}) + "\n")
    else:
        out.write(
            f"ZooKeeper Transactional Log File with dbid {fh.dbid} "
            f"txnlog format version {fh.version}\n"
        )


def dump_snapshot(
    data: bytes,
    name: str,
    out: TextIO,
    *,
    as_json: bool,
    with_data: bool,
    progress: Callable[[int, int], None],
) -> int:
    content = snap.parse(data, progress=progress)
    file_zxid = txnlog.zxid_from_name(name, snap.SNAP_PREFIX)
    ephemerals: dict[int, int] = {}
    for n in content.nodes:
        owner = n.stat.ephemeralOwner
        if owner in content.sessions:
            ephemerals[owner] = ephemerals.get(owner, 0) + 1
    last = max([file_zxid, *(max(n.stat.mzxid, n.stat.pzxid) for n in content.nodes)])
    if as_json:
        doc = {
            "zxid": "0x" + _hex(last),
            "dbid": content.dbid,
            "sessions": [
                {"id": "0x" + _hex(s), "timeout": t, "ephemeralCount": ephemerals.get(s, 0)}
                for s, t in content.sessions.items()
            ],
            "acls": {str(ref): _jsonable(acls) for ref, acls in content.acls.items()},
            "nodes": [
                {
                    "path": n.path or "/",
                    "data": None if n.data is None else base64.b64encode(n.data).decode(),
                    "acl": n.acl,
                    "stat": _jsonable(n.stat),
                }
                for n in content.nodes
            ],
            "digest": None
            if content.digest is None
            else {
                "zxid": "0x" + _hex(content.digest.zxid),
                "version": content.digest.version,
                "digest": content.digest.digest,
            },
            "treeDigest": content.tree_digest(),
        }
        out.write(json.dumps(doc) + "\n")
        return 0
    w = out.write
    # DataTree.getNodeCount counts "/" twice ("" and its "/" alias).
    w(f"ZNode Details (count={len(content.nodes) + 1}):\n")
    for n in content.nodes:
        s = n.stat
        w("----\n")
        w(f"{n.path or '/'}\n")
        w(f"  cZxid = {_hex16(s.czxid)}\n")
        w(f"  ctime = {java_date(s.ctime)}\n")
        w(f"  mZxid = {_hex16(s.mzxid)}\n")
        w(f"  mtime = {java_date(s.mtime)}\n")
        w(f"  pZxid = {_hex16(s.pzxid)}\n")
        w(f"  cversion = {s.cversion}\n")
        w(f"  dataVersion = {s.version}\n")
        w(f"  aclVersion = {s.aversion}\n")
        w(f"  ephemeralOwner = {_hex16(s.ephemeralOwner)}\n")
        if with_data:
            w(f"  data = {base64.b64encode(n.data or b'').decode()}\n")
        else:
            w(f"  dataLength = {len(n.data or b'')}\n")
    w("----\n")
    w("Session Details (sid, timeout, ephemeralCount):\n")
    for sid, to in content.sessions.items():
        w(f"{_hex16(sid)}, {to}, {ephemerals.get(sid, 0)}\n")
    if content.digest is not None and content.digest.zxid > 0:
        w(f"Target zxid digest is: {_hex(content.digest.zxid)}, {content.digest.digest}\n")
    w("----\n")
    w(f"Last zxid: 0x{_hex(last)}\n")
    return 0


def main(
    argv: list[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    ap = argparse.ArgumentParser(
        prog="trizk-dump", description="Print a ZooKeeper txn log or snapshot file."
    )
    sub = ap.add_subparsers(dest="what", required=True)
    for what in ("log", "snapshot"):
        p = sub.add_parser(what)
        p.add_argument("file", type=Path)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.add_argument("--progress", action="store_true", help="report progress on stderr")
        if what == "snapshot":
            p.add_argument("-d", "--data", action="store_true", help="dump each znode's data")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    path: Path = args.file
    try:
        data = read_bytes(path)
    except OSError as e:
        err.write(f"File doesn't exist or not readable: {path} ({e.strerror})\n")
        return 2
    progress = _Progress(path.name, args.progress or len(data) >= PROGRESS_MIN_BYTES, err)
    try:
        if args.what == "log":
            return dump_log(data, out, as_json=args.json, progress=progress)
        return dump_snapshot(
            data, path.name, out, as_json=args.json, with_data=args.data, progress=progress
        )
    except txnlog.LogFormatError as e:
        err.write(f"{path}: not a ZooKeeper transaction log: {e}\n")
        return 2
    except snap.SnapshotFormatError as e:
        err.write(f"{path}: not a valid snapshot: {e}\n")
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
