#!/usr/bin/env python3
"""Distributed runs: loopback throughput of 1 node against 2 nodes on a local Spark cluster
(each node one executor core), and what streaming every interval to the driver costs, with
and without the live screen, side by side in one run. Prints figures; asserts nothing.

    .venv/bin/python contrib/bench/distributed.py [--seconds 5] [--repeat 2] [--only ROW ...]

Every row is one unthrottled loopback sender and receiver per node (the loopback broker lives
in the node's process), run for --seconds after a one-second warm-up; the rate is what the
senders sent over the measured span, summed over the nodes, as the run's summary gives it.

  one machine      a run as `harness run` makes it without Spark: no stream
  streaming        the same, streaming every interval as a node does (the node's own
                   forward hook, over TCP to a reader in another process)
  1 node           local-cluster[1,1,1024], one node streaming to the driver
  2 nodes          local-cluster[2,1,1024], two nodes, console lines on the driver
  2 nodes, screen  the same under the live screen (Textual, headless) on the driver

The stream's cost is 1 - streaming / one machine: the same process with and without it; since
rates here move by a tenth from run to run, the streaming row also gives the CPU the stream
itself took (the forward hook's thread time) as a share of the process's CPU. The
driver's own CPU (this process: listener, live merge, console or screen; not its JVM) is
given as a share of one core for the cluster rows: on this machine the nodes and the driver
share two cores, so whatever the driver takes the nodes lose, which a real cluster, whose
driver runs elsewhere, does not. Spark's start-up (session and executors) is printed on its
own: it precedes the run and is not in any rate.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.distributed.cluster import ClusterSpec
from harness.distributed.driver import DistributedRun
from harness.distributed.node import Streamed
from harness.distributed.shipping import Shipper
from harness.distributed.wire import Link
from harness.engine.runner import Controller
from harness.plan.group import GroupSpec
from harness.plan.run import RunSpec, validate_run
from harness.rundir.sinks import Closed, Sink
from harness.screen.app import RunApp
from harness.screen.live import LiveFeed


def spec(seconds: float, output: Path) -> RunSpec:
    run = RunSpec(groups=[GroupSpec("loopback.Sender", "Q"), GroupSpec("loopback.Receiver", "Q")],
                  duration=seconds + 1, warmup=1.0, interval=1.0, drain=2.0,
                  output=str(output), name="bench")
    validate_run(run)
    return run


def sent_rate(summary: dict[str, Any]) -> float:
    return float(summary["groups"]["sender"]["rate"])


# Reads and drops what a node would send the driver, in a process of its own.
SINK = ("import socket; s = socket.create_server(('127.0.0.1', 0)); "
        "print(s.getsockname()[1], flush=True); c, _ = s.accept()\n"
        "while c.recv(1 << 16): pass")


class Row:
    rate: float = 0.0
    spark_s: float = 0.0
    driver_cpu: float | None = None  # share of one core
    stream_share: float | None = None  # the forward hook's CPU / the process's
    run_dir: Path | None = None  # a cluster row's run directory


def one_machine(seconds: float, output: Path, stream: bool) -> Row:
    row = Row()
    controller = Controller(spec(seconds, output), lambda view: None, print)
    if not stream:
        row.rate = sent_rate(controller.execute().summary)
        return row
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    assert sink.stdout is not None
    link = Link(socket.create_connection(("127.0.0.1", int(sink.stdout.readline()))))
    # What a node sends: each interval's reports and what its files gained.
    streamed = Streamed(link, "bench", Shipper(controller.run_dir, link.send),
                        controller.request_stop)
    spent = [0.0]

    class Timed(Sink):
        def interval(self, closed: Closed) -> None:
            began = time.thread_time()
            streamed.interval(closed)
            spent[0] += time.thread_time() - began

    controller.sinks.append(Timed())
    cpu = time.process_time()
    try:
        row.rate = sent_rate(controller.execute().summary)
        row.stream_share = spent[0] / (time.process_time() - cpu)
    finally:
        link.close()
        sink.wait(10)
    return row


def on_cluster(seconds: float, output: Path, nodes: int, screen: bool) -> Row:
    row = Row()
    run = spec(seconds, output)
    driver = DistributedRun(run, ClusterSpec(f"local-cluster[{nodes},1,1024]", nodes),
                            lambda view: None, print, say=lambda line: None)
    driver.prepare()
    row.spark_s = driver.spark_seconds
    began, cpu = time.monotonic(), time.process_time()
    if not screen:
        result = driver.measure()
    else:
        feed = LiveFeed(driver)
        feed.start()
        app = RunApp(feed)

        async def show() -> None:
            async with app.run_test(size=(160, 48), headless=True) as pilot:
                while app.return_code is None:
                    await pilot.pause(0.25)

        asyncio.run(show())
        result = feed.outcome()
    row.driver_cpu = (time.process_time() - cpu) / (time.monotonic() - began)
    row.rate = sent_rate(result.summary)
    row.run_dir = result.run_dir
    return row


def run_files(run_dir: Path) -> str:
    """What a distributed run's merge wrote beside its nodes' directories: each file's size,
    and the histograms in merged.hlog."""
    sizes = [f"{path.name} {path.stat().st_size:,} B" for path in sorted(run_dir.iterdir())
             if path.is_file()]
    histograms = sum(1 for line in (run_dir / "merged.hlog").read_text().splitlines()
                     if line.startswith("Tag="))
    return ", ".join(sizes) + f"; merged.hlog holds {histograms:,} histograms"


ROWS = (("one machine", lambda s, o: one_machine(s, o, False)),
        ("streaming", lambda s, o: one_machine(s, o, True)),
        ("1 node", lambda s, o: on_cluster(s, o, 1, False)),
        ("2 nodes", lambda s, o: on_cluster(s, o, 2, False)),
        ("2 nodes, screen", lambda s, o: on_cluster(s, o, 2, True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of all rows, interleaved")
    parser.add_argument("--only", action="append", default=[], help="a row to run "
                        "(repeatable; default: all): a quick look, or the suite's tiny run")
    args = parser.parse_args()
    names = [name for name, _ in ROWS]
    chosen = args.only or names
    if unknown := [n for n in chosen if n not in names]:
        parser.error(f"--only: {', '.join(unknown)} not among the rows {', '.join(names)}")
    rows = [(name, make) for name, make in ROWS if name in chosen]
    output = Path(tempfile.mkdtemp(prefix="harness-bench-"))
    rates: dict[str, list[float]] = {name: [] for name, _ in rows}
    driver_cpu: dict[str, list[float]] = {name: [] for name, _ in rows}
    shares: list[float] = []
    starts: list[float] = []
    last_run = output
    for round_ in range(args.repeat):
        for name, make in rows:
            began = time.monotonic()
            row = make(args.seconds, output)
            rates[name].append(row.rate)
            if row.spark_s:
                starts.append(row.spark_s)
            if row.stream_share is not None:
                shares.append(row.stream_share)
            if row.driver_cpu is not None:
                driver_cpu[name].append(row.driver_cpu)
            if name == "2 nodes" and row.run_dir is not None:
                last_run = row.run_dir
            print(f"round {round_ + 1} {name:<16} {row.rate:>12,.0f} msg/s  "
                  f"({time.monotonic() - began:.0f} s)", flush=True)
    median = {name: statistics.median(values) for name, values in rates.items()}
    print()
    print(f"{'row':<18}{'sent msg/s (median)':>22}{'driver CPU':>12}   each round")
    for name, values in rates.items():
        cpu = f"{100 * statistics.median(driver_cpu[name]):.0f}%" if driver_cpu[name] else "-"
        print(f"{name:<18}{median[name]:>22,.0f}{cpu:>12}   " +
              ", ".join(f"{v:,.0f}" for v in values))
    print()
    if {"2 nodes", "1 node"} <= median.keys():
        print(f"2 nodes / 1 node: {median['2 nodes'] / median['1 node']:.2f}x")
    if {"streaming", "one machine"} <= median.keys():
        print(f"stream cost (1 - streaming / one machine): "
              f"{100 * (1 - median['streaming'] / median['one machine']):+.1f}%; the stream's "
              f"own CPU: {100 * statistics.median(shares):.3f}% of the process's")
    if {"2 nodes, screen", "2 nodes"} <= median.keys():
        print(f"2 nodes, screen / console: {median['2 nodes, screen'] / median['2 nodes']:.3f}")
    if starts:
        print(f"Spark start-up (session and executors): median {statistics.median(starts):.1f} "
              f"s, range {min(starts):.1f}-{max(starts):.1f} s")
    if "2 nodes" in median:
        print(f"the last 2-node run's merged files: {run_files(last_run)}")


if __name__ == "__main__":
    main()
