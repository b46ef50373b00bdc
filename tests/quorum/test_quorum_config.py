"""Quorum configuration: trizk.quorum.verifier, the quorum half of server/config/zoocfg.py,
storage/disk/epochs.py and the quorum lines of ``conf``.

Expected texts come from Apache ZooKeeper 3.8.0:

* ``data/quorum_config_golden.json``: ZooKeeper's own ``parseDynamicConfig`` +
  ``QuorumVerifier.toString`` on hand-written and seeded random configs and garbage
  (``python -m trizk.compat.capture.quorum_oracle`` regenerates it);
* ``data/quorum/``: two live 3-member ensembles on 127.0.0.1 (zoo.cfg files as started,
  ``conf`` answers, ``/zookeeper/config`` read with kazoo). Ensemble 2 has sids 1, 2 and 17
  (1 and 17 share a HashMap bin), a name host, client addresses and an observer;
* error texts: ZooKeeper started on each bad zoo.cfg ("Invalid config, exiting abnormally",
  exit code 2, the ConfigException/IllegalArgumentException message quoted in the test).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.seeds import examples
from trizk.quorum.verifier import (
    Address,
    LearnerType,
    QuorumConfigError,
    QuorumServer,
    QuorumVerifier,
    check_counts,
    java_hashmap_long_order,
    parse_config_string,
    parse_server,
)
from trizk.server.config.zoocfg import (
    ConfigError,
    ServerConfig,
    load_config,
    parse_config,
    parse_properties,
)
from trizk.server.ops.fourlw import quorum_conf
from trizk.storage.disk.epochs import (
    ACCEPTED_EPOCH,
    CURRENT_EPOCH,
    EpochError,
    Epochs,
    load_epochs,
    read_epoch,
    write_epoch,
)
from trizk.storage.disk.files import UnrecoverableDataDir

DATA = Path(__file__).parents[1] / "data"
QDATA = DATA / "quorum"
GOLDEN = json.loads((DATA / "quorum_config_golden.json").read_text())

THREE = "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\nserver.3=127.0.0.1:2890:3890\n"
QBASE = "dataDir=/var/zk\nclientPort=2181\ninitLimit=10\nsyncLimit=5\n"


def qparse(extra: str = THREE, *, myid: str | None = "1\n", base: str = QBASE) -> ServerConfig:
    return parse_config(base + extra, myid=myid)


def qerror(extra: str = THREE, *, myid: str | None = "1\n", base: str = QBASE) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        qparse(extra, myid=myid, base=base)
    return info.value


# -- the verifier against ZooKeeper's own parser --------------------------------------------


def _ours(mode: str, text: str) -> str:
    try:
        if mode == "dynamic":
            qv = parse_config_string(text)
        else:
            entries = [(e.key, e.value) for e in parse_properties(text)]
            qv = QuorumVerifier.from_properties(entries)
            check_counts(qv, standalone_enabled=True)
    except QuorumConfigError as exc:
        return "ERR " + str(exc)
    return "OK\n" + qv.to_string()


@pytest.mark.parametrize("case", GOLDEN, ids=range(len(GOLDEN)))
def test_parse_and_print_as_zookeeper_does(case: dict[str, str]) -> None:
    expected = case["zookeeper"]
    ours = _ours(case["mode"], case["text"])
    if expected.startswith("OK"):
        assert ours == expected
        return
    message = expected.split(": ", 1)[1]
    if any(f"server.-{d}" in case["text"] for d in range(10)):
        # deliberate: trizk refuses negative server ids (ZooKeeper accepts them)
        assert ours.startswith("ERR") and ("negative" in ours or ours == "ERR " + message)
        return
    assert ours == "ERR " + message


def test_golden_covers_the_interesting_cases() -> None:
    results = [c["zookeeper"] for c in GOLDEN]
    assert sum(r.startswith("OK") for r in results) > 100
    assert sum(r.startswith("ERR") for r in results) > 100
    # a printing order that is not ascending sid (HashMap bins, 1 and 17 share one)
    assert any("server.1=" in r and r.index("server.17=") < r.index("server.2=") for r in results
               if "server.17=" in r and "server.2=" in r)  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=st.sampled_from("server.1234567890=:;|[]abcdefhx \n#!\\-+observer"),
               max_size=200))  # fmt: skip
def test_garbage_raises_only_the_config_error(text: str) -> None:
    try:
        parse_config_string(text)
    except QuorumConfigError:
        pass


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_the_config_error(data: bytes) -> None:
    try:
        parse_config_string(data.decode("utf-8", errors="replace"))
    except QuorumConfigError:
        pass


def test_round_trip_of_to_string() -> None:
    for case in GOLDEN:
        if case["mode"] == "dynamic" and case["zookeeper"].startswith("OK"):
            text = case["zookeeper"][3:]
            assert parse_config_string(text).to_string() == text


def test_too_long_config_string_is_refused() -> None:
    with pytest.raises(QuorumConfigError, match="too long"):
        parse_config_string("#" * (1 << 21))


def test_hierarchical_config_strings_parse() -> None:
    # (tests/quorum/test_hierarchical.py checks them against ZooKeeper's QuorumHierarchical)
    qv = parse_config_string("group.1=1:2:3\nserver.1=h:1:2\nserver.2=h:3:4\nserver.3=h:5:6\n")
    assert qv.contains_quorum({1, 3}) and not qv.contains_quorum({2})
    with pytest.raises(QuorumConfigError, match="Server 1is not in a group"):
        parse_config_string("group.1=2:3\nserver.1=h:1:2\nserver.2=h:3:4\nserver.3=h:5:6\n")


def test_standalone_disabled_needs_participants() -> None:
    with pytest.raises(QuorumConfigError) as info:
        parse_config_string("version=0", standalone_enabled=False)
    assert str(info.value) == "standaloneEnabled = false then number of participants should be >0"


# -- the model ------------------------------------------------------------------------------


def test_members_voters_and_quorums() -> None:
    qv = parse_config_string(
        "server.1=h:1:2\nserver.2=h:3:4\nserver.3=h:5:6\nserver.4=h:7:8:observer\nversion=1a"
    )
    assert list(qv.members) == [1, 2, 3, 4]
    assert list(qv.voting_members) == [1, 2, 3]
    assert list(qv.observing_members) == [4]
    assert qv.version == 0x1A and qv.half == 1
    assert qv.contains_quorum({1, 2}) and qv.contains_quorum([3, 1, 2])
    assert not qv.contains_quorum({1}) and not qv.contains_quorum(set())
    assert not qv.contains_quorum({1, 4})  # observers do not count
    assert not qv.contains_quorum([1, 1, 99])
    m = qv.members[4]
    assert m == QuorumServer(4, Address("h", 7), Address("h", 8), LearnerType.OBSERVER)
    assert m.is_observer and not m.is_participant and 4 in qv and 5 not in qv
    five = QuorumVerifier(
        QuorumServer(i, Address("h", 2 * i), Address("h", 2 * i + 1)) for i in range(1, 6)
    )
    assert five.half == 2 and five.contains_quorum({1, 2, 3}) and not five.contains_quorum({4, 5})
    assert five.version == 0 and five.to_string().endswith("\nversion=0")


def test_quorums_intersect() -> None:
    qv = QuorumVerifier(
        QuorumServer(i, Address("h", 2 * i), Address("h", 2 * i + 1)) for i in range(1, 8)
    )
    sids = list(qv.voting_members)
    subsets = [{s for j, s in enumerate(sids) if mask >> j & 1} for mask in range(1 << len(sids))]
    quorums = [s for s in subsets if qv.contains_quorum(s)]
    assert all(a & b for a in quorums for b in quorums)


def test_server_line_forms() -> None:
    s = parse_server(3, "[::1]:2888:3888:observer;[::1]:2181")
    assert s.addr == Address("0:0:0:0:0:0:0:1", 2888) and s.election_addr.port == 3888
    assert s.client_addr == Address("0:0:0:0:0:0:0:1", 2181)
    assert s.to_string() == "[0:0:0:0:0:0:0:1]:2888:3888:observer;[0:0:0:0:0:0:0:1]:2181"
    assert parse_server(1, "zk1:1:2;2181").client_addr == Address("0.0.0.0", 2181)
    assert parse_server(1, "zk1:1:2:PARTICIPANT").to_string() == "zk1:1:2:participant"
    static = QuorumServer(1, Address("a", 1), Address("a", 2), client_addr=Address("a", 3),
                          client_addr_from_static=True)  # fmt: skip
    assert static.to_string() == "a:1:2:participant"  # isClientAddrFromStatic: not printed


def test_java_hashmap_order() -> None:
    assert java_hashmap_long_order([2, 1, 17, 16, 0]) == [16, 0, 1, 17, 2]
    assert java_hashmap_long_order([17, 1]) == [17, 1]
    # 13 keys resize the table to 32 bins: 1 and 17 no longer share one
    assert java_hashmap_long_order([17, 1, *range(20, 31)])[:3] == [1, 17, 20]
    assert java_hashmap_long_order([1 << 32, 1]) == [1 << 32, 1]  # Long.hashCode(2^32) == 1


def test_equality() -> None:
    a = parse_config_string("server.1=h:1:2\nserver.2=h:3:4\nversion=1")
    b = parse_config_string("server.2=h:3:4\nserver.1=h:1:2\nversion=1")
    c = parse_config_string("server.1=h:1:2\nserver.2=h:3:5\nversion=1")
    assert a == b and a != c and a.same_members(b) and not a.same_members(c)
    assert a.java_equals(c)  # QuorumMaj.equals: the same version is enough


# -- live ensembles ------------------------------------------------------------------------


@pytest.mark.parametrize(("ensemble", "myids"), [("e1", (1, 3)), ("e2", (1, 2, 17))])
def test_zookeeper_config_node_of_live_ensembles(ensemble: str, myids: tuple[int, ...]) -> None:
    """``/zookeeper/config`` of a quorum member holds ``QuorumMaj.toString()`` (Stat:
    version -1, aversion -1; a standalone server's node is empty with version 0)."""
    expected = (QDATA / f"{ensemble}_zookeeper_config.txt").read_text()
    for myid in myids:
        path = QDATA / f"{ensemble}_zoo{myid}.cfg"
        if not path.exists():
            continue
        c = parse_config(path.read_text(), myid=f"{myid}\n")
        assert c.is_quorum and c.my_id == myid
        assert c.quorum is not None and c.quorum.to_string() == expected
        assert parse_config_string(expected).to_string() == expected


def test_live_ensemble_2_details() -> None:
    c = parse_config((QDATA / "e2_zoo17.cfg").read_text(), myid="17")
    assert c.peer_type is LearnerType.OBSERVER and c.my_server is not None
    assert c.my_server.is_observer and (c.init_limit, c.sync_limit) == (10, 5)
    assert list(c.quorum.members if c.quorum else []) == [1, 17, 2]
    # ZooKeeper: parseDynamicConfig's warning for two voters
    assert c.warnings == ("No server failure will be tolerated. You need at least 3 servers.",)
    c1 = parse_config((QDATA / "e2_zoo1.cfg").read_text(), myid="1")
    # server.1's ";127.0.0.1:34121" becomes the client address (setupClientPort)
    assert (c1.client_port, c1.client_port_address) == (34121, "127.0.0.1")


# -- zoo.cfg in quorum mode ------------------------------------------------------------------


def test_quorum_config_fields() -> None:
    c = qparse(THREE + "quorumListenOnAllIPs=TRUE\ncnxTimeout=2000\n", myid="2\nignored\n")
    assert c.is_quorum and c.my_id == 2 and c.quorum is not None
    assert (c.init_limit, c.sync_limit, c.election_alg) == (10, 5, 3)
    assert c.quorum_listen_on_all_ips and c.standalone_enabled and not c.reconfig_enabled
    assert c.cnx_timeout == 2000 and c.peer_type is LearnerType.PARTICIPANT
    assert c.my_server == QuorumServer(
        2, Address("127.0.0.1", 2889), Address("127.0.0.1", 3889),
        client_addr=Address("0.0.0.0", 2181), client_addr_from_static=True,
    )  # fmt: skip
    assert c.warnings == ()
    # not printed: the client address from clientPort (isClientAddrFromStatic)
    assert c.quorum.to_string() == (
        "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.1:2889:3889:participant\n"
        "server.3=127.0.0.1:2890:3890:participant\nversion=0"
    )
    assert qparse(THREE + "server.4=127.0.0.1:2891:3891\n").warnings == (
        "Non-optimal configuration, consider an odd number of servers.",
    )


def test_standalone_configs() -> None:
    c = parse_config("dataDir=/d\nclientPort=2181\n")
    assert not c.is_quorum and c.quorum is None and c.my_id is None and c.my_server is None
    # one server line + standaloneEnabled (default): standalone, myid not needed (ZooKeeper
    # logs "Invalid configuration, only one server specified (ignoring)")
    c = parse_config("dataDir=/d\nclientPort=2181\nserver.1=127.0.0.1:2888:3888\n")
    assert not c.is_quorum and c.my_id is None
    # ... but standaloneEnabled=false makes it an ensemble of one
    c = qparse("server.1=127.0.0.1:2888:3888\nstandaloneEnabled=false\n")
    assert c.is_quorum and not c.standalone_enabled
    assert c.warnings == ("No server failure will be tolerated. You need at least 3 servers.",)
    # a myid file is read (and checked) in standalone mode too
    assert parse_config("dataDir=/d\nclientPort=2181\n", myid="4").my_id == 4


def test_client_port_from_the_server_line() -> None:
    c = qparse(
        THREE.replace("3888\n", "3888;127.0.0.1:2191\n"),
        base=QBASE.replace("clientPort=2181\n", ""),
    )
    assert (c.client_port, c.client_port_address) == (2191, "127.0.0.1")
    assert c.quorum is not None and c.quorum.to_string().startswith(
        "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2191\n"
    )
    c = qparse(THREE.replace("3888\n", "3888;2181\n"))  # same port as clientPort: fine
    assert (c.client_port, c.client_port_address) == (2181, None)
    e = qerror(THREE.replace("3888\n", "3888;2182\n"))
    assert str(e).startswith(
        "line 5: client address for this server (id = 1) in static config file is 0.0.0.0:2181"
        " is different from client address found in dynamic file: 0.0.0.0:2182"
    )


def test_observer_member() -> None:
    obs = THREE + "server.4=127.0.0.1:2891:3891:observer\n"
    c = qparse(obs + "peerType=observer\n", myid="4")
    assert c.peer_type is LearnerType.OBSERVER and c.warnings == ()
    # ZooKeeper 3.8.0 only warns and follows the servers list
    c = qparse(obs, myid="4")
    assert c.peer_type is LearnerType.OBSERVER
    assert c.warnings == (
        "Peer type from servers list (OBSERVER) doesn't match peerType (PARTICIPANT). "
        "Defaulting to servers list.",
    )
    c = qparse(obs + "peerType=Observer\n", myid="1")
    assert c.peer_type is LearnerType.PARTICIPANT and "(PARTICIPANT) doesn't match" in c.warnings[0]


# Each message is what ZooKeeper 3.8.0 printed for the same zoo.cfg (exit code 2).
ZK_ERRORS = [
    (THREE.replace(":2888:3888", ":2888"), 5,
     "127.0.0.1:2888 does not have the form server_config"),
    (THREE.replace(":3888", ":3888:participant:x"), 5, "does not have the form server_config"),
    (THREE.replace(":2888:", ":abc:"), 5, "Address unresolved: 127.0.0.1:abc"),
    (THREE.replace("3888\n", "3888;abc\n"), 5, "Address unresolved: null:abc"),
    (THREE.replace("3888\n", "3888;a:b:c\n"), 5, "does not have the form server_config"),
    (THREE.replace("3888\n", "3888;1;2\n"), 5, "does not have the form server_config"),
    (THREE.replace(":3888", ":2888"), 5,
     "Client and election port must be different! Please update the configuration file on "
     "server.1"),
    (THREE.replace(":3888", ":3888:voter"), 5, "Unrecognised peertype: voter"),
    (THREE.replace(":2888:", ":70000:"), 5, "port out of range:70000"),
    (THREE.replace("127.0.0.1:2888", "[::1:2888"), 5,
     "[::1:2888:3888 starts with '[' but has no matching ']:'"),
    (THREE.replace("127.0.0.1:2888:3888", "[::1]:"), 5, "[::1]: doesn't have a port after colon"),
    (THREE.replace(":3888", ":3888|127.0.0.2:1:2"), 5,
     "Multiple address feature is disabled, but multiple addresses were specified for sid 1"),
    ("electionAlg=1\n" + THREE, 5, "Invalid electionAlg value. Only 3 is supported."),
    ("peerType=voter\n" + THREE, 5, "Unrecognised peertype: voter"),
    ("quorumListenOnAllIPs=yes\n" + THREE, 5,
     "Invalid option yes for quorumListenOnAllIPs. Choose 'true' or 'false.'"),
    ("server.1=127.0.0.1:1:2:observer\nserver.2=127.0.0.1:3:4:observer\n", None,
     "Observers w/o participants is an invalid configuration"),
    ("server.1=127.0.0.1:1:2\nserver.2=127.0.0.1:3:4:observer\n", None,
     "Observers w/o quorum is an invalid configuration"),
    ("standaloneEnabled=false\nserver.1=127.0.0.1:1:2:observer\n", None,
     "standaloneEnabled = false then number of participants should be >0"),
]  # fmt: skip


@pytest.mark.parametrize(("extra", "line_no", "message"), ZK_ERRORS)
def test_zookeeper_error_texts(extra: str, line_no: int | None, message: str) -> None:
    e = qerror(extra)
    assert message in e.message and e.line_no == line_no


def test_required_settings_in_quorum_mode() -> None:
    # ZooKeeper 3.8.0: "initLimit is not set", "syncLimit is not set", "myid file is missing",
    # "serverid abc is not a number"
    base = "dataDir=/var/zk\nclientPort=2181\n"
    assert qerror(base="", extra=base + "syncLimit=5\n" + THREE).message == "initLimit is not set"
    assert qerror(base="", extra=base + "initLimit=5\n" + THREE).message == "syncLimit is not set"
    assert qerror(myid=None).message == "myid file is missing: /var/zk/myid"
    assert qerror(myid="abc").message == "serverid abc is not a number (in /var/zk/myid)"
    assert qerror(myid="").message.startswith("serverid null is not a number")
    assert qerror(myid=" 1").message.startswith("serverid  1 is not a number")
    assert qerror(myid="-2").message.startswith("serverid -2 is negative")
    # ZooKeeper: RuntimeException "My id 7 not in the peer list" (exit code 1 there)
    assert qerror(myid="7").message == "My id 7 not in the peer list"
    assert "initLimit must be positive" in qerror(THREE + "initLimit=-1\n").message
    assert "must be an integer" in qerror(THREE + "syncLimit=x\n").message
    assert "cnxTimeout must be positive" in qerror(THREE + "cnxTimeout=0\n").message


def test_trizk_refuses_clashing_addresses_and_ids() -> None:
    e = qerror(THREE.replace("2889:3889", "2888:3889"))
    assert e.line_no == 6 and e.message == (
        "127.0.0.1:2888 (quorum port) of server.2 conflicts with 127.0.0.1:2888 (quorum port) "
        "of server.1"
    )
    e = qerror(THREE.replace("2890:3890", "2890:3888"))
    assert "(election port) of server.3 conflicts" in e.message
    e = qerror(THREE.replace("2889:3889", "2889:3889;127.0.0.1:3890"))
    assert e.message.startswith("127.0.0.1:3890 (election port) of server.3 conflicts")
    # this member's client port from clientPort clashes with a quorum port
    assert "(client port) of server.1" in qerror(base=QBASE.replace("2181", "2889")).message
    # different hosts: no clash
    assert qparse(THREE.replace("127.0.0.1:2889:3889", "10.0.0.2:2888:3888")).is_quorum
    e = qerror(THREE + "server.01=127.0.0.1:2891:3891\n")
    assert e.message == "server.01 and server.1 both configure server 1"
    assert "server id must be a number" in qerror(THREE + "server.x=h:1:2\n").message


def test_unsupported_quorum_settings_are_reported() -> None:
    c = qparse(THREE + "reconfigEnabled=true\nreadonlymode.enabled=true\n")
    assert c.reconfig_enabled
    assert "reconfigEnabled" not in c.unsupported and "readonlymode.enabled" in c.unsupported
    # the system property is read-only mode (the zoo.cfg key, as in ZooKeeper, is not)
    c = parse_config("dataDir=/d\nclientPort=1\n", properties={"readonlymode.enabled": "true"})
    assert c.unsupported == () and c.read_only_mode
    c = parse_config(
        "dataDir=/d\nclientPort=1\nreconfigEnabled=false\nreadonlymode.enabled=false\n"
    )
    assert c.unsupported == ()


def test_load_config_reads_myid(tmp_path: Path) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}\nclientPort=2181\ninitLimit=5\nsyncLimit=2\n{THREE}")
    with pytest.raises(ConfigError, match="myid file is missing"):
        load_config(cfg)
    (tmp_path / "myid").write_text("3\r\n")
    c = load_config(cfg)
    assert c.my_id == 3 and c.is_quorum
    other = tmp_path / "other"
    other.mkdir()
    (other / "myid").write_text("2")
    assert load_config(cfg, overrides={"dataDir": str(other)}).my_id == 2


def test_create_with_server_lines() -> None:
    c = ServerConfig.create(
        "/d", myid=2, clientPort=2181, initLimit=5, syncLimit=2,
        **{f"server.{i}": f"127.0.0.1:{2887 + i}:{3887 + i}" for i in (1, 2, 3)},
    )  # fmt: skip
    assert c.is_quorum and c.my_id == 2 and len(c.quorum or ()) == 3


# -- epoch files (storage/disk/epochs.py); messages as ZooKeeper 3.8.0 logged them ----------------

Z1 = (1 << 32) | 6  # the last zxid of the data dir ZooKeeper was started on


def test_epoch_files_round_trip(tmp_path: Path) -> None:
    assert read_epoch(tmp_path, CURRENT_EPOCH) is None
    write_epoch(tmp_path, CURRENT_EPOCH, 5)
    assert (tmp_path / CURRENT_EPOCH).read_bytes() == b"5"  # as ZooKeeper: no newline
    assert not (tmp_path / (CURRENT_EPOCH + ".tmp")).exists()
    write_epoch(tmp_path, CURRENT_EPOCH, 2**40)
    assert read_epoch(tmp_path, CURRENT_EPOCH) == 2**40
    (tmp_path / ACCEPTED_EPOCH).write_text("7\nrest")  # first line only
    assert read_epoch(tmp_path, ACCEPTED_EPOCH) == 7
    with pytest.raises(ValueError):
        write_epoch(tmp_path, CURRENT_EPOCH, 2**63)


@pytest.mark.parametrize(("content", "shown"), [(b"abc", "abc"), (b"", "null"), (b" 1", " 1")])
def test_bad_epoch_file(tmp_path: Path, content: bytes, shown: str) -> None:
    (tmp_path / CURRENT_EPOCH).write_bytes(content)
    with pytest.raises(EpochError) as info:
        load_epochs(tmp_path, Z1)
    assert str(info.value) == f"Found {shown} in {tmp_path / CURRENT_EPOCH}"


def test_missing_epoch_files_are_created_from_the_last_zxid(tmp_path: Path) -> None:
    assert load_epochs(tmp_path, Z1) == Epochs(accepted=1, current=1)
    assert (
        (tmp_path / CURRENT_EPOCH).read_bytes() == (tmp_path / ACCEPTED_EPOCH).read_bytes() == b"1"
    )
    assert load_epochs(tmp_path, 0) == Epochs(accepted=1, current=1)  # existing files win


def test_epoch_rules_at_start(tmp_path: Path) -> None:
    write_epoch(tmp_path, CURRENT_EPOCH, 0)
    with pytest.raises(EpochError) as info:
        load_epochs(tmp_path, Z1)
    assert str(info.value) == "The current epoch, 0, is older than the last zxid, 4294967302"
    # a leftover currentEpoch.tmp (crash before the rename) is taken and made durable
    (tmp_path / "currentEpoch.tmp").write_bytes(b"2")
    write_epoch(tmp_path, ACCEPTED_EPOCH, 2)
    assert load_epochs(tmp_path, Z1) == Epochs(accepted=2, current=2)
    assert read_epoch(tmp_path, CURRENT_EPOCH) == 2
    assert not (tmp_path / "currentEpoch.tmp").exists()
    write_epoch(tmp_path, CURRENT_EPOCH, 0x1F)
    write_epoch(tmp_path, ACCEPTED_EPOCH, 0x1E)
    with pytest.raises(EpochError) as info:
        load_epochs(tmp_path, Z1)
    assert str(info.value) == "The accepted epoch, 1e is less than the current epoch, 1f"
    assert isinstance(info.value, UnrecoverableDataDir)


# -- conf on a quorum member ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("ensemble", "myid"), [("e1", 1), ("e1", 3), ("e2", 1), ("e2", 2), ("e2", 17)]
)
def test_conf_quorum_lines_match_live_zookeeper(ensemble: str, myid: int) -> None:
    answer = (QDATA / f"{ensemble}_conf_{myid}.txt").read_text()
    config = parse_config((QDATA / f"{ensemble}_zoo{myid}.cfg").read_text(), myid=str(myid))
    head, sep, tail = answer.partition(f"serverId={myid}\n")
    assert sep and head.startswith(f"clientPort={config.client_port}\n")
    assert f"tickTime={config.tick_time}\n" in head
    assert tail == quorum_conf(config)
    assert tail.endswith("version=0")  # no newline at the end of the answer


def test_conf_quorum_lines_of_an_observer_and_of_standalone() -> None:
    c = qparse(THREE + "server.4=127.0.0.1:2891:3891:observer\npeerType=observer\n", myid="4")
    lines = quorum_conf(c).split("\n")
    assert lines[:7] == [
        "initLimit=10", "syncLimit=5", "electionAlg=3", "electionPort=3891",
        "quorumPort=2891", "peerType=1", "membership: ",
    ]  # fmt: skip
    assert quorum_conf(parse_config("dataDir=/d\nclientPort=1\n")) == ""
