"""ACL checks and authentication providers, as ZooKeeper 3.8.0 does them.

Theory
------
ZooKeeper keeps the authenticated ids of a *connection* (``ServerCnxn.authInfo``, not the
session: a client that reconnects must authenticate again -- kazoo and the C client resend their
auth data). Every connection starts with ``ip:<remote address>``; an AuthPacket, a SASL exchange
or the TLS handshake (x509) add more. :class:`AuthInfo` is that list, and it carries the
server's :class:`AuthConfig` -- ZooKeeper's ``ProviderRegistry``: which schemes have a provider
(``ip`` always, ``digest`` unless disabled, ``sasl``/``x509`` when configured) and the super-user
settings -- so that every check knows which providers exist without global state.

* :func:`check` (``ZooKeeperServer.checkACL``): an empty ACL grants everything; an id of scheme
  ``super`` grants everything; otherwise an entry grants when its perms share a bit with the
  wanted perm and it is ``world:anyone`` or its scheme has a provider that ``matches`` one of the
  connection's ids *of the same scheme*.
* :func:`fixup` (``PrepRequestProcessor.fixupACL``): duplicates removed; an empty list is
  INVALIDACL; ``world:anyone`` is kept; ``auth`` expands to every id of the connection whose
  provider ``isAuthenticated`` (digest, sasl, x509 -- not ip, and ``super`` has no provider),
  INVALIDACL if there is none; any other entry needs a provider whose ``isValid`` accepts the id.
* :func:`authenticate` (the providers' ``handleAuthentication`` for an AuthPacket).
* :func:`user_name` (``AuthUtil.getUser``): what whoAmI reports for an id.

Provider rules (3.8.0)
----------------------
``ip``: IPv4 only (``IPAuthenticationProvider.addr2Bytes`` has a "TODO Write the v6addr2Bytes"):
an IPv6 ACL is INVALIDACL and an IPv6 client never matches. ``a.b.c.d`` with four
``Integer.parseInt`` parts in 0..255 (so ``+1`` and ``010`` are accepted, as decimal), an
optional ``/bits`` in 0..32 (``1.2.3.4/`` is invalid: ``split("/", 2)`` keeps the empty part).
``digest``: the id must split on ``:`` into exactly two parts (Java's ``split`` drops trailing
empty strings, so ``a:b:`` is valid and ``a:`` is not); matching is string equality.
``sasl``: valid unless it contains ``@`` without being ``primary[/host]@realm`` (KerberosName);
matches the same id, or any id for the connection id ``super``, or any id when the ACL names
``zookeeper.letAnySaslUserDoX``. ``x509``: valid when ``X500Principal`` accepts the name (see
:func:`valid_x500_name`); matches the same id or, when ``zookeeper.X509AuthenticationProvider.
superUser`` is set, a connection id equal to it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import ipaddress
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from trizk.jute import records as r
from trizk.jute.codes import Code, JavaRuntimeError, KeeperError
from trizk.jute.javalang import java_split, parse_boolean, parse_int
from trizk.storage.tree.javahash import java_string_hash

log = logging.getLogger("trizk.server.auth.acl")

Id = tuple[str, str]

SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
X509_PROVIDER = "org.apache.zookeeper.server.auth.X509AuthenticationProvider"
#: Providers ZooKeeper registers by itself; naming them in authProvider.N changes nothing.
_BUILTIN_PROVIDERS = {
    "org.apache.zookeeper.server.auth.DigestAuthenticationProvider": "digest",
    "org.apache.zookeeper.server.auth.IPAuthenticationProvider": "ip",
}


class ACLError(KeeperError):
    """Raised when an ACL check or ACL list fails."""


ENFORCE_AUTH_ENABLED = "zookeeper.enforce.auth.enabled"
ENFORCE_AUTH_SCHEMES = "zookeeper.enforce.auth.schemes"
SESSION_REQUIRE_CLIENT_SASL_AUTH = "zookeeper.sessionRequireClientSASLAuth"


class AuthEnforcementError(ValueError):
    """``zookeeper.enforce.auth.*`` names no scheme or one without a provider (the server
    does not start: ZooKeeper's "Invalid arguments, exiting abnormally", exit code 2)."""


def _enforcement(props: Mapping[str, str]) -> tuple[bool, tuple[str, ...]]:
    """``AuthenticationHelper.initConfigurations``: sessionRequireClientSASLAuth=true is
    enforcement of ``sasl`` alone (the enforce.auth.* properties are then not read)."""
    if parse_boolean(props.get(SESSION_REQUIRE_CLIENT_SASL_AUTH, "false")):
        return True, ("sasl",)
    enabled = parse_boolean(props.get(ENFORCE_AUTH_ENABLED, "false"))
    raw = props.get(ENFORCE_AUTH_SCHEMES)
    schemes = tuple(s.strip() for s in java_split(raw, ",")) if raw is not None else ()
    return enabled, schemes


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """The server's authentication providers and super users (ZooKeeper's ProviderRegistry
    and the system properties its providers read)."""

    #: ``zookeeper.DigestAuthenticationProvider.superDigest``
    super_digest: str | None = None
    #: ``zookeeper.DigestAuthenticationProvider.enabled`` (default true)
    digest_enabled: bool = True
    #: SASLAuthenticationProvider registered (``zookeeper.authProvider.N``)
    sasl: bool = False
    #: X509AuthenticationProvider registered (a secureClientPort registers it, as
    #: ``QuorumPeerConfig.configureSSLAuth`` does)
    x509: bool = False
    #: ``zookeeper.X509AuthenticationProvider.superUser``
    x509_super_user: str | None = None
    #: values of ``zookeeper.superUser`` and ``zookeeper.superUser.*`` (SASL super users)
    sasl_super_users: frozenset[str] = frozenset()
    #: ``zookeeper.letAnySaslUserDoX``
    let_any_sasl_user_do_x: str | None = None
    #: ``AuthenticationHelper``: ``zookeeper.enforce.auth.enabled`` (or
    #: ``zookeeper.sessionRequireClientSASLAuth``) and the schemes a connection must hold an id
    #: of before any request but auth and sasl (:meth:`enforced_on`)
    enforce_auth: bool = False
    enforce_schemes: tuple[str, ...] = ()

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, secure_port: bool) -> AuthConfig:
        """Read the system properties (full names, as ``ServerConfig.properties`` holds them)."""
        sasl = x509 = False
        for name, value in props.items():
            if not name.startswith("zookeeper.authProvider."):
                continue
            cls_name = value.strip()
            if cls_name == SASL_PROVIDER:
                sasl = True
            elif cls_name == X509_PROVIDER:
                x509 = True
            elif cls_name not in _BUILTIN_PROVIDERS:
                # ProviderRegistry.initialize: "Problems loading <class>" and carries on.
                log.warning("Problems loading %s: trizk has no such authentication provider", value)
        ssl_provider = props.get("zookeeper.ssl.authProvider", "x509")
        if secure_port and ssl_provider == "x509":
            x509 = True
        supers = frozenset(
            v
            for k, v in props.items()
            if k == "zookeeper.superUser" or k.startswith("zookeeper.superUser.")
        )
        enforce, schemes = _enforcement(props)
        cfg = cls(
            super_digest=props.get("zookeeper.DigestAuthenticationProvider.superDigest"),
            digest_enabled=props.get("zookeeper.DigestAuthenticationProvider.enabled", "true")
            .strip()
            .lower()
            == "true",
            sasl=sasl,
            x509=x509,
            x509_super_user=props.get("zookeeper.X509AuthenticationProvider.superUser"),
            sasl_super_users=supers,
            let_any_sasl_user_do_x=props.get("zookeeper.letAnySaslUserDoX"),
            enforce_auth=enforce,
            enforce_schemes=schemes,
        )
        cfg.validate_enforcement()
        return cfg

    def validate_enforcement(self) -> None:
        """``AuthenticationHelper.validateConfiguredProperties`` (raises AuthEnforcementError:
        ZooKeeper's IllegalArgumentException, which stops the server)."""
        if not self.enforce_auth:
            return
        if not self.enforce_schemes:
            raise AuthEnforcementError(
                f"{ENFORCE_AUTH_ENABLED} is true {ENFORCE_AUTH_SCHEMES} must be  configured."
            )
        for scheme in self.enforce_schemes:
            if not self.has_provider(scheme):
                raise AuthEnforcementError(f"Authentication scheme {scheme} is not available.")

    @property
    def sasl_auth_required(self) -> bool:
        """``AuthenticationHelper.isSaslAuthRequired``: a failed SASL exchange is then answered
        SESSIONCLOSEDREQUIRESASLAUTH, not AUTHFAILED, and ``allowSaslFailedClients`` is moot."""
        return self.enforce_auth and "sasl" in self.enforce_schemes

    def enforcement_lines(self) -> list[str]:
        """The two lines AuthenticationHelper logs at start (Java's List.toString)."""
        return [
            f"{ENFORCE_AUTH_ENABLED} = {'true' if self.enforce_auth else 'false'}",
            f"{ENFORCE_AUTH_SCHEMES} = [{', '.join(self.enforce_schemes)}]",
        ]

    def enforced_on(self, ids: Iterable[Id]) -> bool:
        """``AuthenticationHelper.enforceAuthentication``'s test: True when a connection
        holding ``ids`` must be refused (enforcement on, and no id of an enforced scheme --
        the ``ip`` id every connection holds counts when ``ip`` is one of them)."""
        if not self.enforce_auth:
            return False
        return not any(scheme in self.enforce_schemes for scheme, _ in ids)

    def has_provider(self, scheme: str) -> bool:
        if scheme == "ip":
            return True
        if scheme == "digest":
            return self.digest_enabled
        if scheme == "sasl":
            return self.sasl
        if scheme == "x509":
            return self.x509
        return False

    def providers(self) -> list[str]:
        return [s for s in ("ip", "digest", "sasl", "x509") if self.has_provider(s)]


DEFAULT_AUTH = AuthConfig()


def _id_hash(ident: Id) -> int:
    """The jute-generated ``Id.hashCode``: ``37 * (37 * 17 + scheme.hash) + id.hash``."""
    h = (37 * 17 + java_string_hash(ident[0])) & 0xFFFFFFFF
    return (37 * h + java_string_hash(ident[1])) & 0xFFFFFFFF


def _chm_bin(ident: Id, capacity: int) -> int:
    """The ``ConcurrentHashMap`` bin of an id: ``spread(h) & (n - 1)``."""
    h = _id_hash(ident)
    return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (capacity - 1)


def _chm_order(capacity: int, seq: dict[Id, int]) -> Callable[[Id], tuple[int, int]]:
    """The sort key of a ``ConcurrentHashMap``'s iteration: hash bin, then insertion order.
    (A function of its own: mypyc cannot compile a closure in a method of a Python class.)"""
    return lambda i: (_chm_bin(i, capacity), seq[i])


@mypyc_attr(native_class=False)  # (mypyc compiles no subclass of list)
class AuthInfo(list[Id]):
    """The ids of one connection, with the server's providers.

    ZooKeeper keeps them in ``Collections.newSetFromMap(new ConcurrentHashMap<>())`` and hands
    out ``new ArrayList<>(authInfo)``: the order every consumer sees (whoAmI, the expansion of
    an ``auth`` ACL) is the map's iteration order -- by hash bin, then insertion order within a
    bin. The list is kept in that order. (Past 12 ids the map resizes and Java's bin split may
    reverse parts of a bin; a connection with that many ids is not modelled exactly.)
    """

    __slots__ = ("_seq", "config")

    def __init__(self, config: AuthConfig = DEFAULT_AUTH, ids: Iterable[Id] = ()) -> None:
        super().__init__()
        self.config = config
        self._seq: dict[Id, int] = {}
        for i in ids:
            self.add(i)

    def add(self, ident: Id) -> None:
        """``ServerCnxn.addAuthInfo``: a set, no duplicates."""
        if ident in self._seq:
            return
        self._seq[ident] = len(self._seq)
        self.append(ident)
        if len(self) == 1:
            return  # one id: nothing to order (every fresh connection's ``ip`` id)
        capacity = 16
        while len(self) > capacity * 3 // 4:
            capacity *= 2
        self.sort(key=_chm_order(capacity, self._seq))


def new_connection_ids(config: AuthConfig, remote_ip: str) -> AuthInfo:
    """A fresh connection's ids: ``ip:<address as Java's getHostAddress writes it>``."""
    return AuthInfo(config, [("ip", java_host_address(remote_ip))])


def _config_of(ids: Sequence[Id]) -> AuthConfig:
    return ids.config if isinstance(ids, AuthInfo) else DEFAULT_AUTH


# ------------------------------------------------------------------ Java's text of an address


@functools.lru_cache(maxsize=4096)
def java_host_address(ip: str) -> str:
    """``InetAddress.getHostAddress``: IPv4 as is, IPv4-mapped IPv6 as IPv4 (Java maps them to
    Inet4Address), other IPv6 as eight uncompressed hex groups (``0:0:0:0:0:0:0:1``)."""
    try:
        addr = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return ip
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        groups = addr.exploded.split(":")
        return ":".join(format(int(g, 16), "x") for g in groups)
    return str(addr)


# ------------------------------------------------------------------ providers


def _v4_bytes(addr: str) -> bytes | None:
    """``IPAuthenticationProvider.v4addr2Bytes`` (``split("\\\\.", -1)``: all parts kept)."""
    parts = addr.split(".")
    if len(parts) != 4:
        return None
    out = bytearray()
    for p in parts:
        v = parse_int(p)
        if v is None or not 0 <= v <= 255:
            return None
        out.append(v)
    return bytes(out)


def _ip_acl(expr: str) -> tuple[bytes, int] | None:
    addr, sep, bits_s = expr.partition("/")
    acl_addr = _v4_bytes(addr)
    if acl_addr is None:
        return None
    bits = 32
    if sep:
        b = parse_int(bits_s)
        if b is None or not 0 <= b <= 32:
            return None
        bits = b
    return acl_addr, bits


def _mask(b: bytes, bits: int) -> int:
    n = int.from_bytes(b, "big")
    return n & (((1 << bits) - 1) << (32 - bits)) if bits else 0


def _ip_matches(auth_id: str, acl_expr: str) -> bool:
    acl = _ip_acl(acl_expr)
    if acl is None:
        return False
    remote = _v4_bytes(auth_id)
    if remote is None:
        return False
    return _mask(remote, acl[1]) == _mask(acl[0], acl[1])


_KERBEROS_NAME = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)\Z")


def _valid_kerberos_name(name: str) -> bool:
    return _KERBEROS_NAME.match(name) is not None or "@" not in name


#: Attribute keywords ``X500Principal(String)`` understands (RFC 1779/2253 plus Java's extras).
_X500_KEYWORDS = frozenset(
    "CN C L S ST O OU T IP STREET DC DNQUALIFIER DNQ SURNAME GIVENNAME INITIALS GENERATION "
    "EMAIL EMAILADDRESS UID SERIALNUMBER".split()
)
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_OID = re.compile(r"(?:OID\.)?[0-9]+(?:\.[0-9]+)+\Z", re.IGNORECASE)


def _der_ok(data: bytes) -> bool:
    """One DER TLV filling ``data`` exactly (what a ``#hex`` attribute value must be)."""
    if len(data) < 2:
        return False
    length, pos = data[1], 2
    if length & 0x80:
        k = length & 0x7F
        if k == 0 or len(data) < 2 + k:
            return False
        length, pos = int.from_bytes(data[2 : 2 + k], "big"), 2 + k
    return len(data) - pos == length


def valid_x500_name(name: str) -> bool:
    """Whether ``new X500Principal(name)`` accepts ``name`` (checked against Java 17): RDNs
    separated by ``,`` or ``;``, attribute-value pairs by ``+`` (no trailing separator), each
    ``type=value`` with a known keyword or a dotted OID; the value plain (``"<>`` and the
    separators must be escaped with ``\\``; ``=`` may appear), quoted, or ``#`` + one DER
    element in hex. A blank string is the empty name."""
    n = len(name)
    if not name.strip():
        return True
    i = 0
    while True:
        j = name.find("=", i)
        if j < 0:
            return False
        attr = name[i:j].strip()
        if attr.upper() not in _X500_KEYWORDS and not _OID.match(attr):
            return False
        i = j + 1
        while i < n and name[i] == " ":
            i += 1
        if i < n and name[i] == '"':
            i += 1
            while i < n and name[i] != '"':
                i += 2 if name[i] == "\\" else 1
            if i >= n:
                return False
            i += 1
        elif i < n and name[i] == "#":
            start = i + 1
            while i + 1 < n and name[i + 1] not in ",;+ ":
                i += 1
            i += 1
            hexs = name[start:i]
            try:
                if not _der_ok(bytes.fromhex(hexs)) or len(hexs) % 2:
                    return False
            except ValueError:
                return False
            if i < n and name[i] == " ":
                return False  # X500Principal: no blanks after a #hex value
        else:
            while i < n and name[i] not in ",;+":
                c = name[i]
                if c == "\\":
                    # an escape is a special character, a blank or two hex digits
                    if name[i + 1 : i + 2] and name[i + 1] in ',=+<>#;"\\ ':
                        i += 1
                    elif _HEX2.match(name, i + 1):
                        i += 2
                    else:
                        return False
                elif c in '"<>':
                    return False
                i += 1
        while i < n and name[i] == " ":
            i += 1
        if i >= n:
            return True
        if name[i] not in ",;+":
            return False
        i += 1
        if i >= n:
            return False


def _provider_valid(scheme: str, ident: str) -> bool:
    if scheme == "ip":
        return _ip_acl(ident) is not None
    if scheme == "digest":
        return len(java_split(ident, ":")) == 2
    if scheme == "sasl":
        return _valid_kerberos_name(ident)
    if scheme == "x509":
        return valid_x500_name(ident)
    return False


def _provider_matches(cfg: AuthConfig, scheme: str, auth_id: str, acl_id: str) -> bool:
    if scheme == "ip":
        return _ip_matches(auth_id, acl_id)
    if scheme == "sasl":
        if auth_id == "super" or auth_id == acl_id:
            return True
        return cfg.let_any_sasl_user_do_x is not None and acl_id == cfg.let_any_sasl_user_do_x
    if scheme == "x509" and cfg.x509_super_user is not None:
        return auth_id == cfg.x509_super_user or auth_id == acl_id
    return auth_id == acl_id


def _is_authenticated(cfg: AuthConfig, scheme: str) -> bool:
    return scheme in ("digest", "sasl", "x509") and cfg.has_provider(scheme)


def user_name(cfg: AuthConfig, ident: Id) -> str:
    """``AuthUtil.getUser`` as whoAmI reports it ("" when the scheme has no provider)."""
    scheme, i = ident
    if not cfg.has_provider(scheme):
        return ""
    if scheme == "digest":
        parts = java_split(i, ":")
        return parts[0] if parts else ""
    return i


def who_am_i(ids: Sequence[Id]) -> list[tuple[str, str]]:
    """``AuthUtil.getClientInfos``: (scheme, user) for every id of the connection, in order."""
    cfg = _config_of(ids)
    return [(s, user_name(cfg, (s, i))) for s, i in ids]


# ------------------------------------------------------------------ checks


def digest_of(user_password: str) -> str:
    """``DigestAuthenticationProvider.generateDigest``: ``user:base64(sha1(user:password))``."""
    user = user_password.split(":", 1)[0]
    sha = hashlib.sha1(user_password.encode("utf-8")).digest()
    return f"{user}:{base64.b64encode(sha).decode('ascii')}"


def check(acl: Sequence[r.ACL], perm: int, ids: Sequence[Id]) -> bool:
    """``ZooKeeperServer.checkACL`` (True = granted)."""
    if not acl:
        return True
    perm = int(perm)  # a Perms flag: int & IntFlag runs enum code for every ACL entry
    # world:anyone first: the common answer, needing neither the ids nor the providers (the
    # result is the same as ZooKeeper's order, super first: both grant)
    for a in acl:
        if a.perms & perm and a.id.scheme == "world" and a.id.id == "anyone":
            return True
    for scheme, _ in ids:
        if scheme == "super":
            return True
    cfg = _config_of(ids)
    for a in acl:
        if a.perms & perm:
            s, i = a.id.scheme, a.id.id
            if s is None or i is None or not cfg.has_provider(s):
                continue
            for auth_scheme, auth_id in ids:
                if auth_scheme == s and _provider_matches(cfg, s, auth_id, i):
                    return True
    return False


def fixup(acl: Sequence[r.ACL] | None, ids: Sequence[Id]) -> tuple[r.ACL, ...]:
    """``PrepRequestProcessor.fixupACL``; raises ACLError(INVALIDACL)."""
    cfg = _config_of(ids)
    uniq: list[r.ACL] = []
    for a in acl or ():
        if a not in uniq:
            uniq.append(a)
    if not uniq:
        raise ACLError(Code.INVALIDACL)
    out: list[r.ACL] = []
    for a in uniq:
        s = a.id.scheme
        if s is None:
            raise ACLError(Code.INVALIDACL)
        if s == "world" and a.id.id is None:
            # id.getId().equals("anyone") on a null id: NullPointerException (MARSHALLINGERROR)
            raise JavaRuntimeError("NullPointerException: null ACL id")
        if s == "world" and a.id.id == "anyone":
            out.append(a)
        elif s == "auth":
            valid = False
            for auth_scheme, auth_id in ids:
                if _is_authenticated(cfg, auth_scheme):
                    valid = True
                    out.append(r.ACL(a.perms, r.Id(auth_scheme, auth_id)))
            if not valid:
                raise ACLError(Code.INVALIDACL)
        else:
            if not cfg.has_provider(s):
                raise ACLError(Code.INVALIDACL)
            if a.id.id is None:  # the provider's isValid(null) throws NullPointerException
                raise JavaRuntimeError("NullPointerException: null ACL id")
            if not _provider_valid(s, a.id.id):
                raise ACLError(Code.INVALIDACL)
            out.append(a)
    return tuple(out)


def authenticate(
    scheme: str,
    auth: bytes | None,
    remote_ip: str,
    super_digest: str | None = None,
    *,
    config: AuthConfig | None = None,
    x509_subject: str | None = None,
) -> list[Id] | None:
    """Ids an AuthPacket adds to the connection, or None for AUTHFAILED (no provider for the
    scheme, or the provider refuses: ``sasl`` always does; ``x509`` without a client
    certificate does)."""
    cfg = config if config is not None else AuthConfig(super_digest=super_digest)
    if not cfg.has_provider(scheme):
        return None
    if scheme == "digest":
        if auth is None:
            # new String(null) throws NullPointerException; processPacket turns a provider's
            # RuntimeException into AUTHFAILED.
            return None
        # new String(authData): the platform charset (UTF-8), bad bytes become U+FFFD
        ident = digest_of(auth.decode("utf-8", "replace"))
        ids: list[Id] = [("digest", ident)]
        if cfg.super_digest is not None and ident == cfg.super_digest:
            ids.insert(0, ("super", ""))
        return ids
    if scheme == "ip":
        return [("ip", java_host_address(remote_ip))]
    if scheme == "x509":
        return x509_ids(cfg, x509_subject) if x509_subject is not None else None
    return None  # sasl: SASLAuthenticationProvider.handleAuthentication is AUTHFAILED


def x509_ids(cfg: AuthConfig, subject: str) -> list[Id]:
    """``X509AuthenticationProvider.handleAuthentication`` for a trusted client certificate."""
    ids: list[Id] = []
    if cfg.x509_super_user is not None and subject == cfg.x509_super_user:
        ids.append(("super", subject))
    ids.append(("x509", subject))
    return ids


def sasl_ids(cfg: AuthConfig, authorization_id: str) -> list[Id]:
    """``ZooKeeperServer.processSasl`` on completion: ``sasl:<id>``, then ``super`` when the id
    is a ``zookeeper.superUser``."""
    ids: list[Id] = [("sasl", authorization_id)]
    if authorization_id and authorization_id in cfg.sasl_super_users:
        ids.append(("super", ""))
    return ids


_JAVA_DOT = "[^\n\r\u0085\u2028\u2029]"
_DIGEST_SECRET = re.compile(":" + _JAVA_DOT + "*")


def mask_digest(a: r.ACL) -> r.ACL:
    """getACL without ADMIN: ``id.replaceAll(":.*", ":x")`` for digest ids (Java's ``.`` stops
    at line terminators)."""
    if a.id.scheme != "digest" or a.id.id is None:
        return a
    return r.ACL(a.perms, r.Id("digest", _DIGEST_SECRET.sub(":x", a.id.id)))
