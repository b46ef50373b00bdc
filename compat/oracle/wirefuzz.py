"""Wire-level differential fuzzer: the same mutated frames to Apache ZooKeeper and trizk.

``python -m trizk.compat.oracle.wirefuzz [--seconds S | --cases N] [--seed K] [--oracle V]``
(the long run: ``--seconds 300``; CI runs a few seconds of it, tests/compat/test_wirefuzz.py;
``--oracle 3.9.3``, the default, compares ZooKeeper 3.9.3 with trizk answering as 3.9.3,
``--oracle 3.8.0`` the two at 3.8.0).

Theory
------
A *case* is a valid request frame of some opcode (every opcode a client can send: the reads,
the writes, multi and multiRead, auth, sasl, setWatches(2), reconfig, ping, closeSession, the
extended types, and unknown ones) followed by a short list of *mutations*, each a small data
record applied in order by :func:`apply`: bit flips, truncated records (length fixed up or
not), changed length fields (huge, negative, off by a few), Jute nulls and odd counts written
over length prefixes, trailing bytes, inserted or deleted bytes, a second frame spliced after or
into the first, another opcode, another xid. A case is a pure function of ``(seed, n)``.

Each case runs as a compat scenario (:mod:`trizk.compat.oracle.scenario`, step ``frames``) with the
``base`` node ``/t`` made fresh by :class:`trizk.compat.oracle.compare.ServerPool`'s reset: session
``A`` creates ``/t/a`` and ``/t/a/b`` (so reads and writes find nodes), sends the mutated bytes,
then a fence request; everything up to the fence's reply (or the close, or a bounded timeout) is
recorded. Both transcripts go through the compat normaliser (zxids by rank, session ids by
label, times) and :func:`trizk.compat.oracle.compare.diff_transcripts`: what differs is the reply
header (xid, normalised zxid, err), the body as decoded (or its raw bytes), notifications, and
whether the connection was kept or closed.

After every case a *bystander* session, opened once per server at the start, reads ``/by``; a
failure there (or a dead server) is a finding of its own, whatever the other server did.

A last frame left incomplete by the mutations is padded with zero bytes up to its declared
length when that length is one a server accepts (at most ``jute.maxbuffer``): a half-sent
frame only makes both servers wait (tested in tests/shell/test_load.py), so the fuzzer spends
its time on frames that are read.

A difference is re-run on the same servers (``CONFIRM_RUNS`` times); one that does not repeat
is counted as *flaky*, not as a difference: ZooKeeper answers a request on its pipeline threads
while its reader thread may already be closing the connection for the next bytes, so a reply
can be lost there or not (trizk answers in order, always). For the same reason a *racy* case
(:func:`racy`) passes when both servers closed the connection, or both kept it with the same
packets in another order (:func:`races_only`). A confirmed difference is shrunk
(:func:`trizk.compat.oracle.randomgen.shrink` over the mutation list), then re-run on fresh servers;
the reproducer is printed as a scenario (JSON) to keep in ``compat/scenarios/``.

Invariants: every wait is bounded (the fence's ``io_timeout``); the fuzzer stops only the
servers it started.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trizk.compat.oracle.compare import (
    Difference,
    Endpoint,
    Runner,
    ServerPool,
    Tamper,
    diff_transcripts,
)
from trizk.compat.oracle.normalise import normalise
from trizk.compat.oracle.randomgen import BASE, VALID_PATHS, _op, shrink
from trizk.compat.oracle.rawclient import ConnectionClosed, RawClient, WireTimeout
from trizk.compat.oracle.scenario import OPEN_ACL, Step, build_request
from trizk.compat.procs.servers import DEFAULT_VERSION, ZK_VERSIONS, split_kind
from trizk.jute import records as R
from trizk.jute.codes import OpCode, Xid
from trizk.jute.multi import encode_request
from trizk.jute.primitives import Record

#: zoo.cfg of both servers: TTL/container opcodes on, no fsync (the fuzzer writes a lot)
FUZZ_CFG = {"extendedTypesEnabled": "true", "forceSync": "no"}
#: ZooKeeper's default jute.maxbuffer: a frame longer than this is refused on both servers
MAX_FRAME = 0xFFFFF
#: the nodes each case starts with (besides BASE)
SETUP: list[Step] = [
    ["A", "create", {"path": "/t/a", "data": "x"}],
    ["A", "create", {"path": "/t/a/b", "data": "y"}],
]
_I32 = struct.Struct(">i")
_HDR = struct.Struct(">iii")  # length, xid, type

Mutation = list[Any]  # [kind, params...]: JSON-able, applied by apply()


# --------------------------------------------------------------------------- seed frames


def _frame(xid: int, op: int, body: bytes) -> bytes:
    return _HDR.pack(8 + len(body), xid, op) + body


def _record(op: str, a: dict[str, Any]) -> tuple[int, Record]:
    code, rec = build_request(op, a)
    assert rec is not None  # every op a multi carries has a record
    return code, rec


def _step_frame(r: random.Random, xid: int, op: str) -> bytes:
    code, rec = build_request(*_op(r, op))
    return _frame(xid, code, rec.encode() if rec is not None else b"")


#: every opcode a seed frame carries, with how its body is made
SEED_OPS = (
    "create create2 createContainer createTTL delete exists getData setData getACL setACL "
    "getChildren getChildren2 sync check getAllChildrenNumber getEphemerals addWatch "
    "removeWatches checkWatches whoAmI multi multiRead auth setWatches setWatches2 sasl "
    "reconfig ping closeSession unknown"
).split()


def seed_frame(r: random.Random, op: str) -> bytes:
    """One well-formed request frame of ``op`` (random valid arguments)."""
    xid = r.randint(1, 1000)
    if op in ("create", "create2", "delete", "exists", "getData", "setData", "getACL"):
        return _step_frame(r, xid, op)
    if op in ("setACL", "getChildren", "getChildren2", "sync", "getAllChildrenNumber"):
        return _step_frame(r, xid, op)
    if op in ("getEphemerals", "addWatch", "removeWatches", "checkWatches"):
        return _step_frame(r, xid, op)
    if op == "check":
        _code, rec = build_request("check", {"path": r.choice(VALID_PATHS), "version": 0})
        return _frame(xid, OpCode.CHECK, rec.encode() if rec else b"")
    if op in ("createContainer", "createTTL"):
        a = {"path": r.choice(VALID_PATHS), "data": "c", "ttl": r.choice([1, 1000, 0, -1])}
        if op == "createTTL":
            a["mode"] = r.choice(["PERSISTENT_WITH_TTL", "PERSISTENT_SEQUENTIAL_WITH_TTL"])
        code, rec = build_request(op, a)
        return _frame(xid, code, rec.encode() if rec else b"")
    if op == "whoAmI":
        return _frame(xid, OpCode.WHOAMI, b"")
    if op == "multi":
        kinds = ["create", "create2", "delete", "setData", "check"]
        subs = [_op(r, r.choice(kinds)) for _ in range(r.randint(1, 4))]
        ops = [_record(o[0], {k: v for k, v in o[1].items() if k != "wait"}) for o in subs]
        return _frame(xid, OpCode.MULTI, encode_request(ops))
    if op == "multiRead":
        reads = [
            _record(r.choice(["getData", "getChildren"]), {"path": r.choice(VALID_PATHS)})
            for _ in range(r.randint(1, 3))
        ]
        return _frame(xid, OpCode.MULTIREAD, encode_request(reads))
    if op == "auth":
        rec = R.AuthPacket(0, r.choice(["digest", "digest", "ip", "world"]), b"alice:pw")
        return _frame(Xid.AUTH, OpCode.AUTH, rec.encode())
    if op == "setWatches":
        sw = R.SetWatches(0, ("/t/a",), ("/t/x",), ("/t",))
        return _frame(Xid.SET_WATCHES, OpCode.SETWATCHES, sw.encode())
    if op == "setWatches2":
        sw2 = R.SetWatches2(0, ("/t/a",), ("/t/x",), ("/t",), ("/t/a",), ("/t",))
        return _frame(Xid.SET_WATCHES, OpCode.SETWATCHES2, sw2.encode())
    if op == "sasl":
        return _frame(xid, OpCode.SASL, R.GetSASLRequest(b"token").encode())
    if op == "reconfig":
        rc = R.ReconfigRequest("server.2=127.0.0.1:1:2", "", "", -1)
        return _frame(xid, OpCode.RECONFIG, rc.encode())
    if op == "ping":
        return _frame(Xid.PING, OpCode.PING, b"")
    if op == "closeSession":
        return _frame(xid, OpCode.CLOSESESSION, b"")
    if op == "unknown":
        return _frame(xid, r.choice([10, 20, 23, 99, 108, -2, -9, 0]), b"\0\0\0\x01/")
    raise ValueError(op)


# --------------------------------------------------------------------------- mutations

#: values written over a length prefix or count (Jute nulls, empties, off the end, huge)
ODD_INTS = [-1, -1, -1, 0, 1, -2, 0x7FFFFFFF, 0xFFFFF, 0x100000, -0x80000000]
#: opcodes a mutation may put in the header (valid, internal, unknown)
ODD_OPS = [*(int(o) for o in OpCode), 10, 20, 23, 99, 108, 200, -9, -12, 0x7FFFFFFF]
#: xids a mutation may put in the header (the special ones, and ordinary ones)
ODD_XIDS = [0, -1, -2, -4, -8, -3, 1, 7, 0x7FFFFFFF, -0x80000000]


def _length_offsets(b: bytes) -> list[int]:
    """Offsets (past the frame length) of 4-byte ints that look like a Jute length prefix."""
    out = []
    for p in range(12, len(b) - 3):
        (n,) = _I32.unpack_from(b, p)
        if 0 <= n <= len(b) - p - 4:
            out.append(p)
    return out


def random_mutation(r: random.Random, b: bytes) -> Mutation:
    """A mutation for frame bytes ``b`` (positions are chosen now, so the case is data)."""
    kind = r.choice(
        [
            "flip",
            "flip",
            "truncate",
            "truncate",
            "length",
            "null",
            "null",
            "null",
            "trailing",
            "insert",
            "delete",
            "splice",
            "append_frame",
            "opcode",
            "xid",
        ]
    )
    n = max(len(b), 5)
    if kind == "flip":
        return ["flip", [r.randrange(4 * 8, n * 8) for _ in range(r.randint(1, 3))]]
    if kind == "truncate":
        return ["truncate", r.randint(4, n), r.random() < 0.7]
    if kind == "length":
        return ["length", r.choice([*ODD_INTS, r.randint(-8, 8), r.randint(-8, 8)])]
    if kind == "null":
        offs = _length_offsets(b)
        p = r.choice(offs) if offs else r.randrange(4, n)
        return ["int_at", p, r.choice(ODD_INTS)]
    if kind == "trailing":
        return ["trailing", r.randbytes(r.randint(1, 8)).hex()]
    if kind == "insert":
        return ["insert", r.randrange(4, n), r.randbytes(r.randint(1, 6)).hex()]
    if kind == "delete":
        return ["delete", r.randrange(4, n), r.randint(1, 6)]
    if kind in ("splice", "append_frame"):
        other = seed_frame(r, r.choice(SEED_OPS))
        if kind == "splice":
            return ["splice", r.randrange(4, n), other[r.randrange(4, len(other)) :].hex()]
        return ["append_frame", other.hex()]
    if kind == "opcode":
        return ["opcode", r.choice(ODD_OPS)]
    return ["xid", r.choice(ODD_XIDS)]


def _fix_length(b: bytearray) -> bytearray:
    if len(b) >= 4:
        _I32.pack_into(b, 0, len(b) - 4)
    return b


def apply(frame: bytes, mutations: list[Mutation]) -> bytes:
    """The bytes sent for ``frame`` after ``mutations`` (in order); a last frame left shorter
    than its declared length (at most MAX_FRAME) is padded with zeros (module docstring)."""
    b = bytearray(frame)
    for m in mutations:
        kind = m[0]
        if kind == "flip":
            for bit in m[1]:
                if bit // 8 < len(b):
                    b[bit // 8] ^= 0x80 >> (bit % 8)
        elif kind == "truncate":
            del b[m[1] :]
            if m[2]:
                _fix_length(b)
        elif kind == "length" and len(b) >= 4:
            n = m[1] if not -8 <= m[1] <= 8 else len(b) - 4 + m[1]
            _I32.pack_into(b, 0, n)
        elif kind == "int_at" and m[1] + 4 <= len(b):
            _I32.pack_into(b, m[1], m[2])
        elif kind == "trailing":
            b = _fix_length(b + bytes.fromhex(m[1]))
        elif kind == "insert":
            b = _fix_length(b[: m[1]] + bytes.fromhex(m[2]) + b[m[1] :])
        elif kind == "delete":
            del b[m[1] : m[1] + m[2]]
            _fix_length(b)
        elif kind == "splice":
            b = _fix_length(b[: m[1]] + bytes.fromhex(m[2]))
        elif kind == "append_frame":
            b += bytes.fromhex(m[1])
        elif kind == "opcode" and len(b) >= 12:
            _I32.pack_into(b, 8, m[1])
        elif kind == "xid" and len(b) >= 8:
            _I32.pack_into(b, 4, m[1])
    return bytes(_pad_last(b))


def _pad_last(b: bytearray) -> bytearray:
    """Complete a last frame shorter than its declared length with zeros; 1 to 3 bytes left
    after the last frame are completed with 0xff, a length both servers refuse (so the fence
    never becomes the rest of a frame that both would wait for)."""
    pos = 0
    while pos + 4 <= len(b):
        (n,) = _I32.unpack_from(b, pos)
        if n < 0 or n > MAX_FRAME:
            return b  # refused by both servers: nothing to wait for
        if pos + 4 + n > len(b):
            return b + bytes(pos + 4 + n - len(b))
        pos += 4 + n
    if pos < len(b):
        b += b"\xff" * (pos + 4 - len(b))
    return b


@dataclass
class Case:
    seed: int
    n: int
    op: str
    frame: bytes
    mutations: list[Mutation] = field(default_factory=list)

    @property
    def data(self) -> bytes:
        return apply(self.frame, self.mutations)

    def scenario(self, name: str | None = None, doc: str = "") -> dict[str, Any]:
        """The case as a compat scenario (runnable with ``python -m trizk.compat.run``)."""
        return {
            "name": name or f"wirefuzz_seed{self.seed}_case{self.n}",
            "doc": doc or f"wire fuzzer seed {self.seed} case {self.n}: {self.op} frame mutated",
            "cfg": dict(FUZZ_CFG),
            "base": BASE,
            "sessions": {"A": {}},
            "steps": [*SETUP, ["A", "frames", {"hex": self.data.hex(), "wait": 5}]],
        }


def make_case(seed: int, n: int) -> Case:
    """Case ``n`` of ``seed``: a pure function of both."""
    r = random.Random(seed * 1_000_003 + n)
    op = SEED_OPS[n % len(SEED_OPS)] if n < len(SEED_OPS) else r.choice(SEED_OPS)
    frame = seed_frame(r, op)
    muts: list[Mutation] = []
    cur = frame
    for _ in range(r.choice([1, 1, 1, 2, 2, 3])):
        m = random_mutation(r, cur)
        muts.append(m)
        cur = apply(frame, muts)
    return Case(seed, n, op, frame, muts)


# --------------------------------------------------------------------------- comparing

#: opcodes ZooKeeper answers on its reader thread (ZooKeeperServer.processPacket), ahead of
#: requests still in its pipeline
_READER_OPS = (OpCode.AUTH, OpCode.SASL)
#: Request.isValid: every opcode but notification (0) and error (-1); auth and sasl never get
#: there (processPacket answers them first)
_VALID_OPS = frozenset(int(o) for o in OpCode) - {OpCode.NOTIFICATION, OpCode.ERROR}


def racy(data: bytes, *, zk39: bool = False) -> bool:
    """Whether ZooKeeper's answer to ``data`` depends on its threads' timing: a request (whose
    reply its selector thread writes later, whether the pipeline or the reader thread made it)
    followed in the same bytes by something its reader thread acts on at once (auth or sasl,
    answered ahead of a queued read; a frame length it refuses or left-over bytes, closing the
    connection and dropping what is queued), or an unknown opcode or closeSession followed by
    anything (their close is queued while reading goes on; with ``zk39``, ZooKeeper 3.9, a
    check outside a multi is one of those)."""
    pos, queued = 0, False
    while pos < len(data):
        if pos + 4 > len(data):
            return queued  # left-over bytes: with the fence they make a frame or a bad length
        (n,) = _I32.unpack_from(data, pos)
        if n < 8 or n > MAX_FRAME or pos + 4 + n > len(data):
            return queued
        _xid, op = struct.unpack_from(">ii", data, pos + 4)
        if op in _READER_OPS and queued:
            return True
        if op not in _VALID_OPS or op == OpCode.CLOSESESSION or (zk39 and op == OpCode.CHECK):
            return True  # its close races what follows (ZooKeeper reads on meanwhile)
        # a reply, even auth's or sasl's from the reader thread, is only queued for the selector
        # thread to write: a close the reader makes next discards it
        queued = True
        pos += 4 + n
    return False


def _known(t: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The raw transcript without the documented intended difference: a successful check
    outside a multi, which ZooKeeper 3.8.0 never answers and trizk answers
    (docs/compatibility.md). Taken out before the zxids are ranked: its zxid appears in no
    ZooKeeper transcript."""
    return {
        k: [e for e in es if not (e.get("op") == "CHECK" and e.get("err") == "OK")]
        for k, es in t.items()
    }


def _bare(e: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in e.items() if k not in ("step", "zxid")}, sort_keys=True)


def races_only(left: list[dict[str, Any]], right: list[dict[str, Any]]) -> bool:
    """For a racy case: both connections closed (what each answered before its close depends on
    ZooKeeper's thread timing: a queued reply lost to the close, a later request dropped as
    its session is already closing), or both kept with the same packets in another order
    (auth answered ahead of a queued read). Step and zxid aside: a lost reply shifts the
    zxid ranks."""
    if not left or not right or left[-1]["kind"] != right[-1]["kind"]:
        return False
    if left[-1]["kind"] == "closed":
        return True
    return Counter(map(_bare, left)) == Counter(map(_bare, right))


# --------------------------------------------------------------------------- running


class Bystander:
    """A session opened once per server, reading ``/by`` after every case."""

    def __init__(self, srv: Endpoint) -> None:
        self.srv = srv
        self.c = RawClient(srv.host, srv.port, io_timeout=5.0)
        if self.c.connect(timeout_ms=120_000) is None:  # maxSessionTimeout of BASE_CFG
            raise ConnectionClosed("bystander handshake refused")
        xid = self.c.send(OpCode.CREATE, R.CreateRequest("/by", b"by", OPEN_ACL, 0))
        self.c.read_until_reply(xid)  # exists already after a reconnect: fine either way

    def check(self) -> str | None:
        """None if the bystander is served as before, else what went wrong."""
        if not self.srv.alive():
            return f"{self.srv.kind} exited"
        try:
            xid = self.c.send(OpCode.GETDATA, R.GetDataRequest("/by", False))
            _, rep = self.c.read_until_reply(xid)
        except (ConnectionClosed, WireTimeout, OSError) as e:
            return f"{self.srv.kind} bystander: {type(e).__name__} {e}"
        if rep.err != 0 or getattr(rep.body, "data", None) != b"by":
            return f"{self.srv.kind} bystander: err {rep.err} body {rep.body!r}"
        return None

    def close(self) -> None:
        self.c.close_session()


@dataclass
class Finding:
    case: Case
    diffs: list[Difference]
    disturbed: list[str]
    shrunk: Case | None = None
    reproduced: bool | None = None  # on fresh servers
    flaky: bool = False  # did not differ again on a re-run: a race in one server


#: re-runs of a differing case on the same servers before it counts (module docstring)
CONFIRM_RUNS = 2


class Fuzzer:
    """Runs cases on one long-lived server per kind (``ServerPool``) with a bystander each."""

    def __init__(
        self,
        left: str = "zookeeper",
        right: str = "trizk",
        tamper: Tamper | None = None,
        pools: tuple[Runner, Runner] | None = None,
    ) -> None:
        self.kinds = (left, right)
        self.tamper = tamper  # tests only: rewrites the right side's raw transcript
        #: the servers of each side (default: one long-lived server per kind, started here)
        self.pools: tuple[Runner, Runner] = pools or (
            ServerPool(io_timeout=2.0),
            ServerPool(io_timeout=2.0),
        )
        self.bystanders: dict[int, Bystander] = {}
        self.races = 0  # cases whose differences are all a close racing replies
        #: the oracle is ZooKeeper 3.9 (``zookeeper@3.9.3``, or ``zookeeper`` by default):
        #: its own racy requests
        self.zk39 = any(
            base == "zookeeper" and (version or DEFAULT_VERSION) == "3.9.3"
            for base, version in map(split_kind, (left, right))
        )

    def _server(self, side: int) -> Endpoint:
        return self.pools[side].server(self.kinds[side], FUZZ_CFG)

    def _bystander(self, side: int) -> Bystander:
        srv = self._server(side)
        by = self.bystanders.get(side)
        if by is None or by.srv is not srv:
            by = self.bystanders[side] = Bystander(srv)
        return by

    def run_case(self, case: Case) -> tuple[list[Difference], list[str]]:
        sc = case.scenario()
        trans = []
        disturbed = []
        for side in (0, 1):
            self._bystander(side)
            raw = _known(self.pools[side].run(self.kinds[side], sc))
            trans.append(normalise(self.tamper(raw) if self.tamper and side else raw))
            err = self._bystander(side).check()
            if err:
                disturbed.append(err)
                self.bystanders.pop(side, None)
        diffs = diff_transcripts(sc["name"], sc["steps"], *trans)
        racing = racy(case.data, zk39=self.zk39)
        if diffs and racing and races_only(trans[0]["A"], trans[1]["A"]):
            diffs = []
            self.races += 1
        return diffs, disturbed

    def differs(self, case: Case) -> bool:
        diffs, disturbed = self.run_case(case)
        return bool(diffs or disturbed)

    def shrink(self, case: Case) -> Case:
        def still(muts: list[Mutation]) -> bool:
            return self.differs(Case(case.seed, case.n, case.op, case.frame, muts))

        muts = shrink(case.mutations, still, budget=30)
        return Case(case.seed, case.n, case.op, case.frame, muts)

    def close(self) -> None:
        for by in self.bystanders.values():
            try:
                by.close()
            except OSError:
                pass
        for p in self.pools:
            p.close()


def reproduce_fresh(case: Case, kinds: tuple[str, str]) -> list[Difference]:
    """The case's differences on fresh servers of each kind (the reproducer's check)."""
    f = Fuzzer(*kinds)
    try:
        return f.run_case(case)[0]
    finally:
        f.close()


def _short(text: str) -> str:
    """Long hex strings (a padded 1 MiB frame) cut for the log."""
    return re.sub(r"([0-9a-f]{120})[0-9a-f]{40,}", r"\1...", text)


def fuzz(
    seed: int,
    *,
    cases: int | None = None,
    seconds: float | None = None,
    kinds: tuple[str, str] = ("zookeeper", "trizk"),
    shrink_findings: bool = True,
    max_findings: int = 50,
    log: Callable[[str], None] = print,
    stats: dict[str, Any] | None = None,
) -> tuple[int, list[Finding]]:
    """Run cases 0, 1, ... of ``seed`` until ``cases`` ran or ``seconds`` passed; returns
    (cases run, findings)."""
    f = Fuzzer(*kinds)
    stats = stats if stats is not None else {}
    findings: list[Finding] = []
    ran = 0
    stats["fuzzer"] = f  # .races: cases passed as a close racing replies
    deadline = time.monotonic() + seconds if seconds is not None else float("inf")
    try:
        while (cases is None or ran < cases) and time.monotonic() < deadline:
            case = make_case(seed, ran)
            ran += 1
            diffs, disturbed = f.run_case(case)
            if not diffs and not disturbed:
                continue
            fd = Finding(case, diffs, disturbed)
            findings.append(fd)
            if not disturbed and not all(f.differs(case) for _ in range(CONFIRM_RUNS)):
                fd.flaky = True
                log(f"case {case.n} ({case.op}): a difference that did not repeat (flaky)")
                for d in diffs[:2]:
                    log(_short(d.render(*kinds)))
                continue
            log(f"case {case.n} ({case.op}, {case.mutations}): {len(diffs)} differences")
            for d in diffs[:4]:
                log(_short(d.render(*kinds)))
            for msg in disturbed:
                log(f"  DISTURBED: {msg}")
            if shrink_findings:
                fd.shrunk = f.shrink(case)
                fd.reproduced = bool(reproduce_fresh(fd.shrunk, kinds))
                log(
                    f"  shrunk to {fd.shrunk.mutations} (on fresh servers: "
                    f"{'reproduces' if fd.reproduced else 'does not reproduce'})"
                )
                log("  reproducer: " + json.dumps(fd.shrunk.scenario()))
            if sum(not x.flaky for x in findings) >= max_findings:
                break
    finally:
        f.close()
    return ran, findings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--oracle-vs-oracle", action="store_true", help="ZooKeeper against ZooKeeper")
    ap.add_argument(
        "--oracle",
        choices=ZK_VERSIONS,
        default=DEFAULT_VERSION,
        help=f"the ZooKeeper release (default {DEFAULT_VERSION}; trizk answers as the same one)",
    )
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--max-findings", type=int, default=50)
    args = ap.parse_args(argv)
    if args.cases is None and args.seconds is None:
        args.cases = 200
    oracle = f"zookeeper@{args.oracle}"
    kinds = (oracle, oracle) if args.oracle_vs_oracle else (oracle, f"trizk@{args.oracle}")
    t0 = time.monotonic()
    stats: dict[str, Any] = {}
    ran, findings = fuzz(
        args.seed,
        cases=args.cases,
        seconds=args.seconds,
        kinds=kinds,
        shrink_findings=not args.no_shrink,
        max_findings=args.max_findings,
        stats=stats,
    )
    real = [x for x in findings if not x.flaky]
    history = sum(x.reproduced is False for x in real)
    print(
        f"{ran} cases (seed {args.seed}) in {time.monotonic() - t0:.0f} s: "
        f"{len(real)} with differences or a disturbed bystander ({history} of them not on "
        "fresh servers: they depend on what earlier cases left), "
        f"{len(findings) - len(real)} flaky (a difference that did not repeat), "
        f"{stats['fuzzer'].races} racy cases passed as a close racing replies"
    )
    return 1 if real else 0


if __name__ == "__main__":
    sys.exit(main())
