"""A run directory's intervals as rows (`harness export`): one row per group per interval,
and for a merged run one more per node, with every figure the summary gives a group, merged
from intervals.jsonl by the code that merged them live (harness.rundir.reader). CSV and
JSON lines are written as the intervals are read; Parquet in batches, through pyarrow."""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import orjson

from harness.errors import BadInput
from harness.rundir.reader import RecordedRun
from harness.stats.figures import rate, us_per_message
from harness.stats.histogram import percentiles
from harness.stats.recorder import COUNTERS, METRICS

FORMATS = ("csv", "jsonl", "parquet", "omb")
PERCENTILES = ("p50", "p90", "p99", "p99.9", "max")
BATCH = 10_000  # Parquet rows a row group
# Whole numbers beside the counters: threads and clients, all and those up.
WHOLE = ("threads", "threads_up", "clients", "clients_up")


def columns(recorded: RecordedRun) -> list[str]:
    """Every row's columns, known before the first interval is read: a metric's
    percentiles for every metric any group records (empty where a group has none)."""
    metrics = sorted({m for names in recorded.metrics.values() for m in names},
                     key=METRICS.index)
    return ["run_id", "node", "interval", "start", "offset_s", "length_s", "phase", "group",
            "module", "destination", "rate", *COUNTERS, *WHOLE, "client_cpu", "client_us_per_msg",
            *(f"{m}_{p.replace('.', '_')}_us" for m in metrics for p in PERCENTILES)]


def rows(recorded: RecordedRun) -> Iterator[dict[str, Any]]:
    run = recorded.run
    run_id = recorded.manifest.get("run_id", "")
    origin = recorded.manifest.get("start") or 0.0
    groups = {g.name: g for g in run.groups}
    for view in recorded.replay().views():
        base = {"run_id": run_id, "interval": view.index, "start": origin + view.start,
                "offset_s": view.start, "length_s": view.length, "phase": view.phase}
        for name, group in view.groups.items():
            spec = groups[name]
            row = {**base, "node": "all" if view.nodes else run.node, "group": name,
                   "module": spec.module, "destination": spec.destination or "",
                   "rate": rate(group.count, view.length), **group.counters,
                   "threads": group.threads, "threads_up": group.threads_up,
                   "clients": group.clients, "clients_up": group.clients_up,
                   "client_cpu": group.cpu,
                   "client_us_per_msg": us_per_message(group.counters["cpu_us"], group.count)}
            for metric, histogram in group.histograms.items():
                if histogram.get_total_count():
                    for pct, value in percentiles(histogram).items():
                        row[f"{metric}_{pct.replace('.', '_')}_us"] = value
            yield row
        for node, share in view.nodes.items():
            for name, count in share.counts.items():
                spec = groups[name]
                yield {**base, "node": node, "group": name, "module": spec.module,
                       "destination": spec.destination or "",
                       "rate": rate(count, view.length), "client_cpu": share.cpu}


def export(recorded: RecordedRun, fmt: str, out: Path | None) -> int:
    """Write the rows to out (None: standard output, for csv and jsonl); the row count.
    A file is written under a temporary name and renamed: complete or absent."""
    if fmt not in FORMATS:
        raise BadInput("--format", f"{fmt!r}: use one of {', '.join(FORMATS)}")
    if fmt == "omb":
        return _omb(recorded, out)
    names = columns(recorded)
    if fmt == "parquet":
        if out is None:
            raise BadInput("-o", "Parquet is binary: give a file")
        return _parquet(recorded, names, out)
    if out is None:
        import sys
        return _text(recorded, names, fmt, sys.stdout)
    with _replacing(out) as temporary, temporary.open("w", newline="") as stream:
        return _text(recorded, names, fmt, stream)


@contextlib.contextmanager
def _replacing(out: Path) -> Iterator[Path]:
    """A temporary file beside out, renamed to out once written whole: complete or absent."""
    temporary = out.with_name(f".{out.name}.tmp")
    yield temporary
    os.replace(temporary, out)


def _omb(recorded: RecordedRun, out: Path | None) -> int:
    """OpenMessaging Benchmark's result JSON: one document (harness.rundir.omb)."""
    from harness.rundir.omb import omb_result

    text = orjson.dumps(omb_result(recorded), option=orjson.OPT_INDENT_2).decode() + "\n"
    if out is None:
        import sys
        sys.stdout.write(text)
    else:
        with _replacing(out) as temporary:
            temporary.write_text(text)
    return 1


def _text(recorded: RecordedRun, names: list[str], fmt: str, stream: TextIO) -> int:
    count = 0
    if fmt == "csv":
        writer = csv.DictWriter(stream, names, extrasaction="raise")
        writer.writeheader()
        for count, row in enumerate(rows(recorded), 1):  # noqa: B007 - the count is returned
            writer.writerow(row)
        return count
    for count, row in enumerate(rows(recorded), 1):  # noqa: B007
        stream.write(orjson.dumps({name: row.get(name) for name in names}).decode() + "\n")
    return count


def _parquet(recorded: RecordedRun, names: list[str], out: Path) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise BadInput("--format", "parquet needs pyarrow: pip install "
                       "'broker-harness[export]'") from None
    text = {"run_id", "node", "phase", "group", "module", "destination"}
    schema = pa.schema([(n, pa.string() if n in text else
                         pa.int64() if n in (*COUNTERS, *WHOLE, "interval")
                         else pa.float64()) for n in names])
    count = 0
    with _replacing(out) as temporary, pq.ParquetWriter(temporary, schema) as writer:
        batch: list[dict[str, Any]] = []
        for row in rows(recorded):
            batch.append(row)
            if len(batch) == BATCH:
                writer.write_table(pa.Table.from_pylist(batch, schema))
                count += len(batch)
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema))
            count += len(batch)
    return count
