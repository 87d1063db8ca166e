"""The kafka transport against a real Kafka-protocol broker (Tansu, started by the broker
script on 9092): every role, keys spreading over partitions, competing receivers in one group,
acks 0, transactions; options it cannot honour refused in one line."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.conftest import only_run_dir, read_jsonl, settings_for, unique

KAFKA = ["--port", "9092"]
# A new consumer group forms in about 3 s on Tansu (a fraction of --rebalance-timeout), more
# on a busy machine: the warm-up covers it.
WARM = ["-sw", "6", "-ss", "1"]


def topic(prefix: str) -> str:
    return unique(prefix).replace(".", "-")


def partitions_used(name: str) -> list[int]:
    """Messages in each partition of a topic, read from the broker's watermarks."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "harness-test"})
    try:
        meta = consumer.list_topics(name, timeout=10).topics[name]
        return [consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1]
                for p in sorted(meta.partitions)]
    finally:
        consumer.close()


def summary_of(done: Any) -> dict[str, Any]:
    assert done.code == 0, done.stderr
    return json.loads((done.run_dir / "summary.json").read_text())


def test_three_competing_receivers_share_three_partitions_without_loss(harness, brokers):
    name = topic("kafka.group")
    done = harness("run", "-m", "kafka.Sender", "-d", name, "-rt", "300", "--partitions", "3",
                   "--keys", "sequence", *KAFKA, "-g",
                   f"-m kafka.Receiver -d {name} -nt 3 --commit sync --commit-every 50 "
                   f"--port 9092", *WARM, "-rl", "10", timeout=120)
    summary = summary_of(done)
    sender, receiver = summary["groups"]["sender"], summary["groups"]["receiver"]
    [check] = summary["delivery"]
    assert check["expected"] > 2000 and check["missing"] == check["duplicated"] == 0, check
    assert receiver["lost"] == receiver["duplicated"] == 0, (receiver, done.stdout[-3000:])
    # Each of the three joined the group (in the warm-up): one assignment each at least,
    # counted in the interval records and logged with the partitions it was given, which
    # between them are the topic's three.
    rebalances = sum(r["rebalances"] for r in done.records("counters")
                     if r["group"] == "receiver")
    assert rebalances >= 3, receiver
    assigned = re.findall(r"receiver: rebalance: partitions ([\d, ]*) of", done.stderr)
    assert len(assigned) == rebalances, done.stderr
    assert {int(n) for line in assigned for n in line.split(", ") if n} == {0, 1, 2}
    # acks all: each send's delivery report is timed as its confirm, and called so.
    assert sender["confirm"]["p50"] > 0
    assert "sender: delivery reports p50" in done.stdout and "publisher confirms" not in \
        done.stdout
    # Keys made of the producer and its sequence number spread the sends over every partition.
    counts = partitions_used(name)
    assert len(counts) == 3 and all(c > 0.2 * sum(counts) for c in counts), counts


def test_each_subscriber_sees_every_message_in_order_with_producer_keys(harness, brokers):
    name = topic("kafka.topic")
    done = harness("run", "-m", "kafka.Publisher", "-d", name, "-rt", "200", "--partitions",
                   "2", "--keys", "producer", "-nt", "2", *KAFKA, "-g",
                   f"-m kafka.Subscriber -d {name} -nt 2 --port 9092", "-ss", "1", "-rl", "4",
                   timeout=120)
    summary = summary_of(done)
    [check] = summary["delivery"]
    subscriber = summary["groups"]["subscriber"]
    assert check["expected"] == 2 * summary["groups"]["publisher"]["sent"] > 0
    assert check["missing"] == check["duplicated"] == 0
    # One key a producer: its messages share a partition, so each stream stays in order.
    assert subscriber["reordered"] == subscriber["lost"] == 0


def test_requestors_get_their_replies(harness, brokers):
    # 5 a second: a round trip through Tansu takes about a tenth of a second, so a requestor
    # behind its schedule after the consumer group formed catches up within the warm-up (at
    # 10 a second it never did, and its replies counted in the warm-up's intervals).
    name = topic("kafka.rpc")
    done = harness("run", "-m", "kafka.Requestor", "-d", name, "-rt", "5", "--fetch-wait-ms",
                   "5", *KAFKA, "-g", f"-m kafka.Responder -d {name} --fetch-wait-ms 5 "
                   "--port 9092", *WARM, "-rl", "10", timeout=120)
    summary = summary_of(done)
    requestor = summary["groups"]["requestor"]
    assert requestor["received"] > 10 and requestor["errors"] == requestor["timeouts"] == 0
    assert summary["groups"]["responder"]["received"] >= requestor["received"]


def test_acks_0_counts_sends_without_a_confirm(harness, brokers):
    name = topic("kafka.acks0")
    done = harness("run", "-m", "kafka.Sender", "-d", name, "--acks", "0", "-rt", "200",
                   *KAFKA, "-g", f"-m kafka.Receiver -d {name} --port 9092", *WARM, "-rl",
                   "8", timeout=120)
    summary = summary_of(done)
    sender = summary["groups"]["sender"]
    assert sender["sent"] > 0 and "confirm" not in sender
    assert summary["delivery"][0]["missing"] == 0


def test_transactions_commit_every_n_sends(harness, brokers):
    name = topic("kafka.tx")
    done = harness("run", "-m", "kafka.Sender", "-d", name, "-tx", "-cc", "10", "-rt", "200",
                   *KAFKA, "-g", f"-m kafka.Receiver -d {name} --port 9092", *WARM, "-rl",
                   "8", timeout=120)
    summary = summary_of(done)
    sender = summary["groups"]["sender"]
    assert sender["commits"] >= sender["sent"] // 10 > 0
    assert summary["delivery"][0]["missing"] == summary["delivery"][0]["duplicated"] == 0


@pytest.mark.parametrize(("flags", "says"), [
    (["--acks", "2"], "--acks: '2': use one of all, 1, 0"),
    (["-pp"], "-pp: Kafka keeps every message by the topic's retention"),
    (["--idempotence", "--acks", "1"], "--idempotence: needs --acks all"),
    (["--keys", "hash"], "--keys: 'hash': use one of none, producer, sequence, random"),
    (["--selector", "a = 1"], "--selector: Kafka has no selectors"),
])
def test_what_kafka_cannot_honour_is_refused_in_one_line(harness, flags, says):
    done = harness("run", "-m", "kafka.Sender", "-d", "t", *flags, "-mg", "1")
    assert done.code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr


def test_an_omb_workload_runs_on_kafka_and_exports_omb_result_json(harness, brokers, tmp_path):
    """OpenMessaging Benchmark's workload keys as its files have them: three partitions
    filled by random keys, one subscription of two competing consumers."""
    import yaml

    workload = tmp_path / "workload.yaml"
    workload.write_text(yaml.safe_dump({
        "name": "1 topic / 3 partitions / 512b", "topics": 1, "partitionsPerTopic": 3,
        "keyDistributor": "RANDOM_NANO", "messageSize": 512, "subscriptionsPerTopic": 1,
        "consumerPerSubscription": 2, "producersPerTopic": 2, "producerRate": 400,
        "consumerBacklogSizeGB": 0, "testDurationMinutes": 0.1,
        "warmupDurationMinutes": 0.07}))
    # The drain ends as soon as everything arrived; up to 8 s for a consumer group that
    # rebalanced late (3 s left 2 of 4,080 messages behind once).
    done = harness("run", "--omb", str(workload), "-m", "kafka", *KAFKA, "-ss", "1",
                   "--drain", "8", timeout=120)
    summary = summary_of(done)
    [check] = summary["delivery"]
    assert check["expected"] > 2000 and check["missing"] == check["duplicated"] == 0, check
    name = done.manifest["options"]["groups"][0]["destination"]
    counts = partitions_used(name)
    assert len(counts) == 3 and all(c > 0.2 * sum(counts) for c in counts), counts
    exported = harness("export", str(done.run_dir), "--format", "omb")
    assert exported.code == 0, exported.stderr
    omb = json.loads((done.run_dir / "omb-result.json").read_text())
    assert (omb["driver"], omb["partitions"], omb["producersPerTopic"],
            omb["consumersPerTopic"]) == ("kafka", 3, 2, 2)
    assert sum(omb["publishRate"]) / len(omb["publishRate"]) == pytest.approx(400, rel=0.05)
    # Kafka confirms each send: OMB's publish latency is the delivery report's time.
    confirm = summary["groups"]["producer"]["confirm"]
    assert omb["aggregatedPublishLatency99pct"] == pytest.approx(confirm["p99"] / 1000)


def read_all(name: str, isolation: str) -> list[tuple[int, bytes]]:
    """(sequence number, body) of every message a new consumer group reads from the topic
    with this isolation level, until nothing more comes for 3 s."""
    import time

    from harness.modules.interface.base import connect
    from harness.modules.interface.message import Destination
    from harness.modules.kafka import KafkaTransport

    consumer = KafkaTransport(settings_for("kafka.Receiver", port=9092, isolation=isolation,
                                           consumer_group=unique("harness-test")))
    queue = Destination("queue", name)
    connect(consumer, lambda: consumer.subscribe(queue))
    seen: list[tuple[int, bytes]] = []
    try:
        quiet = time.monotonic() + 15  # a new group forms first
        while time.monotonic() < quiet:
            message = consumer.receive(0.2)
            if message is not None:
                seen.append((message.seq, bytes(message.body)))
                quiet = time.monotonic() + 3
    finally:
        consumer.close()
    return seen


def test_an_aborted_transaction_reaches_the_log_and_tansu_does_not_hide_it(brokers):
    """A transaction aborted on purpose after its sends reached the broker, then one
    committed. Kafka hides the aborted sends from a read_committed consumer; Tansu 0.6.0
    does not (its fetch names no aborted transactions), so its read_committed consumers see
    them too: this test fails when a Tansu that hides them arrives, and the Kafka page says
    so."""
    from harness.modules.interface.base import connect
    from harness.modules.interface.message import Destination, Message
    from harness.modules.kafka import KafkaTransport

    name = topic("kafka.abort")
    queue = Destination("queue", name)
    producer = KafkaTransport(settings_for("kafka.Sender", port=9092, transacted=True,
                                           commit_count=5))
    connect(producer, lambda: producer.declare(queue))
    try:
        producer.begin()
        for seq in range(1, 6):
            producer.send(queue, Message(b"aborted", "p", seq, 0, 0))
        producer.idle(1.0)  # delivered into the log, not purged from the client's queue
        producer.abort()
        producer.begin()
        for seq in range(6, 11):
            producer.send(queue, Message(b"committed", "p", seq, 0, 0))
        producer.commit()
    finally:
        producer.close()
    everything = read_all(name, "read_uncommitted")
    assert everything == [(seq, b"aborted") for seq in range(1, 6)] + \
        [(seq, b"committed") for seq in range(6, 11)]
    assert read_all(name, "read_committed") == everything


def test_lag_and_per_partition_rates_follow_a_backlog_into_the_screen(harness, brokers,
                                                                      tmp_path):
    """A paced Sender fills three partitions; a Receiver run afterwards reads that backlog.
    The per-partition figures librdkafka reports reach the interval records, the interval
    lines, the summary and the live screen's detail: the Sender's partition rates add up to
    its rate, the Receiver's lag is the backlog it has not taken (never more than what is
    left, never less than what is left after its current batch) and ends at 0."""
    import asyncio

    from textual.widgets import Static

    from harness.rundir.reader import load
    from harness.screen.app import RunApp
    from harness.screen.replay import ReplayFeed

    name = topic("kafka.lag")
    keys = [f"{name}[{n}]" for n in range(3)]
    # Small bodies, many of them: reading them back takes the Receiver some seconds, so that
    # the client's reports (one a second) see the backlog shrink.
    filled = harness("run", "-m", "kafka.Sender", "-d", name, "--partitions", "3", "--keys",
                     "sequence", "-rt", "50000", "-ms", "64", "-rl", "6", "-sw", "0", "-ss",
                     "1", *KAFKA,
                     "-o", str(tmp_path / "filled"), timeout=120, output=False)
    assert filled.code == 0, filled.stderr
    run_dir = only_run_dir(tmp_path / "filled")
    assert run_dir is not None
    sent = json.loads((run_dir / "summary.json").read_text())["groups"]["sender"]["sent"]
    steady = [r for r in read_jsonl(run_dir / "intervals.jsonl")
              if r["type"] == "counters"][1:-1]
    assert steady, filled.stdout
    for record in steady:  # a second's sends against the partitions' rates of that second
        assert list(record["partitions"]) == keys
        total = sum(rate for rate, _ in record["partitions"].values())
        assert total == pytest.approx(record["sent"] / record["length"], rel=0.2), record
        assert all(lag == -1 for _, lag in record["partitions"].values())  # no consumer's

    # A threshold on the lag, judged in every interval: missed where a backlog was left.
    done = harness("run", "-m", "kafka.Receiver", "-d", name, *KAFKA, "-rl", "12", "-sw", "0",
                   "-ss", "1", "--slo", "receiver.lag < 1", "--slo-interval", timeout=120)
    assert done.code == 99, done.stderr
    summary = done.summary
    records = done.records("counters")
    received = [r["received"] for r in records]
    assert sum(received) == sent, received
    lags = []
    for i, record in enumerate(records):
        if "partitions" not in record:
            continue
        assert list(record["partitions"]) == keys
        lag = sum(lag for _, lag in record["partitions"].values())
        # The client's report is up to a second old, its sample may land an interval late,
        # and the client fetched up to a batch (500) ahead of what the worker counted.
        left_now, left_before = sent - sum(received[:i + 1]), sent - sum(received[:max(i - 1, 0)])
        assert left_now - 500 <= lag <= left_before, (i, lag, received)
        lags.append(lag)
    assert lags == sorted(lags, reverse=True), lags  # nothing more came: it only shrinks
    assert lags[-1] == 0 and summary["groups"]["receiver"]["lag"] == 0
    [verdict] = summary["slo"]["thresholds"]
    assert verdict["span_passed"] is True and verdict["intervals_missed"] == sum(
        1 for r in records if r["phase"] == "measure" and "partitions" in r
        and sum(lag for _, lag in r["partitions"].values()) >= 1) >= 1, verdict
    assert re.search(r"receiver .* lag=\d+", done.stdout), done.stdout
    assert "receiver: lag 0 at the end" in done.stdout

    # The screen, replaying the run: the receiver's detail shows each partition's lag as the
    # interval records hold it, interval by interval.
    feed = ReplayFeed(done.run_dir, load(done.run_dir))
    app = RunApp(feed)
    shown: list[tuple[dict[str, Any] | None, str]] = []

    async def main() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("home")
            for _ in records:
                await pilot.press("right")
                await pilot.pause(0.05)
                board = feed.board.groups["receiver"]
                text = str(app.query_one("#partitions", Static).content)
                shown.append((board.partitions and dict(board.partitions), text))

    asyncio.run(main())
    with_figures = [(parts, text) for parts, text in shown if parts]
    assert with_figures, shown
    for parts, text in with_figures:
        for key, (_, lag) in parts.items():
            number = key.rpartition("[")[2].rstrip("]")
            assert re.search(rf"\[{number}\] [\d,]+/s lag {lag:,}(\s|$)", text), (key, text)
    assert any(lag > 0 for parts, _ in with_figures for _, lag in parts.values()), shown


def test_a_send_no_broker_answers_is_in_doubt_after_send_timeout(tmp_path):
    """A private Tansu behind a proxy that refuses every connection for 8 s: the sends the
    client holds meanwhile are in doubt once --send-timeout (2 s) has passed, interval by
    interval while the outage lasts (with the default 30 s, none would be before the run
    ends), and the run goes on to the end. At 1,000 a second: sends fail as soon as the
    client says every broker is down, so only those made in the moments before it are held
    (at 100 a second there were sometimes none)."""
    import subprocess
    import threading
    import time

    from tests.conftest import env, harness_command
    from tests.cutter import Cutter
    from tests.servers import Tansu

    broker = Tansu(tmp_path / "tansu")
    proxy = Cutter(("127.0.0.1", broker.ports["kafka"]))
    broker.advertised = proxy.port
    broker.start()
    try:
        run = subprocess.Popen(harness_command(
            "run", "-m", "kafka.Sender", "-d", topic("kafka.timeout"), "--port",
            str(proxy.port), "-rt", "1000", "--send-timeout", "2", "-rl", "16", "-sw", "2",
            "-ss", "1", "-o", str(tmp_path / "runs")), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
        time.sleep(5)
        cut = threading.Thread(target=proxy.cut, args=(8.0,))
        cut.start()
        stdout, stderr = run.communicate(timeout=120)
        cut.join()
    finally:
        proxy.close()
        broker.stop()
    assert run.returncode == 0, stderr
    run_dir = only_run_dir(tmp_path / "runs")
    assert run_dir is not None
    counters = [r for r in read_jsonl(run_dir / "intervals.jsonl") if r["type"] == "counters"]
    doubted = [r["interval"] for r in counters if r["in_doubt"]]
    # In doubt within the outage (it ends about 13 s in), not only as the run closes.
    assert doubted and min(doubted) <= 11, (doubted, stdout[-2000:])
    summary = json.loads((run_dir / "summary.json").read_text())["groups"]["sender"]
    assert summary["in_doubt"] > 0 and summary["sent"] > summary["in_doubt"], summary


def test_order_is_checked_per_partition_as_kafka_promises_it(harness, brokers):
    """Sixteen partitions, no keys (the client spreads its batches), one receiver: across
    partitions messages come in any order, which Kafka does not promise otherwise and the
    harness no longer calls reordered; within each partition they come in order."""
    name = topic("kafka.order")
    done = harness("run", "-m", "kafka.Sender", "-d", name, "-rt", "2000", "--partitions", "16",
                   "--keys", "none", "--linger-ms", "1", *KAFKA, "-g",
                   f"-m kafka.Receiver -d {name} --port 9092", *WARM, "-rl", "8", timeout=120)
    summary = summary_of(done)
    receiver = summary["groups"]["receiver"]
    [check] = summary["delivery"]
    assert check["expected"] > 10_000 and check["missing"] == check["duplicated"] == 0, check
    # Spread over the partitions, so that the receiver reads them interleaved.
    counts = partitions_used(name)
    assert sum(c > 0 for c in counts) >= 8, counts
    assert receiver["reordered"] == 0 and receiver["lost"] == 0, receiver


def test_client_properties_reach_the_client_on_the_wire_and_bad_ones_are_refused(
        harness, brokers, tmp_path):
    """--client-config hands librdkafka a property as it is (from a flag and from a
    .properties file, as a producer.config or an OMB driver's producerConfig holds them):
    the client.id it sets is in the requests that reach the broker (read through a
    recording proxy); a property librdkafka lacks, a bad value, or one a flag of the
    harness sets is refused in one line before anything connects."""
    from tests.cutter import Cutter

    topic = unique("clientconfig")
    properties = tmp_path / "producer.properties"
    properties.write_text("# as kafka-producer-perf-test's producer.config\n"
                          "client.id=probe-from-file\nsocket.keepalive.enable=true\n")
    proxy = Cutter(("127.0.0.1", 9092), record=True)
    try:
        done = harness("run", "-m", "kafka.Sender", "-d", topic, "--port", str(proxy.port),
                       "-mg", "20", "--client-config", f"@{properties}",
                       "--client-config", "message.max.bytes=2000000", "--no-ui")
    finally:
        proxy.close()
    assert done.code == 0, done.stderr
    assert done.summary["groups"]["sender"]["sent"] == 20
    sent = b"".join(data for _, upstream, data in proxy.log or [] if upstream)
    assert b"probe-from-file" in sent  # each request's header carries the client id
    for value, words in (("no.such.thing=1", 'No such configuration property: "no.such.'),
                         ("socket.keepalive.enable=maybe", "Expected bool value"),
                         ("acks=0", "acks is set with --acks"),
                         ("statistics.interval.ms=0", "the harness sets"),
                         ("linger", "give KEY=VALUE"),
                         # a secret only from a file, and never echoed
                         ("ssl.key.password=not-a-real-secret", "given in a @FILE")):
        refused = harness("run", "-m", "kafka.Sender", "-d", topic, "-rl", "1",
                          "--client-config", value, "--no-ui")
        assert refused.code == 2, refused.stderr
        assert refused.stderr.startswith("harness: error: --client-config: ") and \
            words in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        assert "not-a-real-secret" not in refused.stderr + refused.stdout
