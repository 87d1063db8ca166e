"""The `harness` command line: one module per command, registered on one application."""

from harness.cli import analyze, merge, modules, profiles, run, view  # noqa: F401 - registers
from harness.cli.app import app, main

__all__ = ["app", "main"]
