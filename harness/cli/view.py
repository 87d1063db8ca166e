"""`harness view`: a finished run replayed on the screen, or printed as its interval lines
and summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, console, err_console, on_terminal
from harness.errors import BadInput


@app.command("view")
def view(
    run_dir: Annotated[Path, typer.Argument(
        help="A run directory written by `harness run` (manifest.json, intervals.jsonl).",
        show_default=False)],
    ui: Annotated[bool | None, typer.Option(
        "--ui/--no-ui", help="The screen; default: on when stdout is a terminal. Without it "
        "the interval lines and the summary are printed.")] = None,
) -> None:
    """Replay a finished run in the live screen, stepping through its intervals: space
    plays and pauses, left and right step, home and end jump."""
    from harness.rundir.reader import event_text, load
    from harness.screen.replay import ReplayFeed

    recorded = load(run_dir)
    if ui is None:
        ui = on_terminal()
    if ui:
        from harness.screen.app import RunApp

        feed = ReplayFeed(run_dir, recorded)
        if not feed.slots:
            raise BadInput("RUN_DIR", f"{run_dir} holds no intervals")
        RunApp(feed).run()
        return
    from harness.screen.console import interval_lines, print_summary
    from harness.stats.figures import labels

    metrics = {g.name: recorded.metrics[i] for i, g in enumerate(recorded.run.groups)}
    names = labels(recorded.run, recorded.metrics)
    replay = recorded.replay()
    shown = 0
    for interval in replay.views():
        console.file.write("".join(f"{line}\n" for line in
                                   interval_lines(interval, metrics, names)))
        shown += 1
    if not shown:
        raise BadInput("RUN_DIR", f"{run_dir} holds no intervals")
    if replay.skipped:
        err_console.print(f"harness: warning: {replay.skipped} lines of intervals.jsonl did "
                          "not parse (the run was cut off mid-write) and are left out",
                          markup=False, style="yellow")
    for record in replay.events:
        console.print(event_text(record), markup=False)
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text()) if path.is_file() else None
    if summary is None or "groups" not in summary:
        if summary is None:
            err_console.print(f"harness: {run_dir} has no summary.json (the run did not "
                              "finish): the summary below is recomputed from the intervals",
                              markup=False, style="yellow")
        summary = replay.stats.summary()  # a merge's output: the merged intervals' summary
    print_summary(console, summary, str(run_dir))
