"""Golden bytes: every frame captured from real Apache ZooKeeper 3.8 traffic pins the codec.

``data/golden_frames.json`` was recorded by ``compat/capture/golden.py`` (a proxy between kazoo,
a raw socket client, cli_mt and a real server); each frame lists the Jute records it is made of.
For every frame we check that

* the generated fast path (``decode_from``) and the construct reference path (``parse_stream``)
  split the payload at the same record boundaries and cover it exactly;
* on each segment, ``Cls.decode`` and ``Cls.parse_reference`` give equal records;
* each record re-encodes, by ``encode()`` and by ``build_reference()``, to the identical bytes.

Then a few frames are checked for meaning (the wire traps of the design guide): the
ConnectRequest with and without the trailing readOnly byte, null vs empty buffers, replies
without a body on error, a failed multi, watch notifications.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from trizk.jute import JuteDecodeError
from trizk.jute import records as R
from trizk.jute.codes import CONTAINER_EPHEMERAL_OWNER, Code, EventType, KeeperState, OpCode
from trizk.jute.primitives import Record

GOLDEN: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "data" / "golden_frames.json").read_text()
)
FRAMES: list[dict[str, Any]] = GOLDEN["frames"]


def _cls(name: str) -> type[Record]:
    cls = getattr(R, name)
    assert isinstance(cls, type) and issubclass(cls, Record)
    return cls


def _fast_segments(frame: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Split the payload at record boundaries found by the generated decoder."""
    b = bytes.fromhex(frame["hex"])
    pos, out = 0, []
    for name in frame["records"]:
        if name == "bool":  # the trailing readOnly byte of the connect handshake
            end = pos + 1
        else:
            _, end = _cls(name).decode_from(b, pos)
        out.append((name, b[pos:end]))
        pos = end
    assert pos == len(b), f"{len(b) - pos} bytes not covered by {frame['records']}"
    return out


def _reference_boundaries(frame: dict[str, Any]) -> list[int]:
    """The same split, found by the construct reference codec instead."""
    stream = io.BytesIO(bytes.fromhex(frame["hex"]))
    ends = []
    for name in frame["records"]:
        if name == "bool":
            assert len(stream.read(1)) == 1
        else:
            _cls(name).construct.parse_stream(stream)
        ends.append(stream.tell())
    return ends


def _frame_id(f: dict[str, Any]) -> str:
    return f"{f['seq']}-{f['client']}-{f['dir']}-{f.get('op')}"


def _find(note: str, direction: str, **kw: Any) -> dict[str, Any]:
    """First frame of a step (by its note); a client's idle pings may interleave anywhere,
    so they only match when asked for."""
    hits = [
        f
        for f in FRAMES
        if f["note"].startswith(note)
        and f["dir"] == direction
        and (f.get("op") != "PING" or "ping" in note)
        and all(f.get(k) == v for k, v in kw.items())
    ]
    assert hits, f"no golden frame {note!r} {direction} {kw}"
    return hits[0]


def _records(frame: dict[str, Any]) -> list[Any]:
    segs = _fast_segments(frame)
    return [seg if name == "bool" else _cls(name).decode(seg) for name, seg in segs]


def test_capture_is_substantial() -> None:
    assert GOLDEN["server"].startswith("Apache ZooKeeper 3.8")
    assert len(FRAMES) > 200
    ops = {f.get("op") for f in FRAMES}
    for op in (
        "connect",
        "CREATE",
        "CREATE2",
        "DELETE",
        "EXISTS",
        "GETDATA",
        "SETDATA",
        "GETACL",
        "SETACL",
        "GETCHILDREN",
        "GETCHILDREN2",
        "SYNC",
        "PING",
        "MULTI",
        "MULTIREAD",
        "AUTH",
        "SETWATCHES",
        "SETWATCHES2",
        "CLOSESESSION",
        "NOTIFICATION",
    ):
        assert op in ops, op


@pytest.mark.parametrize("frame", FRAMES, ids=_frame_id)
def test_frame_both_codecs_agree_and_roundtrip(frame: dict[str, Any]) -> None:
    segs = _fast_segments(frame)
    ends = [sum(len(s) for _, s in segs[: i + 1]) for i in range(len(segs))]
    assert _reference_boundaries(frame) == ends
    for name, seg in segs:
        if name == "bool":
            assert seg in (b"\x00", b"\x01")
            continue
        cls = _cls(name)
        fast = cls.decode(seg)
        ref = cls.parse_reference(seg)
        assert fast == ref
        assert type(fast) is cls and type(ref) is cls
        assert fast.encode() == seg
        assert fast.build_reference() == seg
        assert ref.encode() == seg
    assert b"".join(s for _, s in segs) == bytes.fromhex(frame["hex"])


# ------------------------------------------------------------------------ connect handshake


def test_connect_request_with_readonly_byte() -> None:
    f = _find("kazoo connect", "c2s")
    b = bytes.fromhex(f["hex"])
    # The record lacks readOnly: decode() sees one trailing byte and refuses it...
    with pytest.raises(JuteDecodeError):
        R.ConnectRequest.decode(b)
    # ...decode_from reads the record and leaves exactly the readOnly byte.
    req, pos = R.ConnectRequest.decode_from(b, 0)
    assert b[pos:] == b"\x00"
    assert req.protocolVersion == 0 and req.sessionId == 0 and req.lastZxidSeen == 0
    assert req.passwd == bytes(16)
    ro = _find("connect with readOnly byte true", "c2s")
    rb = bytes.fromhex(ro["hex"])
    _, pos = R.ConnectRequest.decode_from(rb, 0)
    assert rb[pos:] == b"\x01"


def test_connect_request_without_readonly_byte() -> None:
    f = _find("connect without readOnly byte", "c2s")
    b = bytes.fromhex(f["hex"])
    req = R.ConnectRequest.decode(b)  # the whole frame is the record
    assert req.encode() == b and req.build_reference() == b
    _, pos = R.ConnectRequest.decode_from(b, 0)
    assert pos == len(b)
    # ZooKeeperServer.finishSessionInit writes readOnly only for clients that sent it.
    resp = _find("connect without readOnly byte", "s2c")
    rb = bytes.fromhex(resp["hex"])
    r = R.ConnectResponse.decode(rb)
    assert r.timeOut == req.timeOut and r.sessionId != 0 and r.passwd and len(r.passwd) == 16
    with_ro = _find("kazoo connect", "s2c")
    wb = bytes.fromhex(with_ro["hex"])
    _, pos = R.ConnectResponse.decode_from(wb, 0)
    assert wb[pos:] == b"\x00" and len(wb) == len(rb) + 1


def test_c_client_sends_readonly_byte_and_gets_clamped_timeout() -> None:
    f = _find("cli_mt -c 'create /cli'", "c2s")
    assert f["records"] == ["ConnectRequest", "bool"]
    req, pos = R.ConnectRequest.decode_from(bytes.fromhex(f["hex"]), 0)
    assert bytes.fromhex(f["hex"])[pos:] == b"\x00" and req.timeOut == 30000
    resp = R.ConnectResponse.decode_from(
        bytes.fromhex(_find("cli_mt -c 'create /cli'", "s2c")["hex"]), 0
    )[0]
    # Negotiated timeout is clamped to maxSessionTimeout = 20 * tickTime (500 ms in the capture).
    assert resp.timeOut == 10000


def test_reconnect_and_rejected_sessions() -> None:
    req = R.ConnectRequest.decode_from(
        bytes.fromhex(_find("reconnect to existing session", "c2s")["hex"]), 0
    )[0]
    assert req.sessionId != 0 and req.lastZxidSeen > 0
    resp = R.ConnectResponse.decode_from(
        bytes.fromhex(_find("reconnect to existing session", "s2c")["hex"]), 0
    )[0]
    assert resp.sessionId == req.sessionId and resp.passwd == req.passwd
    for note in ("reconnect to kazoo's closed session", "wrong password for a live session"):
        r = R.ConnectResponse.decode_from(bytes.fromhex(_find(note, "s2c")["hex"]), 0)[0]
        assert (r.timeOut, r.sessionId, r.passwd) == (0, 0, bytes(16))


# ------------------------------------------------------------------------- requests/replies


def test_create_null_vs_empty_data() -> None:
    empty = _records(_find("create persistent, data b''", "c2s"))
    null = _records(_find("create persistent, data None", "c2s"))
    assert empty[1].data == b"" and null[1].data is None
    assert empty[0] == R.RequestHeader(xid=empty[0].xid, type=OpCode.CREATE)
    # The server keeps the difference: getData answers a null buffer (length -1).
    assert _records(_find("get data None", "s2c"))[1].data is None
    assert _records(_find("getData of null data", "s2c"))[1].data is None
    assert _records(_find("getData of empty data", "s2c"))[1].data == b""


def test_reply_header_and_body() -> None:
    hdr, body = _records(_find("get", "s2c", op="GETDATA"))
    assert hdr.err == 0 and hdr.zxid > 0
    assert body.data == b"root" and body.stat.dataLength == 4
    # Errors carry no body: the frame is the 16-byte ReplyHeader alone.
    for note, code in (
        ("exists miss", Code.NONODE),
        ("create existing", Code.NODEEXISTS),
        ("set bad version", Code.BADVERSION),
        ("delete non-empty", Code.NOTEMPTY),
        ("set without auth", Code.NOAUTH),
    ):
        f = _find(note, "s2c")
        assert f["records"] == ["ReplyHeader"] and len(f["hex"]) == 32
        assert R.ReplyHeader.decode(bytes.fromhex(f["hex"])).err == code
    # Sequential suffix: %010d of the parent's cversion.
    path = _records(_find("create persistent sequential", "s2c"))[1].path
    assert path.startswith("/golden/seq-") and len(path.rsplit("-", 1)[1]) == 10


def test_create2_and_special_stats() -> None:
    _, body = _records(_find("create2 (include_data=True)", "s2c"))
    assert isinstance(body, R.Create2Response) and body.path == "/golden/c2"
    assert body.stat.dataLength == 2 and body.stat.czxid == body.stat.mzxid
    # Containers and TTL nodes store a special ephemeralOwner (0x8000000000000000, or 0xFF in
    # the top byte + the TTL), but clients never see it: DataNode.copyStat reports 0 for any
    # owner whose EphemeralType is not NORMAL.
    for note in ("createContainer", "exists container", "createTTL", "exists TTL node"):
        stat = _records(_find(note, "s2c"))[1].stat
        assert stat.ephemeralOwner == 0 != CONTAINER_EPHEMERAL_OWNER, note
    # A plain ephemeral does show its owner: the session id.
    conn = _find("create2 ephemeral sequential", "s2c")["conn"]
    sid = _records(next(f for f in FRAMES if f["conn"] == conn and f["dir"] == "s2c"))[0]
    eph = _records(_find("create2 ephemeral sequential", "s2c"))[1]
    assert eph.stat.ephemeralOwner == sid.sessionId
    assert eph.path == f"/raw/e-{1:010d}"


def test_utf8_path_and_binary_data() -> None:
    _, req = _records(_find("create with non-ASCII path", "c2s"))
    assert req.path == "/golden/\u00e9t\u00e9" and req.data == bytes(range(256))


def test_multi_ok() -> None:
    recs = _records(_find("multi ok", "c2s"))
    assert recs[0].type == OpCode.MULTI
    assert [type(r).__name__ for r in recs[1:]] == [
        "MultiHeader",
        "CreateRequest",
        "MultiHeader",
        "SetDataRequest",
        "MultiHeader",
        "CheckVersionRequest",
        "MultiHeader",
        "DeleteRequest",
        "MultiHeader",
    ]
    assert recs[1] == R.MultiHeader(type=OpCode.CREATE, done=False, err=-1)
    assert recs[-1] == R.MultiHeader(type=-1, done=True, err=-1)
    reply = _records(_find("multi ok", "s2c"))
    assert reply[0].err == 0
    heads = [r for r in reply[1:] if isinstance(r, R.MultiHeader)]
    assert [(h.type, h.done, h.err) for h in heads] == [
        (OpCode.CREATE, False, 0),
        (OpCode.SETDATA, False, 0),
        (OpCode.CHECK, False, 0),
        (OpCode.DELETE, False, 0),
        (-1, True, -1),
    ]


def test_multi_failing_member() -> None:
    reply = _records(_find("multi failing member", "s2c"))
    # The reply header of a failed multi says OK; every result is an ErrorResult whose
    # MultiHeader.err equals its ErrorResponse.err: 0 for the ops before the failure that were
    # rolled back, the error, then RUNTIMEINCONSISTENCY for the ops never tried.
    assert reply[0].err == 0
    pairs = list(zip(reply[1:-1:2], reply[2:-1:2], strict=True))
    assert [(h.type, h.done, h.err, e.err) for h, e in pairs] == [
        (-1, False, 0, 0),
        (-1, False, Code.BADVERSION, Code.BADVERSION),
        (-1, False, Code.RUNTIMEINCONSISTENCY, Code.RUNTIMEINCONSISTENCY),
    ]
    assert reply[-1] == R.MultiHeader(type=-1, done=True, err=-1)


def test_multiread_mixed_results() -> None:
    reply = _records(_find("multiRead", "s2c"))
    names = [type(r).__name__ for r in reply]
    assert names == [
        "ReplyHeader",
        "MultiHeader",
        "GetDataResponse",
        "MultiHeader",
        "GetChildrenResponse",
        "MultiHeader",
        "ErrorResponse",
        "MultiHeader",
    ]
    assert reply[5] == R.MultiHeader(type=-1, done=False, err=Code.NONODE)
    assert reply[6] == R.ErrorResponse(err=Code.NONODE)


def test_empty_children_vector_is_empty_not_null() -> None:
    _, body = _records(_find("get_children of leaf", "s2c"))
    assert body.children == ()


def test_acls() -> None:
    _, req = _records(_find("set_acls digest", "c2s"))
    assert req.acl[0].id.scheme == "digest" and req.acl[0].id.id.startswith("user:")
    _, resp = _records(_find("get_acls after set_acls", "s2c"))
    assert [a.id.scheme for a in resp.acl] == ["digest", "world"]
    _, auth = _records(_find("add_auth digest", "c2s"))
    assert auth == R.AuthPacket(type=0, scheme="digest", auth=b"user:pw")


def test_special_xids() -> None:
    ping = _find("idle: kazoo ping", "c2s")
    assert R.RequestHeader.decode(bytes.fromhex(ping["hex"])) == R.RequestHeader(
        xid=-2, type=OpCode.PING
    )
    pong = R.ReplyHeader.decode(bytes.fromhex(_find("idle: kazoo ping", "s2c")["hex"]))
    assert pong.xid == -2 and pong.err == 0
    assert _records(_find("add_auth digest", "s2c"))[0].xid == -4
    sw = _records(_find("setWatches (xid -8)", "c2s"))
    assert sw[0] == R.RequestHeader(xid=-8, type=OpCode.SETWATCHES)
    assert sw[1].dataWatches == ("/raw/m",) and sw[1].childWatches == ("/raw",)
    bad = _records(_find("setWatches2 with a null vector", "c2s"))[1]
    assert bad.persistentRecursiveWatches is None
    assert _records(_find("setWatches2 with a null vector", "s2c"))[0].err == (
        Code.MARSHALLINGERROR
    )


def test_watcher_events() -> None:
    seen: dict[EventType, str] = {}
    for f in FRAMES:
        if f.get("op") == "NOTIFICATION":
            hdr, ev = _records(f)
            # Notifications carry zxid -1 (WatchManager builds them without a zxid).
            assert hdr.xid == -1 and hdr.zxid == -1 and hdr.err == 0
            assert ev.state == KeeperState.SYNCCONNECTED
            seen.setdefault(EventType(ev.type), ev.path)
    assert seen[EventType.NODEDATACHANGED] == "/golden/w"
    assert seen[EventType.NODECREATED] == "/golden/born"
    assert seen[EventType.NODECHILDRENCHANGED] == "/golden"
    assert seen[EventType.NODEDELETED] == "/golden/born"
