"""The Apache ZooKeeper release trizk answers as: ``3.8.0`` or ``3.9.3``.

Theory
------
A client or an operator can tell ZooKeeper releases apart: 3.9 changed a handful of answers
on the wire (watch notifications carry the zxid of the write that fired them, ZOOKEEPER-4655;
removeWatches/checkWatches know the persistent watcher types, ZOOKEEPER-4472; ...) and prints
its own version in ``srvr``, ``envi``, mntr and the AdminServer. trizk answers as one release:
3.9.3, the current release line, unless the operator picks 3.8.0 with
``trizk.zookeeperVersion`` (a zoo.cfg key of trizk's own, or the system property
``-D trizk.zookeeperVersion=``, which wins, as ``-D`` options do). The choice
reaches the pure cores through :class:`~trizk.server.common.coreconfig.CoreConfig` and the
operator's views through :class:`~trizk.server.config.zoocfg.ServerConfig`; each 3.9 behaviour
asks :func:`is_39` at the one place it differs, with the ZooKeeper change that made it.

What follows the release (each checked against the live servers:
``compat/scenarios/zookeeper39.json``, ``tests/compat/test_zookeeper39_answers.py``)
------------------------------------------------------------------------------------
=================================  ===========================  ===============================
behaviour                          3.8.0                        3.9.3
=================================  ===========================  ===============================
watch notification's zxid          -1                           the firing txn's (4655)
one-shot + persistent watch, one   the firing removes both      the persistent one stays (4466)
path, one connection
removeWatches/checkWatches type    MARSHALLINGERROR             persistent / recursive (4472);
4/5; types 1/2                     any watch of the path        the one-shot watches only
recursive addWatch                 data and child tables        data table only
checkWatches of a null path        MARSHALLINGERROR             NOWATCHER
a null-path persistent watch       the second one (or its       a watch like any other
(addWatch, setWatches2)            removal) MARSHALLINGERROR
exists without READ                the Stat                     NOAUTH (2590)
create2 in a multi                 a create result (path)       a create2 result, with Stat
                                                                (4026)
check outside a multi              its error (a successful one  UNIMPLEMENTED, closed
                                   never: trizk answers OK)
multi: null path, create flags     per-op errors / MARSHALLING  MARSHALLINGERROR, no body, a
no CreateMode has, TTL flags       ERROR with an empty body     zxid taken (whatever precedes)
under create
multi: a create's null ACL list    that op's INVALIDACL         MARSHALLINGERROR, no txn
                                                                (unless an op before it, or
                                                                its own flags, fail first)
a write whose record does not      MARSHALLINGERROR, an error   MARSHALLINGERROR, no txn (the
decode                             txn (a zxid taken)           reply has the last zxid)
a client's deleteContainer         BADARGUMENTS (the path is    any empty node deleted, ACLs
                                   the whole buffer)            unchecked; null: MARSHALLING
snapshots                          no trailer                   last-processed-zxid trailer
                                                                (``serializeLastProcessed
                                                                Zxid.enabled``)
mntr                               3.8.0's names and order      4 more counters, restore_time,
                                                                counters in 3.9.3's order
version strings                    ``3.8.0-trizk-...``          ``3.9.3-trizk-...``
=================================  ===========================  ===============================

3.9.3's AdminServer authentication, POST and ``snapshot`` and ``restore`` commands follow the
setting (:mod:`trizk.server.ops.admin`). The metrics for them (four counters and
``restore_time``) are in mntr and, with the Prometheus provider, in ``/metrics``.

Invariants
----------
* :data:`RELEASES` are the releases trizk can answer as; anything else is refused when the
  configuration is read (:func:`parse_release`), never silently mapped to another release.
* :func:`full_version` keeps ZooKeeper's ``Version.getFullVersion()`` shape,
  ``<release>-<revision>, built on <date>``; the revision names trizk, so that an operator can
  still tell the two servers apart while clients parse the leading release (kazoo's
  ``server_version()`` reads ``\\d+(\\.\\d+)*``).
"""

from __future__ import annotations

import trizk

__all__ = [
    "DEFAULT_RELEASE",
    "PROPERTY",
    "RELEASES",
    "ZK380",
    "ZK393",
    "full_version",
    "is_39",
    "parse_release",
]

ZK380 = "3.8.0"
ZK393 = "3.9.3"
#: The releases trizk answers as, oldest first.
RELEASES = (ZK380, ZK393)
#: trizk's default (``trizk.ZOOKEEPER_VERSION``): 3.9.3, the current release line.
DEFAULT_RELEASE = trizk.ZOOKEEPER_VERSION
#: The zoo.cfg key, and the system property of the same name.
PROPERTY = "trizk.zookeeperVersion"


def parse_release(text: str) -> str:
    """``text`` (trimmed) as one of :data:`RELEASES`; ValueError naming the choices."""
    value = text.strip()
    if value not in RELEASES:
        raise ValueError(
            f"{PROPERTY}={text!r} is not a ZooKeeper release trizk answers as "
            f"(one of {', '.join(RELEASES)})"
        )
    return value


def is_39(release: str) -> bool:
    """The release is of the 3.9 line (every 3.9 behaviour difference follows this)."""
    return release == ZK393


def full_version(release: str) -> str:
    """``Version.getFullVersion()`` of trizk answering as ``release`` (``srvr``'s "Zookeeper
    version:", ``envi``'s zookeeper.version, mntr's ``zk_version``, the AdminServer's
    ``version``); ZooKeeper prints e.g. ``3.9.3-<git revision>, built on 2026-03-08 16:19 UTC``."""
    return f"{release}-trizk-{trizk.__version__}, built on 2026-11-21 00:00 UTC"
