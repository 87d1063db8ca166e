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
                        "expected": 400, "in_doubt": 0, "received": 399, "duplicated": 1,
                        "missing": 2, "unexpected": 0, "by_sequence": True,
                        "in_doubt_arrived": 0, "in_doubt_not_arrived": 0}
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
    # Where the delivery check is made, nothing is said to be unchecked.
    assert result.summary["delivery"] and "unchecked" not in result.summary
    assert "no check" not in result.stdout


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


def test_loss_at_the_head_of_a_stream_is_counted(harness):
    # The first two messages never arrive: the receiver's first is number 2 of the stream.
    result = harness("run", "-m", "loopback.Sender", "-d", "D", *COMMON,
                     "-g", "-m loopback.Receiver -d D", "--inject", "drop:D:1",
                     "--inject", "drop:D:2")
    assert result.code == 0, result.stderr
    group = result.summary["groups"]["receiver"]
    assert group["lost"] == 2 and group["received"] == 398
    (delivery,) = result.summary["delivery"]
    assert delivery["missing"] == 2


def test_a_duplicate_on_one_competing_consumer_does_not_cancel_a_loss(harness):
    # One message dropped and another delivered twice, among three competing receivers:
    # 800 received of 800 sent, yet one is missing and one duplicated.
    result = harness("run", "-m", "loopback.Sender", "-d", "D", *COMMON, "-nt", "2",
                     "-g", "-m loopback.Receiver -d D -nt 3", "--inject", "drop:D:10",
                     "--inject", "duplicate:D:20")
    assert result.code == 0, result.stderr
    (delivery,) = result.summary["delivery"]
    assert delivery["received"] == 800
    assert (delivery["missing"], delivery["duplicated"]) == (1, 1)
    assert "missing 1" in result.stdout
    # Recomputed from the run's records alone (as for a run cut off before its summary),
    # harness view says the same.
    (result.run_dir / "summary.json").unlink()
    shown = harness("view", str(result.run_dir), "--no-ui")
    assert "missing 1, duplicated 1" in shown.stdout


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
    table_row = row(recorded.run, result.summary, recorded.replay(histograms=False).views(),
                    "dispatched", None, {})
    assert table_row["lost"] == 2


def test_a_destination_the_delivery_check_cannot_balance_says_why(harness):
    result = harness("run", "-m", "loopback.Publisher", "-d", "T", "-rt", "50", "-rl", "1",
                     "--destination-max", "3", "-ss", "1",
                     "-g", "-m loopback.Subscriber -d T --destination-max 3")
    assert result.code == 0, result.stderr
    assert result.summary["delivery"] == []
    assert result.summary["unchecked"][0]["destination"] == "loopback:topic:T"
    assert "delivery loopback:topic:T: no check: its consumers read numbered topics " \
           "(--destination-max)" in result.stdout


def test_the_drain_lasts_as_long_as_given_while_messages_are_owed(harness):
    # Each message takes 0.8 s through the broker and the last is sent 0.5 s before the stop:
    # the receiver has been idle for 0.7 s when the drain begins, yet the message is owed.
    result = harness("run", "-m", "loopback.Sender", "-d", "D", "-rt", "1", "-rl", "2.5",
                     "-ss", "1", "--loopback-delay", "800", "--drain", "3",
                     "-g", "-m loopback.Receiver -d D")
    assert result.code == 0, result.stderr
    receiver = result.summary["groups"]["receiver"]
    assert receiver["received"] == 3 and receiver["lost"] == 0
    # Once everything arrived the drain ends: the run did not wait out the 3 s.
    manifest = result.manifest
    assert manifest["end"] - manifest["producers_stopped"] < 2.5


def test_a_thread_that_fails_at_once_is_reported_and_fails_the_run(tmp_path, monkeypatch):
    """An error no counter can hold (a client library raising what is not a transport
    error) ends its thread; the run says so and exits 1, even when that thread was the last
    running and the run ends in the same turn."""
    from harness.modules.loopback import LoopbackTransport

    from harness.engine.runner import Controller
    from harness.plan.group import group_spec
    from harness.plan.run import RunSpec, assign_group_names

    def send(self, destination, message):
        raise ValueError("the library refused it")

    monkeypatch.setattr(LoopbackTransport, "send", send)
    groups = [group_spec({"module": "loopback.Sender", "destination": "Q", "thread_rate": 100})]
    assign_group_names(groups)
    lines: list[str] = []
    result = Controller(RunSpec(groups=groups, duration=2.0, interval=1.0, drain=0.0,
                                output=str(tmp_path)), lambda view: None, lines.append).execute()
    assert result.exit_code == 1
    assert "process 0: ValueError: the library refused it" in lines, lines
    assert result.summary["groups"]["sender"]["errors"] == 1


def test_a_thread_held_in_a_send_past_the_stop_keeps_what_it_counted(harness):
    """The 150th send never returns (the loopback broker holds it, as flow control may): the
    thread is abandoned 10 s after the stop, and the 149 sends it completed are counted, not
    its last interval dropped; the summary names the thread."""
    done = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "100", "-rl", "3",
                   "-ss", "1", "--drain", "1", "--inject", "hang:Q:150", "--no-ui",
                   "-g", "-m loopback.Receiver -d Q", timeout=90)
    assert "Traceback" not in done.stderr
    assert "did not stop within 10 s" in done.stderr and "sender-0-0" in done.stderr
    groups = done.summary["groups"]
    assert groups["sender"]["sent"] == groups["receiver"]["received"] == 149
    assert done.summary["abandoned_threads"] == ["sender-0-0"]
    (delivery,) = done.summary["delivery"]
    assert (delivery["expected"], delivery["missing"]) == (149, 0)
    assert "abandoned: sender-0-0" in done.stdout
