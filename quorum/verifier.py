"""Quorum membership: ZooKeeper's ``QuorumPeer.QuorumServer`` and ``flexible.QuorumMaj``.

Theory of operation
===================
An ensemble is a set of members, each a :class:`QuorumServer`: a server id (``sid``, the
``myid``), a quorum address (the leader listens there for learners), an election address
(FastLeaderElection), a :class:`LearnerType` (participants vote, observers do not) and an
optional client address. :class:`QuorumVerifier` holds the members of one configuration and
its ``version`` (0 for a static zoo.cfg; dynamic reconfig, which trizk does not implement yet,
bumps it to the zxid of the reconfig).

``contains_quorum(sids)`` is QuorumMaj's test: more than half of the *voting* members. A
proposal is committed, an epoch decided and a leader elected only with such a set.
Invariant: any two sets for which ``contains_quorum`` holds share at least one voter.

With ``group.G=...``/``weight.S=...`` keys the verifier is a :class:`QuorumHierarchical`
(ZooKeeper's ``QuorumHierarchical``): a quorum is a weighted majority in a majority of the
groups; ``weight(sid)`` is the member's weight, and a participant of weight 0 never counts
for a quorum nor leads. Its config string adds the ``group.``/``weight.`` lines (see
:meth:`QuorumHierarchical.to_string`, checked against a live 3.8.0 ensemble).

The config string
-----------------
Members exchange their configuration as text: FastLeaderElection notifications (version 2)
carry ``QuorumVerifier.toString()`` in UTF-8, NEWLEADER's data is the same text, and
``/zookeeper/config`` holds it. :meth:`QuorumVerifier.to_string` reproduces
``QuorumMaj.toString`` byte for byte (checked against a live 3.8.0 ensemble, see
tests/quorum/test_quorum_config.py)::

    server.<sid>=<host>:<quorumPort>:<electionPort>:participant|observer[;<clientHost>:<clientPort>]\\n
    ...
    version=<Long.toHexString(version)>            (no trailing newline)

* Hosts are written as configured (``InetSocketAddress.getHostString``: a name stays a name,
  a literal stays a literal); a host containing ``:`` (IPv6) is put in brackets
  (``QuorumServer.delimitedHostString``).
* A client address written as a bare port has host ``0.0.0.0``. The client address a member
  got from its own ``clientPort`` (``isClientAddrFromStatic``) is *not* printed, so every
  member prints the same text for the same zoo.cfg server lines.
* Members are printed in the iteration order of QuorumMaj's ``HashMap<Long, QuorumServer>``:
  bin ``spread(Long.hashCode(sid)) & (capacity - 1)`` ascending, and within a bin (sids that
  differ by a multiple of the capacity, e.g. 1 and 17 with 16 bins) in insertion order. The
  insertion order is the iteration order of the ``java.util.Properties`` the text was loaded
  into, which on Java 9+ is a ``ConcurrentHashMap<String, ...>`` of *every* key of the file
  (:func:`java_properties_order`). So ``server.1, server.17, server.2`` is a legal order.

``/zookeeper/config`` (ZooKeeper 3.8.0, read with kazoo): on a quorum member its data is
``to_string()`` in UTF-8, with Stat czxid=mzxid=pzxid=0, ctime=0, mtime=the time the member
wrote it, version=-1 (``DataTree`` sets it with version -1), aversion=-1. On a standalone
server (with or without a single ``server.N`` line) it is empty: version=0, mtime=0.

Parsing (``QuorumServer(sid, String)``, ``QuorumMaj(Properties)``, ``parseDynamicConfig``)
-----------------------------------------------------------------------------------------
:func:`parse_server` reads one ``server.N`` value; :func:`parse_config_string` reads a whole
config string as ``QuorumPeer.configFromString`` does (what a peer sends). Any problem raises
:class:`QuorumConfigError` with ZooKeeper's text where it has one; no input makes them raise
anything else (strings from peers are untrusted). Java ``String.split`` semantics are kept
(trailing empty fields vanish: ``h:1:2:`` is ``h:1:2``).

Deliberate differences (stricter, never looser):

* Ports must be 0..65535 and integers (Java: IllegalArgumentException "port out of range",
  not a ConfigException, which a peer's notification would turn into a dead receiver thread).
* Negative sids and an empty host are rejected. Multiple addresses (``a:1:2|b:3:4``) are
  accepted only with ``multi_address`` (ZooKeeper's ``-Dzookeeper.multiAddress.enabled=true``
  system property), else rejected with ZooKeeper's text.
* ``contains_quorum`` counts only voting members of the set; QuorumMaj assumes its caller
  passed voters only and counts the whole set.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from trizk.jute.javalang import java_split, parse_int, parse_long
from trizk.storage.tree.javahash import java_string_hash

__all__ = [
    "WRONG_FORMAT",
    "Address",
    "LearnerType",
    "QuorumConfigError",
    "QuorumHierarchical",
    "QuorumServer",
    "QuorumVerifier",
    "java_hashmap_long_order",
    "java_properties_order",
    "parse_config_string",
    "parse_server",
]


#: Upper bound on a config string trizk parses (a peer's notification or NEWLEADER carries
#: one). ZooKeeper bounds it only by the packet size; 1 MiB is far beyond any ensemble.
MAX_CONFIG_STRING = 1 << 20
#: Upper bound on members in one config (ZooKeeper has none; sids are longs).
MAX_MEMBERS = 4096

#: ``QuorumServer.wrongFormat`` (the message follows the server line's value).
WRONG_FORMAT = (
    " does not have the form server_config or server_config;client_config"
    " where server_config is the pipe separated list of host:port:port or host:port:port:type"
    " and client_config is port or host:port"
)


class QuorumConfigError(ValueError):
    """A bad server line or config string (ZooKeeper's ``ConfigException`` and the
    ``IllegalArgumentException``s of ``parseDynamicConfig``). ``str()`` is the message."""


class LearnerType(enum.IntEnum):
    """``QuorumPeer.LearnerType``; the value is the Java ordinal (``conf`` prints it)."""

    PARTICIPANT = 0
    OBSERVER = 1

    @property
    def text(self) -> str:
        """As written in server lines and config strings."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Address:
    """An ``InetSocketAddress`` as configured: host as written (name or literal), port."""

    host: str
    port: int

    def delimited_host(self) -> str:
        """``QuorumServer.delimitedHostString``: IPv6 literals in brackets."""
        return f"[{self.host}]" if ":" in self.host else self.host

    def __str__(self) -> str:
        return f"{self.delimited_host()}:{self.port}"


@dataclass(frozen=True, slots=True)
class QuorumServer:
    """One member (``QuorumPeer.QuorumServer`` with a single address)."""

    sid: int
    addr: Address
    election_addr: Address
    type: LearnerType = LearnerType.PARTICIPANT
    client_addr: Address | None = None
    #: The client address came from this member's own ``clientPort``/``clientPortAddress``
    #: (``QuorumPeerConfig.setupClientPort``), not from its server line: not printed.
    client_addr_from_static: bool = False
    #: Further (quorum, election) address pairs of a multi-address member
    #: (``a:1:2|b:3:4``, ``zookeeper.multiAddress.enabled=true``), after ``addr`` and
    #: ``election_addr`` (the first pair written).
    more: tuple[tuple[Address, Address], ...] = ()

    @property
    def quorum_addrs(self) -> tuple[Address, ...]:
        """Every quorum address (``MultipleAddresses addr``), as written."""
        return (self.addr, *(q for q, _ in self.more))

    @property
    def election_addrs(self) -> tuple[Address, ...]:
        """Every election address (``MultipleAddresses electionAddr``), as written."""
        return (self.election_addr, *(e for _, e in self.more))

    @property
    def is_participant(self) -> bool:
        return self.type is LearnerType.PARTICIPANT

    @property
    def is_observer(self) -> bool:
        return self.type is LearnerType.OBSERVER

    def to_string(self) -> str:
        """``QuorumServer.toString``: ``host:qport:eport:type[;clientHost:clientPort]``; a
        multi-address member's pairs are joined by ``|``, the quorum and the election
        addresses each sorted by host string (Java's stable sort of its address sets; pairs
        on one host keep the order written, where Java's follows a hash set)."""
        qs = sorted(self.quorum_addrs, key=lambda a: a.host)
        es = sorted(self.election_addrs, key=lambda a: a.host)
        out = "|".join(
            f"{q.delimited_host()}:{q.port}:{e.port}" for q, e in zip(qs, es, strict=True)
        )
        out += ":" + self.type.text
        if self.client_addr is not None and not self.client_addr_from_static:
            out += ";" + str(self.client_addr)
        return out

    def addresses(self) -> list[tuple[str, Address]]:
        """(role, address) of every address this member listens on (for clash checks)."""
        out = [("quorum", a) for a in self.quorum_addrs]
        out += [("election", a) for a in self.election_addrs]
        if self.client_addr is not None:
            out.append(("client", self.client_addr))
        return out


# -- Java helpers ---------------------------------------------------------------------------


def _java_long_hash(n: int) -> int:
    """``Long.hashCode``: ``(int)(value ^ (value >>> 32))`` as an unsigned 32-bit value."""
    u = n & 0xFFFFFFFFFFFFFFFF
    return (u ^ (u >> 32)) & 0xFFFFFFFF


def java_hashmap_long_order(keys: Iterable[int], initial_capacity: int = 16) -> list[int]:
    """Iteration order of a ``java.util.HashMap<Long, V>`` after putting ``keys`` in order
    (a key put again keeps its place). Bins ascend; a bin keeps insertion order, and a resize
    (size > 0.75 x capacity) splits each bin keeping relative order. Known limit: a bin of
    more than 8 keys in a table of 64+ bins becomes a tree in Java (not reproduced)."""
    cap = 1
    while cap < initial_capacity:
        cap <<= 1
    bins: list[list[int]] = [[] for _ in range(cap)]
    seen: set[int] = set()
    spread: dict[int, int] = {}
    for k in keys:
        if k in seen:
            continue
        seen.add(k)
        h = _java_long_hash(k)
        h ^= h >> 16
        spread[k] = h
        bins[h & (cap - 1)].append(k)
        grow = len(bins[h & (cap - 1)]) > 8 and cap < 64  # treeifyBin resizes small tables
        if grow or len(seen) > cap * 3 // 4:
            new: list[list[int]] = [[] for _ in range(cap * 2)]
            for j, b in enumerate(bins):
                for x in b:
                    new[j + cap if spread[x] & cap else j].append(x)
            bins, cap = new, cap * 2
    return [k for b in bins for k in b]


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """Iteration order of a ``java.util.Properties`` (Java 9+: a ``ConcurrentHashMap`` created
    with capacity 8, i.e. 16 bins) after ``load`` put ``keys`` in order.

    ConcurrentHashMap (Java 17): ``spread(h) = (h ^ (h >>> 16)) & 0x7fffffff``; a new key goes
    to the tail of its bin; the table doubles when the size reaches 0.75 x capacity; the
    transfer walks each bin, keeps the tail run of nodes bound for the same half in order
    (``lastRun``) and *prepends* the nodes before it to their half, reversing them. Known
    limit: treeification (9+ keys in one bin) is not reproduced."""
    cap = 16
    bins: list[list[str]] = [[] for _ in range(cap)]
    seen: set[str] = set()
    hashes: dict[str, int] = {}
    for k in keys:
        if k in seen:
            continue  # put of an existing key replaces the value in place
        seen.add(k)
        h = java_string_hash(k)
        h = (h ^ (h >> 16)) & 0x7FFFFFFF
        hashes[k] = h
        bins[h & (cap - 1)].append(k)
        if len(seen) >= cap - (cap >> 2):
            new: list[list[str]] = [[] for _ in range(cap * 2)]
            for i in range(cap - 1, -1, -1):
                b = bins[i]
                if not b:
                    continue
                last_run = 0
                run_bit = hashes[b[0]] & cap
                for j in range(1, len(b)):
                    bit = hashes[b[j]] & cap
                    if bit != run_bit:
                        run_bit, last_run = bit, j
                lo: list[str] = []
                hi: list[str] = []
                (lo if run_bit == 0 else hi).extend(b[last_run:])
                for x in b[:last_run]:
                    (hi if hashes[x] & cap else lo).insert(0, x)
                new[i], new[i + cap] = lo, hi
            bins, cap = new, cap * 2
    return [k for b in bins for k in b]


# -- parsing --------------------------------------------------------------------------------


def _host_and_port(s: str) -> list[str]:
    """``ConfigUtils.getHostAndPort``: ``[v6]:a:b`` → ``[v6, a, b]``; else split on ``:``."""
    if s.startswith("["):
        i = s.find("]")
        if i < 0:
            raise QuorumConfigError(f"{s} starts with '[' but has no matching ']:'")
        if i + 2 == len(s):
            raise QuorumConfigError(f"{s} doesn't have a port after colon")
        if i + 2 < len(s):
            return [s[1:i], *java_split(s[i + 2 :], ":")]
        return [s.replace("[", "").replace("]", "")]
    return java_split(s, ":")


def _port(host: str, text: str) -> int:
    n = parse_int(text)  # Integer.parseInt
    if n is None:
        # QuorumServer: "Address unresolved: " + host + ":" + port (NumberFormatException);
        # for a client port the host it prints is the unset field ``hostname``: "null".
        raise QuorumConfigError(f"Address unresolved: {host}:{text}")
    if not 0 <= n <= 65535:
        # InetSocketAddress: IllegalArgumentException("port out of range:" + port).
        raise QuorumConfigError(f"port out of range:{n}")
    return n


def java_host_string(host: str) -> str:
    """``new InetSocketAddress(host, port).getHostString()``: a literal IP is replaced by
    Java's text for it (IPv6 uncompressed, groups without leading zeros:
    ``0:0:0:0:0:0:0:1``; an IPv4-mapped IPv6 literal becomes IPv4); ``""`` is the loopback
    address named ``localhost``; any other text (a name, resolvable or not) stays as written."""
    if host == "":
        return "localhost"
    if ":" in host and "%" not in host:
        try:
            a6 = ipaddress.IPv6Address(host)
        except ValueError:
            return host
        if a6.ipv4_mapped is not None:
            return str(a6.ipv4_mapped)
        return ":".join(format(int(g, 16), "x") for g in a6.exploded.split(":"))
    v4 = _java_ipv4_literal(host)
    return host if v4 is None else v4


def _java_ipv4_literal(host: str) -> str | None:
    """``IPAddressUtil.textToNumericFormatV4`` (Java 17): 1 to 4 dot-separated decimal parts
    (leading zeros are decimal), the last part filling the remaining bytes (``127.1`` is
    127.0.0.1, ``1`` is 0.0.0.1); at most 15 characters. ``None`` if it is not one."""
    if not 0 < len(host) <= 15:
        return None
    parts = host.split(".")
    if len(parts) > 4 or not all(p and p.isascii() and p.isdigit() for p in parts):
        return None
    values = [int(p) for p in parts]
    if any(v > 255 for v in values[:-1]):
        return None
    rest_bytes = 5 - len(parts)
    if values[-1] >= 1 << (8 * rest_bytes):
        return None
    octets = values[:-1] + list(values[-1].to_bytes(rest_bytes, "big"))
    return ".".join(str(o) for o in octets)


def parse_server(sid: int, value: str, *, multi_address: bool = False) -> QuorumServer:
    """``new QuorumServer(sid, value)``: ``host:qport:eport[:type][;[clientHost:]clientPort]``;
    with ``multi_address`` (``zookeeper.multiAddress.enabled``) the server part may be several
    ``host:qport:eport[:type]`` joined by ``|``.

    The checks run in ZooKeeper's order so the first problem reported is the same one."""
    server_client = java_split(value, ";")
    server_part = server_client[0] if server_client else ""
    client_addr: Address | None = None
    if len(server_client) == 2:
        client_parts = _host_and_port(server_client[1])
        if len(client_parts) > 2:
            raise QuorumConfigError(value + WRONG_FORMAT)
        client_host = client_parts[0] if len(client_parts) == 2 else "0.0.0.0"
        client_port = _port("null", client_parts[-1])
        client_addr = Address(java_host_string(client_host), client_port)
    server_addresses = java_split(server_part, "|")
    if len(server_addresses) > 1 and not multi_address:
        # ZooKeeper reads the -Dzookeeper.multiAddress.enabled system property here; the
        # zoo.cfg key multiAddress.enabled does not enable it (checked on ZooKeeper 3.8.0)
        raise QuorumConfigError(
            "Multiple address feature is disabled, but multiple addresses were specified "
            f"for sid {sid}"
        )
    pairs: list[tuple[Address, Address]] = []
    learner_type: LearnerType | None = None
    for server_address in server_addresses or [""]:
        parts = _host_and_port(server_address) if server_address else []
        if len(server_client) > 2 or len(parts) < 3 or len(parts) > 4:
            raise QuorumConfigError(value + WRONG_FORMAT)
        host = parts[0]
        qport = _port(host, parts[1])
        eport = _port(host, parts[2])
        if qport == eport:
            raise QuorumConfigError(
                "Client and election port must be different! Please update the "
                f"configuration file on server.{sid}"
            )
        if len(parts) == 4:
            t = parts[3].strip().lower()
            if t == "observer":
                this_type = LearnerType.OBSERVER
            elif t == "participant":
                this_type = LearnerType.PARTICIPANT
            else:
                raise QuorumConfigError(f"Unrecognised peertype: {parts[3]}")
            if learner_type is None:
                learner_type = this_type
            elif learner_type is not this_type:
                # Java prints its field (still PARTICIPANT) against the new type
                raise QuorumConfigError(
                    f"Multiple addresses should have similar roles: PARTICIPANT vs {this_type.name}"
                )
        host = java_host_string(host)
        pairs.append((Address(host, qport), Address(host, eport)))
    first_q, first_e = pairs[0]
    return QuorumServer(
        sid,
        first_q,
        first_e,
        learner_type or LearnerType.PARTICIPANT,
        client_addr,
        more=tuple(pairs[1:]),
    )


def _parse_sid(key: str) -> int:
    # QuorumMaj: Long.parseLong(key.substring(key.indexOf('.') + 1)); NumberFormatException.
    text = key[key.index(".") + 1 :]
    sid = parse_long(text)
    if sid is None:
        raise QuorumConfigError(f'For input string: "{text}"')
    if sid < 0:
        raise QuorumConfigError(f"{key}: a server id must not be negative")
    return sid


def _parse_suffix(key: str) -> int:
    # QuorumHierarchical: Long.parseLong(key.substring(key.indexOf('.') + 1)); a key without
    # a dot parses whole ("groups=..." -> For input string: "groups")
    return _parse_number(key[key.find(".") + 1 :])


def _parse_number(text: str) -> int:
    n = parse_long(text)
    if n is None:
        raise QuorumConfigError(f'For input string: "{text}"')
    return n


def _parse_version(text: str) -> int:
    # QuorumMaj: Long.parseLong(value, 16), a signed long; NumberFormatException.
    version = parse_long(text, 16)
    if version is None:
        raise QuorumConfigError(f'For input string: "{text}" under radix 16')
    return version


# -- the verifier ---------------------------------------------------------------------------


class QuorumVerifier:
    """``QuorumMaj``: the members of one configuration, in Java's printing order.

    Immutable by convention (no mutating methods). Build with :meth:`from_properties`,
    :func:`parse_config_string` or the constructor (members in insertion order)."""

    __slots__ = ("_members", "_observers", "_voters", "half", "version")

    def __init__(self, members: Iterable[QuorumServer], version: int = 0) -> None:
        given: dict[int, QuorumServer] = {}
        for m in members:
            given[m.sid] = m  # a later line for the same sid replaces it in place
        order = java_hashmap_long_order(given)
        self._members: dict[int, QuorumServer] = {sid: given[sid] for sid in order}
        self._voters = {s: m for s, m in self._members.items() if m.is_participant}
        self._observers = {s: m for s, m in self._members.items() if m.is_observer}
        #: ``QuorumMaj.half``: voters // 2; a quorum is any set of more than ``half`` voters.
        self.half = len(self._voters) // 2
        #: 0 for a static configuration.
        self.version = version

    @classmethod
    def from_properties(
        cls,
        entries: Sequence[tuple[str, str]],
        *,
        members: Mapping[int, QuorumServer] | None = None,
        multi_address: bool = False,
    ) -> QuorumVerifier:
        """``new QuorumMaj(properties)`` for ``entries`` (key, value) in file order: every key
        of the Properties counts for the iteration order, ``server.N`` keys make members,
        ``version`` sets the version. ``members`` replaces parsed members by sid (a member
        whose client address was filled in from its own ``clientPort``)."""
        last: dict[str, str] = {}
        for k, v in entries:
            last[k] = v
        servers: list[QuorumServer] = []
        version = 0
        groups: list[tuple[int, list[int]]] = []
        weights: list[tuple[int, int]] = []
        for key in java_properties_order(k for k, _ in entries):
            value = last[key]
            if key.startswith("server."):
                sid = _parse_sid(key)
                server = parse_server(sid, value, multi_address=multi_address)
                if members is not None and sid in members:
                    server = members[sid]
                servers.append(server)
            elif key.startswith("group"):
                # QuorumHierarchical.parse: Long.parseLong after the dot, sids split on ":"
                gid = _parse_suffix(key)
                groups.append((gid, [_parse_number(part) for part in java_split(value, ":")]))
            elif key.startswith("weight"):
                weights.append((_parse_suffix(key), _parse_number(value)))
            elif key == "version":
                version = _parse_version(value)
        if groups or weights or any(k.startswith(("group", "weight")) for k in last):
            return QuorumHierarchical(servers, groups, weights, version)
        return cls(servers, version)

    # -- QuorumVerifier API --------------------------------------------------------------

    @property
    def members(self) -> Mapping[int, QuorumServer]:
        """``getAllMembers``: participants and observers, in Java's iteration order."""
        return self._members

    @property
    def voting_members(self) -> Mapping[int, QuorumServer]:
        """``getVotingMembers``: the participants."""
        return self._voters

    @property
    def observing_members(self) -> Mapping[int, QuorumServer]:
        """``getObservingMembers``."""
        return self._observers

    def __contains__(self, sid: object) -> bool:
        return sid in self._members

    def __iter__(self) -> Iterator[QuorumServer]:
        return iter(self._members.values())

    def __len__(self) -> int:
        return len(self._members)

    def get(self, sid: int) -> QuorumServer | None:
        return self._members.get(sid)

    def weight(self, sid: int) -> int:
        """``QuorumMaj.getWeight``: 1."""
        return 1

    def contains_quorum(self, sids: Iterable[int]) -> bool:
        """More than half of the voting members are in ``sids`` (non-voters are ignored)."""
        return len({s for s in sids if s in self._voters}) > self.half

    def to_string(self) -> str:
        """``QuorumMaj.toString``, byte for byte (see the module docstring)."""
        lines = [f"server.{m.sid}={m.to_string()}\n" for m in self._members.values()]
        return "".join(lines) + "version=" + format(self.version & 0xFFFFFFFFFFFFFFFF, "x")

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"QuorumVerifier({list(self._members.values())!r}, version={self.version})"

    def __eq__(self, other: object) -> bool:
        """Same members (by sid) and same version. See :meth:`java_equals` for Java's."""
        if not isinstance(other, QuorumVerifier):
            return NotImplemented
        return (
            type(self) is type(other)
            and self.version == other.version
            and self._members == other._members
        )

    __hash__ = None  # type: ignore[assignment]  # QuorumMaj.hashCode is "not designed"

    def with_version(self, version: int) -> QuorumVerifier:
        """This configuration at another version: ``configFromString(toString())`` then
        ``setVersion`` (``Leader.lead``), so a member whose client address came from its own
        ``clientPort`` loses it as in ZooKeeper."""
        text = self.to_string()
        body = text[: text.rfind("version=")]
        return QuorumVerifier.from_properties(
            _config_string_entries(body + "version=" + format(version & 0xFFFFFFFFFFFFFFFF, "x")),
            multi_address=any(m.more for m in self._members.values()),
        )

    def java_equals(self, other: QuorumVerifier) -> bool:
        """``QuorumMaj.equals``: equal versions, *or* the same members (FastLeaderElection and
        processReconfig compare configs this way)."""
        return other.version == self.version or self._members == other._members

    def same_members(self, other: QuorumVerifier) -> bool:
        """Member-by-member equality, ignoring the version (what a restart compares)."""
        return self._members == other._members


class QuorumHierarchical(QuorumVerifier):
    """``flexible.QuorumHierarchical``: voters split into disjoint weighted groups.

    A set is a quorum when, in more than half of the groups of non-zero weight, its members
    carry more than half of the group's weight (integer halves, as Java's ``long``
    arithmetic). Built from ``group.G=s1:s2:...`` and ``weight.S=w`` keys (a participant
    without a weight has weight 1). Invariant (checked by property tests): two quorums share
    a member of non-zero weight. A participant of weight 0 still votes in elections and acks
    proposals, but counts for no quorum and never leads (``totalOrderPredicate``).

    Java's own checks, with its texts: every participant must be in a group ("Server 3is not
    in a group"), no sid in two groups ("Server 3is in multiple groups"). Stricter: a group
    member that has no weight and is not a participant (an observer in a group without a
    ``weight.`` line: a NullPointerException in Java) and a negative weight are refused.
    ``contains_quorum`` counts only participants (Java's leader filters its ack sets to the
    voting members before asking, ``SyncedLearnerTracker.addAck``)."""

    __slots__ = ("_group_weight", "_groups", "_weights", "num_groups")

    def __init__(
        self,
        members: Iterable[QuorumServer],
        groups: Sequence[tuple[int, Sequence[int]]],
        weights: Sequence[tuple[int, int]],
        version: int = 0,
    ) -> None:
        super().__init__(members, version)
        server_group: dict[int, int] = {}
        for gid, sids in groups:
            for sid in sids:
                if sid in server_group:
                    raise QuorumConfigError(f"Server {sid}is in multiple groups")
                server_group[sid] = gid
        server_weight: dict[int, int] = {}
        for sid, w in weights:
            if w < 0:
                raise QuorumConfigError(f"weight.{sid}={w}: a weight must not be negative")
            server_weight[sid] = w
        for m in self._members.values():
            if m.is_participant:
                if m.sid not in server_group:
                    raise QuorumConfigError(f"Server {m.sid}is not in a group")
                server_weight.setdefault(m.sid, 1)
        #: sid -> gid and sid -> weight, each in its Java HashMap's iteration order
        self._groups = {sid: server_group[sid] for sid in java_hashmap_long_order(server_group)}
        self._weights = {sid: server_weight[sid] for sid in java_hashmap_long_order(server_weight)}
        group_weight: dict[int, int] = {}
        for sid, gid in self._groups.items():
            if sid not in self._weights:
                raise QuorumConfigError(
                    f"server {sid} of group.{gid} has no weight (it is not a participant)"
                )
            group_weight[gid] = group_weight.get(gid, 0) + self._weights[sid]
        self._group_weight = group_weight
        #: ``numGroups``: the ``group.`` keys, less the groups of weight 0
        self.num_groups = len(groups) - sum(1 for w in group_weight.values() if w == 0)

    @property
    def groups(self) -> Mapping[int, int]:
        """sid -> group id (``serverGroup``), in Java's iteration order."""
        return self._groups

    @property
    def weights(self) -> Mapping[int, int]:
        """sid -> weight (``serverWeight``), in Java's iteration order."""
        return self._weights

    def weight(self, sid: int) -> int:
        """``getWeight``; 0 for a sid without one (Java: a NullPointerException)."""
        return self._weights.get(sid, 0)

    def contains_quorum(self, sids: Iterable[int]) -> bool:
        """``QuorumHierarchical.containsQuorum`` over the participants among ``sids``."""
        expansion: dict[int, int] = {}
        for sid in set(sids):
            gid = self._groups.get(sid)
            if gid is None or sid not in self._voters:
                continue
            expansion[gid] = expansion.get(gid, 0) + self._weights[sid]
        majorities = sum(1 for g, w in expansion.items() if w > self._group_weight[g] // 2)
        return majorities > self.num_groups // 2

    def to_string(self) -> str:
        """``QuorumHierarchical.toString``: server lines, then ``group.G=s1:s2`` (groups and
        their sids in HashMap order), ``weight.S=w``, then ``version=<hex>``."""
        out = [f"server.{m.sid}={m.to_string()}\n" for m in self._members.values()]
        by_group: dict[int, list[int]] = {}
        for sid, gid in self._groups.items():
            by_group.setdefault(gid, []).append(sid)
        for gid in java_hashmap_long_order(by_group):
            out.append(f"group.{gid}={':'.join(str(s) for s in by_group[gid])}\n")
        out += [f"weight.{sid}={w}\n" for sid, w in self._weights.items()]
        return "".join(out) + "version=" + format(self.version & 0xFFFFFFFFFFFFFFFF, "x")

    def __repr__(self) -> str:
        return (
            f"QuorumHierarchical({list(self._members.values())!r}, groups={self._groups!r}, "
            f"weights={self._weights!r}, version={self.version})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuorumVerifier):
            return NotImplemented
        return (
            isinstance(other, QuorumHierarchical)
            and self.version == other.version
            and self._same(other)
        )

    __hash__ = None

    def _same(self, other: QuorumHierarchical) -> bool:
        return (
            self._members == other._members
            and self._groups == other._groups
            and self._weights == other._weights
        )

    def java_equals(self, other: QuorumVerifier) -> bool:
        """``QuorumHierarchical.equals``: equal versions, or the same members, groups and
        weights (a QuorumMaj is never equal to it)."""
        if not isinstance(other, QuorumHierarchical):
            return False
        return other.version == self.version or self._same(other)

    def same_members(self, other: QuorumVerifier) -> bool:
        return isinstance(other, QuorumHierarchical) and self._same(other)


def parse_config_string(
    text: str,
    *,
    standalone_enabled: bool = True,
    multi_address: bool = False,
    check_members: bool = True,
) -> QuorumVerifier:
    """``QuorumPeer.configFromString``: a peer's config string → a :class:`QuorumVerifier`.

    Properties grammar, only ``server.N`` and ``version`` keys (``parseDynamicConfig`` with
    ``configBackwardCompatibilityMode=false``), then its participant/observer counts checks
    (unless ``check_members`` is false).
    Raises only :class:`QuorumConfigError`, whatever ``text`` holds."""
    if len(text) > MAX_CONFIG_STRING:
        raise QuorumConfigError(f"config string of {len(text)} characters is too long")
    entries = _config_string_entries(text)
    # parseDynamicConfig checks the keys in the Properties' iteration order.
    for key in java_properties_order(k for k, _ in entries):
        if not key.startswith(("server.", "group", "weight")) and key != "version":
            raise QuorumConfigError(f"Unrecognised parameter: {key}")
    if sum(1 for k, _ in entries if k.startswith("server.")) > MAX_MEMBERS:
        raise QuorumConfigError(f"more than {MAX_MEMBERS} members")
    qv = QuorumVerifier.from_properties(entries, multi_address=multi_address)
    if check_members:
        check_counts(qv, standalone_enabled=standalone_enabled)
    return qv


def check_counts(qv: QuorumVerifier, *, standalone_enabled: bool) -> None:
    """``parseDynamicConfig``'s checks on the numbers of participants and observers."""
    voters, observers = len(qv.voting_members), len(qv.observing_members)
    if voters == 0:
        if not standalone_enabled:
            raise QuorumConfigError(
                "standaloneEnabled = false then number of participants should be >0"
            )
        if observers > 0:
            raise QuorumConfigError("Observers w/o participants is an invalid configuration")
    elif voters == 1 and standalone_enabled and observers > 0:
        raise QuorumConfigError("Observers w/o quorum is an invalid configuration")


_BLANKS = " \t\f"


def _config_string_entries(text: str) -> list[tuple[str, str]]:
    """``Properties.load`` for a config string: ``#``/``!`` comment lines and blank lines are
    skipped; the key ends at the first ``=``, ``:`` or blank; blanks, at most one ``=``/``:``
    and blanks separate it from the value. The value keeps its trailing blanks (QuorumMaj
    does not trim: ``h:1:2 `` has the port ``"2 "``). Escapes and continuation lines never
    occur in what ``toString`` writes; a backslash is kept as written."""
    out: list[tuple[str, str]] = []
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(_BLANKS)
        if not line or line[0] in "#!":
            continue
        i = 0
        while i < len(line) and line[i] not in "=:" and line[i] not in _BLANKS:
            i += 1
        key, rest = line[:i], line[i:].lstrip(_BLANKS)
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(_BLANKS)
        out.append((key, rest))
    return out
