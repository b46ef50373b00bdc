"""FastLeaderElection rules, one at a time, on the pure machine (FastLeaderElection.java)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from trizk.quorum.election.election import (
    FINALIZE_WAIT,
    LONG_MIN,
    MAX_NOTIFICATION_INTERVAL,
    Decision,
    ElectionView,
    FastLeaderElection,
    Vote,
)
from trizk.quorum.election.messages import Notification, ServerState

VIEW = ElectionView(frozenset({1, 2, 3}), b"version=0")
L, F, LD, OBS = (int(s) for s in ServerState)


def note(state: int, leader: int, zxid: int, rnd: int, epoch: int) -> Notification:
    return Notification(state, leader, zxid, rnd, epoch, 2, b"version=0")


def started(myid: int = 1, zxid: int = 0x100000005, epoch: int = 1) -> FastLeaderElection:
    fle = FastLeaderElection(myid, VIEW)
    fle.look(0, zxid, epoch)
    return fle


def test_vote_order() -> None:
    fle = FastLeaderElection(1, VIEW)
    assert fle.beats((1, 0, 2), (3, 99, 1))  # epoch first
    assert fle.beats((1, 6, 1), (3, 5, 1))  # then zxid
    assert fle.beats((3, 5, 1), (2, 5, 1))  # then sid
    assert not fle.beats((2, 5, 1), (2, 5, 1))
    assert not fle.beats((9, 99, 99), (1, 0, 0))  # a non-voter never wins


def test_look_proposes_itself_to_all_voters() -> None:
    fle = FastLeaderElection(2, VIEW)
    out = fle.look(1000, 0x100000005, 1)
    assert fle.logicalclock == 1 and fle.proposed == (2, 0x100000005, 1)
    assert sorted(s.to for s in out.sends) == [1, 3]  # the one to self is looped back
    assert {s.notification for s in out.sends} == {note(L, 2, 0x100000005, 1, 1)}
    assert fle.deadline == 1200 and out.decision is None


def test_observer_votes_min_and_never_for_itself() -> None:
    fle = FastLeaderElection(7, VIEW)
    out = fle.look(0, 5, 1)
    assert fle.proposed == (LONG_MIN, LONG_MIN, LONG_MIN)
    assert sorted(s.to for s in out.sends) == [1, 2, 3]


def test_higher_round_restarts_from_the_initial_vote() -> None:
    fle = FastLeaderElection(1, ElectionView(frozenset({1, 2, 3, 4, 5})))  # no quorum yet
    fle.look(0, 0x100000005, 1)
    fle.on_notification(10, 2, note(L, 3, 0x100000009, 1, 1))  # adopt 3 in round 1
    assert fle.proposed[0] == 3
    # round 4 carrying a vote worse than 3 but better than our initial vote
    out = fle.on_notification(20, 2, note(L, 2, 0x100000006, 4, 1))
    assert fle.logicalclock == 4 and fle.proposed == (2, 0x100000006, 1)
    assert all(s.notification.election_epoch == 4 for s in out.sends)
    # a worse vote in a higher round: back to our own initial vote
    fle.on_notification(30, 3, note(L, 3, 0x100000001, 5, 1))
    assert fle.logicalclock == 5 and fle.proposed == (1, 0x100000005, 1)


def test_lower_round_is_answered_and_dropped() -> None:
    fle = started(1)
    fle.on_notification(0, 2, note(L, 2, 0x100000004, 3, 1))  # jump to round 3
    out = fle.on_notification(5, 3, note(L, 3, 0x100000009, 2, 1))
    assert [(s.to, s.notification) for s in out.sends] == [(3, note(L, 1, 0x100000005, 3, 1))]
    assert fle.proposed[0] == 1


def test_finalize_waits_for_silence_and_a_better_vote_cancels_it() -> None:
    fle = started(1, zxid=0x100000005)
    out = fle.on_notification(50, 2, note(L, 1, 0x100000005, 1, 1))
    assert out.decision is None and fle.finalizing and fle.deadline == 50 + FINALIZE_WAIT
    fle.on_notification(100, 2, note(L, 1, 0x100000005, 1, 1))  # not better: wait restarts
    assert fle.deadline == 300 and fle.tick(299).decision is None
    # a better vote cancels the finalize and is adopted (Java re-queues it)
    out = fle.on_notification(200, 3, note(L, 3, 0x100000009, 1, 1))
    assert fle.proposed[0] == 3 and sorted(s.to for s in out.sends) == [2, 3]
    # {1 (looped back), 3} agree on 3: a new finalize wait starts
    assert fle.finalizing and fle.deadline == 400 and out.decision is None
    assert fle.tick(399).decision is None
    out = fle.tick(400)
    assert out.decision is not None and out.decision.state == ServerState.FOLLOWING
    assert out.decision.vote == Vote(3, 0x100000009, 1, 1)


def test_leader_decides_leading() -> None:
    fle = started(3, zxid=0x100000009)
    fle.on_notification(5, 1, note(L, 3, 0x100000009, 1, 1))
    d = fle.tick(205).decision
    assert d is not None and d.state == ServerState.LEADING and fle.state == ServerState.LEADING


def test_poll_timeout_doubles_and_resends() -> None:
    fle = started(1)
    seen = []
    now = 0
    for _ in range(12):
        assert fle.deadline is not None
        now = fle.deadline
        out = fle.tick(now)
        assert sorted(s.to for s in out.sends) == [2, 3]
        seen.append(fle.not_timeout)
    assert seen[:4] == [400, 800, 1600, 3200]
    assert seen[-1] == MAX_NOTIFICATION_INTERVAL


def test_decided_member_answers_lookers_only() -> None:
    fle = started(3, zxid=0x100000009)
    fle.on_notification(5, 1, note(L, 3, 0x100000009, 1, 1))
    fle.tick(205)
    fle.update_peer_epoch(2)  # after sync (QuorumPeer.updateElectionVote)
    out = fle.on_notification(300, 2, note(L, 2, 0x100000001, 7, 1))
    assert [(s.to, s.notification) for s in out.sends] == [(2, note(LD, 3, 0x100000009, 1, 2))]
    assert fle.on_notification(301, 2, note(F, 3, 0x100000009, 1, 2)).sends == []
    # a non-voter gets our vote whatever it sent, with our logical clock
    out = fle.on_notification(302, 9, note(F, 1, 1, 1, 1))
    assert [(s.to, s.notification) for s in out.sends] == [(9, note(LD, 3, 0x100000009, 1, 2))]


def test_non_voter_is_answered_while_looking() -> None:
    fle = started(1)
    out = fle.on_notification(3, 9, note(L, LONG_MIN, LONG_MIN, 1, LONG_MIN))
    assert [s.to for s in out.sends] == [9]
    assert out.sends[0].notification.state == L and fle.proposed[0] == 1


def test_joining_needs_a_quorum_and_the_leaders_own_word() -> None:
    fle = started(1, zxid=0x900000000, epoch=9)  # a better vote than the ensemble's
    # two FOLLOWING answers are a quorum, but the leader has not said LEADING yet
    assert fle.on_notification(1, 2, note(F, 3, 0x200000001, 4, 3)).decision is None
    assert fle.on_notification(2, 2, note(F, 3, 0x200000001, 4, 3)).decision is None
    out = fle.on_notification(3, 3, note(LD, 3, 0x200000001, 4, 3))
    assert out.decision is not None and out.decision.state == ServerState.FOLLOWING
    assert out.decision.vote == Vote(3, 0x200000001, 4, 3)
    assert fle.logicalclock == 4


def test_a_worse_vote_is_discarded_while_finalizing_even_from_a_higher_round() -> None:
    fle = started(1, zxid=0x100000005)
    fle.on_notification(10, 2, note(L, 1, 0x100000005, 1, 1))
    assert fle.finalizing
    fle.on_notification(20, 3, note(L, 3, 0x100000001, 9, 1))  # Java's finalize poll drops it
    assert fle.logicalclock == 1 and fle.finalizing
    d = fle.tick(220).decision
    assert d is not None and d.state == ServerState.LEADING


def test_observing_notifications_are_ignored() -> None:
    fle = started(1)
    before = (fle.proposed, fle.logicalclock)
    fle.on_notification(1, 2, note(OBS, 3, 0x900000000, 9, 9))
    assert (fle.proposed, fle.logicalclock) == before


def test_vote_equality_rules() -> None:
    a = Vote(3, 5, 1, 2, ServerState.FOLLOWING, 2)
    assert a.matches(Vote(3, 99, 7, 2, ServerState.LEADING, 2))  # leader + peerEpoch
    assert not a.matches(Vote(3, 5, 1, 3, ServerState.LEADING, 2))
    assert a.matches(Vote(3, 5, 1, 3, ServerState.LEADING, 0))  # version 0 on one side: id
    assert not a.matches(Vote(3, 99, 1, 2))  # LOOKING: all four numbers


def test_view_from_a_verifier() -> None:
    class Qv:
        voting_members = {1: object(), 3: object()}
        observing_members = {4: object()}

        def to_string(self) -> str:
            return "server.1=h:1:2:participant\nversion=0"

        def contains_quorum(self, sids: Iterable[int]) -> bool:
            return len(set(sids) & set(self.voting_members)) > 1

        def weight(self, sid: int) -> int:
            return 1

    view = ElectionView.from_verifier(Qv())
    assert view.voters == {1, 3} and view.config == b"server.1=h:1:2:participant\nversion=0"
    assert view.observers == {4}
    assert view.quorum({1, 3, 9}) and not view.quorum({1, 9})


# --------------------------------------------------------------------------- properties

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.seeds import examples  # noqa: E402

inputs = st.lists(
    st.one_of(
        st.tuples(
            st.just("note"),
            st.sampled_from([1, 2, 3, 9]),  # 9 is not a member
            st.builds(
                Notification,
                state=st.integers(-1, 4),
                leader=st.sampled_from([1, 2, 3, 9, LONG_MIN]),
                zxid=st.integers(-1, 4),
                election_epoch=st.integers(0, 4),
                peer_epoch=st.integers(-1, 3),
                version=st.sampled_from([0, 2]),
            ),
        ),
        st.tuples(st.just("tick"), st.integers(0, 5000), st.none()),
        st.tuples(st.just("look"), st.integers(0, 4), st.integers(0, 3)),
    ),
    max_size=60,
)


@pytest.mark.slow
@settings(max_examples=examples(300, "TRIZK_PROP_EXAMPLES"), deadline=None)
@given(st.sampled_from([1, 2, 3, 7]), inputs)
def test_any_input_sequence_keeps_the_rules(myid: int, steps: list) -> None:
    fle = FastLeaderElection(myid, VIEW)
    now = 0
    fle.look(now, 2, 1)
    for kind, a, b in steps:
        now += 7
        before_clock, before_prop, was_looking = fle.logicalclock, fle.proposed, fle.looking
        if kind == "note":
            out = fle.on_notification(now, a, b)
        elif kind == "tick":
            now += a
            out = fle.tick(now)
        else:
            out = fle.look(now, a, b)
            assert fle.logicalclock == before_clock + 1
            continue
        assert len(out.sends) <= len(VIEW.voters) + 1
        for send in out.sends:
            assert send.to != myid and send.notification.config == VIEW.config
        if was_looking and out.decision is None:
            assert fle.logicalclock >= before_clock
            if fle.logicalclock == before_clock and fle.proposed != before_prop:
                assert fle.beats(fle.proposed, before_prop)  # only better within a round
        if out.decision is not None:
            d = out.decision
            assert was_looking and not fle.looking and fle.deadline is None
            assert d.vote.leader in VIEW.voters
            # joining an ensemble adopts its round, which may be lower than ours (Java sets
            # logicalclock to n.electionEpoch in receivedFollowingNotification)
            assert fle.logicalclock == d.vote.election_epoch
            assert (d.state == ServerState.LEADING) == (d.vote.leader == myid)
            if myid not in VIEW.voters:
                assert d.state == ServerState.OBSERVING
        if fle.looking:
            assert fle.deadline is not None  # a shell always has a time to call tick at


def test_a_designated_leader_is_followed_without_an_election() -> None:
    """QuorumPeer.processReconfig -> updateVote(designated, zxid), then updateServerState:
    FOLLOWING (or LEADING when designated) at once; the vote a LOOKING member then hears is
    Java's two-argument Vote (epochs -1) until the sync updates its peer epoch."""
    fle = started(1, zxid=0x100000009)
    d = fle.designate(2, 0x100000007)
    assert (d.state, d.vote) == (ServerState.FOLLOWING, Vote(2, 0x100000007, -1, -1))
    assert not fle.looking and fle.deadline is None
    fle.update_peer_epoch(2)
    out = fle.on_notification(300, 3, note(L, 3, 0x100000001, 7, 1))
    assert [(s.to, s.notification) for s in out.sends] == [(3, note(F, 2, 0x100000007, -1, 2))]
    assert FastLeaderElection(2, VIEW).designate(2, 5).state == ServerState.LEADING
    # a member in no line of the configuration follows as a non-voting participant
    view = ElectionView(frozenset({1, 2, 3}), b"version=0", observers=frozenset({4}))
    assert FastLeaderElection(7, view).designate(2, 5).state == ServerState.FOLLOWING
    assert FastLeaderElection(4, view).designate(2, 5).state == ServerState.OBSERVING


def test_restarted_leader_leads_again_on_its_old_followers_answers() -> None:
    """Simulation seeds 24528/41973 (3v1o-faults): leader 1 of round 1 crashes and restarts
    (a fresh process: round 1 again) while 2 and 3 still follow it. Their FOLLOWING answers of
    round 1 make a quorum in ``outofelection`` and checkLeader holds (the leader is us and
    ``logicalclock == electionEpoch``), so 1 leads again although 2, now LOOKING with the
    same epoch and zxid, has the better vote by sid. Java's lookForLeader does the same."""
    fle = FastLeaderElection(1, VIEW)
    out = fle.look(0, 0x300000003, 3)
    assert fle.logicalclock == 1 and out.decision is None
    assert fle.on_notification(5, 3, note(F, 1, 0x200000001, 1, 3)).decision is None
    d = fle.on_notification(9, 2, note(F, 1, 0x200000001, 1, 3)).decision
    assert d == Decision(ServerState.LEADING, Vote(1, 0x200000001, 1, 3))


def test_newcomer_needs_equal_peer_epochs_from_a_quorum() -> None:
    """Simulation seed 18268 (3v1o-faults): Vote.equals between decided votes compares leader
    and peerEpoch, so a follower that still answers its pre-sync peerEpoch does not back the
    leader for a newcomer; every learner's updateElectionVote at UPTODATE (ZOOKEEPER-1732)
    makes them agree."""
    fle = FastLeaderElection(3, VIEW)
    fle.look(0, 0x200000000, 2)
    fle.on_notification(5, 1, note(F, 2, 0x100000001, 2, 1))  # follower 1, not yet updated
    assert fle.on_notification(6, 2, note(LD, 2, 0x100000001, 2, 2)).decision is None
    d = fle.on_notification(9, 1, note(F, 2, 0x100000001, 2, 2)).decision  # after its sync
    assert d == Decision(ServerState.FOLLOWING, Vote(2, 0x100000001, 2, 2))
    assert fle.logicalclock == 2
