"""Parsing of human-sized quantities: message sizes like 256, 4k, 1m; durations like 200us,
5ms, 30s, 2m, 1h."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_SIZE = re.compile(r"^\s*(\d+)\s*([kKmMgG]?)[bB]?\s*$")
_FACTORS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|ms|s|m|h)\s*$")
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def finite(given: str | float, what: str = "") -> float:
    """A number that is one: NaN and infinity (which float() takes from "nan", "inf" or 400
    digits) refused, as every comparison with NaN is false and would let it through."""
    try:
        value = float(given)
    except ValueError:
        raise ValueError(f"{what or repr(given)} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{what or repr(given)} is not a finite number")
    return value


def parse_duration(text: str) -> float:
    """Seconds in a duration with its unit: 200us, 5ms, 1.5s, 2m, 1h."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text.strip()!r} is not a duration with its unit (us, ms, s, m or "
                         "h), e.g. 5ms")
    return finite(match.group(1), repr(text.strip())) * _SECONDS[match.group(2)]


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


def parse_range(text: str, parse: Callable[[str], T]) -> tuple[T, T]:
    """LOW..HIGH, each read by parse; ValueError where HIGH is below LOW."""
    low_text, _, high_text = text.partition("..")
    low, high = parse(low_text.strip()), parse(high_text.strip())
    if high < low:  # type: ignore[operator]
        raise ValueError(f"{text.strip()!r}: the range's end is below its start")
    return low, high


def parse_weighted(text: str, parse: Callable[[str], T], what: str
                   ) -> tuple[tuple[T, ...], tuple[float, ...]]:
    """VALUE:WEIGHT,VALUE:WEIGHT,... each value read by parse (what: its name, for the error);
    weights need not sum to 1, and not all may be 0."""
    values, weights = [], []
    for part in text.split(","):
        value, colon, weight = part.rpartition(":")
        if not colon:
            raise ValueError(f"{part.strip()!r} is not {what}:WEIGHT")
        w = finite(weight, f"{part.strip()!r}: the weight {weight!r}")
        if w < 0:
            raise ValueError(f"{part.strip()!r}: a weight is 0 or more")
        values.append(parse(value.strip()))
        weights.append(w)
    if not sum(weights):
        raise ValueError("the weights add up to 0")
    return tuple(values), tuple(weights)


def format_us(value: float | None) -> str:
    """Microseconds for a console line: 850us, 12.3ms, 4.20s."""
    if value is None:
        return "-"
    if value < 1000:
        return f"{value:.0f}us"
    if value < 1_000_000:
        return f"{value / 1000:.3g}ms"
    return f"{value / 1_000_000:.3g}s"
