"""The one rule for every text file the harness reads whole from a user or another machine
(profiles, OpenMessaging Benchmark workloads, size lists, password files, a run's manifest
and summary): UTF-8, at most MAX_BYTES, and for YAML at most MAX_DEPTH levels deep. Any
other file is refused in one line naming it (and, for a byte that is not UTF-8, its line and
column), never read into memory whole and never a traceback."""

from __future__ import annotations

import os
from typing import Any

from harness.errors import BadInput

# A profile, a workload or a size list is a few kilobytes: a file this large is the wrong one.
MAX_BYTES = 16 * 1024 * 1024
# Deeper nesting is no profile; PyYAML's loaders recurse, and Python's stack has a limit.
MAX_DEPTH = 64


def read_text(path: str | os.PathLike[str], where: str | None = None) -> str:
    """The whole file, decoded; BadInput naming `where` (default: the file) otherwise."""
    name = where or str(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_BYTES:
                raise BadInput(name, f"{size:,} bytes: a file read whole is at most "
                                     f"{MAX_BYTES // 2**20} MiB (is it the right file?)")
            data = f.read(MAX_BYTES + 1)  # a file that grows meanwhile: bounded still
    except OSError as exc:
        # Named by its path already where no flag or field is given.
        raise BadInput(name, f"{'' if where is None else f'cannot read {path}: '}"
                             f"{exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise BadInput(name, f"more than {MAX_BYTES // 2**20} MiB: a file read whole is at most "
                             "that (is it the right file?)")
    return decode(data, str(path) if where is None else f"{where} ({path})")


def decode(data: bytes, name: str) -> str:
    """UTF-8 text, or BadInput naming the line and column of the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise BadInput(f"{name}:{line}:{column}",
                       f"not UTF-8 text (byte 0x{data[exc.start]:02x}): save it as UTF-8, "
                       "or is it the right file?") from None


def depth_problem(data: Any, limit: int = MAX_DEPTH) -> str | None:
    """Where data nests deeper than limit, without recursion; None where it does not."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    seen: set[int] = set()
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth > limit:
                return f"nested more than {limit} levels deep"
            if id(item) in seen:  # a YAML alias: the same object again
                continue
            seen.add(id(item))
            values = item.values() if isinstance(item, dict) else item
            stack.extend((value, depth + 1) for value in values)
    return None


def load_yaml(text: str, where: str, loader: Any = None) -> Any:
    """safe_load (or `loader(text)`), with nesting and the recursion it costs refused in one
    line; yaml.YAMLError is left to the caller, which knows how to place it."""
    import yaml
    try:
        data = loader(text) if loader is not None else yaml.safe_load(text)
    except RecursionError:
        raise BadInput(where, f"nested more than {MAX_DEPTH} levels deep") from None
    problem = depth_problem(data)
    if problem:
        raise BadInput(where, problem)
    return data

