"""`harness export`: a run's intervals as rows in CSV, JSON lines and Parquet, read back and
checked against summary.json and the interval records of the same run."""

from __future__ import annotations

import csv
import json

from harness.stats.histogram import decode, percentiles
from tests.conftest import read_jsonl


def test_export_writes_a_row_per_group_per_interval_in_every_format(harness):
    done = harness("run", "-m", "loopback.Sender", "-d", "q", "-rt", "300", "-rl", "3", "-ss",
                   "1", "-g", "-m loopback.Receiver -d q")
    assert done.code == 0, done.stderr
    run_dir = done.run_dir
    summary = json.loads((run_dir / "summary.json").read_text())
    records = read_jsonl(run_dir / "intervals.jsonl")
    p99 = {r["interval"]: percentiles(decode(r["hist"]))["p99"] for r in records
           if r["type"] == "histogram" and r["tag"] == "receiver.latency" and r["count"]}
    intervals = {r["interval"] for r in records if r["type"] == "counters"}

    tables = {}
    for fmt in ("csv", "jsonl", "parquet"):
        out = run_dir / f"rows.{fmt}"
        exported = harness("export", str(run_dir), "--format", fmt, "-o", str(out))
        assert exported.code == 0, exported.stderr
        if fmt == "csv":
            with out.open() as f:
                tables[fmt] = [{k: v for k, v in row.items() if v != ""}
                               for row in csv.DictReader(f)]
        elif fmt == "jsonl":
            tables[fmt] = [{k: v for k, v in json.loads(line).items() if v is not None}
                           for line in out.read_text().splitlines()]
        else:
            import pyarrow.parquet as pq
            tables[fmt] = [{k: v for k, v in row.items() if v is not None}
                           for row in pq.read_table(out).to_pylist()]
    for fmt, rows in tables.items():
        assert len(rows) == 2 * len(intervals), fmt
        for name, group in summary["groups"].items():
            counted = [r for r in rows if r["group"] == name and r["phase"] != "warmup"]
            for key in ("sent", "received", "errors", "lost"):
                assert sum(int(r[key]) for r in counted) == group[key], (fmt, name, key)
        assert {int(r["interval"]): int(r["latency_p99_us"]) for r in rows
                if r["group"] == "receiver" and "latency_p99_us" in r} == p99, fmt


def test_export_refuses_an_unknown_format_in_one_line(harness, tmp_path):
    done = harness("run", "-m", "loopback.Sender", "-d", "q", "-mg", "10")
    assert done.code == 0, done.stderr
    refused = harness("export", str(done.run_dir), "--format", "xlsx")
    assert refused.code == 2
    assert refused.stderr.strip().count("\n") == 0 and "--format" in refused.stderr
    missing = harness("export", str(tmp_path / "nothing"))
    assert missing.code == 2 and "not a run directory" in missing.stderr
