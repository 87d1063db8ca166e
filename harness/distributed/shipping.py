"""A node's run files, shipped to the driver over the node's link as they grow.

Each node writes its run directory on its own machine and sends, after every interval and at
its end, what its files gained since: the whole lines appended to intervals.jsonl and the
.hlog files, and manifest.json and summary.json whole when they change. The driver writes them
under its run directory's nodes/<node>/. So a node lost mid-run leaves its files up to its
last interval, whether or not the machines share a file system, and no file ever travels in
a Spark task's result (whose size the driver limits).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.rundir.writer import write_text_atomic

WHOLE = ("manifest.json", "summary.json")
GROWING = ("intervals.jsonl",)
_HLOG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.hlog")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def shipped(name: object) -> bool:
    """A file of a run directory that travels: never a path, never a hidden file."""
    return isinstance(name, str) and (name in WHOLE or name in GROWING or
                                      _HLOG.fullmatch(name) is not None)


class Shipper:
    """The node's side: what its run directory gained since the last call, as messages."""

    def __init__(self, directory: Path, send: Callable[[dict[str, Any]], None]) -> None:
        self.dir = directory
        self.send = send
        self.offsets: dict[str, int] = {}
        self.versions: dict[str, tuple[int, int]] = {}

    def ship(self) -> None:
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.iterdir()):
            name = path.name
            if not shipped(name) or not path.is_file():
                continue
            if name in WHOLE:
                # Written whole by rename: a read sees the old file or the new, never a part.
                stat = path.stat()
                version = (stat.st_mtime_ns, stat.st_size)
                if self.versions.get(name) != version:
                    self.versions[name] = version
                    self.send({"kind": "file", "name": name, "whole": path.read_text()})
                continue
            offset = self.offsets.get(name, 0)
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read()
            end = data.rfind(b"\n") + 1  # whole lines only: the rest comes with the next
            if end:
                self.offsets[name] = offset + end
                self.send({"kind": "file", "name": name,
                           "append": data[:end].decode("utf-8", "replace")})


class Landing:
    """The driver's side: each node's shipped files under root/<node>/."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def take(self, node: str, message: dict[str, Any]) -> None:
        """Writes one file message; anything else than a run file of a plainly named node
        (a stray or hostile peer's) is dropped."""
        name = message.get("name")
        if not shipped(name) or not _NODE.fullmatch(node):
            return
        assert isinstance(name, str)
        directory = self.root / node
        directory.mkdir(parents=True, exist_ok=True)
        whole, append = message.get("whole"), message.get("append")
        if isinstance(whole, str):
            write_text_atomic(directory / name, whole)
        elif isinstance(append, str):
            with (directory / name).open("a", encoding="utf-8") as f:
                f.write(append)

    def nodes(self) -> list[Path]:
        """Every node directory that has a manifest: what the merge takes."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if (p / "manifest.json").is_file())
