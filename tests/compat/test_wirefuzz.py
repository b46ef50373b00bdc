"""The wire-level differential fuzzer (compat/oracle/wirefuzz.py), bounded for CI.

* Pure parts: cases are a function of (seed, n); mutations keep every frame the servers would
  wait on complete (padding) and leave bad lengths alone; the racy-case classifier.
* ``test_fuzz_zookeeper_vs_trizk``: the first cases of a seed (every seed opcode once, then
  random ones) on ZooKeeper 3.8.0 and trizk: no confirmed difference, no disturbed bystander.
  The long run is ``python -m trizk.compat.oracle.wirefuzz --seconds 300``.
* ``test_fuzz_finds_injected_difference``: a tampered trizk transcript (the fence's reply
  dropped) must come out as a difference, so the comparison above can fail.
"""

from __future__ import annotations

import random
import struct
from typing import Any

from tests import seeds
from trizk.compat.oracle import wirefuzz as wf
from trizk.jute.codes import OpCode


def test_cases_are_deterministic_and_cover_every_seed_op() -> None:
    a = [wf.make_case(7, n) for n in range(len(wf.SEED_OPS))]
    b = [wf.make_case(7, n) for n in range(len(wf.SEED_OPS))]
    assert [c.data for c in a] == [c.data for c in b]
    assert [c.op for c in a] == wf.SEED_OPS
    assert all(c.mutations for c in a)


def test_padding_completes_frames_and_leaves_bad_lengths() -> None:
    frame = wf.seed_frame(random.Random(1), "getData")
    cut = wf.apply(frame, [["truncate", 14, False]])  # length says more than is there
    assert len(cut) == len(frame) and cut[:14] == frame[:14] and not any(cut[14:])
    huge = wf.apply(frame, [["length", 0x7FFFFFFF]])
    assert huge == struct.pack(">i", 0x7FFFFFFF) + frame[4:]
    left = wf.apply(frame, [["length", -2]])  # 2 bytes after the frame: completed with 0xff
    assert left[:4] == struct.pack(">i", len(frame) - 6) and left[4 : len(frame)] == frame[4:]
    assert left[len(frame) :] == b"\xff\xff"


def _frame(xid: int, op: int, body: bytes = b"") -> bytes:
    return struct.pack(">iii", 8 + len(body), xid, op) + body


def test_racy_classifier() -> None:
    get = _frame(1, OpCode.GETDATA, b"\0\0\0\x02/t\0")
    auth = _frame(-4, OpCode.AUTH, b"\0" * 12)
    assert not wf.racy(get)
    assert not wf.racy(auth + get)  # auth first: answered before the read is queued
    assert wf.racy(get + auth)  # auth answered on ZooKeeper's reader thread, ahead
    assert wf.racy(get + b"\xff\xff")  # left-over bytes: a close racing the reply
    assert wf.racy(auth + b"\xff\xff")  # even a reply made on the reader thread
    assert wf.racy(_frame(1, 99))  # UNIMPLEMENTED's close races the fence
    assert wf.racy(_frame(1, OpCode.CLOSESESSION))
    check = _frame(1, OpCode.CHECK, b"\0\0\0\x02/t\xff\xff\xff\xff")
    assert not wf.racy(check)  # 3.8.0 answers a check outside a multi in the pipeline
    assert wf.racy(get + check, zk39=True)  # 3.9: UNIMPLEMENTED, closed, on the reader thread


def test_races_only() -> None:
    rep = {"kind": "reply", "xid": 1, "err": "OK", "zxid": "Z2", "step": 2}
    closed = {"kind": "closed", "step": 2}
    auth = {"kind": "reply", "xid": -4, "err": "OK", "zxid": 0, "step": 2}
    assert wf.races_only([rep, closed], [{**closed, "step": 3}])
    assert not wf.races_only([rep, closed], [rep])  # one kept the connection
    assert wf.races_only([rep, auth], [auth, {**rep, "zxid": "Z3"}])  # reordered
    assert not wf.races_only([rep, auth], [auth, {**rep, "err": "NONODE"}])


def test_fuzz_zookeeper_vs_trizk(needs_zookeeper: None) -> None:
    log: list[str] = []
    stats: dict[str, Any] = {}
    cases = seeds.count("TRIZK_WIREFUZZ_CASES", 70)  # tests/seeds.py
    ran, findings = wf.fuzz(3, cases=cases, shrink_findings=False, log=log.append, stats=stats)
    assert ran == cases
    real = [f for f in findings if not f.flaky]
    assert not real, "\n".join(log)
    assert len(findings) <= 3, "\n".join(log)  # a flaky difference now and then, no more


def test_fuzz_finds_injected_difference(needs_zookeeper: None) -> None:

    def drop_fence_reply(t: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
        return {k: [e for e in es if e.get("xid") != 0x7FFF0000] for k, es in t.items()}

    f = wf.Fuzzer(tamper=drop_fence_reply)
    try:
        diffs, disturbed = f.run_case(wf.make_case(3, 1))  # a create2 frame, mutated
    finally:
        f.close()
    assert diffs and not disturbed
