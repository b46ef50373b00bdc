"""The dynamic configuration files of a reconfig-enabled member, as text (pure).

Theory of operation
===================
With ``reconfigEnabled=true`` ZooKeeper keeps an ensemble member's membership out of zoo.cfg
(ZooKeeper 3.5+, ``QuorumPeerConfig``):

* ``zoo.cfg`` keeps the *static* keys and names the membership file with
  ``dynamicConfigFile=<canonical path>`` (the last line).
* ``zoo.cfg.dynamic.<hex version>`` holds the committed membership: the ``server.N`` (and
  ``group``/``weight``) lines of ``QuorumVerifier.toString()``, sorted as strings, joined by
  ``\\n`` without a trailing newline and *without* the ``version=`` line: the version is the
  file name's suffix (``getVersionFromFilename``; a file whose name has no hex suffix is
  version 0). A ``version`` key inside it is an error ("dynamic file shouldn't have version
  inside"), any key other than ``server.``/``group``/``weight`` too ("Unrecognised parameter").
* ``zoo.cfg.dynamic.next`` (``<zoo.cfg path>.dynamic.next``) holds the *last seen* membership,
  proposed but not yet activated, with its ``version=`` line (``setLastSeenQuorumVerifier``);
  it is deleted once a configuration of that version is activated.
* ``zoo.cfg.bak``: the zoo.cfg as first written, copied when a member starts from a zoo.cfg
  that still holds its ``server.N`` lines (``backupOldConfig``, the backward-compatible form).

When a member activates a configuration (``QuorumPeer.setQuorumVerifier(qv, true)``: the
first established epoch bumps version 0 to the epoch's zxid, ZOOKEEPER-1783; then every
reconfig) it writes ``zoo.cfg.dynamic.<version>`` (:func:`dynamic_config_text`) and rewrites
zoo.cfg (:func:`static_config_text`, ``editStaticConfig``): every key of the file in the
iteration order of the ``java.util.Properties`` it was loaded into, as ``key=value`` with the
value as loaded (unescaped, trimmed), except the membership keys (``server.``, ``group``,
``weight``), ``dynamicConfigFile`` and ``peerType``, and -- when the member's own server
line carries its client address -- ``clientPort`` and ``clientPortAddress``; then the new
``dynamicConfigFile=`` line. Checked byte for byte against ZooKeeper 3.8.0 members
(tests/config/test_dynamic.py).

Only text in and text out here; the files are written by the shell
(:mod:`trizk.server.shell.ensemble.reconfig`).
"""

from __future__ import annotations

from trizk.quorum.verifier import QuorumVerifier, java_properties_order
from trizk.server.config.zoocfg import parse_properties

__all__ = [
    "NEXT_SUFFIX",
    "dynamic_config_text",
    "dynamic_file_name",
    "java_string_key",
    "next_file_name",
    "static_config_text",
]

#: ``QuorumPeerConfig.nextDynamicConfigFileSuffix``
NEXT_SUFFIX = ".dynamic.next"

#: Keys ``editStaticConfig`` drops (``key.startsWith``), and the client keys it drops when the
#: member's own server line holds its client address.
_MEMBERSHIP = ("server.", "group", "weight", "dynamicConfigFile", "peerType")
_CLIENT = ("clientPort", "clientPortAddress")


def java_string_key(s: str) -> bytes:
    """A sort key giving ``String.compareTo``'s order (UTF-16 code units)."""
    return s.encode("utf-16-be")


def dynamic_file_name(config_file: str, version: int) -> str:
    """``QuorumPeer.makeDynamicConfigFilename``: ``<zoo.cfg>.dynamic.<Long.toHexString>``."""
    return f"{config_file}.dynamic.{version & 0xFFFFFFFFFFFFFFFF:x}"


def next_file_name(config_file: str) -> str:
    """``QuorumPeer.getNextDynamicConfigFilename``."""
    return config_file + NEXT_SUFFIX


def _properties(text: str) -> dict[str, str]:
    """``Properties.load``: the last value of each key (the zoo.cfg grammar of zoocfg)."""
    out: dict[str, str] = {}
    for e in parse_properties(text):
        out[e.key] = e.value
    return out


def dynamic_config_text(qv: QuorumVerifier, *, keep_version: bool) -> str:
    """``QuorumPeerConfig.writeDynamicConfig``: the config string's lines loaded as
    Properties, ``key=value`` (trimmed), sorted, joined by ``\\n``; the ``version`` line only
    with ``keep_version`` (the ``.next`` file)."""
    lines = [
        f"{k.strip()}={v.strip()}"
        for k, v in _properties(qv.to_string()).items()
        if keep_version or not k.strip().startswith("version")
    ]
    lines.sort(key=java_string_key)
    return "\n".join(lines)


def static_config_text(config_text: str, dynamic_path: str, *, erase_client: bool) -> str:
    """``QuorumPeerConfig.editStaticConfig``: zoo.cfg without its membership, pointing at
    ``dynamic_path`` (already canonical). ``erase_client``: the member's own server line holds
    its client address (``needEraseClientInfoFromStaticConfig``)."""
    props = _properties(config_text)
    out: list[str] = []
    for key in java_properties_order(props):
        k = key.strip()
        if k.startswith(_MEMBERSHIP) or (erase_client and k.startswith(_CLIENT)):
            continue
        out.append(f"{k}={props[key].strip()}\n")
    out.append(f"dynamicConfigFile={dynamic_path}\n")
    return "".join(out)
