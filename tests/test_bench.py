"""Every benchmark of contrib/bench runs to its end at a tiny size: a benchmark that no
longer runs (a schema or an interface changed under it) fails here, not on the day someone
needs its figures. What they print is measured elsewhere (contrib/bench/RESULTS.md); here
each must exit 0 and print the figure its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, env

# script, tiny arguments, a word its output must hold, whether it needs the brokers
RUNS = [
    ("callback.py", ["--transport", "nats", "--messages", "2000"], "ns", True),
    ("clients.py", ["--clients", "50", "--seconds", "1", "--warmup", "1", "--connect-rate",
                    "0"], "harness / bare", True),
    # one Spark run of the three: each starts a cluster (a minute here)
    ("distributed.py", ["--seconds", "1", "--repeat", "1", "--only", "one machine", "--only",
                        "streaming", "--only", "2 nodes"], "msg/s", False),
    ("fuzz.py", ["sizes", "--seconds", "1", "--cases", "{tmp}"], "crash(es)", False),
    ("interval_work.py", ["--rate", "200", "--seconds", "2"], "us", False),
    ("kafka.py", ["--seconds", "1", "--repeat", "1", "--paced-rate", "500", "--fed-rate",
                  "500"], "harness / bare", True),
    ("loop_turn.py", ["--sends", "500"], "us", True),
    ("loopback.py", ["--messages", "20000", "--repeat", "1"], "msg/s", False),
    ("merge.py", ["--shape", "2x20"], "rows/s", False),
    ("message_path.py", ["--messages", "5000"], "ns", False),
    ("metrics.py", ["--seconds", "1", "--pairs", "1"], "with / without", False),
    ("runs_index.py", ["--runs", "200"], "runs/s", False),
    ("transports.py", ["--seconds", "0.5", "--repeat", "1", "--only", "nats.Sender",
                       "--no-unthrottled", "--paced-rate", "200"], "bare", True),
    ("ui.py", ["--seconds", "1", "--pairs", "1"], "with / without", False),
]


@pytest.mark.parametrize(("script", "args", "word", "needs_brokers"), RUNS,
                         ids=[r[0] for r in RUNS])
def test_the_benchmark_runs_at_a_tiny_size(script: str, args: list[str], word: str,
                                           needs_brokers: bool, request: Any,
                                           tmp_path: Path) -> None:
    if needs_brokers:
        request.getfixturevalue("brokers")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    done = subprocess.run([sys.executable, str(ROOT / "contrib" / "bench" / script), *args],
                          capture_output=True, text=True, timeout=600, env=env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert word in done.stdout, done.stdout[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


# What the benchmarks share, not a benchmark of its own.
SHARED = {"bare.py"}


def test_every_benchmark_has_a_tiny_run() -> None:
    scripts = {p.name for p in (ROOT / "contrib" / "bench").glob("*.py")} - SHARED
    assert scripts == {r[0] for r in RUNS}


def test_the_benchmarks_import_one_another_in_one_direction() -> None:
    """A script that imports another (its floor, its loop) is never imported back: what two
    share lives in a file of its own (bare.py)."""
    import ast

    bench = ROOT / "contrib" / "bench"
    stems = {p.stem for p in bench.glob("*.py")}
    graph = {p.stem: {n.module for n in ast.walk(ast.parse(p.read_text()))
                      if isinstance(n, ast.ImportFrom) and n.module in stems}
             for p in bench.glob("*.py")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(t == goal or (t not in seen and reaches(t, goal, seen | {t}))
                   for t in graph[start])

    assert [s for s in sorted(stems) if reaches(s, s, set())] == []
