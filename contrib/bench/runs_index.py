#!/usr/bin/env python3
"""`harness runs` over a tree of many runs: how long listing them takes and what memory it
holds, at the size a nightly job reaches. Prints figures; asserts nothing.

    .venv/bin/python contrib/bench/runs_index.py [--runs 10000]

One real loopback run is made, then copied --runs times into a tree of 100 directories, each
copy's manifest and summary with a start of its own (its intervals.jsonl and .hlog copied
too, a whole run directory each, which the index must never read). The listing is timed
cold of Python's caches (a new process: `harness runs -f json`) and in-process (the index
alone), with the peak memory the index's process held.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_tree(root: Path, runs: int) -> Path:
    made = root / "one"
    subprocess.run([sys.executable, "-m", "harness", "run", "-m", "loopback.Sender", "-d", "Q",
                    "-rt", "200", "-rl", "2", "-ss", "1", "--no-ui", "-o", str(made),
                    "-g", "-m loopback.Receiver -d Q"], check=True, capture_output=True)
    (source,) = made.iterdir()
    manifest = json.loads((source / "manifest.json").read_text())
    summary = (source / "summary.json").read_text()
    tree = root / "tree"
    start = time.time() - runs * 60
    for i in range(runs):
        target = tree / f"day{i % 100:03d}" / f"run{i:06d}"
        target.mkdir(parents=True)
        for name in ("intervals.jsonl", *(p.name for p in source.glob("*.hlog"))):
            shutil.copyfile(source / name, target / name)
        manifest["start"] = start + i * 60
        (target / "manifest.json").write_text(json.dumps(manifest))
        (target / "summary.json").write_text(summary)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="run directories in the tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="harness-bench-runs-") as work:
        began = time.monotonic()
        tree = make_tree(Path(work), args.runs)
        print(f"wrote {args.runs:,} run directories in {time.monotonic() - began:.1f} s")
        began = time.monotonic()
        listed = subprocess.run([sys.executable, "-m", "harness", "runs", str(tree), "-f",
                                 "json"], check=True, capture_output=True, text=True)
        cli = time.monotonic() - began
        lines = listed.stdout.count("\n")
        from harness.rundir.index import Filters, index

        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        began = time.monotonic()
        found = index(tree, Filters())
        alone = time.monotonic() - began
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert lines == len(found) == args.runs
    print(f"harness runs -f json: {cli:.2f} s for {lines:,} runs "
          f"({lines / cli:,.0f} runs/s, the command's start-up included)")
    print(f"the index alone: {alone:.2f} s ({len(found) / alone:,.0f} runs/s); this process's "
          f"peak rss {peak / 1024:.0f} MiB ({(peak - before) / 1024:+.0f} MiB while indexing)")


if __name__ == "__main__":
    main()
