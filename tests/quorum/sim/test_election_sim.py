"""Seeded simulations of whole ensembles electing (see election_sim's docstring).

CI runs ``TRIZK_SIM_SEEDS`` seeds (default 1000) per configuration; a long form is e.g.
``TRIZK_SIM_SEEDS=100000 python -m pytest tests/quorum/sim -q``. A failure names its seed; replay it
with its trace by ``python -m tests.quorum.sim.election_sim SEED VOTERS OBSERVERS`` (default
faults) or
``TRIZK_SIM_SEED=SEED python -m pytest tests/quorum/sim -k <config>``.
"""

from __future__ import annotations

import os

import pytest

from tests.quorum.sim.election_sim import LIVENESS_MS, Faults, InvariantError, Sim
from trizk.quorum.election.election import FastLeaderElection

SEEDS = int(os.environ.get("TRIZK_SIM_SEEDS", "1000"))
ONLY = os.environ.get("TRIZK_SIM_SEED")

#: lossy, slow (delays far beyond the finalize wait), many crashes and partitions, for 20 s
HEAVY = Faults(loss=0.3, max_delay_ms=1500, crash_rate=0.002, partition_rate=0.002, fault_ms=20000)

CONFIGS = {
    "3v1o-faults": (3, 1, Faults()),
    "5v1o-faults": (5, 1, Faults()),
    "3v-heavy": (3, 0, HEAVY),
    "5v2o-heavy": (5, 2, HEAVY),
    "3v1o-sync": (3, 1, Faults(loss=0, crash_rate=0, partition_rate=0, start_jitter_ms=0)),
    "5v1o-sync": (5, 1, Faults(loss=0, crash_rate=0, partition_rate=0, start_jitter_ms=0)),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_seeds(name: str) -> None:
    voters, observers, faults = CONFIGS[name]
    seeds = [int(ONLY)] if ONLY else range(SEEDS)
    settle = []
    for seed in seeds:
        sim = Sim(seed, voters, observers, faults)
        try:
            sim.run()
        except InvariantError as e:
            raise AssertionError(
                f"{e}\nreplay: TRIZK_SIM_SEED={seed} python -m pytest tests/quorum/sim -k {name}"
            ) from None
        settle.append(sim.now - faults.fault_ms)
        assert sim.decisions >= voters + observers
    assert max(settle) < LIVENESS_MS


#: seeds that once failed (see election_sim: the out-of-election path, updateElectionVote)
REGRESSIONS = [
    ("3v1o-faults", 18268),
    ("3v1o-faults", 24528),
    ("3v1o-faults", 41973),
    ("3v1o-faults", 77030),
    ("5v1o-faults", 4148),
    ("5v1o-faults", 22233),
    ("5v1o-faults", 33263),
    ("5v1o-faults", 88524),
]


@pytest.mark.parametrize(("name", "seed"), REGRESSIONS)
def test_regression_seeds(name: str, seed: int) -> None:
    voters, observers, faults = CONFIGS[name]
    sim = Sim(seed, voters, observers, faults)
    sim.run()
    assert sim.decisions >= voters + observers
    assert sim.now - faults.fault_ms < LIVENESS_MS


def test_sync_runs_elect_the_best_vote() -> None:
    """Without faults every voter decides, and the first leader is the best initial vote."""
    sim = Sim(7, 5, 1, Faults(loss=0, crash_rate=0, partition_rate=0, start_jitter_ms=0))
    leader = sim.run()
    best = max((m.epoch0, m.zxid0, s) for s, m in sim.members.items() if m.voter)
    assert leader == sim.first_leader == best[2]


class LowerSidWins(FastLeaderElection):
    """Broken on purpose: prefers the *lower* sid on ties. (A subclass handed to the simulation,
    not a patched method: a compiled class's calls to its own methods would not see a patch.)"""

    def beats(self, new: tuple[int, int, int], cur: tuple[int, int, int]) -> bool:
        if new[0] not in self.view.voters:
            return False
        return (new[2], new[1], -new[0]) > (cur[2], cur[1], -cur[0])


def test_a_broken_vote_order_is_caught() -> None:
    """The invariants can fail: a machine that prefers the lower sid on ties is caught."""
    caught = 0
    for seed in range(50):
        faults = Faults(loss=0, crash_rate=0, partition_rate=0, start_jitter_ms=0)
        try:
            Sim(seed, 3, 0, faults, fle_cls=LowerSidWins).run()
        except InvariantError:
            caught += 1
    assert caught > 0


def test_seed_replays_identically() -> None:
    a = Sim(123, 5, 1, Faults(), trace=[])
    b = Sim(123, 5, 1, Faults(), trace=[])
    assert a.run() == b.run()
    assert a.trace == b.trace and a.trace
