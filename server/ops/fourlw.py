"""Four-letter words ("4lw"): which ones exist, which are allowed, and their exact text.

Theory of operation
===================
A client whose first four bytes on a fresh connection spell a known word gets a plain-text
answer and the connection is closed (``NIOServerCnxn.checkFourLetterWord``). This module is
the pure part: it decides and formats; the listener moves bytes and the server supplies the
numbers through the status model (:mod:`trizk.server.ops.status`: the view, and the values
derived from it that the AdminServer and ``/metrics`` show too, such as mntr's).

Dispatch, as ZooKeeper 3.8.0 does it::

    name = command_name(first4)          # None -> not a 4lw: a normal (length-prefixed) session
    if not allowed(name, whitelist):     # -> not_whitelisted(name), close
    if name == "stmk": read 8 more bytes (big-endian long), set the trace mask
    if name == "crst"/"srst": reset connection / server stats          (see SIDE_EFFECTS)
    answer = respond(name, view)         # send it in ONE write, then close
                                         # (kazoo's client.command() does a single recv(8192))

Whitelist rules (``FourLetterCommands.isEnabled``): the property
``zookeeper.4lw.commands.whitelist`` (zoo.cfg key ``4lw.commands.whitelist``) is a comma list;
``*`` enables every known word; ``srvr`` is *always* enabled (zkServer.sh needs it); ``isro`` is
also enabled when the system property ``readonlymode.enabled`` is true (the configuration
parses it: :func:`trizk.server.config.zoocfg.parse_whitelist`). Absent or empty, only
``srvr`` works — even ``ruok`` answers "ruok is not executed because it is not in the whitelist."
(checked on ZooKeeper 3.8.0).

Every format below was captured from Apache ZooKeeper 3.8.0 (Debian build, standalone) and is
pinned line by line in ``tests/ops/test_fourlw.py`` and ``tests/data/fourlw/``. ZooKeeper
quirks reproduced on purpose:

* ``wchs``/``wchc``/``wchp`` report *data* watches only (``DataTree.dumpWatches`` walks
  ``dataWatches``; child watches are invisible there) while mntr's ``zk_watch_count`` counts both.
* ``stat``/``cons``/``srvr`` count and list the 4lw connection itself (``[0](queued=0,recved=1,
  sent=0)``).
* ``Latency min/avg/max`` prints the average as ``BigDecimal(avg).setScale(4, HALF_UP)``
  rendered by Java's ``Double.toString`` (``0.0``, ``1.6364``); ``cons`` prints integer averages.
* ``isro`` has no newline; ``ruok`` answers ``imok`` without newline; when the server is not
  serving, most words print "This ZooKeeper instance is not currently serving requests" and
  ``isro`` prints ``null``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from datetime import tzinfo

from trizk.quorum.verifier import Address
from trizk.server.config.zoocfg import (
    FOUR_LETTER_WORDS,
    TELNET_CLOSE_COMMAND,
    ServerConfig,
)
from trizk.server.ops.javatext import java_date, java_double, java_hex, java_socket_address
from trizk.server.ops.status import (
    NOT_SERVING,
    ConnectionInfo,
    StatusView,
    mntr_values,
    server_version,
    watch_summary,
    watches_by_path,
)

__all__ = [
    "SIDE_EFFECTS",
    "TELNET_CLOSE",
    "allowed",
    "command_name",
    "is_known",
    "not_whitelisted",
    "quorum_conf",
    "respond",
]

#: The bytes telnet sends when it closes (IAC IP IAC DO...). ZooKeeper registers it as the
#: known command "telnet close" so the log stays clean; it answers nothing and closes.
TELNET_CLOSE = b"\xff\xf4\xff\xfd"

_BY_BYTES: dict[bytes, str] = {w.encode("ascii"): w for w in FOUR_LETTER_WORDS}
_BY_BYTES[TELNET_CLOSE] = TELNET_CLOSE_COMMAND

#: Words whose answer comes after a state change the *server* must make (respond() is pure).
SIDE_EFFECTS: Mapping[str, str] = {
    "crst": "reset every connection's stats (ServerCnxn.resetStats) before answering",
    "srst": "reset the server stats (latency, packet counters) before answering",
    "stmk": "read 8 more bytes (big-endian signed long), set trace_mask to it, then answer",
}

# -- recognising and allowing words ---------------------------------------------------------


def command_name(first4: bytes) -> str | None:
    """The known command spelled by a connection's first four bytes, else ``None``."""
    return _BY_BYTES.get(bytes(first4[:4])) if len(first4) >= 4 else None


def is_known(first4: bytes) -> bool:
    """Whether the first four bytes are a known 4lw (``FourLetterCommands.isKnown``)."""
    return command_name(first4) is not None


def allowed(word: str, whitelist: frozenset[str] | set[str]) -> bool:
    """Whether ``word`` may run under ``whitelist`` (an effective whitelist from
    :func:`~trizk.server.config.zoocfg.parse_whitelist`; a raw set with ``*`` works too).
    ``srvr`` is always allowed."""
    return word == "srvr" or word in whitelist or "*" in whitelist


def not_whitelisted(word: str) -> bytes:
    """ZooKeeper's answer for a known word that is not whitelisted (``NopCommand`` +
    ``println``): ``"<word> is not executed because it is not in the whitelist.\\n"``."""
    return f"{word} is not executed because it is not in the whitelist.\n".encode()


def _metric_text(value: int | float | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    return str(value)


# -- the words ------------------------------------------------------------------------------


def _connection_line(c: ConnectionInfo, *, brief: bool) -> str:
    ops = "0" if c.interest_ops == 0 else format(c.interest_ops, "x")
    s = (
        f" {java_socket_address(c.host, c.port)}[{ops}]"
        f"(queued={c.queued},recved={c.received},sent={c.sent}"
    )
    if not brief and c.session_id != 0:
        s += (
            f",sid=0x{java_hex(c.session_id)},lop={c.last_operation},est={c.established_ms}"
            f",to={c.session_timeout}"
        )
        if c.last_cxid >= 0:
            s += f",lcxid=0x{java_hex(c.last_cxid)}"
        s += (
            f",lzxid=0x{java_hex(c.last_zxid)},lresp={c.last_response_ms},llat={c.last_latency}"
            f",minlat={c.min_latency},avglat={c.avg_latency},maxlat={c.max_latency}"
        )
    return s + ")"


def _server_stats(view: StatusView) -> str:
    # ServerStats.toString()
    lat = view.latency
    return (
        f"Latency min/avg/max: {lat.shown_min}/{java_double(lat.avg)}/{lat.max}\n"
        f"Received: {view.packets_received}\n"
        f"Sent: {view.packets_sent}\n"
        f"Connections: {len(view.connections)}\n"
        f"Outstanding: {view.outstanding_requests}\n"
        f"Zxid: 0x{java_hex(view.last_zxid)}\n"
        f"Mode: {view.server_state}\n"
    )


def _stat(view: StatusView, *, full: bool) -> str:
    # StatCommand: "stat" lists the clients (brief), "srvr" does not.
    out = f"Zookeeper version: {server_version(view)}\n"
    if view.read_only:
        out += "READ-ONLY mode; serving only read-only clients\n"
    if full:
        out += "Clients:\n"
        out += "".join(_connection_line(c, brief=True) + "\n" for c in view.connections)
        out += "\n"
    out += _server_stats(view)
    out += f"Node count: {view.node_count}\n"
    if view.server_state == "leader":
        # StatCommand: LeaderZooKeeperServer.getProposalStats() (BufferStats: -1 before any)
        last, low, high = view.proposal_sizes
        out += f"Proposal sizes last/min/max: {last}/{low}/{high}\n"
    return out


def _cons(view: StatusView) -> str:
    return "".join(_connection_line(c, brief=False) + "\n" for c in view.connections) + "\n"


def _wchs(view: StatusView) -> str:
    # WatchManager.toString() + println: watchers, distinct paths, total watches.
    watchers, paths, total = watch_summary(view)
    return f"{watchers} connections watching {paths} paths\nTotal watches:{total}\n"


def _wchc(view: StatusView) -> str:
    out = ""
    for sid, paths in view.data_watches:
        if not paths:
            continue
        out += f"0x{java_hex(sid)}\n" + "".join(f"\t{p}\n" for p in paths)
    return out + "\n"


def _wchp(view: StatusView) -> str:
    out = ""
    for path, sids in watches_by_path(view).items():
        out += f"{path}\n" + "".join(f"\t0x{java_hex(s)}\n" for s in sids)
    return out + "\n"


def _expiry_sets(title: str, items: Sequence[tuple[int, str]], tz: tzinfo | None) -> str:
    # ExpiryQueue.dump: "Sets (<buckets>)/(<elements>):", buckets by ascending expiry time.
    buckets: dict[int, list[str]] = {}
    for expire_at, text in items:
        buckets.setdefault(expire_at, []).append(text)
    out = f"{title} Sets ({len(buckets)})/({len(items)}):\n"
    for expire_at in sorted(buckets):
        members = buckets[expire_at]
        out += f"{len(members)} expire at {java_date(expire_at, tz)}:\n"
        out += "".join(f"\t{m}\n" for m in members)
    return out


def _dump(view: StatusView, tz: tzinfo | None) -> str:
    out = "SessionTracker dump:\n"
    local, learner = view.local_sessions, view.learner_sessions
    if local is not None:
        # LeaderSessionTracker / LearnerSessionTracker.dumpSessions: the local tracker first
        out += "Local " + _expiry_sets(
            "Session", [(s.expire_at_ms, f"0x{java_hex(s.session_id)}") for s in local], tz
        )
        if learner is None:
            out += "Global "
    if learner is not None:
        out += f"Global Sessions({len(learner)}):\n"
        out += "".join(f"0x{java_hex(sid)}\t{timeout}ms\n" for sid, timeout in sorted(learner))
    else:
        out += _expiry_sets(
            "Session", [(s.expire_at_ms, f"0x{java_hex(s.session_id)}") for s in view.sessions], tz
        )
    out += "ephemeral nodes dump:\n"
    owners = [s for s in view.sessions if s.ephemerals is not None]
    out += f"Sessions with Ephemerals ({len(owners)}):\n"
    for s in owners:
        out += f"0x{java_hex(s.session_id)}:\n" + "".join(f"\t{p}\n" for p in s.ephemerals or ())
    out += "Connections dump:\n"
    conns = [
        (
            c.expire_at_ms,
            f"ip: {java_socket_address(c.host, c.port)} sessionId: 0x{java_hex(c.session_id)}",
        )
        for c in view.connections
    ]
    out += _expiry_sets("Connections", conns, tz)
    return out


def _conf(view: StatusView) -> str:
    # ZooKeeperServer.dumpConf; a quorum member adds QuorumZooKeeperServer.dumpConf's lines.
    cfg = view.config
    if cfg.is_quorum:
        quorum = quorum_conf(cfg)
        if view.read_only:
            # ReadOnlyZooKeeperServer.dumpConf: the same lines up to peerType, no membership
            quorum = quorum[: quorum.index("membership: \n")]
        own = _standalone_conf(view).replace("serverId=0\n", f"serverId={cfg.my_id}\n")
        return own + quorum
    return _standalone_conf(view)


def _standalone_conf(view: StatusView) -> str:
    cfg = view.config
    return (
        f"clientPort={view.client_port}\n"
        f"secureClientPort=-1\n"
        f"dataDir={view.snap_dir}\n"
        f"dataDirSize={view.data_dir_size}\n"
        f"dataLogDir={view.log_dir}\n"
        f"dataLogSize={view.log_dir_size}\n"
        f"tickTime={cfg.tick_time}\n"
        f"maxClientCnxns={cfg.max_client_cnxns}\n"
        f"minSessionTimeout={cfg.min_session_timeout}\n"
        f"maxSessionTimeout={cfg.max_session_timeout}\n"
        f"clientPortListenBacklog=-1\n"
        f"serverId=0\n"
    )


def quorum_conf(config: ServerConfig) -> str:
    """The lines ``conf`` prints after ``serverId=<myid>`` on a quorum member
    (``QuorumZooKeeperServer.dumpConf``, checked on a ZooKeeper 3.8.0 ensemble): the quorum
    settings, this member's ports, its peer type as the Java ordinal (0 participant,
    1 observer), then ``membership: `` (with its trailing blank) and ``QuorumMaj.toString()``,
    which ends without a newline, so the answer does too. A standalone config gives ""."""
    me = config.my_server
    if config.quorum is None or me is None:
        return ""
    return (
        f"initLimit={config.init_limit}\n"
        f"syncLimit={config.sync_limit}\n"
        f"electionAlg={config.election_alg}\n"
        f"electionPort={_all_ports(me.election_addrs)}\n"
        f"quorumPort={_all_ports(me.quorum_addrs)}\n"
        f"peerType={int(config.peer_type)}\n"
        "membership: \n" + config.quorum.to_string()
    )


def _all_ports(addrs: Sequence[Address]) -> str:
    """``MultipleAddresses.getAllPorts`` joined by ``|`` (``dumpConf``): distinct ports in the
    iteration order of the addresses' ConcurrentHashMap set (16 bins: ``spread(hashCode) &
    15``, ``InetSocketAddress.hashCode`` = the IPv4 address as an int + port; a bin keeps
    insertion order). Hosts that are not IPv4 literals hash by their resolved address in Java;
    they are kept in the order written."""
    if len(addrs) == 1:
        return str(addrs[0].port)

    def bin_of(a: Address) -> int:
        try:
            h = (int(ipaddress.IPv4Address(a.host)) + a.port) & 0xFFFFFFFF
        except ValueError:
            return 0
        return (h ^ (h >> 16)) & 15

    ordered = sorted(addrs, key=bin_of)  # stable: a bin keeps insertion order
    ports: list[int] = []
    for a in ordered:
        if a.port not in ports:
            ports.append(a.port)
    return "|".join(str(p) for p in ports)


def _envi(view: StatusView) -> str:
    out = f"Environment:\nzookeeper.version={server_version(view)}\n"
    return out + "".join(f"{k}={v}\n" for k, v in view.environment)


def _mntr(view: StatusView) -> str:
    return "".join(f"zk_{name}\t{_metric_text(value)}\n" for name, value in mntr_values(view))


_NEEDS_SERVING = frozenset(
    {"conf", "cons", "crst", "dirs", "dump", "srst", "srvr", "stat", "wchc", "wchp", "wchs"}
    | {"mntr", "hash"}
)


def respond(word: str, view: StatusView, *, tz: tzinfo | None = None) -> bytes:
    """The exact bytes ZooKeeper 3.8.0 sends for an allowed, known ``word``.

    Pure: state changes (``crst``, ``srst``, ``stmk``) are the caller's (see SIDE_EFFECTS).
    ``tz`` is the zone for ``dump``'s dates (default: local, like the JVM's default zone).
    """
    if word in _NEEDS_SERVING and not view.serving:
        # DigestCommand uses print, the others println.
        return (NOT_SERVING + ("" if word == "hash" else "\n")).encode()
    match word:
        case "ruok":
            text = "imok"
        case "srvr":
            text = _stat(view, full=False)
        case "stat":
            text = _stat(view, full=True)
        case "cons":
            text = _cons(view)
        case "crst":
            text = "Connection stats reset.\n"
        case "srst":
            text = "Server stats reset.\n"
        case "wchs":
            text = _wchs(view)
        case "wchc":
            text = _wchc(view)
        case "wchp":
            text = _wchp(view)
        case "dump":
            text = _dump(view, tz)
        case "conf":
            text = _conf(view)
        case "envi":
            text = _envi(view)
        case "mntr":
            text = _mntr(view)
        case "dirs":
            text = f"datadir_size: {view.data_dir_size}\nlogdir_size: {view.log_dir_size}\n"
        case "isro":
            text = ("ro" if view.read_only else "rw") if view.serving else "null"
        case "gtmk" | "stmk":
            text = str(view.trace_mask)
        case "hash":
            text = "".join(f"{java_hex(z)}: {d}\n" for z, d in view.digest_log)
        case "telnet close":
            text = ""
        case _:
            raise ValueError(f"not a four-letter word: {word!r}")
    return text.encode()
