"""Bodies read from files (--payload-dir, or -mf split by --payload-split), sent in turn by
each producer thread, each message with its own size; or made for the run (--payload-pool),
each message drawing one at random."""

from __future__ import annotations

import os
import random
from pathlib import Path

# What a group's payloads may hold in all: each process keeps them in memory.
MOST_BYTES = 1 << 30


def unescape(delimiter: str) -> bytes:
    r"""A delimiter as given on a command line: \n, \t, \r and \\ as in Python's strings."""
    return delimiter.encode().decode("unicode_escape").encode("latin-1")


def read_payloads(directory: str | None, body_file: str | None,
                  split: str | None) -> list[bytes]:
    """The bodies: each regular file of directory (by name), or body_file's parts between
    split delimiters (empty parts left out); [] for neither. ValueError saying why not."""
    if directory is not None:
        folder = Path(directory)
        if not folder.is_dir():
            raise ValueError(f"{directory!r} is not a directory")
        files = sorted(p for p in folder.iterdir() if p.is_file())
        if not files:
            raise ValueError(f"{directory!r} holds no files")
        total = sum(p.stat().st_size for p in files)
        if total > MOST_BYTES:
            raise ValueError(f"{directory!r} holds {total:,} bytes; at most {MOST_BYTES:,}, "
                             "which every process keeps in memory")
        try:
            return [p.read_bytes() for p in files]
        except OSError as exc:
            raise ValueError(f"cannot read {exc.filename}: {exc.strerror}") from None
    if body_file is None or split is None:
        return []
    delimiter = unescape(split)
    if not delimiter:
        raise ValueError("the delimiter is empty")
    parts = [p for p in Path(body_file).read_bytes().split(delimiter) if p]
    if not parts:
        raise ValueError(f"{body_file!r} holds nothing between its delimiters")
    return parts


def pool(count: int, size: int, ratio: float | None) -> list[bytes]:
    """OpenMessaging Benchmark's randomized payloads: `count` bodies of `size` bytes, the
    first `ratio` share of each random (int(size * ratio) bytes, as OMB rounds) and the rest
    zero bytes."""
    random_bytes = int(size * (1.0 if ratio is None else ratio))
    return [os.urandom(random_bytes) + bytes(size - random_bytes) for _ in range(count)]


def drawn(bodies: list[bytes | tuple[bytes, int]], seed: str, length: int) -> list:
    """A deck of `length` draws from the pool, each at random (OMB draws one a message), a
    thread's own: dealt in turn, it costs a message what bodies in turn do."""
    draw = random.Random(seed)
    return [bodies[draw.randrange(len(bodies))] for _ in range(length)]
