"""The `harness` command line: one module per command, registered on one application."""

from harness.cli import (  # noqa: F401 - registers
    analyze,
    export,
    merge,
    modules,
    package,
    profiles,
    run,
    runs,
    serve,
    view,
)
from harness.cli.app import app, main, one_line_help

one_line_help(app)

__all__ = ["app", "main"]
