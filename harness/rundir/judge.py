"""The thresholds' sink (--slo): judges every measured interval where asked (--slo-interval,
--slo-abort, which stops the run after N missed intervals in a row), and the measured span
when the summary is made; its verdict goes into summary.json as "slo"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.plan.run import RunSpec
from harness.rundir.sinks import Closed, Sink
from harness.stats.slo import interval_figures, targets, thresholds


class Judge(Sink):
    def __init__(self, run: RunSpec, stop: Callable[[str], None], say: Callable[[str], None],
                 nodes: int = 1) -> None:
        self.thresholds = thresholds(run, nodes)
        self.targets = targets(run, nodes)
        self.abort = run.slo_abort
        self.every = run.slo_interval or run.slo_abort > 0
        self.stop, self.say = stop, say
        self.judged = [0] * len(self.thresholds)
        self.missed = [0] * len(self.thresholds)
        self.first_missed: list[int | None] = [None] * len(self.thresholds)
        self.streak = 0
        self.aborted_at: int | None = None

    def interval(self, closed: Closed) -> None:
        if not self.every or closed.view.phase != "measure":
            return
        figures = interval_figures(closed.view)
        missed = []
        for i, threshold in enumerate(self.thresholds):
            passed, value, _ = threshold.judge(figures, self.targets)
            if passed is None:
                continue  # nothing measured it in this interval
            self.judged[i] += 1
            if not passed:
                self.missed[i] += 1
                if self.first_missed[i] is None:
                    self.first_missed[i] = closed.index
                missed.append(f"{threshold.text} ({threshold.shown(value)})")
        self.streak = self.streak + 1 if missed else 0
        if missed:
            self.say(f"interval {closed.index}: missed {'; '.join(missed)}")
        if self.abort and self.streak >= self.abort and self.aborted_at is None:
            self.aborted_at = closed.index
            self.say(f"thresholds missed in {self.streak} intervals in a row: stopping the "
                     f"run (--slo-abort {self.abort})")
            self.stop(f"thresholds (--slo-abort {self.abort})")

    def summarize(self, summary: dict[str, Any]) -> None:
        if not self.thresholds:
            return
        verdicts = []
        for i, threshold in enumerate(self.thresholds):
            passed, value, limit = threshold.judge(summary, self.targets)
            entry: dict[str, Any] = {
                "threshold": threshold.text, "value": value, "limit": limit,
                "shown": f"{threshold.shown(value)} {threshold.comparison} "
                         f"{threshold.shown(limit)}",
                # Nothing measured the figure (no message received, no broker CPU): a
                # threshold that cannot be shown met is missed.
                "passed": bool(passed) and not self.missed[i],
                "span_passed": passed}
            if self.every:
                entry.update(intervals_judged=self.judged[i], intervals_missed=self.missed[i],
                             first_missed_interval=self.first_missed[i])
            verdicts.append(entry)
        summary["slo"] = {"passed": all(v["passed"] for v in verdicts),
                          "thresholds": verdicts, "aborted_at_interval": self.aborted_at}
