"""Quorum SASL: members authenticating each other on the election and quorum ports, as
ZooKeeper 3.8/3.9 do it (``org.apache.zookeeper.server.quorum.auth``). Pure: sans-IO exchanges
(bytes in, bytes out); Kerberos is reached through the GSS-API protocols of
:mod:`trizk.server.auth.sasl`, which the shell fills (:mod:`trizk.server.shell.kerberos`).

Theory
------
Settings (zoo.cfg keys, ``QuorumPeerConfig``): ``quorum.auth.enableSasl`` (false),
``quorum.auth.learnerRequireSasl`` (false), ``quorum.auth.serverRequireSasl`` (false),
``quorum.auth.learner.saslLoginContext`` (``QuorumLearner``),
``quorum.auth.server.saslLoginContext`` (``QuorumServer``),
``quorum.auth.kerberos.servicePrincipal`` (``zkquorum/localhost``; ``_HOST`` stands for the
host of the peer's server line), ``quorum.cnxn.threads.size`` (20; only larger values count).
A require flag without ``enableSasl``, or ``serverRequireSasl`` without
``learnerRequireSasl``, is a configuration error (:meth:`QuorumAuthSettings.check`).

Without ``enableSasl`` nothing is exchanged (``NullQuorumAuthServer/Learner``). With it every
member is both:

* a *learner* (``SaslQuorumAuthLearner``) on every connection it opens: on the election port
  right after its initial message (whichever sid wins the connection, and only towards voters:
  ``getVotingView().get(sid)``), on the quorum port before FOLLOWERINFO. Unless
  ``learnerRequireSasl`` it sends nothing at all (it does not try a server that could answer).
* a *server* (``SaslQuorumAuthServer``) on every connection it accepts: on the election port
  after reading the initial message, on the quorum port before the first packet. It peeks at
  the next 8 bytes: not the magic number (a learner that does not authenticate) is refused
  under ``serverRequireSasl`` ("Learner not trying to authenticate and authentication is
  required") and let through otherwise -- the rolling enablement ZooKeeper documents: first
  ``enableSasl=true`` everywhere, then ``learnerRequireSasl=true``, then ``serverRequireSasl=true``,
  one member at a time. A failed exchange is refused under ``serverRequireSasl`` and let
  through (after warnings) otherwise.

The exchange (``zookeeper.jute`` ``QuorumAuthPacket{long magic; int status; buffer token}``,
:class:`~trizk.jute.records.QuorumAuthPacket`; magic ``-0xa0dbcafecafe1234L`` as Java computes
it: ``0x5f2435013501edcc``; status 0 IN_PROGRESS, 1 SUCCESS, -1 ERROR)::

    learner: IN_PROGRESS(initial response: empty for DIGEST-MD5, the GSS token for GSSAPI)
    server:  IN_PROGRESS(challenge)    ... while its SaslServer is not complete (5 rounds at most)
    learner: IN_PROGRESS(response)
    server:  SUCCESS(last challenge)   -- complete; or ERROR(empty) on a failure
    learner: evaluates the SUCCESS token (DIGEST-MD5's rspauth), must be complete

SASL as ``SecurityUtils`` sets it up: DIGEST-MD5 (protocol ``zookeeper-quorum``, server name
and realm ``zk-quorum-sasl-md5``) when the section has no Kerberos login: the server's users are
the ``user_NAME="pw"`` options of its ``QuorumServer`` section, the learner's ``username`` and
``password`` those of ``QuorumLearner`` (its authorization id is its user name); GSSAPI when the
section logs in with ``Krb5LoginModule``: the server accepts for its own principal, the learner
asks a ticket for the service principal (its realm the learner's unless given, the host
``_HOST``-substituted) and sends its own principal as authorization id.

Authorization (``SaslQuorumServerCallbackHandler.handleAuthorizeCallback`` as fixed for
CVE-2023-44981, ZOOKEEPER-4753, which Debian's 3.8.0 carries and 3.9 has): the authorization
id must equal the authentication id; under Kerberos (a section that is not DigestLoginModule
only) it must have three parts, ``service/host@REALM``, whose host is one of the ensemble's
server lines.

Deviation: ZooKeeper's server, after 5 rounds without completing, sends ERROR and lets the
connection through; trizk refuses it (no SASL mechanism here needs more than three rounds).
"""

from __future__ import annotations

import enum
import hashlib
import logging
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from trizk.jute.records import QuorumAuthPacket
from trizk.server.auth.sasl import (
    DIGEST_LOGIN_MODULE,
    KRB5_LOGIN_MODULE,
    DigestMD5Server,
    GssAcceptor,
    GssapiServer,
    GssError,
    JaasError,
    KerberosLogin,
    KerberosName,
    SaslError,
    SaslServerConfig,
    parse_directives,
    parse_jaas,
)

log = logging.getLogger("trizk.quorum.auth")

#: ``QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER`` = ``-0xa0dbcafecafe1234L`` (a negative literal
#: negated: positive, whatever its comment says)
MAGIC = -(0xA0DBCAFECAFE1234 - (1 << 64))
PROTOCOL = "zookeeper-quorum"
SERVER_NAME = "zk-quorum-sasl-md5"
DEFAULT_SERVICE_PRINCIPAL = "zkquorum/localhost"
LEARNER_CONTEXT = "QuorumLearner"
SERVER_CONTEXT = "QuorumServer"
#: ``QuorumPeer.QUORUM_CNXN_THREADS_SIZE_DEFAULT_VALUE``
CNXN_THREADS_DEFAULT = 20
#: ``SaslQuorumAuthServer.MAX_RETRIES``
MAX_RETRIES = 5
#: a token longer than this is refused (jute.maxbuffer's default, as BinaryInputArchive)
MAX_TOKEN = 0xFFFFF
_HEADER = struct.Struct(">qii")

ENABLE_SASL = "quorum.auth.enableSasl"
SERVER_REQUIRE = "quorum.auth.serverRequireSasl"
LEARNER_REQUIRE = "quorum.auth.learnerRequireSasl"


class Status(enum.IntEnum):
    IN_PROGRESS = 0
    SUCCESS = 1
    ERROR = -1


# ------------------------------------------------------------------ settings


@dataclass(frozen=True, slots=True)
class QuorumAuthSettings:
    """The ``quorum.auth.*`` keys of zoo.cfg (``QuorumPeerConfig``)."""

    enabled: bool = False
    server_required: bool = False
    learner_required: bool = False
    learner_context: str = LEARNER_CONTEXT
    server_context: str = SERVER_CONTEXT
    service_principal: str = DEFAULT_SERVICE_PRINCIPAL
    #: ``quorum.cnxn.threads.size``: election handshakes in progress at once
    cnxn_threads: int = CNXN_THREADS_DEFAULT

    def check(self) -> str | None:
        """``QuorumPeerConfig.parseProperties``' checks: the message of the first broken one."""
        if not self.enabled and self.server_required:
            return f"{ENABLE_SASL} is disabled, so cannot enable {SERVER_REQUIRE}"
        if not self.enabled and self.learner_required:
            return f"{ENABLE_SASL} is disabled, so cannot enable {LEARNER_REQUIRE}"
        if not self.learner_required and self.server_required:
            return f"{LEARNER_REQUIRE} is disabled, so cannot enable {SERVER_REQUIRE}"
        return None


def threads_size(value: int) -> int:
    """``QuorumPeer.setQuorumCnxnThreadsSize``: only a value above the default counts."""
    return value if value > CNXN_THREADS_DEFAULT else CNXN_THREADS_DEFAULT


def server_principal(config: str, hostname: str) -> str:
    """``SecurityUtils.getServerPrincipal``: ``service/_HOST`` → ``service/<hostname lowered>``
    (only that exact two-part form; ``service/_HOST@REALM`` stays as written)."""
    parts = config.split("/")
    if len(parts) != 2 or parts[1] != "_HOST":
        return config
    return f"{parts[0]}/{hostname.lower()}"


# ------------------------------------------------------------------ logins (JAAS)


class GssInitiator(Protocol):
    """One initiating GSS-API context (Kerberos v5) towards a service, built by the shell."""

    def step(self, token: bytes | None) -> bytes | None:
        """``initSecContext``: the output token, if any; raises GssError."""
        ...

    @property
    def established(self) -> bool: ...

    def wrap(self, data: bytes) -> bytes: ...

    def unwrap(self, data: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class QuorumServerLogin:
    """The ``QuorumServer`` section: DIGEST-MD5 users, or a Kerberos acceptor."""

    users: Mapping[str, str] = field(default_factory=dict)
    kerberos: KerberosLogin | None = None
    #: a new acceptor for the section's principal (the shell sets it after logging in)
    acceptor: Callable[[], GssAcceptor] | None = None
    #: the host of every server line (``QuorumPeer.initialize``: ``qs.hostname``)
    authz_hosts: frozenset[str] = frozenset()
    #: every login module of the section is DigestLoginModule (``isDigestAuthn``)
    digest_only: bool = True


@dataclass(frozen=True, slots=True)
class QuorumLearnerLogin:
    """The ``QuorumLearner`` section: a DIGEST-MD5 user, or a Kerberos principal's keytab."""

    username: str | None = None
    password: str | None = None
    kerberos: KerberosLogin | None = None
    #: a new initiator for a service ``(service, host)`` (set by the shell after logging in)
    initiator: Callable[[str, str], GssInitiator] | None = None
    #: ``zookeeper.server.realm``: the service's realm when the principal names none
    server_realm: str | None = None


def logins_from_jaas(
    text: str,
    settings: QuorumAuthSettings,
    path: str,
    authz_hosts: frozenset[str],
    *,
    server_realm: str | None = None,
) -> tuple[QuorumServerLogin, QuorumLearnerLogin]:
    """Both sections of the JAAS file (``SaslQuorumAuthServer`` / ``SaslQuorumAuthLearner``
    constructors); JaasError (one line, the member does not start) for a missing section, a
    login module trizk cannot run, or a learner without its user name and password."""
    try:
        sections = parse_jaas(text)
    except JaasError as e:
        raise JaasError(f"cannot read the JAAS configuration '{path}': {e}") from None
    found = {}
    for name in (settings.server_context, settings.learner_context):
        modules = sections.get(name)
        if not modules:
            raise JaasError(
                "Failed to initialize authentication mechanism using SASL: SASL-authentication "
                f"failed because the specified JAAS configuration section '{name}' could not be "
                f"found (in '{path}')."
            )
        for m in modules:
            if m.name not in (DIGEST_LOGIN_MODULE, KRB5_LOGIN_MODULE):
                raise JaasError(
                    f"JAAS section '{name}': login module {m.name} is not supported "
                    f"(trizk runs {DIGEST_LOGIN_MODULE} and {KRB5_LOGIN_MODULE})"
                )
        found[name] = modules
    users: dict[str, str] = {}
    server_krb: KerberosLogin | None = None
    digest_only = True
    for m in found[settings.server_context]:
        if m.name == KRB5_LOGIN_MODULE:
            digest_only = False
            server_krb = server_krb or KerberosLogin.from_options(
                settings.server_context, m.options
            )
        if m.name == DIGEST_LOGIN_MODULE:
            for k, v in m.options.items():
                if k.startswith("user_"):
                    users[k[len("user_") :]] = v
    server = QuorumServerLogin(
        users=users,
        kerberos=server_krb,
        authz_hosts=authz_hosts,
        digest_only=digest_only,
    )
    learner_krb: KerberosLogin | None = None
    username = password = None
    for m in found[settings.learner_context]:
        if m.name == KRB5_LOGIN_MODULE:
            learner_krb = learner_krb or KerberosLogin.from_options(
                settings.learner_context, m.options
            )
        else:
            username = m.options.get("username", username)
            password = m.options.get("password", password)
    if learner_krb is None and (username is None or password is None):
        raise JaasError(
            f"JAAS section '{settings.learner_context}': {DIGEST_LOGIN_MODULE} needs the "
            "username and password options of the member's quorum user"
        )
    learner = QuorumLearnerLogin(
        username=username, password=password, kerberos=learner_krb, server_realm=server_realm
    )
    return server, learner


# ------------------------------------------------------------------ packets


class AuthWireError(Exception):
    """Bytes that cannot be a QuorumAuthPacket."""


def encode_packet(status: Status, token: bytes | None) -> bytes:
    """``QuorumAuth.createPacket`` written as Jute."""
    return QuorumAuthPacket(MAGIC, int(status), token).encode()


class PacketReader:
    """A byte buffer read as QuorumAuthPackets (each ``deserialize`` of the Java side)."""

    def __init__(self, data: bytes = b"") -> None:
        self.buf = bytearray(data)

    def feed(self, data: bytes) -> None:
        self.buf += data

    def peek_magic(self) -> bool | None:
        """``QuorumAuth.nextPacketIsAuth``: None until 8 bytes are there."""
        if len(self.buf) < 8:
            return None
        return struct.unpack_from(">q", self.buf)[0] == MAGIC

    def next(self) -> QuorumAuthPacket | None:
        """The next whole packet (None: more bytes needed), or AuthWireError."""
        if len(self.buf) < _HEADER.size:
            return None
        _, _, n = _HEADER.unpack_from(self.buf)
        size = _HEADER.size + max(n, 0)
        if n < -1 or n > MAX_TOKEN:
            raise AuthWireError(f"Unreasonable length = {n}")
        if len(self.buf) < size:
            return None
        pkt = QuorumAuthPacket.decode(bytes(self.buf[:size]))
        del self.buf[:size]
        return pkt

    def rest(self) -> bytes:
        out = bytes(self.buf)
        self.buf.clear()
        return out


# ------------------------------------------------------------------ authorization


def _java_split(text: str) -> list[str]:
    """``String.split("[/@]")``: trailing empty strings dropped."""
    parts = re.split("[/@]", text)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def authorize(login: QuorumServerLogin, authentication_id: str, authorization_id: str) -> bool:
    """``SaslQuorumServerCallbackHandler.handleAuthorizeCallback``."""
    ok = authentication_id == authorization_id
    if ok and not login.digest_only:
        parts = _java_split(authorization_id)
        ok = len(parts) == 3 and parts[1] in login.authz_hosts
        if not ok:
            log.error(
                "SASL authorization completed, %s is not authorized to connect", authorization_id
            )
    if ok:
        log.info(
            "Successfully authenticated learner: authenticationID=%s;  authorizationID=%s.",
            authentication_id,
            authorization_id,
        )
    return ok


# ------------------------------------------------------------------ SASL clients


def _md5_hex(data: bytes) -> bytes:
    return hashlib.md5(data).hexdigest().encode("ascii")


class DigestMD5Client:
    """A learner's DIGEST-MD5 (the JDK's ``DigestMD5Client``; authorization id = user name,
    as ``SecurityUtils.createSaslClient`` passes it)."""

    def __init__(self, username: str, password: str, cnonce: str) -> None:
        self.username = username
        self.password = password
        self.cnonce = cnonce
        self.uri = f"{PROTOCOL}/{SERVER_NAME}"
        self.step = 0
        self._rspauth = b""

    @property
    def complete(self) -> bool:
        return self.step == 2

    def initial(self) -> bytes | None:
        """DIGEST-MD5 has no initial response: the learner sends an empty token."""
        return b""

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self.step == 0:
            self.step = 1
            return self._respond(challenge)
        if self.step == 1:
            d = parse_directives(challenge)
            if d.get("rspauth", b"").lower() != self._rspauth:
                raise SaslError("DIGEST-MD5: Server's rspauth value does not match")
            self.step = 2
            return None
        raise SaslError("DIGEST-MD5 authentication already complete")

    def _respond(self, challenge: bytes) -> bytes:
        d = parse_directives(challenge)
        nonce_b = d.get("nonce")
        if nonce_b is None:
            raise SaslError("DIGEST-MD5: digest challenge format violation: nonce missing")
        if d.get("algorithm", b"").lower() != b"md5-sess":
            raise SaslError("DIGEST-MD5: digest challenge format violation: algorithm md5-sess")
        qops = [q.strip().lower() for q in d.get("qop", b"auth").split(b",")]
        if b"auth" not in qops:
            raise SaslError("DIGEST-MD5: No common protection layer between client and server")
        utf8 = d.get("charset", b"").lower() == b"utf-8"
        enc = "utf-8" if utf8 else "latin-1"
        realm = d.get("realm", b"").decode(enc)
        nonce = nonce_b.decode(enc)
        user, authzid = self.username, self.username
        a1 = hashlib.md5(
            f"{user}:{realm}:{self.password}".encode(enc)
        ).digest() + f":{nonce}:{self.cnonce}:{authzid}".encode(enc)
        ha1 = _md5_hex(a1)
        tail = f":{nonce}:00000001:{self.cnonce}:auth:".encode(enc)
        response = _md5_hex(ha1 + tail + _md5_hex(b"AUTHENTICATE:" + self.uri.encode(enc)))
        self._rspauth = _md5_hex(ha1 + tail + _md5_hex(b":" + self.uri.encode(enc)))
        parts = [
            *(["charset=utf-8"] if utf8 else []),
            f'username="{_quote(user)}"',
            *([f'realm="{_quote(realm)}"'] if realm else []),
            f'nonce="{_quote(nonce)}"',
            "nc=00000001",
            f'cnonce="{self.cnonce}"',
            f'digest-uri="{self.uri}"',
            "maxbuf=65536",
            f"response={response.decode()}",
            "qop=auth",
            f'authzid="{_quote(authzid)}"',
        ]
        return ",".join(parts).encode(enc)


def _quote(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


#: RFC 4752's "no security layer"
_LAYER_NONE = 0x01


class GssapiClient:
    """A learner's GSSAPI (the JDK's ``GssKrb5Client``: no mutual authentication asked, no
    security layer chosen, its principal sent as authorization id)."""

    def __init__(self, initiator: GssInitiator, authzid: str) -> None:
        self.initiator = initiator
        self.authzid = authzid
        self.final = False
        self.done = False

    @property
    def complete(self) -> bool:
        return self.done

    def initial(self) -> bytes | None:
        return self._context(None)

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self.done:
            raise SaslError("GSSAPI authentication already complete")
        if not self.final:
            return self._context(challenge)
        try:
            offer = self.initiator.unwrap(challenge)
        except GssError as e:
            raise SaslError(f"Final handshake failed [Caused by GSSException: {e}]") from None
        if len(offer) != 4:
            raise SaslError(f"Invalid security layer offer of length {len(offer)}")
        if not offer[0] & _LAYER_NONE:
            raise SaslError("No common protection layer between client and server")
        choice = bytes([_LAYER_NONE, 0, 0, 0]) + self.authzid.encode("utf-8")
        try:
            out = self.initiator.wrap(choice)
        except GssError as e:
            raise SaslError(f"Final handshake failed [Caused by GSSException: {e}]") from None
        self.done = True
        return out

    def _context(self, token: bytes | None) -> bytes | None:
        try:
            out = self.initiator.step(token)
        except GssError as e:
            raise SaslError(f"GSS initiate failed [Caused by GSSException: {e}]") from None
        if self.initiator.established:
            self.final = True
            return out if out is not None else b""
        return out


class _SaslClient(Protocol):
    @property
    def complete(self) -> bool: ...

    def initial(self) -> bytes | None: ...

    def evaluate(self, challenge: bytes) -> bytes | None: ...


class _SaslServer(Protocol):
    @property
    def complete(self) -> bool: ...

    def evaluate(self, response: bytes) -> bytes | None: ...


# ------------------------------------------------------------------ the exchanges


class Verdict(enum.Enum):
    #: the exchange succeeded, or failed where nothing is required: the connection goes on
    PASS = "pass"
    #: the connection is refused (closed)
    REFUSE = "refuse"


@dataclass(slots=True)
class AuthOut:
    """What one step of an exchange asks of the shell: bytes to send, and once it ends, the
    verdict, why (a refusal's one log line), and the bytes read past the exchange."""

    send: bytes = b""
    verdict: Verdict | None = None
    reason: str = ""
    rest: bytes = b""
    #: the peer's authenticated id (a server's PASS after a completed exchange)
    peer: str | None = None


class QuorumAuthServer:
    """``SaslQuorumAuthServer.authenticate`` for one accepted connection (sans-IO).

    ``data_received`` with what the peer sent after its initial message (election port) or
    from the start (quorum port); ``connection_lost`` when it closes or the read times out."""

    def __init__(
        self, login: QuorumServerLogin, required: bool, nonce: str, addr: str = ""
    ) -> None:
        self.login = login
        self.required = required
        self.nonce = nonce
        self.addr = addr
        self.reader = PacketReader()
        self.sasl: _SaslServer | None = None
        self.tries = 0
        self.done = False
        #: ``dout != null`` in Java: a failure is answered with ERROR once a packet was read
        self._answering = False

    def _new_sasl(self) -> _SaslServer:
        login = self.login
        if login.kerberos is not None:
            if login.acceptor is None:
                raise SaslError("no Kerberos acceptor: the QuorumServer login did not complete")
            cfg = SaslServerConfig(users={}, kerberos=login.kerberos, acceptor=login.acceptor)
            return GssapiServer(
                cfg, login.acceptor(), authorize=lambda a, b: authorize(login, a, b)
            )
        cfg = SaslServerConfig(users=login.users)
        return DigestMD5Server(
            cfg,
            self.nonce,
            protocol=PROTOCOL,
            server_name=SERVER_NAME,
            authorize=lambda a, b: authorize(login, a, b),
        )

    def data_received(self, data: bytes) -> AuthOut:
        if self.done:
            raise RuntimeError("the exchange is over")
        self.reader.feed(data)
        out = AuthOut()
        try:
            if self.sasl is None and not self._answering:
                first = self.reader.peek_magic()
                if first is None:
                    return out
                if not first:
                    if self.required:
                        return self._fail(
                            out,
                            "Learner not trying to authenticate and authentication is required",
                        )
                    return self._end(out, Verdict.PASS)
            while (pkt := self.reader.next()) is not None:
                self._answering = True
                if self.sasl is None:
                    self.sasl = self._new_sasl()
                challenge = self.sasl.evaluate(pkt.token or b"")
                if self.sasl.complete:
                    out.send += encode_packet(Status.SUCCESS, challenge)
                    log.info(
                        "Successfully completed the authentication using SASL. learner addr: %s",
                        self.addr,
                    )
                    return self._end(out, Verdict.PASS)
                self.tries += 1
                if self.tries > MAX_RETRIES:
                    out.send += encode_packet(Status.ERROR, challenge)
                    log.warning(
                        "Failed to authenticate using SASL, server addr: %s, retries=%d exceeded.",
                        self.addr,
                        self.tries,
                    )
                    return self._end(out, Verdict.REFUSE, f"retries={self.tries} exceeded")
                # SaslQuorumAuthServer.send: a null challenge goes as IN_PROGRESS
                out.send += encode_packet(Status.IN_PROGRESS, challenge)
        except (SaslError, AuthWireError, ValueError) as e:
            return self._fail(out, str(e) or type(e).__name__)
        return out

    def connection_lost(self, why: str = "EOF") -> AuthOut:
        """The peer closed (or went silent) before the exchange ended: Java's EOFException."""
        if self.done:
            return AuthOut()
        return self._fail(AuthOut(), why)

    def _fail(self, out: AuthOut, reason: str) -> AuthOut:
        if self._answering:
            out.send += encode_packet(Status.ERROR, b"")
        if self.required:
            return self._end(out, Verdict.REFUSE, f"Failed to authenticate using SASL: {reason}")
        log.warning("Failed to authenticate using SASL: %s", reason)
        log.warning(
            "Maintaining learner connection despite SASL authentication failure. "
            "server addr: %s, %s: %s",
            self.addr,
            SERVER_REQUIRE,
            "false",
        )
        return self._end(out, Verdict.PASS)

    def _end(self, out: AuthOut, verdict: Verdict, reason: str = "") -> AuthOut:
        self.done = True
        out.verdict, out.reason = verdict, reason
        out.rest = self.reader.rest()
        sasl = self.sasl
        if verdict is Verdict.PASS and sasl is not None and sasl.complete:
            out.peer = getattr(sasl, "authorization_id", None)
        return out


class QuorumAuthLearner:
    """``SaslQuorumAuthLearner.authenticate`` for one connection this member opened (sans-IO):
    :meth:`start` gives the first packet (None: nothing to do, the learner does not require
    SASL), then :meth:`data_received` until a verdict."""

    def __init__(
        self,
        login: QuorumLearnerLogin,
        required: bool,
        service_principal: str,
        hostname: str,
        cnonce: str,
        addr: str = "",
    ) -> None:
        self.login = login
        self.required = required
        self.principal = server_principal(service_principal, hostname)
        self.cnonce = cnonce
        self.addr = addr
        self.reader = PacketReader()
        self.sasl: _SaslClient | None = None
        self.done = False

    def _new_sasl(self) -> _SaslClient:
        login = self.login
        if login.kerberos is None:
            assert login.username is not None and login.password is not None
            log.info("QuorumLearner will use DIGEST-MD5 as SASL mechanism.")
            return DigestMD5Client(login.username, login.password, self.cnonce)
        if login.initiator is None:
            raise SaslError("no Kerberos initiator: the QuorumLearner login did not complete")
        client = KerberosName.parse(login.kerberos.principal)
        principal = self.principal
        if "@" not in principal:
            principal += "@" + (login.server_realm or client.realm or "")
        service = KerberosName.parse(principal)
        log.info("QuorumLearner will use GSSAPI as SASL mechanism.")
        return GssapiClient(
            login.initiator(service.service, service.host or ""), login.kerberos.principal
        )

    def start(self) -> AuthOut:
        """The first packet; a verdict at once when nothing is to be exchanged or it fails."""
        if not self.required:
            log.debug("Skipping SASL authentication as %s=false", LEARNER_REQUIRE)
            self.done = True
            return AuthOut(verdict=Verdict.PASS)
        try:
            self.sasl = self._new_sasl()
            token = self.sasl.initial()
        except (SaslError, ValueError) as e:
            return self._fail(str(e))
        return AuthOut(send=encode_packet(Status.IN_PROGRESS, token))

    def data_received(self, data: bytes) -> AuthOut:
        if self.done:
            raise RuntimeError("the exchange is over")
        self.reader.feed(data)
        out = AuthOut()
        sasl = self.sasl
        assert sasl is not None, "start() first"
        try:
            while (pkt := self.reader.next()) is not None:
                status = pkt.status
                if status not in (Status.IN_PROGRESS, Status.SUCCESS, Status.ERROR):
                    log.error("Unknown status:%d!", status)
                    status = Status.ERROR
                while not sasl.complete:
                    if status == Status.SUCCESS:
                        if self._evaluate(pkt.token) is not None:
                            raise SaslError(
                                "Protocol error: attempting to send response after completion"
                            )
                        if not sasl.complete:
                            raise SaslError("the server said SUCCESS before the exchange ended")
                    elif status == Status.IN_PROGRESS:
                        out.send += encode_packet(Status.IN_PROGRESS, self._evaluate(pkt.token))
                        break
                    else:
                        raise SaslError(f"Authentication failed against server addr: {self.addr}")
                else:
                    # checkAuthStatus
                    if status != Status.SUCCESS:
                        raise SaslError(
                            f"Authentication failed against server addr: {self.addr}, "
                            f"qpStatus: {Status(status).name}"
                        )
                    log.info(
                        "Successfully completed the authentication using SASL. "
                        "server addr: %s, status: SUCCESS",
                        self.addr,
                    )
                    self.done = True
                    out.verdict = Verdict.PASS
                    out.rest = self.reader.rest()
                    return out
        except (SaslError, AuthWireError, ValueError) as e:
            failed = self._fail(str(e))
            failed.send = out.send
            return failed
        return out

    def _evaluate(self, token: bytes | None) -> bytes | None:
        if token is None:
            raise SaslError(
                "Error in authenticating with a Zookeeper Quorum member: the quorum member's "
                "saslToken is null."
            )
        assert self.sasl is not None
        return self.sasl.evaluate(token)

    def connection_lost(self, why: str = "EOF") -> AuthOut:
        if self.done:
            return AuthOut()
        return self._fail(f"the server closed the connection during SASL authentication ({why})")

    def _fail(self, reason: str) -> AuthOut:
        self.done = True
        return AuthOut(verdict=Verdict.REFUSE, reason=reason)
