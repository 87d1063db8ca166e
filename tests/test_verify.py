from harness.stats.recorder import Recorder
from harness.stats.verify import SequenceTracker

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


def test_first_message_sets_the_baseline_for_late_subscribers():
    rec, tracker = feed([500, 501, 502])
    tracker.finish()
    assert rec.lost == 0


def test_missing_at_the_end_of_the_run_is_lost():
    rec, tracker = feed([0, 4])
    tracker.finish()
    assert rec.lost == 3
