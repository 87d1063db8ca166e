"""`harness export`: a run's intervals as a table for a spreadsheet, pandas or a database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, err_console


@app.command("export")
def export_run(
    run_dir: Annotated[Path, typer.Argument(
        help="A run directory written by `harness run` (or by a distributed run).",
        show_default=False)],
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="csv, jsonl, parquet (needs the export extra: pyarrow) or "
        "omb (OpenMessaging Benchmark's result JSON, for its chart script).")] = "csv",
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="The file to write; default: export.<format> in the run "
        "directory (omb: omb-result.json); - for standard output (all but parquet).",
        show_default=False)] = None,
) -> None:
    """A run's intervals as rows in CSV, JSON lines or Parquet, or the run as
    OpenMessaging Benchmark's result JSON. One row per group per interval (and per node in
    a merged run) with every figure the summary has: the interval, its phase, rate, every
    counter, threads, client CPU and each latency metric's percentiles in microseconds."""
    from harness.rundir.export import export
    from harness.rundir.reader import load

    recorded = load(run_dir)
    if output is None:
        output = run_dir / ("omb-result.json" if fmt == "omb" else f"export.{fmt}")
    target = None if str(output) == "-" else output
    count = export(recorded, fmt, target)
    if target is not None:
        what = "OpenMessaging Benchmark result" if fmt == "omb" else f"{count} rows"
        err_console.print(f"{what} -> {target}", markup=False)
