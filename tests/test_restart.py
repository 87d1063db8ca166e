"""A broker restarted during a run: workers reconnect and resubscribe, the outage is counted,
persistent messages on an ActiveMQ queue are not lost, and an MQTT producer that drives its
client's network loop itself reconnects as well; a server that is down at the start is one
line and exit code 1."""

import json
import subprocess
import sys
import time

import pytest

from harness.stats.histogram import decode
from tests.conftest import (
    ROOT,
    env,
    free_port,
    harness_command,
    only_run_dir,
    read_jsonl,
    unique,
    wait_for_port,
)


def run_through_restart(tmp_path, broker: str, after_s: float, *args: str):
    """A harness run with `broker` restarted `after_s` seconds in: (stdout, stderr, run
    directory) once it has ended by itself, successfully."""
    out = tmp_path / "runs"
    proc = subprocess.Popen(harness_command("run", *args, "-o", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                            cwd=tmp_path)
    time.sleep(after_s)
    subprocess.run(["bash", str(ROOT / "contrib" / "brokers" / "brokers.sh"), "restart",
                    broker], check=True, timeout=180)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr
    return stdout, stderr, only_run_dir(out)


def test_activemq_restart_mid_run_loses_no_persistent_message(tmp_path, brokers):
    d = unique("restart")
    amq = ["--port", "61613", "--flavour", "activemq"]
    stdout, stderr, run_dir = run_through_restart(
        tmp_path, "activemq", 8, "-m", "stomp.Sender", "-d", d, "-pp", "-rt", "100", "-rl",
        "25", "-ss", "1", "--drain", "20", *amq, "-g",
        f"-m stomp.Receiver -d {d} --ack client-individual {' '.join(amq)}")
    summary = json.loads((run_dir / "summary.json").read_text())
    sender, receiver = summary["groups"]["sender"], summary["groups"]["receiver"]
    # The outage happened and is counted on both sides.
    for group in (sender, receiver):
        assert group["reconnects"] >= 1
        assert group["outage_ms"] > 1000
    assert sender["errors"] > 0
    # A receive that found the connection down is one error per outage, not one per poll.
    assert 1 <= receiver["errors"] <= receiver["reconnects"] + 1
    # Every message the broker confirmed was delivered: nothing lost.
    assert receiver["lost"] == 0
    (delivery,) = summary["delivery"]
    assert delivery["missing"] == 0
    # A send whose receipt the restart cut off counts as an error though the broker may have
    # stored it: such a message arrives beyond what was counted sent, never more of them than
    # the failed sends.
    unique_received = receiver["received"] - receiver["duplicated"]
    assert sender["sent"] <= unique_received <= sender["sent"] + sender["errors"]
    assert sender["sent"] > 1000
    assert "reconnects=" in stdout and "outage sender" in stdout
    # The sends that failed are in the delay histogram too (at least until they failed), and
    # the first failure of each interval is logged with its reason.
    delay = decode(sender["histograms"]["delay"])
    assert delay.get_total_count() > sender["sent"]
    assert delay.get_max_value() > 1_000_000
    assert "sender: send error:" in stdout + stderr


def test_a_mosquitto_restart_mid_run_is_survived_and_counted(tmp_path, brokers):
    d = unique("restart")
    mosquitto = brokers["mosquitto"]["mqtt"]
    stdout, _, run_dir = run_through_restart(
        tmp_path, "mosquitto", 5, "-m", "mqtt.Publisher", "-d", d, "-rt", "200", "-rl", "12",
        "-ss", "1", "--qos", "1", *mosquitto, "-g",
        f"-m mqtt.Subscriber -d {d} --qos 1 {' '.join(mosquitto)}")
    summary = json.loads((run_dir / "summary.json").read_text())
    for name in ("publisher", "subscriber"):
        assert summary["groups"][name]["reconnects"] >= 1, name
        assert summary["groups"][name]["outage_ms"] > 0, name
    # Both went on after the restart: the last measured second has messages both ways.
    last = max(r["interval"] for r in read_jsonl(run_dir / "intervals.jsonl")
               if r["type"] == "counters" and r["phase"] == "measure")
    final = {r["group"]: r for r in read_jsonl(run_dir / "intervals.jsonl")
             if r["type"] == "counters" and r["interval"] == last}
    assert final["publisher"]["sent"] > 150 and final["subscriber"]["received"] > 150
    assert "outage publisher" in stdout


def test_rabbitmq_restart_mid_run_loses_no_confirmed_persistent_message(tmp_path, brokers):
    d = unique("restart.amqp")
    stdout, _, run_dir = run_through_restart(
        tmp_path, "rabbitmq", 5, "-m", "amqp.Sender", "-d", d, "-pp", "--confirm", "20",
        "-rt", "200", "-rl", "16", "-ss", "1", "--drain", "15", "-g",
        f"-m amqp.Receiver -d {d} --ack client-individual --prefetch 50")
    summary = json.loads((run_dir / "summary.json").read_text())
    sender, receiver = summary["groups"]["sender"], summary["groups"]["receiver"]
    # Both reconnected (and the receiver resubscribed): the outage is counted on both sides.
    for group in (sender, receiver):
        assert group["reconnects"] >= 1
        assert group["outage_ms"] > 500
    assert receiver["errors"] <= receiver["reconnects"] + 1
    assert receiver["lost"] == 0
    (delivery,) = summary["delivery"]
    assert delivery["missing"] == 0
    # Every confirmed message arrived; a send the restart left unconfirmed is in doubt: it
    # may have arrived too. Redelivered messages are duplicates, not new ones.
    unique_received = receiver["received"] - receiver["duplicated"]
    kept = sender["sent"] - sender["refused"]
    assert kept - sender["in_doubt"] <= unique_received <= kept
    assert delivery["in_doubt"] == sender["in_doubt"]
    assert sender["sent"] > 1500
    # A message seen twice came again from the broker, which marks it so.
    assert receiver["redelivered"] >= receiver["duplicated"]
    assert "reconnects=" in stdout


@pytest.mark.parametrize("module", ["mqtt.Publisher", "amqp.Sender", "amqp10.Sender",
                                    "nats.Publisher", "redis.Publisher", "http.Requestor"])
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
    # Python's own HTTP server, HTTP/1.0 (a connection a request), stopped a second into the
    # run: every request after it is refused, which urllib3 2 derives from its connect
    # timeout, and a server that is down must not read as one that is slow.
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
            "GET", "-rt", "20", "-rl", "3", "-ss", "1", "-o", str(out)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
        time.sleep(2)
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
