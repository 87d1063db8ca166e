"""How a run's load is divided over the nodes of a distributed run.

A group's total rate (--rate) is divided evenly across the nodes, as OpenMessaging
Benchmark divides its producer rate across its workers; a per-thread rate (-rt) and a
per-thread message count (-mg) hold on every node's threads, so with N nodes the group has N
times the threads and sends N times the messages. Every node runs every group, with its own
processes and threads, exactly as a single-machine run would.
"""

from __future__ import annotations

import copy
import re

from harness.plan.run import RunSpec
from harness.plan.steps import scale_steps

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def node_name(host: str, rank: int) -> str:
    """A node's name: the executor's host and the task's rank, fit for a file name."""
    return f"{_UNSAFE.sub('-', host) or 'host'}-task{rank}"


def node_spec(run: RunSpec, nodes: int, node: str, run_id: str) -> RunSpec:
    """The run one node carries out."""
    spec = copy.deepcopy(run)
    spec.node, spec.run_id, spec.nodes = node, run_id, nodes
    # The broker's process is watched from the driver's machine, not from every node.
    spec.broker_pid = None
    for group in spec.groups:
        if group.rate:
            group.rate = group.rate / nodes
        if group.rate_steps:  # the group's rates, as --rate is
            group.rate_steps = scale_steps(group.rate_steps, 1.0 / nodes)
    return spec


def given_lines(run: RunSpec, nodes: int) -> list[str]:
    """What each node is given, group by group, for the run's header."""
    lines = []
    for group, given in zip(run.groups, node_spec(run, nodes, run.node, "").groups,
                            strict=True):
        threads = given.streams * given.processes
        each = "clients" if given.clients else "threads"
        rate = given.per_thread_rate
        pace = "unthrottled"
        if rate:
            split = f"; --rate {group.rate:,.1f} / {nodes} nodes" if group.rate else ""
            if group.rate_steps:
                split = f"; --rate-steps {given.rate_steps}, the first step's shown"
            pace = f"{rate * threads:,.1f}/s ({rate:g}/s x {threads} {each}{split})"
        count = f", {given.messages} messages per thread" if given.messages else ""
        lines.append(f"  {group.name}: each node {threads} {each}, {pace}{count}")
    return lines
