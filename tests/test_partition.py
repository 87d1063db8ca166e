"""A partition that never heals: a proxy between the harness and the shared broker stops
moving bytes both ways and closes nothing (tests/cutter.py's stall), as a network that drops
packets does. The liveness check each protocol has, on by default (--heartbeat), finds the
dead peer within the run: every group counts the outage, and the run ends by itself."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import env, harness_command, only_run_dir
from tests.cutter import Cutter

# transport: (the shared broker's port, producer, consumer, options of both)
CASES = {
    "mqtt": (1883, "mqtt.Publisher", "mqtt.Subscriber", ["--qos", "1"]),
    "amqp": (5672, "amqp.Sender", "amqp.Receiver", []),
    "nats": (4222, "nats.Publisher", "nats.Subscriber", []),
    "stomp": (61613, "stomp.Sender", "stomp.Receiver", ["--flavour", "activemq"]),
}
RUN_S = 20
STALL_AFTER_S = 4.0


def partitioned_run(transport: str, tmp_path: Path) -> tuple[int, float, dict, str]:
    port, producer, consumer, more = CASES[transport]
    proxy = Cutter(("127.0.0.1", port))
    name = f"partition{transport}{time.time_ns()}"
    both = ["--port", str(proxy.port), *more]
    command = harness_command(
        "run", "-m", producer, "-d", name, *both, "-rt", "100", "-rl", str(RUN_S), "-ss", "1",
        "--no-ui", "-o", str(tmp_path / transport),
        "-g", " ".join(["-m", consumer, "-d", name, *both]))
    stall = threading.Timer(STALL_AFTER_S, proxy.stall)
    began = time.monotonic()
    stall.start()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env(),
                              timeout=RUN_S + 90)
    finally:
        stall.cancel()
        proxy.close()
    took = time.monotonic() - began
    run_dir = only_run_dir(tmp_path / transport)
    assert run_dir is not None, proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    return proc.returncode, took, summary, proc.stderr


@pytest.mark.usefixtures("brokers")
def test_a_partition_that_never_heals_is_an_outage_every_group_counts(tmp_path):
    with ThreadPoolExecutor(len(CASES)) as pool:
        runs = dict(zip(CASES, pool.map(lambda t: partitioned_run(t, tmp_path), CASES),
                        strict=True))
    for transport, (code, took, summary, stderr) in runs.items():
        assert code == 0, (transport, stderr)
        # The run ends within its length, the drain and a few heartbeats, nothing abandoned.
        assert took < RUN_S + 45, (transport, took)
        assert "did not stop" not in stderr, (transport, stderr)
        for name, group in summary["groups"].items():
            # Found down by the liveness check: an outage counted and timed.
            assert group["outage_ms"] > 0, (transport, name, group)
            # Down for most of what followed the partition.
            assert group["outage_ms"] > 1000 * (RUN_S - STALL_AFTER_S - 15), (transport, name)
    # An MQTT QoS 1 publish that never had its PUBACK is in doubt, never quietly sent: what
    # is left sent and not in doubt reached the subscriber, but for the in-flight window.
    publisher, subscriber = runs["mqtt"][2]["groups"].values()
    assert publisher["in_doubt"] > 0
    assert publisher["sent"] - publisher["in_doubt"] <= subscriber["received"] + 20
