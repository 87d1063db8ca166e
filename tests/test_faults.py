"""Loss, duplicate, reorder and corruption detection, with faults injected in the loopback
broker and the harness run as a user runs it."""

import pytest

COMMON = ["-rt", "500", "-mg", "400", "-ss", "1", "--reorder-window", "0.5", "--drain", "3"]


@pytest.mark.parametrize("topic", [False, True])
def test_injected_faults_are_counted_exactly(harness, topic):
    producer, consumer = ("Publisher", "Subscriber") if topic else ("Sender", "Receiver")
    result = harness("run", "-m", f"loopback.{producer}", "-d", "D", *COMMON,
                     "-g", f"-m loopback.{consumer} -d D --crc 1",
                     "--inject", "drop:D:50", "--inject", "drop:D:51",
                     "--inject", "duplicate:D:100", "--inject", "reorder:D:200",
                     "--inject", "corrupt:D:300")
    assert result.code == 0, result.stderr
    group = result.summary["groups"][consumer.lower()]
    assert group["lost"] == 2
    assert group["duplicated"] == 1
    assert group["reordered"] == 1
    assert group["corrupt"] == 1
    # 400 sent, 2 dropped, 1 delivered twice.
    assert group["received"] == 399
    (delivery,) = result.summary["delivery"]
    assert delivery == {"destination": f"loopback:{'topic' if topic else 'queue'}:D",
                        "expected": 400, "received": 399, "duplicated": 1, "missing": 2,
                        "unexpected": 0}
    # The interval lines say it too.
    assert "lost=" in result.stdout and "corrupt=1" in result.stdout


def test_a_clean_run_reports_no_faults(harness):
    result = harness("run", "-m", "loopback.Sender", "-d", "D", *COMMON,
                     "-g", "-m loopback.Receiver -d D --crc 1")
    assert result.code == 0, result.stderr
    group = result.summary["groups"]["receiver"]
    assert (group["lost"], group["duplicated"], group["reordered"], group["corrupt"]) == \
        (0, 0, 0, 0)
    assert group["received"] == 400


def test_loss_at_the_tail_of_a_stream_shows_in_the_delivery_check(harness):
    # The last message never arrives: no later sequence number reveals the gap, so only the
    # per-destination balance can see it.
    result = harness("run", "-m", "loopback.Sender", "-d", "D", *COMMON,
                     "-g", "-m loopback.Receiver -d D", "--inject", "drop:D:400")
    assert result.code == 0, result.stderr
    (delivery,) = result.summary["delivery"]
    assert delivery["missing"] == 1 and delivery["received"] == 399
    assert "missing 1" in result.stdout


def test_competing_consumers_are_balanced_per_destination(harness):
    result = harness("run", "-m", "loopback.Sender", "-d", "D", *COMMON, "-nt", "2",
                     "-g", "-m loopback.Receiver -d D -nt 3", "--inject", "drop:D:10")
    assert result.code == 0, result.stderr
    (delivery,) = result.summary["delivery"]
    assert delivery["expected"] == 800 and delivery["missing"] == 1


def test_loss_is_counted_once_in_a_results_table(harness):
    """The consumer's sequence gaps and the destination's delivery check see the same two
    dropped messages: the table and a search's loss criterion count them once."""
    from harness.experiments.results import row
    from harness.rundir.reader import load

    result = harness("run", "-m", "loopback.Sender", "-d", "D", *COMMON,
                     "-g", "-m loopback.Receiver -d D", "--inject", "drop:D:50",
                     "--inject", "drop:D:51")
    assert result.code == 0, result.stderr
    assert result.summary["groups"]["receiver"]["lost"] == 2
    assert result.summary["delivery"][0]["missing"] == 2
    recorded = load(result.run_dir)
    table_row = row(recorded.run, result.summary, recorded.views, "dispatched", None, {})
    assert table_row["lost"] == 2
