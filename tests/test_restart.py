"""A server that is down at the start is one line and exit code 1; an HTTP server lost mid-run
is a connect error, not a timeout. (Servers killed or cut off mid-run, on every transport:
tests/test_fault_matrix.py.)"""

import json
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import (
    env,
    free_port,
    harness_command,
    only_run_dir,
    wait_for_port,
    written,
)


@pytest.mark.parametrize("module", ["mqtt.Publisher", "amqp.Sender", "amqp10.Sender",
                                    "nats.Publisher", "redis.Publisher", "http.Requestor",
                                    "kafka.Sender"])
def test_a_server_that_is_down_at_the_start_is_one_line_and_exit_1(harness, module):
    """Not a hang: nats-py, allowed to reconnect for ever as a run needs, would retry its
    first connection for ever too. One retry with its back-off, then one line."""
    started = time.monotonic()
    result = harness("run", "-m", module, "-d", "down", "--port", "1", "-mg", "1",
                     "--connect-retry", "1", timeout=30)
    assert result.code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to 127.0.0.1:1" in lines[0], result.stderr
    assert "refused" in lines[0].lower(), lines[0]
    assert time.monotonic() - started >= 0.5  # the retry's back-off


def test_an_http_server_lost_mid_run_is_a_connect_error_not_a_timeout(tmp_path):
    # Python's own HTTP server, HTTP/1.0 (a connection a request), stopped once the run's
    # intervals show replies (not after a fixed wait: a start slower than it beside load
    # left no reply at all): every request after it is refused, which urllib3 2 derives
    # from its connect timeout, and a server that is down must not read as one that is slow.
    port = free_port()
    (tmp_path / "x").write_text("ok")
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                               "127.0.0.1"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        out = tmp_path / "runs"
        proc = subprocess.Popen(harness_command(
            "run", "-m", "http.Requestor", "-d", f"http://127.0.0.1:{port}/x", "--method",
            "GET", "-rt", "20", "-rl", "4", "-ss", "1", "-o", str(out)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
        written(out, r'"type":"counters".*"phase":"measure".*"received":[1-9]', 30)
    finally:
        server.kill()
        server.wait(10)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    requestor = json.loads((only_run_dir(out) / "summary.json").read_text())["groups"][
        "requestor"]
    assert requestor["received"] > 0 and requestor["errors"] > 0
    assert requestor["timeouts"] == 0
    assert f"connect error: cannot connect to 127.0.0.1:{port}" in stdout + stderr
    assert "no response within" not in stdout + stderr


def test_connect_retry_retries_the_subscription_with_the_connection(tmp_path, brokers):
    """A broker can accept the connection and refuse what is made on it for a while (a
    queue held by an exclusive consumer here; a quorum queue's consume timing out inside
    RabbitMQ under load in CI, 541): --connect-retry retries both, and the run goes on."""
    import pika

    queue = f"retry.{uuid.uuid4().hex[:10]}"
    holder = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    channel = holder.channel()
    channel.queue_declare(queue, durable=True)
    channel.basic_consume(queue, lambda *_: None, exclusive=True)
    out = tmp_path / "runs"
    try:
        proc = subprocess.Popen(harness_command(
            "run", "-m", "amqp.Receiver", "-d", queue, "--connect-retry", "4", "-rl", "2",
            "-ss", "1", "-g", f"-m amqp.Sender -d {queue} -rt 50", "-o", str(out)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
            cwd=tmp_path)
        time.sleep(1.5)  # the receiver's first consume and its first retry are refused
    finally:
        holder.close()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    groups = json.loads((only_run_dir(out) / "summary.json").read_text())["groups"]
    assert groups["receiver"]["received"] >= groups["sender"]["sent"] > 0
