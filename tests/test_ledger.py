"""One ledger of sends: each send of the measured span ends in one outcome, and a producer's
rate and count are what the broker took, whenever the word on a send came. Judged by the
broker's own client, connected straight to it, not through the fault."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.plan.group import group_spec, metrics_for
from harness.plan.run import RunSpec
from harness.screen.console import print_summary
from harness.stats.histogram import encode, new_histogram
from harness.stats.intervals import RunStats
from harness.stats.recorder import COUNTERS
from harness.stats.reports import GroupPart, IntervalReport
from tests.conftest import env, harness_command, unique
from tests.cutter import Cutter
from tests.test_conditions import queue_depth, summary_of
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


def planted_summary(spec: dict[str, Any],
                    records: list[tuple[str, dict[str, int]]]) -> dict[str, Any]:
    """The summary of a one-group run whose intervals counted these, one a second."""
    run = RunSpec(groups=[group_spec(spec)])
    run.groups[0].name = "sender"
    metrics = {0: metrics_for(run.groups[0])}
    stats = RunStats(run, metrics)
    for index, (phase, counts) in enumerate(records):
        part = GroupPart({**dict.fromkeys(COUNTERS, 0), **counts},
                         {m: encode(new_histogram()) for m in metrics[0]}, 0, 1, 1, 0)
        stats.merge(index, float(index), [IntervalReport(
            0, 1, index, index * 10**9, 1.0, False, 0.0, phase, groups={0: part})], None)
    return stats.summary()


@pytest.mark.parametrize(("qos", "took"), [(1, "confirmed"), (0, "written")])
def test_each_send_attempted_is_counted_in_exactly_one_outcome(qos: int, took: str) -> None:
    """Planted: 300 sends made in three intervals (warm-up, measured, drain) of which the
    broker refused 7 and a fault hid 11; 4 more raised and never left, and 2 were due but
    unsent at the stop. The outcomes add up to the 306 attempted, none nets against another,
    and a group whose broker acknowledges nothing (MQTT QoS 0) counts what it took as
    written."""
    from harness.stats.slo import parse

    spec = {"module": "mqtt.Publisher", "destination": "T", "qos": qos}
    summary = planted_summary(spec, [
        ("warmup", {"sent": 100, "failed": 1}),
        ("measure", {"sent": 100, "refused": 7, "untaken": 7, "failed": 3}),
        ("drain", {"sent": 100, "in_doubt": 11, "unsent": 2}),
    ])
    outcomes = summary["groups"]["sender"]["outcomes"]
    assert outcomes == {took: 282, "refused": 7, "in_doubt": 11, "failed": 4, "unsent": 2,
                        "attempted": 306}
    console = Console(record=True, width=300)
    print_summary(console, summary, "RUN")
    assert f"sender: 306 sends attempted: 282 {took}, 7 refused, 11 in doubt, 4 failed, " \
           "2 unsent" in console.export_text()
    # --slo reads them, as it reads every count; `failed` the counter, which as every count
    # of the summary leaves the warm-up out.
    groups = {"sender": metrics_for(group_spec(spec))}
    for text, holds in ((f"{took} == 282", True), ("sender.attempted == 306", True),
                        ("failed == 3", True), (f"{took} > 282", False)):
        assert parse(text, groups, {}).judge(summary, {})[0] is holds, text


class Witness:
    """What the broker took of the run's sends, counted on a connection of its own, straight
    to the broker: started before the run, read after it."""

    def __init__(self, kind: str, destination: str) -> None:
        self.kind, self.destination = kind, destination
        self.delivered: set[bytes] = set()
        self.client: Any = None

    def start(self) -> None:
        if self.kind != "mqtt":
            return  # the others count what the broker holds, after the run
        import paho.mqtt.client as mqtt

        subscribed = threading.Event()
        client = self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
        client.on_connect = lambda c, *_: c.subscribe(self.destination, qos=1)
        client.on_subscribe = lambda *_: subscribed.set()
        client.on_message = lambda _c, _u, m: self.delivered.add(bytes(m.payload))
        client.connect("127.0.0.1", 1883)
        client.loop_start()
        assert subscribed.wait(10), "the witness's SUBACK never came"

    def count(self) -> int:
        if self.kind == "mqtt":
            time.sleep(1)  # the last deliveries
            self.client.loop_stop()
            self.client.disconnect()
            return len(self.delivered)
        if self.kind == "amqp":
            return queue_depth(5672, self.destination)
        import redis

        server = redis.Redis(port=6379)
        try:
            return int(server.xlen(self.destination))
        finally:
            server.close()


# (witness, port, the producer's flags): each acknowledges every send (a PUBACK, a publisher
# confirm, XADD's reply), so that what the broker took is known, and no consumer takes from
# what the witness counts.
SILENCED = {
    "mqtt QoS 1 on Mosquitto": ("mqtt", 1883, ["-m", "mqtt.Publisher", "--qos", "1"]),
    "amqp confirms on RabbitMQ": ("amqp", 5672, ["-m", "amqp.Sender", "-pp", "--confirm",
                                                 "20"]),
    "redis streams": ("redis", 6379, ["-m", "redis.Sender"]),
}


@pytest.mark.parametrize("case", sorted(SILENCED))
def test_a_producer_whose_connection_goes_silent_counts_only_what_the_broker_took(
        tmp_path: Path, brokers: object, case: str) -> None:
    """A producer at 200 a second through a proxy that stops moving its bytes 3 s in and never
    resumes them (the harness's own connection may be any of the first few the proxy
    carries: every one is held, and every new one); the broker's own count, on a connection
    of its own, is the witness. The sends whose acknowledgement never came are in doubt, and
    the producer's count and rate leave them out: confirmed <= taken by the broker <=
    confirmed + in doubt, and every send of the span is confirmed, refused or in doubt."""
    kind, port, flags = SILENCED[case]
    destination = f"ledger/{uuid.uuid4().hex[:8]}" if kind == "mqtt" else unique("ledger")
    witness = Witness(kind, destination)
    witness.start()
    cutter = Cutter(("127.0.0.1", port))
    out = tmp_path / "runs"
    try:
        proc = subprocess.Popen(
            harness_command("run", *flags, "-d", destination, "--port", str(cutter.port),
                            "--heartbeat", "1", "-rt", "200", "-rl", "10", "-sw", "0",
                            "-ss", "1", "--drain", "5", "-o", str(out)),
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
    finally:
        cutter.close()
    assert proc.returncode == 0, stderr
    took = witness.count()
    summary = summary_of(out)
    (producer,) = summary["groups"].values()
    taken, doubt = producer["taken"], producer["in_doubt"]
    assert doubt > 0, producer  # the fault hid some outcomes, or the test tests nothing
    assert producer["outage_ms"] > 0, producer
    assert producer["sent"] == taken + producer["untaken"]
    assert producer["untaken"] == doubt + producer["refused"]
    assert taken <= took <= taken + doubt, (taken, took, doubt)
    assert producer["count"] == taken
    assert abs(producer["rate"] - taken / summary["measured_seconds"]) < 0.01
    assert f"the {taken:,} the broker took" in stdout
