"""Four-letter words against golden answers captured from Apache ZooKeeper 3.8.0.

The golden files (tests/data/fourlw/, re-made by capture.py there) hold ZooKeeper's exact
bytes. Each test reads the *values* back out of a golden answer, builds a FourLetterView from
them and requires ``respond()`` to reproduce the answer byte for byte. So line order, spacing,
number formats and separators are pinned exactly, while values (ports, session ids, dates,
latencies) may differ between captures. The only normalisation is the version string: trizk
prints its own in ZooKeeper's shape. The views answer as 3.8.0 (``trizk.zookeeperVersion``, the
release of the goldens; the default, 3.9.3, is compared with the live 3.9.3 in tests/compat).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from kazoo.client import KazooClient

from trizk.server.common import release
from trizk.server.config.zoocfg import FOUR_LETTER_WORDS, ServerConfig, parse_whitelist
from trizk.server.ops import status
from trizk.server.ops.fourlw import (
    TELNET_CLOSE,
    allowed,
    command_name,
    is_known,
    not_whitelisted,
    respond,
)
from trizk.server.ops.javatext import java_double, java_socket_address
from trizk.server.ops.status import (
    FULL_VERSION,
    ConnectionInfo,
    LatencyStats,
    SessionInfo,
    SimpleView,
)

DATA = Path(__file__).parents[1] / "data" / "fourlw"
ZK_VERSION = re.compile(r"3\.8\.0-\$\{mvngit\.commit\.id\}, built on [0-9-]+ [0-9:]+ UTC")
#: trizk's version string answering as the goldens' release
GOLDEN_VERSION = release.full_version(release.ZK380)


def golden(name: str) -> str:
    """A golden answer with ZooKeeper's build string replaced by trizk's."""
    text = (DATA / f"{name}.txt").read_bytes().decode()
    normalised, n = ZK_VERSION.subn(GOLDEN_VERSION, text)
    assert n <= 1
    return normalised


def assert_same(actual: bytes, expected: str) -> None:
    """Line-by-line comparison first (readable failures), then the exact bytes."""
    assert actual.decode().split("\n") == expected.split("\n")
    assert actual == expected.encode()


def config(**keys: str | int) -> ServerConfig:
    """A configuration answering as the goldens' release, 3.8.0."""
    keys.setdefault(release.PROPERTY, release.ZK380)
    return ServerConfig.create("/tmp/zk", clientPort=2181, **keys)


def view(**fields: object) -> SimpleView:
    fields.setdefault("config", config(tickTime=2000))
    return SimpleView(**fields)


# -- parsing values back out of golden answers ----------------------------------------------

_CONN = re.compile(
    r" /(?P<host>[0-9.]+):(?P<port>\d+)\[(?P<ops>[0-9a-f]+)\]"
    r"\(queued=(?P<queued>\d+),recved=(?P<recv>\d+),sent=(?P<sent>\d+)"
    r"(?:,sid=0x(?P<sid>[0-9a-f]+),lop=(?P<lop>\w+),est=(?P<est>\d+),to=(?P<to>\d+)"
    r"(?:,lcxid=0x(?P<lcxid>[0-9a-f]+))?,lzxid=0x(?P<lzxid>[0-9a-f]+),lresp=(?P<lresp>\d+)"
    r",llat=(?P<llat>\d+),minlat=(?P<minlat>\d+),avglat=(?P<avglat>\d+),maxlat=(?P<maxlat>\d+))?"
    r"\)\Z"
)


def parse_connection(line: str) -> ConnectionInfo:
    m = _CONN.match(line)
    assert m, line
    g = m.groupdict()
    info = ConnectionInfo(
        host=g["host"],
        port=int(g["port"]),
        interest_ops=int(g["ops"], 16),
        queued=int(g["queued"]),
        received=int(g["recv"]),
        sent=int(g["sent"]),
    )
    if g["sid"] is None:
        return info
    return ConnectionInfo(
        **{s: getattr(info, s) for s in ("host", "port", "interest_ops", "queued", "received")},
        sent=info.sent,
        session_id=int(g["sid"], 16),
        last_operation=g["lop"],
        established_ms=int(g["est"]),
        session_timeout=int(g["to"]),
        last_cxid=int(g["lcxid"], 16) if g["lcxid"] else -1,
        last_zxid=int(g["lzxid"], 16),
        last_response_ms=int(g["lresp"]),
        last_latency=int(g["llat"]),
        min_latency=int(g["minlat"]),
        avg_latency=int(g["avglat"]),
        max_latency=int(g["maxlat"]),
    )


def latency_for(min_: int, avg_text: str, max_: int) -> LatencyStats:
    """Some (count, total) whose Java-rounded average prints as ``avg_text``."""
    if avg_text == "0.0":
        return LatencyStats(0, 0, min_, max_)
    for count in range(1, 100_000):
        stats = LatencyStats(count, round(float(avg_text) * count), min_, max_)
        if java_double(stats.avg) == avg_text:
            return stats
    raise AssertionError(f"no latency sample gives {avg_text}")


def stats_from(text: str) -> dict[str, object]:
    """View fields from a srvr/stat answer's ServerStats block."""
    m = re.search(
        r"Latency min/avg/max: (\d+)/([0-9.E-]+)/(\d+)\nReceived: (\d+)\nSent: (\d+)\n"
        r"Connections: (\d+)\nOutstanding: (\d+)\nZxid: 0x([0-9a-f]+)\nMode: (\w+)\n"
        r"Node count: (\d+)\n",
        text,
    )
    assert m, text
    return {
        "latency": latency_for(int(m[1]), m[2], int(m[3])),
        "packets_received": int(m[4]),
        "packets_sent": int(m[5]),
        "connections": [ConnectionInfo("127.0.0.1", 40000 + i) for i in range(int(m[6]))],
        "outstanding_requests": int(m[7]),
        "last_zxid": int(m[8], 16),
        "server_state": m[9],
        "node_count": int(m[10]),
    }


def data_watches_from_wchc(text: str) -> list[tuple[int, list[str]]]:
    watches: list[tuple[int, list[str]]] = []
    for line in text.split("\n"):
        if line.startswith("0x"):
            watches.append((int(line, 16), []))
        elif line.startswith("\t"):
            watches[-1][1].append(line[1:])
    return watches


def java_date_ms(text: str) -> int:
    return int(datetime.strptime(text, "%a %b %d %H:%M:%S UTC %Y").replace(tzinfo=UTC).timestamp())


# -- which words exist and which may run ----------------------------------------------------


def test_known_words_are_zookeeper_380s() -> None:
    # FourLetterCommands static block in zookeeper-3.8.0.jar (plus "telnet close").
    assert FOUR_LETTER_WORDS == set(
        "conf cons crst dirs dump envi gtmk ruok stmk srst srvr stat wchc wchp wchs mntr isro "
        "hash".split()
    )
    for w in FOUR_LETTER_WORDS:
        assert is_known(w.encode())
        assert command_name(w.encode() + b"trailing") == w
    assert command_name(TELNET_CLOSE) == "telnet close"
    for not_a_word in (b"RUOK", b"kill", b"\x00\x00\x00\x2d", b"ruo", b""):
        assert not is_known(not_a_word)


def test_whitelist_rules() -> None:
    # Absent/empty: only srvr (ZooKeeper 3.8.0 answers ruok with the not-whitelisted line).
    assert parse_whitelist(None) == {"srvr"}
    assert parse_whitelist("") == {"srvr"}
    assert parse_whitelist(" ruok , stat ,,") == {"ruok", "stat", "srvr"}
    assert parse_whitelist("*") == FOUR_LETTER_WORDS | {"telnet close"}
    assert parse_whitelist("ruok, *") == FOUR_LETTER_WORDS | {"telnet close"}
    assert parse_whitelist("ruok", read_only_mode=True) == {"ruok", "isro", "srvr"}
    assert allowed("srvr", frozenset())
    assert not allowed("ruok", parse_whitelist(None))
    assert allowed("ruok", parse_whitelist("ruok"))
    assert allowed("mntr", {"*"})


@pytest.mark.parametrize("word", ["ruok", "stat", "mntr", "isro"])
def test_not_whitelisted_text(word: str) -> None:
    assert not_whitelisted(word) == (DATA / f"default_{word}.txt").read_bytes()


# -- the words, against golden answers ------------------------------------------------------


@pytest.mark.parametrize("name", ["fresh_srvr", "busy_srvr", "default_srvr"])
def test_srvr(name: str) -> None:
    expected = golden(name)
    assert_same(respond("srvr", view(**stats_from(expected))), expected)


@pytest.mark.parametrize("name", ["fresh_stat", "busy_stat"])
def test_stat(name: str) -> None:
    expected = golden(name)
    fields = stats_from(expected)
    clients = expected.split("Clients:\n", 1)[1].split("\n\n", 1)[0].split("\n")
    fields["connections"] = [parse_connection(c) for c in clients]
    assert_same(respond("stat", view(**fields)), expected)


def test_stat_and_srvr_in_read_only_mode() -> None:
    v = view(read_only=True)
    for word in ("stat", "srvr"):
        lines = respond(word, v).decode().split("\n")
        assert lines[1] == "READ-ONLY mode; serving only read-only clients"


@pytest.mark.parametrize("name", ["fresh_cons", "busy_cons"])
def test_cons(name: str) -> None:
    expected = golden(name)
    assert expected.endswith("\n\n")
    conns = [parse_connection(line) for line in expected[:-2].split("\n")]
    assert_same(respond("cons", view(connections=conns)), expected)


def test_cons_omits_lcxid_before_the_first_request() -> None:
    c = ConnectionInfo("127.0.0.1", 5, session_id=0x10, last_cxid=-1, last_zxid=-1)
    line = respond("cons", view(connections=[c])).decode().split("\n")[0]
    assert ",to=0,lzxid=0xffffffffffffffff," in line
    assert "lcxid" not in line


def test_watch_words() -> None:
    wchc = golden("busy_wchc")
    v = view(data_watches=data_watches_from_wchc(wchc))
    assert_same(respond("wchc", v), wchc)
    # wchp groups the same watches by path, in first-seen order.
    assert_same(respond("wchp", v), golden("busy_wchp"))
    assert_same(respond("wchs", v), golden("busy_wchs"))
    empty = view()
    for word in ("wchs", "wchc", "wchp"):
        assert_same(respond(word, empty), golden(f"fresh_{word}"))


def _dump_view(expected: str) -> SimpleView:
    sessions_part, rest = expected.split("ephemeral nodes dump:\n")
    ephemerals_part, conns_part = rest.split("Connections dump:\n")
    sessions: dict[int, SessionInfo] = {}
    expire = 0
    for line in sessions_part.split("\n"):
        if m := re.match(r"\d+ expire at (.*):$", line):
            expire = java_date_ms(m[1]) * 1000
        elif line.startswith("\t0x"):
            sid = int(line[1:], 16)
            sessions[sid] = SessionInfo(sid, expire)
    owner = 0
    owned: dict[int, list[str]] = {}
    for line in ephemerals_part.split("\n")[1:]:
        if line.startswith("0x"):
            owner = int(line[:-1], 16)
            owned[owner] = []
        elif line.startswith("\t"):
            owned[owner].append(line[1:])
    ordered = [
        SessionInfo(s.session_id, s.expire_at_ms, owned.get(sid)) for sid, s in sessions.items()
    ]
    conns = []
    for line in conns_part.split("\n"):
        if m := re.match(r"\d+ expire at (.*):$", line):
            expire = java_date_ms(m[1]) * 1000
        elif m := re.match(r"\tip: /([0-9.]+):(\d+) sessionId: 0x([0-9a-f]+)$", line):
            conns.append(
                ConnectionInfo(m[1], int(m[2]), session_id=int(m[3], 16), expire_at_ms=expire)
            )
    # dump lists ephemeral owners in the ephemerals map's order; keep sessions in that order
    # when they own ephemerals (the session section sorts by bucket, then keeps input order).
    by_owner = {s.session_id: s for s in ordered}
    ordered = [by_owner[o] for o in owned] + [s for s in ordered if s.session_id not in owned]
    return view(sessions=ordered, connections=conns)


def test_dump_busy() -> None:
    expected = golden("busy_dump")
    assert_same(respond("dump", _dump_view(expected), tz=UTC), expected)


def test_dump_fresh() -> None:
    expected = golden("fresh_dump")
    # ZooKeeper keeps an emptied session bucket until its expiry passes ("0 expire at ...";
    # the readiness probe's session had just closed). trizk lists only live buckets.
    lines = expected.split("\n")
    assert lines[1:3] == ["Session Sets (1)/(0):", lines[2]] and lines[2].startswith("0 expire")
    expected = "\n".join([lines[0], "Session Sets (0)/(0):", *lines[3:]])
    assert_same(respond("dump", _dump_view(expected), tz=UTC), expected)


def test_conf() -> None:
    expected = golden("fresh_conf")
    values = dict(line.split("=", 1) for line in expected.strip().split("\n"))
    cfg = ServerConfig.create(
        "/tmp/h4lw/data",
        clientPort=int(values["clientPort"]),
        tickTime=int(values["tickTime"]),
        **{release.PROPERTY: release.ZK380},
    )
    assert (cfg.min_session_timeout, cfg.max_session_timeout) == (4000, 40000)
    v = view(
        config=cfg,
        client_port=int(values["clientPort"]),
        snap_dir=values["dataDir"],
        log_dir=values["dataLogDir"],
        data_dir_size=int(values["dataDirSize"]),
        log_dir_size=int(values["dataLogSize"]),
    )
    assert_same(respond("conf", v), expected)


def test_dirs() -> None:
    expected = golden("fresh_dirs")
    m = re.fullmatch(r"datadir_size: (\d+)\nlogdir_size: (\d+)\n", expected)
    assert m
    v = view(data_dir_size=int(m[1]), log_dir_size=int(m[2]))
    assert_same(respond("dirs", v), expected)


def test_envi() -> None:
    expected = golden("fresh_envi")
    lines = expected.strip().split("\n")
    assert lines[:2] == ["Environment:", f"zookeeper.version={GOLDEN_VERSION}"]
    env = [tuple(line.split("=", 1)) for line in lines[2:]]
    assert_same(respond("envi", view(environment=env)), expected)


def test_envi_from_this_process_has_zookeepers_keys_in_order() -> None:
    keys = [k for k, _ in status.process_environment()]
    zk_keys = [line.split("=", 1)[0] for line in golden("fresh_envi").strip().split("\n")[2:]]
    assert keys == zk_keys


def test_kazoo_server_version_parses_envi() -> None:
    # kazoo's own parser (KazooClient.server_version) over trizk's envi answer.
    default = ServerConfig.create("/tmp/zk", clientPort=2181)  # the default release
    v = view(config=default, environment=status.process_environment())
    text = respond("envi", v).decode()
    assert len(text.encode()) < 8192  # kazoo reads the answer with one recv(8192)
    fake = SimpleNamespace(command=lambda cmd=b"ruok": text)
    version = KazooClient.server_version(fake)
    assert version == tuple(int(x) for x in FULL_VERSION.split("-")[0].split("."))
    assert version[:2] == (3, 9)  # the default release, 3.9.3


def _mntr_case(name: str) -> tuple[str, SimpleView]:
    expected = golden(name)
    pairs = [line.split("\t", 1) for line in expected.rstrip("\n").split("\n")]
    values = {k.removeprefix("zk_"): v for k, v in pairs}
    idle = status._MNTR_IDLE
    explicit = {
        "version", "server_state", "ephemerals_count", "num_alive_connections", "avg_latency",
        "min_latency", "max_latency", "outstanding_requests", "znode_count", "global_sessions",
        "packets_sent", "packets_received", "watch_count", "approximate_data_size", "uptime",
    }  # fmt: skip
    metrics: dict[str, int | float | str] = {}
    for key, text in values.items():
        if key in explicit:
            continue
        value: int | float = float(text) if "." in text else int(text)
        if key not in idle or idle[key] != value:
            metrics[key] = value
    n_sessions = int(values["global_sessions"])
    n_ephemerals = int(values["ephemerals_count"])
    sessions = [
        SessionInfo(i + 1, 0, ["/e"] * (n_ephemerals if i == 0 else 0)) for i in range(n_sessions)
    ]
    v = view(
        server_state=values["server_state"],
        sessions=sessions,
        connections=[ConnectionInfo("127.0.0.1", 1)] * int(values["num_alive_connections"]),
        latency=latency_for(
            int(values["min_latency"]), values["avg_latency"], int(values["max_latency"])
        ),
        outstanding_requests=int(values["outstanding_requests"]),
        node_count=int(values["znode_count"]),
        packets_sent=int(values["packets_sent"]),
        packets_received=int(values["packets_received"]),
        watch_count=int(values["watch_count"]),
        approximate_data_size=int(values["approximate_data_size"]),
        uptime_ms=int(values["uptime"]),
        metrics=metrics,
    )
    return expected, v


@pytest.mark.parametrize("name", ["fresh_mntr", "busy_mntr"])
def test_mntr(name: str) -> None:
    expected, v = _mntr_case(name)
    assert_same(respond("mntr", v), expected)


def test_mntr_idle_server_needs_no_metrics() -> None:
    lines = respond("mntr", view()).decode().split("\n")
    fresh = golden("fresh_mntr").split("\n")
    assert [line.split("\t")[0] for line in lines] == [line.split("\t")[0] for line in fresh]
    # Idle values as ZooKeeper 3.8.0 printed them before its first session: response sizes
    # -1, averages and the drop probability 0.0, everything else 0.
    minus_one = {
        "last_client_response_size",
        "max_client_response_size",
        "min_client_response_size",
    }
    given = {"version": GOLDEN_VERSION, "server_state": "standalone", "znode_count": "5"}
    given["approximate_data_size"] = "44"
    for line in lines[:-1]:
        key, value = line.split("\t")
        name = key.removeprefix("zk_")
        if name in given:
            assert value == given[name]
        elif name in minus_one:
            assert value == "-1", line
        elif name.startswith("avg_") or name == "connection_drop_probability":
            assert value == "0.0", line
        else:
            assert value == "0", line
    assert lines[-1] == ""


def test_small_words() -> None:
    v = view(trace_mask=306)
    assert respond("ruok", v) == (DATA / "fresh_ruok.txt").read_bytes() == b"imok"
    assert respond("isro", v) == (DATA / "fresh_isro.txt").read_bytes() == b"rw"
    assert respond("isro", view(read_only=True)) == b"ro"
    assert respond("gtmk", v) == (DATA / "fresh_gtmk.txt").read_bytes() == b"306"
    # stmk: the server sets the mask from the 8 bytes after the word, then prints it.
    assert respond("stmk", view(trace_mask=0x1F2)) == (DATA / "fresh_stmk.txt").read_bytes()
    assert respond("crst", v) == (DATA / "fresh_crst.txt").read_bytes()
    assert respond("srst", v) == (DATA / "fresh_srst.txt").read_bytes()
    assert respond("hash", v) == (DATA / "fresh_hash.txt").read_bytes() == b""
    assert respond("hash", view(digest_log=[(0x1F, 12345)])) == b"1f: 12345\n"
    assert respond("telnet close", v) == (DATA / "fresh_telnet_close.txt").read_bytes() == b""
    with pytest.raises(ValueError):
        respond("kill", v)


def test_not_serving() -> None:
    v = view(serving=False)
    for word in ("stat", "srvr", "cons", "conf", "dump", "wchs", "mntr", "dirs", "crst"):
        assert respond(word, v) == b"This ZooKeeper instance is not currently serving requests\n"
    assert respond("hash", v) == b"This ZooKeeper instance is not currently serving requests"
    assert respond("isro", v) == b"null"
    assert respond("ruok", v) == b"imok"
    assert respond("envi", v).startswith(b"Environment:\n")


# -- Java formatting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (1.6364, "1.6364"),
        (75.0, "75.0"),
        (3.5, "3.5"),
        (0.001, "0.001"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (0.0001, "1.0E-4"),
        (-2.5, "-2.5"),
    ],
)
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


def test_latency_average_rounds_like_bigdecimal_half_up() -> None:
    assert LatencyStats(11, 25, 0, 12).avg == 2.2727
    assert LatencyStats(3, 2, 0, 1).avg == 0.6667
    assert LatencyStats(20000, 1, 0, 1).avg == 0.0001  # 5e-05 as a double is just above half
    assert LatencyStats().avg == 0.0
    assert LatencyStats(0, 0, 99, 0).shown_min == 0


def test_expiry_bucket_rounds_up_to_the_next_interval() -> None:
    # ExpiryQueue.roundToNextInterval((now + timeout)): always strictly after now + timeout.
    assert status.expiry_bucket(1_000, 10_000, 2_000) == 12_000
    assert status.expiry_bucket(1_999, 10_000, 2_000) == 12_000
    assert status.expiry_bucket(2_000, 10_000, 2_000) == 14_000
    assert status.expiry_bucket(5, 0, status.CONNECTION_EXPIRY_INTERVAL_MS) == 10_000


def test_java_socket_address() -> None:
    assert java_socket_address("127.0.0.1", 2181) == "/127.0.0.1:2181"
    assert java_socket_address("::1", 2181) == "/[0:0:0:0:0:0:0:1]:2181"
    assert java_socket_address("fe80::1:2", 7) == "/[fe80:0:0:0:0:0:1:2]:7"
