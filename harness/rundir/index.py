"""Every past run in a directory tree, as a line each: when, what, and its headline figures,
read from each run's manifest.json and summary.json only (never its intervals), so that a
tree of thousands of runs lists in seconds in bounded memory.

A run directory is one holding a manifest.json or a summary.json; the tree is not searched
below it (a distributed run's nodes/ are part of it). A directory `harness merge` wrote holds a
summary.json of the runs it merged: each of them is a line."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.plan.run import parse_labels
from harness.textfiles import read_text


@dataclass
class RunEntry:
    path: str
    run_id: str
    start: float  # epoch seconds; 0 when the manifest does not say
    name: str
    modules: list[str]
    status: str  # complete, running (or ended without saying so), merged
    rate: float | None  # what the producers sent a second over the measured span, summed
    p99_us: float | None  # the highest consumer (or requestor) latency p99
    lost: int | None
    slo: bool | None  # the thresholds met; None without --slo
    labels: dict[str, str] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        """As `harness runs` prints it: the start in local time (and as epoch seconds)."""
        return {**asdict(self), "start": time.strftime("%Y-%m-%dT%H:%M:%S",
                                                       time.localtime(self.start))
                if self.start else "", "start_s": self.start}


def run_dirs(root: Path) -> Iterator[Path]:
    """Every run directory under root (root itself may be one), in no particular order."""
    for top, dirs, files in os.walk(root):
        if "manifest.json" in files or "summary.json" in files:
            dirs[:] = []
            yield Path(top)
        else:
            dirs.sort()


def json_object(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(read_text(path))
    except (OSError, ValueError, BadInput):
        return None  # a run still being written, or cut off: listed with what it has
    return value if isinstance(value, dict) else None


def _figures(groups: dict[str, Any]) -> tuple[float | None, float | None, int | None]:
    rates = [g.get("rate") or 0.0 for g in groups.values() if g.get("sent")]
    p99s = [g["latency"]["p99"] for g in groups.values()
            if isinstance(g.get("latency"), dict) and g["latency"].get("p99") is not None]
    lost = [g.get("lost") or 0 for g in groups.values()]
    return (sum(rates) if rates else None, max(p99s) if p99s else None,
            sum(lost) if groups else None)


def _labels(options: dict[str, Any]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in options.get("label") or [] if "=" in item)


def entries(run_dir: Path) -> list[RunEntry]:
    """The lines of one run directory: one, or one per run of a merge's output."""
    manifest = json_object(run_dir / "manifest.json") or {}
    summary = json_object(run_dir / "summary.json") or {}
    options = manifest.get("options") or {}
    runs = summary.get("runs")
    if isinstance(runs, dict):  # harness merge's output: a line per run it merged
        out = []
        for run_id, run in runs.items():
            groups = run.get("groups") or {}
            rate, p99, lost = _figures(groups)
            slo = run.get("slo")
            start = manifest.get("start") if manifest.get("run_id") == run_id else None
            out.append(RunEntry(str(run_dir), str(run_id), float(start or 0),
                                str(run.get("name") or manifest.get("name") or ""),
                                list(dict.fromkeys(str(g.get("module", ""))
                                                   for g in groups.values())),
                                "merged", rate, p99, lost,
                                slo.get("passed") if isinstance(slo, dict) else None,
                                _labels(options)))
        return out
    groups = summary.get("groups") or {}
    rate, p99, lost = _figures(groups)
    modules = list(dict.fromkeys(str(g.get("module", "")) for g in options.get("groups") or []
                                 if isinstance(g, dict))) or \
        list(dict.fromkeys(str(g.get("module", "")) for g in groups.values()))
    status = str(manifest.get("status") or ("complete" if summary else "unknown"))
    slo = summary.get("slo")
    return [RunEntry(str(run_dir), str(manifest.get("run_id") or summary.get("run_id") or ""),
                     float(manifest.get("start") or manifest.get("created") or
                           summary.get("start") or 0),
                     str(manifest.get("name") or ""), modules, status, rate, p99, lost,
                     slo.get("passed") if isinstance(slo, dict) else None, _labels(options))]


_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_epoch(text: str, now: float | None = None) -> float:
    """--since: a span back from now (`7d`, `12h`, `30m`) or a date (`2026-11-01`, with a
    time `2026-11-01T08:00`), local time."""
    now = time.time() if now is None else now
    if span := _SPAN.fullmatch(text.strip()):
        return now - float(span[1]) * _UNIT_S[span[2]]
    for shape in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            return time.mktime(time.strptime(text.strip(), shape))
        except ValueError:
            continue
    raise BadInput("--since", f"{text!r}: give a span back from now (7d, 12h, 30m) or a "
                   "date (2026-11-01, 2026-11-01T08:00)")


@dataclass
class Filters:
    name: str | None = None
    module: str | None = None
    since: float | None = None
    labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def given(cls, name: str | None, module: str | None, since: str | None,
              labels: list[str]) -> Filters:
        """The filters as the flags give them (--since's text, --label's KEY=VALUE items);
        BadInput naming the flag."""
        return cls(name, module, since_epoch(since) if since else None,
                   parse_labels(labels, "--label"))

    def keep(self, entry: RunEntry) -> bool:
        return (self.name is None or entry.name == self.name) and \
            (self.module is None or any(self.module in m for m in entry.modules)) and \
            (self.since is None or entry.start >= self.since) and \
            all(entry.labels.get(k) == v for k, v in self.labels.items())


def index(root: Path, filters: Filters, last: int | None = None) -> list[RunEntry]:
    """The runs under root that pass the filters, newest first (at most `last` of them)."""
    if not root.is_dir():
        raise BadInput("RUNS_DIR", f"{root} is not a directory")
    found = [e for d in run_dirs(root) for e in entries(d) if filters.keep(e)]
    found.sort(key=lambda e: (e.start, e.path), reverse=True)
    return found[:last] if last else found
