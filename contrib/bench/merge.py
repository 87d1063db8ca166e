#!/usr/bin/env python3
"""The merge's speed on synthetic run directories.

    .venv/bin/python contrib/bench/merge.py [--nodes 20] [--intervals 3600] [--tags 10]

Writes NODES run directories of one run, each INTERVALS intervals of 1 s with TAGS latency
histograms (20 x 3,600 x 10 = 720,000 histogram rows by default, about 0.5 GB), then runs
the merge on an embedded Spark with local[2] and prints its time, the peak memory of the
whole process tree (driver, JVM, Python workers) and histogram rows merged a second.
The target on the project's 2-core machine is at least 10,000 rows a second.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psutil

from harness.merge.spark import merge, session
from harness.rundir.writer import SCHEMA_VERSION, write_json_atomic
from harness.spec.group import GroupSpec
from harness.spec.run import RunSpec
from harness.stats.histogram import encode, new_histogram

POOL = 64  # distinct histograms per tag, drawn at random: writing stays fast


def generate(root: Path, nodes: int, intervals: int, tags: int) -> None:
    rng = random.Random(1)
    groups = [GroupSpec("loopback.Receiver", f"Q{t}", name=f"g{t}") for t in range(tags)]
    pool = []
    for t in range(tags):
        encoded = []
        for _ in range(POOL):
            histogram = new_histogram()
            for _ in range(100):
                histogram.record_value(int(rng.lognormvariate(6 + t / 5, 1)) + 1)
            encoded.append(encode(histogram))
        pool.append(encoded)
    start = 1_800_000_000.0
    for n in range(nodes):
        run_dir = root / f"node{n:02d}"
        run_dir.mkdir(parents=True)
        write_json_atomic(run_dir / "manifest.json", {
            "schema": SCHEMA_VERSION, "run_id": "bench", "node": f"node{n:02d}",
            "options": RunSpec(groups=groups, interval=1.0).to_dict(), "start": start,
            "clock": {"offset_estimate_s": 0.0}, "host": {}})
        with (run_dir / "intervals.jsonl").open("w") as f:
            for i in range(intervals):
                head = (f'"v":{SCHEMA_VERSION},"run":"bench","node":"node{n:02d}",'
                        f'"process":0,"interval":{i},"start":{start + i},"length":1.0,'
                        f'"phase":"measure"')
                f.write(f'{{"type":"process",{head},"pid":1,"cpu":20.0}}\n')
                for t in range(tags):
                    f.write(f'{{"type":"histogram",{head},"group":"g{t}","tag":"g{t}.latency",'
                            f'"count":100,"max":0,"hist":"{rng.choice(pool[t])}"}}\n')


class PeakMemory(threading.Thread):
    """Peak resident memory of this process and all its descendants."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self.stopped.wait(0.2):
            total = 0
            for p in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
            self.peak = max(self.peak, total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--intervals", type=int, default=3600)
    parser.add_argument("--tags", type=int, default=10)
    parser.add_argument("--keep", help="generate into this directory and keep it")
    args = parser.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="harness-merge-bench-"))
    rows = args.nodes * args.intervals * args.tags
    try:
        if not (root / "node00").exists():
            started = time.monotonic()
            generate(root, args.nodes, args.intervals, args.tags)
            size = sum(f.stat().st_size for f in root.rglob("*")) / 1e6
            print(f"generated {rows:,} histogram rows ({args.nodes} nodes x {args.intervals} "
                  f"intervals x {args.tags} tags, {size:,.0f} MB) in "
                  f"{time.monotonic() - started:.0f} s", flush=True)
        spark = session("local[2]")
        memory = PeakMemory()
        memory.start()
        started = time.monotonic()
        merge(spark, [str(d) for d in sorted(root.glob("node*"))], str(root / "out"),
              say=lambda line: print(line, flush=True))
        seconds = time.monotonic() - started
        memory.stopped.set()
        spark.stop()
        print(f"merge on local[2]: {seconds:.1f} s, {rows / seconds:,.0f} histogram rows/s, "
              f"peak memory {memory.peak / 2**20:,.0f} MiB (driver, JVM and Python workers); "
              "target >= 10,000 rows/s")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    os._exit(0)


if __name__ == "__main__":
    main()
