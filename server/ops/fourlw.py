"""Four-letter words ("4lw"): which ones exist, which are allowed, and their exact text.

Theory of operation
===================
A client whose first four bytes on a fresh connection spell a known word gets a plain-text
answer and the connection is closed (``NIOServerCnxn.checkFourLetterWord``). This module is
the pure part: it decides and formats; the listener moves bytes and the server supplies the
numbers through a :class:`FourLetterView`.

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
also enabled when the system property ``readonlymode.enabled`` is true. Absent or empty, only
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
import os
import platform
import socket
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Protocol

import trizk

if TYPE_CHECKING:
    from trizk.server.common.servermetrics import ServerMetrics
    from trizk.server.config.zoocfg import ServerConfig

__all__ = [
    "CONNECTION_EXPIRY_INTERVAL_MS",
    "FOUR_LETTER_WORDS",
    "FULL_VERSION",
    "LAST_OP_NAMES",
    "MNTR_GAUGES_AND_COUNTERS",
    "MNTR_SUMMARIES",
    "NOT_SERVING",
    "SIDE_EFFECTS",
    "TELNET_CLOSE",
    "ConnectionInfo",
    "FourLetterView",
    "LatencyStats",
    "SessionInfo",
    "SimpleView",
    "allowed",
    "command_name",
    "expiry_bucket",
    "fd_gauges",
    "is_known",
    "java_double",
    "mntr_values",
    "not_whitelisted",
    "parse_whitelist",
    "process_environment",
    "prometheus_configured",
    "quorum_conf",
    "respond",
]

#: Every word ZooKeeper 3.8.0 knows (``FourLetterCommands`` static block).
FOUR_LETTER_WORDS: frozenset[str] = frozenset(
    {
        "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok", "stmk", "srst",
        "srvr", "stat", "wchc", "wchp", "wchs", "mntr", "isro", "hash",
    }
)  # fmt: skip

#: The bytes telnet sends when it closes (IAC IP IAC DO...). ZooKeeper registers it as the
#: known command "telnet close" so the log stays clean; it answers nothing and closes.
TELNET_CLOSE = b"\xff\xf4\xff\xfd"

_BY_BYTES: dict[bytes, str] = {w.encode("ascii"): w for w in FOUR_LETTER_WORDS}
_BY_BYTES[TELNET_CLOSE] = "telnet close"

#: Words whose answer comes after a state change the *server* must make (respond() is pure).
SIDE_EFFECTS: Mapping[str, str] = {
    "crst": "reset every connection's stats (ServerCnxn.resetStats) before answering",
    "srst": "reset the server stats (latency, packet counters) before answering",
    "stmk": "read 8 more bytes (big-endian signed long), set trace_mask to it, then answer",
}

#: "This ZooKeeper instance is not currently serving requests" (``ZK_NOT_SERVING``).
NOT_SERVING = "This ZooKeeper instance is not currently serving requests"

#: ``Version.getFullVersion()`` in ZooKeeper's shape ``<version>-<revision>, built on <date>``
#: (3.8.0 prints ``3.8.0-5a02a05eddb59aee6ac762f7ea82e92a68eb9c0f, built on 2022-02-25 08:49
#: UTC``). Clients parse the leading ``\\d+(\\.\\d+)*`` (kazoo's ``server_version()``).
FULL_VERSION = f"{trizk.ZOOKEEPER_VERSION}-trizk-{trizk.__version__}, built on 2026-11-21 00:00 UTC"

#: ``lop=`` names per opcode (``FinalRequestProcessor`` sets ``lastOp`` to these).
LAST_OP_NAMES: Mapping[int, str] = {
    -11: "CLOS", -10: "SESS", 1: "CREA", 2: "DELE", 3: "EXIS", 4: "GETD", 5: "SETD",
    6: "GETA", 7: "SETA", 8: "GETC", 9: "SYNC", 11: "PING", 12: "GETC", 13: "CHEC",
    14: "MULT", 15: "CREA", 16: "RECO", 17: "CHKW", 18: "REMW", 19: "CREA", 20: "DELE",
    21: "CREA", 22: "MLTR", 101: "SETW", 103: "GETE", 104: "GETACN", 105: "STW2",
    106: "ADDW", 107: "HOMI",
}  # fmt: skip


#: ``zookeeper.nio.sessionlessCnxnTimeout`` (default 10000 ms): the connection expiry queue's
#: bucket interval, and the idle timeout of a connection without a session.
CONNECTION_EXPIRY_INTERVAL_MS = 10_000


def expiry_bucket(now_ms: int, timeout_ms: int, interval_ms: int) -> int:
    """``ExpiryQueue.update``: the bucket an element touched at ``now_ms`` expires in,
    ``roundToNextInterval(now + timeout) = ((now + timeout) / interval + 1) * interval``
    (sessions: interval = tickTime; connections: CONNECTION_EXPIRY_INTERVAL_MS). ZooKeeper
    computes it on its monotonic clock and converts to wall time when dumping."""
    return ((now_ms + timeout_ms) // interval_ms + 1) * interval_ms


# -- recognising and allowing words ---------------------------------------------------------


def command_name(first4: bytes) -> str | None:
    """The known command spelled by a connection's first four bytes, else ``None``."""
    return _BY_BYTES.get(bytes(first4[:4])) if len(first4) >= 4 else None


def is_known(first4: bytes) -> bool:
    """Whether the first four bytes are a known 4lw (``FourLetterCommands.isKnown``)."""
    return command_name(first4) is not None


def parse_whitelist(value: str | None, *, read_only_mode: bool = False) -> frozenset[str]:
    """The effective whitelist for ``zookeeper.4lw.commands.whitelist`` = ``value``.

    ``*`` (as one comma item) enables every known command, including "telnet close";
    blank items are skipped; ``srvr`` is always added; ``isro`` too when ``read_only_mode``
    (the ``readonlymode.enabled`` property) is set. Unknown names are kept (harmless).
    """
    words: set[str] = set()
    if value is not None:
        for item in value.split(","):
            name = item.strip()
            if name == "*":
                words |= set(_BY_BYTES.values())
                break
            if name:
                words.add(name)
    if read_only_mode:
        words.add("isro")
    words.add("srvr")  # FourLetterCommands: "zkServer.sh depends on srvr"
    return frozenset(words)


def allowed(word: str, whitelist: frozenset[str] | set[str]) -> bool:
    """Whether ``word`` may run under ``whitelist`` (an effective whitelist from
    :func:`parse_whitelist`; a raw set with ``*`` works too). ``srvr`` is always allowed."""
    return word == "srvr" or word in whitelist or "*" in whitelist


def not_whitelisted(word: str) -> bytes:
    """ZooKeeper's answer for a known word that is not whitelisted (``NopCommand`` +
    ``println``): ``"<word> is not executed because it is not in the whitelist.\\n"``."""
    return f"{word} is not executed because it is not in the whitelist.\n".encode()


# -- the data the words need ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Server request latency in ms (``ServerStats.requestLatency``, an AvgMinMaxCounter)."""

    count: int = 0
    total: int = 0
    #: Smallest latency seen; ignored while ``count == 0`` (ZooKeeper prints 0 then).
    min: int = 0
    max: int = 0

    @property
    def avg(self) -> float:
        """``BigDecimal(total / count).setScale(4, HALF_UP).doubleValue()``, 0.0 when empty."""
        if self.count <= 0:
            return 0.0
        exact = Decimal(self.total / self.count)  # Decimal(float) is exact, like BigDecimal(double)
        return float(exact.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))

    @property
    def shown_min(self) -> int:
        return self.min if self.count > 0 else 0


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """One client connection, as ``ServerCnxn.dumpConnectionInfo`` prints it.

    Session fields are printed (by ``cons``) only when ``session_id != 0``. ``lcxid`` is
    omitted while ``last_cxid < 0``. Latencies are the connection's own integer ms; ``avg_latency``
    is ``totalLatency / count`` in integer division (0 when no request yet).
    """

    host: str
    port: int
    #: ``[1]`` for an idle session (OP_READ), ``[0]`` for the 4lw connection being served;
    #: printed in hex. trizk: 1 normally, 0 for the connection asking.
    interest_ops: int = 1
    queued: int = 0  # outstanding requests
    received: int = 0  # packets received on this connection
    sent: int = 0  # packets sent on this connection
    session_id: int = 0
    #: Name of the last operation (LAST_OP_NAMES), "NA" before any.
    last_operation: str = "NA"
    established_ms: int = 0  # wall clock, ms since the epoch (Date.getTime())
    session_timeout: int = 0  # negotiated, ms
    last_cxid: int = -1
    last_zxid: int = -1
    last_response_ms: int = 0  # ZooKeeper uses its monotonic ms clock here
    last_latency: int = 0
    min_latency: int = 0
    avg_latency: int = 0
    max_latency: int = 0
    #: Wall-clock ms of the connection's idle-expiry bucket (``dump``'s "Connections dump").
    #: NIOServerCnxnFactory.touchCnxn on every I/O: ``expiry_bucket(now, timeout,
    #: CONNECTION_EXPIRY_INTERVAL_MS)`` where timeout is the session timeout, or
    #: CONNECTION_EXPIRY_INTERVAL_MS before a session exists.
    expire_at_ms: int = 0


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One live session for ``dump``."""

    session_id: int
    #: Wall-clock ms of the session's expiry bucket (SessionTrackerImpl rounds
    #: ``now + timeout`` up to a multiple of tickTime).
    expire_at_ms: int
    #: Ephemeral paths owned; ``None`` when the session never had one. ZooKeeper keeps an
    #: emptied set after the last ephemeral is deleted, so ``()`` still lists the session.
    ephemerals: Sequence[str] | None = None


class FourLetterView(Protocol):
    """What the words read from the server. Sequences are printed in the order given.

    Implement with plain attributes or properties; :class:`SimpleView` is a ready dataclass.
    """

    @property
    def serving(self) -> bool:
        """False while the server cannot serve (e.g. quorum not formed): words print NOT_SERVING."""

    @property
    def read_only(self) -> bool:
        """Read-only mode: ``isro`` says ``ro``; ``stat``/``srvr`` add a READ-ONLY line."""

    @property
    def server_state(self) -> str:
        """``Mode:`` / ``zk_server_state``: "standalone" (later leader/follower/observer)."""

    @property
    def latency(self) -> LatencyStats:
        """Request latency over all requests since start or ``srst``."""

    @property
    def packets_received(self) -> int: ...
    @property
    def packets_sent(self) -> int: ...
    @property
    def outstanding_requests(self) -> int: ...
    @property
    def last_zxid(self) -> int:
        """Last processed zxid (``Zxid: 0x...``)."""

    @property
    def node_count(self) -> int:
        """``DataTree.getNodeCount()``: ZooKeeper maps the root under both "" and "/", so this
        is the number of znodes + 1 (a fresh 3.8.0 tree: /, /zookeeper, /zookeeper/quota,
        /zookeeper/config → 5)."""

    @property
    def watch_count(self) -> int:
        """Data + child watches (mntr ``zk_watch_count``)."""

    @property
    def approximate_data_size(self) -> int:
        """Sum of path lengths + data lengths (mntr ``zk_approximate_data_size``)."""

    @property
    def uptime_ms(self) -> int: ...

    @property
    def connections(self) -> Sequence[ConnectionInfo]:
        """Every open client connection, including the one asking."""

    @property
    def sessions(self) -> Sequence[SessionInfo]:
        """Every live session (``dump``; mntr ``zk_global_sessions``, ``zk_ephemerals_count``)."""

    @property
    def data_watches(self) -> Sequence[tuple[int, Sequence[str]]]:
        """Data watches as (session id, watched paths), in print order. ``wchp`` groups them by
        path in first-seen order; ``wchs`` counts them."""

    @property
    def config(self) -> ServerConfig:
        """``conf``: tickTime, maxClientCnxns, session timeouts."""

    @property
    def client_port(self) -> int:
        """The bound client port (``conf`` prints the real one, even after ``--port 0``)."""

    @property
    def snap_dir(self) -> str:
        """Absolute snapshot directory (``<dataDir>/version-2``)."""

    @property
    def log_dir(self) -> str:
        """Absolute txn log directory (``<dataLogDir>/version-2``)."""

    @property
    def data_dir_size(self) -> int:
        """Bytes in snap_dir's files (``dirs``, ``conf``)."""

    @property
    def log_dir_size(self) -> int:
        """Bytes in log_dir's files."""

    @property
    def environment(self) -> Sequence[tuple[str, str]]:
        """``envi`` lines after ``zookeeper.version`` (see :func:`process_environment`)."""

    @property
    def trace_mask(self) -> int:
        """``gtmk``/``stmk`` (ZooTrace default 306 = 0x132)."""

    @property
    def digest_log(self) -> Sequence[tuple[int, int]]:
        """``hash``: recent (zxid, tree digest) pairs; empty when digests are not kept."""

    @property
    def quota_gauges(self) -> Sequence[tuple[str, int]]:
        """mntr's quota gauge-set lines (``<ns>_quota_count_limit_per_namespace`` ...), in
        ZooKeeper's order (:func:`trizk.storage.tree.quota.quota_gauges`); printed after the
        gauges."""

    @property
    def quota_counters(self) -> Sequence[tuple[str, int]]:
        """mntr's ``<ns>_quota_exceeded_error_per_namespace`` lines, printed after the counters."""

    @property
    def metrics(self) -> Mapping[str, int | float | str]:
        """Extra/overriding mntr values by name without ``zk_`` (``"fsynctime"`` summaries as
        ``"avg_fsynctime"`` etc.). Unlisted known metrics print ZooKeeper's idle value; names
        ZooKeeper 3.8.0 does not print in standalone mode are appended in mapping order."""

    @property
    def role_metrics(self) -> Sequence[tuple[str, str, int | float | str]]:
        """An ensemble member's gauges: (name, the gauge it follows in mntr, value)."""

    @property
    def proposal_sizes(self) -> tuple[int, int, int]:
        """The leader's proposal sizes last/min/max (``srvr``/``stat``)."""

    @property
    def server_metrics(self) -> ServerMetrics | None:
        """The server's ServerMetrics: the Prometheus provider reads its summaries'
        quantiles and summary sets (None: every summary idle)."""

    @property
    def now_ms(self) -> int:
        """The server's monotonic ms now (the time the summaries' windows are read at)."""


@dataclass
class SimpleView:
    """A plain :class:`FourLetterView` (tests, and a template for the server's own)."""

    config: ServerConfig
    client_port: int = 2181
    serving: bool = True
    read_only: bool = False
    server_state: str = "standalone"
    latency: LatencyStats = field(default_factory=LatencyStats)
    packets_received: int = 0
    packets_sent: int = 0
    outstanding_requests: int = 0
    last_zxid: int = 0
    node_count: int = 5
    watch_count: int = 0
    approximate_data_size: int = 44
    uptime_ms: int = 0
    connections: Sequence[ConnectionInfo] = ()
    sessions: Sequence[SessionInfo] = ()
    data_watches: Sequence[tuple[int, Sequence[str]]] = ()
    snap_dir: str = "/tmp/zookeeper/version-2"
    log_dir: str = "/tmp/zookeeper/version-2"
    data_dir_size: int = 0
    log_dir_size: int = 0
    environment: Sequence[tuple[str, str]] = ()
    trace_mask: int = 306
    digest_log: Sequence[tuple[int, int]] = ()
    quota_gauges: Sequence[tuple[str, int]] = ()
    quota_counters: Sequence[tuple[str, int]] = ()
    metrics: Mapping[str, int | float | str] = field(default_factory=dict)
    #: an ensemble member's role gauges: (name, the gauge it follows in mntr, value)
    role_metrics: Sequence[tuple[str, str, int | float | str]] = ()
    #: the leader's proposal sizes last/min/max (``BufferStats``; -1 before any proposal)
    proposal_sizes: tuple[int, int, int] = (-1, -1, -1)
    server_metrics: ServerMetrics | None = None
    now_ms: int = 0


# -- Java formatting helpers ----------------------------------------------------------------


def java_hex(n: int) -> str:
    """``Long.toHexString``: two's complement for negatives (``-1`` → ``ffffffffffffffff``)."""
    return format(n & 0xFFFF_FFFF_FFFF_FFFF, "x")


def java_double(x: float) -> str:
    """``Double.toString``: plain decimal with at least one fraction digit in [1e-3, 1e7),
    otherwise ``d.dddE<exp>``."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = format(Decimal(repr(x)), "f")
        return text if "." in text else text + ".0"
    sign, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits))
    e = exp + len(ds) - 1
    frac = ds[1:] or "0"
    return f"{'-' if sign else ''}{ds[0]}.{frac}E{e}"


def java_socket_address(host: str, port: int) -> str:
    """``InetSocketAddress.toString()`` of a resolved address: ``/127.0.0.1:50634``;
    IPv6 in Java's uncompressed form ``/[0:0:0:0:0:0:0:1]:2181``."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return f"{host}/:{port}"
    if ip.version == 6:
        groups = ":".join(format(int(g, 16), "x") for g in ip.exploded.split(":"))
        return f"/[{groups}]:{port}"
    return f"/{ip}:{port}"


def java_date(ms: int, tz: tzinfo | None = None) -> str:
    """``java.util.Date.toString()``: ``Sat Nov 21 09:50:26 UTC 2026`` in ``tz`` (default:
    the local zone, as the JVM's default time zone)."""
    dt = datetime.fromtimestamp(ms / 1000, tz) if tz else datetime.fromtimestamp(ms / 1000)
    dt = dt.astimezone(tz)
    return f"{dt:%a %b %d %H:%M:%S} {dt.tzname() or 'UTC'} {dt.year}"


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


def _server_stats(view: FourLetterView) -> str:
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


def _stat(view: FourLetterView, *, full: bool) -> str:
    # StatCommand: "stat" lists the clients (brief), "srvr" does not.
    out = f"Zookeeper version: {FULL_VERSION}\n"
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


def _cons(view: FourLetterView) -> str:
    return "".join(_connection_line(c, brief=False) + "\n" for c in view.connections) + "\n"


def _watches_by_path(view: FourLetterView) -> dict[str, list[int]]:
    by_path: dict[str, list[int]] = {}
    for sid, paths in view.data_watches:
        for p in paths:
            by_path.setdefault(p, []).append(sid)
    return by_path


def _wchs(view: FourLetterView) -> str:
    # WatchManager.toString() + println: watchers, distinct paths, total watches.
    watchers = sum(1 for _, paths in view.data_watches if paths)
    total = sum(len(paths) for _, paths in view.data_watches)
    return (
        f"{watchers} connections watching {len(_watches_by_path(view))} paths\n"
        f"Total watches:{total}\n"
    )


def _wchc(view: FourLetterView) -> str:
    out = ""
    for sid, paths in view.data_watches:
        if not paths:
            continue
        out += f"0x{java_hex(sid)}\n" + "".join(f"\t{p}\n" for p in paths)
    return out + "\n"


def _wchp(view: FourLetterView) -> str:
    out = ""
    for path, sids in _watches_by_path(view).items():
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


def _dump(view: FourLetterView, tz: tzinfo | None) -> str:
    out = "SessionTracker dump:\n"
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


def _conf(view: FourLetterView) -> str:
    # ZooKeeperServer.dumpConf; a quorum member adds QuorumZooKeeperServer.dumpConf's lines.
    cfg = view.config
    if cfg.is_quorum:
        return _standalone_conf(view).replace("serverId=0\n", f"serverId={cfg.my_id}\n") + (
            quorum_conf(cfg)
        )
    return _standalone_conf(view)


def _standalone_conf(view: FourLetterView) -> str:
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
        f"electionPort={me.election_addr.port}\n"
        f"quorumPort={me.addr.port}\n"
        f"peerType={int(config.peer_type)}\n"
        "membership: \n" + config.quorum.to_string()
    )


def _envi(view: FourLetterView) -> str:
    out = f"Environment:\nzookeeper.version={FULL_VERSION}\n"
    return out + "".join(f"{k}={v}\n" for k, v in view.environment)


def mntr_values(
    view: FourLetterView, *, provider_dump: bool = True
) -> list[tuple[str, int | float | str]]:
    """mntr's (name without ``zk_``, typed value) pairs in ZooKeeper's order: the 4lw prints
    them as ``zk_<name>\t<value>`` lines, the AdminServer's ``monitor`` as JSON members.

    With the Prometheus metrics provider configured (and ``provider_dump``), the pairs after
    ``version`` and ``server_state`` are that provider's samples (``PrometheusMetricsProvider
    .dump``), as in ZooKeeper; ``provider_dump=False`` always gives the default provider's."""
    if provider_dump and prometheus_configured(view.config):
        from trizk.server.ops import metrics  # metrics builds on this module

        settings = metrics.MetricsSettings.from_config(view.config)
        head: list[tuple[str, int | float | str]] = [
            ("version", FULL_VERSION),
            ("server_state", view.server_state),
        ]
        return head + list(metrics.dump_pairs(metrics.all_families(view, settings.export_jvm_info)))
    lat = view.latency
    values: dict[str, int | float | str] = dict(_MNTR_IDLE)
    values.update(
        {
            "version": FULL_VERSION,
            "server_state": view.server_state,
            "ephemerals_count": sum(len(s.ephemerals or ()) for s in view.sessions),
            "num_alive_connections": len(view.connections),
            "avg_latency": lat.avg,
            "min_latency": lat.shown_min,
            "max_latency": lat.max,
            "outstanding_requests": view.outstanding_requests,
            "znode_count": view.node_count,
            "global_sessions": len(view.sessions),
            "packets_sent": view.packets_sent,
            "packets_received": view.packets_received,
            "watch_count": view.watch_count,
            "approximate_data_size": view.approximate_data_size,
            "uptime": view.uptime_ms,
        }
    )
    values.update(view.metrics)
    names = list(_MNTR_ORDER)
    known = set(names)
    names += [k for k in view.metrics if k not in known]
    # DefaultMetricsProvider.dump: gauges, then gauge sets, then counters, then counter sets.
    extra = {_LAST_GAUGE: view.quota_gauges, _LAST_COUNTER: view.quota_counters}
    # An ensemble member's gauges sit among the others where ZooKeeper 3.8.0's gauge map puts
    # them (captured from a live leader and follower; the standalone names keep their order).
    after: dict[str, list[tuple[str, int | float | str]]] = {}
    for name, prev, value in view.role_metrics:
        after.setdefault(prev, []).append((name, value))
    out: list[tuple[str, int | float | str]] = []
    last = _MNTR_ORDER[-1]
    # the summary sets, kept by the server (namespaces, ack latency) or by a leader's role
    # (learner queues), come after every other line, in ZooKeeper's order of the sets
    sets = [(k, values[k]) for k in names if k not in known]
    for name in _MNTR_ORDER:
        out.append((name, values[name]))
        if name == last:
            sets[:0] = after.get(name, ())
        else:
            out.extend(after.get(name, ()))
        out.extend(extra.get(name, ()))
    sets.sort(key=lambda kv: _summary_set_rank(kv[0]))  # stable: keys keep their order
    return out + sets


#: ZooKeeper 3.8's summary sets in the order mntr prints them: its metrics provider keeps them
#: in a ConcurrentHashMap, iterated by hash bin of the set's name (qp_size 5, read 8, ack 9,
#: write 11, then qp_time_ms 11, registered after write). Seen on a live 3.8.0 leader.
SUMMARY_SET_ORDER = (
    "learner_handler_qp_size",
    "read_per_namespace",
    "ack_latency",
    "write_per_namespace",
    "learner_handler_qp_time_ms",
)


def _summary_set_rank(line: str) -> int:
    """Where a summary set's mntr line (``<stat>_<key>_<set>``) goes among the sets."""
    for i, name in enumerate(SUMMARY_SET_ORDER):
        if line.endswith("_" + name):
            return i
    return len(SUMMARY_SET_ORDER)


def prometheus_configured(config: ServerConfig) -> bool:
    """``metricsProvider.className`` names ZooKeeper's Prometheus provider."""
    return config.metrics_provider.get("className") == _PROMETHEUS


def last_mntr_name() -> str:
    """The last of mntr's own names: ZooKeeper's summary sets (the leader's
    ``learner_handler_qp`` ones) come after it."""
    return _MNTR_ORDER[-1]


def _mntr(view: FourLetterView) -> str:
    return "".join(f"zk_{name}\t{_metric_text(value)}\n" for name, value in mntr_values(view))


_NEEDS_SERVING = frozenset(
    {"conf", "cons", "crst", "dirs", "dump", "srst", "srvr", "stat", "wchc", "wchp", "wchs"}
    | {"mntr", "hash"}
)


def respond(word: str, view: FourLetterView, *, tz: tzinfo | None = None) -> bytes:
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


# -- process facts (impure helpers: call them from the server shell) ------------------------


def fd_gauges() -> dict[str, int]:
    """``open_file_descriptor_count`` / ``max_file_descriptor_count`` (the JVM's
    ``UnixOperatingSystemMXBean``: descriptors open, the soft ``RLIMIT_NOFILE``) of this
    process; Linux ``/proc``, absent elsewhere."""
    try:
        import resource  # POSIX only

        open_fds = len(os.listdir("/proc/self/fd"))
    except (ImportError, OSError):
        return {}
    return {
        "open_file_descriptor_count": open_fds,
        "max_file_descriptor_count": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    }


_JAVA_ARCH = {"x86_64": "amd64", "AMD64": "amd64", "i686": "x86", "i386": "x86", "arm64": "aarch64"}


def process_environment() -> list[tuple[str, str]]:
    """``envi``'s keys after ``zookeeper.version``, in ZooKeeper's order, filled from this
    Python process (``java.*`` keys describe the Python runtime; ``os.memory.*`` the process
    RSS and the machine's RAM). Reads the host, the clock-free process state and ``/proc``."""
    try:
        host = socket.getfqdn()
    except OSError:
        host = "localhost"
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * page
    except (OSError, ValueError, IndexError):
        rss = 0
    try:
        phys = os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):
        phys = 0
    mb = 1024 * 1024
    try:
        user = os.getlogin()
    except OSError:
        import getpass

        user = getpass.getuser()
    machine = platform.machine()
    return [
        ("host.name", host),
        ("java.version", platform.python_version()),
        ("java.vendor", platform.python_implementation()),
        ("java.home", sys.prefix),
        ("java.class.path", os.pathsep.join(p for p in sys.path if p)),
        ("java.library.path", os.environ.get("LD_LIBRARY_PATH", "")),
        ("java.io.tmpdir", tempfile.gettempdir()),
        ("java.compiler", "<NA>"),
        ("os.name", platform.system()),
        ("os.arch", _JAVA_ARCH.get(machine, machine)),
        ("os.version", platform.release()),
        ("user.name", user),
        ("user.home", os.path.expanduser("~")),
        ("user.dir", os.getcwd()),
        ("os.memory.free", f"{max(phys - rss, 0) // mb}MB" if phys else "0MB"),
        ("os.memory.max", f"{phys // mb}MB"),
        ("os.memory.total", f"{rss // mb}MB"),
    ]


# -- mntr key order (ZooKeeper 3.8.0 standalone; the metrics provider's HashMap order) -------

_MNTR_GAUGES: tuple[str, ...] = (
    "ephemerals_count",
    "num_alive_connections",
    "avg_latency",
    "outstanding_requests",
    "znode_count",
    "global_sessions",
    "non_mtls_remote_conn_count",
    "last_client_response_size",
    "packets_sent",
    "packets_received",
    "max_client_response_size",
    "connection_drop_probability",
    "watch_count",
    "auth_failed_count",
    "min_latency",
    "max_file_descriptor_count",
    "approximate_data_size",
    "open_file_descriptor_count",
    "local_sessions",
    "uptime",
    "max_latency",
    "outstanding_tls_handshake",
    "min_client_response_size",
    "non_mtls_local_conn_count",
    "proposal_count",
    "watch_bytes",
    "outstanding_changes_removed",
    "throttled_ops",
    "stale_requests_dropped",
    "large_requests_rejected",
    "insecure_admin_count",
    "connection_rejected",
    "cnxn_closed_without_zk_server_running",
    "sessionless_connections_expired",
    "looking_count",
    "dead_watchers_queued",
    "stale_requests",
    "connection_drop_count",
    "learner_proposal_received_count",
    "digest_mismatches_count",
    "dead_watchers_cleared",
    "response_packet_cache_hits",
    "bytes_received_count",
    "add_dead_watcher_stall_time",
    "request_throttle_wait_count",
    "requests_not_forwarded_to_commit_processor",
    "response_packet_cache_misses",
    "ensemble_auth_success",
    "prep_processor_request_queued",
    "learner_commit_received_count",
    "stale_replies",
    "connection_request_count",
    "response_bytes",
    "ensemble_auth_fail",
    "diff_count",
    "response_packet_get_children_cache_misses",
    "connection_revalidate_count",
    "quit_leading_due_to_disloyal_voter",
    "snap_count",
    "unrecoverable_error_count",
    "unsuccessful_handshake",
    "commit_count",
    "stale_sessions_expired",
    "response_packet_get_children_cache_hits",
    "sync_processor_request_queued",
    "outstanding_changes_queued",
    "request_commit_queued",
    "ensemble_auth_skip",
    "skip_learner_request_to_next_processor_count",
    "tls_handshake_exceeded",
    "revalidate_count",
)
_MNTR_SUMMARIES: tuple[tuple[str, bool], ...] = (
    ("socket_closing_time", False),
    ("proposal_process_time", False),
    ("leader_unavailable_time", False),
    ("node_created_watch_count", False),
    ("session_queues_drained", False),
    ("write_commit_proc_req_queued", False),
    ("connection_token_deficit", False),
    ("read_commit_proc_req_queued", False),
    ("node_deleted_watch_count", False),
    ("startup_txns_load_time", False),
    ("sync_processor_queue_size", False),
    ("follower_sync_time", False),
    ("prep_processor_queue_size", False),
    ("fsynctime", False),
    ("inflight_snap_count", False),
    ("reads_issued_from_session_queue", False),
    ("learner_request_processor_queue_size", False),
    ("snapshottime", False),
    ("unavailable_time", False),
    ("startup_txns_loaded", False),
    ("reads_after_write_in_session_queue", False),
    ("requests_in_session_queue", False),
    ("write_commit_proc_issued", False),
    ("prep_process_time", False),
    ("pending_session_queue_size", False),
    ("time_waiting_empty_pool_in_commit_processor_read_ms", False),
    ("commit_process_time", False),
    ("dbinittime", False),
    ("inflight_diff_count", False),
    ("netty_queued_buffer_capacity", False),
    ("election_time", False),
    ("commit_commit_proc_req_queued", False),
    ("sync_processor_batch_size", False),
    ("node_children_watch_count", False),
    ("write_batch_time_in_commit_processor", False),
    ("read_commit_proc_issued", False),
    ("concurrent_request_processing_in_commit_processor", False),
    ("observer_sync_time", False),
    ("node_changed_watch_count", False),
    ("sync_process_time", False),
    ("startup_snap_load_time", False),
    ("prep_processor_queue_time_ms", True),
    ("jvm_pause_time_ms", True),
    ("close_session_prep_time", True),
    ("read_commitproc_time_ms", True),
    ("updatelatency", True),
    ("local_write_committed_time_ms", True),
    ("request_throttle_queue_time_ms", True),
    ("readlatency", True),
    ("quorum_ack_latency", True),
    ("om_commit_process_time_ms", True),
    ("read_final_proc_time_ms", True),
    ("commit_propagation_latency", True),
    ("dead_watchers_cleaner_latency", True),
    ("write_final_proc_time_ms", True),
    ("proposal_ack_creation_latency", True),
    ("proposal_latency", True),
    ("om_proposal_process_time_ms", True),
    ("sync_processor_queue_and_flush_time_ms", True),
    ("propagation_latency", True),
    ("server_write_committed_time_ms", True),
    ("sync_processor_queue_time_ms", True),
    ("sync_processor_queue_flush_time_ms", True),
    ("write_commitproc_time_ms", True),
)

_PERCENTILES = ("p50", "p95", "p99", "p999")
_PROMETHEUS = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"
#: mntr's gauges and counters (names without ``zk_``) and summaries (name, has percentiles =
#: ``DetailLevel.ADVANCED``) in ZooKeeper's order; the Prometheus families are built from them.
MNTR_GAUGES_AND_COUNTERS = _MNTR_GAUGES
MNTR_SUMMARIES = _MNTR_SUMMARIES


def _summary_names() -> list[str]:
    names: list[str] = []
    for base, has_percentiles in _MNTR_SUMMARIES:
        names += [f"{s}_{base}" for s in ("avg", "min", "max", "cnt", "sum")]
        if has_percentiles:
            names += [f"{p}_{base}" for p in _PERCENTILES]
    return names


#: Where mntr's gauge sets and counter sets go (after the last gauge, the last counter).
_LAST_GAUGE = "non_mtls_local_conn_count"
_LAST_COUNTER = "revalidate_count"
_MNTR_ORDER: tuple[str, ...] = ("version", "server_state", *_MNTR_GAUGES, *_summary_names())

#: mntr values of an idle server: 0, except averages (0.0), the unset response sizes (-1)
#: and the drop probability (0.0).
_MNTR_IDLE: dict[str, int | float | str] = {
    name: 0.0 if name.startswith("avg_") else 0 for name in _MNTR_ORDER[2:]
}
_MNTR_IDLE.update(
    {
        "avg_latency": 0.0,
        "connection_drop_probability": 0.0,
        "last_client_response_size": -1,
        "max_client_response_size": -1,
        "min_client_response_size": -1,
    }
)
