"""The linearizability checker itself: known-good and known-bad register histories (a checker
that accepts everything would pass every fault run, so it is tested on violations too)."""

from __future__ import annotations

import random

from tests.lincheck import BADVERSION, Op, check, check_key

INIT = (b"", 0)


def op(c: int, kind: str, arg: object, call: float, ret: float, result: object) -> Op:
    return Op(c, "/k", kind, arg, call, ret, result)


def test_sequential_history_is_linearizable() -> None:
    h = [
        op(1, "cas", (b"a", 0), 0, 1, 1),
        op(2, "read", None, 2, 3, (b"a", 1)),
        op(1, "cas", (b"b", 0), 4, 5, BADVERSION),
        op(2, "cas", (b"c", -1), 6, 7, 2),
        op(1, "read", None, 8, 9, (b"c", 2)),
    ]
    assert check_key(h, INIT)


def test_stale_read_after_a_completed_write_is_not_linearizable() -> None:
    h = [op(1, "cas", (b"a", 0), 0, 1, 1), op(2, "read", None, 2, 3, INIT)]
    assert not check_key(h, INIT)


def test_concurrent_ops_may_take_either_order() -> None:
    h = [op(1, "cas", (b"a", 0), 0, 10, 1), op(2, "read", None, 1, 2, INIT)]
    assert check_key(h, INIT)
    h = [op(1, "cas", (b"a", 0), 0, 10, 1), op(2, "read", None, 1, 2, (b"a", 1))]
    assert check_key(h, INIT)


def test_two_successful_cas_on_one_version_are_not_linearizable() -> None:
    h = [op(1, "cas", (b"a", 0), 0, 5, 1), op(2, "cas", (b"b", 0), 1, 6, 1)]
    assert not check_key(h, INIT)


def test_unknown_outcome_may_or_may_not_have_happened() -> None:
    lost = op(1, "cas", (b"a", 0), 0, 1, None)
    assert check_key([lost, op(2, "read", None, 5, 6, INIT)], INIT)
    assert check_key([lost, op(2, "read", None, 5, 6, (b"a", 1))], INIT)
    # but not both: once seen, it stays
    seen = [lost, op(2, "read", None, 5, 6, (b"a", 1)), op(2, "read", None, 7, 8, INIT)]
    assert not check_key(seen, INIT)


def test_lost_acknowledged_write_is_caught() -> None:
    h = [op(1, "cas", (b"a", -1), 0, 1, 1), op(2, "read", None, 10, 11, INIT)]
    assert check(h, {"/k": INIT}) == ["/k"]


def test_random_sequential_histories_pass_and_a_corrupted_read_fails() -> None:
    rng = random.Random(7)
    for _ in range(50):
        state = INIT
        h: list[Op] = []
        t = 0.0
        for _ in range(30):
            c = rng.randrange(4)
            if rng.random() < 0.5:
                h.append(op(c, "read", None, t, t + 0.5, state))
            else:
                exp = rng.choice([-1, state[1], state[1] + 1])
                data = bytes([rng.randrange(256)])
                if exp in (-1, state[1]):
                    state = (data, state[1] + 1)
                    res: object = state[1]
                else:
                    res = BADVERSION
                h.append(op(c, "cas", (data, exp), t, t + 0.5, res))
            t += 1
        assert check_key(h, INIT)
        reads = [i for i, o in enumerate(h) if o.kind == "read" and o.result != INIT]
        if reads:
            i = reads[-1]
            bad = h[i]
            h[i] = Op(bad.client, bad.key, "read", None, bad.call, bad.ret, (b"?", 999))
            assert not check_key(h, INIT)
