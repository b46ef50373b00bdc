"""A throwaway MIT Kerberos realm on loopback, for Kerberos (SASL GSSAPI) tests.

:class:`LocalKdc` makes a realm in a directory of its own with Debian's ``krb5-kdc`` tools
(``kdb5_util create -s``, ``kadmin.local addprinc``/``ktadd``), writes the client and KDC
configurations (``krb5.conf``: no DNS, no reverse lookups, the KDC at ``127.0.0.1:PORT``;
``kdc.conf``: listening on that address only), and runs ``krb5kdc -n`` as a child process,
stopped by its PID. Every step is bounded (:data:`STEP_TIMEOUT`).

Processes that use the realm need ``KRB5_CONFIG`` (:meth:`LocalKdc.env`); a JVM reads
``-Djava.security.krb5.conf`` (:meth:`LocalKdc.java_options`). :meth:`LocalKdc.kinit` fills a
credential cache for a client principal from its keytab.

Needs ``krb5-kdc``, ``krb5-admin-server`` and ``krb5-user`` (compat/install-zookeeper.sh
installs them); :func:`available` says whether they are there.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from trizk.testing.ports import free_port

#: the bound on each command and on the KDC's start (seconds)
STEP_TIMEOUT = 30.0
REALM = "TRIZK.TEST"
_TOOLS = ("kdb5_util", "kadmin.local", "krb5kdc", "kinit")


def _tool(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for d in ("/usr/sbin", "/sbin") if os.access(p := f"{d}/{name}", os.X_OK)), None
    )


def available() -> str | None:
    """None when the MIT KDC tools are installed, else what is missing."""
    missing = [t for t in _TOOLS if _tool(t) is None]
    return f"MIT Kerberos tools missing: {', '.join(missing)}" if missing else None


class LocalKdc:
    """A realm and its KDC in ``directory``: use as a context manager (or start/stop)."""

    def __init__(self, directory: Path, realm: str = REALM) -> None:
        self.directory = Path(directory)
        self.realm = realm
        self.port = free_port()
        self.krb5_conf = self.directory / "krb5.conf"
        self.kdc_conf = self.directory / "kdc.conf"
        self._proc: subprocess.Popen[bytes] | None = None

    # -- set-up ------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The variables a Kerberos client or acceptor of this realm needs."""
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.kdc_conf),
            # an acceptor's replay cache in the realm's directory, not /var/tmp
            "KRB5RCACHEDIR": str(self.directory),
        }

    def java_options(self) -> list[str]:
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]

    def _write_configs(self) -> None:
        d, r, port = self.directory, self.realm, self.port
        self.krb5_conf.write_text(
            f"""[libdefaults]
    default_realm = {r}
    dns_lookup_realm = false
    dns_lookup_kdc = false
    rdns = false
    dns_canonicalize_hostname = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    forwardable = false

[realms]
    {r} = {{
        kdc = 127.0.0.1:{port}
    }}

[domain_realm]
    localhost = {r}
"""
        )
        self.kdc_conf.write_text(
            f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{port}
    kdc_tcp_listen = 127.0.0.1:{port}

[realms]
    {r} = {{
        database_name = {d}/principal
        key_stash_file = {d}/stash
        acl_file = {d}/kadm5.acl
        max_life = 1h
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{d}/kdc.log
"""
        )
        (d / "kadm5.acl").write_text("")

    def _run(self, *argv: str) -> str:
        tool = _tool(argv[0]) or argv[0]
        env = {**os.environ, **self.env()}
        proc = subprocess.run(
            [tool, *argv[1:]],
            env=env,
            capture_output=True,
            timeout=STEP_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} exited {proc.returncode}: "
                f"{proc.stderr.decode(errors='replace').strip()}"
            )
        return proc.stdout.decode(errors="replace")

    def kadmin(self, query: str) -> str:
        return self._run("kadmin.local", "-r", self.realm, "-q", query)

    def add_principal(
        self, name: str, keytab: Path | None = None, password: str | None = None
    ) -> str:
        """Add ``name`` (``@REALM`` appended when absent): with ``password``, else random keys
        exported to ``keytab``; returns the full principal."""
        principal = name if "@" in name else f"{name}@{self.realm}"
        if password is not None:
            self.kadmin(f"addprinc -pw {password} {principal}")
        else:
            self.kadmin(f"addprinc -randkey {principal}")
        if keytab is not None:
            self.kadmin(f"ktadd -k {keytab} {principal}")
        return principal

    def kinit(self, principal: str, keytab: Path, ccache: Path) -> None:
        """A credential cache for ``principal`` from its keytab."""
        self._run("kinit", "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", principal)

    # -- the KDC -----------------------------------------------------------------------------

    def start(self) -> LocalKdc:
        missing = available()
        if missing is not None:
            raise RuntimeError(missing)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write_configs()
        self._run("kdb5_util", "-r", self.realm, "create", "-s", "-P", "trizk-master-key")
        tool = _tool("krb5kdc") or "krb5kdc"
        log = open(self.directory / "krb5kdc.out", "wb")
        with log:
            self._proc = subprocess.Popen(
                [tool, "-n", "-r", self.realm],
                env={**os.environ, **self.env()},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            if self._proc.poll() is not None:
                out = (self.directory / "krb5kdc.out").read_text(errors="replace")
                raise RuntimeError(f"krb5kdc exited {self._proc.returncode}: {out.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"krb5kdc did not listen on 127.0.0.1:{self.port}") from None
                time.sleep(0.05)  # polling the child's port, bounded by the deadline
        return self

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # this PID only: the krb5kdc started above
        try:
            proc.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STEP_TIMEOUT)

    def __enter__(self) -> LocalKdc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
