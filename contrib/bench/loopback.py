#!/usr/bin/env python3
"""Loopback throughput: the harness against a bare loop doing the same hand-off, and
1 against 2 processes, side by side in one run. Prints figures; asserts nothing.

    .venv/bin/python contrib/bench/loopback.py [--messages 1000000] [--repeat 3]

Every figure is end to end: N messages from one unthrottled sender thread to one receiver
thread (per process), timed from the start to the last receipt. The harness side records
latency and service time for every message, checks sequence numbers and paces nothing.
The harness's own cost per message is its time per message minus the bare loop's. Client CPU
per message is the process's CPU time (every thread) per message sent and received: for the
bare loop over the whole loop, for the harness over its measured span, as a run reports it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness.modules.interface.base import connect
from harness.modules.interface.message import Destination, Message
from harness.modules.loopback import LoopbackTransport, reset_broker

from harness.plan.group import group_spec

ROOT = Path(__file__).resolve().parents[2]

INTERVAL = 0.1


def bare_pair() -> tuple[LoopbackTransport, LoopbackTransport, Destination]:
    """A sender and a receiver subscribed to a queue on a fresh loopback broker."""
    reset_broker()
    destination = Destination("queue", "bench")
    settings = group_spec({"module": "loopback.Sender"}).settings("bench", 0, 0)
    sender, receiver = LoopbackTransport(settings), LoopbackTransport(settings)
    connect(sender)
    connect(receiver)
    receiver.subscribe(destination)
    return sender, receiver, destination


def bare(n: int) -> tuple[float, float]:
    """(seconds, CPU seconds) for n messages through the loopback broker with no
    measurement at all."""
    sender, receiver, destination = bare_pair()
    body = bytes(256)
    finished: list[float] = []

    def receive() -> None:
        count = 0
        while count < n:
            if receiver.receive(0.05) is not None:
                count += 1
        finished.append(time.perf_counter())

    thread = threading.Thread(target=receive)
    thread.start()
    cpu = time.process_time()
    start = time.perf_counter()
    send = sender.send
    for seq in range(n):
        send(destination, Message(body, "bench", seq, 0, 0))
    thread.join()
    return finished[0] - start, time.process_time() - cpu


def harness(n: int, processes: int) -> tuple[float, int, float]:
    """(seconds, messages received, client CPU us per message sent and received) for a
    harness run of n messages per process."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "harness", "run", "-m", "loopback.Sender", "-d", "Q",
                   "-mg", str(n), "--processes", str(processes), "-ss", str(INTERVAL),
                   "-o", out, "-g",
                   f"-m loopback.Receiver -d Q -mg {n} --processes {processes}"]
        subprocess.run(command, check=True, capture_output=True, cwd=ROOT)
        (run_dir,) = Path(out).iterdir()
        rows = [json.loads(line) for line in (run_dir / "intervals.jsonl").open()]
        summary = json.loads((run_dir / "summary.json").read_text())
    received = [r for r in rows if r["type"] == "counters" and r["group"] == "receiver"
                and r["received"]]
    last = max(r["interval"] for r in received)
    # Timed to the end of the last interval with a receipt: at most INTERVAL s pessimistic.
    got = sum(r["received"] for r in received)
    groups = summary["groups"]
    # The two groups share each process's CPU by the messages each counted.
    pair_us = sum((g["client_us_per_msg"] or 0) * (g["sent"] or g["received"])
                  for g in groups.values()) / groups["receiver"]["received"]
    return (last + 1) * INTERVAL, got, pair_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="alternating rounds of the three runs; medians are shown")
    args = parser.parse_args()
    n = args.messages
    rounds = []
    for _ in range(args.repeat):
        rounds.append((bare(n), harness(n, 1), harness(n, 2)))
    t_bare = statistics.median(r[0][0] for r in rounds)
    cpu_bare = statistics.median(r[0][1] for r in rounds)
    t_one = statistics.median(r[1][0] / r[1][1] for r in rounds)  # seconds per message
    us_one = statistics.median(r[1][2] for r in rounds)
    rate_two = statistics.median(r[2][1] / r[2][0] for r in rounds)
    rate_bare, rate_one = n / t_bare, 1 / t_one
    print(f"messages per process: {n:,}, 256-byte bodies, one sender and one receiver thread, "
          f"medians of {args.repeat} alternating rounds")
    print(f"bare loop (loopback hand-off only) : {rate_bare:>12,.0f} msg/s  "
          f"{t_bare / n * 1e6:6.2f} us/msg")
    print(f"harness, 1 process                 : {rate_one:>12,.0f} msg/s  "
          f"{t_one * 1e6:6.2f} us/msg")
    print(f"harness, 2 processes               : {rate_two:>12,.0f} msg/s")
    print(f"harness / bare                     : {rate_one / rate_bare:12.2f}")
    print(f"harness cost per message           : {(t_one - t_bare / n) * 1e6:12.2f} us"
          "  (recording, pacing checks, headers, sequence checks)")
    print(f"2 processes / 1 process            : {rate_two / rate_one:12.2f}")
    us_bare = cpu_bare / n * 1e6
    print(f"client CPU per message sent and received: bare {us_bare:.2f} us, harness "
          f"{us_one:.2f} us, harness / bare {us_one / us_bare:.2f}")


if __name__ == "__main__":
    main()
