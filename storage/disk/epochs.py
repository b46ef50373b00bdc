"""The epoch files of a quorum member: ``acceptedEpoch`` and ``currentEpoch``.

Theory of operation
===================
Zab needs two numbers to survive restarts (QuorumPeer):

* ``acceptedEpoch`` — the newest epoch this member has accepted from a prospective leader
  (a learner writes it on LEADERINFO before it answers ACKEPOCH; a leader when it has
  decided the new epoch). A member never acks a LEADERINFO with a smaller epoch.
* ``currentEpoch`` — the epoch of the leader whose history this member has adopted (a
  learner writes it on NEWLEADER before it ACKs; a leader once a quorum sent ACKEPOCH).
  It goes into FastLeaderElection votes (``peerEpoch``) and ACKEPOCH.

Invariant: ``currentEpoch <= acceptedEpoch``, and the epoch of the last logged zxid is at
most ``currentEpoch``.

Files (``QuorumPeer.writeLongToFile`` / ``readLongFromFile``): in the snapshot directory
(``dataDir/version-2``), the value in decimal (``Long.toString``), no newline, written
atomically as ``AtomicFileOutputStream`` does: ``<name>.tmp``, flush, fsync, rename over
``<name>`` (trizk also fsyncs the directory, so the rename itself is durable; ZooKeeper does
not). Reading takes the first line (``BufferedReader.readLine``) and ``Long.parseLong``; a
bad value is ``"Found <line> in <file>"`` (an empty file reads as ``null``).

A standalone server writes neither file (checked: ZooKeeper 3.8.0 in standalone mode leaves
only ``log.*`` and ``snapshot.*`` in ``version-2``).

Start-up (``QuorumPeer.loadDataBase``, after the database is loaded), :func:`load_epochs`:

1. ``currentEpoch`` missing → created with the epoch of the last processed zxid (logged:
   "currentEpoch not found! Creating with a reasonable default of N. ...").
2. If that zxid's epoch is newer than ``currentEpoch``: a leftover ``currentEpoch.tmp`` (a
   crash between write and rename) is taken as the current epoch and written properly;
   without one it is an error: "The current epoch, <hex>, is older than the last zxid, <n>".
3. ``acceptedEpoch`` missing → created like ``currentEpoch`` in 1.
4. ``acceptedEpoch < currentEpoch`` → "The accepted epoch, <hex> is less than the current
   epoch, <hex>".

ZooKeeper turns each error into "Unable to run quorum server" and exits; here they are
:class:`EpochError` (an :class:`~trizk.storage.disk.files.UnrecoverableDataDir`).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from trizk.jute.javalang import LONG_MAX, LONG_MIN, parse_long
from trizk.storage.disk.files import UnrecoverableDataDir, fsync_dir

__all__ = [
    "ACCEPTED_EPOCH",
    "CURRENT_EPOCH",
    "TMP_EXTENSION",
    "EpochError",
    "Epochs",
    "epoch_of",
    "load_epochs",
    "read_epoch",
    "write_epoch",
]

log = logging.getLogger("trizk.storage.disk.epochs")

#: ``QuorumPeer.ACCEPTED_EPOCH_FILENAME`` / ``CURRENT_EPOCH_FILENAME``.
ACCEPTED_EPOCH = "acceptedEpoch"
CURRENT_EPOCH = "currentEpoch"
#: ``AtomicFileOutputStream.TMP_EXTENSION``.
TMP_EXTENSION = ".tmp"

#: Longest file we read: a long is at most 20 characters; more is garbage.
_MAX_READ = 4096


class EpochError(UnrecoverableDataDir):
    """An epoch file is unreadable or contradicts the log; the member must not start."""


@dataclass(frozen=True, slots=True)
class Epochs:
    accepted: int
    current: int


def epoch_of(zxid: int) -> int:
    """``ZxidUtils.getEpochFromZxid``: the high 32 bits."""
    return zxid >> 32


def _hex(n: int) -> str:
    # ZxidUtils.zxidToString = Long.toHexString (two's complement for negatives).
    return format(n & 0xFFFFFFFFFFFFFFFF, "x")


def read_epoch(snap_dir: str | os.PathLike[str], name: str) -> int | None:
    """``readLongFromFile``: the value in ``snap_dir/name``; ``None`` if there is no such file
    (Java: FileNotFoundException). A bad value raises :class:`EpochError`."""
    path = Path(snap_dir) / name
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_READ)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EpochError(f"cannot read {path}: {exc.strerror or exc}") from exc
    text = raw.decode("utf-8", errors="replace")
    line = re.split(r"\r\n|\r|\n", text, maxsplit=1)[0] if text else "null"
    epoch = parse_long(line)
    if epoch is None:
        raise EpochError(f"Found {line} in {path}")
    return epoch


def write_epoch(snap_dir: str | os.PathLike[str], name: str, value: int) -> None:
    """``writeLongToFile``: ``value`` in decimal, no newline, atomically (``.tmp``, fsync,
    rename, then fsync of the directory). ``OSError`` propagates: the caller must not act
    on an epoch it could not persist."""
    if not LONG_MIN <= value <= LONG_MAX:
        raise ValueError(f"epoch {value} is not a Java long")
    directory = Path(snap_dir)
    path = directory / name
    tmp = directory / (name + TMP_EXTENSION)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.write(fd, str(value).encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        # AtomicFileOutputStream.close: a failed write deletes the tmp file.
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(directory)


def load_epochs(snap_dir: str | os.PathLike[str], last_zxid: int) -> Epochs:
    """``QuorumPeer.loadDataBase``'s epoch rules (module docstring), given the last processed
    zxid of the loaded database. Creates missing files; raises :class:`EpochError`."""
    zxid_epoch = epoch_of(last_zxid)
    current = read_epoch(snap_dir, CURRENT_EPOCH)
    if current is None:
        current = zxid_epoch
        log.info(
            "%s not found! Creating with a reasonable default of %d. This should only happen"
            " when you are upgrading your installation",
            CURRENT_EPOCH,
            current,
        )
        write_epoch(snap_dir, CURRENT_EPOCH, current)
    if zxid_epoch > current:
        tmp_name = CURRENT_EPOCH + TMP_EXTENSION
        tmp_path = Path(snap_dir) / tmp_name
        if not tmp_path.exists():
            raise EpochError(
                f"The current epoch, {_hex(current)}, is older than the last zxid, {last_zxid}"
            )
        tmp_epoch = read_epoch(snap_dir, tmp_name)
        if tmp_epoch is None:  # removed meanwhile
            raise EpochError(f"{tmp_path} disappeared while it was read")
        log.info("%s found. Setting current epoch to %d.", tmp_path, tmp_epoch)
        write_epoch(snap_dir, CURRENT_EPOCH, tmp_epoch)
        current = tmp_epoch
    accepted = read_epoch(snap_dir, ACCEPTED_EPOCH)
    if accepted is None:
        accepted = zxid_epoch
        log.info(
            "%s not found! Creating with a reasonable default of %d. This should only happen"
            " when you are upgrading your installation",
            ACCEPTED_EPOCH,
            accepted,
        )
        write_epoch(snap_dir, ACCEPTED_EPOCH, accepted)
    if accepted < current:
        raise EpochError(
            f"The accepted epoch, {_hex(accepted)} is less than the current epoch, {_hex(current)}"
        )
    return Epochs(accepted=accepted, current=current)
