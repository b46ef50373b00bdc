"""zoo.cfg parsing. Expected values marked "ZooKeeper 3.8.0" were checked by starting the real
server on the same file (its ``conf`` answer, its log line "Created server with tickTime ...",
or its exit code 2 with "Invalid config, exiting abnormally")."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trizk.jute.javalang import parse_boolean
from trizk.server.config.zoocfg import (
    FOUR_LETTER_WORDS,
    KEYS,
    ConfigError,
    ServerConfig,
    Support,
    load_config,
    parse_config,
    parse_properties,
    parse_property_option,
)

BASE = "dataDir=/var/zk\nclientPort=2181\n"


def parse(extra: str = "", **kw: object) -> ServerConfig:
    return parse_config(BASE + extra, **kw)


def error(text: str, **kw: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text, **kw)
    return info.value


# -- defaults and derived values ------------------------------------------------------------


def test_defaults_are_zookeepers() -> None:
    c = parse()
    # ZooKeeper 3.8.0: "Created server with tickTime 3000 ms minSessionTimeout 6000 ms
    # maxSessionTimeout 60000 ms" for a file without tickTime.
    assert (c.tick_time, c.min_session_timeout, c.max_session_timeout) == (3000, 6000, 60000)
    assert c.data_dir == c.data_log_dir == Path("/var/zk")
    assert c.client_port == 2181
    assert c.client_port_address is None
    assert c.max_client_cnxns == 60
    assert c.four_letter_words == {"srvr"}  # 3.8.0 without a whitelist: srvr only
    assert c.jute_max_buffer == 0xFFFFF
    assert c.global_outstanding_limit == 1000
    assert c.properties == {}
    assert c.unsupported == ()
    assert not c.extended_types_enabled
    assert c.super_digest is None


def test_session_timeouts_follow_ticktime_unless_set() -> None:
    c = parse("tickTime=2000\n")
    assert (c.min_session_timeout, c.max_session_timeout) == (4000, 40000)
    c = parse("tickTime=2000\nminSessionTimeout=1000\nmaxSessionTimeout=3000\n")
    # ZooKeeper 3.8.0 accepts a minimum below 2 x tickTime ("minSessionTimeout set to 1000 ms").
    assert (c.min_session_timeout, c.max_session_timeout) == (1000, 3000)
    c = parse("tickTime=2000\nminSessionTimeout=-1\nmaxSessionTimeout=-1\n")
    assert (c.min_session_timeout, c.max_session_timeout) == (4000, 40000)
    # Only the minimum given: the maximum stays 20 x tickTime (ZooKeeper 3.8.0 starts).
    c = parse("minSessionTimeout=50000\n")
    assert (c.min_session_timeout, c.max_session_timeout) == (50000, 60000)


def test_min_larger_than_max_is_an_error_on_its_line() -> None:
    # ZooKeeper 3.8.0: "minSessionTimeout must not be larger than maxSessionTimeout", exit 2.
    e = error(BASE + "minSessionTimeout=70000\n")
    assert e.line_no == 3
    assert "minSessionTimeout must not be larger than maxSessionTimeout" in str(e)
    e = error(BASE + "tickTime=2000\nmaxSessionTimeout=3000\n")
    assert e.line_no == 4 and "4000 > 3000" in e.message


def test_zookeeper_accepts_odd_but_valid_numbers() -> None:
    # ZooKeeper 3.8.0 starts with these (it checks nothing else).
    c = parse("maxClientCnxns=-5\nminSessionTimeout=-7\n")
    assert (c.max_client_cnxns, c.min_session_timeout) == (-5, -7)
    c = parse("maxClientCnxns=0\nclientPortAddress = 127.0.0.1 \n")
    assert c.max_client_cnxns == 0  # unlimited
    assert c.client_port_address == "127.0.0.1"
    assert parse("dataLogDir=/var/zklog\n").data_log_dir == Path("/var/zklog")


@pytest.mark.parametrize(
    ("text", "line_no", "needle"),
    [
        (BASE + "tickTime=abc\n", 3, "'tickTime=abc': tickTime must be an integer"),
        (BASE + "tickTime\n", 3, "expected key=value, got 'tickTime'"),
        (BASE + "\n# c\ngarbage\n", 5, "expected key=value, got 'garbage'"),
        (BASE + "tickTime=0\n", 3, "tickTime is not set"),
        (BASE + "tickTime=1_000\n", 3, "must be an integer"),
        (BASE + "tickTime=0x10\n", 3, "must be an integer"),
        (BASE + "maxClientCnxns=2147483648\n", 3, "out of the 32-bit integer range"),
        (BASE + "jute.maxbuffer=lots\n", 3, "'jute.maxbuffer=lots': jute.maxbuffer must be"),
        (BASE + "globalOutstandingLimit=x\n", 3, "globalOutstandingLimit must be an integer"),
        ("clientPort=2181\n", None, "dataDir is not set"),
        ("dataDir=/x\n", None, "clientPort is not set"),
        ("dataDir=/x\nclientPortAddress=127.0.0.1\n", 2, "clientPortAddress is set but"),
        ("dataDir=/x\nclientPort=70000\n", 2, "is not a TCP port"),
        (BASE + "a\\u00zz=1\n", 3, "malformed \\uxxxx escape"),
        (BASE + "=value\n", 3, "empty key"),
    ],
)
def test_malformed_files_name_the_line(text: str, line_no: int | None, needle: str) -> None:
    e = error(text)
    assert e.line_no == line_no
    assert needle in str(e)
    if line_no is not None:
        assert str(e).startswith(f"line {line_no}: ")


def test_integers_are_java_integers() -> None:
    assert parse("tickTime=+2000\n").tick_time == 2000
    assert parse("tickTime=  2000  \n").tick_time == 2000
    assert parse("maxClientCnxns=-2147483648\n").max_client_cnxns == -(2**31)


# -- the java.util.Properties grammar -------------------------------------------------------

# Checked against ZooKeeper 3.8.0, whose ``conf`` answered tickTime=2500, maxClientCnxns=17,
# minSessionTimeout=5001, maxSessionTimeout=50002, dataDir=/tmp/h4cfg/d2/version-2 and whose
# whitelist let conf and ruok through (stat: "not in the whitelist").
TRICKY = (
    "# comment \\\n"
    "tickTime=999\n"
    "   ! another\n"
    "\n"
    "tickTime : 2500\r\n"
    "maxClientCnxns   17\n"
    "minSessionTimeout=\\\n"
    "     5001\n"
    "maxSession\\Timeout = 50002   \n"
    "\tdataDir=/tmp/h4cfg/d\\u0032\n"
    "clientPortAddress=127.0.0.1\n"
    "clientPort\\=x=1\n"
    "clientPort:51415\n"
    "4lw.commands.whitelist=conf, ruok\n"
)


def test_properties_grammar_matches_zookeeper() -> None:
    c = parse_config(TRICKY)
    assert c.tick_time == 2500
    assert c.max_client_cnxns == 17
    assert (c.min_session_timeout, c.max_session_timeout) == (5001, 50002)
    assert c.data_dir == Path("/tmp/h4cfg/d2")
    assert c.client_port == 51415
    assert c.four_letter_words == {"conf", "ruok", "srvr"}
    # "clientPort\=x" is a different key (escaped '='): a property like any unknown key.
    assert c.properties["zookeeper.clientPort=x"] == "1"


def test_properties_entries_and_line_numbers() -> None:
    text = "a=1\r\n\r\n# x\nb:2\rc 3\nd=\\\n  4\\\n  5\ne = \\t tab\\\\\n  f  =  6  \n"
    entries = parse_properties(text)
    assert [(e.line_no, e.key, e.value) for e in entries] == [
        (1, "a", "1"),
        (4, "b", "2"),
        (5, "c", "3"),
        (6, "d", "45"),
        (9, "e", "tab\\"),  # escaped tab at the start is trimmed like ZooKeeper's trim()
        (10, "f", "6"),
    ]


def test_comment_lines_do_not_continue_and_later_keys_win() -> None:
    c = parse("# tickTime=1\\\ntickTime=1000\ntickTime=4000\n")
    assert c.tick_time == 4000


def test_java_boolean() -> None:
    # Boolean.parseBoolean: "true" in any case, untrimmed (zoo.cfg values arrive trimmed).
    assert parse_boolean("TRUE") and parse_boolean("tRuE")
    assert not parse_boolean(" true ") and not parse_boolean("yes") and not parse_boolean("1")


# -- properties and the supported / unsupported split ---------------------------------------


def test_unknown_keys_become_zookeeper_properties() -> None:
    c = parse(
        "extendedTypesEnabled=true\n"
        "DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU=\n"
        "someFutureKey=x\n"
    )
    assert c.properties == {
        "zookeeper.extendedTypesEnabled": "true",
        "zookeeper.DigestAuthenticationProvider.superDigest": "super:D/InIHSb7yEEbrWz8b9l71RjZJU=",
        "zookeeper.someFutureKey": "x",
    }
    assert c.extended_types_enabled
    assert c.super_digest == "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
    assert c.get_property("zookeeper.someFutureKey") == "x"
    assert c.get_property("zookeeper.nothing", "d") == "d"
    assert c.flag("zookeeper.someFutureKey") is False
    assert c.unsupported == ()


def test_command_line_properties_win_over_the_file() -> None:
    c = parse(
        "4lw.commands.whitelist=ruok\njute.maxbuffer=4096\nglobalOutstandingLimit=5\n",
        properties=[
            ("zookeeper.4lw.commands.whitelist", "stat,mntr"),
            ("jute.maxbuffer", "8192"),
            ("zookeeper.extendedTypesEnabled", "True"),
        ],
    )
    assert c.four_letter_words == {"stat", "mntr", "srvr"}
    assert c.jute_max_buffer == 8192
    assert c.global_outstanding_limit == 5
    assert c.extended_types_enabled
    assert c.properties["jute.maxbuffer"] == "8192"
    assert c.properties["zookeeper.jute.maxbuffer"] == "4096"


def test_jute_maxbuffer_from_the_file_and_whitelist_star() -> None:
    c = parse("jute.maxbuffer=4096\n4lw.commands.whitelist=*\n")
    assert c.jute_max_buffer == 4096
    assert c.four_letter_words == FOUR_LETTER_WORDS | {"telnet close"}
    e = error(BASE, properties={"jute.maxbuffer": "0"})
    assert e.line_no is None and "jute.maxbuffer must be positive" in str(e)
    e = error(BASE, properties={"zookeeper.globalOutstandingLimit": "many"})
    assert str(e) == "'-D zookeeper.globalOutstandingLimit=many': " + (
        "zookeeper.globalOutstandingLimit must be an integer"
    )


def test_read_only_mode_property_enables_isro() -> None:
    c = parse(properties={"readonlymode.enabled": "true"})
    assert c.four_letter_words == {"srvr", "isro"}
    assert c.read_only_mode and not parse().read_only_mode


def test_local_sessions_enabled_is_read() -> None:
    # what read-only mode's sessions follow (the last entry wins)
    assert not parse().local_sessions_enabled
    assert parse("localSessionsEnabled=TRUE\n").local_sessions_enabled
    assert not parse(
        "localSessionsEnabled=true\nlocalSessionsEnabled=false\n"
    ).local_sessions_enabled


def test_unsupported_keys_are_collected_in_file_order() -> None:
    c = parse(
        "server.1=127.0.0.1:2888:3888\n"
        "initLimit=5\n"
        "syncLimit=2\n"
        "autopurge.purgeInterval=1\n"
        "snapCount=1000\n"
        "admin.enableServer=false\n"  # the AdminServer is served (trizk.server.ops.admin)
        "standaloneEnabled=true\n"
        "autopurge.snapRetainCount=3\n"
        "observerMasterPort=2281\n"
        "metricsProvider.className=x.Y\n"
        "initLimit=10\n",
        properties={"zookeeper.preAllocSize": "1000", "zookeeper.forceSync": "yes"},
    )
    # the ensemble keys are served (trizk.server.shell.ensemble)
    assert c.unsupported == (
        "observerMasterPort",
        "metricsProvider.className",  # x.Y: neither of the providers trizk serves
    )
    # durability settings are supported (trizk.server.shell.persistence)
    assert (c.purge_interval, c.snap_retain_count) == (1, 3)
    # ZooKeeper consumes its own fields; only pass-through keys become properties.
    assert "zookeeper.server.1" not in c.properties
    assert "zookeeper.initLimit" not in c.properties
    assert c.properties["zookeeper.snapCount"] == "1000"
    assert c.properties["zookeeper.admin.enableServer"] == "false"
    assert parse("admin.enableServer=true\n").unsupported == ()
    assert parse("admin.httpVersion=2\n").unsupported == ("admin.httpVersion",)


def test_metrics_provider_keys() -> None:
    c = parse(
        "metricsProvider.className=org.apache.zookeeper.metrics.prometheus."
        "PrometheusMetricsProvider\nmetricsProvider.httpPort=7001\n"
    )
    assert c.metrics_provider == {
        "className": "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider",
        "httpPort": "7001",
    }
    assert c.unsupported == () and "zookeeper.metricsProvider.httpPort" not in c.properties


def test_keys_table_is_consistent() -> None:
    # the quorum SASL keys (ServerConfig.quorum_auth) are checked in test_quorum_auth_keys
    fields = {
        k for k, s in KEYS.items() if s.support is Support.FIELD and not k.startswith("quorum.")
    }
    assert fields == {
        "tickTime", "clientPort", "clientPortAddress", "dataDir", "dataLogDir",
        "maxClientCnxns", "minSessionTimeout", "maxSessionTimeout",
        "autopurge.snapRetainCount", "autopurge.purgeInterval", "trizk.zookeeperVersion",
        "secureClientPort", "secureClientPortAddress", "metricsProvider.",
        "server.", "initLimit", "syncLimit", "electionAlg", "quorumListenOnAllIPs", "peerType",
        "standaloneEnabled", "group.", "weight.", "multiAddress.enabled", "reconfigEnabled",
        "dynamicConfigFile",
        "multiAddress.reachabilityCheckEnabled", "multiAddress.reachabilityCheckTimeoutMs",
        "sslQuorum", "portUnification", "sslQuorumReloadCertFiles",
        "localSessionsEnabled", "localSessionsUpgradingEnabled",
    }  # fmt: skip
    for key, spec in KEYS.items():
        assert spec.harmless_value is None or spec.support in (
            Support.UNSUPPORTED,
            Support.UNSUPPORTED_PROPERTY,
        ), key


# -- constructors, immutability, files ------------------------------------------------------


def test_development_config() -> None:
    c = ServerConfig.development("/tmp/trizk-dev")
    assert (c.client_port_address, c.client_port) == ("127.0.0.1", 2181)
    assert c.tick_time == 2000
    assert (c.min_session_timeout, c.max_session_timeout) == (4000, 40000)
    assert c.four_letter_words == FOUR_LETTER_WORDS | {"telnet close"}
    assert c.data_dir == c.data_log_dir == Path("/tmp/trizk-dev")
    assert c.max_client_cnxns == 60 and c.jute_max_buffer == 0xFFFFF
    assert c.unsupported == ()
    d = ServerConfig.development("/d", properties={"zookeeper.extendedTypesEnabled": "true"})
    assert d.extended_types_enabled


def test_create_and_immutability() -> None:
    c = ServerConfig.create("/d", clientPort=3000, tickTime=100, **{"dataLogDir": "/l"})
    assert (c.client_port, c.tick_time, c.min_session_timeout) == (3000, 100, 200)
    assert c.data_log_dir == Path("/l")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.tick_time = 5
    assert hash(c) == hash(
        ServerConfig.create("/d", clientPort=3000, tickTime=100, dataLogDir="/l")
    )
    assert c.replace(client_port=0).client_port == 0


def test_overrides_replace_file_keys_and_rederive() -> None:
    c = parse_config(BASE, overrides={"dataDir": "/elsewhere", "clientPort": "2999"})
    assert c.data_dir == c.data_log_dir == Path("/elsewhere")
    assert c.client_port == 2999


def test_load_config(tmp_path: Path) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_bytes(b"dataDir=/data/caf\xe9\nclientPort=2181\n")  # latin-1, as Java reads it
    assert load_config(cfg).data_dir == Path("/data/caf\u00e9")
    cfg.write_text("dataDir=/data/café\nclientPort=2181\n", encoding="utf-8")
    assert load_config(cfg).data_dir == Path("/data/café")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "missing.cfg")
    assert info.value.line_no is None and "cannot read" in str(info.value)


def test_parse_property_option() -> None:
    assert parse_property_option("zookeeper.a=b=c") == ("zookeeper.a", "b=c")
    assert parse_property_option(" x = 1 ") == ("x", "1")
    assert parse_property_option("flag") == ("flag", "")
    with pytest.raises(ConfigError):
        parse_property_option("=1")


def test_client_port_from_the_own_server_line() -> None:
    # QuorumPeerConfig.setupClientPort: myid picks the server line; ";[addr:]port" is the
    # client address (the official Docker image's zoo.cfg has no clientPort).
    text = (
        "dataDir=/d\ninitLimit=5\nsyncLimit=2\n"
        "server.1=localhost:2888:3888;2181\nserver.2=h:1:2;10.0.0.2:2182\n"
    )
    c = parse_config(text, myid="1")
    assert (c.client_port, c.client_port_address) == (2181, None)
    c = parse_config(text, myid="2")
    assert (c.client_port, c.client_port_address) == (2182, "10.0.0.2")
    with pytest.raises(ConfigError, match="myid file is missing"):
        parse_config(text)  # a quorum member needs its myid


def test_load_config_reads_myid(tmp_path: Path) -> None:
    (tmp_path / "myid").write_text("1\n")
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={tmp_path}\nserver.1=localhost:2888:3888;127.0.0.1:2190\n")
    c = load_config(cfg)
    assert (c.client_port, c.client_port_address) == (2190, "127.0.0.1")
    (tmp_path / "myid").write_text("x\n")
    with pytest.raises(ConfigError, match="serverid"):
        load_config(cfg)


def test_quorum_auth_keys() -> None:
    """``quorum.auth.*`` and ``quorum.cnxn.threads.size`` as QuorumPeerConfig reads them."""
    assert {k for k in KEYS if k.startswith("quorum.")} == {
        "quorum.auth.enableSasl", "quorum.auth.serverRequireSasl",
        "quorum.auth.learnerRequireSasl", "quorum.auth.learner.saslLoginContext",
        "quorum.auth.server.saslLoginContext", "quorum.auth.kerberos.servicePrincipal",
        "quorum.cnxn.threads.size",
    }  # fmt: skip
    assert all(KEYS[k].support is Support.FIELD for k in KEYS if k.startswith("quorum."))
    c = parse("")
    assert not c.quorum_auth.enabled and c.quorum_auth.cnxn_threads == 20
    c = parse(
        "quorum.auth.enableSasl=TRUE\nquorum.auth.learnerRequireSasl=true\n"
        "quorum.auth.serverRequireSasl=true\nquorum.auth.kerberos.servicePrincipal=zk/_HOST\n"
        "quorum.auth.server.saslLoginContext=S\nquorum.auth.learner.saslLoginContext=L\n"
        "quorum.cnxn.threads.size=50\n"
    )
    a = c.quorum_auth
    assert (a.enabled, a.learner_required, a.server_required) == (True, True, True)
    assert (a.service_principal, a.server_context, a.learner_context) == ("zk/_HOST", "S", "L")
    assert a.cnxn_threads == 50 and c.unsupported == ()
    assert "zookeeper.quorum.auth.enableSasl" not in c.properties
    assert parse("quorum.cnxn.threads.size=5\n").quorum_auth.cnxn_threads == 20
    with pytest.raises(ConfigError, match=r"Invalid option yes for quorum\.auth\.enableSasl"):
        parse("quorum.auth.enableSasl=yes\n")
    with pytest.raises(ConfigError, match="is disabled, so cannot enable"):
        parse("quorum.auth.serverRequireSasl=true\n")
    with pytest.raises(ConfigError, match="learnerRequireSasl is disabled"):
        parse("quorum.auth.enableSasl=true\nquorum.auth.serverRequireSasl=true\n")


def test_local_sessions_keys() -> None:
    # QuorumPeerConfig: both false by default, parseBoolean (true/false in any case)
    c = parse("")
    assert not c.local_sessions_enabled and not c.local_sessions_upgrading_enabled
    c = parse("localSessionsEnabled=TRUE\nlocalSessionsUpgradingEnabled=true\n")
    assert c.local_sessions_enabled and c.local_sessions_upgrading_enabled
    assert c.unsupported == ()
    with pytest.raises(ConfigError, match="localSessionsEnabled"):
        parse("localSessionsEnabled=yes\n")
