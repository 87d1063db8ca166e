"""`harness runs`: every past run in a directory tree, newest first, with its headline
figures, filtered; as a table, JSON lines or CSV."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.app import app, console
from harness.errors import BadInput

FORMATS = ("table", "json", "csv")
COLUMNS = ("start", "name", "modules", "status", "rate", "p99_us", "lost", "slo", "labels",
           "run_id", "path")


@app.command("runs")
def runs_command(
    runs_dir: Annotated[Path, typer.Argument(
        help="The directory tree to list (run directories anywhere below it).")] = Path("runs"),
    name: Annotated[str | None, typer.Option(
        "--name", help="Only runs of this name (-n; a profile's runs bear the profile's).",
        show_default=False)] = None,
    module: Annotated[str | None, typer.Option(
        "--module", help="Only runs with a group whose module holds this, e.g. kafka or "
        "mqtt.Publisher.", show_default=False)] = None,
    since: Annotated[str | None, typer.Option(
        "--since", help="Only runs started since: a span back from now (7d, 12h, 30m) or a "
        "date (2026-11-01, 2026-11-01T08:00).", show_default=False)] = None,
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="Only runs given this --label KEY=VALUE (repeatable: all of them).",
        show_default=False)] = None,
    last: Annotated[int | None, typer.Option(
        "--last", help="Only the newest N.", show_default=False)] = None,
    output_format: Annotated[str, typer.Option(
        "--format", "-f", help="table, json (one object a line) or csv.")] = "table",
    trend: Annotated[str | None, typer.Option(
        "--trend", help="Draw this figure of the runs listed against the time each started, "
        "a line a run name, into an HTML page: rate, p99 or lost.",
        show_default=False)] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="With --trend: the page to write (default: trend-FIGURE.html "
        "here).", show_default=False)] = None,
    ui: Annotated[bool, typer.Option(
        "--ui", help="On a screen, read again every few seconds: Enter opens a run, "
        "followed while it runs, replayed once it has ended (as harness serve's page shows "
        "it).")] = False,
) -> None:
    """List past runs, newest first: when, name, modules, status, rate, p99, lost, thresholds.
    Reads each run's manifest.json and summary.json only, so thousands list in seconds."""
    from harness.rundir.index import Filters, index

    if output_format not in FORMATS:
        raise BadInput("--format", f"{output_format!r}: one of {', '.join(FORMATS)}")
    if last is not None and last < 1:
        raise BadInput("--last", f"must be at least 1, got {last}")
    if output is not None and trend is None:
        raise BadInput("--output", "does nothing without --trend: give --trend too")
    figure = None
    if trend is not None:
        from harness.merge.trend import figure_of

        figure = figure_of(trend)
        if output_format != "table":
            raise BadInput("--format", "--trend draws a page: give one or the other")
    filters = Filters.given(name, module, since, label or [])
    if ui:
        for flag, given in (("--trend", trend), ("--format", output_format != "table")):
            if given:
                raise BadInput(flag, "--ui shows the runs on a screen: give one or the other")
        from harness.screen.runs import RunsApp

        RunsApp(runs_dir.resolve(), filters, last).run()
        return
    found = index(runs_dir, filters, last)
    rows = [entry.row() for entry in found]
    if figure is not None:
        from harness.merge.trend import render_trend
        from harness.rundir.writer import write_text_atomic

        target = output or Path(f"trend-{figure}.html")
        write_text_atomic(target, render_trend(rows, figure, f"harness runs: {figure} of the "
                                                             f"runs under {runs_dir}"))
        console.print(f"wrote {target}: {figure} of {len(rows)} run(s)", markup=False)
        return
    if output_format == "json":
        for row in rows:
            sys.stdout.write(json.dumps(row) + "\n")
        return
    if output_format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([_cell(row[c], plain=True) for c in COLUMNS])
        return
    if not rows:
        console.print(f"no runs under {runs_dir} that pass the filters", markup=False)
        return
    table = Table(title=f"{len(rows)} run(s) under {runs_dir}, newest first")
    for column in ("start", "name", "modules", "status", "rate/s", "p99", "lost", "slo",
                   "labels", "path"):
        table.add_column(column, justify="right" if column in ("rate/s", "p99", "lost")
                         else "left", overflow="fold")
    for row in rows:
        table.add_row(row["start"], row["name"], ", ".join(row["modules"]), row["status"],
                      _cell(row["rate"]), _p99(row["p99_us"]), _cell(row["lost"]),
                      _cell(row["slo"]), _cell(row["labels"]), row["path"])
    console.print(table)


def _p99(value: float | None) -> str:
    from harness.units import format_us

    return "-" if value is None else format_us(value)


def _cell(value: object, plain: bool = False) -> str:
    if value is None:
        return "" if plain else "-"
    if isinstance(value, bool):
        return ("met" if value else "missed") if not plain else str(value).lower()
    if isinstance(value, float):
        return f"{value:.1f}" if plain else f"{value:,.1f}"
    if isinstance(value, list):
        return " ".join(map(str, value))
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return str(value)
