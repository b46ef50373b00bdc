"""Quorum SASL's Trio shell: the logins (the JAAS file, Kerberos keytabs) and the exchanges of
:mod:`trizk.server.auth.quorumsasl` run on a connection's stream.

:func:`load` reads what ``QuorumPeer.initialize`` reads at start-up (``SaslQuorumAuthServer`` and
``SaslQuorumAuthLearner``: the JAAS file of ``-Djava.security.auth.login.config``, the keytabs
of its Kerberos sections); a failure is one line (:class:`~trizk.server.auth.sasl.JaasError`)
and the member does not start. :class:`QuorumAuth` runs one exchange on a stream, bounded by
the caller's timeout (Java's socket read timeout there): :meth:`QuorumAuth.accept` on a
connection a member accepted (election or quorum port), :meth:`QuorumAuth.authenticate` on one
it opened. Each returns the bytes the peer sent past the exchange, or None when the connection
is refused: then one line says why, and the caller closes it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import trio

from trizk.server.auth import sasl as saslmod
from trizk.server.auth.quorumsasl import (
    AuthOut,
    QuorumAuthLearner,
    QuorumAuthServer,
    QuorumAuthSettings,
    QuorumLearnerLogin,
    QuorumServerLogin,
    Verdict,
    logins_from_jaas,
)
from trizk.server.shell.streams import socket_of

__all__ = ["QuorumAuth", "load", "peer_address"]

log = logging.getLogger("trizk.quorum.auth")

_READ = 4096
JAAS_PROPERTY = "java.security.auth.login.config"


@dataclass(frozen=True)
class QuorumAuth:
    """A member's quorum SASL: its settings and both logins (``enableSasl=true``)."""

    settings: QuorumAuthSettings
    server: QuorumServerLogin
    learner: QuorumLearnerLogin

    @property
    def max_handshakes(self) -> int:
        """``quorum.cnxn.threads.size``: the connection threads of ``QuorumCnxManager``."""
        return self.settings.cnxn_threads

    async def accept(
        self, stream: trio.abc.Stream, first: bytes, timeout: float, where: str, peer: str
    ) -> bytes | None:
        """``SaslQuorumAuthServer.authenticate`` on a connection accepted on ``where`` (the
        election or the quorum port) from ``peer``, ``first`` already read after its initial
        message."""
        machine = QuorumAuthServer(
            self.server, self.settings.server_required, saslmod.random_nonce(), peer
        )
        out = machine.data_received(first) if first else AuthOut()
        return await self._run(stream, machine, out, timeout, f"{where} refused {peer}")

    async def authenticate(
        self, stream: trio.abc.Stream, hostname: str, timeout: float, where: str, peer: str
    ) -> bytes | None:
        """``SaslQuorumAuthLearner.authenticate`` on a connection opened to ``peer``, whose
        server line names ``hostname`` (``_HOST`` of the service principal)."""
        machine = QuorumAuthLearner(
            self.learner,
            self.settings.learner_required,
            self.settings.service_principal,
            hostname,
            saslmod.random_nonce(),
            peer,
        )
        if self.learner.kerberos is not None and self.settings.learner_required:
            # the first GSS step asks the KDC for a service ticket (blocking network I/O, the
            # KDC's own timeouts): off the Trio thread; later steps are local computations
            out = await trio.to_thread.run_sync(machine.start)
        else:
            out = machine.start()
        what = f"{where}: cannot authenticate to {peer}"
        return await self._run(stream, machine, out, timeout, what)

    async def _run(
        self,
        stream: trio.abc.Stream,
        machine: QuorumAuthServer | QuorumAuthLearner,
        out: AuthOut,
        timeout: float,
        what: str,
    ) -> bytes | None:
        try:
            with trio.fail_after(timeout):
                while True:
                    if out.send:
                        await stream.send_all(out.send)
                    if out.verdict is not None:
                        break
                    data = await stream.receive_some(_READ)
                    out = machine.data_received(bytes(data)) if data else machine.connection_lost()
        except trio.TooSlowError:
            out = machine.connection_lost("Read timed out")
            await _send_quietly(stream, out.send)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as e:
            out = machine.connection_lost(str(e) or type(e).__name__)
        if out.verdict is Verdict.REFUSE:
            log.error("quorum SASL: %s: %s; closing the connection", what, out.reason)
            return None
        return out.rest


def peer_address(stream: trio.abc.Stream) -> str:
    """``host:port`` of the peer of a socket stream (or of the one a wrapper wraps)."""
    sock = socket_of(stream)
    if sock is None:
        return "?"
    try:
        host, port = sock.getpeername()[:2]
    except (OSError, ValueError, TypeError):
        return "?"
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


async def _send_quietly(stream: trio.abc.Stream, data: bytes) -> None:
    if not data:
        return
    with trio.move_on_after(1):
        try:
            await stream.send_all(data)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass


def load(
    settings: QuorumAuthSettings,
    properties: Mapping[str, str],
    authz_hosts: frozenset[str],
) -> QuorumAuth | None:
    """The member's quorum SASL (None without ``quorum.auth.enableSasl``), or JaasError."""
    if not settings.enabled:
        log.info("QuorumPeer communication is not secured! (SASL auth disabled)")
        return None
    path = properties.get(JAAS_PROPERTY)
    if path is None:
        raise saslmod.JaasError(
            "Failed to initialize authentication mechanism using SASL: quorum.auth.enableSasl "
            f"is true but no JAAS configuration is given (-D{JAAS_PROPERTY}=FILE)"
        )
    path = path[1:] if path.startswith("=") else path
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise saslmod.JaasError(
            f"Failed to initialize authentication mechanism using SASL: cannot read the JAAS "
            f"configuration '{path}' ({e.strerror or e})"
        ) from None
    server, learner = logins_from_jaas(
        text,
        settings,
        path,
        authz_hosts,
        server_realm=properties.get("zookeeper.server.realm"),
    )
    if server.kerberos is not None or learner.kerberos is not None:
        from trizk.server.shell import kerberos

        prefix = "Failed to initialize authentication mechanism using SASL: "
        if server.kerberos is not None:
            server.kerberos.service_and_host()
            server = dataclasses.replace(
                server,
                acceptor=kerberos.acceptor_factory(
                    server.kerberos, properties, f"{prefix}{server.kerberos.principal}: "
                ),
            )
        if learner.kerberos is not None:
            learner = dataclasses.replace(
                learner,
                initiator=kerberos.initiator_factory(
                    learner.kerberos, properties, f"{prefix}{learner.kerberos.principal}: "
                ),
            )
    log.info(
        "quorum.auth.enableSasl set to true; quorum.auth.learnerRequireSasl=%s, "
        "quorum.auth.serverRequireSasl=%s (%s)",
        str(settings.learner_required).lower(),
        str(settings.server_required).lower(),
        "GSSAPI" if server.kerberos is not None else "DIGEST-MD5",
    )
    return QuorumAuth(settings, server, learner)
