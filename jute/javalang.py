"""Java's text forms of numbers and booleans, and its system-property getters. Pure.

ZooKeeper reads its settings with ``java.lang`` methods whose grammars differ; a value that
one of them accepts another rejects (``0x10`` is 16 to ``Integer.getInteger`` and a
NumberFormatException to ``Integer.parseInt``). This module is the one place that knows them,
so each caller names the method ZooKeeper calls:

``parse_int`` / ``parse_long`` (``Integer.parseInt`` / ``Long.parseLong``, radix 10 unless
given)
    An optional ``+`` or ``-``, then at least one digit of the radix; nothing else (no blanks,
    no underscores, no radix prefix), and the value within the type's range. A digit is what
    ``Character.digit`` accepts: a Unicode decimal digit (``Nd``: U+0663 ARABIC-INDIC DIGIT
    THREE and U+FF13 FULLWIDTH DIGIT THREE are 3), or for radixes above 10 a Latin letter,
    ASCII or fullwidth. Java walks UTF-16 units, so a digit outside the Basic Multilingual
    Plane (a surrogate pair) is not one.
``decode_int`` / ``decode_long`` (``Integer.decode`` / ``Long.decode``)
    An optional sign, then a radix prefix: ``0x``, ``0X`` or ``#`` (hexadecimal), ``0``
    followed by more (octal), none (decimal); then the digits as ``parseInt`` reads them, with
    no second sign. ``-0x80000000`` is the int minimum; ``08`` is an error (octal).
``get_integer`` / ``get_long`` (``Integer.getInteger`` / ``Long.getLong``)
    The property decoded as above; absent or malformed (any NumberFormatException) means the
    default, silently.
``parse_boolean`` / ``get_boolean`` (``Boolean.parseBoolean`` / ``Boolean.getBoolean``)
    True exactly when the text is ``true`` in any case, without trimming; absent is false.
``parse_double`` (``Double.parseDouble``)
    The text trimmed of leading and trailing characters up to U+0020 (``String.trim``), then
    an optional sign and ``NaN``, ``Infinity``, a decimal (ASCII digits, at most one ``.``, at
    least one digit, an optional ``e``/``E`` exponent with digits) or a hexadecimal
    floating-point literal (``0x1.8p1``, the binary exponent required), the last two with an
    optional ``f``/``F``/``d``/``D`` suffix; too large is infinity, too small zero.
``java_split`` (``String.split`` / ``Pattern.split``, limit 0)
    Without a match the text itself (``""`` splits to ``[""]``); otherwise the pieces with every
    trailing empty one dropped (``","`` splits to nothing at all).

The parsers return ``None`` where Java throws NumberFormatException: the callers word their
own errors, as the ZooKeeper code they mirror does (``parse_integer`` and ``decode_integer``
skip the range check, for callers that word "out of range" apart). Properties are a
``Mapping[str, str]`` from full name (``zookeeper.snapCount``) to value, as
``ServerConfig.properties`` holds them.
This module is in ``jute`` because every layer reads such text (jute itself reads
``jute.maxbuffer`` with ``Integer.getInteger``) and ``jute`` is the one every layer may import.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Final

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "decode_int",
    "decode_integer",
    "decode_long",
    "get_boolean",
    "get_integer",
    "get_long",
    "java_split",
    "parse_boolean",
    "parse_double",
    "parse_int",
    "parse_integer",
    "parse_long",
]

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1
LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1


def _digit(ch: str, radix: int) -> int:
    """``Character.digit(ch, radix)``: the digit's value, or -1."""
    o = ord(ch)
    if o < 0x80:
        if 0x30 <= o <= 0x39:
            d = o - 0x30
        elif 0x61 <= o <= 0x7A:
            d = o - 0x61 + 10
        elif 0x41 <= o <= 0x5A:
            d = o - 0x41 + 10
        else:
            return -1
    elif o > 0xFFFF:
        return -1  # a surrogate pair in Java: neither unit is a digit
    elif 0xFF21 <= o <= 0xFF3A:
        d = o - 0xFF21 + 10  # fullwidth A-Z
    elif 0xFF41 <= o <= 0xFF5A:
        d = o - 0xFF41 + 10  # fullwidth a-z
    else:
        d = unicodedata.decimal(ch, -1)
    return d if d < radix else -1


def parse_integer(text: str | None, radix: int = 10) -> int | None:
    """What ``parseInt`` / ``parseLong`` read, of any size (the range is not checked): for
    callers that tell "not a number" from "out of range"."""
    if not text:
        return None
    start = 1 if text[0] in "+-" else 0
    if start == len(text):
        return None  # a sign alone
    n = 0
    for ch in text[start:]:
        d = _digit(ch, radix)
        if d < 0:
            return None
        n = n * radix + d
    return -n if text[0] == "-" else n


def _within(value: int | None, lo: int, hi: int) -> int | None:
    return value if value is not None and lo <= value <= hi else None


def parse_int(text: str | None, radix: int = 10) -> int | None:
    """``Integer.parseInt(text, radix)``, or None for a NumberFormatException."""
    return _within(parse_integer(text, radix), INT_MIN, INT_MAX)


def parse_long(text: str | None, radix: int = 10) -> int | None:
    """``Long.parseLong(text, radix)``, or None for a NumberFormatException."""
    return _within(parse_integer(text, radix), LONG_MIN, LONG_MAX)


def decode_integer(text: str | None) -> int | None:
    """What ``Integer.decode`` / ``Long.decode`` read, of any size (the range is not checked)."""
    if not text:
        return None
    i = 1 if text[0] in "+-" else 0
    radix = 10
    if text.startswith(("0x", "0X"), i):
        i, radix = i + 2, 16
    elif text.startswith("#", i):
        i, radix = i + 1, 16
    elif text.startswith("0", i) and len(text) > i + 1:
        i, radix = i + 1, 8
    digits = text[i:]
    if digits.startswith(("+", "-")):
        return None  # "Sign character in wrong position"
    return parse_integer("-" + digits if text[0] == "-" else digits, radix)


def decode_int(text: str | None) -> int | None:
    """``Integer.decode(text)``, or None for a NumberFormatException."""
    return _within(decode_integer(text), INT_MIN, INT_MAX)


def decode_long(text: str | None) -> int | None:
    """``Long.decode(text)``, or None for a NumberFormatException."""
    return _within(decode_integer(text), LONG_MIN, LONG_MAX)


def get_integer(props: Mapping[str, str], name: str, default: int) -> int:
    """``Integer.getInteger(name, default)``: the property decoded, else the default."""
    value = decode_int(props.get(name))
    return default if value is None else value


def get_long(props: Mapping[str, str], name: str, default: int) -> int:
    """``Long.getLong(name, default)``: the property decoded, else the default."""
    value = decode_long(props.get(name))
    return default if value is None else value


def parse_boolean(text: str | None) -> bool:
    """``Boolean.parseBoolean(text)``: ``"true".equalsIgnoreCase(text)``."""
    return text is not None and len(text) == 4 and text.lower() == "true"


def get_boolean(props: Mapping[str, str], name: str) -> bool:
    """``Boolean.getBoolean(name)``: the property parsed as a boolean; absent is false."""
    return parse_boolean(props.get(name))


_DECIMAL = re.compile(r"([+-]?)((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")
_HEX_FLOAT = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)


def parse_double(text: str | None) -> float | None:
    """``Double.parseDouble(text)`` (see the module docstring); None for NumberFormatException."""
    if text is None:
        return None
    t = text.strip("".join(map(chr, range(0x21))))  # String.trim
    sign, body = (t[0], t[1:]) if t[:1] in ("+", "-") else ("", t)
    if body == "NaN":
        return math.nan  # Java has one NaN: "-NaN" is it too
    if body == "Infinity":
        return -math.inf if sign == "-" else math.inf
    m = _DECIMAL.fullmatch(t)
    if m is not None:
        return float(m.group(1) + m.group(2))
    m = _HEX_FLOAT.fullmatch(t)
    if m is not None:
        # float.fromhex's grammar contains Java's; a huge exponent overflows to infinity
        try:
            value = float.fromhex("0x" + m.group(2))
        except OverflowError:
            value = float("inf")
        return -value if m.group(1) == "-" else value
    return None


def java_split(text: str, sep: str | re.Pattern[str]) -> list[str]:
    """``text.split(sep)`` as Java splits (limit 0): ``sep`` a literal separator, or a compiled
    pattern for a regex of positive width."""
    parts = text.split(sep) if isinstance(sep, str) else sep.split(text)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts
