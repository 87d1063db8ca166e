"""Thresholds (--slo): the expressions, their units and operators, judged on a summary made
by hand; runs that meet and miss them (exit 0 and 99); --slo-abort; JUnit XML read back by
junitparser's model of the Jenkins JUnit schema; bad expressions as one line."""

from __future__ import annotations

import json

import pytest

from harness.errors import BadInput
from harness.stats.slo import EXIT_SLO, parse

GROUPS = {"sender": ["service", "delay"], "receiver": ["latency", "service"]}
TARGETS = {"sender": 1000.0}
SUMMARY = {
    "groups": {
        "sender": {"rate": 995.0, "sent": 10_000, "errors": 3, "lost": 0, "client_cpu_max": 40.0,
                   "outage_ms": 1500, "service": {"p50": 50, "p90": 80, "p99": 200,
                                                  "p99.9": 900, "max": 2000}},
        "receiver": {"rate": 990.0, "received": 9_990, "errors": 4, "lost": 10,
                     "client_cpu_max": 80.0,
                     "latency": {"p50": 900, "p90": 2500, "p99": 4800, "p99.9": 12_000,
                                 "max": 30_000},
                     "service": {"p50": 10, "p90": 20, "p99": 40, "p99.9": 80, "max": 99}},
    },
    "client_cpu": {"max": 80.0, "mean": 60.0, "machine_max": 45.0},
    "broker_cpu": {"mean": 120.0, "cpu_ms_per_received_msg": 0.15},
    "delivery": [{"missing": 2, "unexpected": 0}, {"missing": 1, "unexpected": 0}],
    "throughput": {"received_by_broker": 995.0, "dispatched": 990.0, "overall": 1985.0,
                   "replication_grade": 0.995},
}


def judged(text: str) -> bool | None:
    return parse(text, GROUPS, TARGETS).judge(SUMMARY, TARGETS)[0]


@pytest.mark.parametrize(("text", "expected"), [
    # times in every unit, both sides of the value (p99 is 4,800 us)
    ("receiver.latency.p99 < 5ms", True), ("receiver.latency.p99 < 4.8ms", False),
    ("receiver.latency.p99 < 5 ms", True), ("sender.rate > 990 /s", True),
    ("receiver.latency.p99 <= 4800us", True), ("receiver.latency.p99 <= 4799us", False),
    ("receiver.latency.p99 < 0.005s", True), ("receiver.latency.p99 > 4800000ns", False),
    ("receiver.latency.p99.9 == 12ms", True), ("receiver.latency.max != 30ms", False),
    ("sender.service.p50 >= 50us", True), ("sender.service.p50 > 50us", False),
    # rates: against the group's target (1,000/s), a number, N/s
    ("sender.rate >= 0.99 * target", True), ("sender.rate >= 0.999 * target", False),
    ("sender.rate > 990/s", True), ("receiver.rate >= 991", False),
    ("receiver.rate / sender.rate >= 0.99", True), ("target - sender.rate < 5", False),
    # counts: a bare count is the run's, summed over the groups
    ("lost == 0", False), ("sender.lost == 0", True), ("errors <= 7", True),
    ("errors < 7", False), ("missing == 3", True),
    # percent; the run's CPU, a group's CPU; the broker's cost
    ("client_cpu < 75%", False), ("sender.client_cpu < 75%", True), ("machine_cpu < 50%", True),
    ("broker_cpu_ms_per_msg < 0.2", True), ("broker_cpu_ms_per_msg < 0.1", False),
    # a bare percentile is the worst group's: the receiver's service p99 is 40, the sender's 200
    ("service.p99 < 100us", False), ("sender.outage < 2s", True),
    ("(sender.rate - receiver.rate) * 2 <= 10", True),
])
def test_each_operator_and_unit_passes_and_fails(text: str, expected: bool) -> None:
    assert judged(text) is expected


@pytest.mark.parametrize(("text", "says"), [
    ("receiver.latency.p99 < 5", "give 5 a unit of time"),
    ("receiver.latancy.p99 < 5ms", "did you mean receiver.latency.p99?"),
    # a group's percentile without its metric: the group's own (a receiver's is latency)
    ("receiver.p99 < 5ms", "did you mean receiver.latency.p99?"),
    ("sender.p50 < 5ms", "did you mean sender.service.p50?"),
    ("thruput > 5", "unknown figure 'thruput'"),
    ("receiver.latency.p95 < 5ms", "a percentile of latency is one of"),
    ("sender.latency.p99 < 5ms", "group sender records no latency"),
    ("receiver.rate >= 0.9 * target", "group receiver has no target rate"),
    ("client_cpu < 5ms", "a percent and a time do not compare"),
    ("lost = 0", "cannot read '= 0'"),
    ("rate > 5", "rate belongs to a group"),
    ("lost <", "ends too soon"),
    ("sender.rate * sender.rate > 1", "cannot multiply a rate by a rate"),
])
def test_bad_expressions_name_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse(text, GROUPS, TARGETS)
    assert caught.value.where == "--slo" and says in caught.value.problem, caught.value.problem


def test_a_figure_nothing_measured_is_not_met() -> None:
    threshold = parse("receiver.latency.p99 < 5ms", GROUPS, TARGETS)
    empty = {"groups": {"receiver": {"rate": 0.0, "received": 0}}}
    assert threshold.judge(empty, TARGETS)[0] is None


LOOPBACK = ["run", "-m", "loopback.Sender", "-d", "q", "-rt", "400", "-rl", "3", "-ss", "1",
            "-g", "-m loopback.Receiver -d q"]


def test_a_run_that_meets_its_thresholds_exits_0(harness):
    met = harness(*LOOPBACK, "--slo", "receiver.latency.p99 < 10s", "--slo",
                  "sender.rate >= 0.95 * target", "--slo", "lost == 0")
    assert met.code == 0, met.stderr
    verdict = json.loads((met.run_dir / "summary.json").read_text())["slo"]
    assert verdict["passed"] and len(verdict["thresholds"]) == 3
    assert "thresholds: all met" in met.stdout


def test_a_run_that_misses_one_exits_99_with_junit_xml(harness, tmp_path):
    junit = tmp_path / "ci" / "slo.xml"
    missed = harness(*LOOPBACK, "--slo", "receiver.latency.p99 < 1ns", "--slo",
                     "sender.sent >= 1", "--slo-interval", "--junit", str(junit))
    assert missed.code == EXIT_SLO, missed.stderr
    summary = json.loads((missed.run_dir / "summary.json").read_text())
    first, second = summary["slo"]["thresholds"]
    assert not summary["slo"]["passed"] and not first["passed"] and second["passed"]
    assert first["intervals_missed"] == first["intervals_judged"] == 3
    assert "FAIL" in missed.stdout and f"(exit {EXIT_SLO})" in missed.stdout
    reported = harness("report", str(missed.run_dir))
    assert reported.code == 0, reported.stderr
    page = (missed.run_dir / "report.html").read_text()
    assert "Thresholds: MISSED" in page and "receiver.latency.p99 &lt; 1ns" in page

    from junitparser import Failure
    from junitparser.xunit2 import JUnitXml
    suites = list(JUnitXml.fromfile(str(junit)))
    assert len(suites) == 1 and suites[0].tests == 2 and suites[0].failures == 1
    cases = {case.name: case for case in suites[0]}
    assert set(cases) == {"receiver.latency.p99 < 1ns", "sender.sent >= 1"}
    assert isinstance(cases["receiver.latency.p99 < 1ns"].result[0], Failure)
    assert cases["sender.sent >= 1"].is_passed


def test_slo_abort_stops_the_run_after_n_missed_intervals(harness):
    done = harness("run", "-m", "loopback.Sender", "-d", "q", "-rt", "200", "-rl", "30", "-ss",
                   "1", "-g", "-m loopback.Receiver -d q", "--slo",
                   "receiver.latency.p50 < 1ns", "--slo-abort", "2", timeout=60)
    assert done.code == EXIT_SLO, done.stderr
    summary = json.loads((done.run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "thresholds (--slo-abort 2)"
    # Stopped within N+1 intervals of 1 s, not at the run length of 30.
    assert summary["measured_seconds"] <= 3.5, summary["measured_seconds"]
    assert summary["slo"]["aborted_at_interval"] == 1


@pytest.mark.parametrize(("flag", "says"), [
    ("sender.latency.p99 < 5ms", "group sender records no latency"),
    ("broker_cpu_ms_per_msg < 0.2", "only with --broker-pid"),
])
def test_a_bad_threshold_is_one_line_and_exit_2_before_the_run(harness, flag, says):
    done = harness(*LOOPBACK, "--slo", flag)
    assert done.code == 2 and done.run_dir is None
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--slo" in lines[0] and says in lines[0], done.stderr


def test_run_help_says_which_exit_code_a_missed_threshold_gives(harness):
    shown = harness("run", "--help", output=False)
    assert shown.code == 0
    text = " ".join(shown.stdout.split())
    assert f"{EXIT_SLO} the run went well but missed a threshold" in text
