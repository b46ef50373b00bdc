"""Java's renderings of values, as ZooKeeper's text and JSON answers show them.

The four-letter words, the AdminServer's JSON and the Prometheus exposition print numbers,
addresses and dates the way the JVM does (``Double.toString``, ``Long.toHexString``,
``InetSocketAddress.toString``, ``Date.toString``, simpleclient's ``doubleToGoString``); these
functions reproduce them. Pure.
"""

from __future__ import annotations

import ipaddress
import math
from datetime import datetime, tzinfo
from decimal import Decimal

__all__ = ["go_double", "java_date", "java_double", "java_hex", "java_socket_address"]


def java_hex(n: int) -> str:
    """``Long.toHexString``: two's complement for negatives (``-1`` → ``ffffffffffffffff``)."""
    return format(n & 0xFFFF_FFFF_FFFF_FFFF, "x")


def java_double(x: float) -> str:
    """``Double.toString``: plain decimal with at least one fraction digit in [1e-3, 1e7),
    otherwise ``d.dddE<exp>``."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = format(Decimal(repr(x)), "f")
        return text if "." in text else text + ".0"
    sign, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits))
    e = exp + len(ds) - 1
    frac = ds[1:] or "0"
    return f"{'-' if sign else ''}{ds[0]}.{frac}E{e}"


def java_socket_address(host: str, port: int) -> str:
    """``InetSocketAddress.toString()`` of a resolved address: ``/127.0.0.1:50634``;
    IPv6 in Java's uncompressed form ``/[0:0:0:0:0:0:0:1]:2181``."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return f"{host}/:{port}"
    if ip.version == 6:
        groups = ":".join(format(int(g, 16), "x") for g in ip.exploded.split(":"))
        return f"/[{groups}]:{port}"
    return f"/{ip}:{port}"


def java_date(ms: int, tz: tzinfo | None = None) -> str:
    """``java.util.Date.toString()``: ``Sat Nov 21 09:50:26 UTC 2026`` in ``tz`` (default:
    the local zone, as the JVM's default time zone)."""
    dt = datetime.fromtimestamp(ms / 1000, tz) if tz else datetime.fromtimestamp(ms / 1000)
    dt = dt.astimezone(tz)
    return f"{dt:%a %b %d %H:%M:%S} {dt.tzname() or 'UTC'} {dt.year}"


def go_double(x: float) -> str:
    """simpleclient's ``Collector.doubleToGoString``: ``+Inf``, ``-Inf``, ``NaN``, else
    ``Double.toString``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return java_double(float(x))
