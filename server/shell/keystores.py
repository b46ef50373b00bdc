"""Key and trust stores as ZooKeeper reads them: ``<prefix>keyStore.*`` / ``<prefix>trustStore.*``
-> a private key with its certificate chain, or a list of trusted certificates.

Theory
------
ZooKeeper (``X509Util.createKeyManager`` / ``createTrustManager``, ``KeyStoreFileType``,
``FileKeyStoreLoaderBuilderProvider``) reads a store in three steps, and trizk follows each:

1. **Password**: ``<store>.password``, or the content of the file ``<store>.passwordPath`` when
   that is set (``SecretUtils.readSecret``: UTF-8, one trailing line separator dropped; the file
   wins over the password). No password is the empty password.
2. **Type**: ``<store>.type`` upper-cased must name a ``KeyStoreFileType`` -- JKS, PEM, PKCS12 or
   BCFKS (anything else, JCEKS included, is "Bad value for <prefix>keyStore.type"); without
   it the file name's extension decides, compared case-sensitively: ``.jks``, ``.pem``,
   ``.p12``, ``.bcfks`` ("Unable to auto-detect store file type from file name" otherwise).
3. **Content**: the JKS and PKCS12 loaders call ``KeyStore.getInstance("JKS"|"PKCS12")``, and
   Java 9+ (``keystore.type.compat=true``) makes both of those *dual format*: the bytes decide.
   A file starting with JKS's magic ``FEEDFEED`` is read as JKS whatever its type says, any
   other as PKCS12 (DER). This is why the ``.jks`` files Java 17's keytool writes (PKCS12
   bytes) load, and why a real JKS store named ``.p12`` loads too. A JCEKS store (magic
   ``CECECECE``) is read by neither loader: Java answers "Invalid keystore format", and so does
   trizk (checked with Java 17's ``KeyStore.getInstance("JKS").load``; ZooKeeper 3.8 and 3.9
   have no JCEKS type). BCFKS needs the BouncyCastle FIPS provider, which a stock ZooKeeper
   does not ship: refused. PEM (``PEMFileLoader``): a key store file holds the private key
   (PKCS#8, encrypted when a password is set, or a traditional RSA/EC key) and its
   certificates; a trust store file holds certificates.

JKS stores are decoded with `pyjks <https://pypi.org/project/pyjks/>`_ (the store's keyed
SHA-1 integrity check with the store password, then each private key with that same password:
``KeyManagerFactory.init(ks, keyStorePassword)`` uses the store password for the keys, so a key
with another password is "Cannot recover key"), PKCS12 with ``cryptography``.

What a store yields:

* a **key store**: its first private key entry's key and certificate chain. Java's PKCS12 keeps
  each key's chain by ``localKeyId``; ``cryptography`` gives the key's certificate and the
  other certificates, so the chain is rebuilt from those by issuer name and signature (the
  other certificates that are not on the key's chain -- keytool's trusted entries -- are left
  out, as Java's key manager presents only the entry's chain);
* a **trust store**: the trust anchors, ``PKIXBuilderParameters(KeyStore)``'s "most-trusted CA
  certificates": a JKS store's trusted certificate entries, every certificate of a PKCS12 store
  that is not a key's (Java 17 marks keytool's with an attribute cryptography does not expose),
  every certificate of a PEM file. An empty set is Java's "the trustAnchors parameter must be
  non-empty".

Every failure is a :class:`StoreError` whose text names the property and the file, e.g.
``zookeeper.ssl.keyStore.location /etc/zk/server.jks: Keystore was tampered with, or password
was incorrect`` -- one line, which the server logs before it exits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

__all__ = [
    "KEYSTORE_FILE_TYPES",
    "KeyMaterial",
    "StoreConfig",
    "StoreError",
    "load_key_store",
    "load_trust_store",
    "read_secret",
    "store_file_type",
]

#: ``KeyStoreFileType`` (ZooKeeper 3.8/3.9) and each type's default file extension.
KEYSTORE_FILE_TYPES: Mapping[str, str] = {
    "JKS": ".jks",
    "PEM": ".pem",
    "PKCS12": ".p12",
    "BCFKS": ".bcfks",
}
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"


class StoreError(ValueError):
    """A key or trust store cannot be used; the text names the property and the file."""


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """One store's settings, read as ``X509Util`` reads them."""

    #: the property that names the file, e.g. ``zookeeper.ssl.keyStore.location``
    location_key: str
    location: str
    password: str = ""
    #: ``<store>.type`` as written (None when not set)
    type: str | None = None

    @property
    def stem(self) -> str:
        """``zookeeper.ssl.keyStore`` of ``zookeeper.ssl.keyStore.location``."""
        return self.location_key.removesuffix(".location")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], stem: str) -> StoreConfig | None:
        """The store ``stem`` (``zookeeper.ssl.keyStore``, ``zookeeper.ssl.quorum.trustStore``):
        None when its location is not set (``X509Util`` then warns "<key> not specified")."""

        def get(suffix: str) -> str:
            return props.get(f"{stem}.{suffix}", "") or ""

        location = get("location")
        if not location:
            return None
        # X509Util.getPasswordFromConfigPropertyOrFile: the file, when named, wins
        password = get("password")
        path = get("passwordPath")
        if path:
            password = read_secret(path, f"{stem}.passwordPath")
        return cls(f"{stem}.location", location, password, get("type") or None)


def read_secret(path: str, key: str) -> str:
    """``SecretUtils.readSecret``: the file's text (UTF-8) less one trailing line separator."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError as e:
        raise StoreError(f"{key} {path}: cannot read the secret: {e.strerror or e}") from None
    return text.removesuffix(os.linesep)


def store_file_type(cfg: StoreConfig) -> str:
    """``KeyStoreFileType.fromPropertyValueOrFileName``: the declared type or the extension's."""
    if cfg.type is not None:
        declared = cfg.type.upper()
        if declared not in KEYSTORE_FILE_TYPES:
            raise StoreError(
                f"Bad value for {cfg.stem}.type: {cfg.type} (ZooKeeper reads "
                f"{', '.join(KEYSTORE_FILE_TYPES)})"
            )
        return declared
    ext = os.path.splitext(cfg.location)[1]
    for name, default_ext in KEYSTORE_FILE_TYPES.items():
        if ext == default_ext:
            return name
    raise StoreError(
        f"{cfg.location_key} {cfg.location}: Unable to auto-detect store file type from file "
        f"name (set {cfg.stem}.type, or name the file .jks, .pem, .p12 or .bcfks)"
    )


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """A key store's private key (PKCS#8 PEM, unencrypted) and certificate chain, leaf first."""

    key_pem: bytes
    chain: tuple[x509.Certificate, ...]
    #: the format the bytes were read as (JKS, PKCS12, PEM)
    format: str

    def chain_pem(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in self.chain)


def _read(cfg: StoreConfig) -> bytes:
    try:
        with open(cfg.location, "rb") as f:
            return f.read()
    except OSError as e:
        raise StoreError(f"{cfg.location_key} {cfg.location}: {e.strerror or e}") from None


def _fail(cfg: StoreConfig, why: str) -> StoreError:
    return StoreError(f"{cfg.location_key} {cfg.location}: {why}")


def _content_format(cfg: StoreConfig, declared: str, data: bytes) -> str:
    """Java 17's dual-format JKS/PKCS12 key stores: the bytes decide (module docstring)."""
    if declared == "BCFKS":
        raise _fail(
            cfg,
            "BCFKS stores need the BouncyCastle FIPS provider, which ZooKeeper does not ship "
            "and trizk does not read; convert it with keytool -importkeystore -deststoretype "
            "PKCS12",
        )
    if declared == "PEM":
        return "PEM"
    if data.startswith(_JKS_MAGIC):
        return "JKS"
    if data.startswith(_JCEKS_MAGIC):
        raise _fail(
            cfg,
            "Invalid keystore format (a JCEKS store: ZooKeeper's JKS and PKCS12 loaders do not "
            "read JCEKS; convert it with keytool -importkeystore -deststoretype PKCS12)",
        )
    if not data.startswith(b"\x30"):
        raise _fail(cfg, f"Invalid keystore format (neither JKS nor PKCS12; type {declared})")
    return "PKCS12"


def _load_jks(cfg: StoreConfig, data: bytes) -> tuple[list[tuple[bytes, list[bytes]]], list[bytes]]:
    """([(PKCS#8 DER key, [DER certificate, ...])], [trusted DER certificate, ...])."""
    import jks  # pyjks

    try:
        store = jks.KeyStore.loads(data, cfg.password, try_decrypt_keys=False)
    except jks.KeystoreSignatureException:
        raise _fail(cfg, "Keystore was tampered with, or password was incorrect") from None
    except (jks.KeystoreException, ValueError, EOFError) as e:
        raise _fail(cfg, f"Invalid keystore format ({e})") from None
    keys: list[tuple[bytes, list[bytes]]] = []
    for alias, entry in store.private_keys.items():
        try:
            entry.decrypt(cfg.password)
        except jks.KeystoreException:
            raise _fail(
                cfg,
                f"Cannot recover key (the key of entry {alias!r} has a password other than the "
                "store's: ZooKeeper reads keys with the store password)",
            ) from None
        keys.append((bytes(entry.pkey_pkcs8), [bytes(der) for _, der in entry.cert_chain]))
    trusted = [bytes(entry.cert) for entry in store.certs.values()]
    return keys, trusted


def _load_pkcs12(
    cfg: StoreConfig, data: bytes
) -> tuple[PrivateKeyTypes | None, x509.Certificate | None, list[x509.Certificate]]:
    try:
        p12 = pkcs12.load_pkcs12(data, cfg.password.encode() if cfg.password else None)
    except ValueError as e:
        text = str(e)
        if "password" in text.lower() or "mac" in text.lower():
            raise _fail(cfg, "keystore password was incorrect") from None
        raise _fail(cfg, f"Invalid keystore format ({text})") from None
    cert = p12.cert.certificate if p12.cert is not None else None
    return p12.key, cert, [c.certificate for c in p12.additional_certs]


def _chain_from(leaf: x509.Certificate, pool: list[x509.Certificate]) -> list[x509.Certificate]:
    """The leaf and its issuers found in ``pool`` (by issuer name and signature)."""
    chain = [leaf]
    rest = [c for c in pool if c != leaf]
    while True:
        last = chain[-1]
        if last.issuer == last.subject:
            return chain
        for c in rest:
            try:
                last.verify_directly_issued_by(c)
            except Exception:  # another name, or cryptography's InvalidSignature
                continue
            chain.append(c)
            rest.remove(c)
            break
        else:
            return chain


def _pem_key(key: PrivateKeyTypes) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem_certificates(cfg: StoreConfig, data: bytes) -> list[x509.Certificate]:
    if b"-----BEGIN CERTIFICATE-----" not in data:
        return []
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError as e:
        raise _fail(cfg, f"cannot read the PEM certificates ({e})") from None


def load_key_store(cfg: StoreConfig) -> KeyMaterial:
    """The key store's private key and chain (raises :class:`StoreError`)."""
    declared = store_file_type(cfg)
    data = _read(cfg)
    fmt = _content_format(cfg, declared, data)
    if fmt == "PEM":
        certs = _pem_certificates(cfg, data)
        try:
            key = serialization.load_pem_private_key(
                data, cfg.password.encode() if cfg.password else None
            )
        except (ValueError, TypeError) as e:
            raise _fail(
                cfg,
                f"cannot read the PEM private key ({e}; a PEM key store holds the key and its "
                "certificates, the key encrypted when a password is set)",
            ) from None
        if not certs:
            raise _fail(cfg, "the PEM key store has no certificate")
        return KeyMaterial(_pem_key(key), tuple(certs), fmt)
    if fmt == "JKS":
        keys, _trusted = _load_jks(cfg, data)
        if not keys:
            raise _fail(cfg, "the key store has no private key entry")
        der_key, der_chain = keys[0]
        key = serialization.load_der_private_key(der_key, None)
        chain = tuple(x509.load_der_x509_certificate(d) for d in der_chain)
        return KeyMaterial(_pem_key(key), chain, fmt)
    p12_key, cert, others = _load_pkcs12(cfg, data)
    if p12_key is None or cert is None:
        raise _fail(cfg, "the key store has no private key entry")
    return KeyMaterial(_pem_key(p12_key), tuple(_chain_from(cert, others)), fmt)


def load_trust_store(cfg: StoreConfig) -> tuple[x509.Certificate, ...]:
    """The trust anchors of a trust store (raises :class:`StoreError`)."""
    declared = store_file_type(cfg)
    data = _read(cfg)
    fmt = _content_format(cfg, declared, data)
    if fmt == "PEM":
        anchors = _pem_certificates(cfg, data)
    elif fmt == "JKS":
        _keys, trusted = _load_jks(cfg, data)
        anchors = [x509.load_der_x509_certificate(d) for d in trusted]
    else:
        p12_key, cert, others = _load_pkcs12(cfg, data)
        anchors = others if p12_key is not None else ([cert] if cert else []) + others
    if not anchors:
        raise _fail(cfg, "the trustAnchors parameter must be non-empty (no trusted certificate)")
    return tuple(anchors)
