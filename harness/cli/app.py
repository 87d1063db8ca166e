"""The `harness` application: its consoles, and main(), which turns every error a user can
cause into one line and an exit code."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

try:  # typer >= 0.26 carries its own copy of click, whose usage errors main() reports
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer on the real click
    import click.exceptions as click_errors  # type: ignore[no-redef]

from harness.errors import BadInput, StartFailure
from harness.experiments.profile import ProfileError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Load generator for message brokers: paced workers, HDR latency, "
                       "interval statistics.")
# Where output is not a terminal (pipes, CI, log files) lines must not wrap at 80 columns.
console = Console(highlight=False, soft_wrap=not sys.stdout.isatty(),
                  width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def one_line_help(typer_app: typer.Typer) -> None:
    """Commands' help from their docstrings, with the docstrings' line breaks taken out, so
    that the help wraps at the terminal's width and never mid-sentence."""
    for command in typer_app.registered_commands:
        text = command.help or (command.callback.__doc__ if command.callback else None)
        if text:
            command.help = " ".join(text.split())
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            one_line_help(group.typer_instance)


def warn(message: str) -> None:
    err_console.print(f"harness: {message}", markup=False, style="yellow")


def on_terminal() -> bool:
    # The screen draws on stderr and reads keys from stdin: all three must be a terminal.
    return all(stream.isatty() for stream in (sys.stdin, sys.stdout, sys.stderr))


def report_profile_error(exc: ProfileError) -> None:
    for problem in exc.problems:
        err_console.print(f"harness: error: {problem.render(exc.file)}", markup=False)


def main() -> None:
    try:
        result = app(standalone_mode=False)
    except BadInput as exc:
        err_console.print(f"harness: error: {exc}", markup=False)
        sys.exit(2)
    except StartFailure as exc:
        err_console.print(f"harness: error: {exc}", markup=False)
        sys.exit(1)
    except ProfileError as exc:
        report_profile_error(exc)
        sys.exit(2)
    except click_errors.NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(0)
    except click_errors.UsageError as exc:
        err_console.print(f"harness: error: {exc.format_message()}", markup=False)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        # stdout closed early (`| head`): the run directory is complete; say nothing more.
        sys.stderr.close()
        sys.exit(0)
    sys.exit(result if isinstance(result, int) else 0)
