"""TLS for the secure client port: ZooKeeper's ``ssl.*`` settings -> an ``ssl.SSLContext``,
and the client certificate's subject as the ``x509`` scheme sees it.

Theory
------
ZooKeeper serves TLS on ``secureClientPort`` (with the Netty connection factory) from the
properties ``zookeeper.ssl.keyStore.location/password/type``, ``zookeeper.ssl.trustStore.
location/password/type`` and ``zookeeper.ssl.clientAuth`` (zoo.cfg keys ``ssl.*`` become those
properties). trizk reads the same keys:

* Store types (``X509Util`` / ``KeyStoreFileType``): the ``*.type`` property (case-insensitive)
  or, without it, the file name's extension: ``.pem`` -> PEM, ``.p12``/``.pfx`` -> PKCS12,
  ``.jks`` -> JKS, ``.bcfks`` -> BCFKS. trizk reads **PEM and PKCS12**; JKS and BCFKS are
  refused with an error that says so. A PEM key store holds the private key and the
  certificate chain in one file (``PEMFileLoader``); its password decrypts an encrypted key.
  A PEM trust store holds certificates.
* ``ssl.clientAuth``: ``need`` (the default, as ``ClientAuth.fromPropertyValue(null)``) asks for
  a certificate and fails the handshake without one; ``want`` asks but accepts none; ``none``
  does not ask.
* Without a trust store the system's default CAs verify client certificates (the JVM's
  default trust managers), but the x509 provider then has no trust manager and refuses every
  certificate: ZooKeeper closes such a connection ("No trust manager available").
* ``x509`` ids: ``X509Certificate.getSubjectX500Principal().getName()`` -- RFC 2253, most
  specific RDN first, keywords only for CN C L ST O OU STREET DC UID, any other attribute as
  ``OID=#<hex DER>``; ``,=+<>#;"\\`` escaped, a leading/trailing blank escaped
  (:func:`x509_subject`).

Only :func:`server_context` touches files (it reads the stores).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ACCEPTED_STORE_TYPES",
    "TLSConfigError",
    "TLSSettings",
    "server_context",
    "store_type",
    "x509_subject",
]

ACCEPTED_STORE_TYPES = ("PEM", "PKCS12")
_KNOWN_TYPES = ("JKS", "PEM", "PKCS12", "BCFKS")
_EXTENSIONS = {".jks": "JKS", ".pem": "PEM", ".p12": "PKCS12", ".pfx": "PKCS12", ".bcfks": "BCFKS"}
_CLIENT_AUTH = {"need": ssl.CERT_REQUIRED, "want": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


class TLSConfigError(ValueError):
    """The TLS settings cannot be used (the server does not start)."""


@dataclass(frozen=True, slots=True)
class TLSSettings:
    key_store: str
    key_store_password: str | None = None
    key_store_type: str | None = None
    trust_store: str | None = None
    trust_store_password: str | None = None
    trust_store_type: str | None = None
    client_auth: str = "need"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TLSSettings:
        def get(key: str) -> str | None:
            v = props.get("zookeeper.ssl." + key)
            return v if v not in (None, "") else None

        key_store = get("keyStore.location")
        if key_store is None:
            # X509Util.createSSLContextAndOptions: a server cannot do TLS without a key store
            raise TLSConfigError(
                "secureClientPort is set but ssl.keyStore.location is not: the TLS port needs "
                "a key store (PEM or PKCS12)"
            )
        auth = (get("clientAuth") or "need").lower()
        if auth not in _CLIENT_AUTH:
            raise TLSConfigError(
                f"ssl.clientAuth={get('clientAuth')!r}: expected need, want or none"
            )
        return cls(
            key_store=key_store,
            key_store_password=get("keyStore.password"),
            key_store_type=get("keyStore.type"),
            trust_store=get("trustStore.location"),
            trust_store_password=get("trustStore.password"),
            trust_store_type=get("trustStore.type"),
            client_auth=auth,
        )


def store_type(path: str, declared: str | None, what: str) -> str:
    """``KeyStoreFileType.fromPropertyValueOrFileName``, limited to what trizk reads."""
    if declared:
        t = declared.strip().upper()
        if t not in _KNOWN_TYPES:
            raise TLSConfigError(
                f"ssl.{what}.type={declared!r} is not a store type; trizk accepts "
                f"{' or '.join(ACCEPTED_STORE_TYPES)}"
            )
    else:
        ext = os.path.splitext(path)[1].lower()
        found = _EXTENSIONS.get(ext)
        if found is None:
            raise TLSConfigError(
                f"Unable to auto-detect store file type from file name: {path} (set "
                f"ssl.{what}.type; trizk accepts PEM (.pem) or PKCS12 (.p12, .pfx))"
            )
        t = found
    if t not in ACCEPTED_STORE_TYPES:
        raise TLSConfigError(
            f"ssl.{what}: {t} stores are not supported by trizk ({path}); convert it to "
            "PEM (.pem) or PKCS12 (.p12, .pfx), e.g. with keytool -importkeystore "
            "-deststoretype PKCS12"
        )
    return t


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise TLSConfigError(f"ssl.{what}.location {path}: {e.strerror or e}") from None


def _pkcs12(data: bytes, password: str | None, path: str, what: str) -> tuple[bytes, bytes]:
    """(PEM private key or b"", PEM certificates) of a PKCS#12 file."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:  # pragma: no cover - cryptography is a dependency of the TLS support
        raise TLSConfigError(
            f"ssl.{what}: reading PKCS12 stores needs the 'cryptography' package"
        ) from None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None
        )
    except ValueError as e:
        raise TLSConfigError(
            f"ssl.{what}.location {path}: not a readable PKCS12 store ({e})"
        ) from None
    certs = ([cert] if cert is not None else []) + list(extra)
    pem_certs = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    pem_key = b""
    if key is not None:
        pem_key = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    return pem_key, pem_certs


def server_context(settings: TLSSettings) -> ssl.SSLContext:
    """The SSLContext of the secure client port (raises TLSConfigError)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = _CLIENT_AUTH[settings.client_auth]
    # key store
    kt = store_type(settings.key_store, settings.key_store_type, "keyStore")
    data = _read(settings.key_store, "keyStore")
    if kt == "PEM":
        key_pem, cert_pem = data, data
        password = settings.key_store_password
    else:
        key_pem, cert_pem = _pkcs12(
            data, settings.key_store_password, settings.key_store, "keyStore"
        )
        password = None
        if not key_pem:
            raise TLSConfigError(
                f"ssl.keyStore.location {settings.key_store}: the PKCS12 store has no private key"
            )
    # ssl.load_cert_chain reads files only: hand it a private temporary copy.
    with tempfile.TemporaryDirectory(prefix="trizk-tls-") as d:
        chain = os.path.join(d, "chain.pem")
        fd = os.open(chain, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem if key_pem is cert_pem else key_pem + b"\n" + cert_pem)
        try:
            ctx.load_cert_chain(chain, password=password or None)
        except (ssl.SSLError, ValueError, TypeError) as e:
            raise TLSConfigError(
                f"ssl.keyStore.location {settings.key_store}: cannot load the private key and "
                f"certificate ({kt}; a PEM key store holds both the key and the chain): {e}"
            ) from None
    # trust store
    if settings.trust_store is None:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    else:
        tt = store_type(settings.trust_store, settings.trust_store_type, "trustStore")
        tdata = _read(settings.trust_store, "trustStore")
        if tt == "PKCS12":
            _, tdata = _pkcs12(
                tdata, settings.trust_store_password, settings.trust_store, "trustStore"
            )
        try:
            ctx.load_verify_locations(cadata=tdata.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as e:
            raise TLSConfigError(
                f"ssl.trustStore.location {settings.trust_store}: no certificates ({tt}): {e}"
            ) from None
    return ctx


# ------------------------------------------------------------------ x509 ids

#: RFC 2253 keywords Java's ``X500Principal.getName()`` writes (other OIDs are written dotted).
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
_ESCAPEES = ',=+<>#;"\\'


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def _der_value(tag: int, value: str) -> bytes:
    if tag == 30:  # BMPString
        body = value.encode("utf-16-be")
    elif tag == 28:  # UniversalString
        body = value.encode("utf-32-be")
    elif tag == 12:  # UTF8String
        body = value.encode("utf-8")
    else:
        body = value.encode("latin-1", "replace")
    return bytes([tag]) + _der_length(len(body)) + body


def _escape(value: str) -> str:
    out: list[str] = []
    for c in value:
        if c in _ESCAPEES:
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append("".join(f"\\{b:02X}" for b in c.encode("utf-8")))
        else:
            out.append(c)
    s = "".join(out)
    if s.startswith(" "):
        s = "\\" + s
    if s.endswith(" ") and not s.endswith("\\ "):
        s = s[:-1] + "\\ "
    return s


def x509_subject(der_cert: bytes) -> str:
    """The subject of a DER certificate as ``X500Principal.getName()`` (RFC 2253) writes it."""
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der_cert)
    rdns: list[str] = []
    for rdn in reversed(list(cert.subject.rdns)):
        avas: list[str] = []
        for attr in rdn:
            oid = attr.oid.dotted_string
            keyword = _RFC2253_KEYWORDS.get(oid)
            value = attr.value if isinstance(attr.value, str) else attr.value.decode("latin-1")
            if keyword is None:
                tag = getattr(getattr(attr, "_type", None), "value", 12)
                avas.append(f"{oid}=#{_der_value(int(tag), value).hex()}")
            else:
                avas.append(f"{keyword}={_escape(value)}")
        rdns.append("+".join(avas))
    return ",".join(rdns)
