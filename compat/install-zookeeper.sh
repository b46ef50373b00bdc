#!/bin/sh
# Install the compat suite's oracles, each only if it is missing:
#
# * Apache ZooKeeper 3.8.0 from Debian bookworm (packages zookeeper, zookeeper-bin), system-wide;
# * MIT Kerberos for the Kerberos (SASL GSSAPI) tests: krb5-kdc, krb5-admin-server (kdb5_util,
#   kadmin.local, krb5kdc: trizk.testing.kdc starts a throwaway realm on loopback, never the
#   system's services), krb5-user (kinit, klist) and libkrb5-dev (python-gssapi and pykerberos,
#   the test extras, build against it);
# * with TRIZK_C_SUITE=1, the build tools of ZooKeeper's C client test suite (zktest-mt, built
#   from Debian's source package by trizk.compat.ctests.build into ~/.cache/trizk/c-tests):
#   g++, make, autoconf, automake, libtool, pkg-config, dpkg-dev, libcppunit-dev, libssl-dev,
#   libsasl2-dev;
# * libfaketime (package faketime) for the wall-clock step tests: a member started with
#   libfaketime preloaded has its wall clock stepped by the test (trizk.compat.procs.clocksteps);
# * Apache ZooKeeper 3.9.3 from Debian trixie (libzookeeper-java, zookeeper, zookeeper-bin
#   3.9.3-1+deb13u1), never installed into the system: `apt-get download` under a private apt
#   state (own sources list, lists, cache and status file) and `dpkg-deb -x` into
#   $TRIZK_ZK39_DIR (default /opt/trizk-oracles/zookeeper-3.9.3). Its jars run on bookworm's
#   Java 17 with bookworm's dependency jars (trizk.compat.procs.servers builds the classpath,
#   zookeeper-jute-3.9.3.jar first).
#
# The mirrors for trixie are the ones this machine's apt already uses for bookworm (the URIs of
# its bookworm and bookworm-security suites in /etc/apt/sources.list.d/*.sources and
# /etc/apt/sources.list), checked with the machine's Debian archive keyring; no mirror host is
# named here.
#
# Idempotent: a second run with everything present does nothing and touches no package index.
# Needs root (or sudo) when something is missing. Used by CI before the compat tests.
set -eu

ZK39_VERSION="3.9.3-1+deb13u1"
ZK39_DIR="${TRIZK_ZK39_DIR:-/opt/trizk-oracles/zookeeper-3.9.3}"
ZK39_PACKAGES="libzookeeper-java zookeeper zookeeper-bin"

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi

# installed PKG...: every one of the Debian packages is installed (dpkg's status)
installed() {
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
    done
}

# apt_install PKG...: the packages from the machine's own apt sources, without recommends and
# without questions from their maintainer scripts
apt_install() {
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

# ---------------------------------------------------------------------------- 3.8.0 (bookworm)

have38() {
    [ -r /usr/share/java/zookeeper.jar ] \
        && [ -x /usr/share/zookeeper/bin/zkCli.sh ] \
        && [ -x /usr/lib/zookeeper/bin/cli_mt ] \
        && [ -r /usr/share/java/servlet-api.jar ] \
        && command -v java >/dev/null 2>&1
}

version_note() {
    # The suite's main oracle is ZooKeeper 3.8 (Debian bookworm ships 3.8.0); other releases
    # answer some requests differently, so say which one we got.
    if ls /usr/share/java/zookeeper-3.8.*.jar >/dev/null 2>&1; then
        echo "zookeeper: $(basename /usr/share/java/zookeeper-3.8.*.jar .jar)"
    else
        echo "zookeeper: WARNING: not a 3.8 release: $(ls /usr/share/java/zookeeper-[0-9]*.jar 2>/dev/null)" >&2
    fi
}

if have38; then
    echo "zookeeper: already installed"
else
    apt_install zookeeper zookeeper-bin libservlet-api-java default-jre-headless
    if ! have38; then
        echo "zookeeper: installation did not provide zookeeper.jar, zkCli.sh, cli_mt, servlet-api.jar and java" >&2
        exit 1
    fi
    echo "zookeeper: installed"
fi
version_note

# ---------------------------------------------------------------------------- MIT Kerberos

KRB5_PACKAGES="krb5-kdc krb5-admin-server krb5-user libkrb5-dev"

if installed $KRB5_PACKAGES; then
    echo "kerberos: already installed"
else
    # the packages' maintainer scripts would ask for a realm: none (the tests make their own)
    apt_install $KRB5_PACKAGES
    echo "kerberos: installed"
fi

# ---------------------------------------------------------------------------- C client suite tools

CTESTS_PACKAGES="g++ make autoconf automake libtool pkg-config dpkg-dev libcppunit-dev libssl-dev libsasl2-dev"

if [ "${TRIZK_C_SUITE:-}" != "1" ]; then
    echo "C client suite build tools: not asked for (TRIZK_C_SUITE=1 installs them)"
elif installed $CTESTS_PACKAGES; then
    echo "C client suite build tools: already installed"
else
    apt_install $CTESTS_PACKAGES
    echo "C client suite build tools: installed"
fi

# ---------------------------------------------------------------------------- libfaketime

if installed faketime; then
    echo "faketime: already installed"
else
    apt_install faketime
    echo "faketime: installed"
fi

# ---------------------------------------------------------------------------- 3.9.3 (trixie)

have39() {
    [ -r "$ZK39_DIR/usr/share/java/zookeeper-3.9.3.jar" ] \
        && [ -r "$ZK39_DIR/usr/share/java/zookeeper-jute-3.9.3.jar" ] \
        && [ -r "$ZK39_DIR/usr/share/zookeeper/bin/zkCli.sh" ]
}

if have39; then
    echo "zookeeper 3.9.3: already in $ZK39_DIR"
    exit 0
fi

# deb822 stanzas (*.sources) and one-line entries (sources.list): "URI SUITE KEYRING" for every
# enabled deb source of a bookworm suite (KEYRING "-" when the entry names none).
bookworm_sources() {
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk '
            function flush(   n, i, u, k) {
                if (types ~ /(^| )deb( |$)/ && enabled != "no") {
                    n = split(suites, s, " ")
                    m = split(uris, u, " ")
                    for (i = 1; i <= n; i++)
                        if (s[i] ~ /^bookworm/)
                            for (k = 1; k <= m; k++)
                                print u[k], s[i], (signed == "" ? "-" : signed)
                }
                types = ""; uris = ""; suites = ""; signed = ""; enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types") types = val
                else if (key == "uris") uris = val
                else if (key == "suites") suites = val
                else if (key == "signed-by") signed = val
                else if (key == "enabled") enabled = tolower(val)
            }
            END { flush() }
        ' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        awk '
            $1 != "deb" { next }
            {
                signed = "-"; i = 2
                if ($2 ~ /^\[/) {
                    while (i <= NF) {
                        if ($i ~ /signed-by=/) { signed = $i; sub(/.*signed-by=/, "", signed); sub(/\].*/, "", signed) }
                        if ($i ~ /\]$/) { i++; break }
                        i++
                    }
                }
                if ($(i + 1) ~ /^bookworm/) print $i, $(i + 1), signed
            }
        ' "$f"
    done
}

SOURCES="$(bookworm_sources)"
MAIN_URI="$(printf '%s\n' "$SOURCES" | awk '$2 == "bookworm" { print $1; exit }')"
SECURITY_URI="$(printf '%s\n' "$SOURCES" | awk '$2 == "bookworm-security" { print $1; exit }')"
KEYRING="$(printf '%s\n' "$SOURCES" | awk '$2 == "bookworm" && $3 != "-" { print $3; exit }')"
if [ -z "$KEYRING" ]; then
    KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
fi
if [ -z "$MAIN_URI" ]; then
    echo "zookeeper 3.9.3: no bookworm source in this machine's apt configuration to take the mirror from" >&2
    exit 1
fi
if [ ! -r "$KEYRING" ]; then
    echo "zookeeper 3.9.3: keyring $KEYRING not readable" >&2
    exit 1
fi

WORK="$(mktemp -d /tmp/trizk-zk39-apt.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/etc/parts" "$WORK/etc/prefs" "$WORK/lists/partial" "$WORK/cache/archives/partial" "$WORK/debs" "$WORK/root"
: > "$WORK/status"
{
    echo "deb [signed-by=$KEYRING] $MAIN_URI trixie main"
    echo "deb [signed-by=$KEYRING] $MAIN_URI trixie-updates main"
    if [ -n "$SECURITY_URI" ]; then
        echo "deb [signed-by=$KEYRING] $SECURITY_URI trixie-security main"
    fi
} > "$WORK/etc/sources.list"
# apt's download sandbox user must be able to write the download directory
chmod 755 "$WORK"
chmod 777 "$WORK/debs"

private_apt() {
    cmd="$1"
    shift
    "$cmd" \
        -o Dir::Etc::SourceList="$WORK/etc/sources.list" \
        -o Dir::Etc::SourceParts="$WORK/etc/parts" \
        -o Dir::Etc::Preferences="$WORK/etc/prefs/none" \
        -o Dir::Etc::PreferencesParts="$WORK/etc/prefs" \
        -o Dir::State::Lists="$WORK/lists" \
        -o Dir::State::status="$WORK/status" \
        -o Dir::Cache="$WORK/cache" \
        -o Dir::Cache::archives="$WORK/cache/archives" \
        -o Debug::NoLocking=true \
        "$@"
}

echo "zookeeper 3.9.3: fetching $ZK39_PACKAGES $ZK39_VERSION (Debian trixie) into $ZK39_DIR"
private_apt apt-get -q update
(
    cd "$WORK/debs"
    # shellcheck disable=SC2086
    private_apt apt-get -q download $(for p in $ZK39_PACKAGES; do printf '%s=%s ' "$p" "$ZK39_VERSION"; done)
)
for p in $ZK39_PACKAGES; do
    deb="$(ls "$WORK/debs/${p}_"*.deb)"
    got="$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
    if [ "$got" != "$p $ZK39_VERSION" ]; then
        echo "zookeeper 3.9.3: $deb is $got, not $p $ZK39_VERSION" >&2
        exit 1
    fi
    dpkg-deb -x "$deb" "$WORK/root"
done
$SUDO mkdir -p "$(dirname "$ZK39_DIR")"
$SUDO rm -rf "$ZK39_DIR.new"
$SUDO cp -a "$WORK/root" "$ZK39_DIR.new"
$SUDO rm -rf "$ZK39_DIR"
$SUDO mv "$ZK39_DIR.new" "$ZK39_DIR"
if ! have39; then
    echo "zookeeper 3.9.3: the packages did not provide zookeeper-3.9.3.jar, zookeeper-jute-3.9.3.jar and zkCli.sh" >&2
    exit 1
fi
echo "zookeeper 3.9.3: installed in $ZK39_DIR"
