"""The Kerberos side of SASL GSSAPI: the service's keys from its keytab and one GSS acceptor a
connection, through python-gssapi (MIT krb5's libgssapi_krb5). Shell: reads files and the
process environment.

ZooKeeper logs the ``Server`` section's ``Krb5LoginModule`` in at start-up (``Login``); a login
that fails stops the server with "Could not configure server because SASL configuration did
not allow the ZooKeeper server to authenticate itself properly". :func:`login` does the same
checks with the keytab trizk will accept with (present, readable, holding the principal's
keys) and raises :class:`~trizk.server.auth.sasl.JaasError` with one line saying which.

The Kerberos configuration: a JVM reads ``-Djava.security.krb5.conf`` (else ``/etc/krb5.conf``);
MIT's library reads ``$KRB5_CONFIG``. When the property is given and the variable is not,
:func:`login` sets the variable, so one zoo.cfg/``-D`` set-up serves both servers. The default
realm (``java.security.krb5.realm``, else the configuration's ``default_realm``) feeds
``KerberosName``'s ``DEFAULT`` rule.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from trizk.server.auth import sasl as saslmod

log = logging.getLogger(__name__)

#: the Kerberos v5 mechanism
KRB5_MECH_OID = "1.2.840.113554.1.2.2"


def krb5_config_path(properties: Mapping[str, str]) -> str:
    path = properties.get("java.security.krb5.conf")
    if path:
        return path
    return os.environ.get("KRB5_CONFIG", "/etc/krb5.conf").split(":")[0]


def default_realm(properties: Mapping[str, str]) -> str | None:
    """``KerberosUtil.getDefaultRealm``: ``java.security.krb5.realm``, else ``default_realm``
    of the ``[libdefaults]`` of the configuration file."""
    realm = properties.get("java.security.krb5.realm")
    if realm:
        return realm
    try:
        with open(krb5_config_path(properties), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    section = ""
    for line in text.splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        m = re.match(r"\[(\w+)\]", line)
        if m:
            section = m.group(1)
            continue
        if section == "libdefaults":
            key, eq, value = line.partition("=")
            if eq and key.strip() == "default_realm":
                return value.strip()
    return None


class _Context:
    """What both ends of a GSS-API context share: its state and its per-message wrapping."""

    _ctx: Any
    _errors: tuple[type[Exception], ...]
    _established: bool

    @property
    def established(self) -> bool:
        return self._established

    def wrap(self, data: bytes) -> bytes:
        try:
            return bytes(self._ctx.wrap(data, False).message)
        except self._errors as e:
            raise saslmod.GssError(_message(e)) from None

    def unwrap(self, data: bytes) -> bytes:
        try:
            return bytes(self._ctx.unwrap(data).message)
        except self._errors as e:
            raise saslmod.GssError(_message(e)) from None


class _Acceptor(_Context):
    """:class:`~trizk.server.auth.sasl.GssAcceptor` over ``gssapi.SecurityContext``."""

    def __init__(self, creds: Any) -> None:
        import gssapi

        self._errors = _gss_errors()
        self._established = False
        self._ctx = gssapi.SecurityContext(creds=creds, usage="accept")

    def step(self, token: bytes) -> bytes | None:
        # python-gssapi's step() keeps a failure of gss_accept_sec_context and raises it from
        # the next use of the context: ask for `complete` inside the same try
        try:
            out: bytes | None = self._ctx.step(token)
            self._established = bool(self._ctx.complete)
        except self._errors as e:
            raise saslmod.GssError(_message(e)) from None
        return out or None

    def initiator(self) -> str:
        return str(self._ctx.initiator_name)


def _gss_errors() -> tuple[type[Exception], ...]:
    """What python-gssapi raises: GSS-API status errors and its own usage errors."""
    import gssapi.exceptions

    return (gssapi.exceptions.GSSError, gssapi.exceptions.GeneralError)


def _message(e: BaseException) -> str:
    gen = getattr(e, "gen_message", None)
    text = gen() if callable(gen) else str(e)
    return " ".join(str(text).split())


def login(
    config: saslmod.SaslServerConfig, properties: Mapping[str, str]
) -> saslmod.SaslServerConfig:
    """The config with its acceptor factory and default realm, or JaasError (one line)."""
    krb = config.kerberos
    if krb is None:
        return config
    prefix = (
        "Could not configure server because SASL configuration did not allow the ZooKeeper "
        f"server to authenticate itself properly: {krb.principal}: "
    )
    krb.service_and_host()  # a principal that is not service/host@REALM is refused now
    acceptor = acceptor_factory(krb, properties, prefix)

    rules = properties.get("zookeeper.security.auth_to_local", "DEFAULT").strip()
    if rules != "DEFAULT":
        # KerberosName.setConfiguration reads these rules; trizk applies DEFAULT only
        log.warning(
            "zookeeper.security.auth_to_local is not supported: sasl ids are derived with "
            "the DEFAULT rule only (ignoring %r)",
            rules,
        )
    return dataclasses.replace(config, acceptor=acceptor, default_realm=default_realm(properties))


def _use_krb5_conf(properties: Mapping[str, str]) -> None:
    if properties.get("java.security.krb5.conf") and "KRB5_CONFIG" not in os.environ:
        os.environ["KRB5_CONFIG"] = properties["java.security.krb5.conf"]


def _check_keytab(krb: saslmod.KerberosLogin, prefix: str) -> str:
    keytab = krb.key_tab
    if keytab is None:
        raise saslmod.JaasError(prefix + "no keyTab option in the JAAS section")
    if not os.path.isfile(keytab):
        raise saslmod.JaasError(prefix + f"keyTab {keytab} does not exist")
    if not os.access(keytab, os.R_OK):
        raise saslmod.JaasError(prefix + f"keyTab {keytab} is not readable")
    try:
        import gssapi  # noqa: F401
    except ImportError:
        raise saslmod.JaasError(
            prefix + "python-gssapi is not installed (pip install gssapi)"
        ) from None
    return keytab


def _keytab_credentials(
    krb: saslmod.KerberosLogin,
    properties: Mapping[str, str],
    prefix: str,
    usage: str,
    store: Callable[[bytes], dict[bytes | str, bytes | str]],
) -> Any:
    """Credentials of ``usage`` for ``krb``'s principal, acquired at once from its keytab
    (``store(keytab)``: the credential store entries) and inquired, so that a keytab without
    the principal's keys, or a KDC that refuses it, is a JaasError (one line) at start-up."""
    _use_krb5_conf(properties)
    keytab = _check_keytab(krb, prefix)
    import gssapi

    try:
        name = gssapi.Name(krb.principal, gssapi.NameType.kerberos_principal)
        creds = gssapi.Credentials(
            name=name,
            usage=usage,
            mechs=[gssapi.OID.from_int_seq(KRB5_MECH_OID)],
            store=store(keytab.encode()),
        )
        creds.lifetime  # noqa: B018 -- inquire: the credentials are usable
    except _gss_errors() as e:
        raise saslmod.JaasError(prefix + _message(e)) from None
    return creds


def acceptor_factory(
    krb: saslmod.KerberosLogin, properties: Mapping[str, str], prefix: str
) -> Callable[[], saslmod.GssAcceptor]:
    """Accepting credentials for ``krb``'s principal from its keytab (``Krb5LoginModule``'s
    login with ``storeKey=true``): a new acceptor per exchange, or JaasError (one line)."""
    # MIT's acquisition checks that the keytab has the principal's keys, as Krb5LoginModule's
    # login does ("Unable to obtain password from user")
    creds = _keytab_credentials(krb, properties, prefix, "accept", lambda k: {b"keytab": k})

    def acceptor() -> saslmod.GssAcceptor:
        return _Acceptor(creds)

    return acceptor


class _Initiator(_Context):
    """A quorum learner's :class:`~trizk.server.auth.quorumsasl.GssInitiator` over
    ``gssapi.SecurityContext`` (no mutual authentication asked, as the JDK's GssKrb5Client)."""

    def __init__(self, creds: Any, service: str, host: str) -> None:
        import gssapi

        self._errors = _gss_errors()
        target = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
        self._ctx = gssapi.SecurityContext(
            name=target,
            creds=creds,
            usage="initiate",
            mech=gssapi.OID.from_int_seq(KRB5_MECH_OID),
            # no mutual authentication (the JDK's default), integrity and confidentiality
            flags=gssapi.RequirementFlag.integrity | gssapi.RequirementFlag.confidentiality,
        )
        self._established = False

    def step(self, token: bytes | None) -> bytes | None:
        try:
            out: bytes | None = self._ctx.step(token)
            self._established = bool(self._ctx.complete)
        except self._errors as e:
            raise saslmod.GssError(_message(e)) from None
        return out or None


def initiator_factory(
    krb: saslmod.KerberosLogin, properties: Mapping[str, str], prefix: str
) -> Callable[[str, str], Any]:
    """Initiating credentials for ``krb``'s principal from its keytab (``Krb5LoginModule``
    with ``useKeyTab=true``: the TGT is obtained at once, as Login does at start-up): a new
    initiator per exchange ``(service, host)``, or JaasError (one line)."""
    # a memory cache of this process: the TGT from the keytab, renewed by MIT's library from
    # the client keytab when it expires
    creds = _keytab_credentials(
        krb,
        properties,
        prefix,
        "initiate",
        lambda k: {b"client_keytab": k, b"ccache": f"MEMORY:trizk-quorum-{id(krb)}".encode()},
    )

    def initiator(service: str, host: str) -> _Initiator:
        return _Initiator(creds, service, host)

    return initiator
