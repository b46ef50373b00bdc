"""The network side of ``ssl.crl`` / ``ssl.ocsp``: CRLs fetched from the certificates' HTTP
distribution points and OCSP requests POSTed to their responders, the verdicts left to
:mod:`trizk.server.auth.revocation`.

Theory
------
A refused or accepted chain must be the one Java ZooKeeper refuses or accepts with the same
settings (that module's docstring: legacy ``RevocationChecker``, hard fail). This shell does
the JVM's I/O for it:

* **CRLs** (``DistributionPointFetcher`` / ``URICertStore``): each ``http://`` URI of the
  certificate's distribution points is fetched with a GET; a failed fetch (refused, timed
  out, not 200) leaves that point without a CRL and, when no point gave a usable CRL, makes
  the reason "... due to network error" (an answer that is not a CRL does not). A fetched
  CRL is kept for the next handshakes until its nextUpdate, but looked at again 30 s after
  it was fetched (``URICertStore.CHECK_INTERVAL``: Java asks the server again after 30 s, so
  a newly revoked certificate is refused within about that long). Other schemes
  (``ldap://``, ``file:``) are not fetched: that point has no CRL (ZooKeeper's JVM would
  read them).
* **OCSP** (``OCSP.check``): the request (one SHA-1 CertId, no nonce) is POSTed as
  ``application/ocsp-request`` to the responder the certificate names; a response is not
  cached (the JDK asks on every handshake). A failed exchange is "Unable to determine
  revocation status due to network error".
* Every exchange is bounded: 15 s for the connection and the answer together (the JDK's
  ``com.sun.security.crl.timeout`` and ``com.sun.security.ocsp.timeout`` defaults), 16 MiB at
  most of body. A handshake waiting for a fetch holds nothing but its own connection.
"""

from __future__ import annotations

import datetime
import logging
import urllib.parse
from dataclasses import dataclass

import h11
import trio
from cryptography import x509

from trizk.server.auth import revocation as rv

__all__ = ["FetchError", "RevocationFetcher", "http_exchange"]

log = logging.getLogger(__name__)

#: the JDK's default connect + read timeouts of CRL and OCSP fetches (seconds)
FETCH_TIMEOUT = 15.0
#: ``URICertStore.CHECK_INTERVAL``: a cached CRL is fetched again after this long
CRL_RECHECK = datetime.timedelta(seconds=30)
MAX_BODY = 16 << 20


class FetchError(Exception):
    """An HTTP exchange that gave no usable body (one line saying why)."""


async def http_exchange(
    url: str, body: bytes | None = None, content_type: str = "", *, timeout: float = FETCH_TIMEOUT
) -> bytes:
    """GET ``url`` (or POST ``body``) over HTTP/1.1 and return the body of a 200 answer;
    raises :class:`FetchError` for anything else, or when ``timeout`` passes."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "http" or not parts.hostname:
        raise FetchError(f"{url}: only http:// is fetched")
    try:
        port = parts.port or 80
    except ValueError as e:
        raise FetchError(f"{url}: {e}") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = [("Host", parts.netloc), ("Connection", "close"), ("Accept", "*/*")]
    if body is not None:
        headers += [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    with trio.move_on_after(timeout) as scope:
        try:
            return await _exchange(parts.hostname, port, target, headers, body)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as e:
            raise FetchError(f"{url}: {e}") from None
        except h11.ProtocolError as e:
            raise FetchError(f"{url}: bad HTTP answer ({e})") from None
    assert scope.cancelled_caught
    raise FetchError(f"{url}: no answer within {timeout:g} s")


async def _exchange(
    host: str, port: int, target: str, headers: list[tuple[str, str]], body: bytes | None
) -> bytes:
    stream = await trio.open_tcp_stream(host, port)
    async with stream:
        conn = h11.Connection(h11.CLIENT)
        method = "POST" if body is not None else "GET"
        out = conn.send(h11.Request(method=method, target=target, headers=headers)) or b""
        if body:
            out += conn.send(h11.Data(data=body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        await stream.send_all(out)
        status = 0
        received = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                received += event.data
                if len(received) > MAX_BODY:
                    raise FetchError(f"answer larger than {MAX_BODY} bytes")
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                break
        if status != 200:
            raise FetchError(f"HTTP status {status}")
        return bytes(received)


@dataclass(slots=True)
class _CachedCRL:
    crl: x509.CertificateRevocationList
    fetched: datetime.datetime


class RevocationFetcher:
    """One trust manager's revocation checks (``ssl.*`` or ``ssl.quorum.*``) with its CRL
    cache."""

    def __init__(self, policy: rv.RevocationPolicy, *, timeout: float = FETCH_TIMEOUT) -> None:
        self.policy = policy
        self.timeout = timeout
        self._crls: dict[str, _CachedCRL] = {}

    async def judge(
        self,
        path: list[x509.Certificate],
        anchor: x509.Certificate,
        now: datetime.datetime,
    ) -> str | None:
        """None when no certificate of ``path`` (leaf first, below ``anchor``) is revoked or
        of unknown status, else why (the JDK's words). Checked from the anchor down."""
        if not self.policy.enabled:
            return None
        for i in reversed(range(len(path))):
            issuer = path[i + 1] if i + 1 < len(path) else anchor
            verdict = await self.verdict(path[i], issuer, now)
            if not verdict.good:
                return rv.rejection(verdict)
        return None

    async def verdict(
        self, cert: x509.Certificate, issuer: x509.Certificate, now: datetime.datetime
    ) -> rv.Verdict:
        """One certificate's status: OCSP first with ``ssl.ocsp`` (CRLs when it fails), else
        CRLs alone."""
        if not self.policy.prefer_ocsp:
            return await self._by_crls(cert, issuer, now)
        first = await self._by_ocsp(cert, issuer, now)
        if not rv.needs_failover(self.policy, first):
            return first
        return rv.combine(self.policy, first, await self._by_crls(cert, issuer, now))

    async def _by_ocsp(
        self, cert: x509.Certificate, issuer: x509.Certificate, now: datetime.datetime
    ) -> rv.Verdict:
        uri = rv.ocsp_uri(cert)
        if uri is None:
            return rv.Verdict("unknown", rv.NO_RESPONDER)
        request = rv.ocsp_request(cert, issuer)
        try:
            answer = await http_exchange(
                uri, request, "application/ocsp-request", timeout=self.timeout
            )
        except FetchError as e:
            log.debug("OCSP request to %s failed: %s", uri, e)
            return rv.Verdict("unknown", rv.NETWORK_ERROR)
        return rv.check_ocsp(cert, issuer, answer, now)

    async def _by_crls(
        self, cert: x509.Certificate, issuer: x509.Certificate, now: datetime.datetime
    ) -> rv.Verdict:
        crls: list[x509.CertificateRevocationList] = []
        network_failed = False
        for uri in rv.crl_uris(cert):
            try:
                crl = await self._crl(uri, now)
            except FetchError as e:
                log.debug("CRL fetch from %s failed: %s", uri, e)
                network_failed = True
                continue
            if crl is not None:
                crls.append(crl)
        return rv.check_crls(cert, issuer, crls, now, network_failed=network_failed)

    async def _crl(self, uri: str, now: datetime.datetime) -> x509.CertificateRevocationList | None:
        """The CRL at ``uri`` (cached, or fetched now); None when the answer is not a CRL;
        raises :class:`FetchError` when the exchange fails."""
        cached = self._crls.get(uri)
        if cached is not None:
            next_update = cached.crl.next_update_utc
            if now < cached.fetched + CRL_RECHECK and (next_update is None or now <= next_update):
                return cached.crl
            del self._crls[uri]
        data = await http_exchange(uri, timeout=self.timeout)
        crl = rv.parse_crl(data)
        if crl is None:
            log.debug("CRL fetch from %s: not a CRL (%d bytes)", uri, len(data))
            return None
        self._crls[uri] = _CachedCRL(crl, now)
        return crl
