"""A profile run end to end: each sweep point (or search probe) one run in the profile's
run-directory tree, the destinations drained and the broker left to settle between runs, and
the results table (or the search's probes and answer) printed and written."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console

from harness.engine.runner import RunResult
from harness.experiments import results
from harness.experiments.profile import Point, Profile, with_value
from harness.experiments.search import Outcome, Probe, capacity
from harness.modules.interface.roles import ROLES
from harness.plan.run import RunSpec
from harness.plan.topology import endpoints
from harness.rundir.reader import load as load_run
from harness.stats.slo import EXIT_SLO

Execute = Callable[[RunSpec], RunResult]
DRAIN_IDLE_S = 1.0
DRAIN_MAX_S = 60.0
SETTLE_CPU_MAX_S = 60.0


class Experiment:
    def __init__(self, profile: Profile, execute: Execute, console: Console) -> None:
        self.profile = profile
        self.execute = execute
        self.console = console
        first = profile.points[0].run
        self.root = Path(first.output) / \
            f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{profile.name}"
        self.exit_code = 0
        self.runs = 0

    def say(self, text: str, style: str | None = None) -> None:
        self.console.print(text, markup=False, highlight=False, style=style)

    # -- one run
    def _run(self, run: RunSpec, labels: dict[str, Any]) -> tuple[dict[str, Any], RunResult]:
        if self.runs:
            self.settle(run)
        self.runs += 1
        result = self.execute(replace(run, output=str(self.root)))
        # A search's probes miss thresholds by design: there they are criteria, not the
        # profile's verdict.
        if result.exit_code != EXIT_SLO or self.profile.search is None:
            self.exit_code = self.exit_code or result.exit_code
        views = load_run(result.run_dir).replay(histograms=False).views()
        row = results.row(run, result.summary, views, self.profile.rate, self.profile.latency,
                          labels)
        verdict = result.summary.get("slo")
        if verdict:
            row["thresholds"] = "met" if verdict["passed"] else "missed: " + "; ".join(
                v["threshold"] for v in verdict["thresholds"] if not v["passed"])
        row["run"] = result.run_dir.name
        return row, result

    def settle(self, run: RunSpec) -> None:
        """Between runs: drain what is left on the queues the last run used, then wait."""
        settle = self.profile.settle
        if settle.drain:
            for line in drain(run):
                self.say(f"settle: {line}", style="dim")
        if settle.wait:
            time.sleep(settle.wait)
        if settle.broker_cpu_below is not None and run.broker_pid:
            broker = psutil.Process(run.broker_pid)
            deadline = time.monotonic() + SETTLE_CPU_MAX_S
            broker.cpu_percent(None)
            while time.monotonic() < deadline:
                cpu = broker.cpu_percent(0.5)
                if cpu < settle.broker_cpu_below:
                    break
            else:
                self.say(f"settle: broker CPU still above {settle.broker_cpu_below:g}% after "
                         f"{SETTLE_CPU_MAX_S:g} s; going on", style="yellow")

    # -- a sweep
    def sweep(self) -> int:
        rows = []
        points = self.profile.points
        for point in points:
            if len(points) > 1:
                labels = ", ".join(f"{k}={v}" for k, v in point.labels.items())
                self.say(f"point {point.index + 1}/{len(points)}: {labels}", style="bold")
            rows.append(self._run(point.run, point.labels)[0])
        self.root.mkdir(parents=True, exist_ok=True)
        note = (f"Profile {self.profile.path.name}; Message Rate is {self.profile.rate}; CPU "
                "ms/msg = (1000 x broker %CPU/100) / rate, with %CPU of one core (the WMB "
                "report counted 1024 ms a second); backlog: what producers sent (times the "
                "fan-out) minus what consumers received, over the measured phase.")
        files = results.write(rows, self.root, "results", note)
        self.console.print(results.table(rows, f"{self.profile.name}: results"))
        self.say(f"results: {', '.join(str(f) for f in files)}")
        return self.exit_code

    # -- a capacity search, at each sweep point
    def search(self) -> int:
        spec = self.profile.search
        assert spec is not None
        answers = []
        for point in self.profile.points:
            outcome = self._search_point(point)
            answer = {k.removeprefix("groups."): v for k, v in point.labels.items()}
            answer.update({spec.field.removeprefix("groups."): outcome.answer,
                           "probes": len(outcome.probes),
                           "bracket": _bracket(outcome), "reached max": outcome.reached_max})
            answers.append(answer)
        self.root.mkdir(parents=True, exist_ok=True)
        files = results.write(answers, self.root, "search", _criteria_text(self.profile))
        self.console.print(results.table(answers, f"{self.profile.name}: capacity"))
        self.say(f"search: {', '.join(str(f) for f in files)}")
        return self.exit_code

    def _search_point(self, point: Point) -> Outcome:
        spec = self.profile.search
        assert spec is not None
        integer = spec.field.endswith(".threads")
        rows: list[dict[str, Any]] = []

        def probe(value: float) -> Probe:
            run = with_value(point, spec.field, value, self.profile.path).run
            row, result = self._run(run, {**point.labels, spec.field: value})
            reasons = judge(run, row, result.summary, spec.field, spec.criteria)
            reasons += [f"threshold {v['threshold']} missed ({v['shown']})" for v in
                        (result.summary.get("slo") or {}).get("thresholds", [])
                        if not v["passed"]]
            row["verdict"] = "pass" if not reasons else "FAIL: " + "; ".join(reasons)
            rows.append(row)
            self.say(f"probe {len(rows)}: {spec.field} = {value:g}: {row['verdict']} "
                     f"(rate {row['Message Rate (msgs/s)']:,.1f}/s, backlog {row['backlog']})",
                     style="green" if not reasons else "red")
            return Probe(value, not reasons, reasons, row)

        outcome = capacity(spec.start, spec.factor, spec.max, spec.precision, integer, probe)
        self.root.mkdir(parents=True, exist_ok=True)
        stem = f"probes-p{point.index + 1:03d}" if len(self.profile.points) > 1 else "probes"
        results.write(rows, self.root, stem, _criteria_text(self.profile))
        if outcome.answer is None:
            self.say(f"capacity: none: the first probe ({spec.start:g}) already fails",
                     style="bold red")
        else:
            more = " (the search reached max; the capacity may be higher)" \
                if outcome.reached_max else ""
            self.say(f"capacity: {spec.field} = {outcome.answer:g}, {_bracket(outcome)}, "
                     f"{len(outcome.probes)} probes{more}", style="bold")
        return outcome

    def execute_all(self) -> int:
        code = self.search() if self.profile.search else self.sweep()
        (self.root / "profile.json").write_text(json.dumps(
            {"profile": str(self.profile.path), "name": self.profile.name,
             "points": [p.labels for p in self.profile.points]}, indent=1, default=str))
        return code


def _bracket(outcome: Outcome) -> str:
    low, high = outcome.bracket
    return f"passes at {low:g}" + (f", fails at {high:g}" if high is not None else "") \
        if low is not None else f"fails at {high:g}"


def _criteria_text(profile: Profile) -> str:
    spec = profile.search
    if spec is None:
        return ""
    c = spec.criteria
    parts = []
    if c.p99_ms is not None:
        parts.append(f"p99 <= {c.p99_ms:g} ms")
    if c.p50_ms is not None:
        parts.append(f"p50 <= {c.p50_ms:g} ms")
    if c.loss is not None:
        parts.append(f"lost + duplicated <= {c.loss}")
    if c.backlog:
        parts.append("backlog not growing")
    if c.backlog_max is not None:
        parts.append(f"backlog at the end <= {c.backlog_max:,}")
    if not spec.field.endswith(".threads"):
        parts.append(f"achieved rate >= {c.achieved:.0%} of the target")
    return f"Profile {profile.path.name}; criterion: " + ", ".join(parts) + "."


def judge(run: RunSpec, row: dict[str, Any], summary: dict[str, Any], dotted: str,
          criteria: Any) -> list[str]:
    """Why a probe fails its criterion (empty: it passes)."""
    reasons = []
    metric = next((k for k in row if k.endswith(" p99 ms")), None)
    if criteria.p99_ms is not None and metric is not None:
        p99 = row[metric]
        if p99 is None or p99 > criteria.p99_ms:
            reasons.append(f"p99 {p99} ms > {criteria.p99_ms:g} ms")
    p50_key = next((k for k in row if k.endswith(" p50 ms")), None)
    if criteria.p50_ms is not None and p50_key is not None:
        p50 = row[p50_key]
        if p50 is None or p50 > criteria.p50_ms:
            reasons.append(f"p50 {p50} ms > {criteria.p50_ms:g} ms")
    if criteria.loss is not None and row["lost"] + row["duplicated"] > criteria.loss:
        reasons.append(f"{row['lost']} lost, {row['duplicated']} duplicated")
    if criteria.backlog and row["backlog"] == "growing":
        reasons.append("backlog growing")
    most = getattr(criteria, "backlog_max", None)
    if most is not None and row.get("backlog at end", 0) > most:
        reasons.append(f"backlog {row['backlog at end']:,} > {most:,}")
    if not dotted.endswith(".threads"):
        group = next(g for g in run.groups if g.name == dotted.split(".")[1]) \
            if dotted.startswith("groups.") else None
        if group is not None and ROLES[group.role].produces:
            target = group.rate or group.thread_rate * group.threads * group.processes
            entry = summary["groups"][group.name]
            # The rate the broker took (harness.stats.figures.taken): a probe whose sends it
            # refused, or whose outcome a fault hid, did not pass.
            achieved = entry["rate"]
            if target and achieved < criteria.achieved * target:
                reasons.append(f"achieved {achieved:,.1f}/s of {target:,.1f}/s accepted by "
                               "the broker")
    return reasons


def drain(run: RunSpec) -> list[str]:
    """Consume what is left on the network queues a run used; one line per queue drained."""
    from harness.modules import transport_class
    from harness.modules.interface.base import connect
    from harness.modules.interface.message import Destination
    from harness.modules.interface.optional import Acknowledgements

    lines = []
    for point in endpoints(run).values():
        groups = [run.groups[i] for i in point.groups]
        if point.kind != "queue" or not point.name or groups[0].embedded:
            continue  # the embedded broker starts empty for every run; topics keep nothing
        # Each broker the groups of this queue connect to, once.
        for g in {(g.host, g.port): g for g in groups}.values():
            settings = replace(g.settings(run.node, 0, 0), selector=None, durable_name=None,
                               transacted=False)
            transport = transport_class(g.transport)(settings)
            count = 0
            try:
                connect(transport)
                transport.subscribe(Destination("queue", point.name))
                deadline = time.monotonic() + DRAIN_MAX_S
                while time.monotonic() < deadline and \
                        (message := transport.receive(DRAIN_IDLE_S)) is not None:
                    if isinstance(transport, Acknowledgements):
                        transport.ack(message)
                    count += 1
            except Exception as exc:
                lines.append(f"cannot drain {g.transport}:{point.name}: {exc}")
                continue
            finally:
                with contextlib.suppress(Exception):
                    transport.close()
            if count:
                lines.append(f"drained {count} messages left on {g.transport}:{point.name}")
    return lines
