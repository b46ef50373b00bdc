"""Fault runs on an in-process trizk ensemble, checked by a linearizability checker.

Client threads (kazoo, each given every member's address) run compare-and-set writes (setData
with the version they last read) and reads on a few znodes while the leader is stopped, a new
epoch begins, and the old leader comes back. The recorded history must show linearizable
writes (``tests/lincheck.py``: a register per znode; writes whose outcome the client could not
know count as maybe-applied) and per-session order (a session never sees a znode's version go
back), and every acknowledged write must be in the final state on every member.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException
from kazoo.retry import KazooRetry

from tests.lincheck import BADVERSION, Op, check
from tests.shell.test_ensemble import DEADLINE, Ensemble

KEYS = ["/k0", "/k1", "/k2"]
CLIENTS = 4
OPS_PER_CLIENT = 150


def _client_loop(ens: Ensemble, cid: int, seed: int, out: list[Op], stop: threading.Event) -> None:
    rng = random.Random(seed)
    order = list(ens.ports)
    rng.shuffle(order)
    zk = KazooClient(
        hosts=",".join(f"127.0.0.1:{ens.ports[i]}" for i in order),
        timeout=6,
        connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5),
        command_retry=KazooRetry(max_tries=0),
    )
    zk.start(timeout=DEADLINE)
    seen: dict[str, int] = {}
    try:
        for n in range(OPS_PER_CLIENT):
            if stop.is_set():
                break
            key = rng.choice(KEYS)
            t0 = time.monotonic()
            if rng.random() < 0.4:
                try:
                    data, st = zk.get(key)
                except KazooException:
                    continue  # an unanswered read constrains nothing
                out.append(Op(cid, key, "read", None, t0, time.monotonic(), (data, st.version)))
                seen[key] = st.version
                continue
            value = f"{cid}:{n}".encode()
            expected = seen.get(key, 0)
            try:
                st = zk.set(key, value, version=expected)
                result: object = st.version
                seen[key] = st.version
            except BadVersionError:
                result = BADVERSION
            except KazooException:
                result = None  # connection lost / timed out: maybe applied
                time.sleep(0.05)  # back off before retrying through another member
            out.append(Op(cid, key, "cas", (value, expected), t0, time.monotonic(), result))
    finally:
        zk.stop()
        zk.close()


def _session_order_ok(ops: list[Op]) -> list[str]:
    """Per client and key, the versions seen (reads, acknowledged writes) never go back."""
    bad = []
    last: dict[tuple[int, str], int] = {}
    for o in sorted(ops, key=lambda o: o.call):
        if o.result is None or o.result == BADVERSION:
            continue
        v = o.result[1] if o.kind == "read" else o.result
        k = (o.client, o.key)
        if v < last.get(k, -1):
            bad.append(f"client {o.client} saw {o.key} version {v} after {last[k]}")
        last[k] = max(v, last.get(k, -1))
    return bad


@pytest.mark.slow
def test_leader_loss_under_concurrent_cas_writes_is_linearizable(tmp_path: Path) -> None:
    ens = Ensemble(tmp_path, 3)
    stop = threading.Event()
    try:
        ens.wait_serving()
        setup = ens.client()
        for k in KEYS:
            setup.create(k, b"")
        setup.stop()
        setup.close()
        ops: list[Op] = []
        threads = [
            threading.Thread(target=_client_loop, args=(ens, c, 1000 + c, ops, stop), daemon=True)
            for c in range(CLIENTS)
        ]
        for t in threads:
            t.start()
        # let the clients run, then take the leader away and bring it back
        ens.wait(lambda: len(ops) >= 100, "client progress before the fault")
        first = ens.leader()
        t_kill = time.monotonic()
        ens.stop(first)
        ens.wait_serving()
        failover = time.monotonic() - t_kill
        done = len(ops)
        ens.wait(lambda: len(ops) >= done + 100, "client progress after the fail-over")
        ens.start(first)
        for t in threads:
            t.join(DEADLINE * 4)
        stop.set()
        assert not any(t.is_alive() for t in threads)
        ens.wait_serving()
        final: dict[int, dict[str, tuple[bytes, int]]] = {}
        t_end = time.monotonic()
        for i in ens.servers:
            zk = ens.client(i)
            try:
                zk.sync("/")
                final[i] = {}
                for k in KEYS:
                    data, st = zk.get(k)
                    final[i][k] = (data, st.version)
            finally:
                zk.stop()
                zk.close()
        assert final[1] == final[2] == final[3], final
        for k in KEYS:  # the final state, after every write, as one more read
            ops.append(Op(-1, k, "read", None, t_end, t_end + 1, final[1][k]))
        acked = [o for o in ops if o.kind == "cas" and isinstance(o.result, int)]
        assert len(acked) > 20, "too few writes succeeded to mean anything"
        assert _session_order_ok(ops) == []
        writes_and_final = [o for o in ops if o.kind == "cas" or o.client == -1]
        assert check(writes_and_final, {k: (b"", 0) for k in KEYS}) == []
        assert failover < 10, f"fail-over took {failover:.1f} s"
    finally:
        stop.set()
        ens.close()
