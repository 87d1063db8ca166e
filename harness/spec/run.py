"""A run: its worker groups and run-wide settings, built from options given by key and
validated as a whole before anything starts."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.errors import BadInput
from harness.spec.group import GroupSpec, validate_group
from harness.spec.options import field_values, in_scope
from harness.spec.roles import ROLES

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
    faults: list[tuple[str, str, int]] = field(default_factory=list)
    reorder_window: float = 1.0
    loopback_capacity: float = 0.0  # msg/s the simulated broker serves; 0 = unlimited
    loopback_delay: float = 0.0  # ms added to every message by the simulated broker
    run_id: str | None = None  # shared by the nodes of one multi-node run; None: a new one
    seed: int = 0  # the Poisson arrivals' seed
    # The nodes that run every group at once (a distributed run): a consumer on a real broker
    # shares its destination with the other nodes' consumers and producers.
    nodes: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_spec(given: dict[str, Any], groups: list[GroupSpec]) -> RunSpec:
    """The run from the run-wide options given by key (command line or profile)."""
    values = field_values(given, ("run",))
    if values["node"] is None:
        del values["node"]
    return RunSpec(groups=groups, **values)


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


def validate_run(run: RunSpec) -> None:
    if not run.groups:
        raise BadInput("-m", "a run needs at least one module")
    for index, group in enumerate(run.groups):
        validate_group(group, index)
    assign_group_names(run.groups)
    for option in in_scope("run"):
        problem = option.out_of_bounds(getattr(run, option.name))
        if problem:
            raise BadInput(option.flag, problem)
    _above_zero("-ss", run.interval)
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
    if (run.loopback_capacity or run.loopback_delay) and not loopback:
        flag = "--loopback-capacity" if run.loopback_capacity else "--loopback-delay"
        raise BadInput(flag, "simulates the loopback broker; no group uses it")
    if run.faults and not loopback:
        raise BadInput("--inject", "faults can be injected only into the loopback broker")
    if run.run_id is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", run.run_id):
        raise BadInput("--run-id", f"{run.run_id!r}: use up to 64 letters, digits, '.', '_' "
                       "or '-'")
    if not _GROUP_NAME.match(run.name):
        raise BadInput("--name", f"{run.name!r} must be a letter followed by letters, digits, "
                       "- or _")
