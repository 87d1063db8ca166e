"""Capacity search: the highest value (a rate or a thread count) at which a criterion holds.

It steps up by a factor until a probe fails, then bisects between the last pass and the
first failure until the bracket is narrow enough. Load tests are noisy, so the answer is
probed once more before it is given: if it fails then, it counts as a failure and the
bisection goes on below it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_CONFIRMATIONS = 3


@dataclass
class Probe:
    value: float
    passed: bool
    reasons: list[str]  # why it failed; empty when it passed
    row: dict[str, Any] = field(default_factory=dict)  # the results row of the run


@dataclass
class Outcome:
    answer: float | None  # None: even the first value failed
    probes: list[Probe]
    bracket: tuple[float | None, float | None]  # (highest pass, lowest failure)
    reached_max: bool


def capacity(start: float, factor: float, maximum: float, precision: float, integer: bool,
             probe: Callable[[float], Probe]) -> Outcome:
    probes: list[Probe] = []

    def run(value: float) -> bool:
        result = probe(round(value) if integer else value)
        probes.append(result)
        return result.passed

    def narrow_enough(low: float, high: float) -> bool:
        if integer:
            return high - low <= 1
        return (high - low) / low <= precision

    low: float | None = None
    high: float | None = None
    value = start
    while value <= maximum:
        if run(value):
            low = value
            value = min(value * factor, maximum) if value < maximum else maximum * 2
        else:
            high = value
            break
    if low is None:
        return Outcome(None, probes, (None, high), False)
    reached_max = high is None
    confirmations = 0
    while True:
        while high is not None and not narrow_enough(low, high):
            middle = (low + high) / 2
            if integer:
                middle = float(int(middle))
                if middle <= low:
                    break
            if run(middle):
                low = middle
            else:
                high = middle
        if confirmations >= MAX_CONFIRMATIONS or run(low):
            break
        # The answer failed on a second look: treat it as a failure and search below it.
        confirmations += 1
        high = low
        passes = [p.value for p in probes if p.passed and p.value < low]
        if not passes:
            return Outcome(None, probes, (None, high), False)
        low = max(passes)
        reached_max = False
    return Outcome(low, probes, (low, high), reached_max)
