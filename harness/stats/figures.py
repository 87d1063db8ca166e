"""Every figure the harness reports, defined once. The console, summary.json, the live screen,
`harness view`, the results tables, the merge and report.html all compute through here.

- Measured span: from the end of the warm-up to the producers' stop, exactly (intervals are
  cut at both instants, harness.stats.timeline). A node measures one span; a merged run has
  one per node.
- Rate of a group: the messages it counts (received by consumers and by a Requestor, whose
  count is its completed round trips; taken by the broker of what a Sender or Publisher sent)
  in its measured intervals, over the seconds of those intervals. A merged group's rate is
  the sum of its nodes' rates.
- Taken: of the sends made in the measured span, those the broker confirmed, or that were
  written where the protocol has no acknowledgement: every send counted sent less those of
  them it refused after all or whose outcome a fault hid (in doubt), whenever that became
  known (at a later interval, at the close). Sends that failed in the call were never sent.
  An interval's line shows what was sent in it, and refused and in doubt as they became
  known; the span's count and rate are exact.
- Outcomes: every send a producer attempted, warm-up and drain included, ends in exactly one
  of: confirmed (the broker acknowledged it) or written (the protocol acknowledges nothing:
  handed to the connection, all that is known), refused (the broker said no), in doubt (a
  fault hid the outcome), failed (raised, never left) and unsent (due by the schedule, not
  made by the stop). attempted is their sum (outcomes); nothing nets against anything.
- Percentiles: of the HDR histogram of every sample after the warm-up, drain included (a
  message received while draining was sent while measuring). Latency is measured from the
  intended send time; with no rate set there is none, and latency is closed-loop (service)
  latency, labelled so wherever it is shown. Confirm (AMQP publisher confirms, JetStream
  publish acknowledgements): from a send to the broker's confirmation of it.
- Loss: messages sent and never received, each counted once (run_loss).
- Client CPU: % of one core of the busiest process of a group, per interval; its mean and
  maximum over the measured intervals. The client may be the bottleneck above
  CLIENT_CPU_LIMIT, or when the machine as a whole is above MACHINE_CPU_LIMIT.
- Client cost per message: the CPU time of a group's processes (user and system, every
  thread, the client library's own included) over the messages its rate counts, in
  microseconds, over the measured intervals; a process running several groups (the embedded
  broker's) shares its CPU among them by the messages each counted (cpu_shares). One core
  sustains 1e6 / cost messages a second; the client cores a run needed are its processes'
  CPU time over the measured span.
- Broker CPU: % of one core of the broker process, per interval; its mean over the measured
  intervals; CPU ms per message the broker received (broker_cpu_ms_per_received).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.modules.interface.roles import ROLES
from harness.plan.run import RunSpec

# The ActiveMQ paper's rule: above this a client may itself be the bottleneck.
CLIENT_CPU_LIMIT = 75.0
# Above this share of all the machine's cores, the client machine itself is saturated.
MACHINE_CPU_LIMIT = 90.0
BROKER_CPU_LABEL = "broker CPU ms per message received"


def kept(counters: dict[str, int]) -> int:
    """The sends the broker kept: everything sent, less those it refused after they were
    counted (returned, negatively confirmed) or that never reached it (failed sends)."""
    return counters.get("sent", 0) - counters.get("refused", 0)


def taken(counters: dict[str, int]) -> int:
    """Of the measured span's counters: the sends the broker took (confirmed, or written),
    its sends less those of them refused or in doubt (`untaken`, counted into the span
    whenever the word came)."""
    return counters.get("sent", 0) - counters.get("untaken", 0)


def outcomes(counters: dict[str, int], confirmed: bool) -> dict[str, int]:
    """A producer's sends, each counted in exactly one outcome (the module's docstring), and
    their sum: of a group whose broker confirms each send, what it took is `confirmed`,
    else `written`."""
    sent = counters.get("sent", 0)
    refused, in_doubt = counters.get("refused", 0), counters.get("in_doubt", 0)
    made = {"confirmed" if confirmed else "written": sent - refused - in_doubt,
            "refused": refused, "in_doubt": in_doubt, "failed": counters.get("failed", 0),
            "unsent": counters.get("unsent", 0)}
    return {**made, "attempted": sum(made.values())}


def role_count(role: str, counters: dict[str, int]) -> int:
    """The messages an interval's line counts: received for consumers and for Requestor
    (round trips), sent for producers."""
    return counters.get("received", 0) if ROLES[role].consumes else counters.get("sent", 0)


def span_count(role: str, counters: dict[str, int]) -> int:
    """The messages a group's rate counts over its measured span: received for consumers and
    for Requestor, taken for producers."""
    return counters.get("received", 0) if ROLES[role].consumes else taken(counters)


def rate(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def summed_rate(parts: Iterable[tuple[float, float]]) -> float:
    """A group's rate over several nodes: (count, measured seconds) of each node, each
    node's rate over its own span, summed."""
    return sum(rate(count, seconds) for count, seconds in parts)


def headline_metric(metrics: list[str]) -> str:
    return "latency" if "latency" in metrics else "service"


def closed_loop(run: RunSpec, index: int) -> bool:
    """Whether group `index`'s latency is closed-loop: its messages carry no intended time
    because the producers sending them run unthrottled."""
    group = run.groups[index]
    role = ROLES[group.role]
    if role.produces and role.consumes:  # Requestor: its own schedule
        return not group.per_thread_rate
    if role.produces:
        return False  # service and delay only
    feeding = [g for g in run.groups if ROLES[g.role].produces and g.endpoint == group.endpoint]
    return any(not g.per_thread_rate for g in feeding)


def metric_label(metric: str, closed: bool) -> str:
    return "latency (closed loop)" if metric == "latency" and closed else metric


def labels(run: RunSpec, metrics: dict[int, list[str]]) -> dict[str, dict[str, str]]:
    """Each group's metrics as they are labelled wherever they are shown."""
    return {g.name: {m: metric_label(m, closed_loop(run, i)) for m in metrics[i]}
            for i, g in enumerate(run.groups)}


def run_loss(run: RunSpec, summary: dict[str, Any]) -> int:
    """Messages lost in a run, each counted once: a destination's delivery check (sent
    against received, which also sees competing consumers and tails) where there is one;
    elsewhere (selectors, numbered topics) its consumers' sequence gaps."""
    checked = {d["destination"] for d in summary["delivery"]}
    lost = sum(d["missing"] for d in summary["delivery"])
    for group in run.groups:
        if ROLES[group.role].consumes and ":".join(group.endpoint) not in checked:
            lost += summary["groups"][group.name]["lost"]
    return lost


# A latency this many times the harness floor's p50, or more, is mostly beyond the harness.
FLOOR_MARGIN = 2.0


def floor_verdict(p50_us: float, floor_p50_us: float) -> str:
    """What a group's latency p50 says beside the harness floor's p50 (the wake-up and
    thread hand-off every measured message also waits on, under the run's load)."""
    ratio = p50_us / floor_p50_us if floor_p50_us > 0 else float("inf")
    if ratio >= FLOOR_MARGIN:
        return f"{ratio:.1f}x the floor: mostly the broker's and the network's time"
    return f"{ratio:.1f}x the floor, within {FLOOR_MARGIN:g}x: read it as largely the " \
           "harness's own wake-up, not the broker's"


def cpu_shares(cpu_us: int, counts: dict[int, int]) -> dict[int, int]:
    """A process's CPU microseconds in one interval, shared among the groups it runs in
    proportion to the messages each counted (evenly when none counted any); the shares add
    up to cpu_us exactly."""
    total = sum(counts.values())
    out, given = {}, 0
    for n, (g, count) in enumerate(counts.items()):
        last = n == len(counts) - 1
        share = cpu_us - given if last else \
            (cpu_us * count // total if total else cpu_us // len(counts))
        out[g] = share
        given += share
    return out


def us_per_message(cpu_us: float, count: float) -> float | None:
    """Client CPU microseconds per message counted; None where nothing was counted."""
    return cpu_us / count if count else None


def per_core_rate(us: float | None) -> float | None:
    """The messages a second one core sustains at a cost of `us` microseconds each."""
    return 1e6 / us if us else None


def cost_cells(group: dict[str, Any]) -> tuple[str, str]:
    """A group's client CPU per message and the rate one core would sustain, as shown."""
    us = group.get("client_us_per_msg")
    if not us:  # nothing counted, or no CPU recorded (a run directory from before the figure)
        return "-", "-"
    return f"{us:.1f}", f"{group['per_core_rate']:,.0f}"


def cores(cpu_us: float, seconds: float) -> float:
    """Cores kept busy: CPU microseconds over a span of seconds."""
    return cpu_us / 1e6 / seconds if seconds > 0 else 0.0


def broker_cpu_ms_per_received(cpu_percent: float, received_rate: float) -> float | None:
    """The WMB report's CPU cost: CPU ms per message, over the messages the broker received
    (producers' sends, replies included), from the broker's mean % of one core.
    CPUs * 1000 * %CPU/100 / rate with %CPU of the whole machine is the same figure; the
    report wrote 1024 for 1000."""
    return 10.0 * cpu_percent / received_rate if received_rate else None


def client_bottleneck(client_cpu_max: float, machine_cpu_max: float | None) -> bool:
    return client_cpu_max > CLIENT_CPU_LIMIT or \
        (machine_cpu_max is not None and machine_cpu_max > MACHINE_CPU_LIMIT)


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
