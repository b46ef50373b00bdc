"""Jute's length caps and its one decoding error, shared by both codecs.

``BinaryInputArchive.checkLength`` refuses a buffer or string longer than ``jute.maxbuffer``
plus ``zookeeper.jute.maxbuffer.extrasize``; a frame is capped by ``jute.maxbuffer`` alone.
The caps are JVM system properties in ZooKeeper; here they are held per context (see
:data:`_LIMITS_VAR`). The generated fast codec (:mod:`trizk.jute.primitives`) and the
construct reference codec (:mod:`trizk.jute.reference`) read them from here, and raise
:class:`JuteDecodeError` for any input that is not a valid encoding.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_BUFFER",
    "LIMITS",
    "JuteDecodeError",
    "JuteLimits",
    "current_limits",
    "reset_limits",
    "set_max_buffer",
]

#: ZooKeeper's default ``jute.maxbuffer`` (0xfffff = 1 MiB - 1).
DEFAULT_MAX_BUFFER = 0xFFFFF


class JuteDecodeError(ValueError):
    """Input bytes are not a valid encoding of the expected record."""


@dataclass(frozen=True, slots=True)
class JuteLimits:
    """Length caps read by every decoder (JVM system properties in ZooKeeper).

    ``max_buffer`` is ``jute.maxbuffer`` (the cap on a frame); a buffer or string inside a
    record may be up to ``max_length = maxbuffer + zookeeper.jute.maxbuffer.extrasize``
    (``BinaryInputArchive.checkLength``; extrasize defaults to max(maxbuffer, 1024)).
    """

    max_buffer: int = DEFAULT_MAX_BUFFER
    max_length: int = 2 * DEFAULT_MAX_BUFFER


#: The caps in force, per context rather than per process: a server sets its own at the top of
#: its task tree (Trio tasks inherit the context of the task that starts them), so several
#: servers with different ``jute.maxbuffer`` can run in one process (the ensemble simulation,
#: in-process test fixtures).
_LIMITS_VAR: ContextVar[JuteLimits] = ContextVar(
    "jute_limits",
    default=JuteLimits(),  # noqa: B039 (frozen: immutable)
)

#: The caps in force in the current context.
current_limits = _LIMITS_VAR.get


class _LimitsView:
    """Read-only view of :func:`current_limits` (``LIMITS.max_buffer``)."""

    @property
    def max_buffer(self) -> int:
        return _LIMITS_VAR.get().max_buffer

    @property
    def max_length(self) -> int:
        return _LIMITS_VAR.get().max_length


LIMITS = _LimitsView()


def set_max_buffer(n: int, extrasize: int | None = None) -> Token[JuteLimits]:
    """Set ``jute.maxbuffer`` (and ``zookeeper.jute.maxbuffer.extrasize``) for the decoders of
    the current context and the tasks it starts; :func:`reset_limits` with the returned token
    puts the previous caps back."""
    if n <= 0:
        raise ValueError(f"jute.maxbuffer must be positive, got {n}")
    return _LIMITS_VAR.set(JuteLimits(n, n + (max(n, 1024) if extrasize is None else extrasize)))


def reset_limits(token: Token[JuteLimits]) -> None:
    _LIMITS_VAR.reset(token)
