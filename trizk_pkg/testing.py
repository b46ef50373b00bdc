"""trizk in other people's tests: a throwaway ZooKeeper-compatible server with test controls.

:class:`Server` is a sync context manager around one trizk server on a free 127.0.0.1 port with
its own temporary data directory; everything it started (thread or child process, directory) is
gone after ``__exit__`` or :meth:`Server.close`, even when the test failed. Two modes, one API:

* ``mode="in-process"`` (default, fastest): a :class:`trizk.server.app.TrizkServer` runs in a
  thread of the test process with its own Trio loop. Test controls run inside that loop
  (``trio.from_thread``), so they see and change the server's real state.
* ``mode="process"``: a real ``trizk-server`` child (``python -m trizk.server zoo.cfg --port 0
  --testing``); its readiness line on stdout gives the bound port and the URL of its test
  controls (:mod:`trizk.server.testcontrol`), which the controls below use. ``kill()`` is
  SIGKILL.

Both modes perform the controls through :class:`trizk.server.testcontrol.Controls`, the same
code (in-process directly, out-of-process over its HTTP endpoint), so they mean the same.

Controls: ``stop()``/``start()``/``restart()`` (same port, same data), ``kill()`` (no clean
shutdown), ``expire_session(id)`` (the server proposes the closeSession, as when the session
times out, so any client sees EXPIRED_SESSION), ``drop_connections()`` (every client connection
is closed by the server; sessions live on), ``advance(seconds)`` (moves the server's clocks:
session timeouts, TTLs and containers expire with no sleeping), ``dump()`` (tree, sessions and
watches as plain data) and ``load()`` (seed a tree through ordinary creates).
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["READY_PREFIX", "NotSupported", "Server", "ServerError", "parse_ready_line"]

#: the stdout line ``trizk-server`` prints once it accepts clients (see trizk.server.main)
READY_PREFIX = "trizk-server ready"

IN_PROCESS = "in-process"
PROCESS = "process"


class ServerError(RuntimeError):
    """The server did not start (or stop) as asked."""


class NotSupported(ServerError):
    """This control does not exist in this mode."""


def parse_ready_line(line: str) -> dict[str, str] | None:
    """The fields of ``trizk-server``'s readiness line, None for any other line::

        trizk-server ready on 127.0.0.1:PORT port=PORT [testing=http://127.0.0.1:CPORT]

    gives ``{"port": "PORT", "testing": "http://127.0.0.1:CPORT"}``: every space-separated
    ``key=value`` after the prefix."""
    if not line.startswith(READY_PREFIX):
        return None
    return dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)


def _b(data: Any) -> bytes:
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    return str(data).encode()


def _control_reply(reply: Any, what: str) -> Any:
    """The body of a test control's answer (a testcontrol.Reply), or ServerError."""
    if reply.status != 200:
        error = reply.body.get("error") if isinstance(reply.body, dict) else reply.body
        raise ServerError(f"{what}: {error}")
    return reply.body


def _http_control(base_url: str, action: Any, timeout: float) -> Any:
    """Perform ``action`` through a ``trizk-server --testing`` child's HTTP test controls;
    its answer as a testcontrol.Reply."""
    import urllib.error
    import urllib.request

    from trizk.server.testcontrol import Reply, request_for

    method, target = request_for(action)
    req = urllib.request.Request(base_url + target, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    except OSError as e:
        raise ServerError(f"the server's test controls did not answer: {e}") from e
    return Reply(status, json.loads(raw))


class _Thread:
    """One run of a TrizkServer in a daemon thread with its own Trio loop."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.server: Any = None
        self.port = 0
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._scope: Any = None
        self._token: Any = None
        self.controls: Any = None
        self._thread = threading.Thread(target=self._run, name="trizk-testing", daemon=True)

    def _run(self) -> None:
        import trio

        from trizk.server.app import TrizkServer
        from trizk.server.testcontrol import Controls

        async def main() -> None:
            with trio.CancelScope() as scope:
                self._scope = scope
                self._token = trio.lowlevel.current_trio_token()
                self.server = TrizkServer(self.config)
                self.controls = Controls(self.server)
                async with trio.open_nursery() as nursery:
                    self.port = await nursery.start(self.server.run)
                    self._ready.set()

        try:
            trio.run(main)
        except BaseException as e:
            self._error = e
        finally:
            self._ready.set()

    def start(self, timeout: float) -> int:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise ServerError(f"trizk did not start within {timeout} s")
        if self._error is not None or not self._thread.is_alive():
            raise ServerError(f"trizk did not start: {self._error!r}") from self._error
        return self.port

    def call_async(self, fn: Any, *args: Any) -> Any:
        import trio

        if not self._thread.is_alive():
            raise ServerError("the server is not running")
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def stop(self, timeout: float) -> None:
        import trio

        if self._thread.is_alive() and self._scope is not None:
            try:
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise ServerError("the trizk server thread did not stop")
        if self._error is not None and self._ready.is_set() and self.port:
            # the server failed while it ran: the test should hear of it
            raise ServerError(f"the trizk server failed: {self._error!r}") from self._error


class Server:
    """A trizk server for one test or one suite; see the module docstring.

    ``tick_time`` (ms) sets ZooKeeper's tickTime (sessions may time out from 2 ticks);
    ``properties`` are extra zoo.cfg keys (``{"extendedTypesEnabled": "true"}``); the
    server's temporary directory is made in ``base_dir`` (default: the system's temp dir)."""

    def __init__(
        self,
        *,
        mode: str = IN_PROCESS,
        tick_time: int = 2000,
        properties: Mapping[str, str] | None = None,
        start_timeout: float = 20.0,
        base_dir: str | Path | None = None,
    ) -> None:
        if mode not in (IN_PROCESS, PROCESS):
            raise ValueError(f"mode must be {IN_PROCESS!r} or {PROCESS!r}, not {mode!r}")
        self.mode = mode
        self.tick_time = tick_time
        self.properties = dict(properties or {})
        self.start_timeout = start_timeout
        #: where the server's own temporary directory is made (default: the system's)
        self.base_dir = base_dir
        #: the bound client port (0 until the first start; kept across restarts)
        self.port = 0
        self._root: Path | None = None
        self._thread: _Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        #: the child's test controls (``testing=`` on its readiness line)
        self._controls_url: str | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def connect_string(self) -> str:
        """``host:port`` for any ZooKeeper client (add a chroot path yourself if you want one)."""
        return f"127.0.0.1:{self.port}"

    hosts = connect_string

    @property
    def data_dir(self) -> Path:
        assert self._root is not None, "the server was never started"
        return self._root / "data"

    @property
    def running(self) -> bool:
        if self._thread is not None:
            return self._thread._thread.is_alive()
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Server:
        """Start the server (first call: on a free port with a fresh data dir; later calls:
        on the same port with the same data)."""
        if self.running:
            raise ServerError("the server is already running")
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="trizk-testing-", dir=self.base_dir))
            self.data_dir.mkdir()
        try:
            if self.mode == IN_PROCESS:
                self._start_thread()
            else:
                self._start_process()
        except BaseException:
            self._halt(kill=True)
            raise
        return self

    def stop(self) -> None:
        """Stop the server cleanly (its data stays for :meth:`start`/:meth:`restart`)."""
        self._halt(kill=False)

    def kill(self) -> None:
        """Stop the server with no clean shutdown: SIGKILL for a child process; in-process, the
        server's tasks are cancelled where they stand (nothing is flushed or closed first)."""
        self._halt(kill=True)

    def restart(self) -> None:
        """Stop (cleanly) and start again on the same port with the same data."""
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server if it runs and delete its data directory."""
        try:
            self._halt(kill=False)
        finally:
            if self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None

    def __enter__(self) -> Server:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- in-process
    def _config(self) -> Any:
        from trizk.server.config import ServerConfig

        keys: dict[str, Any] = {
            # clientPort 0 is refused with clientPortAddress in a config (ZooKeeper's rule);
            # the bind port is set after, as ``trizk-server --port 0`` does
            "clientPort": 2181,
            "clientPortAddress": "127.0.0.1",
            "tickTime": self.tick_time,
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
        }
        keys.update(self.properties)
        return ServerConfig.create(self.data_dir, **keys).replace(client_port=self.port)

    def _start_thread(self) -> None:
        self._thread = _Thread(self._config())
        self.port = self._thread.start(self.start_timeout)

    # -- child process
    def _start_process(self) -> None:
        assert self._root is not None
        cfg = self._root / "zoo.cfg"
        lines = {
            "tickTime": str(self.tick_time),
            "dataDir": str(self.data_dir),
            "clientPort": "2181",  # --port below overrides it
            "clientPortAddress": "127.0.0.1",
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
        }
        lines.update(self.properties)
        cfg.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        log = open(self._root / "server.log", "ab")
        try:
            self._proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "trizk.server", str(cfg)),
                    *("--port", str(self.port), "--testing"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        finally:
            log.close()
        ready = self._wait_ready(self._proc)
        self.port = int(ready["port"])
        self._controls_url = ready.get("testing")

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> dict[str, str]:
        assert proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerError(f"trizk-server not ready within {self.start_timeout} s")
                if not sel.select(left):
                    continue
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    raise ServerError(f"trizk-server exited ({proc.wait()}): {self._log_tail()}")
                buf += chunk
                for line in buf.decode(errors="replace").splitlines(keepends=True):
                    ready = parse_ready_line(line) if line.endswith("\n") else None
                    if ready is not None:
                        return ready

    def _log_tail(self) -> str:
        assert self._root is not None
        try:
            return (self._root / "server.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _halt(self, *, kill: bool) -> None:
        if self._thread is not None:
            t, self._thread = self._thread, None
            t.stop(self.start_timeout)
        if self._proc is not None:
            p, self._proc = self._proc, None
            if p.poll() is None:
                p.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                p.wait(self.start_timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()

    # ------------------------------------------------------------------ test controls
    def _control(self, what: str, action: Any) -> Any:
        """Perform a testcontrol action on the running server: in-process inside its Trio loop,
        out-of-process through its HTTP test controls. The answer's body, or ServerError."""
        if self.mode == IN_PROCESS:
            if self._thread is None or self._thread.controls is None:
                raise ServerError("the server is not running")
            reply = self._thread.call_async(self._thread.controls.perform, action)
        else:
            if self._proc is None or self._controls_url is None:
                raise ServerError("the server is not running")
            reply = _http_control(self._controls_url, action, self.start_timeout)
        return _control_reply(reply, what)

    def expire_session(self, session_id: int) -> bool:
        """Expire a session now, server-side: its ephemerals go, its watchers fire, its client
        sees EXPIRED_SESSION. Returns once the closeSession is committed (what a client reads
        next no longer shows the session's ephemerals); False if the server does not know the
        session (or it is already closing)."""
        from trizk.server.testcontrol import Expire, parse_session_id

        body = self._control("expire_session", Expire(parse_session_id(str(session_id))))
        return bool(body["expired"])

    def drop_connections(self, session_id: int | None = None) -> int:
        """Close every client connection (or only ``session_id``'s) from the server side;
        sessions stay, so clients reconnect into them. Returns how many were closed."""
        from trizk.server.testcontrol import Drop, parse_session_id

        sid = None if session_id is None else parse_session_id(str(session_id))
        return int(self._control("drop_connections", Drop(sid))["dropped"])

    def advance(self, seconds: float) -> None:
        """Move the server's clocks forward: sessions not heard from for their timeout expire,
        TTL nodes and empty containers are reaped on the reaper's next look (wall clock), with
        no sleeping. Clients' own clocks do not move: connections idle past their session
        timeout are closed as ZooKeeper would."""
        from trizk.server.testcontrol import Advance

        if not seconds >= 0:
            raise ValueError("the clock only moves forward")
        self._control("advance", Advance(round(seconds * 1000)))

    def session_ids(self) -> list[int]:
        """The ids of the sessions the server tracks."""
        return sorted(int(s, 16) for s in self.dump()["sessions"])

    def dump(self) -> dict[str, Any]:
        """The server's state as plain data (JSON-able)::

            {"tree": {path: {"data": str | None, "version": int, "ephemeral_owner": int, ...}},
             "sessions": {"0x...": {"timeout": ms, "ephemerals": [path, ...]}},
             "watches": {"data": {path: ["0x<session>", ...]}, "child": {...}}}

        Data that is not UTF-8 is given as ``"data_b64"``.
        """
        from trizk.server.testcontrol import Dump

        return dict(self._control("dump", Dump()))

    def _client(self) -> Any:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.connect_string, timeout=10)
        zk.start(timeout=self.start_timeout)
        return zk

    def load(self, tree: Mapping[str, Any] | str | bytes) -> int:
        """Seed the tree through ordinary creates (a client session of its own). ``tree`` is a
        mapping (or its JSON) of absolute path to data (str, bytes or None), or to a mapping
        with ``"data"``/``"data_b64"`` -- so a :meth:`dump` (or its ``"tree"``) loads back.
        Missing parents are created empty; ``/``, ``/zookeeper...`` and ephemeral nodes in a
        dump are skipped. Returns how many nodes were created."""
        nodes: Any = json.loads(tree) if isinstance(tree, (str, bytes)) else tree
        if not isinstance(nodes, Mapping):
            raise ValueError("load() takes a mapping of path to data (or its JSON)")
        if isinstance(nodes.get("tree"), Mapping):
            nodes = nodes["tree"]
        wanted: dict[str, bytes] = {}
        for path, value in nodes.items():
            if not path.startswith("/"):
                raise ValueError(f"not an absolute path: {path!r}")
            if path == "/" or path == "/zookeeper" or path.startswith("/zookeeper/"):
                continue
            if isinstance(value, Mapping):
                if value.get("ephemeral_owner"):
                    continue
                if "data_b64" in value:
                    wanted[path] = base64.b64decode(value["data_b64"])
                else:
                    wanted[path] = _b(value.get("data"))
            else:
                wanted[path] = _b(value)
        zk = self._client()
        created = 0
        try:
            for path in sorted(wanted, key=lambda p: (p.count("/"), p)):
                zk.create(path, wanted[path], makepath=True)
                created += 1
        finally:
            zk.stop()
            zk.close()
        return created
