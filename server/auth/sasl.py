"""SASL for clients: DIGEST-MD5 (RFC 2831), GSSAPI (Kerberos, RFC 4752) and the JAAS file
ZooKeeper reads. Pure (the Kerberos library itself is reached through :class:`GssAcceptor`,
which the shell builds: :mod:`trizk.server.shell.kerberos`).

Theory
------
ZooKeeper 3.8 authenticates clients with SASL when the JVM has a JAAS configuration
(``-Djava.security.auth.login.config=FILE``) with a ``Server`` section (the name comes from
``zookeeper.sasl.serverconfig``). Its ``DigestLoginModule`` options ``user_NAME="password"``
are the users (``SaslServerCallbackHandler``); ``super``'s password may instead come from
``zookeeper.SASLAuthenticationProvider.superPassword``. Every connection then gets its own SASL
server (``ZooKeeperSaslServer``: mechanism DIGEST-MD5, protocol ``zookeeper``, server name and
realm ``zk-sasl-md5``). Without such a section a connection has none, and a SASL packet is
answered OK with a null token (ZooKeeper catches the NullPointerException).

The packets (``ZooKeeperServer.processSasl``, answered at once, outside the request pipeline,
with zxid 0): request ``RequestHeader(xid, 102)`` + ``GetSASLRequest{token}``; reply
``ReplyHeader(xid, 0, 0)`` + ``SetSASLResponse{token}``. On a SASL failure the reply is
``ReplyHeader(xid, 0, AUTHFAILED)`` + ``SetSASLResponse{null}`` and the connection closes
(unless ``zookeeper.allowSaslFailedClients``: then OK with a null token). When the exchange
completes, the connection gains ``sasl:<authorization id>`` (plus ``super`` for a
``zookeeper.superUser``).

DIGEST-MD5 as the JDK's ``DigestMD5Server`` runs it (the state machine of :class:`DigestMD5Server`):

1. ``STEP_CHALLENGE``: the client's first token must be empty; the answer is the challenge
   ``realm="zk-sasl-md5",nonce="<40 chars>",charset=utf-8,algorithm=md5-sess``.
2. ``STEP_RESPONSE``: the digest-response is checked (charset, realm, nonce, nc=00000001, qop,
   digest-uri ``zookeeper/zk-sasl-md5``, the user's password, the response hash); the answer
   is ``rspauth=<hex>`` and the exchange is complete. The authorization id is the username
   (``SaslServerCallbackHandler`` authorizes every authenticated user as its short name).
3. ``DONE`` / ``FAILED``: any further token is an error.

GSSAPI (``SecurityUtils.createSaslServer``): when the ``Server`` section's login gave the
subject a principal (``com.sun.security.auth.module.Krb5LoginModule`` with ``principal``,
``keyTab``, ``useKeyTab=true``, ``storeKey=true``), every connection gets a GSSAPI SASL server
for that principal (``zookeeper/host@REALM``: service ``zookeeper``, host ``host``) instead of
DIGEST-MD5. The exchange, as the JDK's ``GssKrb5Server`` runs it (:class:`GssapiServer`):

1. context tokens go to the GSS acceptor until the context is established; the acceptor's
   output (the AP-REP of mutual authentication, which pure-sasl asks for) is the answer;
2. the client then sends an empty token; the answer is the wrapped security-layer offer
   (sent at once in answer to the context token when the acceptor had nothing to send:
   no mutual authentication, as ZooKeeper's Java client runs it)
   ``[0x01 (auth only), 0x01 0x00 0x00 (65536, the JDK's receive buffer)]``;
3. the client's wrapped choice ``[layer, 3-byte max buffer, authorization id...]`` must pick
   the offered layer; the answer is a null token and the exchange is complete.

The authorized id (``SaslServerCallbackHandler.handleAuthorizeCallback``) is derived from the
*authentication* id (the client's principal) as ``KerberosName`` does: the short name
(``auth_to_local`` rule ``DEFAULT``: the first component when the realm is the default realm),
then ``/host`` unless ``zookeeper.kerberos.removeHostFromPrincipal=true``, then ``@REALM``
unless ``zookeeper.kerberos.removeRealmFromPrincipal=true``. When no rule applies (another
realm) ZooKeeper logs "Failed to set name based on Kerberos authentication rules." and the
authorization id the client sent (by default its principal) stays.

Strings are hashed as the JDK does: ISO-8859-1 unless the client said ``charset=utf-8`` and a
string has characters beyond U+00FF (then UTF-8).
"""

from __future__ import annotations

import enum
import hashlib
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)

DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
PROTOCOL = "zookeeper"
SERVER_NAME = "zk-sasl-md5"


class SaslError(Exception):
    """A failed SASL exchange (ZooKeeper: ``SaslException``)."""


class JaasError(ValueError):
    """An unreadable JAAS configuration (ZooKeeper refuses to start)."""


# ------------------------------------------------------------------ JAAS configuration


@dataclass(frozen=True, slots=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


_FLAGS = ("required", "requisite", "sufficient", "optional")


def _tokens(text: str) -> list[tuple[str, str]]:
    """StreamTokenizer as ``ConfigFile`` sets it up: words, ``"quoted"`` strings, single
    characters; ``//`` and ``/* */`` comments skipped."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise JaasError("unterminated /* comment")
            i = j + 2
        elif c == '"':
            j = i + 1
            buf: list[str] = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                    buf.append({"n": "\n", "t": "\t", "r": "\r"}.get(text[j], text[j]))
                else:
                    buf.append(text[j])
                j += 1
            if j >= n:
                raise JaasError("unterminated quoted string")
            out.append(("str", "".join(buf)))
            i = j + 1
        elif c.isalnum() or c in "$_-*.":
            j = i
            while j < n and (text[j].isalnum() or text[j] in "$_-*."):
                j += 1
            out.append(("word", text[i:j]))
            i = j
        else:
            out.append(("char", c))
            i += 1
    return out


def parse_jaas(text: str) -> dict[str, list[LoginModule]]:
    """Parse a JAAS login configuration: ``Name { Module Flag key=value ...; ... };``."""
    toks = _tokens(text)
    pos = 0

    def take(kind: str | None = None, value: str | None = None) -> str:
        nonlocal pos
        if pos >= len(toks):
            raise JaasError(f"expected {value or kind}, found end of file")
        k, v = toks[pos]
        if (kind is not None and k != kind) or (value is not None and v != value):
            raise JaasError(f"expected {value or kind}, found {v!r}")
        pos += 1
        return v

    sections: dict[str, list[LoginModule]] = {}
    while pos < len(toks):
        name = take("word")
        take("char", "{")
        modules: list[LoginModule] = []
        while not (pos < len(toks) and toks[pos] == ("char", "}")):
            module = take("word")
            flag = take("word")
            if flag.lower() not in _FLAGS:
                raise JaasError(f"invalid control flag {flag!r} for {module}")
            options: dict[str, str] = {}
            while not (pos < len(toks) and toks[pos] == ("char", ";")):
                key = take("word")
                take("char", "=")
                if pos >= len(toks) or toks[pos][0] not in ("str", "word"):
                    raise JaasError(f"expected a value for option {key!r}")
                options[key] = toks[pos][1]
                pos += 1
            take("char", ";")
            modules.append(LoginModule(module, flag.lower(), options))
        take("char", "}")
        take("char", ";")
        sections.setdefault(name, []).extend(modules)
    return sections


# ------------------------------------------------------------------ Kerberos


@dataclass(frozen=True, slots=True)
class KerberosLogin:
    """The ``Krb5LoginModule`` options of the ``Server`` section that trizk uses."""

    #: ``principal``: the service principal, ``zookeeper/host@REALM``
    principal: str
    #: ``keyTab``: the keytab holding its keys (``useKeyTab=true``)
    key_tab: str | None = None
    use_key_tab: bool = False
    store_key: bool = False

    @classmethod
    def from_options(cls, section: str, options: Mapping[str, str]) -> KerberosLogin:
        principal = options.get("principal")
        if not principal:
            # Krb5LoginModule would prompt for a name: a server has no one to ask
            raise JaasError(
                f"JAAS section '{section}': {KRB5_LOGIN_MODULE} needs a principal option"
            )
        use_key_tab = options.get("useKeyTab", "").lower() == "true"
        if not use_key_tab:
            raise JaasError(
                f"JAAS section '{section}': {KRB5_LOGIN_MODULE} without useKeyTab=true would "
                "prompt for a password: a server logs in from its keyTab"
            )
        return cls(
            principal=principal,
            key_tab=options.get("keyTab"),
            use_key_tab=use_key_tab,
            store_key=options.get("storeKey", "").lower() == "true",
        )

    def service_and_host(self) -> tuple[str, str]:
        """``SecurityUtils.createSaslServer``: ``service/host@REALM`` → (service, host)."""
        service, slash, rest = self.principal.partition("/")
        host = rest.partition("@")[0]
        if not slash or not host:
            raise JaasError(
                f"server principal name/hostname determination error: {self.principal!r} "
                "is not service/host@REALM"
            )
        return service, host


_KERBEROS_NAME = re.compile(r"([^/@]+)(?:/([^/@]+))?(?:@([^/@]+))?\Z")


@dataclass(frozen=True, slots=True)
class KerberosName:
    """``org.apache.zookeeper.server.auth.KerberosName``: ``service[/host][@realm]``."""

    service: str
    host: str | None
    realm: str | None

    @classmethod
    def parse(cls, name: str) -> KerberosName:
        m = _KERBEROS_NAME.match(name)
        if m is None:
            if "@" in name:
                raise ValueError(f"Malformed Kerberos name: {name}")
            return cls(name, None, None)
        return cls(m.group(1), m.group(2), m.group(3))

    def short_name(self, default_realm: str | None) -> str | None:
        """``getShortName`` under the rule ``DEFAULT`` (``zookeeper.security.auth_to_local``'s
        default): None when no rule applies (ZooKeeper's ``NoMatchingRule``)."""
        if self.host is None and self.realm is None:
            return self.service
        if default_realm is not None and self.realm == default_realm:
            return self.service
        return None


def kerberos_authorized_id(
    authentication_id: str,
    authorization_id: str,
    default_realm: str | None,
    *,
    remove_host: bool = False,
    remove_realm: bool = False,
) -> str:
    """``SaslServerCallbackHandler.handleAuthorizeCallback``: the id a GSSAPI client gets."""
    log.info(
        "Successfully authenticated client: authenticationID=%s;  authorizationID=%s.",
        authentication_id,
        authorization_id,
    )
    try:
        name = KerberosName.parse(authentication_id)
    except ValueError as e:
        log.error("Failed to set name based on Kerberos authentication rules. %s", e)
        return authorization_id
    short = name.short_name(default_realm)
    if short is None:
        log.error(
            "Failed to set name based on Kerberos authentication rules. No rules applied to %s",
            authentication_id,
        )
        return authorization_id
    out = short
    if not remove_host and name.host is not None:
        out += "/" + name.host
    if not remove_realm and name.realm is not None:
        out += "@" + name.realm
    log.info("Setting authorizedID: %s", out)
    return out


class GssError(Exception):
    """A failed GSS-API call (the acceptor's library error, as text)."""


class GssAcceptor(Protocol):
    """One accepting GSS-API security context (Kerberos v5), built by the shell."""

    def step(self, token: bytes) -> bytes | None:
        """``gss_accept_sec_context``: the output token, if any; raises GssError."""
        ...

    @property
    def established(self) -> bool: ...

    def initiator(self) -> str:
        """The client's principal (``getSrcName``), once established."""
        ...

    def wrap(self, data: bytes) -> bytes:
        """``gss_wrap`` without confidentiality."""
        ...

    def unwrap(self, data: bytes) -> bytes: ...


#: RFC 4752 security layers; ZooKeeper's server offers no protection (``javax.security.sasl.qop``
#: unset: "auth")
LAYER_NONE = 0x01
#: the JDK's ``javax.security.sasl.maxbuffer`` default
GSSAPI_MAX_BUFFER = 65536


class GssapiServer:
    """One connection's SASL GSSAPI exchange (server side), as ``GssKrb5Server`` runs it."""

    def __init__(
        self,
        config: SaslServerConfig,
        acceptor: GssAcceptor,
        authorize: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.config = config
        self.acceptor = acceptor
        #: the AuthorizeCallback of another handler (quorum SASL: (authentication id,
        #: authorization id) -> authorized); None: a client's, :func:`kerberos_authorized_id`
        self.authorize = authorize
        self.stage = 0
        self.failed = False
        self.peer: str | None = None
        self.authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self.authorization_id is not None

    def evaluate(self, response: bytes) -> bytes | None:
        """``SaslServer.evaluateResponse``: the next token (None: none), or SaslError."""
        if self.complete:
            raise SaslError("SASL authentication already complete")
        if self.failed:
            raise SaslError("SASL authentication failed")
        try:
            if self.stage == 0:
                return self._context(response)
            if self.stage == 1:
                return self._offer(response)
            self._choice(response)
            return None  # complete: no token to send
        except SaslError:
            self.failed = True
            raise

    def _context(self, token: bytes) -> bytes | None:
        try:
            out = self.acceptor.step(token)
        except GssError as e:
            raise SaslError(f"GSS initiate failed [Caused by GSSException: {e}]") from None
        if self.acceptor.established:
            self.peer = self.acceptor.initiator()
            self.stage = 1
            if out is None:
                # no mutual authentication (the Java client asks for none): the context is
                # done without a token back, so the security-layer offer goes at once
                return self._offer(b"")
        return out

    def _offer(self, token: bytes) -> bytes:
        if token:
            raise SaslError("Handshake expecting no response data from server")
        offer = bytes([LAYER_NONE]) + GSSAPI_MAX_BUFFER.to_bytes(3, "big")
        try:
            wrapped = self.acceptor.wrap(offer)
        except GssError as e:
            raise SaslError(f"Problem wrapping handshake1 [Caused by GSSException: {e}]") from None
        self.stage = 2
        return wrapped

    def _choice(self, token: bytes) -> None:
        try:
            choice = self.acceptor.unwrap(token)
        except GssError as e:
            raise SaslError(f"Final handshake failed [Caused by GSSException: {e}]") from None
        if len(choice) < 4:
            raise SaslError("Invalid message on server; length of message is " + str(len(choice)))
        if not choice[0] & LAYER_NONE:
            raise SaslError(f"Client selected unsupported protection: {choice[0]}")
        peer = self.peer or ""
        authzid = peer
        if len(choice) > 4:
            try:
                authzid = choice[4:].decode("utf-8")
            except UnicodeDecodeError:
                raise SaslError("Cannot decode authzid") from None
        if self.authorize is not None:
            # GssKrb5Server.doHandshake2: the AuthorizeCallback decides
            if not self.authorize(peer, authzid):
                raise SaslError(f"{peer} is not authorized to connect as {authzid}")
            self.authorization_id = authzid
            return
        cfg = self.config
        self.authorization_id = kerberos_authorized_id(
            peer,
            authzid,
            cfg.default_realm,
            remove_host=cfg.remove_host,
            remove_realm=cfg.remove_realm,
        )


@dataclass(frozen=True, slots=True)
class SaslServerConfig:
    """The users of the JAAS ``Server`` section and the SASL settings around them."""

    users: Mapping[str, str]
    #: ``zookeeper.SASLAuthenticationProvider.superPassword``
    super_password: str | None = None
    #: ``zookeeper.allowSaslFailedClients``
    allow_failed_clients: bool = False
    #: the ``Krb5LoginModule`` of the section: clients then authenticate with GSSAPI
    kerberos: KerberosLogin | None = None
    #: a new GSS acceptor for the service principal (set by the shell once it has the keys)
    acceptor: Callable[[], GssAcceptor] | None = None
    #: the default realm of the Kerberos configuration (``KerberosName.getDefaultRealm``)
    default_realm: str | None = None
    #: ``zookeeper.kerberos.removeHostFromPrincipal`` / ``removeRealmFromPrincipal``
    remove_host: bool = False
    remove_realm: bool = False

    def password(self, user: str) -> str | None:
        """``SaslServerCallbackHandler``: name callback, then password callback."""
        if user not in self.users:
            return None
        if user == "super" and self.super_password is not None:
            return self.super_password
        return self.users[user]


def sasl_config_from(
    jaas_text: str | None, properties: Mapping[str, str], jaas_path: str = ""
) -> SaslServerConfig | None:
    """``ServerCnxnFactory.configureSaslLogin`` for a JAAS text (None: no file given).
    None means SASL is off (no file, or no section of that name); a broken file, or a section
    whose login module trizk cannot run, raises JaasError (ZooKeeper does not start)."""
    section = properties.get("zookeeper.sasl.serverconfig", "Server")
    if jaas_text is None:
        return None
    try:
        sections = parse_jaas(jaas_text)
    except JaasError as e:
        raise JaasError(
            f"No JAAS configuration section named '{section}' was found in '{jaas_path}' ({e})"
        ) from None
    modules = sections.get(section)
    if modules is None:
        return None
    users: dict[str, str] = {}
    kerberos: KerberosLogin | None = None
    for m in modules:
        if m.name == KRB5_LOGIN_MODULE:
            kerberos = kerberos or KerberosLogin.from_options(section, m.options)
        elif m.name != DIGEST_LOGIN_MODULE:
            raise JaasError(
                f"JAAS section '{section}': login module {m.name} is not supported "
                f"(trizk runs {DIGEST_LOGIN_MODULE} and {KRB5_LOGIN_MODULE})"
            )
        # SaslServerCallbackHandler reads user_* options from every module of the section
        for k, v in m.options.items():
            if k.startswith("user_"):
                users[k[len("user_") :]] = v
    return SaslServerConfig(
        users=users,
        super_password=properties.get("zookeeper.SASLAuthenticationProvider.superPassword"),
        allow_failed_clients=properties.get("zookeeper.allowSaslFailedClients", "").strip().lower()
        == "true",
        kerberos=kerberos,
        # SaslServerCallbackHandler.isSystemPropertyTrue: exactly "true"
        remove_host=properties.get("zookeeper.kerberos.removeHostFromPrincipal") == "true",
        remove_realm=properties.get("zookeeper.kerberos.removeRealmFromPrincipal") == "true",
    )


# ------------------------------------------------------------------ DIGEST-MD5


def _bytes(s: str, utf8: bool) -> bytes:
    """``DigestMD5Base.stringToByte_8859_1``."""
    if utf8 and any(ord(c) > 0xFF for c in s):
        return s.encode("utf-8")
    try:
        return s.encode("latin-1")
    except UnicodeEncodeError:
        raise SaslError("DIGEST-MD5: non-8859_1 character in a string") from None


def _h(data: bytes) -> bytes:
    return hashlib.md5(data).digest()


def _hex(data: bytes) -> bytes:
    return hashlib.md5(data).hexdigest().encode("ascii")


def parse_directives(data: bytes) -> dict[str, bytes]:
    """RFC 2831 ``1#( key "=" ( token | quoted-string ) )``; a directive given twice is an
    error, as in ``DigestMD5Base.parseDirectives``."""
    out: dict[str, bytes] = {}
    i, n = 0, len(data)
    while i < n:
        while i < n and data[i] in b" \t\r\n,":
            i += 1
        if i >= n:
            break
        j = data.find(b"=", i)
        if j < 0:
            raise SaslError("DIGEST-MD5: directive key contains no value")
        key = data[i:j].strip().decode("latin-1").lower()
        i = j + 1
        while i < n and data[i] in b" \t":
            i += 1
        val = bytearray()
        if i < n and data[i] == 0x22:  # quoted string
            i += 1
            while i < n and data[i] != 0x22:
                if data[i] == 0x5C and i + 1 < n:
                    i += 1
                val.append(data[i])
                i += 1
            if i >= n:
                raise SaslError("DIGEST-MD5: unmatched quote found for directive: " + key)
            i += 1
        else:
            while i < n and data[i] != 0x2C:
                val.append(data[i])
                i += 1
            val = bytearray(bytes(val).strip())
        while i < n and data[i] in b" \t":
            i += 1
        if i < n and data[i] != 0x2C:
            raise SaslError("DIGEST-MD5: directive value not followed by a comma: " + key)
        if key in out:
            raise SaslError(f"DIGEST-MD5: peer sent more than one {key} directive")
        out[key] = bytes(val)
    return out


class Step(enum.Enum):
    CHALLENGE = "challenge"
    RESPONSE = "response"
    DONE = "done"
    FAILED = "failed"


_NC = re.compile(rb"[0-9a-fA-F]{8}\Z")


class DigestMD5Server:
    """One connection's DIGEST-MD5 exchange (server side). ``nonce`` comes from the caller
    (40 characters of base64 of 30 random bytes, as the JDK makes it)."""

    def __init__(
        self,
        config: SaslServerConfig,
        nonce: str,
        protocol: str = PROTOCOL,
        server_name: str = SERVER_NAME,
        authorize: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.config = config
        #: another handler's AuthorizeCallback ((user name, authorization id) -> authorized;
        #: quorum SASL's); None: every user is authorized as its name
        self.authorize = authorize
        self.nonce = nonce
        self.protocol = protocol
        self.server_name = server_name
        self.realm = server_name
        self.step = Step.CHALLENGE
        self.authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self.step is Step.DONE

    def evaluate(self, response: bytes) -> bytes:
        """``SaslServer.evaluateResponse``: the next token, or SaslError."""
        try:
            if self.step is Step.CHALLENGE:
                if response:
                    raise SaslError("DIGEST-MD5 must not have an initial response")
                self.step = Step.RESPONSE
                return self._challenge()
            if self.step is Step.RESPONSE:
                out = self._validate(response)
                self.step = Step.DONE
                return out
            if self.step is Step.DONE:
                raise SaslError("DIGEST-MD5 authentication already complete")
            raise SaslError("DIGEST-MD5 authentication failed")
        except SaslError:
            self.step = Step.FAILED
            raise

    def _challenge(self) -> bytes:
        return (
            f'realm="{self.realm}",nonce="{self.nonce}",charset=utf-8,algorithm=md5-sess'
        ).encode()

    def _validate(self, response: bytes) -> bytes:
        d = parse_directives(response)
        charset = d.get("charset")
        utf8 = False
        if charset is not None:
            if charset.decode("latin-1").lower() != "utf-8":
                raise SaslError(
                    "DIGEST-MD5: digest response format violation. Incompatible charset value: "
                    + charset.decode("latin-1")
                )
            utf8 = True
        enc = "utf-8" if utf8 else "latin-1"

        def text(key: str) -> str | None:
            v = d.get(key)
            if v is None:
                return None
            try:
                return v.decode(enc)
            except UnicodeDecodeError:
                raise SaslError(f"DIGEST-MD5: bad {key} encoding") from None

        realm = text("realm") or ""
        if realm != self.realm:
            raise SaslError(
                "DIGEST-MD5: digest response format violation. Nonexistent realm: " + realm
            )
        nonce = text("nonce")
        if nonce is None:
            raise SaslError("DIGEST-MD5: digest response format violation. nonce value missing.")
        if nonce != self.nonce:
            raise SaslError("DIGEST-MD5: digest response format violation. Mismatched nonce.")
        cnonce = text("cnonce")
        if cnonce is None:
            raise SaslError("DIGEST-MD5: digest response format violation. cnonce missing.")
        nc = d.get("nc", b"")
        if not _NC.match(nc) or int(nc, 16) != 1:
            raise SaslError(
                "DIGEST-MD5: digest response format violation. Nonce count does not match: "
                + nc.decode("latin-1")
            )
        qop = (text("qop") or "auth").lower()
        if qop != "auth":
            raise SaslError("DIGEST-MD5: digest response format violation. Invalid QOP: " + qop)
        digest_uri = text("digest-uri")
        if digest_uri is None:
            raise SaslError("DIGEST-MD5: digest response format violation. Missing digest-uri.")
        expected_uri = f"{self.protocol}/{self.server_name}"
        if digest_uri.lower() != expected_uri.lower():
            raise SaslError(
                "DIGEST-MD5: digest response format violation. Mismatched URI: "
                f"{digest_uri}; expecting: {expected_uri}"
            )
        client_response = d.get("response")
        if client_response is None or len(client_response) != 32:
            raise SaslError("DIGEST-MD5: digest response format violation. Missing response.")
        username = text("username")
        if username is None:
            raise SaslError("DIGEST-MD5: digest response format violation. Missing username.")
        authzid = text("authzid")
        password = self.config.password(username)
        if password is None:
            raise SaslError(
                f"DIGEST-MD5: cannot acquire password for {username} in realm : {realm}"
            )
        # RFC 2831 2.1.2.1: A1 = H(user:realm:passwd):nonce:cnonce[:authzid]
        a1 = (
            _h(_bytes(username, utf8) + b":" + _bytes(realm, utf8) + b":" + _bytes(password, utf8))
            + b":"
            + nonce.encode(enc)
            + b":"
            + cnonce.encode(enc)
        )
        if authzid is not None:
            a1 += b":" + authzid.encode(enc)
        ha1 = _hex(a1)
        tail = b":" + nonce.encode(enc) + b":" + nc + b":" + cnonce.encode(enc) + b":auth:"

        def kd(a2: bytes) -> bytes:
            return _hex(ha1 + tail + _hex(a2))

        if kd(b"AUTHENTICATE:" + digest_uri.encode(enc)) != client_response.lower():
            raise SaslError("DIGEST-MD5: digest response format violation. Mismatched response.")
        if self.authorize is not None:
            # DigestMD5Server: the AuthorizeCallback with (username, authzid or username)
            wanted = username if authzid is None else authzid
            if not self.authorize(username, wanted):
                raise SaslError(f"DIGEST-MD5: {username} is not authorized to act as {wanted}")
            self.authorization_id = wanted
            return b"rspauth=" + kd(b":" + digest_uri.encode(enc))
        # AuthorizeCallback: authorized, as the (Kerberos short) name of the authentication id
        self.authorization_id = username
        return b"rspauth=" + kd(b":" + digest_uri.encode(enc))


def digest_md5_response(
    challenge: bytes,
    username: str,
    password: str,
    cnonce: str,
    *,
    service: str = PROTOCOL,
    host: str = SERVER_NAME,
    authzid: str | None = None,
    utf8: bool = True,
) -> bytes:
    """A client's digest-response to ``challenge`` (for tests and the raw client)."""
    d = parse_directives(challenge)
    realm = d.get("realm", b"").decode("utf-8")
    nonce = d["nonce"].decode("ascii")
    uri = f"{service}/{host}"
    a1 = _h(f"{username}:{realm}:{password}".encode("utf-8" if utf8 else "latin-1"))
    a1 += f":{nonce}:{cnonce}".encode()
    if authzid is not None:
        a1 += b":" + authzid.encode()
    ha1 = _hex(a1)
    a2 = _hex(b"AUTHENTICATE:" + uri.encode())
    resp = _hex(ha1 + f":{nonce}:00000001:{cnonce}:auth:".encode() + a2)
    parts = [
        f'username="{username}"',
        f'realm="{realm}"',
        f'nonce="{nonce}"',
        f'cnonce="{cnonce}"',
        "nc=00000001",
        "qop=auth",
        f'digest-uri="{uri}"',
        f"response={resp.decode()}",
    ]
    if utf8:
        parts.append("charset=utf-8")
    if authzid is not None:
        parts.append(f'authzid="{authzid}"')
    return ",".join(parts).encode("utf-8")


def random_nonce() -> str:
    """A fresh nonce as the JDK's DigestMD5Server makes it: base64 of 30 random bytes."""
    import base64
    import os

    return base64.b64encode(os.urandom(30)).decode("ascii")


def load_sasl_config(properties: Mapping[str, str]) -> SaslServerConfig | None:
    """Read the JAAS file named by ``java.security.auth.login.config`` (a ``-D`` property;
    ``=FILE`` also accepted) -- the only function here that touches the filesystem."""
    path = properties.get("java.security.auth.login.config")
    if path is None:
        return None
    path = path[1:] if path.startswith("=") else path
    section = properties.get("zookeeper.sasl.serverconfig", "Server")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise JaasError(
            f"No JAAS configuration section named '{section}' was found in '{path}'. "
            f"({e.strerror or e})"
        ) from None
    return sasl_config_from(text, properties, path)
