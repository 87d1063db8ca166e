"""Client CPU flagging and broker CPU per message, as the ActiveMQ paper and WMB report use."""

import subprocess
import sys

import pytest


@pytest.fixture
def busy_process():
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield proc
    proc.kill()
    proc.wait()


def test_broker_cpu_and_cpu_ms_per_message(harness, busy_process):
    result = harness("run", "-m", "loopback.Sender", "-rt", "1000", "-d", "Q", "-rl", "3",
                     "-ss", "1", "-g", "-m loopback.Receiver -d Q",
                     "--broker-pid", str(busy_process.pid))
    assert result.code == 0, result.stderr
    broker = result.summary["broker_cpu"]
    # A spinning process uses about one core.
    assert 60 <= broker["mean"] <= 110
    # CPU ms per message the broker received = (CPUs * 1000 * %CPU of the machine / 100) /
    # rate; the sender sent it 1000 msg/s here.
    assert broker["cpu_ms_per_received_msg"] == pytest.approx(broker["mean"] * 10 / 1000,
                                                              rel=0.01)
    assert "broker=" in result.stdout
    assert f"broker CPU ms per message received {broker['cpu_ms_per_received_msg']:.4f}" in \
        result.stdout


def test_a_saturated_client_is_flagged_as_the_possible_bottleneck(harness):
    result = harness("run", "-m", "loopback.Sender", "-nt", "2", "-d", "Q", "-rl", "2",
                     "-ss", "1", "-g", "-m loopback.Receiver -d Q")
    assert result.code == 0, result.stderr
    cpu = result.summary["client_cpu"]
    assert cpu["max"] > 75 and cpu["bottleneck"] is True
    assert "client may be the bottleneck" in result.stdout


def test_a_light_client_is_not_flagged(harness):
    result = harness("run", "-m", "loopback.Sender", "-rt", "100", "-d", "Q", "-rl", "2",
                     "-ss", "1", "-g", "-m loopback.Receiver -d Q")
    assert result.code == 0, result.stderr
    assert result.summary["client_cpu"]["bottleneck"] is False
    assert "bottleneck" not in result.stdout
