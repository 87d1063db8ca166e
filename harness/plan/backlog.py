"""Backlog, then drain (--backlog): how much the consumers' destinations must hold before
they are released, in messages (100000) or, with a B, bytes (64MB, 512kB)."""

from __future__ import annotations

from harness.units import parse_size


def parse_backlog(text: str) -> tuple[int, str]:
    """(amount, "messages" or "bytes"); ValueError saying what is wrong."""
    given = text.strip().replace("_", "").replace(",", "")
    if given[-1:] in ("B", "b"):
        amount, unit = parse_size(given), "bytes"
    elif given.isdigit():
        amount, unit = int(given), "messages"
    else:
        raise ValueError(f"{text!r} is a number of messages (100000) or of bytes (64MB)")
    if amount <= 0:
        raise ValueError(f"{text!r}: a backlog is more than 0")
    return amount, unit
