"""A run: its worker groups and run-wide settings, built from options given by key and
validated as a whole before anything starts."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.errors import BadInput
from harness.modules.interface.roles import ROLES
from harness.plan.backlog import parse_backlog
from harness.plan.group import GroupSpec, parsed, validate_group
from harness.plan.options import field_values, in_scope
from harness.plan.steps import RateStep, parse_steps

_GROUP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


@dataclass
class RunSpec:
    groups: list[GroupSpec]
    name: str = "run"
    duration: float = 0.0
    warmup: float = 0.0
    interval: float = 5.0
    drain: float = 5.0
    output: str = "runs"
    node: str = field(default_factory=lambda: os.uname().nodename)
    broker_pid: int | None = None
    switch_interval: float | None = None
    reorder_window: float = 1.0
    # The run-wide options a transport declares (scope "run": the loopback broker's
    # capacity, delay and faults), by name.
    options: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None  # shared by the nodes of one multi-node run; None: a new one
    seed: int = 0  # the Poisson arrivals' seed
    # The nodes that run every group at once (a distributed run): a consumer on a real broker
    # shares its destination with the other nodes' consumers and producers.
    nodes: int = 1
    # Thresholds (harness.stats.slo), as given; and where the figures go besides the run
    # directory (harness.rundir.judge, harness.rundir.metrics).
    slo: list[str] = field(default_factory=list)
    slo_interval: bool = False
    slo_abort: int = 0
    junit: str | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    control: bool = False  # --control: the live keys from another process (engine.control)
    serve: int | None = None  # --serve PORT: the screen as a page (implies control)
    pushgateway: str | None = None
    push_intervals: bool = False
    # Backlog, then drain (harness.plan.backlog's text): the consumers held until their
    # destinations hold this many messages or bytes.
    backlog: str | None = None
    # --label KEY=VALUE: recorded in the manifest for `harness runs --label`
    label: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_spec(given: dict[str, Any], groups: list[GroupSpec]) -> RunSpec:
    """The run from the run-wide options given by key (command line or profile)."""
    values = field_values(given, ("run",))
    if values["node"] is None:
        del values["node"]
    options = {o.name: values.pop(o.name) for o in in_scope("run") if o.transports}
    return RunSpec(groups=groups, options=options, **values)


def parse_labels(items: list[str], flag: str) -> dict[str, str]:
    """KEY=VALUE items (--label) as a mapping; BadInput naming the flag otherwise."""
    labels = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", key):
            raise BadInput(flag, f"{item!r}: give KEY=VALUE, the key letters, digits, "
                           "'_', '.' or '-'")
        labels[key] = value
    return labels


def _above_zero(flag: str, value: float) -> None:
    if value <= 0:
        raise BadInput(flag, f"must be > 0, got {value:g}")


def assign_group_names(groups: list[GroupSpec]) -> None:
    seen: set[str] = set()
    for group in groups:
        if group.name:
            if not _GROUP_NAME.match(group.name):
                raise BadInput("--group-name", f"{group.name!r} must be a letter followed by "
                               "letters, digits, - or _")
            if group.name in seen:
                raise BadInput("--group-name", f"two groups are named {group.name!r}")
            seen.add(group.name)
    for group in groups:
        if not group.name:
            base = group.role.lower() if group.role in ROLES else "group"
            name, n = base, 2
            while name in seen:
                name, n = f"{base}{n}", n + 1
            group.name = name
            seen.add(name)


def run_steps(run: RunSpec) -> list[RateStep] | None:
    """The steps of the run's stepped groups (each group's rates, one set of lengths)."""
    for group in run.groups:
        if group.rate_steps:
            return parse_steps(group.rate_steps)
    return None


def _check_rate_steps(run: RunSpec) -> None:
    """Stepped groups step together, each step a whole number of intervals (so that no
    interval straddles two steps), and the run lasts the warm-up and the steps unless -rl
    says otherwise."""
    steps = run_steps(run)
    if steps is None:
        return
    lengths = [(s.seconds, s.ramp) for s in steps]
    for group in run.groups:
        if group.rate_steps and [(s.seconds, s.ramp) for s in
                                 parse_steps(group.rate_steps)] != lengths:
            raise BadInput("--rate-steps", f"group {group.name}'s steps last other lengths "
                           "than the first stepped group's: the groups of a run step together")
    for step in steps:
        whole = step.seconds / run.interval
        if abs(whole - round(whole)) > 1e-9:
            raise BadInput("--rate-steps", f"a step of {step.seconds:g} s is not a whole number "
                           f"of {run.interval:g} s intervals (-ss): each interval would straddle "
                           "two steps")
    total = run.warmup + sum(s.seconds for s in steps)
    if not run.duration:
        run.duration = total
    elif run.duration < total - 1e-9:
        raise BadInput("-rl", f"{run.duration:g} s is shorter than the warm-up and the rate "
                       f"steps ({total:g} s): leave -rl out, or give at least that")


def validate_run(run: RunSpec) -> None:
    if not run.groups:
        raise BadInput("-m", "a run needs at least one module")
    for index, group in enumerate(run.groups):
        validate_group(group, index)
    assign_group_names(run.groups)
    used = {group.transport for group in run.groups}
    for option in in_scope("run"):
        if option.transports:
            value = run.options.get(option.name, option.default)
            if value not in (option.default, [], ()) and not used & set(option.transports):
                raise BadInput(option.flag, f"is for {' and '.join(option.transports)}; no "
                               "group uses it")
        else:
            value = getattr(run, option.name)
        problem = option.out_of_bounds(value)
        if problem:
            raise BadInput(option.flag, problem)
    _above_zero("-ss", run.interval)
    _check_rate_steps(run)
    if run.backlog is not None:
        parsed("--backlog", parse_backlog, run.backlog)
        held = [g for g in run.groups if ROLES[g.role].measures_only]
        if not held:
            raise BadInput("--backlog", "no Receiver or Subscriber to hold: the backlog is "
                           "what consumers have not taken")
        if any(g.clients for g in held):
            raise BadInput("--backlog", "not with consumers of --clients: a held client's "
                           "keep-alive would read what its broker sends")
        if run.nodes > 1:
            raise BadInput("--backlog", "one node's controller releases its consumers: not "
                           "with --nodes")
    # An option that does nothing without another is refused, never ignored.
    for flag, given, needs, present in (
            ("--slo-interval", run.slo_interval, "--slo", run.slo),
            ("--slo-abort", run.slo_abort, "--slo", run.slo),
            ("--push-intervals", run.push_intervals, "--pushgateway", run.pushgateway),
            ("--metrics-host", run.metrics_host != "127.0.0.1", "--metrics-port",
             run.metrics_port is not None)):
        if given and not present:
            raise BadInput(flag, f"does nothing without {needs}: give {needs} too")
    if run.duration and run.warmup >= run.duration:
        raise BadInput("-sw", f"warm-up ({run.warmup:g} s) must be shorter than the run "
                       f"length -rl ({run.duration:g} s)")
    if run.switch_interval is not None:
        _above_zero("--switch-interval", run.switch_interval)
    if run.broker_pid is not None:
        import psutil
        if not psutil.pid_exists(run.broker_pid):
            raise BadInput("--broker-pid", f"no process with pid {run.broker_pid}")
    loopback = {g.processes for g in run.groups if g.embedded}
    if len(loopback) > 1:
        raise BadInput("--processes", "all loopback groups need the same --processes: the "
                       "embedded broker lives inside one process, so each process runs its "
                       "own copy of every loopback group")
    if run.run_id is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", run.run_id):
        raise BadInput("--run-id", f"{run.run_id!r}: use up to 64 letters, digits, '.', '_' "
                       "or '-'")
    parse_labels(run.label, "--label")
    if not _GROUP_NAME.match(run.name):
        raise BadInput("--name", f"{run.name!r} must be a letter followed by letters, digits, "
                       "- or _")
