"""``trizk-server``: the command line (``python -m trizk.server`` runs the same).

Two ways to start:

* ``trizk-server`` with no config file: a ready **development server** on 127.0.0.1:2181
  (tickTime 2000, every four-letter word enabled), data in a fresh temporary directory that
  is deleted at exit unless ``--data-dir`` names one. The first log line says all of this.
* ``trizk-server zoo.cfg``: the file is read as ZooKeeper reads it (see ``config.py``);
  ``--port``/``--data-dir`` override ``clientPort``/``dataDir``, and ``-D name=value`` sets a
  property over the file (``-D zookeeper.extendedTypesEnabled=true``, as java's ``-D``).

Once the client port accepts connections, one line goes to stdout (logs go to stderr):
``trizk-server ready on 127.0.0.1:PORT port=PORT``, with the port actually bound, so a test
harness in any language can start ``trizk-server --port 0`` and wait for it
(``trizk.testing.READY_PREFIX``). With ``--testing`` (never on by default) the server also
serves its test controls over HTTP on a free 127.0.0.1 port (:mod:`trizk.server.ops.testcontrol`)
and the line ends `` testing=http://127.0.0.1:CPORT`` (no trailing slash: append ``/dump``).

Exit codes follow ZooKeeper's ``ExitCode``: 0 after SIGINT/SIGTERM (clean shutdown), 2 for an
invalid configuration (ZooKeeper: "Invalid config, exiting abnormally", INVALID_CONFIG = 2),
1 when the server cannot start (e.g. the client port is in use; ZooKeeper: UNEXPECTED_ERROR = 1),
14 when an ensemble member's election port stays taken (UNABLE_TO_BIND_QUORUM_PORT). Each
case is one log line naming the port: ``cannot start: ...``.

The server is ``trizk.server.shell.app.serve(config, *, task_status)``: it runs until cancelled and
reports its bound port through ``task_status.started(port)``. ``main`` takes it as a parameter
so the command line can be tested without a server.
"""

from __future__ import annotations

import argparse
import functools
import logging
import shutil
import signal
import sys
import tempfile
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, Protocol

import trio

import trizk
from trizk.server.auth.acl import AuthEnforcementError
from trizk.server.common import release
from trizk.server.config.zoocfg import ConfigError, ServerConfig, load_config, parse_property_option

__all__ = ["Serve", "build_parser", "main"]

log = logging.getLogger("trizk.server.config.main")

#: ZooKeeper log level names (log4j) and Python's, to Python levels.
LOG_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
    "critical": logging.CRITICAL,
}

EXIT_OK = 0
EXIT_UNEXPECTED_ERROR = 1
EXIT_INVALID_CONFIG = 2


def _storage_failure(exc: BaseException) -> BaseException | None:
    """The StorageFailure that stopped the server, if that is what ``exc`` is (or holds)."""
    from trizk.server.shell.persistence import StorageFailure

    return _held(exc, StorageFailure)


def _tls_failure(exc: BaseException) -> BaseException | None:
    """The TLSConfigError (a store or TLS setting that cannot be used) in ``exc``, if any."""
    if "trizk.server.shell.tls" not in sys.modules:
        return None  # nothing asked for TLS
    from trizk.server.shell.tls import TLSConfigError

    return _held(exc, TLSConfigError)


def _held(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``exc`` when it is a ``kind``, else the first ``kind`` an exception group holds."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            found = _held(sub, kind)
            if found is not None:
                return found
    return None


class Serve(Protocol):
    """The shape of ``trizk.server.shell.app.serve`` (``testing=True`` is passed only with
    ``--testing``; the server then reports ``(port, test controls' port)``)."""

    def __call__(
        self, config: ServerConfig, *, testing: bool = ..., task_status: Any = ...
    ) -> Awaitable[None]: ...


class _ZkFormatter(logging.Formatter):
    """Log lines shaped like ZooKeeper's log4j pattern
    ``%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n``."""

    _LEVELS = {"WARNING": "WARN", "CRITICAL": "FATAL"}

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s [myid:] - %(zklevel)-5s [%(threadName)s:%(module)s@%(lineno)d]"
            " - %(message)s"
        )

    def format(self, record: logging.LogRecord) -> str:
        record.zklevel = self._LEVELS.get(record.levelname, record.levelname)
        return super().format(record)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trizk-server",
        description=(
            "An Apache ZooKeeper 3.9 (and 3.8) compatible server. Without a config file: a"
            " development server on 127.0.0.1:2181 with a temporary data directory."
        ),
    )
    p.add_argument("config", nargs="?", type=Path, help="zoo.cfg to read (as ZooKeeper does)")
    p.add_argument(
        "--port", type=_port, help="client port (overrides clientPort; 0 = any free port)"
    )
    p.add_argument("--data-dir", type=Path, help="data directory (overrides dataDir)")
    p.add_argument(
        "--testing",
        action="store_true",
        help="serve the test controls (expire a session, drop connections, move the clock,"
        " dump) over HTTP on a free 127.0.0.1 port named on the readiness line; for tests only",
    )
    p.add_argument(
        "--log-level",
        default="info",
        type=str.lower,
        choices=sorted(LOG_LEVELS),
        help="log level (default: info)",
    )
    p.add_argument(
        "-D",
        dest="properties",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a property, as java -D (e.g. -D zookeeper.extendedTypesEnabled=true)",
    )
    p.add_argument(
        "--version",
        action="version",
        version=(
            f"trizk {trizk.__version__} (Apache ZooKeeper {' / '.join(release.RELEASES)}"
            f" compatible, default {release.DEFAULT_RELEASE})"
        ),
    )
    return p


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}")
    return port


def _setup_logging(level: int) -> None:
    # Configure the "trizk" logger only: records propagate to the root handlers whatever the
    # root level, and an embedding process (or pytest's capture) keeps its own setup.
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_ZkFormatter())
        root.addHandler(handler)
    logging.getLogger("trizk").setLevel(level)


def _address(config: ServerConfig, port: int | None = None) -> str:
    host = config.client_port_address or "0.0.0.0"
    return f"{host}:{config.client_port if port is None else port}"


def main(argv: Sequence[str] | None = None, *, serve: Serve | None = None) -> int:
    """Run ``trizk-server``; returns the process exit code."""
    args = build_parser().parse_args(argv)
    _setup_logging(LOG_LEVELS[args.log_level])

    try:
        properties = [parse_property_option(option) for option in args.properties]
    except ConfigError as exc:
        print(f"trizk-server: {exc}", file=sys.stderr)
        return EXIT_INVALID_CONFIG

    temp_dir: Path | None = None
    if args.config is None:
        if args.data_dir is not None:
            data_dir = args.data_dir
        else:
            temp_dir = data_dir = Path(tempfile.mkdtemp(prefix="trizk-"))
        config = ServerConfig.development(data_dir, properties=properties)
        if args.port is not None:
            config = config.replace(client_port=args.port)
        where = "(temporary, deleted at exit)" if temp_dir else "(kept)"
        log.info(
            "trizk development server: %s, data in %s %s, tickTime %d, answering as ZooKeeper"
            " %s, all four-letter words enabled; pass a zoo.cfg for a configured server",
            _address(config),
            config.data_dir,
            where,
            config.tick_time,
            config.zookeeper_version,
        )
    else:
        overrides = {"dataDir": str(args.data_dir)} if args.data_dir is not None else None
        try:
            config = load_config(args.config, properties=properties, overrides=overrides)
        except ConfigError as exc:
            # ZooKeeper: "Invalid config, exiting abnormally", exit code 2.
            print(f"trizk-server: invalid config {args.config}: {exc}", file=sys.stderr)
            return EXIT_INVALID_CONFIG
        if args.port is not None:
            config = config.replace(client_port=args.port)
        log.info(
            "trizk server (ZooKeeper %s compatible) from %s: %s, dataDir %s, dataLogDir %s,"
            " tickTime %d, session timeouts %d..%d ms",
            config.zookeeper_version,
            args.config,
            _address(config),
            config.data_dir,
            config.data_log_dir,
            config.tick_time,
            config.min_session_timeout,
            config.max_session_timeout,
        )
    for warning in config.warnings:
        log.warning("%s", warning)  # ZooKeeper's own configuration warnings
    if config.unsupported:
        log.warning("ignoring settings trizk does not support: %s", ", ".join(config.unsupported))
    if config.quorum is not None:
        log.info(
            "ensemble member server.%s of %d members (%d voting), initLimit %d, syncLimit %d",
            config.my_id,
            len(config.quorum),
            len(config.quorum.voting_members),
            config.init_limit,
            config.sync_limit,
        )

    if serve is None:
        from trizk.server.shell.app import serve as app_serve

        serve = app_serve
    if args.testing:
        serve = functools.partial(serve, testing=True)
    try:
        return trio.run(_run, config, serve)
    except KeyboardInterrupt:  # a signal before the receiver was installed
        return EXIT_OK
    except Exception as exc:
        failure = _storage_failure(exc)
        tls_failure = _tls_failure(exc)
        enforce_failure = _held(exc, AuthEnforcementError)
        if enforce_failure is not None:
            # AuthenticationHelper's IllegalArgumentException: ZooKeeperServerMain logs
            # "Invalid arguments, exiting abnormally" and exits with INVALID_CONFIG (2)
            log.error("Invalid arguments, exiting abnormally: %s", enforce_failure)
            return EXIT_INVALID_CONFIG
        if failure is not None:
            # ZooKeeperServer: "Severe unrecoverable error, exiting" (ExitCode.UNEXPECTED_ERROR)
            log.error("Severe unrecoverable error, exiting: %s", failure)
        elif tls_failure is not None:
            # ZooKeeper fails in X509Util.createSSLContextAndOptions (an SSLContextException
            # logged with its stack); trizk writes the one line that names the key.
            log.error("Unable to start the server, TLS configuration: %s", tls_failure)
        else:
            log.exception("server failed")
        return EXIT_UNEXPECTED_ERROR
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _startup_oserror(failure: BaseException) -> OSError | None:
    """The OSError a failed start-up comes down to, alone or as the only kind of exception in
    (nested) exception groups; None for anything else."""
    if isinstance(failure, OSError):
        return failure
    if isinstance(failure, BaseExceptionGroup):
        match, rest = failure.split(OSError)
        if match is not None and rest is None:
            leaf: BaseException = match
            while isinstance(leaf, BaseExceptionGroup):
                leaf = leaf.exceptions[0]
            return leaf if isinstance(leaf, OSError) else None
    return None


async def _run(config: ServerConfig, serve: Serve) -> int:
    """Serve until SIGINT/SIGTERM (→ 0) or until the server fails to start (→ 1)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def run_server(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
                await serve(config, task_status=task_status)
                # The server returned by itself: stop waiting for signals. (Not in a
                # `finally`: cancelling while a failure propagates out of nursery.start()
                # would wrap it with Cancelled and defeat the OSError handler below.)
                nursery.cancel_scope.cancel()

            async def watch_signals() -> None:
                async for signum in signals:
                    log.info("%s received, shutting down", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(watch_signals)
            try:
                port = await nursery.start(run_server)
            except ValueError as login_error:
                # a JAAS/Kerberos login that fails (ServerCnxnFactory.configureSaslLogin's
                # IOException: ZooKeeper exits 1): one line, no traceback
                from trizk.server.auth.sasl import JaasError

                if not isinstance(login_error, JaasError):
                    raise
                log.error("cannot start: %s", login_error)
                nursery.cancel_scope.cancel()
                return EXIT_UNEXPECTED_ERROR
            except (OSError, BaseExceptionGroup) as failure:
                # a start-up failure may come through the server's nurseries, grouped
                # (trio's strict exception groups): only an OSError is a clear start-up error
                exc = _startup_oserror(failure)
                if exc is None:
                    raise
                # ZooKeeper: a taken client port is "Unexpected exception, exiting
                # abnormally" (exit 1); a taken election port exits with 14
                # (UNABLE_TO_BIND_QUORUM_PORT, cnxmanager.PortBindError.exit_code)
                log.error("cannot start: %s", exc)
                nursery.cancel_scope.cancel()
                return int(getattr(exc, "exit_code", EXIT_UNEXPECTED_ERROR))
            # with --testing, serve reports (client port, test controls' port or None)
            controls = None
            if isinstance(port, tuple):
                port, controls = port
            bound = port if isinstance(port, int) else config.client_port
            # The readiness line test harnesses wait for (trizk.testing.READY_PREFIX): printed
            # once the client port accepts connections, with the port bound (--port 0), and
            # with --testing the test controls' URL.
            line = f"trizk-server ready on {_address(config, bound)} port={bound}"
            if controls is not None:
                line += f" testing=http://127.0.0.1:{controls}"
            print(line, flush=True)
    log.info("shut down")
    return EXIT_OK
