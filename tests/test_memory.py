"""Memory that does not grow with a run's length: a run and its replay, measured from outside
with limits that the harness failed by gigabytes before (every interval's histograms stayed
until the end: 2.2 MB an interval with these six groups)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from tests.conftest import env, harness_command, only_run_dir

# Three paced senders and their receivers: 12 histogram tags an interval.
GROUPS = [arg for n in (1, 2, 3) for arg in (
    "-g", f"-m loopback.Sender -d Q{n} -rt 200 -gn sender{n}",
    "-g", f"-m loopback.Receiver -d Q{n} -gn receiver{n}")]
# Fifty intervals a second: at a hundred, a main process that two cores' other load held
# back fell behind the workers' reports, and held them meanwhile (58 MB more at 2,000
# intervals than at 200, beside the suite's rest; 5 MB on an idle machine).
INTERVAL_S = 0.02
SHORT, LONG = 100, 1000
# The growth allowed from SHORT intervals to LONG (before: about 2 GB).
FLAT_MB = 40


# The live screen's feed following a run (harness view --follow, harness serve's page) to its
# end and on into the replay, as the screen polls it.
FOLLOW = """
import sys, time
from pathlib import Path
from harness.rundir.reader import load
from harness.screen.follow import FollowFeed
run_dir = Path(sys.argv[1])
feed = FollowFeed(run_dir, load(run_dir))
while feed.after is None:
    feed.poll()
    time.sleep(0.005)
print("received", feed.board.groups["receiver1"].total)
"""


def peak_rss(args: list[str], cwd: Path, command: list[str] | None = None
             ) -> tuple[int, subprocess.CompletedProcess[str]]:
    """The command's peak resident memory (its processes together), sampled every 20 ms."""
    proc = subprocess.Popen(command or harness_command(*args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env(), cwd=cwd)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        root = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                total = sum(p.memory_info().rss for p in (root, *root.children(True)))
            except psutil.Error:
                total = 0
            peak = max(peak, total)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate(timeout=300)
    done.set()
    sampler.join()
    return peak, subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_a_run_and_its_replay_hold_the_same_memory_for_100_and_1000_intervals(
        tmp_path: Path) -> None:
    peaks: dict[str, dict[int, int]] = {"run": {}, "view": {}, "follow": {}}
    for intervals in (SHORT, LONG):
        output = tmp_path / str(intervals)
        peak, done = peak_rss(["run", "--no-ui", "-ss", str(INTERVAL_S), "-rl",
                               str(intervals * INTERVAL_S), "-o", str(output), *GROUPS],
                              tmp_path)
        assert done.returncode == 0, done.stderr
        peaks["run"][intervals] = peak
        run_dir = only_run_dir(output)
        assert run_dir is not None
        # Every interval was written (the last one or two may be cut by the stop).
        written = sum(1 for line in (run_dir / "intervals.jsonl").read_text().splitlines()
                      if '"type":"host"' in line)
        assert written >= intervals - 2
        peak, shown = peak_rss(["view", "--no-ui", str(run_dir)], tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert "received" in shown.stdout
        peaks["view"][intervals] = peak
        peak, followed = peak_rss([], tmp_path, [sys.executable, "-c", FOLLOW, str(run_dir)])
        assert followed.returncode == 0 and "received" in followed.stdout, followed.stderr
        peaks["follow"][intervals] = peak
    for what, peak in peaks.items():
        growth_mb = (peak[LONG] - peak[SHORT]) / 2**20
        assert growth_mb < FLAT_MB, (what, peaks)
