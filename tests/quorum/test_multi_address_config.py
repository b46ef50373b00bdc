"""Multi-address server lines (``a:q:e|b:q2:e2``): parsing and printing as ZooKeeper's
``QuorumServer`` (3.8.0), the zoo.cfg switches, the V2 election header, and the shell's
connect-to-the-first-that-answers and bind-what-can-be-bound helpers."""

from __future__ import annotations

import socket

import pytest
import trio

from trizk.quorum.election.messages import (
    PROTOCOL_VERSION_V2,
    encode_initial_message_multi,
    parse_initial_message,
)
from trizk.quorum.verifier import Address, LearnerType, QuorumConfigError, parse_server
from trizk.server.config.zoocfg import ConfigError, parse_config
from trizk.server.shell.cnxmanager import bind_election_ports, open_first_stream

LINE = "127.0.0.2:2889:3889|127.0.0.1:2888:3888;127.0.0.1:2181"


def test_pairs_and_zookeepers_text() -> None:
    m = parse_server(1, LINE, multi_address=True)
    assert m.addr == Address("127.0.0.2", 2889) and m.election_addr == Address("127.0.0.2", 3889)
    assert m.quorum_addrs == (Address("127.0.0.2", 2889), Address("127.0.0.1", 2888))
    assert m.election_addrs == (Address("127.0.0.2", 3889), Address("127.0.0.1", 3888))
    # QuorumServer.toString sorts each address list by host string
    assert m.to_string() == ("127.0.0.1:2888:3888|127.0.0.2:2889:3889:participant;127.0.0.1:2181")
    obs = parse_server(2, "h:1:2:observer|g:3:4:observer", multi_address=True)
    assert obs.type is LearnerType.OBSERVER
    assert obs.to_string() == "g:3:4|h:1:2:observer"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("h:1:2:observer|g:3:4", None),  # a type on one address only is that type
        ("h:1:2:observer|g:3:4:participant",
         "Multiple addresses should have similar roles: PARTICIPANT vs PARTICIPANT"),
        ("h:1:2|g:3", "does not have the form"),
        ("h:1:2|g:3:3", "Client and election port must be different"),
    ],
)  # fmt: skip
def test_zookeepers_checks(value: str, message: str | None) -> None:
    if message is None:
        assert parse_server(1, value, multi_address=True).type is LearnerType.OBSERVER
        return
    with pytest.raises(QuorumConfigError, match=message):
        parse_server(1, value, multi_address=True)


CFG = (
    "dataDir=/d\nclientPort=2181\ninitLimit=5\nsyncLimit=2\n"
    f"server.1={LINE}\nserver.2=127.0.0.1:2890:3890\nserver.3=127.0.0.1:2891:3891\n"
)


def test_only_the_system_property_enables_the_syntax() -> None:
    # ZooKeeper 3.8.0 refuses this file with multiAddress.enabled=true in it (exit 2): its
    # QuorumServer reads the -Dzookeeper.multiAddress.enabled system property
    with pytest.raises(ConfigError, match="Multiple address feature is disabled"):
        parse_config(CFG + "multiAddress.enabled=true\n", myid="1")
    on = {"zookeeper.multiAddress.enabled": "true"}
    c = parse_config(CFG, myid="1", properties=on)
    assert c.multi_address_enabled and c.multi_address_reachability_check
    assert c.multi_address_timeout_ms == 1000 and c.unsupported == ()
    c = parse_config(
        CFG + "multiAddress.enabled=false\nmultiAddress.reachabilityCheckEnabled=false\n"
        "multiAddress.reachabilityCheckTimeoutMs=250\n",
        myid="1",
        properties=on,
    )
    assert not c.multi_address_enabled and not c.multi_address_reachability_check
    assert c.multi_address_timeout_ms == 250
    with pytest.raises(ConfigError, match=r"multiAddress\.enabled"):
        parse_config(CFG + "multiAddress.enabled=yes\n", myid="1", properties=on)


def test_v2_header_carries_every_address() -> None:
    data = encode_initial_message_multi(7, [("127.0.0.1", 3888), ("::1", 3889)])
    parsed = parse_initial_message(data)
    assert parsed is not None
    msg, used = parsed
    assert used == len(data) and msg.protocol_version == PROTOCOL_VERSION_V2
    assert msg.sid == 7 and msg.addresses == (("127.0.0.1", 3888), ("::1", 3889))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_open_first_stream_skips_a_dead_address() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, lambda s: s.aclose(), listeners)
        with trio.fail_after(10):
            stream = await open_first_stream(
                [("127.0.0.1", _closed_port()), ("127.0.0.1", port)], 5
            )
        assert stream.socket.getpeername()[1] == port
        await stream.aclose()
        with pytest.raises(OSError), trio.fail_after(10):
            await open_first_stream([("127.0.0.1", _closed_port())] * 2, 5)
        nursery.cancel_scope.cancel()


async def test_a_taken_election_address_is_retried_while_the_others_serve() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        free = _closed_port()
        with trio.fail_after(10):
            listeners, pending = await bind_election_ports(
                [("127.0.0.1", taken), ("127.0.0.1", free)]
            )
        assert [x.socket.getsockname()[1] for x in listeners] == [free]
        assert pending == [("127.0.0.1", taken)]
        for x in listeners:
            await x.aclose()


#: MultipleAddresses.getAllPorts of these addresses, printed by ZooKeeper 3.8.0's own class
ALL_PORTS = [
    (["127.0.0.2:3889", "127.0.0.1:3888"], "3888|3889"),
    (["127.0.0.1:3888", "127.0.0.2:3889"], "3888|3889"),
    (["127.0.0.1:41000", "127.0.0.2:41017", "127.0.0.3:52000"], "52000|41000|41017"),
    (["10.0.0.5:2888", "127.0.0.1:2888", "192.168.1.7:2999"], "2999|2888"),
]


@pytest.mark.parametrize(("addrs", "shown"), ALL_PORTS)
def test_conf_ports_in_zookeepers_order(addrs: list[str], shown: str) -> None:
    from trizk.server.ops.fourlw import _all_ports

    assert _all_ports([Address(a.split(":")[0], int(a.split(":")[1])) for a in addrs]) == shown


def test_conf_of_a_multi_address_member() -> None:
    from trizk.server.ops.fourlw import quorum_conf

    c = parse_config(CFG, myid="1", properties={"zookeeper.multiAddress.enabled": "true"})
    text = quorum_conf(c)
    assert "electionPort=3888|3889\nquorumPort=2888|2889\n" in text
    assert "server.1=127.0.0.1:2888:3888|127.0.0.2:2889:3889:participant;127.0.0.1:2181" in text
