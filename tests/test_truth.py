"""The figures a user reads are what happened: rates over the seconds actually measured,
samples that never completed recorded rather than left out, closed-loop latency labelled."""

import json
import re
import subprocess
import time

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
from rich.console import Console

from harness.plan.group import group_spec, metrics_for
from harness.plan.run import RunSpec
from harness.screen.console import print_summary
from harness.stats.histogram import decode, encode, new_histogram
from harness.stats.intervals import RunStats
from harness.stats.recorder import COUNTERS
from harness.stats.reports import GroupPart, IntervalReport
from harness.stats.timeline import Timeline
from tests.conftest import env, harness_command


@pytest.mark.parametrize(("length", "warmup", "interval"),
                         [("5", "0", "2"), ("4", "1", "3"), ("3.5", "0.7", "1")])
def test_rates_are_the_paced_rate_whatever_the_run_length_warmup_and_interval(
        harness, length, warmup, interval):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "1000", "-rl", length,
                     "-sw", warmup, "-ss", interval, "-g", "-m loopback.Receiver -d Q")
    assert result.code == 0, result.stderr
    summary = result.summary
    measured = float(length) - float(warmup)
    assert summary["measured_seconds"] == pytest.approx(measured, abs=1e-6)
    for name in ("sender", "receiver"):
        assert summary["groups"][name]["rate"] == pytest.approx(1000, rel=0.01), name
    # The measured intervals cover exactly the span, and none straddles a phase.
    spans = {(r["interval"], r["length"]) for r in result.records("process")
             if r["phase"] == "measure"}
    assert sum(length for _, length in spans) == pytest.approx(measured, abs=1e-6)
    starts = {r["interval"]: r["start"] for r in result.records("process")}
    manifest = result.manifest
    first = min(i for i, r in {r["interval"]: r for r in result.records("process")}.items()
                if r["phase"] == "measure")
    assert starts[first] == pytest.approx(manifest["warmup_end"], abs=1e-6)
    # The interval lines print the same rate the summary does.
    assert f"Summary: {measured:.2f} s measured" in result.stdout


@pytest.mark.parametrize(("rate", "length", "warmup", "interval"),
                         [("10", "6", "1", "2"), ("1", "10", "2", "2"), ("3", "10", "0", "5")])
def test_a_low_paced_rate_is_its_own_rate_to_the_digit(harness, rate, length, warmup,
                                                       interval):
    """The span runs from the warm-up's end to the stop, not to the last send (a gap
    before it) nor to the last receipt: at 1/s that was 14% of the rate."""
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", rate, "-rl", length,
                     "-sw", warmup, "-ss", interval, "-g", "-m loopback.Receiver -d Q")
    assert result.code == 0, result.stderr
    summary = result.summary
    measured = float(length) - float(warmup)
    assert summary["measured_seconds"] == pytest.approx(measured, abs=1e-6)
    sender, receiver = summary["groups"]["sender"], summary["groups"]["receiver"]
    assert sender["sent"] == receiver["received"]
    for group in (sender, receiver):
        assert group["rate"] == pytest.approx(float(rate), rel=1e-6)


def test_a_run_ended_by_message_count_measures_to_the_last_send(harness):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "1000", "-mg", "2500",
                     "-ss", "1", "-g", "-m loopback.Receiver -d Q")
    assert result.code == 0, result.stderr
    assert result.summary["groups"]["sender"]["rate"] == pytest.approx(1000, rel=0.01)


def test_timeline_cuts_at_warmup_end_and_at_a_stop_learnt_late():
    timeline = Timeline(10, 3, 1)
    assert [timeline.bounds(i) for i in range(3)] == [(10, 11), (11, 14), (14, 17)]
    assert [timeline.phase(i) for i in range(3)] == ["warmup", "measure", "measure"]
    assert timeline.index_at(13.9) == 1 and timeline.index_at(14) == 2
    timeline.set_stop(15.5)
    assert timeline.bounds(2) == (14, 15.5) and timeline.phase(2) == "measure"
    assert timeline.bounds(3) == (15.5, 18.5) and timeline.phase(3) == "drain"
    assert timeline.index_at(15.4) == 2 and timeline.index_at(15.5) == 3
    # Stopped during the warm-up: no measured interval at all.
    early = Timeline(0, 1, 5, stop=2.5)
    assert [early.phase(i) for i in range(4)] == ["warmup", "warmup", "warmup", "drain"]
    assert early.bounds(2) == (2, 2.5)


def test_a_requestor_that_gets_no_answer_records_its_timeouts_in_latency(harness):
    # Nobody serves the queue: every request times out after 0.3 s.
    result = harness("run", "-m", "loopback.Requestor", "-d", "NOBODY", "-rt", "2", "-rl", "3",
                     "--reply-timeout", "0.3", "-ss", "1")
    assert result.code == 0, result.stderr
    requestor = result.summary["groups"]["requestor"]
    assert requestor["received"] == 0 and requestor["timeouts"] == 6
    latency = decode(requestor["histograms"]["latency"])
    # Every request is in latency, none faster than the wait it timed out after.
    assert latency.get_total_count() == requestor["timeouts"]
    assert latency.get_min_value() >= 300_000
    # The first timeout of each interval goes to the log, with its reason.
    assert "requestor: timeout error: no reply within 0.3 s" in result.stdout + result.stderr


def test_messages_due_but_unsent_at_the_stop_are_counted_with_their_wait(harness):
    # Each round trip takes 50 ms, so one thread keeps up with 20 a second, not 100: at the
    # stop it is far behind its schedule.
    result = harness("run", "-m", "loopback.Requestor", "-d", "SLOW", "-rt", "100", "-rl", "2",
                     "-ss", "1", "--loopback-delay", "25", "-g", "-m loopback.Responder -d SLOW")
    assert result.code == 0, result.stderr
    requestor = result.summary["groups"]["requestor"]
    assert requestor["unsent"] > 100
    # Sent and unsent together are the schedule's 200 messages.
    assert requestor["sent"] + requestor["unsent"] == pytest.approx(200, abs=2)
    latency = decode(requestor["histograms"]["latency"])
    assert latency.get_total_count() == requestor["received"] + requestor["unsent"]
    # The oldest unsent message waited most of the run.
    assert latency.get_max_value() > 1_500_000
    assert "due but unsent at the stop" in result.stdout


def test_unthrottled_latency_is_labelled_closed_loop_everywhere_it_is_shown(harness):
    result = harness("run", "-m", "loopback.Requestor", "-d", "CL", "-rl", "1", "-ss", "1",
                     "-g", "-m loopback.Responder -d CL")
    assert result.code == 0, result.stderr
    assert result.summary["groups"]["requestor"]["closed_loop"] is True
    assert "latency (closed loop) p50=" in result.stdout
    viewed = harness("view", str(result.run_dir), "--no-ui")
    assert viewed.code == 0, viewed.stderr
    assert "latency (closed loop) p50=" in viewed.stdout


def test_paced_latency_is_not_labelled_closed_loop(harness):
    paced = harness("run", "-m", "loopback.Requestor", "-d", "OL", "-rt", "100", "-rl", "1",
                    "-ss", "1", "-g", "-m loopback.Responder -d OL")
    assert paced.summary["groups"]["requestor"]["closed_loop"] is False
    assert "closed loop" not in paced.stdout


def test_clamped_samples_are_counted_and_said():
    run = RunSpec(groups=[group_spec({"module": "loopback.Receiver", "destination": "Q"})])
    metrics = {0: metrics_for(run.groups[0])}
    stats = RunStats(run, metrics)
    histograms = {m: encode(new_histogram()) for m in metrics[0]}
    part = GroupPart(dict.fromkeys(COUNTERS, 0), histograms, 3, 1, 1, 0)
    stats.merge(0, 0.0, [IntervalReport(0, 1, 0, 0, 1.0, True, 0.0, "measure",
                                        groups={0: part})], None)
    summary = stats.summary()
    (group,) = summary["groups"].values()
    assert group["clamped"] == 3
    console = Console(record=True, width=200)
    print_summary(console, summary, "RUN")
    assert "3 samples outside the histograms' range" in console.export_text()


def test_per_partition_figures_survive_the_records_and_add_up_over_processes():
    """Two processes' consumers (a group's competing members, each holding partitions of its
    own, and one that knows no lag yet) written as records, read back and merged: rates and
    known lags add up per partition, the group's lag is over its partitions, the summary
    keeps the last interval's."""
    from harness.stats.records import into_reports, report_records

    run = RunSpec(groups=[group_spec({"module": "loopback.Receiver", "destination": "Q"})])
    run.groups[0].name = "receiver"
    metrics = {0: metrics_for(run.groups[0])}
    histograms = {m: encode(new_histogram()) for m in metrics[0]}

    def interval(index: int, first: dict, second: dict) -> list[IntervalReport]:
        reports = {}
        for process, partitions in enumerate((first, second)):
            part = GroupPart(dict.fromkeys(COUNTERS, 0), histograms, 0, 1, 1, 0, partitions)
            report = IntervalReport(process, 1, index, index * 10**9, 1.0, False, 0.0,
                                    groups={0: part})
            for record in report_records(report, "r", "n", ["receiver"], index, "measure"):
                into_reports(json.loads(json.dumps(record)), reports, {"receiver": 0})
        return list(reports.values())

    stats = RunStats(run, metrics)
    view = stats.merge(0, 0.0, interval(
        0, {"T[0]": (100.04, 7), "T[1]": (50.0, -1)}, {"T[1]": (25.0, 3), "T[2]": (0.0, 0)}),
        None)
    assert view.groups["receiver"].partitions == {
        "T[0]": (100.0, 7), "T[1]": (75.0, 3), "T[2]": (0.0, 0)}
    assert view.groups["receiver"].lag == 10
    # Prometheus gets each partition's known lag, labelled by partition.
    from prometheus_client import generate_latest

    from harness.rundir.metrics import Metrics
    from harness.rundir.sinks import Closed
    exported = Metrics(run, "r", metrics, print)
    exported.interval(Closed(0, 0.0, view, [], None, None))
    text = generate_latest(exported.registry).decode()
    lags = sorted(line for line in text.splitlines()
                  if line.startswith("harness_lag_messages{"))
    assert [(re.search(r'partition="([^"]+)"', line)[1], line.rsplit(" ", 1)[1])
            for line in lags] == [("T[0]", "7.0"), ("T[1]", "3.0"), ("T[2]", "0.0")]
    stats.merge(1, 1.0, interval(1, {"T[0]": (90.0, 0)}, {"T[1]": (80.0, 0)}), None)
    assert stats.summary()["groups"]["receiver"]["lag"] == 0
    # A transport that reports none: no figure at all, not a lag of 0.
    plain = RunStats(run, metrics)
    assert plain.merge(0, 0.0, interval(0, {}, {}), None).groups["receiver"].lag is None
    assert "lag" not in plain.summary()["groups"]["receiver"]


def test_an_interval_whose_lost_went_down_says_what_arrived_late():
    """Messages counted lost in an earlier interval that arrive after the reorder window
    take this interval's lost below zero: the line says how many came late."""
    from harness.screen.console import interval_lines
    from harness.stats.figures import labels

    run = RunSpec(groups=[group_spec({"module": "loopback.Receiver", "destination": "Q"})])
    run.groups[0].name = "receiver"
    metrics = {0: metrics_for(run.groups[0])}
    part = GroupPart({**dict.fromkeys(COUNTERS, 0), "received": 40, "lost": -30, "late": 30},
                     {m: encode(new_histogram()) for m in metrics[0]}, 0, 1, 1, 0)
    view = RunStats(run, metrics).merge(0, 0.0, [IntervalReport(0, 1, 0, 0, 1.0, False, 0.0,
                                                                groups={0: part})], None)
    [line] = interval_lines(view, {"receiver": metrics[0]}, labels(run, metrics))
    assert "lost=-30 dup=0 reord=0 late=30" in line, line


def test_a_backlog_the_warm_up_left_is_said_with_its_size():
    """A Receiver 600 messages behind when the warm-up ends receives them while measured:
    its rate is above its Sender's, and the summary says why; 5 behind is noise, unsaid; a
    slow consumer (--consumer-rate) 600 behind and falling further is not lifted by it."""
    run = RunSpec(groups=[group_spec({"module": "loopback.Sender", "destination": "Q"}),
                          group_spec({"module": "loopback.Receiver", "destination": "Q"})])
    run.groups[0].name, run.groups[1].name = "sender", "receiver"
    metrics = {i: metrics_for(g) for i, g in enumerate(run.groups)}
    histograms = {i: {m: encode(new_histogram()) for m in metrics[i]} for i in metrics}

    def summary(behind: int, measured: int | None = None) -> dict:
        stats = RunStats(run, metrics)
        for index, phase, sent, received in ((0, "warmup", 1000, 1000 - behind),
                                             (1, "measure", 1000, measured or 1000 + behind)):
            parts = {}
            for g, counts in ((0, {"sent": sent}), (1, {"received": received})):
                parts[g] = GroupPart({**dict.fromkeys(COUNTERS, 0), **counts}, histograms[g],
                                     0, 1, 1, 0)
            stats.merge(index, float(index), [IntervalReport(0, 1, index, index * 10**9, 1.0,
                                                             False, 0.0, phase,
                                                             groups=parts)], None)
        return stats.summary()

    left = summary(600)
    assert left["warmup_backlog"] == {"loopback:queue:Q": 600}
    assert left["groups"]["receiver"]["rate"] == 1600 and left["groups"]["sender"]["rate"] == 1000
    # The count beside each rate is the rate's own; the replication grade is over every
    # send of the run, the 2,000 of warm-up and measured span alike, each received once:
    # not the 1.6 the rates' ratio would give on a queue.
    assert left["groups"]["receiver"]["count"] == 1600
    assert left["throughput"]["replication_grade"] == 1.0
    console = Console(record=True, width=200)
    print_summary(console, left, "RUN")
    assert "loopback:queue:Q: the warm-up left a backlog of 600 messages" in \
        console.export_text()
    assert "warmup_backlog" not in summary(5)
    assert "warmup_backlog" not in summary(600, measured=500)


def test_the_hlog_holds_one_histogram_per_tag_per_interval_over_all_processes(harness):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "500", "-rl", "2",
                     "-ss", "1", "--processes", "2", "-g",
                     "-m loopback.Receiver -d Q --processes 2", "--node", "n1")
    assert result.code == 0, result.stderr
    expected: dict[tuple[int, str], HdrHistogram] = {}
    for record in result.records("histogram"):
        key = (record["interval"], record["tag"])
        expected.setdefault(key, new_histogram()).add(decode(record["hist"]))
    reader = HistogramLogReader(str(result.run_dir / "n1.hlog"), new_histogram())
    read = []
    while (histogram := reader.get_next_interval_histogram()) is not None:
        read.append(histogram)
    assert len(read) == len(expected)
    by_tag: dict[str, list[HdrHistogram]] = {}
    for histogram in read:
        by_tag.setdefault(histogram.get_tag(), []).append(histogram)
    for (interval, tag), histogram in sorted(expected.items()):
        assert by_tag[tag][interval].get_total_count() == histogram.get_total_count()


def test_a_merged_run_of_nodes_started_apart_keeps_each_nodes_phases(tmp_path):
    """Three nodes of one run at 500 msg/s each, started 0, 2 and 5 s apart: the merged rate
    is the sum of the nodes' rates in every output, and the short overlap is warned of."""
    procs, dirs = [], []
    for delay, node in ((0, "a"), (2, "b"), (5, "c")):
        time.sleep(delay - (time.monotonic() - procs[0][1]) if procs else 0)
        out = tmp_path / node
        procs.append((subprocess.Popen(
            harness_command("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "500", "-rl",
                            "4", "-sw", "1", "-ss", "1", "--run-id", "apart", "--node", node,
                            "-o", str(out), "-g", "-m loopback.Receiver -d Q"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env()),
            time.monotonic()))
        dirs.append(out)
    node_rates: dict[str, list[float]] = {"sender": [], "receiver": []}
    for (proc, _), out in zip(procs, dirs, strict=True):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        (run_dir,) = out.iterdir()
        groups = json.loads((run_dir / "summary.json").read_text())["groups"]
        for name, rates in node_rates.items():
            rates.append(groups[name]["rate"])
    # A receiver counts by arrival: a send due just before the measured span, received
    # just inside it, counts for the receiver and not the sender (and at the end the
    # other way), so each group is the sum of its own nodes' rates.
    assert all(r == pytest.approx(500, rel=0.01) for r in node_rates["sender"])
    merged = tmp_path / "merged"
    done = subprocess.run(harness_command("merge", *[str(next(d.iterdir())) for d in dirs],
                                          "-o", str(merged)),
                          capture_output=True, text=True, env=env(), timeout=300)
    assert done.returncode == 0, done.stderr
    whole = json.loads((merged / "summary.json").read_text())
    summary = whole["runs"]["apart"]
    for name, rates in node_rates.items():
        assert summary["groups"][name]["rate"] == pytest.approx(sum(rates), rel=1e-9)
    # Each node measured its own 3 s; together only the last 1 s or so.
    assert all(b - a == pytest.approx(3, abs=0.01)
               for a, b in summary["spans"]["nodes"].values())
    assert summary["spans"]["overlap"] < 0.9
    assert any("measured together" in w for w in whole["warnings"])
    assert "measured together" in done.stdout + done.stderr
    # harness view of the merged directory and report.html show the same figures.
    shown = subprocess.run(harness_command("view", str(merged), "--no-ui"),
                           capture_output=True, text=True, env=env(), timeout=60)
    assert shown.returncode == 0, shown.stderr
    rate = f"{summary['groups']['sender']['rate']:.1f}"
    assert f"│ {rate} │" in shown.stdout
    page = (merged / "report.html").read_text()
    assert f"{summary['groups']['sender']['rate']:,.1f}" in page
    assert "measured together" in page
