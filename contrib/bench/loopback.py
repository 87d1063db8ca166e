#!/usr/bin/env python3
"""Loopback throughput: the harness against a bare loop doing the same hand-off, and
1 against 2 processes, side by side in one run. Prints figures; asserts nothing.

    .venv/bin/python contrib/bench/loopback.py [--messages 1000000]

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
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness.transports.loopback import LoopbackTransport, reset_broker
from harness.transports.message import Destination, Message

from harness.spec.group import group_spec

ROOT = Path(__file__).resolve().parents[2]

INTERVAL = 0.1


def bare(n: int) -> tuple[float, float]:
    """(seconds, CPU seconds) for n messages through the loopback broker with no
    measurement at all."""
    reset_broker()
    destination = Destination("queue", "bench")
    settings = group_spec({"module": "loopback.Sender"}).settings("bench", 0, 0)
    sender, receiver = LoopbackTransport(settings), LoopbackTransport(settings)
    sender.connect()
    receiver.connect()
    receiver.subscribe(destination)
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
    args = parser.parse_args()
    n = args.messages

    t_bare, cpu_bare = bare(n)
    t_one, got_one, us_one = harness(n, 1)
    t_two, got_two, _ = harness(n, 2)
    rate_bare, rate_one, rate_two = n / t_bare, got_one / t_one, got_two / t_two
    print(f"messages per process: {n:,}, 256-byte bodies, one sender and one receiver thread")
    print(f"bare loop (loopback hand-off only) : {rate_bare:>12,.0f} msg/s  "
          f"{t_bare / n * 1e6:6.2f} us/msg")
    print(f"harness, 1 process                 : {rate_one:>12,.0f} msg/s  "
          f"{t_one / got_one * 1e6:6.2f} us/msg")
    print(f"harness, 2 processes               : {rate_two:>12,.0f} msg/s")
    print(f"harness / bare                     : {rate_one / rate_bare:12.2f}")
    print(f"harness cost per message           : {(t_one / got_one - t_bare / n) * 1e6:12.2f} us"
          "  (recording, pacing checks, headers, sequence checks)")
    print(f"2 processes / 1 process            : {rate_two / rate_one:12.2f}")
    us_bare = cpu_bare / n * 1e6
    print(f"client CPU per message sent and received: bare {us_bare:.2f} us, harness "
          f"{us_one:.2f} us, harness / bare {us_one / us_bare:.2f}")


if __name__ == "__main__":
    main()
