"""Parsing of human-sized quantities: message sizes like 256, 4k, 1m."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+)\s*([kKmMgG]?)[bB]?\s*$")
_FACTORS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str | int) -> int:
    """Bytes from '256', '4k', '1m' (binary multiples, as the WMB report's 4K ... 8M)."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError("must not be negative")
        return text
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a size (use e.g. 256, 4k, 1m)")
    return int(match.group(1)) * _FACTORS[match.group(2).lower()]


def format_us(value: float | None) -> str:
    """Microseconds for a console line: 850us, 12.3ms, 4.20s."""
    if value is None:
        return "-"
    if value < 1000:
        return f"{value:.0f}us"
    if value < 1_000_000:
        return f"{value / 1000:.3g}ms"
    return f"{value / 1_000_000:.3g}s"
