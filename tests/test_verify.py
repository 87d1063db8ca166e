from harness.plan.group import group_spec, metrics_for
from harness.plan.run import RunSpec
from harness.stats.intervals import RunStats
from harness.stats.recorder import Recorder
from harness.stats.reports import StreamEnd
from harness.stats.verify import SeenSet, SequenceTracker, union_count

WINDOW = 1_000


def feed(seqs, producer="p", start=0):
    rec = Recorder()
    tracker = SequenceTracker(rec, WINDOW)
    for i, seq in enumerate(seqs):
        tracker.check(producer, seq, start + i)
    return rec, tracker


def test_in_order_stream_is_clean():
    rec, tracker = feed(range(100))
    tracker.finish()
    assert (rec.lost, rec.duplicated, rec.reordered) == (0, 0, 0)


def test_gap_filled_within_the_window_is_reordered_not_lost():
    rec, tracker = feed([0, 1, 3, 2, 4])
    tracker.expire(10)
    tracker.finish()
    assert (rec.lost, rec.duplicated, rec.reordered) == (0, 0, 1)


def test_gap_not_filled_in_the_window_is_lost():
    rec, tracker = feed([0, 1, 5, 6])
    tracker.expire(2 + WINDOW - 1)
    assert rec.lost == 0
    tracker.expire(2 + WINDOW)
    assert rec.lost == 3


def test_repeat_is_a_duplicate_and_producers_are_independent():
    rec = Recorder()
    tracker = SequenceTracker(rec, WINDOW)
    for producer, seq in [("a", 0), ("b", 0), ("a", 1), ("a", 1), ("b", 1), ("a", 0)]:
        tracker.check(producer, seq, 0)
    tracker.finish()
    assert (rec.lost, rec.duplicated, rec.reordered) == (0, 2, 0)


def test_loss_at_the_head_of_a_stream_is_found():
    # Every stream of a run starts at 0: the first three never arrived.
    rec, tracker = feed([3, 4, 5])
    tracker.finish()
    assert rec.lost == 3


def test_a_message_arriving_after_the_window_counts_once_as_late():
    rec, tracker = feed([0, 1, 3])
    tracker.expire(2 + WINDOW)
    assert (rec.lost, rec.late) == (1, 0)
    tracker.check("p", 2, 5 * WINDOW)
    tracker.finish()
    assert (rec.lost, rec.late, rec.duplicated, rec.reordered) == (0, 1, 0, 0)


def test_competing_receivers_duplicates_do_not_cancel_losses():
    # Ten messages to a queue: a loses 7 and 8, b gets 3 twice (a redelivery); in all, 2
    # are missing and 1 duplicated, whatever the counts received say (9 + 1 = 10).
    rec_a, rec_b = Recorder(), Recorder()
    a, b = SeenSet(rec_a), SeenSet(rec_b)
    for seq in (0, 1, 2, 4, 5, 6, 9):
        a.add("p", seq)
    for seq in (3, 3):
        b.add("p", seq)
    received = 9
    assert rec_b.duplicated == 1
    once = union_count([bytes(a.bits["p"]), bytes(b.bits["p"])])
    assert once == 8 and received - once == 1 and 10 - once == 2


def test_missing_at_the_end_of_the_run_is_lost():
    rec, tracker = feed([0, 4])
    tracker.finish()
    assert rec.lost == 3


def test_receivers_competing_across_nodes_count_a_message_both_received_once():
    # Two nodes of one run, each with a receiver on the same queue: node a saw 0-5, node b
    # 5-9 (5 redelivered to b after a took it). The merge counts the union, 10, not 11: a
    # duplicate across nodes must not hide a loss elsewhere.
    run = RunSpec(groups=[group_spec({"module": "amqp.Sender", "destination": "Q"}),
                          group_spec({"module": "amqp.Receiver", "destination": "Q"})],
                  nodes=2)
    metrics = {i: metrics_for(g) for i, g in enumerate(run.groups)}
    records = []
    for node, seqs in (("a", range(0, 6)), ("b", range(5, 10))):
        seen = SeenSet(Recorder())
        for seq in seqs:
            seen.add("p", seq)
        ends = [StreamEnd(0, 0, 0, {"p": 10} if node == "a" else {}),
                StreamEnd(1, 0, 0, {}, seen={"p": bytes(seen.bits["p"])})]
        records += [r for r in RunStats(run, metrics).reconcile(ends) if r["type"] == "union"]
    assert [r["received_once"] for r in records] == [6, 5]  # each node's own
    merged = RunStats(run, metrics)
    merged.add_reconciliation(records)
    assert merged.received_once == {"amqp:queue:Q": 10}
    # One node of the two alone cannot balance the queue: no delivery check for it.
    assert RunStats(run, metrics).delivery() == []


def planted(consumers):
    """A run of one Sender and `consumers` Receiver groups on queue Q, whose sender made 20
    sends, 5 to 9 of them in doubt (a fault hid their outcome) and 3 failed (never sent);
    its statistics, for the ends of the consumers' streams to reconcile."""
    run = RunSpec(groups=[group_spec({"module": "amqp.Sender", "destination": "Q"}),
                          *[group_spec({"module": "amqp.Receiver", "destination": "Q",
                                        "group-name": f"r{i}"}) for i in range(consumers)]])
    stats = RunStats(run, {i: metrics_for(g) for i, g in enumerate(run.groups)})
    stats.groups[0].everything.update(sent=20, in_doubt=5)
    sender = StreamEnd(0, 0, 0, {"p": 20}, failed={"p": [3]}, doubt={"p": [5, 6, 7, 8, 9]})
    return stats, sender


def test_a_send_in_doubt_that_arrived_never_stands_in_for_a_confirmed_one_lost():
    # Every send in doubt arrived, and the last five definite sends never did: by count the
    # two cancel (20 - 5 in doubt - 15 received: missing 0); by sequence, 5 are missing.
    # And the failed send 3 arrived all the same: unexpected.
    stats, sender = planted(1)
    rec, tracker = feed(range(15))
    tracker.finish()
    stats.groups[1].everything.update(received=15, lost=rec.lost)
    stats.reconcile([sender, StreamEnd(1, 0, 1, dict(tracker.expected),
                                       lost={p: sorted(n) for p, n in tracker.lost.items()})])
    (check,) = stats.delivery()
    assert check["by_sequence"] and check["expected"] == 20 and check["in_doubt"] == 5
    assert (check["missing"], check["in_doubt_arrived"], check["in_doubt_not_arrived"],
            check["unexpected"]) == (5, 5, 0, 1)


def test_competing_receivers_are_checked_by_sequence_against_every_send():
    # Two receivers share the queue: one got 0-4 and 10-14, the other the five in doubt and
    # 4 again; 15-19 (definite) reached neither, nor did 3 (failed).
    stats, sender = planted(2)
    a, b = SeenSet(Recorder()), SeenSet(Recorder())
    for seq in (0, 1, 2, 4, *range(10, 15)):
        a.add("p", seq)
    for seq in (4, 5, 6, 7, 8, 9):
        b.add("p", seq)
    stats.groups[1].everything.update(received=9)
    stats.groups[2].everything.update(received=6)
    stats.reconcile([sender, StreamEnd(1, 0, 1, {}, seen={"p": bytes(a.bits["p"])}),
                     StreamEnd(2, 0, 2, {}, seen={"p": bytes(b.bits["p"])})])
    (check,) = stats.delivery()
    assert check["by_sequence"] and check["duplicated"] == 1
    assert (check["missing"], check["in_doubt_arrived"], check["unexpected"]) == (5, 5, 0)


def feed_partitions(arrivals, fast_path=True):
    """(seq, partition) arrivals of producer p through a tracker that orders per partition,
    with the consumer's fast path as Consumer.measure takes it: a message whose number is
    the one `expected` holds skips the tracker."""
    rec = Recorder()
    current = {"partition": -1}
    tracker = SequenceTracker(rec, WINDOW, lambda: current["partition"])
    for i, (seq, partition) in enumerate(arrivals):
        current["partition"] = partition
        if fast_path and tracker.expected.get("p") == seq:
            tracker.expected["p"] = seq + 1
        else:
            tracker.check("p", seq, i)
    return rec, tracker


def test_across_partitions_a_later_arrival_is_not_reordered_but_within_one_it_is():
    # Sixteen partitions, each in order, read one after another: what Kafka promises, kept.
    arrivals = sorted(((seq, seq % 16) for seq in range(320)), key=lambda a: (a[1], a[0]))
    rec, tracker = feed_partitions(arrivals)
    tracker.expire(len(arrivals))
    tracker.finish()
    assert (rec.lost, rec.duplicated, rec.reordered, rec.late) == (0, 0, 0, 0)
    # Read per producer, the same arrivals are mostly "reordered".
    per_producer, tracker = feed(seq for seq, _ in arrivals)
    tracker.finish()
    assert per_producer.reordered > 250
    # One message moved within its partition: 5 after 9 on partition 1, counted once;
    # the fast path taken again once no gap is open.
    moved = [(0, 0), (1, 1), (2, 0), (3, 1), (4, 0), (6, 0), (7, 1), (9, 1), (5, 1), (8, 0),
             (10, 0), (11, 1)]
    rec, tracker = feed_partitions(moved)
    tracker.finish()
    assert (rec.lost, rec.duplicated, rec.reordered) == (0, 0, 1)
    assert tracker.expected["p"] == 12  # back on the fast path
    # Loss and duplicates are still per producer.
    rec, tracker = feed_partitions([(0, 0), (2, 1), (2, 1), (3, 0)])
    tracker.finish()
    assert (rec.lost, rec.duplicated, rec.reordered) == (1, 1, 0)
