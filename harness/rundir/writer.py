"""The files a run writes into its run directory.

intervals.jsonl and <node>.hlog are appended one whole line per write(2) on an O_APPEND
descriptor, so that after Ctrl-C, SIGKILL or a crash every line in them is complete.
manifest.json and summary.json are written to a temporary name and renamed into place.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.stats.records import closing_records, report_records
from harness.stats.reports import IntervalReport

HLOG_FORMAT_VERSION = "1.3"

# Interval_Max in the .hlog is in milliseconds, as HdrHistogram's own tools expect for
# histograms of microsecond values divided by this ratio.
HLOG_MAX_VALUE_UNIT_RATIO = 1000.0
# Keys whose values are secrets: options (--password) and properties alike, for an HTTP
# header such as `--property "Authorization=Bearer ..."` is a credential too.
_SECRET_KEY = re.compile(r"pass(word|code)?|secret|token|credential|auth|api[-_]?key|cookie",
                         re.IGNORECASE)


def hlog_header(base_time: float, comment: str) -> str:
    """The head of an HdrHistogram interval log, format 1.3."""
    iso = datetime.fromtimestamp(base_time, UTC).isoformat()
    return (f"#[Histogram log format version {HLOG_FORMAT_VERSION}]\n"
            f"#[StartTime: {base_time:.3f} (seconds since epoch), {iso}]\n"
            f"#[BaseTime: {base_time:.3f} (seconds since epoch)]\n"
            f"#[{comment}; values in microseconds]\n"
            '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n')


def hlog_line(base_time: float, tag: str, start: float, length: float, max_us: float,
              encoded: str, phase: str = "measure") -> str:
    """One interval's histogram of a tag. The summary leaves the warm-up out and counts
    the measured span and the drain: so does a reader that adds up a tag, for a warm-up
    interval's histograms go under a tag of their own, `<group>.<metric>.warmup`."""
    if phase == "warmup":
        tag += ".warmup"
    return (f"Tag={tag},{start - base_time:.3f},{length:.3f},"
            f"{max_us / HLOG_MAX_VALUE_UNIT_RATIO:.3f},{encoded}\n")


def hlog_phase(base_time: float, phase: str, start: float) -> str:
    """A comment where a phase begins (HdrHistogram's readers pass over comments)."""
    return f"#[Phase: {phase} from {start - base_time:.3f} s after the BaseTime]\n"


def scrub(value: Any) -> Any:
    """A copy with the value of every secret-looking key replaced, for manifests and exports."""
    if isinstance(value, dict):
        return {k: ("***" if _SECRET_KEY.search(str(k)) and v else scrub(v))
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def is_uri(output: str) -> bool:
    """A Hadoop file system's URI (hdfs://, s3a://, file://), not a directory of this
    machine: only a distributed run writes there, through Spark."""
    return "://" in output


def make_run_dir(output: str, name: str, started: float) -> Path:
    base = Path(output)
    stamp = datetime.fromtimestamp(started, UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        base.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            path = base / (f"{stamp}-{name}" if n == 0 else f"{stamp}-{name}-{n}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            probe = path / ".write-test"
            probe.write_text("")
            probe.unlink()
            return path
    except OSError as exc:
        raise BadInput("-o", f"cannot write run directory under {output!r}: "
                       f"{exc.strerror or exc}") from None
    raise BadInput("-o", f"too many runs named {name!r} in {output!r} this second")


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """The old file or the new one whole, whenever it is read, even after a crash."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class _AppendLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, text: str) -> None:
        os.write(self.fd, text.encode("utf-8"))

    def close(self) -> None:
        os.close(self.fd)


class RunWriter:
    """Writes interval records as JSON lines and as a tagged HdrHistogram interval log."""

    def __init__(self, run_dir: Path, run_id: str, node: str, base_time: float) -> None:
        self.run_dir = run_dir
        self.run_id = run_id
        self.node = node
        self.base_time = base_time
        self.jsonl = _AppendLog(run_dir / "intervals.jsonl")
        self.hlog = _AppendLog(run_dir / f"{node}.hlog")
        self.hlog.write(hlog_header(base_time, f"harness run {run_id} node {node}"))
        self.phase = ""

    def write_interval(self, records: list[dict[str, Any]], histograms: list[
            tuple[str, float, float, int, str]]) -> None:
        """records: JSON objects for intervals.jsonl; histograms: (tag, start epoch s, length s,
        max us, encoded) for the .hlog."""
        self.jsonl.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
        self.hlog.write("".join(hlog_line(self.base_time, *h) for h in histograms))

    def write_report(self, report: IntervalReport, groups: list[str], start: float,
                     phase: str) -> None:
        """One process's report of an interval: its process, counters and histogram records
        (groups: each group's name by index)."""
        self.write_interval(report_records(report, self.run_id, self.node, groups, start,
                                           phase), [])

    def close_interval(self, index: int, start: float, phase: str, machine_cpu: float | None,
                       broker: tuple[int, float] | None,
                       histograms: list[tuple[str, float, float, int, str]],
                       broker_memory: dict[str, int] | None = None) -> None:
        """An interval's end, once every process reported it: the host's CPU (and the
        broker's: pid, CPU), whose record a reader takes as the interval complete
        (harness.rundir.reader.Intervals), and its merged histograms in the .hlog."""
        if phase != self.phase:
            self.phase = phase
            self.hlog.write(hlog_phase(self.base_time, phase, start))
        self.write_interval(closing_records(self.run_id, self.node, index, start, phase,
                                            machine_cpu, broker, broker_memory), [])
        self.hlog.write("".join(hlog_line(self.base_time, *h, phase) for h in histograms))

    def close(self) -> None:
        self.jsonl.close()
        self.hlog.close()


def host_facts() -> dict[str, Any]:
    import platform
    from importlib import metadata

    import psutil

    versions = {}
    for package in ("harness", "hdrhistogram", "numpy", "psutil", "typer", "rich", "stomp.py",
                    "paho-mqtt", "textual"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return {
        "hostname": platform.node(), "platform": platform.platform(),
        "python": platform.python_version(), "implementation": platform.python_implementation(),
        "cpus": os.cpu_count(), "memory_bytes": psutil.virtual_memory().total,
        "libraries": versions, "recorded_at": time.time(),
    }
