"""A quorum member's epoch files: ``acceptedEpoch`` and ``currentEpoch`` in ``dataDir/version-2``.

``QuorumPeer.writeLongToFile`` / ``readLongFromFile``: the decimal value, no newline, written
atomically (``<name>.tmp``, fsync, rename). ``acceptedEpoch`` is the epoch a member promised
(LEADERINFO on a learner, the new epoch on a leader); ``currentEpoch`` the epoch it accepted
the history of (NEWLEADER). Invariant on disk: acceptedEpoch >= currentEpoch >= the epoch of
the last logged zxid.

At start-up (``QuorumPeer.loadDataBase``) a missing file is created from the epoch of the
last logged zxid; a currentEpoch below that epoch is an error unless ``currentEpoch.tmp``
exists (a crash between writing the history and renaming the file: its value is taken), and
acceptedEpoch below currentEpoch is an error.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ACCEPTED_EPOCH", "CURRENT_EPOCH", "EpochError", "Epochs", "load", "write"]

log = logging.getLogger("trizk.storage")

ACCEPTED_EPOCH = "acceptedEpoch"
CURRENT_EPOCH = "currentEpoch"


class EpochError(ValueError):
    """The epoch files contradict the data directory (the member does not start)."""


@dataclass
class Epochs:
    accepted: int
    current: int


def _read(path: Path) -> int | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise EpochError(f"{path}: not a number: {text[:40]!r}") from None


def _zxid_string(v: int) -> str:
    """``ZxidUtils.zxidToString``: ``Long.toHexString``."""
    return format(v & 0xFFFF_FFFF_FFFF_FFFF, "x")


def write(directory: Path, name: str, value: int, *, sync: bool = True) -> None:
    """Write one epoch file atomically (``AtomicFileWritingIdiom``)."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f"{name}.tmp"
    with open(tmp, "w") as f:
        f.write(str(value))
        f.flush()
        if sync:
            os.fsync(f.fileno())
    os.replace(tmp, directory / name)
    if sync:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def load(directory: Path, last_zxid: int, *, sync: bool = True) -> Epochs:
    """Read (creating when missing) the epoch files for a data dir whose last logged zxid is
    ``last_zxid``; raises :class:`EpochError` as ``QuorumPeer.loadDataBase`` does."""
    epoch_of_zxid = last_zxid >> 32
    current = _read(directory / CURRENT_EPOCH)
    if current is None:
        current = epoch_of_zxid
        log.info(
            "%s not found! Creating with a reasonable default of %d. This should only happen "
            "when you are upgrading your installation",
            CURRENT_EPOCH,
            current,
        )
        write(directory, CURRENT_EPOCH, current, sync=sync)
    if epoch_of_zxid > current:
        tmp = _read(directory / f"{CURRENT_EPOCH}.tmp")
        if tmp is not None:
            log.info(
                "%s found. Setting current epoch to %d.", directory / f"{CURRENT_EPOCH}.tmp", tmp
            )
            current = tmp
            write(directory, CURRENT_EPOCH, current, sync=sync)
        else:
            raise EpochError(
                f"The current epoch, {_zxid_string(current)}, is older than the last zxid, "
                f"{last_zxid}"
            )
    accepted = _read(directory / ACCEPTED_EPOCH)
    if accepted is None:
        accepted = epoch_of_zxid
        log.info(
            "%s not found! Creating with a reasonable default of %d. This should only happen "
            "when you are upgrading your installation",
            ACCEPTED_EPOCH,
            accepted,
        )
        write(directory, ACCEPTED_EPOCH, accepted, sync=sync)
    if accepted < current:
        raise EpochError(
            f"The accepted epoch, {_zxid_string(accepted)} is less than the current epoch, "
            f"{_zxid_string(current)}"
        )
    return Epochs(accepted, current)
