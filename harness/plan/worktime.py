"""A consumer's processing time per message (--consumer-latency): fixed, or drawn from a
distribution.

    5ms                  every message 5 ms
    1ms..10ms            uniform between 1 and 10 ms
    exp:5ms              exponential, mean 5 ms
    1ms:0.9,50ms:0.1     1 ms for 90% of messages, 50 ms for 10% (weights need not sum to 1)

Durations take a unit: us, ms, s (or m, h).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from harness.units import parse_duration, parse_range, parse_weighted


@dataclass(frozen=True)
class WorkTime:
    """kind: fixed, uniform, exp or choice; values in seconds (choice: with weights)."""

    kind: str
    values: tuple[float, ...]
    weights: tuple[float, ...] = ()

    @property
    def mean(self) -> float:
        if self.kind == "uniform":
            return sum(self.values) / 2
        if self.kind == "choice":
            return sum(v * w for v, w in zip(self.values, self.weights, strict=True)) / \
                sum(self.weights)
        return self.values[0]

    def sampler(self, seed: str) -> Callable[[], float]:
        """Seconds for each message in turn; seeded, so a thread's draws are the same in
        every run."""
        rng = random.Random(seed)
        values = self.values
        if self.kind == "fixed":
            return lambda: values[0]
        if self.kind == "uniform":
            low, high = values
            return lambda: rng.uniform(low, high)
        if self.kind == "exp":
            rate = 1.0 / values[0]
            return lambda: rng.expovariate(rate)
        weights = self.weights
        return lambda: rng.choices(values, weights)[0]


def parse_work_time(text: str) -> WorkTime:
    """A WorkTime from its text (the module's grammar); ValueError saying what is wrong."""
    text = text.strip()
    if text.startswith("exp:"):
        mean = parse_duration(text[4:])
        if mean <= 0:
            raise ValueError("an exponential's mean must be above 0")
        return WorkTime("exp", (mean,))
    if ".." in text:
        return WorkTime("uniform", parse_range(text, parse_duration))
    if "," in text or ":" in text:
        return WorkTime("choice", *parse_weighted(text, parse_duration, "DURATION"))
    return WorkTime("fixed", (parse_duration(text),))
