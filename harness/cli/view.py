"""`harness view`: a finished run replayed on the screen, or printed as its interval lines
and summary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, console, err_console, on_terminal
from harness.errors import BadInput


@app.command("view")
def view(
    run_dir: Annotated[Path | None, typer.Argument(
        help="A run directory written by `harness run` (manifest.json, intervals.jsonl); "
        "with --follow, the newest run under runs/ if left out.", show_default=False)] = None,
    ui: Annotated[bool | None, typer.Option(
        "--ui/--no-ui", help="The screen; default: on when stdout is a terminal. Without it "
        "the interval lines and the summary are printed.")] = None,
    follow: Annotated[bool, typer.Option(
        "--follow", help="A run still going (started in another process or on another "
        "terminal, or a distributed run's driver directory), read as it writes its files: "
        "on the screen as it runs (the rate keys, pause and stop steer it if it was started "
        "with --control), then as a replay once it ends; or its interval lines, then its "
        "summary.")] = False,
) -> None:
    """Replay a finished run in the live screen, stepping through its intervals: space
    plays and pauses, left and right step, home and end jump; or follow one still going."""
    from harness.rundir.reader import event_text, load

    if run_dir is None:
        if not follow:
            raise BadInput("RUN_DIR", "give the run directory to view (or --follow, for the "
                           "newest run under runs/)")
        run_dir = _newest(Path("runs"))
    if follow:
        _wait_for_start(run_dir)
    recorded = load(run_dir)
    if ui is None:
        ui = on_terminal()
    if ui:
        from harness.screen.app import RunApp
        from harness.screen.follow import open_feed

        RunApp(open_feed(run_dir, recorded, follow), close_when_done=False).run()
        return
    from harness.screen.console import interval_lines, print_summary
    from harness.stats.figures import labels

    metrics = {g.name: recorded.metrics[i] for i, g in enumerate(recorded.run.groups)}
    names = labels(recorded.run, recorded.metrics)
    replay = recorded.replay(follow=follow)
    shown = 0
    for interval in replay.views():
        console.file.write("".join(f"{line}\n" for line in
                                   interval_lines(interval, metrics, names)))
        console.file.flush()
        shown += 1
    if not shown:
        raise BadInput("RUN_DIR", f"{run_dir} holds no intervals")
    if replay.skipped:
        err_console.print(f"harness: warning: {replay.skipped} lines of intervals.jsonl did "
                          "not parse (the run was cut off mid-write) and are left out",
                          markup=False, style="yellow")
    for record in replay.events:
        console.print(event_text(record), markup=False)
    from harness.rundir.index import json_object

    # None where there is none or it does not read (being written, or cut off)
    summary = json_object(run_dir / "summary.json")
    if summary is None or "groups" not in summary:
        if summary is None:
            err_console.print(f"harness: {run_dir} has no summary.json (the run did not "
                              "finish): the summary below is recomputed from the intervals",
                              markup=False, style="yellow")
        summary = replay.stats.summary()  # a merge's output: the merged intervals' summary
    print_summary(console, summary, str(run_dir))


def _newest(root: Path) -> Path:
    from harness.rundir.index import Filters, index

    found = index(root, Filters(), last=1)
    if not found:
        raise BadInput("RUN_DIR", f"no run under {root} to follow")
    return Path(found[0].path)


def _wait_for_start(run_dir: Path, seconds: float = 120.0) -> None:
    """A run just started writes its manifest and intervals.jsonl within its first moments;
    a distributed run's driver its manifest and live.jsonl once Spark and the nodes are up."""
    import time

    deadline = time.monotonic() + seconds
    while not ((run_dir / "manifest.json").is_file() and
               any((run_dir / name).is_file() for name in ("intervals.jsonl", "live.jsonl"))):
        if time.monotonic() > deadline:
            raise BadInput("RUN_DIR", f"{run_dir} holds no run after {seconds:g} s")
        time.sleep(0.2)
