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
RUN pip install --no-cache-dir /usr/src/trizk && rm -rf /usr/src/trizk

VOLUME ["/data", "/datalog", "/logs"]
EXPOSE 2181 2888 3888 8080

ENTRYPOINT ["trizk-docker-entrypoint"]
CMD ["zkServer.sh", "start-foreground"]
