"""Jute: ZooKeeper's wire and disk encoding (records, codes, framing). Knows bytes, nothing else."""

from trizk.jute.primitives import DEFAULT_MAX_BUFFER, JuteDecodeError, Record, set_max_buffer

__all__ = ["DEFAULT_MAX_BUFFER", "JuteDecodeError", "Record", "set_max_buffer"]
