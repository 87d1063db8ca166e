"""The output layer: records defined once (harness.stats.records) and read back through the
same definitions, sinks handed every interval in order, and the manual's worked example of
a new output running as written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.engine.runner import Controller
from harness.plan.group import group_spec
from harness.plan.run import RunSpec
from harness.rundir.sinks import Closed, Sink
from harness.stats.histogram import encode, new_histogram
from harness.stats.recorder import COUNTERS
from harness.stats.records import RECORDS, into_reports, report_records, required
from harness.stats.reports import GroupPart, IntervalReport
from tests.conftest import read_jsonl, run_manual_example

ROOT = Path(__file__).resolve().parent.parent


def test_a_reports_records_read_back_into_the_same_report() -> None:
    histogram = new_histogram()
    for value in (120, 340, 5600):
        histogram.record_value(value)
    counters = {name: n for n, name in enumerate(COUNTERS, 1)}
    report = IntervalReport(3, 4242, 7, 1_700_000_000_250_000_000, 1.0, False, 37.5,
                            "measure", "n1",
                            {0: GroupPart(counters, {"latency": encode(histogram)}, 2, 4, 5, 0)})
    records = report_records(report, "r", "n1", ["sender"], 1_700_000_000.25, "measure")
    back: dict[tuple[str, int, str], IntervalReport] = {}
    for record in records:
        into_reports(record, back, {"sender": 0})
    (again,) = back.values()
    assert (again.process, again.index, again.length_s, again.cpu) == (3, 7, 1.0, 37.5)
    # the start is written in epoch seconds, a float: exact to the microsecond
    assert abs(again.start_ns - report.start_ns) < 1000
    part = again.groups[0]
    assert part.counters == counters
    assert (part.clamped, part.threads_up, part.threads) == (2, 4, 5)
    assert part.histogram("latency").get_total_count() == 3
    assert part.histogram("latency").get_max_value() == histogram.get_max_value()


def written_fields_are_declared(record: dict[str, Any]) -> list[str]:
    kind = record["type"]
    declared = set(RECORDS[kind].__annotations__)
    if kind == "counters":
        declared |= set(COUNTERS)
    wrong = [f"{kind} lacks {name}" for name in required(kind) if name not in record]
    if kind != "event":  # an event's detail is its own
        wrong += [f"{kind} has {name}, not declared" for name in record
                  if name not in declared]
    return wrong


class Seen(Sink):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def report(self, report: IntervalReport, records: list[dict[str, Any]]) -> None:
        self.calls.append(("report", (report.index, len(records))))

    def interval(self, closed: Closed) -> None:
        self.calls.append(("interval", closed.index))

    def end(self, records: list[dict[str, Any]]) -> None:
        self.calls.append(("end", len(records)))

    def close(self) -> None:
        self.calls.append(("close", None))


def test_a_sink_is_handed_every_report_and_interval_in_order_then_the_end(tmp_path) -> None:
    run = RunSpec(groups=[group_spec({"module": "loopback.Sender", "destination": "S",
                                      "thread-rate": 100}),
                          group_spec({"module": "loopback.Receiver", "destination": "S"})],
                  duration=2.0, interval=0.5, drain=1.0, output=str(tmp_path))
    controller = Controller(run, lambda view: None, print)
    seen = Seen()
    controller.sinks.append(seen)
    result = controller.execute()
    assert result.exit_code == 0
    kinds = [kind for kind, _ in seen.calls]
    assert kinds[-2:] == ["end", "close"] and kinds.count("close") == 1
    closed = [index for kind, index in seen.calls if kind == "interval"]
    assert closed == list(range(len(closed))) and len(closed) >= 4
    # Each interval's reports came before it closed; the files had every record given.
    for index in closed:
        assert seen.calls.index(("report", next(v for k, v in seen.calls if k == "report"
                                                and v[0] == index))) < \
            seen.calls.index(("interval", index))
    records = read_jsonl(result.run_dir / "intervals.jsonl")
    handed = sum(v[1] for k, v in seen.calls if k == "report")
    assert handed == sum(r["type"] in ("process", "counters", "histogram") for r in records)
    wrong = [w for record in records for w in written_fields_are_declared(record)]
    assert not wrong, wrong


def test_the_manuals_worked_example_of_an_output_runs(tmp_path: Path) -> None:
    done = run_manual_example(
        "IntervalCsv", "interval_csv", "import harness.engine.runner as runner, "
        "harness.rundir.sinks as sinks; from interval_csv import IntervalCsv; "
        "runner.RUN_DIR_SINKS = (sinks.RunFiles, IntervalCsv)",
        ["run", "-m", "loopback.Sender", "-d", "Q", "-rt", "200", "-rl", "3", "-sw", "1", "-ss",
         "1", "-o", str(tmp_path / "runs"), "-g", "-m loopback.Receiver -d Q"], tmp_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    lines = (run_dir / "interval.csv").read_text().splitlines()
    assert lines[0] == "interval,group,rate,p99_us"
    rows = [line.split(",") for line in lines[1:]]
    intervals = [r for r in read_jsonl(run_dir / "intervals.jsonl") if r["type"] == "host"]
    assert len(rows) == 2 * len(intervals)
    # Whole measured intervals of the sender: its paced rate.
    measured = [float(rate) for index, group, rate, _ in rows
                if group == "sender" and 1 <= int(index) < len(intervals) - 2]
    assert measured and all(rate == pytest.approx(200, rel=0.05) for rate in measured)
    assert all(p99 for _, group, _, p99 in rows if group == "receiver")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["groups"]["receiver"]["lost"] == 0
