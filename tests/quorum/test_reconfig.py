"""The configuration a reconfig request asks for (quorum/reconfig.py). The error codes are the
ones a live ZooKeeper 3.8.0 leader of a 3-member ensemble answered kazoo's ``reconfig`` with
(as super): NOAUTH comes from prep's ACL check, after these."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trizk.jute.codes import Code
from trizk.quorum.reconfig import ReconfigError, ReconfigRequestView, next_config
from trizk.quorum.verifier import QuorumVerifier, parse_config_string

THREE = parse_config_string(
    "server.1=127.0.0.1:2001:3001:participant;127.0.0.1:4001\n"
    "server.2=127.0.0.1:2002:3002:participant;127.0.0.1:4002\n"
    "server.3=127.0.0.1:2003:3003:participant;127.0.0.1:4003\n"
    "version=100000000"
)
ZXID = 0x10000000E


def ask(
    joining: str | None = None,
    leaving: str | None = None,
    new_members: str | None = None,
    cur: int = -1,
    last_seen: QuorumVerifier = THREE,
    committed: int | None = None,
    standalone_enabled: bool = True,
) -> QuorumVerifier:
    return next_config(
        last_seen,
        last_seen.version if committed is None else committed,
        ReconfigRequestView(joining, leaving, new_members, cur),
        ZXID,
        standalone_enabled=standalone_enabled,
    )


def code(**kw: object) -> int:
    with pytest.raises(ReconfigError) as err:
        ask(**kw)  # type: ignore[arg-type]
    return err.value.code


@pytest.mark.parametrize(
    ("kw", "want"),
    [
        ({"leaving": "3", "cur": 5}, Code.BADVERSION),
        ({"leaving": "x"}, Code.MARSHALLINGERROR),
        ({"joining": "server.4"}, Code.BADARGUMENTS),
        ({"joining": "server.4=h:1"}, Code.BADARGUMENTS),
        ({"joining": "server.4=127.0.0.1:1234:1235"}, Code.BADARGUMENTS),
        ({"new_members": "tickTime=5"}, Code.BADARGUMENTS),
        ({"new_members": "server.1=127.0.0.1:1:2:observer;3"}, Code.MARSHALLINGERROR),
        ({"leaving": "2,3"}, Code.BADARGUMENTS),  # one voter left, standaloneEnabled
        ({"leaving": "3", "committed": 0}, Code.RECONFIGINPROGRESS),
    ],
)
def test_refusals_answer_zookeepers_codes(kw: dict[str, object], want: int) -> None:
    assert code(**kw) == want


def test_one_voter_is_enough_without_standalone() -> None:
    qv = ask(leaving="2,3", standalone_enabled=False)
    assert list(qv.voting_members) == [1]
    with pytest.raises(ReconfigError) as err:
        ask(new_members="server.1=127.0.0.1:1:2:observer;3", standalone_enabled=False)
    assert err.value.code == Code.MARSHALLINGERROR


def test_incremental_changes() -> None:
    # a loopback address another member uses is not a conflict (ZooKeeper 3.8.0 accepted it)
    qv = ask(joining="server.4=127.0.0.1:2001:1235;1236")
    assert qv.version == ZXID
    assert qv.to_string().splitlines()[-2:] == [
        "server.4=127.0.0.1:2001:1235:participant;0.0.0.0:1236",
        "version=10000000e",
    ]
    # a request that changes nothing is still a new configuration
    same = ask()
    assert same.version == ZXID and same.same_members(THREE)
    # leaving and joining together; an unknown leaving sid is ignored; a joiner replaces
    qv = ask(
        joining="server.3=127.0.0.1:2003:3003:observer;4003, server.5=10.0.0.5:1:2;3",
        leaving="2,9",
    )
    assert sorted(qv.members) == [1, 3, 5]
    assert list(qv.observing_members) == [3]
    assert qv.to_string().splitlines()[1] == "server.3=127.0.0.1:2003:3003:observer;0.0.0.0:4003"


def test_conflicting_addresses_that_are_not_loopback() -> None:
    base = ask(joining="server.4=10.0.0.4:2004:3004;10.0.0.4:4004")
    for dup in ("10.0.0.4:2004:1:participant;5", "10.0.0.5:1:2;10.0.0.4:3004"):
        with pytest.raises(ReconfigError) as err:
            ask(joining=f"server.5={dup}", last_seen=base)
        assert err.value.code == Code.BADARGUMENTS
    # the member itself may be rewritten with its own addresses
    assert ask(joining="server.4=10.0.0.4:2004:3004:observer;10.0.0.4:4004", last_seen=base)


def test_non_incremental_membership() -> None:
    qv = ask(
        new_members="server.1=127.0.0.1:2001:3001;4001,server.2=127.0.0.1:2002:3002;4002",
        cur=THREE.version,
    )
    assert sorted(qv.voting_members) == [1, 2] and qv.version == ZXID
    hier = parse_config_string(
        THREE.to_string().replace("version=100000000", "group.1=1:2:3\nversion=100000000")
    )
    with pytest.raises(ReconfigError) as err:
        ask(leaving="3", last_seen=hier)
    assert err.value.code == Code.BADARGUMENTS
    # a whole new hierarchical membership is allowed
    qv = ask(
        new_members="server.1=127.0.0.1:2001:3001;4001,server.2=127.0.0.1:2002:3002;4002,"
        "group.1=1:2",
        last_seen=hier,
    )
    assert qv.version == ZXID


@given(
    joining=st.one_of(st.none(), st.text(max_size=60)),
    leaving=st.one_of(st.none(), st.text(max_size=20)),
    new_members=st.one_of(st.none(), st.text(max_size=80)),
    cur=st.integers(-(2**63), 2**63 - 1),
)
def test_any_request_gives_a_config_or_a_reconfig_error(
    joining: str | None, leaving: str | None, new_members: str | None, cur: int
) -> None:
    try:
        qv = ask(joining=joining, leaving=leaving, new_members=new_members, cur=cur)
    except ReconfigError as e:
        assert e.code in {
            Code.BADARGUMENTS,
            Code.BADVERSION,
            Code.MARSHALLINGERROR,
        }
    else:
        assert qv.version == ZXID and len(qv.voting_members) >= 2
