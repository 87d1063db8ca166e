"""Workload shapes: slow consumers (a pace and a processing time), rate steps within a run."""

from __future__ import annotations

import statistics

import pytest

from harness.engine.pacing import Schedule
from harness.plan.steps import RateStep, burst_share
from harness.plan.worktime import WorkTime, parse_work_time
from tests.browser import chart_pixels, chromium
from tests.conftest import near, unique


def counters(result, group):  # type: ignore[no-untyped-def]
    return [r for r in result.records("counters") if r["group"] == group]


def histograms(result, tag):  # type: ignore[no-untyped-def]
    return [r for r in result.records("histogram") if r["tag"] == tag]


def test_a_consumer_at_500_behind_a_producer_at_1000_builds_500_a_second(harness):
    """The consumer takes 500 a second on its schedule, whatever waits: the backlog grows by
    the difference, second by second, and every message is still delivered after the stop."""
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "1000",
                     "-g", "-m loopback.Receiver -d Q --consumer-rate 500",
                     "-rl", "4", "-sw", "1", "-ss", "1", timeout=60)
    assert result.code == 0, result.stderr
    sent = {r["interval"]: r["sent"] for r in counters(result, "sender")
            if r["phase"] != "drain"}
    received = {r["interval"]: r["received"] for r in counters(result, "receiver")
                if r["phase"] != "drain"}
    # Paced at 1,000 a second: the span to 1%, each interval within 5% (beside another
    # test's load an interval's last few may fall into the next, or after the stop).
    assert len(sent) == 4 and near(list(sent.values()), 1000, 0.01), sent
    assert all(abs(n - 1000) <= 50 for n in sent.values()), sent
    # To within the message on either side of a boundary, on a quiet machine; beside
    # another test's load the thread may be held up a few tens of milliseconds, and its
    # schedule (not its wake-ups) sets what it takes: it catches up.
    assert all(abs(received[i] - 500) <= 30 for i in sent), received
    assert abs(sum(received.values()) - 2000) <= 2, received
    backlog = 0
    for i in sorted(sent):
        backlog += sent[i] - received[i]
        assert abs(backlog - 500 * (i + 1)) <= 30
    # Its latency grows as the backlog does: half a second more each second.
    receiver = result.summary["groups"]["receiver"]
    assert receiver["latency"]["p50"] > 1_000_000
    delivery = result.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] >= 3960
    assert delivery["missing"] == delivery["duplicated"] == 0
    # A slow consumer's backlog lifts nothing: no warm-up note.
    assert "warmup_backlog" not in result.summary
    assert "the warm-up left a backlog" not in result.stdout


def test_a_consumer_latency_of_5ms_caps_a_consumer_thread_near_200_a_second(harness):
    """5 ms a message, spent before the next is taken: one thread takes at most 200 a
    second; the time is its own histogram, and the latency still counts from the intended
    send to when the consumer took the message."""
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "400",
                     "-g", "-m loopback.Receiver -d Q --consumer-latency 5ms",
                     "-rl", "3", "-sw", "1", "-ss", "1", "--drain", "1", timeout=60)
    assert result.code == 0, result.stderr
    receiver = result.summary["groups"]["receiver"]
    assert 170 <= receiver["rate"] <= 200
    process = receiver["process"]
    # A sleep of 5 ms takes at least 5 ms, and on a loaded machine somewhat more.
    assert 5000 <= process["p50"] <= 6500
    assert sum(r["count"] for r in histograms(result, "receiver.process")) == \
        sum(r["received"] for r in counters(result, "receiver"))
    assert receiver["latency"]["p50"] > 100_000  # behind: the producer sends twice as fast
    assert "receiver: processing p50" in result.stdout


def test_a_slow_consumer_on_rabbitmq_leaves_the_rest_in_the_queue_and_loses_nothing(
        harness, brokers):
    """An AMQP receiver taking 200 a second with a prefetch of 20, behind a sender at 400:
    RabbitMQ holds what it has not taken (acknowledged after each message's processing),
    and the drain takes it all."""
    queue = unique("q.slow")
    rabbit = brokers["rabbitmq"]["amqp"]
    result = harness("run", "-m", "amqp.Sender", "-d", queue, "-rt", "400", *rabbit,
                     "-g", f"-m amqp.Receiver -d {queue} --consumer-rate 200 --prefetch 20 "
                     f"--ack client --consumer-latency 1ms..2ms {' '.join(rabbit)}",
                     "-rl", "3", "-sw", "0", "-ss", "1", "--drain", "15", timeout=120)
    assert result.code == 0, result.stderr
    measured = [r["received"] for r in counters(result, "receiver") if r["phase"] == "measure"]
    # 200 a second over the measured span, to 1%: a message taken a little after an
    # interval's end counts in the next one (beside the suite's other tests: 197 then 203),
    # and one taken after the span's end in the drain (196, 200, 200).
    # Each interval within a tenth of it: taken at the rate asked, not in bursts as the
    # queue allows (190 beside the suite's load, made up in the next).
    assert near(measured, 200, 0.01), measured
    assert all(abs(n - 200) <= 20 for n in measured), measured
    delivery = result.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] == 1200
    assert delivery["missing"] == delivery["duplicated"] == 0
    process = result.summary["groups"]["receiver"]["process"]
    assert 1000 <= process["p50"] <= 2600


@pytest.mark.parametrize(("args", "flag", "says"), [
    (["-m", "loopback.Sender", "--consumer-rate", "10"], "--consumer-rate",
     "a Sender does not consume"),
    (["-m", "loopback.Requestor", "--consumer-latency", "1ms"], "--consumer-latency",
     "a Requestor does not consume"),
    (["-m", "loopback.Receiver", "--consumer-latency", "5"], "--consumer-latency",
     "'5' is not a duration with its unit"),
    (["-m", "loopback.Receiver", "--consumer-latency", "9ms..1ms"], "--consumer-latency",
     "the range's end is below its start"),
    (["-m", "loopback.Receiver", "--consumer-latency", "1ms:0,2ms:0"], "--consumer-latency",
     "the weights add up to 0"),
    (["-m", "loopback.Receiver", "--consumer-rate", "-1"], "--consumer-rate", ">= 0"),
    (["-m", "loopback.Receiver", "--consumer-rate", "5", "--clients", "4"],
     "--consumer-rate", "not with --clients"),
])
def test_slow_consumer_input_a_group_cannot_have_is_refused_in_one_line(harness, args, flag,
                                                                       says):
    result = harness("run", *args, "-d", "Q", "-rl", "1")
    assert result.code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"harness: error: {flag}") and says in line, line


def test_processing_times_parse_and_draw_what_they_say():
    assert parse_work_time("5ms") == WorkTime("fixed", (0.005,))
    assert parse_work_time("250us..1.5ms") == WorkTime("uniform", (0.00025, 0.0015))
    assert parse_work_time("exp:2ms") == WorkTime("exp", (0.002,))
    mix = parse_work_time("1ms:0.9, 50ms:0.1")
    assert mix == WorkTime("choice", (0.001, 0.05), (0.9, 0.1))
    assert mix.mean == pytest.approx(0.0059)
    for text, mean in (("1ms..3ms", 0.002), ("exp:2ms", 0.002), ("1ms:0.9,50ms:0.1", 0.0059)):
        draw = parse_work_time(text).sampler("thread-1")
        draws = [draw() for _ in range(20000)]
        assert statistics.fmean(draws) == pytest.approx(mean, rel=0.05)
    # Seeded by the thread: the same draws in every run.
    first, again = (parse_work_time("exp:1ms").sampler("t") for _ in range(2))
    assert [first() for _ in range(5)] == [again() for _ in range(5)]


# -- rate steps ------------------------------------------------------------------------------

def times(schedule: Schedule, until_s: float) -> list[float]:
    out = []
    while (t := schedule.next_ns() / 1e9) < until_s:
        out.append(t)
    return out


def test_a_stepped_schedule_asks_each_steps_count_exactly_and_changes_gap_at_once():
    steps = [RateStep(1000, 2.0), RateStep(3000, 2.0), RateStep(500, 2.0, 1.0),
             RateStep(0, 1.0), RateStep(200, 1.0)]
    sent = times(Schedule(0, 1000, steps=steps, phase=0.5), 8.0)
    per_second = [sum(1 for t in sent if s <= t < s + 1) for s in range(8)]
    # Held steps exactly; the ramp from 3,000 to 500 over a second asks its mean; a step of
    # rate 0 asks nothing.
    assert per_second == [1000, 1000, 3000, 3000, 1750, 500, 0, 200]
    assert sent == sorted(sent)
    # At the change from 1,000 to 3,000 the gap is 3,000's from the first message of the step.
    after = [t for t in sent if t >= 2.0][:3]
    assert after[1] - after[0] == pytest.approx(1 / 3000, abs=1e-9)
    assert after[0] - 2.0 < 1 / 3000
    # After the last step its rate stays.
    assert len([t for t in times(Schedule(0, 1000, steps=steps), 10.0) if t >= 8.0]) == 400


def test_a_ramp_schedule_is_what_it_was_before_steps():
    """-rp alone: the rate rises linearly to its rate, then holds (the ramp is the segments'
    first)."""
    sent = times(Schedule(0, 1000, ramp=2.0), 4.0)
    assert len([t for t in sent if t < 2.0]) == 1000  # the ramp's area: 1,000 x 2 / 2
    assert len([t for t in sent if 2.0 <= t < 4.0]) == 2000


def test_a_stepped_run_gives_each_step_its_rate_and_percentiles(harness):
    """Three steps after a one-second warm-up: each step's rate within 1% of what it asked,
    in the summary, summary.json and the replay; the schedule's change at a step adds no
    false latency (each step's p99 send delay stays small)."""
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "--rate-steps",
                     "500:2s,2000:2s,1000:2s:1s", "-g", "-m loopback.Receiver -d Q",
                     "-sw", "1", "-ss", "1", timeout=60)
    assert result.code == 0, result.stderr
    steps = result.summary["steps"]
    assert [(s["step"], s["begin"], s["end"]) for s in steps] == \
        [(1, 1.0, 3.0), (2, 3.0, 5.0), (3, 5.0, 7.0)]
    assert [s["groups"]["sender"]["asked"] for s in steps] == [500, 2000, 1250]
    for step in steps:
        for name in ("sender", "receiver"):
            group = step["groups"][name]
            asked = step["groups"]["sender"]["asked"]
            assert group["rate"] == pytest.approx(asked, rel=0.01), (step, name)
        assert step["groups"]["sender"]["delay"]["p99"] < 50_000
        assert step["groups"]["receiver"]["latency"]["p50"] < 20_000
    # -rl was the warm-up and the steps.
    assert result.summary["measured_seconds"] == pytest.approx(6.0)
    assert "Rate steps" in result.stdout
    shown = harness("view", "--no-ui", str(result.run_dir))
    assert shown.code == 0 and "Rate steps" in shown.stdout
    assert "2000.0" in shown.stdout.split("Rate steps")[1]


@pytest.mark.parametrize(("args", "flag", "says"), [
    (["--rate-steps", "100:2s", "-rt", "10"], "--rate-steps", "give no -rt"),
    (["--rate-steps", "100"], "--rate-steps", "is not RATE:LENGTH"),
    (["--rate-steps", "fast:2s"], "--rate-steps", "is not a number"),
    (["--rate-steps", "100:2"], "--rate-steps", "is not a duration with its unit"),
    (["--rate-steps", "100:2s:3s"], "--rate-steps", "the ramp is longer than the step"),
    (["--rate-steps", "0:2s"], "--rate-steps", "every step's rate is 0"),
    (["--burst", "500"], "--burst", "is not N@EVERY"),
    (["--burst", "500@10s"], "--burst", "needs a rate"),
    (["--rate-steps", "100:1500ms", "-ss", "1"], "--rate-steps", "not a whole number"),
    (["--rate-steps", "100:2s,100:2s", "-rl", "3", "-ss", "1"], "-rl",
     "shorter than the warm-up"),
])
def test_rate_steps_a_run_cannot_have_are_refused_in_one_line(harness, args, flag, says):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", *args)
    assert result.code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"harness: error: {flag}") and says in line, line


def test_rate_steps_on_a_consumer_are_refused(harness):
    result = harness("run", "-m", "loopback.Receiver", "-d", "Q", "--rate-steps", "10:1s")
    assert result.code == 2 and "Receiver does not send on a schedule" in result.stderr


# -- sizes and payloads ------------------------------------------------------------------------

def sent_and_received_bytes(result):  # type: ignore[no-untyped-def]
    rows = result.records("counters")
    return (sum(r["bytes"] for r in rows if r["group"] == "sender"),
            sum(r["bytes"] for r in rows if r["group"] == "receiver"))


def test_sizes_from_a_file_are_sent_in_its_order_and_counted_exactly(harness, tmp_path):
    sizes = tmp_path / "sizes.txt"
    sizes.write_text("# sizes seen in production\n100\n1k\n\n10k\n")
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "200", "-mg", "30",
                     "--size-mix", f"@{sizes}", "-g", "-m loopback.Receiver -d Q --crc 1",
                     "-ss", "1", timeout=60)
    assert result.code == 0, result.stderr
    assert sent_and_received_bytes(result) == (10 * (100 + 1024 + 10240),) * 2
    assert result.summary["groups"]["receiver"]["corrupt"] == 0


def test_a_weighted_size_mix_sends_only_its_sizes_in_about_its_weights(harness):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "1000", "-mg", "200",
                     "--size-mix", "256:0.5,4k:0.5", "-g", "-m loopback.Receiver -d Q",
                     "-ss", "1", timeout=60)
    assert result.code == 0, result.stderr
    sent, received = sent_and_received_bytes(result)
    assert sent == received
    # Every message 256 or 4,096 bytes: the total is 256 x 200 and whole 3,840s.
    large, rest = divmod(sent - 256 * 200, 4096 - 256)
    assert rest == 0 and 60 <= large <= 140


def test_a_uniform_size_range_stays_in_its_bounds(harness):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "1000", "-mg", "200",
                     "--size-mix", "100..200", "-g", "-m loopback.Receiver -d Q", "-ss", "1",
                     timeout=60)
    assert result.code == 0, result.stderr
    sent, received = sent_and_received_bytes(result)
    assert sent == received and 200 * 130 <= sent <= 200 * 170


@pytest.mark.parametrize("source", ["directory", "split file"])
def test_payloads_from_a_directory_or_a_split_file_are_sent_in_turn(harness, tmp_path, source):
    folder = tmp_path / "payloads"
    folder.mkdir()
    (folder / "a.json").write_bytes(b"{" + b"a" * 98 + b"}")
    (folder / "b.json").write_bytes(b"{" + b"b" * 2998 + b"}")
    lines = tmp_path / "lines.txt"
    lines.write_bytes(b"one\ntwo two\n\nthree three three\n")
    # Each file in turn (5 times 100 and 3,000 bytes); each line in turn, the empty one left
    # out (twice 3, 7 and 17).
    bodies, count, expected = (["--payload-dir", str(folder)], 10, 5 * (100 + 3000)) \
        if source == "directory" else \
        (["-mf", str(lines), "--payload-split", "\\n"], 6, 2 * (3 + 7 + 17))
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "200", "-mg", str(count),
                     *bodies, "-g", "-m loopback.Receiver -d Q --crc 1", "-ss", "1", timeout=60)
    assert result.code == 0, result.stderr
    assert sent_and_received_bytes(result) == (expected, expected)
    assert result.summary["groups"]["receiver"]["corrupt"] == 0


@pytest.mark.parametrize(("args", "flag", "says"), [
    (["--size-mix", "4k"], "--size-mix", "is not SIZE:WEIGHT"),
    (["--size-mix", "4x:1"], "--size-mix", "is not a size"),
    (["--size-mix", "9k..1k"], "--size-mix", "the range's end is below its start"),
    (["--size-mix", "@/nonexistent/sizes"], "--size-mix", "cannot read sizes"),
    (["--size-mix", "1k:1", "--payload-dir", "/tmp"], "--payload-dir", "not with --size-mix"),
    (["--payload-dir", "/nonexistent"], "--payload-dir", "is not a directory"),
    (["--payload-split", ","], "--payload-split", "give -mf"),
])
def test_bodies_a_group_cannot_have_are_refused_in_one_line(harness, args, flag, says):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", *args)
    assert result.code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"harness: error: {flag}") and says in line, line


def test_a_stepped_runs_report_draws_rate_against_latency_in_chromium(harness, tmp_path):
    """report.html of a three-step run: the steps' table, and the attempted-against-achieved
    and latency-against-attempted charts, each with its axes' units and a legend, drawn by
    a real browser without a script error."""
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "--rate-steps",
                     "300:1s,900:1s,1800:1s", "-g", "-m loopback.Receiver -d Q", "-ss", "1",
                     timeout=60)
    assert result.code == 0, result.stderr
    done = harness("report", str(result.run_dir))
    assert done.code == 0, done.stderr
    page = result.run_dir / "report.html"
    html = page.read_text()
    assert "<h3>Rate steps" in html
    # The report's steps are the run's own (the merge's intervals are aligned to the clock,
    # not to the start of the run).
    table = html.split("<h3>Rate steps")[1].split("</table>")[0]
    rows = [[cell.split("<")[0] for cell in row.split("<td>")[1:]]
            for row in table.split("<tr>")[2:]]
    assert [(row[0], row[2], row[4]) for row in rows] == [
        (str(step["step"]), name, f"{g['rate']:,.1f}")
        for step in result.summary["steps"] for name, g in step["groups"].items()]
    assert [row[4] for row in rows if row[2] == "sender"] == ["300.0", "900.0", "1,800.0"]
    for title, y_axis in (("Achieved against attempted rate", "msgs/s achieved"),
                          ("Latency against attempted rate", "ms")):
        figure = html.split(f'aria-label="{title}, a point a step"')[1].split("</svg>")[0]
        assert "msgs/s attempted (the steps&#x27; rates)" in figure
        assert f">{y_axis}</text>" in figure
        assert figure.count("<polyline") >= 2  # a line per series, each in the legend
    assert ">receiver latency p99</text>" in html and ">asked</text>" in html
    # Three steps, three points on each line.
    achieved = html.split('aria-label="Achieved against attempted rate')[1].split("</svg>")[0]
    lines = [chunk.split('"')[0] for chunk in achieved.split('points="')[1:]]
    assert all(len(line.split()) == 3 for line in lines)
    assert chromium(page, tmp_path / "report.png", height=6000) == []
    assert chart_pixels(tmp_path / "report.png") > 2000


def test_compare_draws_runs_on_shared_axes_labelled_by_what_differs(harness, tmp_path):
    """Two runs that differ in the sender's rate and the body size: compare.html labels each
    by exactly those settings, tables their figures and draws their distributions and
    throughput on shared axes, in a real browser without a script error."""
    dirs = []
    for rate, size in (("300", "256"), ("900", "1k")):
        out = tmp_path / f"runs-{rate}"
        done = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", rate, "-ms", size,
                       "-g", "-m loopback.Receiver -d Q", "-rl", "2", "-ss", "1", "-o",
                       str(out), output=False, timeout=60)
        assert done.code == 0, done.stderr
        (run_dir,) = out.iterdir()
        dirs.append(run_dir)
    page = tmp_path / "compare.html"
    done = harness("compare", *map(str, dirs), "-o", str(page), output=False)
    assert done.code == 0, done.stderr
    assert "sender.size=256, sender.thread_rate=300.0" in done.stdout
    assert "sender.size=1024, sender.thread_rate=900.0" in done.stdout
    html = page.read_text()
    assert "<h1>harness compare: receiver.latency</h1>" in html
    for title in ("receiver.latency: percentile distribution (nines axis)",
                  "Throughput: messages received per second"):
        figure = html.split(f'aria-label="{title}"')[1].split("</svg>")[0]
        assert figure.count("<polyline") == 2 and ">run 1</text>" in figure and \
            ">run 2</text>" in figure
    assert ">percentile</text>" in html and ">msgs/s</text>" in html
    # Each run paced at its own rate (a sweep's points): achieved and latency against it.
    achieved = html.split('aria-label="Achieved against attempted rate, a point a run"')[1]
    assert ">msgs/s attempted (each run&#x27;s producers)</text>" in achieved.split("</svg>")[0]
    assert 'aria-label="receiver.latency against attempted rate, a point a run"' in html
    assert chromium(page, tmp_path / "compare.png") == []
    assert chart_pixels(tmp_path / "compare.png", colours=2) > 1000
    # A sweep merged into one report (harness merge --sweep) draws the same points first.
    from harness.merge.build import report_run
    from harness.merge.report import render
    swept = render({"runs": [report_run(d).report["runs"][0] for d in dirs]}, "sweep")
    assert swept.index('aria-label="Achieved against attempted rate, a point a run"') < \
        swept.index("<h2>Run ")
    alone = harness("compare", str(dirs[0]), "-o", str(page), output=False)
    assert alone.code == 2 and "give two runs or more" in alone.stderr


def test_compare_lines_up_a_queue_run_and_a_topic_run_by_role(harness, tmp_path):
    """A queue's run (sender, receiver) beside a topic's (publisher, subscriber), chosen by
    --last as a user lists them: they share no group name, so the consumer's latency of each
    is compared; the labels name the modules, not the options only one of them set; a tag
    one run lacks is refused naming what the runs share by role."""
    for producer, consumer in (("Sender", "Receiver"), ("Publisher", "Subscriber")):
        done = harness("run", "-m", f"loopback.{producer}", "-d", "D", "-rt", "300",
                       "-g", f"-m loopback.{consumer} -d D", "-rl", "1", "-ss", "1", "-o",
                       str(tmp_path / "history" / producer), output=False, timeout=60)
        assert done.code == 0, done.stderr
    page = tmp_path / "compare.html"
    done = harness("compare", "--last", "2", "--runs-dir", str(tmp_path / "history"), "-o",
                   str(page), output=False)
    assert done.code == 0, done.stderr
    assert "wrote " in done.stdout and "(consumer.latency: by role, each run's one consumer " \
        "group: receiver.latency, subscriber.latency)" in done.stdout, done.stdout
    labels = [line for line in done.stdout.splitlines() if line.startswith("  ")]
    assert labels[0].endswith("receiver.module=loopback.Receiver, "
                              "sender.module=loopback.Sender"), labels
    assert labels[1].endswith("publisher.module=loopback.Publisher, "
                              "subscriber.module=loopback.Subscriber"), labels
    html = page.read_text()
    assert "<h1>harness compare: consumer.latency</h1>" in html
    figure = html.split('aria-label="consumer.latency: percentile distribution (nines axis)"')[
        1].split("</svg>")[0]
    assert figure.count("<polyline") == 2
    wrong = harness("compare", "--last", "2", "--runs-dir", str(tmp_path / "history"), "--tag",
                    "receiver.latency", "-o", str(page), output=False)
    assert wrong.code == 2 and "RUN_DIR" not in wrong.stderr, wrong.stderr
    assert "--tag: 'receiver.latency' is not in" in wrong.stderr
    assert "by role, the runs share consumer.latency" in wrong.stderr, wrong.stderr


# -- backlog, then drain -----------------------------------------------------------------------

def test_consumers_held_until_the_backlog_then_drain_it(harness):
    """A receiver held while a sender at 2,000/s fills its queue past 5,000 (seen at each
    interval's end: after 3 s, 6,000), then released: it takes the backlog and keeps up; the
    summary gives the fill, the drain and the drain rate, and nothing is lost."""
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "2000", "--backlog",
                     "5000", "-g", "-m loopback.Receiver -d Q", "-rl", "6", "-ss", "1",
                     timeout=60)
    assert result.code == 0, result.stderr
    received = [r["received"] for r in result.records("counters")
                if r["group"] == "receiver" and r["phase"] == "measure"]
    assert received[:3] == [0, 0, 0] and received[3] >= 6000
    backlog = result.summary["backlog"]
    assert backlog["goal"] == 5000 and backlog["unit"] == "messages"
    assert backlog["at_release"] == 6000 and backlog["fill_seconds"] == pytest.approx(3.0)
    assert backlog["drain_seconds"] >= 1.0 and backlog["drain_rate"] > 2000
    [release] = [r for r in result.records("event") if r["action"] == "release"]
    assert release["backlog"] == 6000 and 3.0 <= release["time"] < 4.5
    assert "backlog 6,000 messages (consumers held)" in result.stdout
    assert "backlog: filled to 6,000 messages (asked 5,000 messages) in 3.0 s" in result.stdout
    delivery = result.summary["delivery"][0]
    # 12,000 due; beside another test's load the last one or two may be due after the stop
    # comes (counted unsent), never lost.
    assert delivery["expected"] == delivery["received"] >= 11990
    assert delivery["missing"] == delivery["duplicated"] == 0


def test_a_backlog_on_rabbitmq_is_held_by_the_broker_and_drained_with_nothing_lost(
        harness, brokers):
    """20,000 messages left in a RabbitMQ queue (the held receiver's prefetch of 100 aside),
    then drained while the sender keeps sending 4,000 a second."""
    queue = unique("q.backlog")
    rabbit = brokers["rabbitmq"]["amqp"]
    result = harness("run", "-m", "amqp.Sender", "-d", queue, "-rt", "4000", *rabbit,
                     "-g", f"-m amqp.Receiver -d {queue} --prefetch 100 --ack client "
                     f"{' '.join(rabbit)}",
                     "--backlog", "20000", "-rl", "12", "-ss", "1", "--drain", "15",
                     timeout=120)
    assert result.code == 0, result.stderr
    backlog = result.summary["backlog"]
    assert backlog["at_release"] >= 20000
    assert "drain_seconds" in backlog and backlog["drain_rate"] > 4000
    held = [r["received"] for r in result.records("counters")
            if r["group"] == "receiver" and r["interval"] < backlog["fill_seconds"] - 1]
    assert sum(held) <= 100  # the prefetch, at most: the rest stayed with RabbitMQ
    delivery = result.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] >= 40000
    assert delivery["missing"] == delivery["duplicated"] == 0
    assert result.summary["groups"]["receiver"]["lost"] == 0


@pytest.mark.parametrize(("args", "says"), [
    (["--backlog", "lots", "-g", "-m loopback.Receiver -d Q"], "is a number of messages"),
    (["--backlog", "0", "-g", "-m loopback.Receiver -d Q"], "a backlog is more than 0"),
    (["--backlog", "100"], "no Receiver or Subscriber to hold"),
    (["--backlog", "100", "-g", "-m loopback.Receiver -d Q --clients 2"],
     "not with consumers of --clients"),
])
def test_backlogs_a_run_cannot_have_are_refused_in_one_line(harness, args, says):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", *args)
    assert result.code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("harness: error: --backlog") and says in line, line


# -- bursts ------------------------------------------------------------------------------------

def test_a_burst_adds_its_messages_at_one_instant_every_period():
    sent = times(Schedule(0, 100, phase=0.5, burst=(334, 2.0)), 6.0)
    per_second = [sum(1 for t in sent if s <= t < s + 1) for s in range(6)]
    assert per_second == [100, 100, 434, 100, 434, 100]
    assert sent.count(2.0) == sent.count(4.0) == 334 and sent == sorted(sent)
    # A burst of 1,000 over three threads: 334, 333 and 333, together.
    assert [burst_share(1000, 3, n) for n in range(3)] == [334, 333, 333]


def test_bursts_run_beside_the_rate_and_each_is_timed_from_its_instant(harness):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "100", "-nt", "3",
                     "--burst", "1000@2s", "-g", "-m loopback.Receiver -d Q", "-rl", "5",
                     "-ss", "1", timeout=60)
    assert result.code == 0, result.stderr
    sent = [r["sent"] for r in result.records("counters")
            if r["group"] == "sender" and r["phase"] == "measure"]
    assert sent == [300, 300, 1300, 300, 1300]
    delivery = result.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] == 3500


def test_a_backlog_never_reached_releases_the_consumers_at_the_stop(harness):
    result = harness("run", "-m", "loopback.Sender", "-d", "Q", "-rt", "500", "--backlog",
                     "100000", "-g", "-m loopback.Receiver -d Q", "-rl", "2", "-ss", "1",
                     timeout=60)
    assert result.code == 0, result.stderr
    assert "fill_seconds" not in result.summary["backlog"]
    assert "backlog: never reached 100,000 messages" in result.stdout
    delivery = result.summary["delivery"][0]
    assert delivery["expected"] == delivery["received"] == 1000
