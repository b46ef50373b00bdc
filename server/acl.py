"""ACL checks and authentication providers, as ``ZooKeeperServer.checkACL`` and
``PrepRequestProcessor.fixupACL`` do them.

* ``check(acl, perm, ids)``: a session whose ids include ``super`` passes; an ACL entry grants
  when its perms share a bit with ``perm`` and it is ``world:anyone`` or its scheme's provider
  matches one of the session's ids of that scheme. An empty ACL grants everything.
* ``fixup(acl, ids)``: removes duplicates; an empty/None list, an unknown scheme, or an id the
  scheme rejects is INVALIDACL; ``auth`` entries expand to every authenticated id of the session
  (INVALIDACL if none).
Providers: ``digest`` (``user:base64(sha1(user:password))``) and ``ip`` (IPv4/IPv6 with an
optional prefix length) exist on every ZooKeeper server; more come with the ACL issue.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from collections.abc import Sequence

from ..jute import records as r
from ..jute.codes import Code


class ACLError(Exception):
    def __init__(self, code: Code) -> None:
        super().__init__(code.name)
        self.code = code


def digest_of(user_password: str) -> str:
    """``DigestAuthenticationProvider.generateDigest``."""
    user = user_password.split(":", 1)[0]
    sha = hashlib.sha1(user_password.encode("utf-8")).digest()
    return f"{user}:{base64.b64encode(sha).decode('ascii')}"


def _java_split_len(s: str, sep: str) -> int:
    """len(s.split(sep)) as Java's String.split (trailing empty strings removed)."""
    parts = s.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return len(parts) if s else 1


def _ip_network(spec: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    addr, _, bits = spec.partition("/")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return None
    if bits:
        if not bits.isdigit() or int(bits) > ip.max_prefixlen:
            return None
        return ipaddress.ip_network(f"{addr}/{bits}", strict=False)
    return ipaddress.ip_network(f"{addr}/{ip.max_prefixlen}")


def _valid(scheme: str, ident: str) -> bool:
    if scheme == "digest":
        return _java_split_len(ident, ":") == 2
    if scheme == "ip":
        return _ip_network(ident) is not None
    return False


def _matches(scheme: str, auth_id: str, acl_id: str) -> bool:
    if scheme == "ip":
        net = _ip_network(acl_id)
        try:
            return net is not None and ipaddress.ip_address(auth_id) in net
        except ValueError:
            return False
    return auth_id == acl_id


KNOWN_SCHEMES = frozenset({"digest", "ip"})
#: Schemes whose provider ``isAuthenticated()`` (``ip`` is not): what an ``auth`` ACL expands to.
AUTHENTICATED_SCHEMES = frozenset({"digest"})


def check(acl: Sequence[r.ACL], perm: int, ids: Sequence[tuple[str, str]]) -> bool:
    if not acl:
        return True
    for scheme, _ in ids:
        if scheme == "super":
            return True
    for a in acl:
        if a.perms & perm:
            s, i = a.id.scheme, a.id.id
            if s == "world" and i == "anyone":
                return True
            if s in KNOWN_SCHEMES:
                for auth_scheme, auth_id in ids:
                    if auth_scheme == s and _matches(s, auth_id, i):
                        return True
    return False


def fixup(acl: Sequence[r.ACL] | None, ids: Sequence[tuple[str, str]]) -> tuple[r.ACL, ...]:
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
        if s == "world" and a.id.id == "anyone":
            out.append(a)
        elif s == "auth":
            valid = False
            for auth_scheme, auth_id in ids:
                if auth_scheme in AUTHENTICATED_SCHEMES:
                    valid = True
                    out.append(r.ACL(a.perms, r.Id(auth_scheme, auth_id)))
            if not valid:
                raise ACLError(Code.INVALIDACL)
        else:
            if s not in KNOWN_SCHEMES or a.id.id is None or not _valid(s, a.id.id):
                raise ACLError(Code.INVALIDACL)
            out.append(a)
    return tuple(out)


def authenticate(
    scheme: str, auth: bytes | None, remote_ip: str, super_digest: str | None
) -> list[tuple[str, str]] | None:
    """Ids an AuthPacket adds to the session, or None for AUTHFAILED."""
    if scheme == "digest":
        ident = digest_of((auth or b"").decode("utf-8", "replace"))
        ids = [("digest", ident)]
        if super_digest is not None and ident == super_digest:
            ids.insert(0, ("super", ""))
        return ids
    if scheme == "ip":
        return [("ip", remote_ip)]
    return None
