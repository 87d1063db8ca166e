"""A broker killed mid-run (SIGKILL) and started again: the run ends normally, every producer
sends again after the restart, the outage is counted, and on a durable path nothing kept is
missing (sends whose outcome the crash hid are counted in doubt, apart). Each case runs its
own server on a port of its own, never the shared ones."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    env,
    free_port,
    harness_command,
    only_run_dir,
    read_jsonl,
    wait_for_port,
)

RUN_S, KILL_AT_S, DOWN_S = 14, 5, 2


def redis_server(port: int, data: Path) -> subprocess.Popen[bytes]:
    """A private redis-server keeping every write on disk before it answers (AOF, fsync
    always): what it acknowledged survives SIGKILL."""
    data.mkdir(exist_ok=True)
    return subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                             "--dir", str(data)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def through_a_crash(tmp_path: Path, start: Callable[[], subprocess.Popen[bytes]], port: int,
                    *args: str) -> tuple[str, dict[str, Any], Path]:
    """A harness run with the server SIGKILLed KILL_AT_S seconds in and started again
    DOWN_S later: (stdout, summary, run directory), the run ended with exit code 0."""
    server = start()
    wait_for_port(port)
    out = tmp_path / "runs"
    proc = subprocess.Popen(harness_command("run", *args, "-rl", str(RUN_S), "-ss", "1",
                                            "-o", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(), cwd=tmp_path)
    try:
        time.sleep(KILL_AT_S)
        server.send_signal(signal.SIGKILL)
        server.wait()
        time.sleep(DOWN_S)
        server = start()
        wait_for_port(port)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
        server.kill()
        server.wait()
    assert proc.returncode == 0, stderr
    run_dir = only_run_dir(out)
    assert run_dir is not None
    return stdout, json.loads((run_dir / "summary.json").read_text()), run_dir


def sent_after_restart(run_dir: Path, group: str) -> int:
    """What the group sent in the intervals after the restart (the last third)."""
    return sum(r["sent"] for r in read_jsonl(run_dir / "intervals.jsonl")
               if r["type"] == "counters" and r["group"] == group and r["phase"] == "measure"
               and r["interval"] >= KILL_AT_S + DOWN_S + 2)


@pytest.mark.parametrize("role", ["Publisher", "Sender"])
def test_a_paced_redis_producer_rides_out_a_crash_of_its_server(tmp_path: Path, role: str,
                                                                 brokers: Any) -> None:
    # brokers: the broker script installs redis-server where it is missing.
    port = free_port()
    stdout, summary, run_dir = through_a_crash(
        tmp_path, lambda: redis_server(port, tmp_path / "data"), port,
        "-m", f"redis.{role}", "-d", "crash", "-rt", "500", "--port", str(port),
        *(["-g", f"-m redis.Receiver -d crash --port {port}"] if role == "Sender" else []))
    producer = summary["groups"][role.lower()]
    assert producer["reconnects"] >= 1 and producer["outage_ms"] >= 1000
    assert sent_after_restart(run_dir, role.lower()) > 500
    assert producer["errors"] >= 1
    assert "reconnects=" in stdout and f"outage {role.lower()}" in stdout
    if role == "Sender":
        # A stream on disk: every send the server acknowledged is read; those the crash
        # cut off unanswered are in doubt, neither lost nor missing; a send counted twice
        # (failed, and refused too) would leave more received than kept: unexpected.
        receiver = summary["groups"]["receiver"]
        assert receiver["lost"] == 0
        (delivery,) = summary["delivery"]
        assert delivery["missing"] == 0 and delivery["unexpected"] == 0
        assert delivery["in_doubt"] == producer["in_doubt"]
        assert producer["sent"] - producer["in_doubt"] <= receiver["received"] <= \
            producer["sent"]
