"""Rate steps within one run (--rate-steps): the group's rate in steps, each a rate (msg/s,
the group's total, as --rate) held for a length, optionally reached by a linear ramp from
the step before:

    1000:30s,5000:30s,10000:60s      three steps, each held for its length
    1000:30s,5000:30s:5s             the second ramps from 1,000 to 5,000 over its first 5 s
    0:10s                            a pause: nothing is due for 10 s

The warm-up (-sw) runs at the first step's rate before the first step; the steps follow one
another from the end of the warm-up, and after the last the group keeps its rate until the
stop (the run's length is the warm-up and the steps, unless -rl says otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.units import finite, parse_duration


@dataclass(frozen=True)
class RateStep:
    rate: float  # msg/s
    seconds: float
    ramp: float = 0.0  # seconds of the step spent ramping from the step before


def parse_steps(text: str) -> list[RateStep]:
    """The steps of `text`; ValueError saying which step is wrong and how."""
    steps = []
    for part in text.split(","):
        fields = [f.strip() for f in part.split(":")]
        if len(fields) not in (2, 3) or not all(fields):
            raise ValueError(f"{part.strip()!r} is not RATE:LENGTH or RATE:LENGTH:RAMP "
                             "(e.g. 1000:30s)")
        rate = finite(fields[0], f"{part.strip()!r}: the rate {fields[0]!r}")
        seconds = parse_duration(fields[1])
        ramp = parse_duration(fields[2]) if len(fields) == 3 else 0.0
        if rate < 0:
            raise ValueError(f"{part.strip()!r}: a rate is 0 or more")
        if seconds <= 0:
            raise ValueError(f"{part.strip()!r}: a step lasts more than 0 s")
        if ramp > seconds:
            raise ValueError(f"{part.strip()!r}: the ramp is longer than the step")
        steps.append(RateStep(rate, seconds, ramp))
    if not any(step.rate for step in steps):
        raise ValueError("every step's rate is 0: nothing would be sent")
    return steps


def parse_burst(text: str) -> tuple[int, float]:
    """(messages, every seconds) from N@EVERY: 500@10s."""
    count, at, every = text.partition("@")
    if not at or not count.strip().isdigit():
        raise ValueError(f"{text!r} is not N@EVERY (e.g. 500@10s: 500 messages at once every "
                         "10 s)")
    seconds = parse_duration(every.strip())
    if int(count) <= 0 or seconds <= 0:
        raise ValueError(f"{text!r}: a burst is 1 message or more, every more than 0 s")
    return int(count), seconds


def burst_share(total: int, streams: int, n: int) -> int:
    """Stream n's (0-based) share of a burst of total over streams: the group's add to it."""
    return total // streams + (1 if n % streams < total % streams else 0)


def asked_rates(steps: list[RateStep]) -> list[float]:
    """Each step's rate as asked over its whole length: its messages over its seconds (a
    step that ramps asks the ramp's mean while it ramps)."""
    out, before = [], steps[0].rate if steps and not steps[0].ramp else 0.0
    for step in steps:
        count = (before + step.rate) / 2.0 * step.ramp + step.rate * (step.seconds - step.ramp)
        out.append(count / step.seconds)
        before = step.rate
    return out


def format_steps(steps: list[RateStep]) -> str:
    """The text parse_steps reads."""
    return ",".join(f"{s.rate:g}:{s.seconds:g}s" + (f":{s.ramp:g}s" if s.ramp else "")
                    for s in steps)


def scale_steps(text: str, factor: float) -> str:
    """The steps with every rate times factor (a group's rate split over nodes)."""
    return format_steps([RateStep(s.rate * factor, s.seconds, s.ramp)
                         for s in parse_steps(text)])


def step_at(ends: list[float], offset: float) -> int:
    """The step (0-based) an interval beginning offset seconds after the start of the run is
    in, of steps ending at ends (step_bounds); the drain's are the last step's."""
    for i, end in enumerate(ends):
        if offset < end - 1e-6:
            return i
    return len(ends) - 1


def step_bounds(steps: list[RateStep], warmup: float) -> list[float]:
    """Where each step ends, in seconds from the start of the run."""
    out, at = [], warmup
    for step in steps:
        at += step.seconds
        out.append(at)
    return out
