"""OpenMessaging Benchmark's workload files run as they are (`harness run --omb`, a profile's
omb: key), and a run exported as OMB's result JSON. On the embedded loopback broker: these
check how a workload becomes groups and how the figures are named, not a transport (the
Kafka tests run a workload on the Kafka-protocol broker)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

WORKLOAD = {"name": "2 topics / 1kb", "topics": 2, "partitionsPerTopic": 1,
            "messageSize": 1024, "subscriptionsPerTopic": 1, "consumerPerSubscription": 2,
            "producersPerTopic": 2, "producerRate": 400, "consumerBacklogSizeGB": 0,
            "testDurationMinutes": 0.05, "warmupDurationMinutes": 0.02}


def workload(tmp_path: Path, **changes: Any) -> Path:
    path = tmp_path / "workload.yaml"
    data = {**WORKLOAD, **changes}
    path.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    return path


def test_a_workload_runs_as_its_groups_and_exports_as_omb_result_json(harness, tmp_path):
    result = harness("run", "--omb", str(workload(tmp_path)), "-m", "loopback", "-ss", "1",
                     "--drain", "1")
    assert result.code == 0, result.stderr
    run = result.manifest["options"]
    groups = {g["name"]: g for g in run["groups"]}
    # Two topics of two producers each, one subscription of two competing consumers each.
    assert groups["producer"]["module"] == "loopback.Sender"
    assert groups["consumer"]["module"] == "loopback.Receiver"
    assert groups["producer"]["threads"] == groups["consumer"]["threads"] == 4
    assert groups["producer"]["destination_max"] == 2
    assert groups["producer"]["size"] == 1024 and groups["producer"]["rate"] == 400
    assert run["duration"] == pytest.approx(4.2) and run["warmup"] == pytest.approx(1.2)
    summary = result.summary
    assert summary["groups"]["producer"]["rate"] == pytest.approx(400, rel=0.02)

    exported = harness("export", str(result.run_dir), "--format", "omb")
    assert exported.code == 0, exported.stderr
    omb = json.loads((result.run_dir / "omb-result.json").read_text())
    assert (omb["topics"], omb["producersPerTopic"], omb["consumersPerTopic"]) == (2, 2, 2)
    assert omb["messageSize"] == 1024 and omb["driver"] == "loopback"
    # The series: one value per measured interval, each from that interval's records.
    counters = [r for r in result.records("counters") if r["phase"] == "measure"]
    intervals = sorted({r["interval"] for r in counters})
    assert len(omb["publishRate"]) == len(omb["consumeRate"]) == len(intervals)
    for i, index in enumerate(intervals):
        rows = [r for r in counters if r["interval"] == index]
        sent = sum(r["sent"] for r in rows if r["group"] == "producer")
        received = sum(r["received"] for r in rows if r["group"] == "consumer")
        assert omb["publishRate"][i] == pytest.approx(sent / rows[0]["length"])
        assert omb["consumeRate"][i] == pytest.approx(received / rows[0]["length"])
    # The aggregated figures are the summary's, in OMB's units: milliseconds, and the
    # publish delay in microseconds.
    latency = summary["groups"]["consumer"]["latency"]
    assert omb["aggregatedEndToEndLatency99pct"] == pytest.approx(latency["p99"] / 1000)
    assert omb["aggregatedEndToEndLatency50pct"] == pytest.approx(latency["p50"] / 1000)
    delay = summary["groups"]["producer"]["delay"]
    assert omb["aggregatedPublishDelayLatency99pct"] == pytest.approx(delay["p99"])
    service = summary["groups"]["producer"]["service"]
    assert omb["aggregatedPublishLatency99pct"] == pytest.approx(service["p99"] / 1000)
    quantiles = omb["aggregatedEndToEndLatencyQuantiles"]
    assert quantiles["99.0"] == omb["aggregatedEndToEndLatency99pct"]
    assert list(map(float, quantiles)) == sorted(map(float, quantiles))
    read_as_omb_charts_read_it(omb)


# What OpenMessaging Benchmark's own chart script (bin/create_charts.py) reads of a result
# file: the workload and driver that name a chart and its lines, six series drawn against
# time (their largest value sets the axis: none may be empty), and three quantile maps whose
# keys it reads as percentiles (float(key), those up to 99.999 drawn).
OMB_CHART_SERIES = ("publishLatency99pct", "publishDelayLatency99pct", "publishRate",
                    "endToEndLatency95pct", "consumeRate", "endToEndLatencyAvg")
OMB_CHART_QUANTILES = ("aggregatedPublishLatencyQuantiles",
                       "aggregatedPublishDelayLatencyQuantiles",
                       "aggregatedEndToEndLatencyQuantiles")


def read_as_omb_charts_read_it(omb: dict) -> None:
    assert isinstance(omb["workload"], str) and isinstance(omb["driver"], str)
    for key in OMB_CHART_SERIES:
        series = omb[key]
        assert series and all(isinstance(v, int | float) for v in series), key
        assert max(series) >= 0, key
    for key in OMB_CHART_QUANTILES:
        drawn = [(float(q), v) for q, v in omb[key].items() if float(q) <= 99.999]
        assert drawn and all(isinstance(v, int | float) for _, v in drawn), key


@pytest.mark.parametrize(("changes", "named"), [
    ({"consumerBacklogSizeGB": 1, "subscriptionsPerTopic": 0}, "consumerBacklogSizeGB"),
    ({"useRandomizedPayloads": True, "randomizedPayloadPoolSize": 0},
     "randomizedPayloadPoolSize"),
    ({"useRandomizedPayloads": True, "randomizedPayloadPoolSize": 10,
      "randomBytesRatio": 1.5}, "randomBytesRatio"),
    ({"producerPauseDuringDrain": 5}, "producerPauseDuringDrain"),
    ({"subscriptionsPerTopic": 2}, "subscriptionsPerTopic"),
    ({"partitionsPerTopic": 4}, "partitionsPerTopic"),
    ({"keyDistributor": "RANDOM_NANO"}, "keyDistributor"),
    ({"useRandomizedPayloads": "yes"}, "useRandomizedPayloads"),
    ({"producerIncrementRate": 100}, "producerIncrementRate"),
    ({"topicz": 3}, "topicz"),
    ({"topics": 0}, "topics"),
    ({"messageSize": None}, "messageSize"),
    ({"payloadFile": "payload/missing.data"}, "payloadFile"),
])
def test_a_key_the_harness_cannot_honour_is_refused_in_one_line(tmp_path, changes, named):
    # subscriptionsPerTopic 2 with consumerPerSubscription 2: two subscriptions of two
    # competing consumers each; partitions and keys: the loopback broker has no partitions.
    from harness.experiments.profile import ProfileError, load_data

    path = workload(tmp_path, **changes)
    data = {"connections": {"broker": {"transport": "loopback"}}, "omb": str(path)}
    with pytest.raises(ProfileError) as refused:
        load_data(path, "", data, {})
    assert len(str(refused.value).splitlines()) == 1, refused.value
    assert f"omb.{named}: " in str(refused.value)


def test_a_refused_workload_is_one_line_and_exit_2_from_the_command(harness, tmp_path):
    result = harness("run", "--omb", str(workload(tmp_path, producerIncrementRate=2)), "-m",
                     "loopback")
    assert result.code == 2 and result.run_dir is None
    assert result.stderr.count("\n") == 1 and "omb.producerIncrementRate" in result.stderr


def test_flags_beside_a_workload_reach_its_groups_or_are_refused(harness, tmp_path):
    path = workload(tmp_path)
    no_transport = harness("run", "--omb", str(path))
    assert no_transport.code == 2 and "-m" in no_transport.stderr
    set_by_it = harness("run", "--omb", str(path), "-m", "loopback", "-rt", "5")
    assert set_by_it.code == 2 and "-rt" in set_by_it.stderr
    assert "groups.producer.thread-rate" in set_by_it.stderr
    changed = harness("run", "--omb", str(path), "-m", "loopback", "--set",
                      "groups.producer.rate=200", "-rl", "2", "-sw", "0", "-ss", "1",
                      "--drain", "1", "--type", "text")
    assert changed.code == 0, changed.stderr
    groups = {g["name"]: g for g in changed.manifest["options"]["groups"]}
    assert groups["producer"]["rate"] == 200 and changed.manifest["options"]["duration"] == 2
    assert groups["producer"]["body_type"] == "text"


def test_a_profile_names_a_workload_file_and_several_subscriptions_each_see_all(tmp_path):
    from harness.experiments.profile import load

    (tmp_path / "omb").mkdir()
    workload(tmp_path / "omb", subscriptionsPerTopic=3, consumerPerSubscription=1, topics=1,
             producerRate=0, producerStartRate=500)
    path = tmp_path / "profile.yaml"
    path.write_text(textwrap.dedent("""\
        name: three-subscriptions
        connections:
          local: {transport: loopback}
        omb: omb/workload.yaml
        run: {run-length: 5}
        """))
    profile = load(path)
    (point,) = profile.points
    producer, consumer = point.run.groups
    assert (producer.module, consumer.module) == ("loopback.Publisher", "loopback.Subscriber")
    assert consumer.threads == 3 and producer.threads == 2
    assert point.run.duration == 5  # the profile's run: stands over the workload's
    # producerRate 0: OMB's search for the highest sustainable rate, as a capacity search.
    assert profile.search is not None and profile.search.field == "groups.producer.rate"
    assert profile.search.start == 500 and profile.search.criteria.backlog is True


def test_a_shipped_omb_profile_holds_the_workloads_keys():
    from harness.experiments.profile import load

    profile = load(ROOT / "profiles" / "omb-1-topic-16-partitions-1kb.yaml")
    producer, consumer = profile.points[0].run.groups
    assert producer.options["partitions"] == 16 and producer.rate == 50_000
    assert producer.size == 1024 and consumer.threads == 1
    assert profile.points[0].run.duration == 16 * 60


def test_randomized_payloads_and_a_backlog_run_as_omb_means_them(harness, tmp_path):
    """useRandomizedPayloads: a pool of bodies, each message drawing one; and
    consumerBacklogSizeGB: the consumers held until the topic holds that many bytes, then
    drained."""
    path = workload(tmp_path, useRandomizedPayloads=True, randomBytesRatio=0.5,
                    randomizedPayloadPoolSize=100, consumerBacklogSizeGB=0.0005,
                    subscriptionsPerTopic=1, consumerPerSubscription=1, topics=1,
                    producersPerTopic=1, producerRate=1000, testDurationMinutes=0.12,
                    warmupDurationMinutes=0)
    result = harness("run", "--omb", str(path), "-m", "loopback", "--no-ui", timeout=120)
    assert result.code == 0, result.stderr
    producer = next(g for g in result.manifest["options"]["groups"] if g["name"] == "producer")
    assert (producer["payload_pool"], producer["random_ratio"]) == (100, 0.5)
    assert result.manifest["options"]["backlog"] == f"{round(0.0005 * 2**30)}B"
    backlog = result.summary["backlog"]
    assert backlog["unit"] == "bytes" and backlog["goal"] == round(0.0005 * 2**30)
    assert backlog["at_release"] >= backlog["goal"]
    assert backlog["drain_seconds"] > 0 and backlog["drain_rate"] > 1000
    (check,) = result.summary["delivery"]
    assert check["expected"] == check["received"] > 0 and check["missing"] == 0


def test_acceptable_backlog_bounds_the_capacity_search(tmp_path):
    from harness.experiments.profile import load_data

    path = workload(tmp_path, producerRate=0, acceptableBacklog=2500, producerStartRate=800)
    data = {"connections": {"broker": {"transport": "loopback"}}, "omb": str(path)}
    profile = load_data(path, "", data, {})
    criteria = profile.search.criteria
    assert criteria.backlog_max == 2500 and criteria.backlog


@pytest.mark.usefixtures("brokers")
def test_randomized_payloads_on_the_wire_are_random_for_their_ratio_and_zero_after(tmp_path):
    """The bodies a NATS publisher puts on the wire with --payload-pool 20 --random-ratio
    0.3: at most 20 kinds, each 300 random bytes then 700 zero bytes, drawn at random."""
    import re
    import subprocess

    from tests.conftest import env, harness_command
    from tests.cutter import Cutter

    out = tmp_path / "runs"
    proxy = Cutter(("127.0.0.1", 4222), record=True)
    try:
        ran = subprocess.run(harness_command(
            "run", "-m", "nats.Publisher", "-d", "pool.wire", "--port", str(proxy.port),
            "-ms", "1000", "--payload-pool", "20", "--random-ratio", "0.3", "-rt", "300",
            "-rl", "2", "--no-ui", "-o", str(out)),
            capture_output=True, text=True, env=env(), timeout=60)
    finally:
        proxy.close()
    assert ran.returncode == 0, ran.stderr
    sent = b"".join(data for _, upstream, data in proxy.log if upstream)
    bodies = []
    for match in re.finditer(rb"PUB pool\.wire +(\d+)\r\n", sent):
        size = int(match[1])
        bodies.append(sent[match.end():match.end() + size][-1000:])
    assert len(bodies) > 400
    assert all(body[300:] == bytes(700) for body in bodies)
    kinds = set(bodies)
    assert 10 <= len(kinds) <= 20
    # Drawn at random, not in turn: consecutive messages often repeat no pattern of 20.
    assert any(bodies[i] != bodies[i + 20] for i in range(len(bodies) - 20))
    # Between two different bodies the random part differs (a byte in 256 alike by chance).
    first, *rest = sorted(kinds)
    for other in rest:
        differ = sum(a != b for a, b in zip(first, other, strict=True)) / 1000
        assert 0.3 * 0.97 < differ <= 0.3


# OMB's driver-kafka/kafka-throughput.yaml, its keys as they are, with two settings added
# that no flag of the harness sets: one plain, one a secret.
KAFKA_DRIVER = """\
name: Kafka
driverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver

# Kafka client-specific configuration
replicationFactor: 3
reset: true

topicConfig: |
  min.insync.replicas=2

commonConfig: |
  bootstrap.servers=localhost:9092
  default.api.timeout.ms=600000
  socket.keepalive.enable=true

producerConfig: |
  acks=all
  linger.ms=1
  batch.size=1048576
  ssl.key.password=not-a-real-secret

consumerConfig: |
  auto.offset.reset=earliest
  enable.auto.commit=false
  max.partition.fetch.bytes=10485760
"""


def test_an_omb_kafka_driver_file_runs_as_it_is(harness, brokers, tmp_path):
    """Its producer and consumer settings become the flags that set them on each group,
    the rest go to librdkafka from the file (a secret stays there), the Java client's own
    timeout is left out and said, and the workload runs to a complete delivery."""
    driver = tmp_path / "kafka-throughput.yaml"
    driver.write_text(KAFKA_DRIVER)
    path = workload(tmp_path, topics=1, producersPerTopic=1, consumerPerSubscription=1,
                    producerRate=100, testDurationMinutes=0.1, warmupDurationMinutes=0)
    done = harness("run", "--omb", str(path), "--omb-driver", str(driver), "-m", "kafka",
                   "-ss", "1", "--drain", "30", "--no-ui", timeout=180)
    assert done.code == 0, done.stderr
    assert "harness: omb-driver: default.api.timeout.ms left out: the Java client's" in \
        done.stderr
    delivery = done.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] >= 500 and delivery["missing"] == 0
    groups = {g["name"]: g for g in done.manifest["options"]["groups"]}
    producer, consumer = groups["producer"]["options"], groups["consumer"]["options"]
    assert (producer["acks"], producer["linger_ms"], producer["batch_size"]) == \
        ("all", 1.0, 1048576)
    assert (consumer["offset_reset"], consumer["commit"], consumer["fetch_max_bytes"]) == \
        ("earliest", "async", 10485760)
    for options in (producer, consumer):
        assert options["replication"] == 3
        assert options["topic_config"] == ["min.insync.replicas=2"]
    assert producer["client_config"] == [f"@{driver}#commonConfig",
                                         f"@{driver}#producerConfig"]
    assert consumer["client_config"] == [f"@{driver}#commonConfig"]
    assert groups["producer"]["host"] == "localhost" and groups["producer"]["port"] == 9092
    assert "not-a-real-secret" not in json.dumps(done.manifest) + done.stdout + done.stderr


@pytest.mark.parametrize(("driver", "module", "words"), [
    (KAFKA_DRIVER.replace("driver.kafka.KafkaBenchmarkDriver",
                          "driver.pulsar.PulsarBenchmarkDriver"), "kafka",
     "driverClass: 'io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver' is not "
     "OMB's Kafka driver"),
    (KAFKA_DRIVER + "sasl: on\n", "kafka", "sasl: not a key of OMB's Kafka driver files"),
    (KAFKA_DRIVER.replace("acks=all", "acks=maybe"), "kafka",
     "groups[0].acks: 'maybe': use one of all, 1, 0"),
    (KAFKA_DRIVER.replace("enable.auto.commit=false", "enable.auto.commit=often"), "kafka",
     "consumerConfig: enable.auto.commit: 'often' is not true or false"),
    (KAFKA_DRIVER.replace("socket.keepalive.enable=true", "no.such.property=1"), "kafka",
     'No such configuration property: "no.such.property"'),
    (KAFKA_DRIVER, "amqp", "omb-driver: driver files are read for kafka, not amqp"),
])
def test_a_driver_file_the_harness_cannot_honour_is_refused_in_one_line(harness, tmp_path,
                                                                       driver, module, words):
    path = tmp_path / "driver.yaml"
    path.write_text(driver)
    refused = harness("run", "--omb", str(workload(tmp_path)), "--omb-driver", str(path),
                      "-m", module, "--check")
    assert refused.code == 2, refused.stderr
    # One line a problem: a property librdkafka lacks, once for each group it reaches.
    lines = [line for line in refused.stderr.splitlines() if "left out" not in line]
    assert 1 <= len(lines) <= 2 and all(words in line for line in lines), refused.stderr
    assert "not-a-real-secret" not in refused.stderr


def test_a_driver_file_needs_a_workload(harness, tmp_path):
    path = tmp_path / "driver.yaml"
    path.write_text(KAFKA_DRIVER)
    refused = harness("run", "-m", "kafka.Sender", "-d", "t", "--omb-driver", str(path))
    assert refused.code == 2 and "--omb-driver: only with --omb" in refused.stderr
