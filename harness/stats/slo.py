"""Thresholds on a run's figures (--slo): a comparison of expressions over the figures as
summary.json names them, with units, judged on the measured span and, where asked, on every
measured interval.

    receiver.latency.p99 < 5ms        sender.rate >= 0.99 * target       lost == 0
    errors <= 10                      client_cpu < 75%                   broker_cpu_ms_per_msg < 0.2

A name is GROUP.FIGURE, or a bare FIGURE: the group the expression names elsewhere (target
in `sender.rate >= 0.99 * target` is the sender's), else the whole run (counts summed over
the groups, percentiles the worst group's, and the run-wide figures). Times need a unit
(ns, us, ms, s); CPU is in % of one core; rates are per second (a bare number or N/s).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.errors import BadInput
from harness.stats.recorder import METRICS
from harness.units import format_us

# The exit code of a run whose thresholds failed (k6 uses the same): 1 stays for a run that
# failed, 2 for bad input.
EXIT_SLO = 99

COUNTS = ("sent", "received", "bytes", "errors", "lost", "duplicated", "reordered", "commits",
          "corrupt", "timeouts", "reconnects", "foreign", "unsent", "late", "refused",
          "in_doubt", "redelivered", "rebalances", "connect_failed", "lost_at_tail", "clamped",
          # of the measured span's sends: taken by the broker, and refused or in doubt
          "taken", "untaken", "failed",
          # the messages waiting for a group's consumers where its transport reads them
          # (Kafka's lag, a queue's depth, a stream consumer's pending): messages, as a
          # count is, though a gauge: the summary's is the last interval's
          "lag")
# A producer's sends by outcome, warm-up and drain included (harness.stats.figures.outcomes):
# counts the summary keeps under the group's `outcomes`.
OUTCOMES = ("attempted", "confirmed", "written")
# A group's figures that are not counts: their kind, and where the summary keeps them.
GROUP_FIGURES: dict[str, tuple[str, Callable[[Mapping[str, Any]], float | None]]] = {
    "rate": ("rate", lambda g: g.get("rate")),
    "client_cpu": ("percent", lambda g: g.get("client_cpu_max")),
    "client_us_per_msg": ("number", lambda g: g.get("client_us_per_msg")),
    "per_core_rate": ("rate", lambda g: g.get("per_core_rate")),
    "outage": ("time", lambda g: None if g.get("outage_ms") is None else
               g["outage_ms"] * 1000.0),
}
PERCENTILES = ("p50", "p90", "p99", "p99.9", "max")
# The run's own figures.
RUN_FIGURES: dict[str, tuple[str, Callable[[Mapping[str, Any]], float | None]]] = {
    "client_cpu": ("percent", lambda s: (s.get("client_cpu") or {}).get("max")),
    "client_cpu_mean": ("percent", lambda s: (s.get("client_cpu") or {}).get("mean")),
    "machine_cpu": ("percent", lambda s: (s.get("client_cpu") or {}).get("machine_max")),
    "broker_cpu": ("percent", lambda s: (s.get("broker_cpu") or {}).get("mean")),
    "broker_cpu_ms_per_msg": ("number", lambda s: (s.get("broker_cpu") or {}).get(
        "cpu_ms_per_received_msg")),
    "missing": ("count", lambda s: _delivery(s, "missing")),
    "unexpected": ("count", lambda s: _delivery(s, "unexpected")),
    "received_by_broker": ("rate", lambda s: (s.get("throughput") or {}).get(
        "received_by_broker")),
    "dispatched": ("rate", lambda s: (s.get("throughput") or {}).get("dispatched")),
    "overall": ("rate", lambda s: (s.get("throughput") or {}).get("overall")),
    "replication_grade": ("number", lambda s: (s.get("throughput") or {}).get(
        "replication_grade")),
}
UNITS = {"ns": ("time", 1e-3), "us": ("time", 1.0), "µs": ("time", 1.0), "ms": ("time", 1e3),
         "s": ("time", 1e6), "%": ("percent", 1.0), "/s": ("rate", 1.0)}
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
    "<": operator.lt, ">": operator.gt}

_TOKEN = re.compile(r"""\s*(?:
    (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(?P<unit>ns|us|µs|ms|s\b|%|/s)?
  | (?P<name>[A-Za-z_]\w*(?:\.(?:p\d+(?:\.\d+)?|[A-Za-z_]\w*))*)
  | (?P<op><=|>=|==|!=|<|>|[-+*/()]))""", re.VERBOSE)


def _delivery(summary: Mapping[str, Any], key: str) -> float | None:
    delivery = summary.get("delivery")
    return None if delivery is None else sum(d.get(key, 0) for d in delivery)


@dataclass(frozen=True)
class Figure:
    """A name in an expression, resolved: the group (None: the run) and the figure."""

    group: str | None
    figure: str  # a count, a GROUP_FIGURES or RUN_FIGURES key, "target", or METRIC.PCT
    kind: str

    def value(self, figures: Mapping[str, Any], targets: Mapping[str, float]) -> float | None:
        groups: Mapping[str, Any] = figures.get("groups") or {}
        if self.figure == "target":
            return targets.get(self.group or "")
        chosen = [groups[self.group]] if self.group is not None else list(groups.values())
        metric, _, pct = self.figure.partition(".")
        if pct:
            values = [g[metric][pct] for g in chosen if isinstance(g.get(metric), dict)
                      and g[metric].get(pct) is not None]
            return max(values) if values else None
        if self.figure in COUNTS:
            values = [g[self.figure] for g in chosen if self.figure in g]
            return sum(values) if values else None
        if self.figure in OUTCOMES:
            values = [g["outcomes"].get(self.figure, 0) for g in chosen if "outcomes" in g]
            return sum(values) if values else None
        if self.group is None:
            return RUN_FIGURES[self.figure][1](figures)
        return GROUP_FIGURES[self.figure][1](chosen[0])


@dataclass(frozen=True)
class Node:
    """An expression's tree: a number (with its kind), a figure, or an operation."""

    kind: str
    number: float | None = None
    figure: Figure | None = None
    op: str = ""
    parts: tuple[Node, ...] = ()

    def value(self, figures: Mapping[str, Any], targets: Mapping[str, float]) -> float | None:
        if self.figure is not None:
            return self.figure.value(figures, targets)
        if not self.op:
            return self.number
        left, right = (p.value(figures, targets) for p in self.parts)
        if left is None or right is None:
            return None
        if self.op == "/":
            return left / right if right else math.inf
        return {"+": operator.add, "-": operator.sub, "*": operator.mul}[self.op](left, right)


@dataclass(frozen=True)
class Threshold:
    text: str
    left: Node
    comparison: str
    right: Node
    groups: tuple[str, ...] = field(default=())

    def judge(self, figures: Mapping[str, Any], targets: Mapping[str, float]
              ) -> tuple[bool | None, float | None, float | None]:
        """(passed, left, right); passed is None where a figure has no value (nothing
        measured it)."""
        left, right = self.left.value(figures, targets), self.right.value(figures, targets)
        if left is None or right is None:
            return None, left, right
        return COMPARISONS[self.comparison](left, right), left, right

    def shown(self, value: float | None) -> str:
        """A side's value in the unit the threshold speaks of."""
        if value is None:
            return "-"
        kind = self.left.kind if self.left.kind != "number" else self.right.kind
        if kind == "time":
            return format_us(value)
        if kind == "percent":
            return f"{value:.1f}%"
        if kind == "rate":
            return f"{value:,.1f}/s"
        return f"{value:g}"


class _Parser:
    def __init__(self, text: str, flag: str, groups: Mapping[str, list[str]],
                 targets: Mapping[str, float]) -> None:
        self.text, self.flag, self.groups, self.targets = text, flag, groups, targets
        self.tokens = self._tokens()
        self.at = 0
        # The group a bare name belongs to: the first the expression names.
        self.default = next((t[1].split(".")[0] for t in self.tokens
                             if t[0] == "name" and t[1].split(".")[0] in groups), None)

    def fail(self, problem: str) -> BadInput:
        return BadInput(self.flag, f"{self.text!r}: {problem}")

    def _tokens(self) -> list[tuple[str, str, str]]:
        out, at, text = [], 0, self.text
        while at < len(text):
            match = _TOKEN.match(text, at)
            if match is None or match.end() == at:
                if not text[at:].strip():
                    break
                raise self.fail(f"cannot read {text[at:].strip()!r}")
            at = match.end()
            if match.group("number") is not None:
                out.append(("number", match.group("number"), match.group("unit") or ""))
            elif match.group("name") is not None:
                out.append(("name", match.group("name"), ""))
            else:
                out.append(("op", match.group("op"), ""))
        return out

    def peek(self) -> str:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else ""

    def take(self) -> tuple[str, str, str]:
        if self.at >= len(self.tokens):
            raise self.fail("ends too soon")
        self.at += 1
        return self.tokens[self.at - 1]

    def threshold(self) -> Threshold:
        left = self.sum()
        comparison = self.take()[1]
        if comparison not in COMPARISONS:
            raise self.fail(f"expected a comparison ({', '.join(COMPARISONS)}), got "
                            f"{comparison!r}")
        right = self.sum()
        if self.at < len(self.tokens):
            raise self.fail(f"unexpected {self.peek()!r} after the comparison")
        self.kinds(left, right, comparison)
        named = tuple(sorted({f.group for f in _figures(left) + _figures(right) if f.group}))
        return Threshold(self.text, left, comparison, right, named)

    def sum(self) -> Node:
        node = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            right = self.product()
            node = Node(self.kinds(node, right, op), op=op, parts=(node, right))
        return node

    def product(self) -> Node:
        node = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()[1]
            right = self.unary()
            if op == "*":
                kind = node.kind if right.kind == "number" else right.kind \
                    if node.kind == "number" else None
            else:
                kind = node.kind if right.kind == "number" else "number" \
                    if node.kind == right.kind else None
            if kind is None:
                raise self.fail(f"cannot {'multiply' if op == '*' else 'divide'} a "
                                f"{node.kind} by a {right.kind}")
            node = Node(kind, op=op, parts=(node, right))
        return node

    def unary(self) -> Node:
        kind, token, unit = self.take()
        if kind == "number":
            if not unit:
                return Node("number", number=float(token))
            what, factor = UNITS[unit]
            return Node(what, number=float(token) * factor)
        if kind == "name":
            figure, what = self.figure(token)
            return Node(what, figure=figure)
        if token == "(":
            node = self.sum()
            if self.take()[1] != ")":
                raise self.fail("a ( without its )")
            return node
        raise self.fail(f"unexpected {token!r}")

    def figure(self, name: str) -> tuple[Figure, str]:
        first, _, rest = name.partition(".")
        group, figure = (first, rest) if first in self.groups else (self.default, name)
        if first in self.groups and not rest:
            raise self.fail(f"{name!r} is a group; name one of its figures "
                            f"({name}.rate, {name}.lost ...)")
        metric, _, pct = figure.partition(".")
        if figure == "target":
            if group is None:
                raise self.fail("target belongs to a group: name it (sender.target) or "
                                "compare it with a group's figure")
            if not self.targets.get(group):
                raise self.fail(f"group {group} has no target rate (give it -rt or --rate)")
            return Figure(group, figure, "rate"), "rate"
        if metric in METRICS or (group is not None and metric in self.groups[group]):
            if pct not in PERCENTILES:
                raise self.fail(f"{name!r}: a percentile of {metric} is one of "
                                f"{', '.join(PERCENTILES)}")
            if group is not None and metric not in self.groups[group]:
                raise self.fail(f"group {group} records no {metric} (it records "
                                f"{', '.join(self.groups[group])})")
            return Figure(group, figure, "time"), "time"
        if figure in COUNTS or figure in OUTCOMES:
            return Figure(group, figure, "count"), "count"
        if group is not None and figure in GROUP_FIGURES:
            return Figure(group, figure, GROUP_FIGURES[figure][0]), GROUP_FIGURES[figure][0]
        if figure in RUN_FIGURES and (group is None or first not in self.groups):
            return Figure(None, figure, RUN_FIGURES[figure][0]), RUN_FIGURES[figure][0]
        if figure in GROUP_FIGURES:
            raise self.fail(f"{figure} belongs to a group: name it ({next(iter(self.groups))}"
                            f".{figure})")
        if first in self.groups and (rest in PERCENTILES) and self.groups[first]:
            # A group's percentile without its metric: the metric the group is read by.
            metrics = self.groups[first]
            head = "latency" if "latency" in metrics else metrics[0]
            raise self.fail(f"unknown figure {name!r}; did you mean {first}.{head}.{rest}?")
        import difflib
        named = [f"{g}.{f}" for g, metrics in self.groups.items() for f in
                 (*COUNTS, *OUTCOMES, *GROUP_FIGURES, "target", *(f"{m}.{p}" for m in metrics
                                                       for p in PERCENTILES))]
        close = difflib.get_close_matches(name, [*named, *COUNTS, *OUTCOMES, *RUN_FIGURES], n=1)
        if close:
            raise self.fail(f"unknown figure {name!r}; did you mean {close[0]}?")
        known = sorted({*COUNTS, *OUTCOMES, *GROUP_FIGURES, *RUN_FIGURES, "target",
                        *(f"{m}.p99" for m in METRICS)})
        groups = f"; the groups are {', '.join(self.groups)}" if self.groups else ""
        raise self.fail(f"unknown figure {name!r} (figures: {', '.join(known)}{groups})")

    def kinds(self, left: Node, right: Node, op: str) -> str:
        """The kind of `left op right`; a bare number takes the other side's kind, except a
        time's, which must say its unit."""
        if left.kind == right.kind:
            return left.kind
        if "number" in (left.kind, right.kind):
            other = left.kind if right.kind == "number" else right.kind
            bare = right if right.kind == "number" else left
            if other == "time" and bare.figure is None and not bare.op:
                raise self.fail(f"give {bare.number:g} a unit of time (ns, us, ms, s)")
            return other
        raise self.fail(f"a {left.kind} and a {right.kind} do not compare "
                        f"({'units' if 'time' in (left.kind, right.kind) else 'figures'} "
                        "differ)")


def _figures(node: Node) -> list[Figure]:
    if node.figure is not None:
        return [node.figure]
    return [f for part in node.parts for f in _figures(part)]


def parse(text: str, groups: Mapping[str, list[str]], targets: Mapping[str, float],
          flag: str = "--slo") -> Threshold:
    """A threshold, checked against the run's groups (name: the metrics it records) and
    their target rates; BadInput names what is wrong."""
    if not text.strip():
        raise BadInput(flag, "an empty threshold")
    return _Parser(text, flag, groups, targets).threshold()


def interval_figures(view: Any) -> dict[str, Any]:
    """An interval's figures named as the summary names them (harness.stats.intervals'
    IntervalView): its rates over the interval's length, its counts, its percentiles."""
    from harness.stats.figures import rate
    from harness.stats.histogram import percentiles

    groups = {}
    for name, group in view.groups.items():
        entry: dict[str, Any] = {**group.counters, "rate": rate(group.count, view.length),
                                 "client_cpu_max": group.cpu}
        if (lag := group.lag) is not None:
            entry["lag"] = lag
        for metric, histogram in group.histograms.items():
            if histogram.get_total_count():
                entry[metric] = percentiles(histogram)
        groups[name] = entry
    return {"groups": groups, "client_cpu": {"max": view.cpu_max,
                                             "machine_max": view.machine_cpu}}


def judged_exit(summary: Mapping[str, Any], exit_code: int) -> int:
    """A run that went well but missed a threshold exits EXIT_SLO; one that failed keeps
    its own code."""
    verdict = summary.get("slo")
    if exit_code == 0 and verdict is not None and not verdict["passed"]:
        return EXIT_SLO
    return exit_code


def targets(run: Any, nodes: int = 1) -> dict[str, float]:
    """Each producing group's target rate over the whole run (--rate is the run's; -rt holds
    on every thread of every node)."""
    out = {}
    for g in run.groups:
        if g.rate:
            out[g.name] = float(g.rate)
        elif g.thread_rate:
            out[g.name] = g.thread_rate * g.threads * g.processes * nodes
    return out


def thresholds(run: Any, nodes: int = 1, flag: str = "--slo") -> list[Threshold]:
    """The run's thresholds, parsed against its groups (harness.plan.run.RunSpec)."""
    from harness.plan.group import metrics_for

    groups = {g.name: metrics_for(g) for g in run.groups}
    aims = targets(run, nodes)
    out = []
    for text in run.slo:
        threshold = parse(text, groups, aims, flag)
        if run.broker_pid is None and any(
                f.figure.startswith("broker_cpu") for f in
                _figures(threshold.left) + _figures(threshold.right)):
            raise BadInput(flag, f"{text!r}: the broker's CPU is measured only with "
                           "--broker-pid")
        out.append(threshold)
    return out
