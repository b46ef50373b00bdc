#!/bin/sh
# Install Apache ZooKeeper 3.8 from Debian (the compat suite's oracle), only if it is missing.
# Idempotent: a second run with everything present does nothing and touches no package index.
# Needs root (or sudo) when something is missing. Used by CI before the compat tests.
set -eu

have() {
    [ -r /usr/share/java/zookeeper.jar ] \
        && [ -x /usr/share/zookeeper/bin/zkCli.sh ] \
        && [ -x /usr/lib/zookeeper/bin/cli_mt ] \
        && [ -r /usr/share/java/servlet-api.jar ] \
        && command -v java >/dev/null 2>&1
}

version_note() {
    # The suite's oracle is ZooKeeper 3.8 (Debian bookworm ships 3.8.0); other releases answer
    # some requests differently, so say which one we got.
    if ls /usr/share/java/zookeeper-3.8.*.jar >/dev/null 2>&1; then
        echo "zookeeper: $(basename /usr/share/java/zookeeper-3.8.*.jar .jar)"
    else
        echo "zookeeper: WARNING: not a 3.8 release: $(ls /usr/share/java/zookeeper-[0-9]*.jar 2>/dev/null)" >&2
    fi
}

if have; then
    echo "zookeeper: already installed"
    version_note
    exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi

$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends zookeeper zookeeper-bin libservlet-api-java default-jre-headless

if ! have; then
    echo "zookeeper: installation did not provide zookeeper.jar, zkCli.sh, cli_mt, servlet-api.jar and java" >&2
    exit 1
fi
echo "zookeeper: installed"
version_note
