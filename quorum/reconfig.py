"""The configuration a ``reconfig`` request asks for (ZooKeeper's ``PrepRequestProcessor``,
``OpCode.reconfig``), computed from the leader's last seen configuration.

Theory of operation
===================
A reconfig request (op 16, ``ReconfigRequest{joiningServers, leavingServers, newMembers,
curConfigId}``) is turned into the next configuration by the leader only, in this order; the
first check that fails answers the request with its error code:

1. ``reconfigEnabled=false`` → RECONFIGDISABLED; a standalone server → UNIMPLEMENTED
   ("reconfiguration currently not supported"): the caller's.
2. The last seen configuration is not the committed one (a reconfig is in flight) →
   RECONFIGINPROGRESS.
3. ``curConfigId`` is neither -1 nor the last seen version → BADVERSION.
4. The new membership:

   * **non-incremental** (``newMembers`` set): the text, commas read as newlines, is a
     Properties file of ``server.N``/``group``/``weight`` (and ``version``) keys
     (``parseDynamicConfig``): a bad key or server line → BADARGUMENTS; the participant and
     observer counts checks (an ``IllegalArgumentException`` there, not caught by ZooKeeper's
     prep: it answers MARSHALLINGERROR) → MARSHALLINGERROR.
   * **incremental** (``joiningServers``/``leavingServers``, comma separated): only from a
     majority configuration (hierarchical → BADARGUMENTS). Every leaving sid is removed
     (``Long.parseLong``: a bad one is a NumberFormatException → MARSHALLINGERROR); every
     joiner ``server.N=spec`` (exactly one ``=`` after splitting, else BADARGUMENTS) must
     parse with a quorum, an election and a client address (else BADARGUMENTS) and must not
     reuse another member's address (``checkAddressDuplicate``: BADARGUMENTS; loopback and
     wildcard addresses are not compared) and replaces member N.

   The result has the version of the request's zxid.
5. Fewer than 2 participants with ``standaloneEnabled=true``, fewer than 1 otherwise →
   BADARGUMENTS.
6. Then (the caller, with the leader's view of its learners): no synced quorum of the new
   configuration → NEWCONFIGNOQUORUM; no WRITE on ``/zookeeper/config`` (whose ACL is
   world:anyone READ: only a ``super`` user may) → NOAUTH.

The client sees only the code (the messages are ZooKeeper's log lines, kept for ours).
Nothing here has state; :func:`next_config` is a function of its inputs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass

from trizk.jute.codes import Code
from trizk.jute.javalang import parse_long
from trizk.quorum.verifier import (
    Address,
    QuorumConfigError,
    QuorumHierarchical,
    QuorumServer,
    QuorumVerifier,
    check_counts,
    parse_config_string,
    parse_server,
)

__all__ = ["LeaderConfigView", "ReconfigError", "ReconfigRequestView", "next_config"]


class ReconfigError(Exception):
    """A reconfig refused: ``code`` is the client's answer, ``message`` ZooKeeper's log."""

    def __init__(self, code: Code, message: str = "") -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ReconfigRequestView:
    """The fields of a ``ReconfigRequest`` (nullable strings as the wire may carry them)."""

    joining: str | None
    leaving: str | None
    new_members: str | None
    cur_config_id: int


@dataclass(frozen=True, slots=True)
class LeaderConfigView:
    """What a leader's prep needs to turn a reconfig into a txn: its last seen configuration,
    the version of its committed one, ``quorum_synced(qv)`` (``Leader.isQuorumSynced``: the
    leader, if a voter of ``qv``, and the voters of ``qv`` among its synced forwarding
    followers contain a quorum of ``qv``), and the member's settings."""

    last_seen: QuorumVerifier
    committed_version: int
    quorum_synced: Callable[[QuorumVerifier], bool]
    standalone_enabled: bool = True
    multi_address: bool = False


def _commons_split(text: str) -> list[str]:
    """``StringUtils.split(s, sep)`` of ZooKeeper's common utils: split on ``,``, trim each
    part, drop the empty ones."""
    return [p.strip() for p in text.split(",") if p.strip()]


def _counted(a: Address | None) -> bool:
    """``excludedSpecialAddresses``: wildcard and loopback addresses, and names that do not
    resolve, are not compared. Names are not resolved here: only IP literals count."""
    if a is None:
        return False
    try:
        ip = ipaddress.ip_address(a.host)
    except ValueError:
        return False
    return not (ip.is_unspecified or ip.is_loopback)


def _addresses(qs: QuorumServer) -> list[Address]:
    out = [a for a in qs.quorum_addrs if _counted(a)]
    if qs.client_addr is not None and _counted(qs.client_addr):
        out.append(qs.client_addr)
    return out + [a for a in qs.election_addrs if _counted(a)]


def _check_address_duplicate(qs: QuorumServer, other: QuorumServer) -> None:
    """``QuorumServer.checkAddressDuplicate``: no address of ``qs`` is one of ``other``'s
    (ZooKeeper 3.8.0 leaves loopback and wildcard addresses out: two joiners on 127.0.0.1
    with the same ports pass)."""
    theirs = set(_addresses(other))
    for a in _addresses(qs):
        if a in theirs:
            raise ReconfigError(
                Code.BADARGUMENTS, f"{a} of server.{qs.sid} conflicts {a} of server.{other.sid}"
            )


def _non_incremental(text: str, multi_address: bool) -> QuorumVerifier:
    try:
        return parse_config_string(
            text.replace(",", "\n"), multi_address=multi_address, check_members=False
        )
    except QuorumConfigError as e:
        raise ReconfigError(Code.BADARGUMENTS, str(e)) from None


def _incremental(
    last_seen: QuorumVerifier, joining: str | None, leaving: str | None, multi_address: bool
) -> list[QuorumServer]:
    if isinstance(last_seen, QuorumHierarchical):
        raise ReconfigError(
            Code.BADARGUMENTS,
            "Incremental reconfiguration requested but last configuration seen has a "
            "non-majority quorum system",
        )
    servers: dict[int, QuorumServer] = dict(last_seen.members)
    for text in _commons_split(leaving) if leaving is not None else ():
        sid = parse_long(text)
        if sid is None:
            raise ReconfigError(Code.MARSHALLINGERROR, f'For input string: "{text}"')
        servers.pop(sid, None)
    for joiner in _commons_split(joining) if joining is not None else ():
        parts = [p.strip() for p in joiner.split("=") if p.strip()]
        if len(parts) != 2:
            raise ReconfigError(Code.BADARGUMENTS, "Wrong format of server string")
        sid = parse_long(parts[0][parts[0].rfind(".") + 1 :])
        if sid is None:
            raise ReconfigError(Code.MARSHALLINGERROR, f'For input string: "{parts[0]}"')
        try:
            qs = parse_server(sid, parts[1], multi_address=multi_address)
        except QuorumConfigError:
            raise ReconfigError(Code.BADARGUMENTS, "Reconfiguration failed") from None
        if qs.client_addr is None:
            raise ReconfigError(
                Code.BADARGUMENTS,
                "Wrong format of server string - each server should have 3 ports specified",
            )
        for other in servers.values():
            if other.sid != qs.sid:
                _check_address_duplicate(qs, other)
        servers.pop(qs.sid, None)  # HashMap: remove, then put (the new entry goes last)
        servers[qs.sid] = qs
    return list(servers.values())


def next_config(
    last_seen: QuorumVerifier,
    committed_version: int,
    request: ReconfigRequestView,
    zxid: int,
    *,
    standalone_enabled: bool = True,
    multi_address: bool = False,
) -> QuorumVerifier:
    """Steps 2-5 of the module docstring: the configuration ``request`` asks for, at version
    ``zxid``, or :class:`ReconfigError`."""
    if last_seen.version != committed_version:
        raise ReconfigError(Code.RECONFIGINPROGRESS)
    cid = request.cur_config_id
    if cid != -1 and cid != last_seen.version:
        raise ReconfigError(
            Code.BADVERSION,
            f"Reconfiguration from version {cid} failed -- last seen version is "
            f"{last_seen.version}",
        )
    if request.new_members is not None:
        qv = _non_incremental(request.new_members, multi_address)
        # parseDynamicConfig's counts, with the server's standaloneEnabled: unchecked
        # IllegalArgumentExceptions in ZooKeeper's prep
        try:
            check_counts(qv, standalone_enabled=standalone_enabled)
        except QuorumConfigError as e:
            raise ReconfigError(Code.MARSHALLINGERROR, str(e)) from None
        qv = qv.with_version(zxid)
    else:
        qv = QuorumVerifier(
            _incremental(last_seen, request.joining, request.leaving, multi_address), zxid
        )
    voters = len(qv.voting_members)
    if standalone_enabled and voters < 2:
        raise ReconfigError(
            Code.BADARGUMENTS,
            "Reconfig failed - new configuration must include at least 2 followers",
        )
    if voters < 1:
        raise ReconfigError(
            Code.BADARGUMENTS,
            "Reconfig failed - new configuration must include at least 1 follower",
        )
    return qv
