"""One ledger of sends: each send of the measured span ends in one outcome, and a producer's
rate and count are what the broker took, whenever the word on a send came. Judged by the
broker's own client, connected straight to it, not through the fault."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path

from rich.console import Console

from harness.plan.group import group_spec, metrics_for
from harness.plan.run import RunSpec
from harness.screen.console import print_summary
from harness.stats.histogram import encode, new_histogram
from harness.stats.intervals import RunStats
from harness.stats.recorder import COUNTERS
from harness.stats.reports import GroupPart, IntervalReport
from tests.conftest import env, harness_command
from tests.cutter import Cutter
from tests.test_conditions import summary_of
from tests.test_fault_matrix import wait_running


def test_sends_the_broker_did_not_take_come_off_the_rate_when_the_word_comes_later():
    """100 sends in each of two measured intervals; 10 of the first found in doubt during
    the second, 30 more at the close, in the drain: the span's count is the 160 taken, its
    rate 80 a second, and no interval's line goes below nothing."""
    run = RunSpec(groups=[group_spec({"module": "loopback.Sender", "destination": "Q"})])
    run.groups[0].name = "sender"
    metrics = {0: metrics_for(run.groups[0])}
    stats = RunStats(run, metrics)
    views = []
    for index, phase, counts in ((0, "measure", {"sent": 100}),
                                 (1, "measure", {"sent": 100, "in_doubt": 10, "untaken": 10}),
                                 (2, "drain", {"in_doubt": 30, "untaken": 30})):
        part = GroupPart({**dict.fromkeys(COUNTERS, 0), **counts},
                         {m: encode(new_histogram()) for m in metrics[0]}, 0, 1, 1, 0)
        views.append(stats.merge(index, float(index), [IntervalReport(
            0, 1, index, index * 10**9, 1.0, False, 0.0, phase, groups={0: part})], None))
    summary = stats.summary()
    sender = summary["groups"]["sender"]
    assert (sender["sent"], sender["in_doubt"], sender["untaken"]) == (200, 40, 40)
    assert sender["count"] == sender["taken"] == 160
    assert sender["rate"] == 80.0
    assert summary["throughput"]["received_by_broker"] == 80.0
    # An interval's line counts what was sent in it.
    assert [v.groups["sender"].count for v in views] == [100, 100, 0]
    console = Console(record=True, width=200)
    print_summary(console, summary, "RUN")
    assert "sender: 40 sends of the measured span were refused or in doubt: its rate and " \
           "count are the 160 the broker took" in console.export_text()


def test_a_publisher_whose_connection_goes_silent_counts_only_what_mosquitto_took(
        tmp_path: Path, brokers: object) -> None:
    """mqtt.Publisher --qos 1 at 200 a second to Mosquitto through a proxy that stops moving
    the connection's bytes 3 s in, and never resumes them; a subscriber connected straight to
    Mosquitto counts what it delivered (the harness's own connection may be any of the first
    few the proxy carries: every one is held, and every new one). The sends whose PUBACK
    never came are in doubt, and the producer's count and rate leave them out: confirmed <=
    delivered <= confirmed + in doubt, and every send of the span is confirmed, refused or
    in doubt."""
    import paho.mqtt.client as mqtt

    topic = f"ledger/{uuid.uuid4().hex[:8]}"
    delivered: set[bytes] = set()
    subscribed = threading.Event()
    witness = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    witness.on_connect = lambda c, *_: c.subscribe(topic, qos=1)
    witness.on_subscribe = lambda *_: subscribed.set()
    witness.on_message = lambda _c, _u, m: delivered.add(bytes(m.payload))
    witness.connect("127.0.0.1", 1883)
    witness.loop_start()
    cutter = Cutter(("127.0.0.1", 1883))
    try:
        assert subscribed.wait(10), "the witness's SUBACK never came"
        out = tmp_path / "runs"
        proc = subprocess.Popen(
            harness_command("run", "-m", "mqtt.Publisher", "-d", topic, "--qos", "1",
                            "--port", str(cutter.port), "--heartbeat", "1", "-rt", "200",
                            "-rl", "10", "-sw", "0", "-ss", "1", "--drain", "5", "-o",
                            str(out)),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
            cwd=tmp_path)
        try:
            wait_running(out, proc)
            time.sleep(2)
            for number in range(100):  # the connection, and every one it tries again
                cutter.hold(number)
            stdout, stderr = proc.communicate(timeout=90)
        finally:
            proc.kill()
        assert proc.returncode == 0, stderr
        time.sleep(1)  # the witness's last deliveries
    finally:
        witness.loop_stop()
        witness.disconnect()
        cutter.close()
    publisher = summary_of(out)["groups"]["publisher"]
    taken, doubt = publisher["taken"], publisher["in_doubt"]
    assert doubt > 0, publisher  # the fault hid some outcomes, or the test tests nothing
    assert publisher["outage_ms"] > 0, publisher
    assert publisher["sent"] == taken + publisher["untaken"]
    assert publisher["untaken"] == doubt + publisher["refused"]
    assert taken <= len(delivered) <= taken + doubt, (taken, len(delivered), doubt)
    assert publisher["count"] == taken
    assert abs(publisher["rate"] - taken / summary_of(out)["measured_seconds"]) < 0.01
    assert f"the {taken:,} the broker took" in stdout
