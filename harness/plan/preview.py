"""What a run would do, said before it does anything (`harness run --check`): per group its
processes, threads and clients, each client's and the group's rate, its destinations, what
a run of this length would send, and the files the run would write."""

from __future__ import annotations

from harness.modules.interface.roles import ROLES
from harness.plan.group import GroupSpec
from harness.plan.run import RunSpec
from harness.plan.steps import parse_steps


def _destinations(group: GroupSpec) -> str:
    if group.destination_max is not None:
        base = group.destination_base if group.destination_base is not None else 1
        return f"{group.destination}{base} .. {group.destination}{group.destination_max}"
    return group.destination or "(none)"


def _sends(group: GroupSpec, run: RunSpec, streams: int) -> str:
    """What the group's producers would send over the run, as far as it is known."""
    if group.messages:
        return f"{group.messages * streams:,} messages ({group.messages:,} a " \
               f"{'client' if group.clients else 'thread'})"
    if not run.duration:
        return "until stopped (no -rl or -mg)"
    if group.rate_steps:
        steps = parse_steps(group.rate_steps)
        total = sum(s.rate * s.seconds for s in steps if s.seconds)
        return f"about {total:,.0f} messages over the steps"
    rate = group.per_thread_rate * streams
    if not rate:
        return f"as many as they can in {run.duration:g} s"
    return f"{rate * run.duration:,.0f} messages in {run.duration:g} s " \
           f"({rate * (run.duration - run.warmup):,.0f} of them measured)"


def plan_lines(run: RunSpec, nodes: int = 1) -> list[str]:
    """The plan, a line or two a group, then the run's files."""
    out = [f"plan: {len(run.groups)} group{'s' * (len(run.groups) != 1)}, "
           f"{run.duration:g} s of which {run.warmup:g} s warm-up, intervals of "
           f"{run.interval:g} s, drain up to {run.drain:g} s"
           + (f", on {nodes} nodes" if nodes > 1 else "")]
    for group in run.groups:
        role = ROLES[group.role]
        streams = group.streams * group.processes * nodes
        clients = f", {group.clients} clients a thread" if group.clients else ""
        line = (f"  {group.name}: {group.module} -> {_destinations(group)}; "
                f"{group.processes} process{'es' * (group.processes != 1)} x "
                f"{group.threads} thread{'s' * (group.threads != 1)}{clients}")
        if nodes > 1:
            line += f" on each of {nodes} nodes"
        out.append(line)
        if role.produces:
            each = group.per_thread_rate
            pace = (f"{each:,.2f}/s a {'client' if group.clients else 'thread'}, "
                    f"{each * streams:,.1f}/s in all") if each else "unthrottled"
            if group.rate_steps:
                pace = f"rate steps {group.rate_steps}"
            out.append(f"    sends {group.size:,} B bodies, {pace}; {_sends(group, run, streams)}")
        else:
            out.append(f"    {role.summary}")
    out.append(f"files: {run.output}/<time>-{run.name}/ manifest.json, intervals.jsonl, "
               "<node>.hlog, summary.json" + (f", {run.junit}" if run.junit else ""))
    return out
