"""The broker's own count of what waits for a group's consumers (a RabbitMQ queue's depth, a
JetStream consumer's pending, a Redis consumer group's lag or a stream reader's unread
entries), read about once a second and shown beside the harness's own counts."""

from __future__ import annotations

from harness.modules.interface.feedback import WAITING

from harness.stats.reports import add_partitions
from tests.conftest import unique


def test_a_destinations_count_is_the_largest_its_consumers_read_and_partitions_add_up():
    """Competing consumers of one queue each read its depth: one queue, not three times
    it. Kafka's partitions are each a consumer's own, and add up as before."""
    merged = add_partitions([
        {"orders": (WAITING, 40), "t[0]": (10.0, 5)},
        {"orders": (WAITING, 55), "t[0]": (20.0, 7)},
        {"orders": (WAITING, 50), "t[1]": (30.0, -1)},
        None,
    ])
    assert merged == {"orders": (WAITING, 55), "t[0]": (30.0, 12), "t[1]": (30.0, -1)}


def lags(result, group):  # type: ignore[no-untyped-def]
    """(interval, phase, {key: count}) of the group's waiting counts, in order."""
    out = []
    for record in result.records("counters"):
        if record["group"] == group:
            waiting = {key: int(lag) for key, (rate, lag) in record.get("partitions", {}).items()
                       if rate == WAITING}
            out.append((record["interval"], record["phase"], waiting))
    return out


def behind(result, producer, consumer):  # type: ignore[no-untyped-def]
    """Per measured interval, what the producer had sent and the consumer not yet taken."""
    sent = {r["interval"]: r["sent"] for r in result.records("counters")
            if r["group"] == producer}
    taken = {r["interval"]: r["received"] for r in result.records("counters")
             if r["group"] == consumer}
    out, backlog = {}, 0
    for interval in sorted(sent):
        backlog += sent[interval] - taken.get(interval, 0)
        out[interval] = backlog
    return out


def check_grows_then_drains(result, key, producer, consumer, prefetch):  # type: ignore[no-untyped-def]
    """The broker's count, read at most a second (here: an interval) before each interval's
    end, lies between the backlog an interval earlier, less what the consumer holds
    unacknowledged, and the backlog then; after the drain it says nothing is left, and the
    summary says so too."""
    backlog = behind(result, producer, consumer)
    seen = lags(result, consumer)
    measured = [(i, w) for i, phase, w in seen if phase == "measure"]
    assert measured and all(set(w) == {key} for _, w in measured[1:]), seen
    for interval, waiting in measured[1:]:
        assert backlog[interval - 1] - prefetch - 50 <= waiting[key] <= backlog[interval], \
            (interval, waiting, backlog)
    # It grew as the backlog did: each group here consumes at least 200/s less than is sent,
    # so at least 100 more wait each interval. Counted by interval, not by record: a consumer
    # that came up late under load has fewer measured records.
    (first, early), (last, late) = measured[1], measured[-1]
    assert last > first and late[key] - early[key] > 100 * (last - first), measured
    assert seen[-1][2] == {key: 0}, seen  # read once more as the consumer closed
    assert result.summary["groups"][consumer]["lag"] == 0
    assert f"{consumer}: lag 0 at the end" in result.stdout


def test_a_rabbitmq_queues_depth_follows_a_slow_consumers_backlog(harness, brokers):
    queue = unique("q.depth")
    rabbit = brokers["rabbitmq"]["amqp"]
    result = harness("run", "-m", "amqp.Sender", "-d", queue, "-rt", "400", *rabbit,
                     "-g", f"-m amqp.Receiver -d {queue} --consumer-rate 200 --prefetch 20 "
                     f"--ack client {' '.join(rabbit)}",
                     "-rl", "4", "-sw", "0", "-ss", "1", "--drain", "15", timeout=120)
    assert result.code == 0, result.stderr
    check_grows_then_drains(result, queue, "sender", "receiver", 20)
    # In the interval lines too, as the group's lag.
    assert " lag=" in result.stdout.split("receiver", 2)[2]


def test_a_rabbitmq_queue_filling_behind_held_consumers_is_counted_while_they_wait(
        harness, brokers):
    """--backlog: the consumers hold their connections and read nothing, and the queue's
    depth is read all the same: the broker's figure beside the harness's own."""
    queue = unique("q.heldepth")
    rabbit = brokers["rabbitmq"]["amqp"]
    result = harness("run", "-m", "amqp.Sender", "-d", queue, "-rt", "1000", *rabbit,
                     "-g", f"-m amqp.Receiver -d {queue} --prefetch 50 --ack client "
                     f"{' '.join(rabbit)}",
                     "--backlog", "4000", "-rl", "7", "-ss", "1", "--drain", "15",
                     timeout=120)
    assert result.code == 0, result.stderr
    backlog = behind(result, "sender", "receiver")
    held = [(i, w[queue]) for i, _, w in lags(result, "receiver")
            if queue in w and i < result.summary["backlog"]["fill_seconds"] - 1]
    assert held and max(n for _, n in held) >= 1500, held
    for interval, waiting in held[1:]:
        assert backlog[interval - 1] - 50 - 50 <= waiting <= backlog[interval]
    assert result.summary["groups"]["receiver"]["lag"] == 0


def test_a_jetstream_consumers_pending_follows_a_slow_consumers_backlog(harness, brokers):
    subject = unique("js.pending")
    result = harness("run", "-m", "nats.Sender", "-d", subject, "--jetstream", "-rt", "400",
                     "-g", f"-m nats.Receiver -d {subject} --jetstream --consumer-rate 200 "
                     "--prefetch 20 --ack client",
                     "-rl", "4", "-sw", "0", "-ss", "1", "--drain", "15", timeout=120)
    assert result.code == 0, result.stderr
    (key,) = {k for _, _, w in lags(result, "receiver") for k in w}
    assert key.split()[0].lower().startswith("harness")  # "<stream> <consumer>"
    check_grows_then_drains(result, key, "sender", "receiver", 20)


def test_a_redis_groups_lag_and_a_stream_readers_unread_entries(harness, brokers):
    """The Receivers' consumer group (XINFO GROUPS' lag) and a Subscriber reading the
    stream on its own (entries added since it subscribed, less those it read)."""
    stream = unique("rs.waiting")
    result = harness("run", "-m", "redis.Sender", "-d", stream, "-rt", "400",
                     "-g", f"-m redis.Receiver -d {stream} --consumer-rate 200 --prefetch 20",
                     "-g", f"-m redis.Subscriber -d {stream} --streams --consumer-rate 100 "
                     "--prefetch 20",
                     "-rl", "4", "-sw", "0", "-ss", "1", "--drain", "20", timeout=120)
    assert result.code == 0, result.stderr
    check_grows_then_drains(result, f"{stream} harness", "sender", "receiver", 20)
    (reader,) = {k for _, _, w in lags(result, "subscriber") for k in w}
    assert reader.startswith(f"{stream} ")
    check_grows_then_drains(result, reader, "sender", "subscriber", 20)


def test_the_screens_detail_shows_each_destinations_waiting_count_beside_partitions():
    from harness.screen.board import partition_text

    text = partition_text({"t[0]": (5.0, 3), "t[1]": (6.0, -1), "orders": (WAITING, 1234)})
    assert text.splitlines() == ["t: [0] 5/s lag 3  [1] 6/s", "orders: 1,234 waiting"]
