#!/usr/bin/env python3
"""The merge's speed and memory at the sizes users merge.

    .venv/bin/python contrib/bench/merge.py [--shape NODESxINTERVALS ...] [--master local[2]]

For each shape, writes NODES run directories of one run with the harness's own run writer
(harness.rundir.writer.RunWriter, as a run writes them: process, counters and histogram
records, each interval closed by its host record), INTERVALS intervals of 1 s each, the first
tenth a warm-up, for six groups (three paced senders and their receivers: 12 histogram tags);
then merges them with `harness merge`'s code on an embedded Spark and prints the wall time,
histogram rows merged a second, and the peak resident memory of the driver (the Python
process that gathers the results), of Spark's JVM (the driver's, and in local mode the
executors' too), of the Python workers, and of the whole process tree.

The default shapes are the issue's: 20 x 900, 20 x 1,800 and 20 x 3,600 (twice the rows
should take at most 2.1 times as long) and 100 x 720. Targets on the project's 2-core machine:
at least 20,000 rows a second at 20 x 3,600 x 12, the driver under 2 GB, the tree under 6 GB.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psutil

from harness.merge.spark import merge, session
from harness.plan.group import GroupSpec, metrics_for
from harness.plan.run import RunSpec
from harness.rundir.writer import RunWriter, write_json_atomic
from harness.stats.histogram import encode, new_histogram
from harness.stats.recorder import COUNTERS
from harness.stats.records import SCHEMA_VERSION
from harness.stats.reports import GroupPart, IntervalReport

POOL = 32  # distinct histograms per tag, drawn at random: writing stays fast
START = 1_800_000_000.0


def run_spec(intervals: int) -> RunSpec:
    groups = []
    for n in range(1, 4):
        groups.append(GroupSpec("loopback.Sender", f"Q{n}", name=f"sender{n}",
                                thread_rate=200.0))
        groups.append(GroupSpec("loopback.Receiver", f"Q{n}", name=f"receiver{n}"))
    return RunSpec(groups=groups, interval=1.0, duration=float(intervals),
                   warmup=float(intervals // 10), run_id="bench")


def generate(root: Path, nodes: int, intervals: int) -> int:
    """The nodes' run directories; returns the histogram rows written."""
    run = run_spec(intervals)
    rng = random.Random(1)
    names = [g.name for g in run.groups]
    metrics = [metrics_for(g) for g in run.groups]
    pool: dict[tuple[int, str], list[tuple[str, object]]] = {}
    for g, group_metrics in enumerate(metrics):
        for m, metric in enumerate(group_metrics):
            entries = []
            for _ in range(POOL):
                histogram = new_histogram()
                for _ in range(200):
                    histogram.record_value(int(rng.lognormvariate(5 + g / 3 + m, 1)) + 1)
                entries.append((encode(histogram), histogram))
            pool[g, metric] = entries
    rows = 0
    for n in range(nodes):
        node = f"node{n:03d}"
        run_dir = root / node
        run_dir.mkdir(parents=True)
        manifest = {"schema": SCHEMA_VERSION, "run_id": "bench", "name": "bench", "node": node,
                    "options": run.to_dict(), "start": START, "end": START + intervals,
                    "warmup_end": START + run.warmup, "status": "complete",
                    "clock": {"offset_estimate_s": 0.0}, "host": {"hostname": node, "cpus": 2}}
        write_json_atomic(run_dir / "manifest.json", manifest)
        writer = RunWriter(run_dir, "bench", node, START)
        for i in range(intervals):
            phase = "warmup" if i < run.warmup else "measure"
            start = START + i
            report = IntervalReport(0, 4242, i, round(start * 1e9), 1.0, False, 30.0, phase,
                                    node)
            for g, group_metrics in enumerate(metrics):
                chosen = {m: rng.choice(pool[g, m]) for m in group_metrics}
                counters = dict.fromkeys(COUNTERS, 0)
                counters["sent" if g % 2 == 0 else "received"] = 200
                part = GroupPart(counters, {m: c[0] for m, c in chosen.items()}, 0, 1, 1,
                                 1 if g % 2 == 0 else 0)
                part.remember({m: c[1] for m, c in chosen.items()})
                report.groups[g] = part
                rows += len(group_metrics)
            writer.write_report(report, names, start, phase)
            writer.close_interval(i, start, phase, 25.0, None, [])
        writer.close()
    return rows


class PeakMemory(threading.Thread):
    """Peak resident memory, sampled every 0.2 s: of this process (the driver), of the JVM
    (its child), of the Python workers (the JVM's children), and of all of them at once."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks = {"driver": 0, "jvm": 0, "workers": 0, "tree": 0}
        self.stopped = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self.stopped.wait(0.2):
            now = {"driver": 0, "jvm": 0, "workers": 0}
            for p in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    rss = p.memory_info().rss
                    kind = "driver" if p.pid == me.pid else \
                        "jvm" if "java" in p.name() else "workers"
                    now[kind] += rss
            for kind, value in now.items():
                self.peaks[kind] = max(self.peaks[kind], value)
            self.peaks["tree"] = max(self.peaks["tree"], sum(now.values()))


def shape(text: str) -> tuple[int, int]:
    nodes, _, intervals = text.partition("x")
    return int(nodes), int(intervals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", type=shape, action="append",
                        help="NODESxINTERVALS (repeatable; default: 20x900 20x1800 20x3600 "
                        "100x720)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", help="generate into this directory and keep it (a shape "
                        "already there is not written again)")
    args = parser.parse_args()
    shapes = args.shape or [(20, 900), (20, 1800), (20, 3600), (100, 720)]
    base = Path(args.keep or tempfile.mkdtemp(prefix="harness-merge-bench-"))
    spark = session(args.master)
    lines = []
    try:
        for nodes, intervals in shapes:
            root = base / f"{nodes}x{intervals}"
            if not (root / "node000").exists():
                started = time.monotonic()
                generate(root, nodes, intervals)
                size = sum(f.stat().st_size for f in root.rglob("*")) / 1e6
                print(f"generated {nodes} nodes x {intervals} intervals ({size:,.0f} MB) in "
                      f"{time.monotonic() - started:.0f} s", flush=True)
            rows = nodes * intervals * 12
            memory = PeakMemory()
            memory.start()
            started = time.monotonic()
            out = base / f"out-{nodes}x{intervals}"
            merged = merge(spark, [str(d) for d in sorted(root.glob("node*"))], str(out),
                           say=lambda line: None)
            seconds = time.monotonic() - started
            memory.stopped.set()
            memory.join()
            sent = merged.summary["runs"]["bench"]["groups"]["sender1"]["sent"]
            assert sent == nodes * (intervals - intervals // 10) * 200, sent
            mib = {k: v / 2**20 for k, v in memory.peaks.items()}
            line = (f"{nodes} nodes x {intervals} intervals x 12 tags = {rows:,} rows: "
                    f"{seconds:.1f} s, {rows / seconds:,.0f} rows/s on {args.master}; peak "
                    f"MiB driver {mib['driver']:,.0f}, JVM {mib['jvm']:,.0f}, Python workers "
                    f"{mib['workers']:,.0f}, tree {mib['tree']:,.0f}")
            print(line, flush=True)
            lines.append((rows, seconds, line))
            shutil.rmtree(out, ignore_errors=True)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    runs = sorted((rows, seconds) for rows, seconds, _ in lines)
    for (rows_a, sec_a), (rows_b, sec_b) in itertools.pairwise(runs):
        if rows_b == 2 * rows_a:
            print(f"twice the rows ({rows_a:,} -> {rows_b:,}): {sec_b / sec_a:.2f} times the "
                  "time (linear: at most 2.1)")
    os._exit(0)


if __name__ == "__main__":
    main()
