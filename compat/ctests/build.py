"""Build ``zktest-mt``, Apache ZooKeeper's C client test binary, and the C client's shell
``cli_mt`` with SASL, from Debian's source package.

Steps, each skipped when its product is already in the cache directory (``$TRIZK_CTESTS_DIR``,
default ``~/.cache/trizk/c-tests``), so that a second run does nothing and touches no network:

1. ``apt-get source --download-only zookeeper=VERSION`` under a private apt state (its own
   sources list with one ``deb-src`` line, lists, cache; nothing of the system's apt changes),
   VERSION being the installed oracle's (``dpkg-query``), or bookworm's when none is installed.
   The mirror is ``$TRIZK_DEBIAN_MIRROR``, else the machine's own bookworm mirror and keyring
   (:func:`machine_mirror`), else ``http://deb.debian.org/debian`` with the Debian archive
   keyring.
2. ``dpkg-source -x``: the orig tarball with Debian's patches applied, the source Debian built
   its ``libzookeeper-mt2`` from.
3. The C records from ``zookeeper.jute``, by the Jute compiler of the installed ZooKeeper
   (``org.apache.jute.compiler.generated.Rcc -l c`` in ``zookeeper-jute.jar``).
4. ``autoreconf -if``, ``./configure`` (cppunit, OpenSSL and Cyrus SASL found by pkg-config
   and the headers: the binary has the suite's TLS and SASL tests, which Debian's own
   ``libzookeeper-mt`` lacks: bookworm builds it without OpenSSL and without SASL), then
   ``make zktest-mt`` and ``make cli_mt`` (the same client library, with Cyrus SASL:
   ``--mechlist GSSAPI``, which Debian's ``zookeeper-bin`` cli_mt lacks). Two compiler flags
   make the 2022 sources build with bookworm's GCC 12 and OpenSSL 3, without editing them:
   ``-include time.h`` (``tests/Util.cc`` calls ``nanosleep`` without it) and
   ``-DFIPS_mode()=0`` (OpenSSL 3 removed ``FIPS_mode``; the client only asks whether FIPS is
   on to skip its OpenSSL initialisation, and it is not).

Build tools (Debian packages): ``g++ make autoconf automake libtool pkg-config libcppunit-dev
libssl-dev libsasl2-dev`` and ``dpkg-dev`` (``dpkg-source``); :func:`missing_tools` names the
absent ones. ``compat/install-zookeeper.sh`` installs them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Where Debian's ZooKeeper 3.8 keeps the Jute compiler (``libzookeeper-java``)
JUTE_JAR = "/usr/share/java/zookeeper-jute.jar"
#: The release suite whose sources the suite is built from (the 3.8.0 oracle's)
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
#: The compiler flags that make the sources build with GCC 12 and OpenSSL 3 (module docstring)
CPPFLAGS = "-include time.h '-DFIPS_mode()=0'"
#: Relative to the unpacked source tree
CLIENT_DIR = Path("zookeeper-client/zookeeper-client-c")
JUTE_FILE = Path("zookeeper-jute/src/main/resources/zookeeper.jute")

#: (what, how it is found): commands on PATH, or pkg-config modules / headers
TOOLS: tuple[tuple[str, str], ...] = (
    ("g++", "cmd"),
    ("make", "cmd"),
    ("autoreconf", "cmd"),
    ("automake", "cmd"),
    ("libtoolize", "cmd"),
    ("pkg-config", "cmd"),
    ("dpkg-source", "cmd"),
    ("apt-get", "cmd"),
    ("java", "cmd"),
    ("cppunit", "pkg"),
    ("openssl", "pkg"),
    ("libsasl2", "pkg"),
)
#: the Debian package providing each tool (for the skip reason)
PACKAGES = {
    "g++": "g++",
    "make": "make",
    "autoreconf": "autoconf",
    "automake": "automake",
    "libtoolize": "libtool",
    "pkg-config": "pkg-config",
    "dpkg-source": "dpkg-dev",
    "apt-get": "apt",
    "java": "default-jre-headless",
    "cppunit": "libcppunit-dev",
    "openssl": "libssl-dev",
    "libsasl2": "libsasl2-dev",
}


class BuildError(RuntimeError):
    """A build step failed; the message names the step and its log file."""


@dataclass(frozen=True)
class Build:
    """A built suite: the binary and the source directory it was built in."""

    #: ``.../zookeeper-client/zookeeper-client-c`` of the unpacked, patched source
    client_dir: Path
    #: the Debian version of the source package
    version: str

    @property
    def binary(self) -> Path:
        return self.client_dir / "zktest-mt"

    @property
    def cli_mt(self) -> Path:
        """The C client's shell built with SASL (``-n/--mechlist``, ``-u``, ``-l``, ``-o``,
        ``-z``): libtool's wrapper script, runnable in place."""
        return self.client_dir / "cli_mt"

    @property
    def tests_dir(self) -> Path:
        return self.client_dir / "tests"


def cache_dir() -> Path:
    """``$TRIZK_CTESTS_DIR`` or ``~/.cache/trizk/c-tests``."""
    env = os.environ.get("TRIZK_CTESTS_DIR")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "trizk" / "c-tests"


def missing_tools() -> list[str]:
    """The Debian packages of the absent build tools (empty when the build can run)."""
    missing = []
    have_pkgconfig = shutil.which("pkg-config") is not None
    for name, kind in TOOLS:
        if kind == "cmd":
            ok = shutil.which(name) is not None
        else:
            ok = (
                have_pkgconfig
                and subprocess.run(
                    ["pkg-config", "--exists", name], check=False, capture_output=True
                ).returncode
                == 0
            )
        if not ok:
            missing.append(PACKAGES[name])
    if not os.path.exists(JUTE_JAR):
        missing.append("libzookeeper-java")
    return missing


def installed_version() -> str | None:
    """The Debian version of the installed ``zookeeper`` package (the 3.8 oracle), if any."""
    if shutil.which("dpkg-query") is None:
        return None
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "zookeeper"],
        check=False,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or None if out.returncode == 0 else None


def _step(
    what: str, cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None
) -> None:
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}   (in {cwd})\n".encode())
        out.flush()
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=None if env is None else {**os.environ, **env},
            check=False,
        )
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode}); see {log}")


def machine_mirror() -> tuple[str, str] | None:
    """(URI, keyring) of the machine's own apt source for bookworm (deb822 ``*.sources`` or
    one-line ``sources.list`` entries), as ``compat/install-zookeeper.sh`` takes its mirrors;
    None when there is none."""
    stanzas: list[dict[str, str]] = []
    for f in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        cur: dict[str, str] = {}
        for line in [*f.read_text(errors="replace").splitlines(), ""]:
            if not line.strip():
                if cur:
                    stanzas.append(cur)
                cur = {}
            elif not line.lstrip().startswith("#") and ":" in line:
                k, v = line.split(":", 1)
                cur[k.strip().lower()] = v.strip()
    for st in stanzas:
        suites = st.get("suites", "").split()
        if SUITE in suites and st.get("enabled", "yes").lower() != "no":
            return st.get("uris", "").split()[0], st.get("signed-by", KEYRING)
    for f in [
        Path("/etc/apt/sources.list"),
        *sorted(Path("/etc/apt/sources.list.d").glob("*.list")),
    ]:
        if not f.exists():
            continue
        for line in f.read_text(errors="replace").splitlines():
            words = line.split()
            if not words or words[0] != "deb":
                continue
            keyring = KEYRING
            rest = words[1:]
            if rest and rest[0].startswith("["):
                while rest:
                    w = rest.pop(0)
                    if "signed-by=" in w:
                        keyring = w.split("signed-by=", 1)[1].rstrip("]")
                    if w.endswith("]"):
                        break
            if len(rest) >= 2 and rest[1] == SUITE:
                return rest[0], keyring
    return None


def _fetch_source(base: Path, version: str | None, log: Path) -> Path:
    """The ``.dsc`` of zookeeper ``version`` (bookworm's newest when None) in ``base/src``."""
    src = base / "src"
    dscs = sorted(src.glob("zookeeper_*.dsc")) if src.exists() else []
    if version is not None:
        dscs = [d for d in dscs if d.name == f"zookeeper_{version.split(':')[-1]}.dsc"]
    if dscs:
        return dscs[-1]
    apt = base / "apt"
    for d in ("lists/partial", "cache/archives/partial", "etc/parts", "etc/prefs"):
        (apt / d).mkdir(parents=True, exist_ok=True)
    mirror, keyring = machine_mirror() or (DEFAULT_MIRROR, KEYRING)
    mirror = os.environ.get("TRIZK_DEBIAN_MIRROR", mirror)
    (apt / "etc/sources.list").write_text(f"deb-src [signed-by={keyring}] {mirror} {SUITE} main\n")
    (apt / "status").touch()
    opts = [
        f"-oDir::Etc::SourceList={apt}/etc/sources.list",
        f"-oDir::Etc::SourceParts={apt}/etc/parts",
        f"-oDir::Etc::PreferencesParts={apt}/etc/prefs",
        f"-oDir::Etc::Preferences={apt}/etc/prefs/none",
        f"-oDir::State::Lists={apt}/lists",
        f"-oDir::State::status={apt}/status",
        f"-oDir::Cache={apt}/cache",
        "-oDebug::NoLocking=true",
        # the download runs as root here; apt's sandbox user could not write src/
        "-oAPT::Sandbox::User=root",
    ]
    _step("apt-get update (private, deb-src)", ["apt-get", "-q", *opts, "update"], base, log)
    src.mkdir(parents=True, exist_ok=True)
    wanted = "zookeeper" if version is None else f"zookeeper={version}"
    _step(
        f"apt-get source --download-only {wanted}",
        ["apt-get", "-q", *opts, "source", "--download-only", wanted],
        src,
        log,
    )
    dscs = sorted(src.glob("zookeeper_*.dsc"))
    if not dscs:
        raise BuildError(f"apt-get source gave no zookeeper .dsc in {src}; see {log}")
    return dscs[-1]


def cached(base: Path | None = None, *, version: str | None = None) -> Build | None:
    """The suite already built under ``base`` (:func:`cache_dir`) from the source of ``version``
    (default: the installed ``zookeeper`` package's), or None: no build tool is needed then."""
    base = cache_dir() if base is None else base
    version = version or installed_version()
    if version is None:
        return None
    got = version.split(":")[-1]
    b = Build(base / f"zookeeper-{got}" / CLIENT_DIR, got)
    return b if b.binary.exists() else None


def build(base: Path | None = None, *, version: str | None = None) -> Build:
    """Fetch, unpack and build ``zktest-mt`` and ``cli_mt`` under ``base`` (:func:`cache_dir`),
    each step only when its product is missing. ``version``: the Debian version of the source
    (default: the installed ``zookeeper`` package's). Raises :class:`BuildError`."""
    base = cache_dir() if base is None else base
    base.mkdir(parents=True, exist_ok=True)
    log = base / "build.log"
    version = version or installed_version()
    dsc = _fetch_source(base, version, log)
    got = dsc.name.removeprefix("zookeeper_").removesuffix(".dsc")
    tree = base / f"zookeeper-{got}"
    client = tree / CLIENT_DIR
    built = Build(client, got)
    if built.binary.exists() and built.cli_mt.exists():
        return built
    if not (tree / JUTE_FILE).exists():
        shutil.rmtree(tree, ignore_errors=True)
        _step("dpkg-source -x", ["dpkg-source", "--no-check", "-x", str(dsc), str(tree)], base, log)
    generated = client / "generated"
    if not (generated / "zookeeper.jute.c").exists():
        generated.mkdir(exist_ok=True)
        _step(
            "Jute compiler (Rcc -l c)",
            [
                "java",
                "-cp",
                JUTE_JAR,
                "org.apache.jute.compiler.generated.Rcc",
                "-l",
                "c",
                str(tree / JUTE_FILE),
            ],
            generated,
            log,
        )
    if not (client / "Makefile").exists():
        _step("autoreconf", ["autoreconf", "-if"], client, log)
        _step("configure", ["./configure", "--with-cppunit"], client, log)
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    _step("make zktest-mt", ["make", f"-j{jobs}", f"CPPFLAGS={CPPFLAGS}", "zktest-mt"], client, log)
    if not built.binary.exists():
        raise BuildError(f"make gave no {built.binary}; see {log}")
    _step("make cli_mt", ["make", f"-j{jobs}", f"CPPFLAGS={CPPFLAGS}", "cli_mt"], client, log)
    if not built.cli_mt.exists():
        raise BuildError(f"make gave no {built.cli_mt}; see {log}")
    return built
