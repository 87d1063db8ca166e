#!/usr/bin/env python3
"""Throughput with the live screen against throughput without it, in one run.

    .venv/bin/python contrib/bench/ui.py [--seconds 10] [--pairs 3]

Each pair runs the same unthrottled loopback job (a sender and a receiver on one queue) twice,
in alternating order: once with --no-ui, output to a pipe, and once with --ui in a
pseudo-terminal of 160 x 48 that a thread reads and throws away, so that the screen renders
for real with nobody watching. The script prints each run's measured-phase receive rate and
the median ratio with / without, which issue 4 asks to be at least 0.95.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WARMUP = 2.0
COLUMNS, ROWS = 160, 48


def job(seconds: float, out: str, ui: bool) -> list[str]:
    return [sys.executable, "-m", "harness", "run", "-m", "loopback.Sender", "-d", "Q",
            "-sw", str(WARMUP), "-rl", str(WARMUP + seconds), "-ss", "1", "-o", out,
            "--ui" if ui else "--no-ui", "-g", "-m loopback.Receiver -d Q"]


def in_terminal(command: list[str]) -> None:
    """Run command with a pseudo-terminal as stdin, stdout and stderr."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS),
           "LINES": str(ROWS)}
    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
                            env=env, start_new_session=True)
    os.close(slave)

    def drain() -> None:
        while True:
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    code = proc.wait()
    os.close(master)
    if code:
        raise SystemExit(f"the --ui run failed with exit code {code}")


def measure(seconds: float, ui: bool) -> float:
    with tempfile.TemporaryDirectory() as out:
        command = job(seconds, out, ui)
        if ui:
            in_terminal(command)
        else:
            subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
        (run_dir,) = Path(out).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
    return summary["groups"]["receiver"]["rate"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds a run")
    parser.add_argument("--pairs", type=int, default=3, help="alternating pairs of runs")
    args = parser.parse_args()
    with_ui: list[float] = []
    without: list[float] = []
    for pair in range(args.pairs):
        order = (False, True) if pair % 2 == 0 else (True, False)
        for ui in order:
            rate = measure(args.seconds, ui)
            (with_ui if ui else without).append(rate)
            print(f"pair {pair + 1}: {'--ui   ' if ui else '--no-ui'} {rate:>12,.0f} msg/s",
                  flush=True)
    ratio = statistics.median(with_ui) / statistics.median(without)
    print(f"median --no-ui {statistics.median(without):,.0f} msg/s, --ui "
          f"{statistics.median(with_ui):,.0f} msg/s: with / without = {ratio:.3f} "
          f"(target >= 0.95)")


if __name__ == "__main__":
    main()
