"""Errors that end a run before it starts, each naming what is wrong in one line."""

from __future__ import annotations


class BadInput(Exception):
    """Input the user must fix; the CLI prints it on one line and exits 2."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


class StartFailure(Exception):
    """The run could not start (a broker down or refusing); the CLI exits 1."""
