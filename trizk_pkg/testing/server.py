"""A throwaway ZooKeeper-compatible server with test controls (``trizk.testing.Server``).

:class:`Server` is a sync context manager around one trizk server on a free 127.0.0.1 port with
its own temporary data directory; everything it started (thread or child process, directory) is
gone after ``__exit__`` or :meth:`Server.close`, even when the test failed. Two modes, one API:

* ``mode="in-process"`` (default, fastest): a :class:`trizk.server.shell.app.TrizkServer` runs in a
  thread of the test process with its own Trio loop. Test controls run inside that loop
  (``trio.from_thread``), so they see and change the server's real state.
* ``mode="process"``: a real ``trizk-server`` child (``python -m trizk.server zoo.cfg --port 0
  --testing``); its readiness line on stdout gives the bound port and the URL of its test
  controls (:mod:`trizk.server.ops.testcontrol`), which the controls below use. ``kill()`` is
  SIGKILL.

Both modes perform the controls through :class:`trizk.server.ops.testcontrol.Controls`, the same
code (in-process directly, out-of-process over its HTTP endpoint), so they mean the same.

:class:`AsyncServer` is the same API for Trio tests (``async with``, the controls awaited); its
in-process mode runs the server's tasks in the caller's own Trio loop.

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
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "MODE_ENV",
    "READY_PREFIX",
    "AsyncServer",
    "NotSupported",
    "Server",
    "ServerError",
    "mode_from_env",
    "parse_ready_line",
]

#: the stdout line ``trizk-server`` prints once it accepts clients (see trizk.server.config.main)
READY_PREFIX = "trizk-server ready"

IN_PROCESS = "in-process"
PROCESS = "process"

#: the one knob for how test servers run (the pytest plugin's fixtures, its ``--trizk-mode``
#: option sets it, and the kazoo drop-in): ``in-process`` (default) or ``process``
MODE_ENV = "TRIZK_MODE"
#: its first name, read when MODE_ENV is not set (with a DeprecationWarning)
OLD_MODE_ENV = "TRIZK_TEST_MODE"


def mode_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The test-server mode the environment asks for: ``TRIZK_MODE`` (``in-process``, the
    default, or ``process``); the old ``TRIZK_TEST_MODE`` still works, with a
    DeprecationWarning. ValueError for any other value."""
    env = os.environ if environ is None else environ
    value = env.get(MODE_ENV)
    if value is None and env.get(OLD_MODE_ENV) is not None:
        import warnings

        warnings.warn(
            f"{OLD_MODE_ENV} is deprecated: set {MODE_ENV} (the same knob as pytest's"
            " --trizk-mode)",
            DeprecationWarning,
            stacklevel=2,
        )
        value = env[OLD_MODE_ENV]
    mode = (value or IN_PROCESS).strip()
    if mode not in (IN_PROCESS, PROCESS):
        raise ValueError(f"{MODE_ENV}={value!r}: expected {IN_PROCESS!r} or {PROCESS!r}")
    return mode


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

    from trizk.server.ops.testcontrol import Reply, request_for

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
    """One run of a TrizkServer in a loop thread of its own (:class:`LoopThread`)."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.server: Any = None
        self.port = 0
        self.controls: Any = None
        from trizk.testing.loop import LoopThread  # (Trio is imported when a server starts)

        self._loop = LoopThread("trizk-testing")

    @property
    def alive(self) -> bool:
        return self._loop.alive

    async def _serve(self, *, task_status: Any) -> None:
        from trizk.server.ops.testcontrol import Controls
        from trizk.server.shell.app import TrizkServer

        self.server = TrizkServer(self.config)
        self.controls = Controls(self.server)
        await self.server.run(task_status=task_status)

    def start(self, timeout: float) -> int:
        import trio

        try:
            self._loop.start(timeout)
            self.port = self._loop.start_task(self._serve, timeout=timeout)
        except trio.TooSlowError as e:
            self._loop.stop(timeout)
            raise ServerError(f"trizk did not start within {timeout} s") from e
        except BaseException as e:
            if self._loop.alive:
                self._loop.stop(timeout)
            raise ServerError(f"trizk did not start: {e!r}") from e
        return self.port

    def call_async(self, fn: Any, *args: Any) -> Any:
        if not self._loop.alive:
            raise ServerError("the server is not running")
        return self._loop.run(fn, *args)

    def stop(self, timeout: float) -> None:
        try:
            self._loop.stop(timeout)
        except RuntimeError as e:
            raise ServerError("the trizk server thread did not stop") from e
        error = self._loop.error
        if error is not None and self.port:
            # the server failed while it ran: the test should hear of it
            raise ServerError(f"the trizk server failed: {error!r}") from error


class _Base:
    """What :class:`Server` and :class:`AsyncServer` share: settings, the temporary directory,
    the server's configuration (a ServerConfig in-process, a zoo.cfg for a child), and each
    control as (name, testcontrol action, how to read its answer)."""

    MODES: tuple[str, ...] = (IN_PROCESS, PROCESS)

    def __init__(
        self,
        *,
        mode: str = IN_PROCESS,
        tick_time: int = 2000,
        properties: Mapping[str, str] | None = None,
        start_timeout: float = 20.0,
        base_dir: str | Path | None = None,
        system_properties: Mapping[str, str] | None = None,
    ) -> None:
        if mode not in self.MODES:
            raise ValueError(f"mode must be one of {self.MODES}, not {mode!r}")
        self.mode = mode
        self.tick_time = tick_time
        self.properties = dict(properties or {})
        #: properties by full name, as java's ``-D`` sets them for ZooKeeper
        #: (``java.security.auth.login.config``); ``trizk-server -D`` for a child
        self.system_properties = dict(system_properties or {})
        self.start_timeout = start_timeout
        #: where the server's own temporary directory is made (default: the system's)
        self.base_dir = base_dir
        #: the bound client port (0 until the first start; kept across restarts)
        self.port = 0
        self._root: Path | None = None
        #: the child's test controls (``testing=`` on its readiness line)
        self._controls_url: str | None = None

    @property
    def connect_string(self) -> str:
        """``host:port`` for any ZooKeeper client (add a chroot path yourself if you want one).
        Known once the server started (its port is chosen then): ServerError before."""
        if not self.port:
            raise ServerError(
                "the server is not started: its connect_string is known after start() (the"
                " port is free-chosen then)"
            )
        return f"127.0.0.1:{self.port}"

    hosts = connect_string

    @property
    def data_dir(self) -> Path:
        assert self._root is not None, "the server was never started"
        return self._root / "data"

    def _make_root(self) -> None:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="trizk-testing-", dir=self.base_dir))
            self.data_dir.mkdir()

    def _remove_root(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _keys(self) -> dict[str, Any]:
        keys: dict[str, Any] = {
            # clientPort 0 is refused with clientPortAddress in a config (ZooKeeper's rule);
            # the bind port is set after, as ``trizk-server --port 0`` does
            "clientPort": 2181,
            "clientPortAddress": "127.0.0.1",
            "tickTime": self.tick_time,
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
            # no per-address connection limit (ZooKeeper's default is 60), as kazoo's and
            # Curator's harnesses: a suite's clients all come from 127.0.0.1
            "maxClientCnxns": 0,
            # a throwaway server: every txn is still written to the OS before it is answered
            # (a kill, even SIGKILL, loses nothing), only not fsynced -- which would cost a
            # test each session and write; properties={"forceSync": "yes"} puts it back
            "forceSync": "no",
        }
        keys.update(self.properties)
        return keys

    def _config(self) -> Any:
        """The in-process server's ServerConfig."""
        from trizk.server.config.zoocfg import ServerConfig

        return ServerConfig.create(
            self.data_dir, properties=self.system_properties, **self._keys()
        ).replace(client_port=self.port)

    def _command(self) -> list[str]:
        """Write the child's zoo.cfg; its command line."""
        assert self._root is not None
        cfg = self._root / "zoo.cfg"
        lines = {"dataDir": str(self.data_dir), **self._keys()}
        cfg.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
        return [
            *(sys.executable, "-m", "trizk.server", str(cfg)),
            *("--port", str(self.port), "--testing"),
            *(a for k, v in self.system_properties.items() for a in ("-D", f"{k}={v}")),
        ]

    def _log_file(self) -> Any:
        assert self._root is not None
        return open(self._root / "server.log", "ab")

    def _ready(self, ready: dict[str, str]) -> None:
        self.port = int(ready["port"])
        self._controls_url = ready.get("testing")

    def _not_ready(self, code: int | None) -> ServerError:
        tail = ""
        if self._root is not None:
            try:
                tail = (self._root / "server.log").read_text(errors="replace")[-2000:]
            except OSError:
                pass
        if code is None:
            return ServerError(f"trizk-server not ready within {self.start_timeout} s: {tail}")
        return ServerError(f"trizk-server exited ({code}): {tail}")

    # -- the controls, as testcontrol actions
    @staticmethod
    def _expire(session_id: int) -> tuple[str, Any, Callable[[Any], Any]]:
        from trizk.server.ops.testcontrol import Expire, parse_session_id

        action = Expire(parse_session_id(str(session_id)))
        return "expire_session", action, lambda body: bool(body["expired"])

    @staticmethod
    def _drop(session_id: int | None) -> tuple[str, Any, Callable[[Any], Any]]:
        from trizk.server.ops.testcontrol import Drop, parse_session_id

        sid = None if session_id is None else parse_session_id(str(session_id))
        return "drop_connections", Drop(sid), lambda body: int(body["dropped"])

    @staticmethod
    def _advance(seconds: float) -> tuple[str, Any, Callable[[Any], Any]]:
        from trizk.server.ops.testcontrol import Advance

        if not seconds >= 0:
            raise ValueError("the clock only moves forward")
        return "advance", Advance(round(seconds * 1000)), lambda body: None

    @staticmethod
    def _dump() -> tuple[str, Any, Callable[[Any], Any]]:
        from trizk.server.ops.testcontrol import Dump

        return "dump", Dump(), dict

    @staticmethod
    def _session_ids(dump: Mapping[str, Any]) -> list[int]:
        from trizk.server.ops.testcontrol import parse_session_id

        return sorted(parse_session_id(s) for s in dump["sessions"])


def _ready_in(buf: bytes) -> dict[str, str] | None:
    """The readiness line's fields, once a whole one is in ``buf``."""
    for line in buf.decode(errors="replace").splitlines(keepends=True):
        ready = parse_ready_line(line) if line.endswith("\n") else None
        if ready is not None:
            return ready
    return None


def _wanted(tree: Mapping[str, Any] | str | bytes) -> dict[str, bytes]:
    """What :meth:`Server.load` creates: path -> data, from a mapping, a dump or their JSON."""
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
    return wanted


def _create_all(connect_string: str, wanted: Mapping[str, bytes], timeout: float) -> int:
    """Create ``wanted`` (parents first) through a kazoo session of its own (blocking). A
    create whose connection was lost is tried again (an ensemble may be electing a leader);
    a node that then exists was created by the lost try, a node that existed before is
    NodeExistsError as always."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss, NodeExistsError, SessionExpiredError

    zk = KazooClient(hosts=connect_string, timeout=10)
    zk.start(timeout=timeout)
    created = 0
    deadline = time.monotonic() + timeout
    try:
        for path in sorted(wanted, key=lambda p: (p.count("/"), p)):
            lost = False
            while True:
                try:
                    zk.create(path, wanted[path], makepath=True)
                except NodeExistsError:
                    if not lost:
                        raise
                except (ConnectionLoss, SessionExpiredError):
                    if time.monotonic() > deadline:
                        raise
                    lost = True
                    time.sleep(0.05)  # interval between tries of a bounded retry loop
                    continue
                break
            created += 1
    finally:
        zk.stop()
        zk.close()
    return created


class Server(_Base):
    """A trizk server for one test or one suite; see the module docstring.

    ``tick_time`` (ms) sets ZooKeeper's tickTime (sessions may time out from 2 ticks);
    ``properties`` are extra zoo.cfg keys (``{"extendedTypesEnabled": "true"}``),
    ``system_properties`` what java's ``-D`` would set (``java.security.auth.login.config``); the
    server's temporary directory is made in ``base_dir`` (default: the system's temp dir).
    Test servers run with ``forceSync=no`` (written, not fsynced) and ``maxClientCnxns=0`` (no
    per-address connection limit) unless ``properties`` say otherwise; ``connect_string``
    before the first :meth:`start` is a ServerError."""

    # (the settings are _Base's keyword arguments)
    _thread: _Thread | None = None
    _proc: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        if self._thread is not None:
            return self._thread.alive
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Server:
        """Start the server (first call: on a free port with a fresh data dir; later calls:
        on the same port with the same data)."""
        if self.running:
            raise ServerError("the server is already running")
        self._make_root()
        try:
            if self.mode == IN_PROCESS:
                self._thread = _Thread(self._config())
                self.port = self._thread.start(self.start_timeout)
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
            self._remove_root()

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

    # -- child process
    def _start_process(self) -> None:
        with self._log_file() as log:
            self._proc = subprocess.Popen(
                self._command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log
            )
        self._ready(self._wait_ready(self._proc))

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> dict[str, str]:
        assert proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._not_ready(None)
                if not sel.select(left):
                    continue
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    raise self._not_ready(proc.wait())
                buf += chunk
                ready = _ready_in(buf)
                if ready is not None:
                    return ready

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
    def _control(self, what: str, action: Any, read: Callable[[Any], Any]) -> Any:
        """Perform a testcontrol action on the running server: in-process inside its Trio loop,
        out-of-process through its HTTP test controls. The answer, or ServerError."""
        if self.mode == IN_PROCESS:
            if self._thread is None or self._thread.controls is None:
                raise ServerError("the server is not running")
            reply = self._thread.call_async(self._thread.controls.perform, action)
        else:
            if self._proc is None or self._controls_url is None:
                raise ServerError("the server is not running")
            reply = _http_control(self._controls_url, action, self.start_timeout)
        return read(_control_reply(reply, what))

    def expire_session(self, session_id: int) -> bool:
        """Expire a session now, server-side: its ephemerals go, its watchers fire, its client
        sees EXPIRED_SESSION. Returns once the closeSession is committed (what a client reads
        next no longer shows the session's ephemerals); False if the server does not know the
        session (or it is already closing)."""
        return bool(self._control(*self._expire(session_id)))

    def drop_connections(self, session_id: int | None = None) -> int:
        """Close every client connection (or only ``session_id``'s) from the server side;
        sessions stay, so clients reconnect into them. Returns how many were closed."""
        return int(self._control(*self._drop(session_id)))

    def advance(self, seconds: float) -> None:
        """Move the server's clocks forward: sessions not heard from for their timeout expire,
        TTL nodes and empty containers are reaped on the reaper's next look (wall clock), with
        no sleeping. Clients' own clocks do not move: connections idle past their session
        timeout are closed as ZooKeeper would."""
        self._control(*self._advance(seconds))

    def session_ids(self) -> list[int]:
        """The ids of the sessions the server tracks."""
        return self._session_ids(self.dump())

    def dump(self) -> dict[str, Any]:
        """The server's state as plain data (JSON-able)::

            {"tree": {path: {"data": str | None, "version": int, "ephemeral_owner": int, ...}},
             "sessions": {"0x...": {"timeout": ms, "ephemerals": [path, ...]}},
             "watches": {"data": {path: ["0x<session>", ...]}, "child": {...}}}

        Data that is not UTF-8 is given as ``"data_b64"``.
        """
        return dict(self._control(*self._dump()))

    def load(self, tree: Mapping[str, Any] | str | bytes) -> int:
        """Seed the tree through ordinary creates (a client session of its own). ``tree`` is a
        mapping (or its JSON) of absolute path to data (str, bytes or None), or to a mapping
        with ``"data"``/``"data_b64"`` -- so a :meth:`dump` (or its ``"tree"``) loads back.
        Missing parents are created empty; ``/``, ``/zookeeper...`` and ephemeral nodes in a
        dump are skipped. Returns how many nodes were created."""
        return _create_all(self.connect_string, _wanted(tree), self.start_timeout)


#: AsyncServer only: the server in a thread of its own (its own Trio loop), as Server's
#: in-process mode -- for tests that call blocking clients (kazoo) from Trio tasks
THREAD = "thread"


class AsyncServer(_Base):
    """:class:`Server` for Trio tests: the same controls as awaitables, ``async with``.

    ``mode="in-process"`` (default) runs the server's tasks in the caller's Trio loop, in a
    nursery the ``async with`` block opens: no thread, no second loop; the server stops when
    the block ends. Clients in the same loop must not block it: call a blocking client such as
    kazoo through ``trio.to_thread.run_sync`` (or use ``mode="thread"``: the server in a
    thread of its own, as Server's in-process mode). ``mode="process"``: a ``trizk-server``
    child driven through its test controls, as Server's. Starting in-process needs the
    ``async with`` block (its nursery); the other modes also start with plain
    ``await server.start()`` and ``await server.close()``.

    A failure of the in-loop server (a bug, a disk error) cancels the block and is raised from
    it, as from any nursery. The block's own exception is not wrapped in an ExceptionGroup.
    """

    MODES = (IN_PROCESS, THREAD, PROCESS)

    # (the settings are _Base's keyword arguments)
    _nursery_cm: Any = None
    _nursery: Any = None
    # in-process: the server task's cancel scope, its end, its controls
    _scope: Any = None
    _done: Any = None
    _controls: Any = None
    _thread: _Thread | None = None
    _proc: Any = None  # trio.Process

    # ------------------------------------------------------------------ lifecycle
    @property
    def running(self) -> bool:
        if self.mode == IN_PROCESS:
            return self._done is not None and not self._done.is_set()
        if self.mode == THREAD:
            return self._thread is not None and self._thread.alive
        return self._proc is not None and self._proc.returncode is None

    async def start(self) -> AsyncServer:
        """Start the server (first call: on a free port with a fresh data dir; later calls:
        on the same port with the same data)."""
        import trio

        if self.running:
            raise ServerError("the server is already running")
        if self.mode == IN_PROCESS and self._nursery is None:
            raise ServerError("an in-process AsyncServer starts inside `async with` (its nursery)")
        self._make_root()
        try:
            if self.mode == IN_PROCESS:
                with trio.fail_after(self.start_timeout):
                    self.port = await self._nursery.start(self._serve, self._config())
            elif self.mode == THREAD:
                self._thread = _Thread(self._config())
                self.port = await trio.to_thread.run_sync(self._thread.start, self.start_timeout)
            else:
                await self._start_process()
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._halt(kill=True)
            raise
        return self

    async def _serve(self, config: Any, *, task_status: Any) -> None:
        import trio

        from trizk.server.ops.testcontrol import Controls
        from trizk.server.shell.app import TrizkServer

        self._done = trio.Event()
        try:
            with trio.CancelScope() as self._scope:
                server = TrizkServer(config)
                self._controls = Controls(server)
                await server.run(task_status=task_status)
        finally:
            self._done.set()

    async def stop(self) -> None:
        """Stop the server cleanly (its data stays for :meth:`start`/:meth:`restart`)."""
        await self._halt(kill=False)

    async def kill(self) -> None:
        """As :meth:`Server.kill` (SIGKILL for a child; in-process, the tasks are cancelled)."""
        await self._halt(kill=True)

    async def restart(self) -> None:
        """Stop (cleanly) and start again on the same port with the same data."""
        await self.stop()
        await self.start()

    async def close(self) -> None:
        """Stop the server if it runs and delete its data directory."""
        import trio

        try:
            with trio.CancelScope(shield=True):
                await self._halt(kill=False)
        finally:
            self._remove_root()

    async def __aenter__(self) -> AsyncServer:
        import trio

        if self.mode == IN_PROCESS:
            self._nursery_cm = trio.open_nursery()
            self._nursery = await self._nursery_cm.__aenter__()
        try:
            return await self.start()
        except BaseException as e:
            await self.__aexit__(type(e), e, e.__traceback__)
            raise

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> bool:
        import trio

        cm, self._nursery_cm, self._nursery = self._nursery_cm, None, None
        try:
            await self.close()
        except BaseException as exc:
            if cm is not None:
                await cm.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        if cm is None:
            return False
        # The server's task is over: the nursery has nothing left to wait for. Hand it a
        # Cancelled (which may be its own: the server failed) but not the block's own exception,
        # which would come back wrapped in an ExceptionGroup.
        if isinstance(e, trio.Cancelled):
            return bool(await cm.__aexit__(t, e, tb))
        await cm.__aexit__(None, None, None)
        return False

    # -- child process
    async def _start_process(self) -> None:
        import subprocess

        import trio

        with self._log_file() as log:
            self._proc = await trio.lowlevel.open_process(
                self._command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log
            )
        buf = b""
        with trio.move_on_after(self.start_timeout):
            while (ready := _ready_in(buf)) is None:
                chunk = await self._proc.stdout.receive_some(4096)
                if not chunk:
                    raise self._not_ready(await self._proc.wait())
                buf += chunk
            self._ready(ready)
            return
        raise self._not_ready(None)

    async def _halt(self, *, kill: bool) -> None:
        import trio

        if self._scope is not None:
            scope, done, self._scope = self._scope, self._done, None
            scope.cancel()
            with trio.fail_after(self.start_timeout):
                await done.wait()
        if self._thread is not None:
            t, self._thread = self._thread, None
            await trio.to_thread.run_sync(t.stop, self.start_timeout)
        if self._proc is not None:
            p, self._proc = self._proc, None
            if p.returncode is None:
                p.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            with trio.move_on_after(self.start_timeout) as waited:
                await p.wait()
            if waited.cancelled_caught:
                p.kill()
                await p.wait()
            if p.stdout is not None:
                await p.stdout.aclose()

    # ------------------------------------------------------------------ test controls
    async def _control(self, what: str, action: Any, read: Callable[[Any], Any]) -> Any:
        import trio

        if self.mode == IN_PROCESS:
            if not self.running or self._controls is None:
                raise ServerError("the server is not running")
            reply = await self._controls.perform(action)
        elif self.mode == THREAD:
            t = self._thread
            if t is None or t.controls is None:
                raise ServerError("the server is not running")
            reply = await trio.to_thread.run_sync(t.call_async, t.controls.perform, action)
        else:
            if self._proc is None or self._controls_url is None:
                raise ServerError("the server is not running")
            url, timeout = self._controls_url, self.start_timeout
            reply = await trio.to_thread.run_sync(_http_control, url, action, timeout)
        return read(_control_reply(reply, what))

    async def expire_session(self, session_id: int) -> bool:
        """As :meth:`Server.expire_session`: returns once the closeSession is committed."""
        return bool(await self._control(*self._expire(session_id)))

    async def drop_connections(self, session_id: int | None = None) -> int:
        """As :meth:`Server.drop_connections`."""
        return int(await self._control(*self._drop(session_id)))

    async def advance(self, seconds: float) -> None:
        """As :meth:`Server.advance`: the server's clocks move ``seconds`` forward."""
        await self._control(*self._advance(seconds))

    async def session_ids(self) -> list[int]:
        """The ids of the sessions the server tracks."""
        return self._session_ids(await self.dump())

    async def dump(self) -> dict[str, Any]:
        """As :meth:`Server.dump`."""
        return dict(await self._control(*self._dump()))

    async def load(self, tree: Mapping[str, Any] | str | bytes) -> int:
        """As :meth:`Server.load` (a kazoo session in a worker thread)."""
        import trio

        wanted = _wanted(tree)
        return int(
            await trio.to_thread.run_sync(
                _create_all, self.connect_string, wanted, self.start_timeout
            )
        )
