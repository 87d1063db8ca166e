"""Stopping: the first Ctrl-C is graceful, the second immediate, and SIGKILL leaves files
that parse to the last line."""

import signal
import subprocess
import time

import psutil
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from tests.conftest import env, harness_command, only_run_dir, read_jsonl


def start(tmp_path, processes="1"):
    run = ["run", "-m", "loopback.Sender", "-rt", "2000", "-d", "Q", "-ss", "0.5",
           "--processes", processes, "-g", f"-m loopback.Receiver -d Q --processes {processes}"]
    proc = subprocess.Popen(harness_command(*run, "-o", str(tmp_path / "runs")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(), cwd=tmp_path)
    # Wait until intervals are being written.
    deadline = time.time() + 60
    while time.time() < deadline:
        run_dir = only_run_dir(tmp_path / "runs")
        if run_dir and (run_dir / "intervals.jsonl").exists() and \
                len((run_dir / "intervals.jsonl").read_text().splitlines()) >= 6:
            return proc, run_dir
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no intervals written: {proc.stderr.read()}")


def assert_files_parse(run_dir):
    rows = read_jsonl(run_dir / "intervals.jsonl")
    assert rows, "no interval lines"
    reader = HistogramLogReader(str(run_dir / f"{rows[0]['node']}.hlog"),
                                HdrHistogram(1, 3_600_000_000, 3))
    count = 0
    while reader.get_next_interval_histogram() is not None:
        count += 1
    # One histogram per tag per interval, every process's merged, as HdrHistogram's tools
    # expect.
    assert count == len({(r["interval"], r["tag"]) for r in rows if r["type"] == "histogram"})
    return rows


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_first_interrupt_stops_gracefully_with_summary(tmp_path, signum):
    proc, run_dir = start(tmp_path)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "Summary" in out
    rows = assert_files_parse(run_dir)
    manifest = (run_dir / "manifest.json").read_text()
    assert '"stopped_by": "interrupt"' in manifest
    summary = (run_dir / "summary.json").read_text()
    assert '"receiver"' in summary
    # Producers stopped, consumers drained: everything sent was received.
    sent = sum(r["sent"] for r in rows if r["type"] == "counters" and r["group"] == "sender")
    received = sum(r["received"] for r in rows
                   if r["type"] == "counters" and r["group"] == "receiver")
    assert sent == received > 0
    assert any(r["phase"] == "drain" for r in rows)


def test_second_interrupt_stops_at_once_and_files_still_parse(tmp_path):
    proc, run_dir = start(tmp_path, "2")
    children = psutil.Process(proc.pid).children()
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert_files_parse(run_dir)
    psutil.wait_procs(children, timeout=10)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("processes", ["1", "2"])
def test_sigkill_leaves_complete_parseable_files(tmp_path, processes):
    proc, run_dir = start(tmp_path, processes)
    children = psutil.Process(proc.pid).children()
    time.sleep(1.2)
    proc.kill()
    proc.communicate(timeout=30)
    rows = assert_files_parse(run_dir)
    assert {r["type"] for r in rows} == {"process", "counters", "histogram", "host"}
    # Orphaned worker processes notice that the controller is gone and end.
    _gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive
