#!/usr/bin/env python3
"""What an interval's own work costs a measuring process: a real one-process run (a paced
loopback Sender and a Receiver by default), with the collector's and the controller's
per-interval functions timed in the thread's own CPU time (time.thread_time_ns), so that
what the other threads do meanwhile is not counted. Prints CPU us per call; asserts
nothing.

    taskset -c 1 .venv/bin/python contrib/bench/interval_work.py [--rate 4000] [--seconds 10]

The figures are what each function costs where it runs, once per interval, with the caches
cold: several times what the same call costs repeated in a loop.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import os
import sys
import tempfile
import time
from typing import Any

import harness.engine.cell as cell
import harness.engine.runner as runner
import harness.rundir.sinks as sinks
import harness.rundir.writer as writer
import harness.screen.console as console
import harness.stats.intervals as intervals
from harness.cli import main as harness_main

spent: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()

TIMED = [  # (owner, attribute, what the line says)
    (cell.Cell, "_report", "collector: an interval's report"),
    (cell, "new_histogram", "  a new histogram"),
    (cell, "fold_many", "  folding a metric's values"),
    (cell, "encode", "  encoding a histogram"),
    (cell.Cell, "_cpu_seconds", "  reading the process's CPU time"),
    (cell.Cell, "_take_handoffs", "collector: taking the workers' hand-offs"),
    (runner, "report_records", "controller: a process's records"),
    (runner.Controller, "_emit_complete", "controller: an interval merged, written, shown"),
    (intervals.RunStats, "merge", "  merging"),
    (sinks.RunFiles, "interval", "  closing it (host record, .hlog)"),
    (console, "interval_lines", "  the console lines"),
    (writer.RunWriter, "write_interval", "  writing records (each call)"),
]


def timed(owner: Any, name: str, label: str) -> None:
    function = getattr(owner, name)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time_ns()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] += time.thread_time_ns() - began
            calls[label] += 1

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=4000, help="the Sender's msg/s")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--interval", type=float, default=0.5, help="-ss of the run")
    args = parser.parse_args()
    for owner, name, label in TIMED:
        timed(owner, name, label)
    with tempfile.TemporaryDirectory() as out:
        sys.argv = ["harness", "run", "-m", "loopback.Sender", "-d", "q", "-rt",
                    str(args.rate), "-g", "-m loopback.Receiver -d q", "-ss",
                    str(args.interval), "-rl", str(args.seconds), "-o", out]
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), \
                contextlib.suppress(SystemExit):
            harness_main()
    print(f"{args.rate:,.0f} msg/s loopback Sender and Receiver, one process, -ss "
          f"{args.interval:g}, {args.seconds:g} s: thread CPU us a call")
    for _, _, label in TIMED:
        if calls[label]:
            print(f"{label:<48} {calls[label]:5d} calls {spent[label] / calls[label] / 1000:8.1f}")


if __name__ == "__main__":
    main()
