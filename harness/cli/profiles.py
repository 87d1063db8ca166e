"""`harness profiles`: list, show and check YAML profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.app import app, console, err_console
from harness.errors import BadInput

profiles_app = typer.Typer(help="List, show and check YAML profiles.", no_args_is_help=True)
app.add_typer(profiles_app, name="profiles")


@profiles_app.command("list")
def profiles_list(
    directory: Annotated[Path | None, typer.Argument(
        help="Where to look (default: the profiles shipped with harness).",
        show_default=False)] = None,
) -> None:
    """Each profile with the first line of its header comment: a shipped one by the name
    `harness run NAME` takes, one of another directory by its file name."""
    from harness.experiments.profile import listing, shipped_dir

    shipped = directory is None
    directory = directory or shipped_dir()
    if not directory.is_dir():
        raise BadInput("DIRECTORY", f"{directory} is not a directory")
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    table.add_column("profile", no_wrap=True)
    table.add_column("what it is", overflow="fold")
    for file, what in listing(directory):
        table.add_row(file.stem if shipped else file.name, what)
    console.print(table)


@profiles_app.command("show")
def profiles_show(
    profile: Annotated[Path, typer.Argument(
        help="A profile file, or the name of a shipped one.", show_default=False)],
    set_: Annotated[list[str] | None, typer.Option("--set", help="FIELD=VALUE override "
                                                    "(repeatable).")] = None,
) -> None:
    """The profile resolved: its header, and each run it makes, every option that differs
    from its default named by its --set path."""
    from harness.experiments.profile import find_profile, load
    from harness.plan.options import set_values

    loaded = load(find_profile(profile), set_ or [])
    console.print(loaded.header, markup=False, style="dim")
    what = f"capacity search over {loaded.search.field}" if loaded.search else "runs"
    console.print(f"{loaded.name}: {len(loaded.points)} point(s), {what}", markup=False)
    for point in loaded.points:
        labels = ", ".join(f"{k}={v}" for k, v in point.labels.items()) or "the only point"
        console.print(f"-- point {point.index + 1}: {labels}", markup=False, style="bold")
        for group in point.run.groups:
            for key, value in set_values(group, ("group", "connection")).items():
                console.print(f"groups.{group.name}.{key} = {value}", markup=False)
        for key, value in set_values(point.run, ("run",)).items():
            console.print(f"run.{key} = {value}", markup=False)


@profiles_app.command("validate")
def profiles_validate(
    profiles: Annotated[list[Path], typer.Argument(
        help="Profile files, or names of shipped ones.", show_default=False)],
    set_: Annotated[list[str] | None, typer.Option("--set", help="FIELD=VALUE override "
                                                    "(repeatable).")] = None,
) -> None:
    """Check profiles without running them: every problem, with its path and line."""
    from harness.experiments.profile import ProfileError, find_profile, load

    failed = False
    for path in profiles:
        try:
            loaded = load(find_profile(path), set_ or [])
        except ProfileError as exc:
            failed = True
            for problem in exc.problems:
                err_console.print(f"harness: error: {problem.render(exc.file)}", markup=False)
            continue
        console.print(f"{path}: ok, {len(loaded.points)} run(s)"
                      + (f", search over {loaded.search.field}" if loaded.search else ""),
                      markup=False)
    if failed:
        raise typer.Exit(2)


