"""Coverage-guided fuzzing of the harness's byte-level readers with atheris (libFuzzer for
Python): a profile, an OpenMessaging Benchmark workload, a size list and a run's
intervals.jsonl, each read as the harness reads a file a user hands it. An input must be
accepted or refused as `harness` says it to a user (an error main() turns into lines of
its own and exit code 2, harness.cli.app.refusal; a size list, the value of --sizes, may
also raise the ValueError its flag names itself in); any other exception, which would
reach the user as a traceback, is a crash: libFuzzer stops and writes the input to
tests/fuzz_cases/<target>-crash-<sha1>, which tests/test_fuzz.py replays from then on.

    python contrib/bench/fuzz.py profile --seconds 600     # ten minutes on one target
    python contrib/bench/fuzz.py all --seconds 2            # every target, briefly

Each target's corpus starts from the project's own files (profiles/, tests/profiles/) and is
kept, minimised, in tests/fuzz_cases/corpus/<target>/, so that the next run starts where
this one ended. What it prints last: executions, coverage (libFuzzer's "cov" and "ft"), and
crashes found."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "fuzz_cases"
TARGETS = ("profile", "omb", "sizes", "intervals")
INSIDE = "HARNESS_FUZZ_TARGET"  # set in the fuzzing process: the target it fuzzes
SELF = "HARNESS_FUZZ_SELF"  # and the command that runs it again
SEEDS = {"profile": [ROOT / "profiles", ROOT / "tests" / "profiles"],
         "omb": [ROOT / "profiles" / "omb"], "sizes": [], "intervals": []}


def run_target(target: str) -> None:
    """Inside the fuzzing process: instrument the harness and fuzz one reader."""
    import atheris

    # Only the target's reader and what it imports: instrumenting the whole harness costs
    # every fuzzing process (and each of libFuzzer's merge passes) its start-up.
    with atheris.instrument_imports():
        from harness.cli.app import REFUSALS, refusal
        if target in ("profile", "omb"):
            from harness.experiments import profile
        elif target == "sizes":
            from harness.plan.sizes import parse_sizes
        else:
            from harness.rundir import reader

    refused: tuple[type[Exception], ...] = (*REFUSALS, ValueError) if target == "sizes" \
        else REFUSALS
    scratch = Path(tempfile.mkdtemp(prefix="harness-fuzz-"))
    file = scratch / {"profile": "p.yaml", "omb": "w.yaml", "sizes": "sizes.txt",
                      "intervals": "intervals.jsonl"}[target]

    def one(data: bytes) -> None:
        file.write_bytes(data)
        try:
            if target == "profile":
                profile.load(file)
            elif target == "omb":
                # As `harness run --omb FILE -m kafka` reads it (harness.cli.run).
                profile.load_data(file, "", {"connections": {"broker": {"transport": "kafka"}},
                                             "omb": str(file), "run": {}}, {})
            elif target == "sizes":
                parse_sizes(f"@{file}")
            else:
                list(reader.Records(file))
        except refused as exc:
            if not isinstance(exc, ValueError) and refusal(exc)[1] != 2:
                raise  # one line, but as a run that could not start: not bad input

    # libFuzzer runs its argv[0] again for a merge's inner passes: the wrapper, not this
    # file (not executable), with what followed it.
    atheris.Setup([os.environ.get(SELF, sys.argv[0]), *sys.argv[1:]], one)
    atheris.Fuzz()


def fuzz(target: str, seconds: int, cases: Path) -> int:
    """Fuzz one target for `seconds` in a process of its own; returns crashes found."""
    corpus = cases / "corpus" / target
    corpus.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"harness-fuzz-{target}-"))
    for seed_dir in SEEDS[target]:
        for seed in sorted(seed_dir.glob("*.y*ml")) if seed_dir.is_dir() else ():
            shutil.copy(seed, work / seed.name)
    for kept in corpus.iterdir():
        shutil.copy(kept, work / kept.name)
    before = {p.name for p in cases.glob(f"{target}-crash-*")}
    wrapper = work.parent / f"{work.name}-self"
    wrapper.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{__file__}' \"$@\"\n")
    wrapper.chmod(0o755)
    inside = {**os.environ, "PYTHONPATH": str(ROOT), INSIDE: target, SELF: str(wrapper)}
    command = [str(wrapper), str(work),
               f"-max_total_time={seconds}", f"-artifact_prefix={cases}/{target}-",
               "-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1"]
    print(f"fuzz {target}: {seconds} s from {len(list(work.iterdir()))} inputs", flush=True)
    done = subprocess.run(command, capture_output=True, text=True, cwd=work, env=inside)
    lines = done.stderr.splitlines()
    # libFuzzer's last progress line (executions, coverage: cov edges, ft features, corpus)
    # and its final statistics.
    progress = [line for line in lines if line.startswith("#") and "cov:" in line]
    stats = [line for line in lines if line.startswith(("stat::number_of_executed_units",
                                                         "stat::average_exec_per_sec"))]
    for line in progress[-1:] + stats:
        print(f"  {line}")
    # The corpus minimised into the kept folder: what adds coverage, no more.
    merged = Path(tempfile.mkdtemp(prefix=f"harness-fuzz-{target}-merged-"))
    subprocess.run([str(wrapper), str(merged), str(work), "-merge=1"],
                   capture_output=True, cwd=work, env=inside)
    if any(merged.iterdir()):
        shutil.rmtree(corpus)
        shutil.copytree(merged, corpus)
    shutil.rmtree(work, ignore_errors=True)
    wrapper.unlink()
    shutil.rmtree(merged, ignore_errors=True)
    crashes = sorted({p.name for p in cases.glob(f"{target}-crash-*")} - before)
    for name in crashes:
        print(f"  crash kept: {cases / name}")
    if done.returncode not in (0,) and not crashes:
        print(f"  the fuzzer ended with code {done.returncode}:\n{done.stderr[-2000:]}")
        return 1
    print(f"  {len(crashes)} crash(es); corpus {len(list(corpus.iterdir()))} inputs", flush=True)
    return len(crashes)


def main() -> int:
    if os.environ.get(INSIDE):  # the fuzzing process (and libFuzzer's own children)
        run_target(os.environ[INSIDE])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", choices=(*TARGETS, "all"))
    parser.add_argument("--seconds", type=int, default=60, help="per target (default 60)")
    parser.add_argument("--cases", type=Path, default=CASES,
                        help="where crashes and the corpus are kept (default tests/fuzz_cases)")
    args = parser.parse_args()
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("fuzz: needs atheris (pip install atheris)", file=sys.stderr)
        return 2
    targets = TARGETS if args.target == "all" else (args.target,)
    return 1 if sum(fuzz(target, args.seconds, args.cases) for target in targets) else 0


if __name__ == "__main__":
    sys.exit(main())
