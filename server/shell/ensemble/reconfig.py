"""A member's configurations and their files (``QuorumPeer``'s quorum verifiers), the shell half
of dynamic reconfig.

Theory of operation
-------------------
A member holds two configurations (:class:`~trizk.quorum.verifier.QuorumVerifier`):

* the **committed** one (``QuorumPeer.quorumVerifier``): the membership it votes and counts
  quorums with, shown in ``/zookeeper/config`` and sent in election notifications;
* the **last seen** one (``lastSeenQuorumVerifier``): the newest configuration it has heard of,
  proposed but maybe not activated (sent with NEWLEADER); ``version`` orders them.

With ``reconfigEnabled=false`` (the default) neither changes after start-up and no file is
written: every notification and NEWLEADER carries the static configuration at version 0 (as
ZooKeeper's ``setLastSeenQuorumVerifier`` and ``processReconfig`` return at once).

With ``reconfigEnabled=true``, as ZooKeeper 3.8/3.9 does:

* a member started from a zoo.cfg holding its ``server.N`` lines copies it to ``zoo.cfg.bak``
  (``QuorumPeerConfig.backupOldConfig``) -- :meth:`MemberConfigs.start`;
* a leader whose committed and last seen configurations are both the initial one (version 0)
  gives it the version of its NEWLEADER zxid, ``epoch << 32`` (ZOOKEEPER-1783: an established
  configuration then wins over one never established) -- the pure Leader does it, fed
  :meth:`MemberConfigs.bump_candidate`;
* a configuration proposed (the leader's bumped one, a learner's NEWLEADER config) becomes the
  last seen one and is written to ``<zoo.cfg>.dynamic.next`` with its ``version=`` line
  (:meth:`MemberConfigs.see`);
* when a leader is established or a learner receives UPTODATE, the last seen configuration is
  activated (``processReconfig`` → ``setQuorumVerifier(qv, true)``): written to
  ``<zoo.cfg>.dynamic.<hex version>``, zoo.cfg rewritten without its membership and with
  ``dynamicConfigFile=`` (texts from :mod:`trizk.server.config.dynamic`), the ``.next`` file
  deleted once the activated version is the last seen one (:meth:`MemberConfigs.activate`).
  ``/zookeeper/config`` then holds the committed configuration's string, its mzxid the
  version (``ZKDatabase.initConfigInZKDatabase``).

A version never goes back: activating or seeing a configuration at a version not above the
one held changes nothing. Files are written as ZooKeeper's ``AtomicFileWritingIdiom`` does
(a temporary file, fsync, rename over the old one).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from trizk.quorum.verifier import QuorumConfigError, QuorumVerifier, parse_config_string
from trizk.server.config.dynamic import (
    dynamic_config_text,
    dynamic_file_name,
    next_file_name,
    static_config_text,
)
from trizk.server.config.zoocfg import parse_properties

__all__ = ["MemberConfigs", "write_atomically"]

log = logging.getLogger("trizk.quorum")


def write_atomically(path: Path, data: bytes) -> None:
    """``AtomicFileWritingIdiom``: ``path.tmp`` written and fsynced, then renamed over
    ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class MemberConfigs:
    """The committed and last seen configurations of member ``myid``, and (reconfig enabled,
    started from ``config_file``) their files."""

    def __init__(
        self,
        myid: int,
        committed: QuorumVerifier,
        *,
        reconfig_enabled: bool = False,
        config_file: str | None = None,
        last_seen: QuorumVerifier | None = None,
        standalone_enabled: bool = True,
        multi_address: bool = False,
    ) -> None:
        self.myid = myid
        self.enabled = reconfig_enabled
        #: zoo.cfg's path (None: not started from a file; nothing is written)
        self.config_file = config_file
        self.committed = committed
        self.last_seen = (
            last_seen
            if reconfig_enabled and last_seen is not None and last_seen.version > committed.version
            else committed
        )
        self.standalone_enabled = standalone_enabled
        self.multi_address = multi_address

    # ------------------------------------------------------------------ what others read
    @property
    def committed_bytes(self) -> bytes:
        """``QuorumVerifier.toString()`` in UTF-8: notifications and ``/zookeeper/config``."""
        return self.committed.to_string().encode("utf-8")

    @property
    def last_seen_bytes(self) -> bytes:
        """NEWLEADER's data (``Leader.getQuorumVerifierBytes``: the last seen config)."""
        return self.last_seen.to_string().encode("utf-8")

    def bump_candidate(self) -> QuorumVerifier | None:
        """The configuration a new leader gives the version of its NEWLEADER zxid
        (``Leader.lead``): reconfig enabled and both configurations still version 0."""
        if self.enabled and self.committed.version == 0 and self.last_seen.version == 0:
            return self.committed
        return None

    def parse(self, data: bytes) -> QuorumVerifier | None:
        """``QuorumPeer.configFromString`` of a peer's config bytes; None (logged) if bad."""
        try:
            return parse_config_string(
                data.decode("utf-8", errors="replace"),
                standalone_enabled=self.standalone_enabled,
                multi_address=self.multi_address,
            )
        except QuorumConfigError as e:
            log.error("%s: bad configuration from a peer: %s", self.myid, e)
            return None

    # ------------------------------------------------------------------ changes
    def start(self) -> None:
        """``QuorumPeerConfig.parse``: a reconfig-enabled member whose zoo.cfg still holds
        the membership backs it up to ``zoo.cfg.bak`` (``backupOldConfig``)."""
        if not self.enabled or self.config_file is None:
            return
        path = Path(self.config_file)
        if self._dynamic_file_named(path):
            return
        write_atomically(path.with_name(path.name + ".bak"), path.read_bytes())

    @staticmethod
    def _dynamic_file_named(path: Path) -> bool:
        return any(e.key == "dynamicConfigFile" for e in parse_properties(path.read_text()))

    def see(self, data: bytes) -> QuorumVerifier | None:
        """``setLastSeenQuorumVerifier(qv, true)``: a newer configuration becomes the last
        seen one, written to ``<zoo.cfg>.dynamic.next``. Returns it (None: nothing changed)."""
        if not self.enabled:
            return None
        qv = self.parse(data)
        if qv is None or qv.version == self.last_seen.version:
            return None
        if qv.version < self.last_seen.version:
            log.error(
                "setLastSeenQuorumVerifier called with stale config %x. Current version: %x",
                qv.version,
                self.committed.version,
            )
        self.last_seen = qv
        if self.config_file is not None:
            text = dynamic_config_text(qv, keep_version=True)
            write_atomically(Path(next_file_name(self.config_file)), text.encode("utf-8"))
        return qv

    def activate(self, qv: QuorumVerifier) -> QuorumVerifier | None:
        """``setQuorumVerifier(qv, true)``: ``qv`` becomes the committed configuration if its
        version is newer, with its files. Returns the previous one (None: nothing changed)."""
        if not self.enabled or qv.version <= self.committed.version:
            return None
        prev, self.committed = self.committed, qv
        if qv.version > self.last_seen.version:
            self.last_seen = qv
        if self.config_file is not None:
            cfg = Path(self.config_file)
            dynamic = Path(dynamic_file_name(self.config_file, qv.version))
            write_atomically(dynamic, dynamic_config_text(qv, keep_version=False).encode("utf-8"))
            # needEraseClientInfoFromStaticConfig, asked of the new committed configuration
            me = qv.get(self.myid)
            erase = me is not None and me.client_addr is not None and not me.client_addr_from_static
            text = static_config_text(cfg.read_text(), str(dynamic.resolve()), erase_client=erase)
            write_atomically(cfg, text.encode("utf-8"))
            if qv.version == self.last_seen.version:
                Path(next_file_name(self.config_file)).unlink(missing_ok=True)
        log.info(
            "%s: configuration version %x activated (was %x)", self.myid, qv.version, prev.version
        )
        return prev
