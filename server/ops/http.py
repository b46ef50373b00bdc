"""The small HTTP/1.1 server that the AdminServer, ``/metrics`` and the test controls share.

Theory of operation
===================
Each of the three answers plain requests from probes, scrapers and test code with one pure
function ``respond(method, target) -> HttpAnswer`` (or an awaitable of one, for an answer that
waits on the server); this module is the Trio shell around it: :func:`serve_http` listens,
one task per connection (:func:`handle_http`) runs h11 (the sans-IO HTTP/1.1 state machine),
keeps the connection alive between requests and closes it after ``idle_timeout_ms`` without
one or :data:`MAX_REQUESTS_PER_CONNECTION` requests. A request head larger than
:data:`MAX_REQUEST_HEAD` or malformed gets h11's status hint and the connection is closed. A
port that cannot be bound is logged and the server carries on without that listener.

:func:`error_page` is Jetty's error page (ZooKeeper's AdminServer and simpleclient's servlet
answer 404/405 with it).
"""

from __future__ import annotations

import errno
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

import trio

import trizk

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "MAX_REQUESTS_PER_CONNECTION",
    "MAX_REQUEST_HEAD",
    "SERVER_HEADER",
    "HttpAnswer",
    "HttpRequest",
    "RequestResponder",
    "Responder",
    "error_page",
    "handle_http",
    "serve_http",
]

log = logging.getLogger("trizk.server.ops.http")

#: Jetty's (``admin.idleTimeout``) default: a keep-alive connection idle this long is closed.
DEFAULT_IDLE_TIMEOUT = 30_000
#: Bound on one request's head (h11 buffers at most this much of an incomplete event).
MAX_REQUEST_HEAD = 16 * 1024
#: At most this many requests are read on one keep-alive connection.
MAX_REQUESTS_PER_CONNECTION = 1000
#: Bound on one request's body (the AdminServer's POST commands read it; the others ignore
#: it): a larger body is answered 413 and the connection closed.
MAX_REQUEST_BODY = 256 * 1024 * 1024
SERVER_HEADER = f"trizk/{trizk.__version__}"


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """One response: status, headers (Date, Content-Length and Server are added) and body."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    #: Set when the answer comes from a command: its name (as asked) and keyword arguments.
    command: str | None = None
    kwargs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One whole request, for a responder that needs more than method and target (the
    AdminServer's authenticated commands: the ``Authorization`` header, the client's address,
    a POST body)."""

    method: str
    target: str
    #: header names lower-cased, values as sent, in order
    headers: tuple[tuple[str, str], ...]
    body: bytes
    #: the client's IP address (``getRemoteAddr``)
    remote_ip: str
    #: an HTTPS client's certificate chain as presented, DER, leaf first (empty: none)
    peer_certs: tuple[bytes, ...] = ()

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        low = name.lower()
        for k, v in self.headers:
            if k == low:
                return v
        return None


_REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Server Error",
    503: "Service Unavailable",
}


def error_page(status: int, path: str, message: str) -> HttpAnswer:
    # Jetty's ErrorHandler page, in short.
    body = (
        "<html>\n<head>\n"
        '<meta http-equiv="Content-Type" content="text/html;charset=ISO-8859-1"/>\n'
        f"<title>Error {status} {message}</title>\n</head>\n"
        f"<body><h2>HTTP ERROR {status} {message}</h2>\n<table>\n"
        f"<tr><th>URI:</th><td>{_html(path)}</td></tr>\n"
        f"<tr><th>STATUS:</th><td>{status}</td></tr>\n"
        f"<tr><th>MESSAGE:</th><td>{message}</td></tr>\n"
        "</table>\n</body>\n</html>\n"
    )
    return HttpAnswer(
        status,
        (
            ("Cache-Control", "must-revalidate,no-cache,no-store"),
            ("Content-Type", "text/html;charset=iso-8859-1"),
        ),
        body.encode("latin-1", "replace"),
    )


def _html(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


#: ``respond(method, target)``: the answer, or an awaitable of it (a responder that waits on
#: the server, as the test controls' ``expire`` does)
Responder = Callable[[str, str], HttpAnswer | Awaitable[HttpAnswer]]
#: ``respond(request)``: the same, given the whole request (:class:`HttpRequest`)
RequestResponder = Callable[[HttpRequest], HttpAnswer | Awaitable[HttpAnswer]]


#: ``prepare(stream)``: the stream to speak HTTP on, the headers every answer on it gets and
#: the client's certificate chain (DER, leaf first; empty: none) -- an HTTPS listener's
#: handshake: :mod:`trizk.server.ops.admin` -- or None to drop the connection (the function
#: has closed or will close ``stream``)
Prepare = Callable[
    [trio.SocketStream],
    Awaitable[tuple[trio.abc.Stream, list[tuple[str, str]], tuple[bytes, ...]] | None],
]


async def handle_http(
    stream: trio.abc.Stream,
    respond: Responder,
    idle_timeout_ms: int,
    *,
    logger: logging.Logger = log,
    headers: Sequence[tuple[str, str]] = (),
    respond_request: RequestResponder | None = None,
    remote_ip: str = "",
    peer_certs: tuple[bytes, ...] = (),
) -> None:
    """One HTTP/1.1 connection: requests answered by ``respond(method, target)`` until the
    client closes, ``idle_timeout_ms`` passes without a request, or the request bound.
    ``logger``: the service's (a bad request at debug level, an internal error); ``headers``:
    added to every answer after ``Date``; ``respond_request``, when given, answers instead
    of ``respond`` and is given the whole request, from ``remote_ip`` (with ``peer_certs``)."""
    import h11  # here, not at the top: a server that is never asked over HTTP never loads it

    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD)
    idle = max(idle_timeout_ms, 1) / 1000
    try:
        for _ in range(MAX_REQUESTS_PER_CONNECTION):
            request: h11.Request | None = None
            received = bytearray()
            too_large = False
            with trio.move_on_after(idle):
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        data = await stream.receive_some(64 * 1024)
                        conn.receive_data(bytes(data))
                        continue
                    if isinstance(event, h11.Request):
                        request = event
                        continue
                    if isinstance(event, h11.Data):
                        if len(received) + len(event.data) > MAX_REQUEST_BODY:
                            too_large = True
                        elif respond_request is not None:
                            received += event.data
                        continue
                    if isinstance(event, h11.EndOfMessage) and request is not None:
                        break
                    if isinstance(event, (h11.ConnectionClosed, h11.PAUSED)):
                        return
            if request is None or conn.our_state is not h11.SEND_RESPONSE:
                return  # idle timeout (Jetty closes idle connections) or nothing to answer
            method = request.method.decode("ascii", "replace")
            target = request.target.decode("latin-1")
            answered: HttpAnswer | Awaitable[HttpAnswer]
            if too_large:
                answered = HttpAnswer(413, (("Connection", "close"),), b"")
            elif respond_request is not None:
                fields = tuple(
                    (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in request.headers
                )
                answered = respond_request(
                    HttpRequest(method, target, fields, bytes(received), remote_ip, peer_certs)
                )
            else:
                answered = respond(method, target)
            result = await answered if inspect.isawaitable(answered) else answered
            all_headers = [
                ("Date", formatdate(usegmt=True)),
                *headers,
                *result.headers,
                ("Content-Length", str(len(result.body))),
                ("Server", SERVER_HEADER),
            ]
            reason = _REASONS.get(result.status, "OK").encode()
            await stream.send_all(
                conn.send(
                    h11.Response(status_code=result.status, headers=all_headers, reason=reason)
                )
                or b""
            )
            if method != "HEAD":
                await stream.send_all(conn.send(h11.Data(data=result.body)) or b"")
            await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()
    except h11.RemoteProtocolError as e:
        logger.debug("bad HTTP request: %s", e)
        if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            try:
                body = b"Bad Request"
                await stream.send_all(
                    conn.send(
                        h11.Response(
                            status_code=e.error_status_hint,
                            headers=[("Content-Length", str(len(body))), ("Connection", "close")],
                        )
                    )
                    or b""
                )
                await stream.send_all(conn.send(h11.Data(data=body)) or b"")
            except (h11.LocalProtocolError, trio.BrokenResourceError, OSError):
                pass
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    except Exception:
        # A bug costs this request only: the server and the other probes go on.
        logger.exception("HTTP server: internal error")
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def serve_http(
    host: str,
    port: int,
    respond: Responder,
    idle_timeout_ms: int,
    *,
    on_error: str,
    on_started: Callable[[int], None] = lambda port: None,
    logger: logging.Logger = log,
    prepare: Prepare | None = None,
    respond_request: RequestResponder | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``host:port`` and serve ``respond`` (or ``respond_request``: see
    :func:`handle_http`) until cancelled; ``task_status.started`` with the bound port (after
    ``on_started(port)``), or None when the port cannot be bound: logged as ``on_error`` on
    ``logger``, the server carries on without this listener."""
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as e:
        reason = "address in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
        logger.error("%s: %s; carrying on without it", on_error, reason)
        task_status.started(None)
        return
    bound = int(listeners[0].socket.getsockname()[1])
    on_started(bound)

    async def handler(stream: trio.SocketStream) -> None:
        try:
            remote = str(stream.socket.getpeername()[0])
        except OSError:
            remote = ""
        kw: dict[str, Any] = {"respond_request": respond_request, "remote_ip": remote}
        if prepare is None:
            await handle_http(stream, respond, idle_timeout_ms, logger=logger, **kw)
            return
        prepared = await prepare(stream)
        if prepared is not None:
            io, headers, certs = prepared
            kw["peer_certs"] = certs
            await handle_http(io, respond, idle_timeout_ms, logger=logger, headers=headers, **kw)

    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, listeners)
        task_status.started(bound)
