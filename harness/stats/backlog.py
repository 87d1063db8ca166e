"""The backlog: what producers sent (times the fan-out) minus what consumers received,
counted interval by interval from the start of the run."""

from __future__ import annotations

from harness.spec.run import RunSpec
from harness.spec.topology import endpoints
from harness.stats.figures import kept
from harness.stats.intervals import IntervalView


class Backlog:
    """Fed each interval's view in order; `after` gives the backlog at its end. Destinations
    whose consumers filter (and so never receive everything) are left out."""

    def __init__(self, run: RunSpec) -> None:
        self.checked = [(p.copies, [run.groups[i].name for i in p.producers],
                         [run.groups[i].name for i in p.consumers])
                        for p in endpoints(run).values() if p.consumers and not p.filtered]
        self.value = 0

    def after(self, view: IntervalView) -> int:
        for copies, producers, consumers in self.checked:
            for name in producers:
                if name in view.groups:
                    self.value += kept(view.groups[name].counters) * copies
            for name in consumers:
                if name in view.groups:
                    c = view.groups[name].counters
                    self.value -= c["received"] - c["duplicated"]
        return self.value
