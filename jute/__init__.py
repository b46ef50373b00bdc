"""Jute: ZooKeeper's wire and disk encoding (records, codes, framing, the multi codec), and
Java's text grammars for numbers, booleans and splits (javalang). Knows bytes and text,
nothing of the server."""

from trizk.jute.primitives import DEFAULT_MAX_BUFFER, JuteDecodeError, Record, set_max_buffer

__all__ = ["DEFAULT_MAX_BUFFER", "JuteDecodeError", "Record", "set_max_buffer"]
