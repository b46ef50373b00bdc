"""Test controls: expire a session, drop connections, move the clock, dump the state.

Theory of operation
===================
A test of a ZooKeeper client exists for the hard moments: the session expires, the connection
drops, time passes. ZooKeeper offers no way to cause them from outside, so tests sleep through
session timeouts or poke at client internals. A trizk server does them itself, on request:

* in-process (``trizk.testing.Server``): the test calls :class:`Controls` directly, inside the
  server's Trio loop;
* over the wire (``trizk-server --testing``): plain HTTP/1.1 on a port of its own on
  127.0.0.1, announced on the readiness line (``testing=http://127.0.0.1:PORT``), so a Java,
  Go or Node test needs no library. Never on by default; the server logs a warning when it is.

Three layers, pure to impure:

1. :func:`parse` — method + request target → an action (:class:`Expire`, :class:`Drop`,
   :class:`Advance`, :class:`Dump`, :class:`Index`) or a :class:`Reply` refusing it. Pure.
2. :class:`Controls` — performs an action on a running server (a
   :class:`~trizk.server.shell.app.TrizkServer`, seen through :class:`ControlledServer`: its
   clock, its role's front end and sequencer) and returns the JSON-able answer; the one
   implementation both ways above use.
3. :func:`serve_controls` — the HTTP listener: the AdminServer's h11 plumbing
   (:func:`trizk.server.ops.http.serve_http`), with :meth:`Controls.answer` as its responder.

The endpoints (JSON answers; errors are ``{"error": text}`` with status 400/404/405)::

    POST /expire?session=0x1234   {"expired": true}   false: unknown session or already closing
    POST /drop                    {"dropped": 2}      every client connection
    POST /drop?session=0x1234     {"dropped": 1}      that session's connection only
    POST /advance?seconds=60      {"clock_offset_ms": 60000}
    GET  /dump                    {"tree": {...}, "sessions": {...}, "watches": {...}}
    GET  /                        the list above

Session ids are decimal (as Java's ``getSessionId()`` prints them, negative included) or hex
with ``0x``. Actions are POST only, so that a browser or a crawler following a link changes
nothing. ``expire`` answers once the closeSession is committed: what the test reads next no
longer shows the session's ephemerals.

Semantics (the same in both ways): ``expire`` proposes the closeSession the session tracker
would on timeout (ephemerals deleted, watches fired, the client told EXPIRED_SESSION when it
reconnects); ``drop`` closes connections server-side, sessions live on; ``advance`` moves the
server's monotonic and wall clocks (session expiry, connection expiry, TTL nodes, containers,
an ensemble member's Zab timeouts: its ticks wake at once) forward, never back.
"""

from __future__ import annotations

import base64
import json
import logging
import urllib.parse
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from trizk.server.frontend.core import FrontEnd
from trizk.server.ops.http import HttpAnswer, serve_http
from trizk.server.shell.clock import Clock
from trizk.server.writes.sequencer import Sequencer

__all__ = [
    "ENDPOINTS",
    "Advance",
    "ControlledServer",
    "Controls",
    "Drop",
    "Dump",
    "Expire",
    "Index",
    "Reply",
    "parse",
    "parse_session_id",
    "plain_data",
    "request_for",
    "serve_controls",
]

log = logging.getLogger("trizk.server.ops.testcontrol")

#: How long ``expire`` waits for its closeSession to commit before answering 503.
COMMIT_TIMEOUT = 10.0
#: A keep-alive connection to the controls idles out after this long (ms).
IDLE_TIMEOUT_MS = 30_000
#: ``advance`` refuses to move the clock further than this in one call (100 years).
MAX_ADVANCE_SECONDS = 100 * 365 * 24 * 3600

ENDPOINTS = """\
trizk test controls (trizk-server --testing)
POST /expire?session=ID      expire a session now (ID decimal or 0x hex)
POST /drop                   close every client connection (sessions stay)
POST /drop?session=ID        close that session's connection
POST /advance?seconds=N      move the server's clock N seconds forward
GET  /dump                   tree, sessions and watches as JSON
"""


# -- the actions (pure) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expire:
    session_id: int


@dataclass(frozen=True, slots=True)
class Drop:
    #: None: every connection
    session_id: int | None = None


@dataclass(frozen=True, slots=True)
class Advance:
    ms: int


@dataclass(frozen=True, slots=True)
class Dump:
    pass


@dataclass(frozen=True, slots=True)
class Index:
    pass


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer: status and a JSON body (or, for :class:`Index`, text)."""

    status: int
    body: dict[str, Any] | str


Action = Expire | Drop | Advance | Dump | Index


def parse_session_id(text: str) -> int:
    """A session id as a client prints it: decimal (Java's signed long) or ``0x`` hex; the
    result is the signed 64-bit id the server keys sessions by. ValueError otherwise."""
    n = int(text.strip(), 16) if text.strip().lower().startswith("0x") else int(text.strip(), 10)
    if not -(2**63) <= n < 2**64:
        raise ValueError(f"not a 64-bit session id: {text!r}")
    return n - 2**64 if n >= 2**63 else n


def _error(status: int, message: str) -> Reply:
    return Reply(status, {"error": message})


#: path -> (method, needs a session parameter: True / optional: None / none: False)
_ROUTES: dict[str, tuple[str, bool | None]] = {
    "/expire": ("POST", True),
    "/drop": ("POST", None),
    "/advance": ("POST", False),
    "/dump": ("GET", False),
    "/": ("GET", False),
}


def parse(method: str, target: str) -> Action | Reply:
    """The action ``method target`` asks for, or the Reply refusing it."""
    raw_path, _, query = target.partition("?")
    path = urllib.parse.unquote(raw_path).rstrip("/") or "/"
    route = _ROUTES.get(path)
    if route is None:
        return _error(404, f"no such control: {path} (GET / lists them)")
    want, session = route
    if method != want and not (want == "GET" and method == "HEAD"):
        return _error(405, f"{path} takes {want}, not {method}")
    params: dict[str, str] = {}
    for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True):
        params.setdefault(k, v)
    sid: int | None = None
    if session is not False and "session" in params:
        try:
            sid = parse_session_id(params["session"])
        except ValueError:
            return _error(400, f"not a session id: {params['session']!r}")
    if session is True and sid is None:
        return _error(400, f"{path} needs ?session=ID")
    if path == "/expire":
        assert sid is not None
        return Expire(sid)
    if path == "/drop":
        return Drop(sid)
    if path == "/advance":
        try:
            seconds = float(params["seconds"])
        except (KeyError, ValueError):
            return _error(400, "/advance needs ?seconds=N (a number, may be fractional)")
        if not 0 <= seconds <= MAX_ADVANCE_SECONDS:  # also refuses NaN
            return _error(400, "the clock only moves forward (0 <= seconds <= 100 years)")
        return Advance(round(seconds * 1000))
    if path == "/dump":
        return Dump()
    return Index()


def request_for(action: Action) -> tuple[str, str]:
    """The HTTP method and target that :func:`parse` reads back as ``action`` (what a client
    of the endpoint sends)."""
    if isinstance(action, Expire):
        return "POST", f"/expire?session={_hex(action.session_id)}"
    if isinstance(action, Drop):
        if action.session_id is None:
            return "POST", "/drop"
        return "POST", f"/drop?session={_hex(action.session_id)}"
    if isinstance(action, Advance):
        return "POST", f"/advance?seconds={action.ms / 1000!r}"
    if isinstance(action, Dump):
        return "GET", "/dump"
    return "GET", "/"


def _hex(session_id: int) -> str:
    """A session id as ZooKeeper logs it: ``0x`` and the unsigned 64-bit hex."""
    return f"0x{session_id & (2**64 - 1):x}"


# -- performing them on a server --------------------------------------------------------------


def plain_data(data: bytes | None) -> dict[str, Any]:
    """A znode's data as JSON: UTF-8 text as ``data``, anything else as ``data_b64``."""
    if data is None:
        return {"data": None}
    try:
        return {"data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"data_b64": base64.b64encode(data).decode("ascii")}


class ControlledServer(Protocol):
    """What the controls need of a server (:class:`~trizk.server.shell.app.TrizkServer`)."""

    @property
    def clock(self) -> Clock:
        """The server's one clock (``advance`` moves it)."""
        ...

    @property
    def core(self) -> FrontEnd:
        """The front end of the role being served (connections, tree, watches)."""
        ...

    @property
    def sequencer(self) -> Sequencer | None:
        """The session tracker, on a standalone server or a leader."""
        ...

    def wake(self) -> None:
        """Flush what the front end wrote."""
        ...


class Controls:
    """The test controls of one running server (call from inside its Trio loop)."""

    def __init__(self, server: ControlledServer, commit_timeout: float = COMMIT_TIMEOUT) -> None:
        self.server = server
        self.commit_timeout = commit_timeout

    async def expire_session(self, session_id: int) -> bool:
        """Propose the session's closeSession now and wait until it is committed (False, and
        nothing done, when the server does not track the session or it is already closing).
        Raises trio.TooSlowError when the commit takes longer than ``commit_timeout``."""
        srv = self.server
        seq = srv.sequencer
        if seq is None:  # an ensemble member that does not lead: the leader expires sessions
            return False
        if not seq.expire(session_id, srv.clock.wall()):
            return False
        srv.wake()
        # Sequencer.committed drops the session from the tracker when the closeSession
        # commits; no commit event is offered to wait on, so look each millisecond (bounded)
        with trio.fail_after(self.commit_timeout):
            while session_id in seq.sessions.sessions:
                await trio.sleep(0.001)
        return True

    def drop_connections(self, session_id: int | None = None) -> int:
        """Close every client connection (or ``session_id``'s) from the server side; sessions
        stay, so clients reconnect into them. Returns how many were closed."""
        srv = self.server
        conns = [
            c
            for c in srv.core.connections.values()
            if not c.closed and (session_id is None or c.session_id == session_id)
        ]
        for c in conns:
            srv.core.close(c, "dropped by the test (test controls)")
        srv.wake()
        return len(conns)

    def advance(self, ms: int) -> int:
        """Move the server's clocks ``ms`` forward; returns the total offset in ms."""
        if ms < 0:
            raise ValueError("the clock only moves forward")
        clock = self.server.clock
        clock.advance(ms)
        return clock.offset

    def dump(self) -> dict[str, Any]:
        """The tree, the sessions and the watches as JSON-able data::

        {"tree": {path: {"data": str | None, "version", "cversion", "ephemeral_owner",
                         "num_children"}},
         "sessions": {"0x<id>": {"timeout": ms, "closing": bool, "ephemerals": [path]}},
         "watches": {"data": {path: ["0x<id>", ...]}, "child": {...}}}
        """
        srv = self.server
        tree = srv.core.tree
        nodes: dict[str, Any] = {}
        for path, node in sorted(tree.iter_nodes()):
            entry = plain_data(node.data)
            entry.update(
                version=node.version,
                cversion=node.cversion,
                ephemeral_owner=node.ephemeral_owner,
                num_children=node.num_children(),
            )
            nodes[path] = entry
        sessions: dict[str, Any] = {}
        tracked = srv.sequencer.sessions.sessions if srv.sequencer is not None else {}
        for sid, s in tracked.items():
            eph = tree.ephemerals.get(sid)
            sessions[_hex(sid)] = {
                "timeout": s.timeout,
                "closing": s.closing,
                "ephemerals": sorted(eph) if eph is not None else [],
            }

        def table(t: Any) -> dict[str, list[str]]:
            return {
                p: sorted(_hex(getattr(w, "session_id", 0)) for w in ws)
                for p, ws in sorted(t.by_path.items())
            }

        watches = {"data": table(srv.core.watches.data), "child": table(srv.core.watches.child)}
        return {"tree": nodes, "sessions": sessions, "watches": watches}

    async def perform(self, action: Action) -> Reply:
        """Do ``action``; the answer as the HTTP endpoint gives it."""
        if isinstance(action, Expire):
            try:
                return Reply(200, {"expired": await self.expire_session(action.session_id)})
            except trio.TooSlowError:
                return _error(503, f"the closeSession did not commit in {self.commit_timeout} s")
        if isinstance(action, Drop):
            return Reply(200, {"dropped": self.drop_connections(action.session_id)})
        if isinstance(action, Advance):
            return Reply(200, {"clock_offset_ms": self.advance(action.ms)})
        if isinstance(action, Dump):
            return Reply(200, self.dump())
        return Reply(200, ENDPOINTS)

    async def answer(self, method: str, target: str) -> HttpAnswer:
        """One HTTP request's answer (the responder :func:`serve_controls` runs)."""
        action = parse(method, target)
        reply = action if isinstance(action, Reply) else await self.perform(action)
        if isinstance(reply.body, str):
            return HttpAnswer(
                reply.status, (("Content-Type", "text/plain; charset=utf-8"),), reply.body.encode()
            )
        body = json.dumps(reply.body, indent=1).encode() + b"\n"
        return HttpAnswer(reply.status, (("Content-Type", "application/json"),), body)


async def serve_controls(
    controls: Controls,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the test controls over HTTP until cancelled; ``task_status.started(port)``, or
    None when the port cannot be bound (logged; the server carries on without them)."""

    def started(bound: int) -> None:
        log.warning(
            "TEST CONTROLS ENABLED (--testing) on http://%s:%d : anyone who can reach that"
            " port can expire sessions, drop connections and move this server's clock."
            " For tests only, never in production.",
            host,
            bound,
        )

    await serve_http(
        host,
        port,
        controls.answer,
        IDLE_TIMEOUT_MS,
        on_error=f"Problem starting the test controls on {host}:{port}",
        on_started=started,
        logger=log,
        task_status=task_status,
    )
