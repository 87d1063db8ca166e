"""The `harness` application: its consoles, and main(), which turns every error a user can
cause into one line and an exit code."""

from __future__ import annotations

import os
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
# Where output is not a terminal (pipes, CI, log files) lines must not wrap at 80 columns;
# COLUMNS, where set, says how wide it is read.
console = Console(highlight=False, soft_wrap=not sys.stdout.isatty(),
                  width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200)
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


# What a user can cause: main() says each in its own lines, never with a traceback.
REFUSALS = (BadInput, StartFailure, ProfileError, click_errors.UsageError)


def refusal(exc: BaseException) -> tuple[list[str], int]:
    """The lines main() prints for an error of REFUSALS, and its exit code: 2 for bad input
    (a flag, a file, a profile's every problem in a line of its own), 1 for a run that could
    not start."""
    if isinstance(exc, ProfileError):
        return [f"harness: error: {printable(p.render(exc.file))}" for p in exc.problems], 2
    if isinstance(exc, click_errors.UsageError):
        return [f"harness: error: {printable(exc.format_message())}"], 2
    return [f"harness: error: {printable(str(exc))}"], 1 if isinstance(exc, StartFailure) else 2


def printable(text: str) -> str:
    """The text with what a terminal would not show as itself (a line break or an escape
    in a key the user's file holds) written as Python writes it in a string: one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def main() -> None:
    try:
        result = app(standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(0)
    except REFUSALS as exc:
        lines, code = refusal(exc)
        for line in lines:
            err_console.print(line, markup=False)
        sys.exit(code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        # stdout closed early (`| head`): the run directory is complete; say nothing more.
        sys.stderr.close()
        sys.exit(0)
    sys.exit(result if isinstance(result, int) else 0)
