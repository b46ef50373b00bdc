# trizk in place of the official `zookeeper` image: same ZOO_* variables, volumes, ports and
# default command (see server/config/docker.py). Build: docker build -t trizk .
FROM python:3.11-slim

ENV ZOO_CONF_DIR=/conf \
    ZOO_DATA_DIR=/data \
    ZOO_DATA_LOG_DIR=/datalog \
    ZOO_LOG_DIR=/logs \
    ZOO_TICK_TIME=2000 \
    ZOO_INIT_LIMIT=5 \
    ZOO_SYNC_LIMIT=2 \
    ZOO_AUTOPURGE_PURGEINTERVAL=0 \
    ZOO_AUTOPURGE_SNAPRETAINCOUNT=3 \
    ZOO_MAX_CLIENT_CNXNS=60 \
    ZOO_STANDALONE_ENABLED=true \
    ZOO_ADMINSERVER_ENABLED=true

RUN set -eux; \
    groupadd -r zookeeper --gid=1000; \
    useradd -r -g zookeeper --uid=1000 zookeeper; \
    mkdir -p "$ZOO_DATA_LOG_DIR" "$ZOO_DATA_DIR" "$ZOO_CONF_DIR" "$ZOO_LOG_DIR"; \
    chown zookeeper:zookeeper "$ZOO_DATA_LOG_DIR" "$ZOO_DATA_DIR" "$ZOO_CONF_DIR" "$ZOO_LOG_DIR"

COPY . /usr/src/trizk
# pyjks (JKS key stores) depends on twofish, published as source only: a C compiler for the
# install, removed after it. TRIZK_PURE_PYTHON=1 keeps trizk itself as a slim image without a
# compiler builds it (not compiled with mypyc).
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends gcc libc6-dev; \
    TRIZK_PURE_PYTHON=1 pip install --no-cache-dir /usr/src/trizk; \
    apt-get purge -y --auto-remove gcc libc6-dev; \
    rm -rf /var/lib/apt/lists/* /usr/src/trizk

VOLUME ["/data", "/datalog", "/logs"]
EXPOSE 2181 2888 3888 8080

ENTRYPOINT ["trizk-docker-entrypoint"]
CMD ["zkServer.sh", "start-foreground"]
