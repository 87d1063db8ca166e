"""Several processes: statistics merged exactly into the run's intervals and summary."""

from harness.stats.histogram import counts_view, decode, new_histogram


def test_merged_histogram_equals_the_union_of_the_processes_histograms(harness):
    result = harness("run", "-m", "loopback.Sender", "-rt", "1000", "-nt", "2", "-d", "Q",
                     "--processes", "2", "-rl", "3", "-ss", "1",
                     "-g", "-m loopback.Receiver -d Q --processes 2")
    assert result.code == 0, result.stderr
    rows = result.records("histogram")
    assert {r["process"] for r in rows} == {0, 1}
    assert len({r["pid"] for r in result.records("process")}) == 2
    summary = result.summary["groups"]
    for tag in ("receiver.latency", "receiver.service", "sender.service", "sender.delay"):
        group, metric = tag.split(".")
        union = new_histogram()
        for row in rows:
            if row["tag"] == tag and row["phase"] != "warmup":
                part = decode(row["hist"])
                if part.get_total_count():
                    union.add(part)
        merged = decode(summary[group]["histograms"][metric])
        assert merged.get_total_count() == union.get_total_count() > 0
        assert (counts_view(merged) == counts_view(union)).all()
        assert merged.get_max_value() == union.get_max_value()
    # 2 processes x 2 threads x 1000/s x 3 s were due. The last of them falls a quarter of a
    # gap (0.25 ms) before the stop: a thread woken later than that on a loaded machine has
    # not sent it, and it counts as unsent, as the rate must say (what was sent, exactly).
    sender = summary["sender"]
    assert sender["sent"] + sender["unsent"] == 12_000 and sender["unsent"] <= 4
    assert summary["receiver"]["received"] == sender["sent"]
    assert sender["rate"] == sender["sent"] / 3


def test_total_rate_is_split_over_threads_and_processes(harness):
    result = harness("run", "-m", "loopback.Sender", "--rate", "3000", "-nt", "3", "-d", "Q",
                     "--processes", "2", "-rl", "2", "-ss", "1",
                     "-g", "-m loopback.Receiver -d Q --processes 2")
    assert result.code == 0, result.stderr
    # 6 threads of 500/s each for 2 s; one due just before the stop may be unsent (see above).
    sender = result.summary["groups"]["sender"]
    assert sender["sent"] + sender["unsent"] == 6000 and sender["unsent"] <= 6


def test_a_producer_process_that_ends_first_does_not_hold_the_stop(harness, brokers):
    # On a real broker each group runs in its own process; the publisher's ends (its -mg
    # done) a second before the sender's, and the run must still stop by message count.
    from tests.conftest import unique

    q, t = unique("ends.q"), unique("ends.t")
    amq = " ".join(brokers["activemq"]["stomp"])
    result = harness("run", "-m", "stomp.Sender", "-d", q, "-mg", "200", "-rt", "100",
                     "-ss", "1", *brokers["activemq"]["stomp"],
                     "-g", f"-m stomp.Receiver -d {q} {amq}",
                     "-g", f"-m stomp.Publisher -d {t} -mg 100 -rt 100 {amq}",
                     "-g", f"-m stomp.Subscriber -d {t} {amq}", timeout=60)
    assert result.code == 0, result.stderr
    assert result.summary["stopped_by"] == "message count"
    groups = result.summary["groups"]
    assert groups["receiver"]["received"] == 200 and groups["subscriber"]["received"] == 100
