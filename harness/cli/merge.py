"""`harness merge` (many nodes, on Spark), `harness report` (one run, without Spark) and
`harness compare` (several runs on shared axes)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, console, err_console
from harness.errors import BadInput


@app.command("merge")
def merge_command(
    run_dirs: Annotated[list[str], typer.Argument(
        help="Run directories of the nodes of one run (or of a sweep's runs with --sweep); "
        "any path Spark reads: local, hdfs://, s3a://.", show_default=False)],
    output: Annotated[str, typer.Option("-o", "--output", help="Output directory.")] =
        "merged",
    sweep: Annotated[bool, typer.Option(
        "--sweep", help="The inputs are several runs (a sweep): merge each on its own.")] =
        False,
    master: Annotated[str, typer.Option(
        "--master", help="Spark master; the default is an embedded Spark on every core.")] =
        "local[*]",
    skew_warn_ms: Annotated[float, typer.Option(
        "--skew-warn-ms", help="Warn when a node's clock offset exceeds this.")] = 1.0,
) -> None:
    """Merge the interval files of many nodes exactly (histograms added) on Spark, and write
    merged_intervals (parquet, CSV), summary.json, merged.hlog and report.html."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise BadInput("merge", "needs PySpark: pip install 'broker-harness[spark]'") from None
    from harness.merge.spark import MergeError, merge, session

    console.print(f"starting Spark ({master})", markup=False)
    spark = session(master)
    try:
        merged = merge(spark, run_dirs, output, sweep, skew_warn_ms / 1000,
                       lambda line: console.print(line, markup=False))
    except MergeError as exc:
        for problem in exc.problems:
            err_console.print(f"harness: error: {problem}", markup=False)
        raise typer.Exit(2) from None
    finally:
        spark.stop()
    for warning in merged.warnings:
        err_console.print(f"harness: warning: {warning}", markup=False, style="yellow")
    console.print(f"wrote {output}/: merged_intervals.parquet, merged_intervals.csv, "
                  "summary.json, merged.hlog, report.html", markup=False)


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory.", show_default=False)],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Where to write it (default: RUN_DIR/report.html).")] = None,
) -> None:
    """report.html for a single-node run, without Spark: the merge's report, offline."""
    from harness.merge.build import report_run
    from harness.merge.report import render

    merged = report_run(run_dir)
    judged = run_dir / "summary.json"  # the run's verdict on its thresholds, where it has one
    if judged.is_file():
        import json
        verdict = json.loads(judged.read_text()).get("slo")
        if verdict:
            merged.report["runs"][0]["slo"] = verdict
    target = output or run_dir / "report.html"
    target.write_text(render(merged.report, f"harness report: {run_dir.name}"))
    for warning in merged.warnings:
        err_console.print(f"harness: warning: {warning}", markup=False, style="yellow")
    console.print(f"wrote {target}", markup=False)




@app.command("compare")
def compare_command(
    run_dirs: Annotated[list[Path] | None, typer.Argument(
        help="Two or more run directories (of brokers, versions, settings); or none, with "
        "--last.", show_default=False)] = None,
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Where to write it.")] = Path("compare.html"),
    tag: Annotated[str | None, typer.Option(
        "--tag", help="The metric to compare, GROUP.METRIC (default: the first consumer's "
        "latency the runs have in common, e.g. receiver.latency).")] = None,
    last: Annotated[int | None, typer.Option(
        "--last", help="Compare the newest N runs under --runs-dir that pass the filters "
        "(as `harness runs` lists them).", show_default=False)] = None,
    runs_dir: Annotated[Path, typer.Option(
        "--runs-dir", help="With --last: the tree to take them from.")] = Path("runs"),
    name: Annotated[str | None, typer.Option(
        "--name", help="With --last: only runs of this name.", show_default=False)] = None,
    module: Annotated[str | None, typer.Option(
        "--module", help="With --last: only runs with a group whose module holds this.",
        show_default=False)] = None,
    since: Annotated[str | None, typer.Option(
        "--since", help="With --last: only runs started since (7d, 12h, 2026-11-01).",
        show_default=False)] = None,
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="With --last: only runs given this --label KEY=VALUE (repeatable).",
        show_default=False)] = None,
) -> None:
    """compare.html: several runs on shared axes (latency distribution, throughput, latency
    against attempted rate), each labelled by what differs between their manifests."""
    from harness.merge.compare import compare

    run_dirs = _chosen(run_dirs or [], last, runs_dir, name, module, since, label or [])
    for run_dir in run_dirs:
        if not (run_dir / "manifest.json").is_file():
            raise BadInput("RUN_DIR", f"{run_dir} is not a run directory (no manifest.json)")
    page, names, compared = compare(run_dirs, tag)
    output.write_text(page)
    for run_dir, name in zip(run_dirs, names, strict=True):
        console.print(f"  {run_dir.name}: {name}", markup=False)
    console.print(f"wrote {output} ({compared})", markup=False)


def _chosen(run_dirs: list[Path], last: int | None, runs_dir: Path, name: str | None,
            module: str | None, since: str | None, label: list[str]) -> list[Path]:
    """The runs compare draws: those given, or the newest --last N that pass the filters."""
    from harness.rundir.index import Filters, index

    filters = {"--name": name, "--module": module, "--since": since, "--label": label,
               "--runs-dir": runs_dir if runs_dir != Path("runs") else None}
    if last is None:
        for flag, value in filters.items():
            if value:
                raise BadInput(flag, "does nothing without --last: give --last N too")
        if len(run_dirs) < 2:
            raise BadInput("RUN_DIR", "give two runs or more to compare, or --last N")
        return run_dirs
    if run_dirs:
        raise BadInput("--last", "give run directories or --last N, not both")
    if last < 2:
        raise BadInput("--last", f"compares at least 2 runs, got {last}")
    found = index(runs_dir, Filters.given(name, module, since, label))
    paths = list(dict.fromkeys(Path(e.path) for e in found))[:last]
    if len(paths) < 2:
        raise BadInput("--last", f"{len(paths)} run(s) under {runs_dir} pass the filters: "
                       "nothing to compare")
    return paths[::-1]  # oldest first, as a history reads
