"""What a run prints where there is no live UI: one line per group per interval, in the
manner of PerfHarness but with percentiles, and the final summary table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.stats.backlog import abandoned_note, warmup_note
from harness.stats.figures import (
    BROKER_CPU_LABEL,
    CLIENT_CPU_LIMIT,
    MACHINE_CPU_LIMIT,
    cost_cells,
    floor_verdict,
    headline_metric,
    metric_label,
    rate,
)
from harness.stats.histogram import percentiles
from harness.stats.slo import EXIT_SLO
from harness.stats.views import IntervalView
from harness.units import format_us


def interval_lines(view: IntervalView, metrics: dict[str, list[str]],
                   labels: dict[str, dict[str, str]]) -> list[str]:
    """labels: each group's metric names as shown (harness.stats.figures.labels)."""
    lines = []
    phase = "" if view.phase == "measure" else f" [{view.phase}]"
    for name, group in view.groups.items():
        c = group.counters
        if not any(c.values()) and (view.phase == "drain" or group.threads_up == 0):
            continue  # a finished or draining group with nothing to say
        group_rate = rate(group.count, view.length)
        head = headline_metric(metrics[name])
        verb = "recv" if head == "latency" else "sent"
        p = percentiles(group.histograms[head])
        text = (f"{view.start + view.length:>7.1f}s {name:<10} {verb} {group_rate:>9.1f}/s "
                f"n={group.count:<8} err={c['errors']}")
        if c["lost"] or c["duplicated"] or c["reordered"] or c["corrupt"]:
            text += (f" lost={c['lost']} dup={c['duplicated']} reord={c['reordered']}"
                     + (f" corrupt={c['corrupt']}" if c["corrupt"] else ""))
            if c["late"]:
                # Counted lost in an earlier interval, arrived after the reorder window: this
                # interval's lost goes down by as many (below zero where nothing else was).
                text += f" late={c['late']}"
        text += (f" | {labels[name][head]} p50={format_us(p['p50'])} p90={format_us(p['p90'])}"
                 f" p99={format_us(p['p99'])} p99.9={format_us(p['p99.9'])}"
                 f" max={format_us(p['max'])}")
        if c["redelivered"]:
            text += f" redelivered={c['redelivered']}"
        if c["foreign"]:
            text += f" foreign={c['foreign']} (not from a harness producer: not timed)"
        if c["reconnects"] or c["outage_ms"]:
            text += f" reconnects={c['reconnects']} outage={c['outage_ms'] / 1000:.1f}s"
        if c["in_doubt"]:
            text += f" in_doubt={c['in_doubt']}"
        if c.get("rebalances"):
            text += f" rebalances={c['rebalances']}"
        if (lag := group.lag) is not None:
            text += f" lag={lag}"
        if "delay" in group.histograms:
            text += f" delay p99={format_us(percentiles(group.histograms['delay'])['p99'])}"
        if "process" in group.histograms:
            q = percentiles(group.histograms["process"])
            text += f" process p50={format_us(q['p50'])} p99={format_us(q['p99'])}"
        if "confirm" in group.histograms:
            q = percentiles(group.histograms["confirm"])
            text += f" confirm p50={format_us(q['p50'])} p99={format_us(q['p99'])}"
        if group.threads_up < group.threads:
            text += f" threads={group.threads_up}/{group.threads}"
        if group.clients:
            text += f" clients={group.clients_up}/{group.clients}"
            if c.get("connect_failed"):
                text += f" connect_failed={c['connect_failed']}"
            for metric in ("connect", "subscribe"):
                made = group.histograms.get(metric)
                if made is not None and made.get_total_count():
                    q = percentiles(made)
                    text += (f" {metric} n={made.get_total_count()} "
                             f"p50={format_us(q['p50'])} p99={format_us(q['p99'])}")
        text += f" cpu={group.cpu:.0f}%"
        if group.us_per_message is not None and view.phase != "drain":
            text += f" {group.us_per_message:.1f}us/msg"
        if group.cpu > CLIENT_CPU_LIMIT:
            text += " (client may be the bottleneck)"
        if view.broker_cpu is not None:
            text += f" broker={view.broker_cpu:.0f}%"
        lines.append(text + phase)
    lines.extend(node_lines(view))
    if view.backlog is not None:
        level, unit, held = view.backlog
        lines.append(f"{'':>8} backlog {level:,} {unit}" +
                     (" (consumers held)" if held else ""))
    return lines


def node_lines(view: IntervalView) -> list[str]:
    """A distributed run's nodes, one line each, so that a slow or client-bound one stands
    out beside the merged groups."""
    lines: list[str] = []
    if not view.length:
        return lines
    for node, part in view.nodes.items():
        if view.phase == "drain" and not any(part.counts.values()):
            continue
        rates = " ".join(f"{name} {value:.1f}/s"
                         for name, value in part.rates(view.length).items())
        text = f"{'':>8} node {node}: {rates} err={part.errors} cpu={part.cpu:.0f}%"
        if part.cpu > CLIENT_CPU_LIMIT:
            text += " (client may be the bottleneck)"
        lines.append(text)
    return lines


# A group's achieved rate below this share of its target is flagged as a shortfall.
SHORT_OF_TARGET = 0.99
# The summary table's columns where the screen is narrower than all of them need: the rest
# are in the lines below it and in summary.json.
NARROW = ("group", "module", "rate/s", "target", "errors", "lost", "metric", "p50", "p99",
          "max")
LEGEND = ("rate/s: messages a second over the measured span (a producer's: what the broker "
          'took); target: the rate asked (! below 99% of it); lost, dup, reord: by sequence '
          'number; metric: what the percentiles time (latency: intended send to receipt; '
          'service: the call; closed-loop: no rate set); delay p99: behind schedule; cpu: the '
          'busiest process, % of a core; the throughput line: received by the broker, '
          "dispatched, their sum and replicas per message. Each defined in the manual's What it"
          ' measures (measures.md).')


def short_of_target(g: dict[str, Any]) -> bool:
    target = g.get("target")
    return bool(target) and g["rate"] < SHORT_OF_TARGET * target


def summary_table(summary: dict[str, Any], width: int | None = None) -> Table:
    """Every column where the screen is wide enough (width: the console's; None: every
    column), else those of NARROW, so that the table fits 100 columns."""
    columns = ["group", "module", "rate/s", "target", "count", "errors", "lost", "dup",
               "reord", "metric", "p50", "p90", "p99", "p99.9", "max", "delay p99", "cpu max",
               "cpu us/msg", "msg/s/core"]
    if not any(g.get("target") for g in summary["groups"].values()):
        columns.remove("target")
    rows = []
    for name, g in summary["groups"].items():
        head = g["headline"]
        p = g[head]
        delay = g.get("delay", {}).get("p99") if "delay" in g else None
        # A run directory from before the count was kept shows its whole total.
        count = g.get("count", g["received"] or g["sent"])
        target = g.get("target")
        rate_cell = f"{g['rate']:.1f}"
        if short_of_target(g):
            rate_cell = f"[yellow]{rate_cell}![/]"
        cells = {"group": escape(str(name)), "module": g["module"], "rate/s": rate_cell,
                 "target": f"{target:g}" if target else "-", "count": str(count),
                 "errors": str(g["errors"]), "lost": str(g["lost"]),
                 "dup": str(g["duplicated"]), "reord": str(g["reordered"]),
                 "metric": metric_label(head, g.get("closed_loop", False)),
                 **{q: format_us(p[q]) for q in ("p50", "p90", "p99", "p99.9", "max")},
                 "delay p99": format_us(delay) if delay is not None else "-",
                 "cpu max": f"{g['client_cpu_max']:.0f}%"}
        cells["cpu us/msg"], cells["msg/s/core"] = cost_cells(g)
        rows.append(cells)

    def made(shown: list[str]) -> Table:
        table = Table(title=f"Summary: {summary['measured_seconds']:.2f} s measured "
                            "(warm-up to stop; rates and message counts over the measured "
                            "span)")
        for column in shown:
            table.add_column(column, justify="left" if column in ("group", "module", "metric")
                             else "right")
        for cells in rows:
            table.add_row(*(cells[c] for c in shown))
        return table

    table = made(columns)
    if width is not None and Console(width=10_000).measure(table).maximum > width:
        table = made([c for c in columns if c in NARROW])
        table.caption = "a wider screen shows " + ", ".join(
            c for c in columns if c not in NARROW) + "; summary.json has every figure"
    return table


def steps_table(summary: dict[str, Any]) -> Table:
    """--rate-steps: each step's rate asked and achieved and its headline percentiles, per
    group: a rate-against-latency table from one run."""
    table = Table(title="Rate steps (each over its own measured seconds)")
    for column in ("step", "from", "to", "group", "asked/s", "rate/s", "metric", "p50", "p90",
                   "p99", "p99.9", "max"):
        table.add_column(column, justify="left" if column in ("group", "metric") else "right")
    for step in summary["steps"]:
        for name, g in step["groups"].items():
            head = summary["groups"][name]["headline"]
            p = g.get(head)
            cells = [format_us(p[q]) for q in ("p50", "p90", "p99", "p99.9", "max")] if p \
                else ["-"] * 5
            table.add_row(str(step["step"]), f"{step['begin']:g}s", f"{step['end']:g}s", name,
                          f"{g['asked']:g}" if "asked" in g else "", f"{g['rate']:.1f}",
                          metric_label(head, summary["groups"][name].get("closed_loop", False)),
                          *cells)
    return table


def backlog_text(b: dict[str, Any]) -> str:
    """--backlog's fill and drain, in a line."""
    goal = f"{b['goal']:,} {b['unit']}"
    if "fill_seconds" not in b:
        return f"backlog: never reached {goal} (at the end: {b.get('at_end', 0):,})"
    text = (f"backlog: filled to {b['at_release']:,} {b['unit']} (asked {goal}) in "
            f"{b['fill_seconds']:.1f} s, then the consumers were released; ")
    if "drain_seconds" not in b:
        return text + f"not drained by the end ({b['at_end']:,} left)"
    rate = b.get("drain_rate")
    return text + (f"drained in {b['drain_seconds']:.1f} s, the consumers taking "
                   f"{rate:,.1f} msg/s meanwhile" if rate is not None else "drained at once")


def print_summary(console: Console, summary: dict[str, Any], run_dir: str) -> None:
    """The summary as the console shows it after a run (and harness view)."""
    console.print(summary_table(summary, console.width))
    console.print(LEGEND, highlight=False, style="dim")
    if summary.get("steps"):
        console.print(steps_table(summary))
    _group_details(console, summary)
    _run_figures(console, summary)
    _warnings(console, summary)
    _verdicts(console, summary)
    console.print(f"run directory: {run_dir}", highlight=False)


def outcomes_line(outcomes: dict[str, int] | None) -> str:
    """A producer's sends by outcome (harness.stats.figures.outcomes), where any ended
    otherwise than taken; empty where every one was confirmed (or written)."""
    if not outcomes or all(not outcomes.get(k) for k in ("refused", "in_doubt", "failed",
                                                         "unsent")):
        return ""
    parts = [f"{outcomes[k]:,} {k.replace('_', ' ')}" for k in
             ("confirmed", "written", "refused", "in_doubt", "failed", "unsent") if k in outcomes]
    return f"{outcomes['attempted']:,} sends attempted: {', '.join(parts)} (each send once, " \
        "warm-up and drain included)"


def _group_details(console: Console, summary: dict[str, Any]) -> None:
    """Per group, what its table row leaves out: connections, processing, subscriptions,
    confirms, redeliveries, rebalances and lag."""
    for name, g in summary["groups"].items():
        if outcome_text := outcomes_line(g.get("outcomes")):
            console.print(f"{name}: {outcome_text}", highlight=False)
        if g.get("connects"):
            q = g["connect"]
            console.print(f"{name}: {g['connects']} connections p50 {format_us(q['p50'])} p99 "
                          f"{format_us(q['p99'])} max {format_us(q['max'])} (connect to the "
                          "broker's answer)", highlight=False)
        if g.get("connect_failed"):
            console.print(f"{name}: {g['connect_failed']:,} connection attempts failed (each "
                          "an error too; the log tallies each interval's by reason)",
                          highlight=False)
        if g.get("process", {}).get("max") is not None:
            q = g["process"]
            console.print(f"{name}: processing p50 {format_us(q['p50'])} p99 "
                          f"{format_us(q['p99'])} max {format_us(q['max'])} (a message's "
                          "--consumer-latency, before its acknowledgement)", highlight=False)
        if g.get("subscribe", {}).get("max") is not None:
            q = g["subscribe"]
            console.print(f"{name}: subscriptions p50 {format_us(q['p50'])} p99 "
                          f"{format_us(q['p99'])} max {format_us(q['max'])} (subscribe to the "
                          "broker's answer)", highlight=False)
        if "confirm" in g:
            q = g["confirm"]
            console.print(f"{name}: {confirmations(g['module'])} p50 {format_us(q['p50'])} p90 "
                          f"{format_us(q['p90'])} p99 {format_us(q['p99'])} p99.9 "
                          f"{format_us(q['p99.9'])} max {format_us(q['max'])} (send to the "
                          "broker's confirmation)")
        if g.get("redelivered"):
            console.print(f"{name}: {g['redelivered']} messages redelivered (taken back from a "
                          "consumer that never acknowledged them)", highlight=False)
        if g.get("rebalances"):
            console.print(f"{name}: {g['rebalances']} partition assignments (its consumer "
                          "group rebalanced; the log says which partitions)", highlight=False)
        if "lag" in g:
            console.print(f"{name}: lag {g['lag']} at the end (messages waiting at the "
                          "broker that its consumers had not taken, as last read)",
                          highlight=False)


def confirmations(module: str) -> str:
    """What the module's protocol calls the broker's word on a send (Kafka's delivery
    reports, AMQP's publisher confirms ...)."""
    from harness.modules import TRANSPORTS, transport_class

    transport = module.partition(".")[0]
    return transport_class(transport).confirmations if transport in TRANSPORTS else \
        "confirmations"


def _run_figures(console: Console, summary: dict[str, Any]) -> None:
    """The run's own figures: backlog, warm-up, abandoned threads, the harness floor,
    throughput, client and broker CPU, memory."""
    if "backlog" in summary:
        console.print(backlog_text(summary["backlog"]), highlight=False)
    for point, left in summary.get("warmup_backlog", {}).items():
        console.print(warmup_note(point, left), highlight=False)
    if abandoned := summary.get("abandoned_threads"):
        console.print(abandoned_note(abandoned), highlight=False)
    floor = summary.get("floor")
    if floor and floor["samples"]:
        beside = "; ".join(
            f"{name} {metric_label('latency', g.get('closed_loop', False))} p50 "
            f"{format_us(g['latency']['p50'])}, "
            f"{floor_verdict(g['latency']['p50'], floor['p50'])}"
            for name, g in summary["groups"].items() if g.get("latency", {}).get("p50"))
        console.print(f"harness floor: wake-up and thread hand-off p50 "
                      f"{format_us(floor['p50'])} p99 {format_us(floor['p99'])} max "
                      f"{format_us(floor['max'])} under this run's load; latencies below it "
                      "are the harness's own" + (f" (beside: {beside})" if beside else ""),
                      highlight=False)
    t = summary["throughput"]
    grade = t["replication_grade"]
    console.print(f"throughput: received by broker {t['received_by_broker']:.1f}/s, "
                  f"dispatched {t['dispatched']:.1f}/s, overall {t['overall']:.1f}/s"
                  + (f", replication grade r={grade:.2f}" if grade is not None else ""),
                  highlight=False)
    cpu = summary["client_cpu"]
    line = f"client cpu: max {cpu['max']:.0f}% mean {cpu['mean']:.0f}% of a core per process"
    if "cores" in cpu:
        line += f"; the achieved rates needed {cpu['cores']:.2f} client cores"
    if cpu["bottleneck"]:
        line += f" - above {cpu['limit']:.0f}%" if cpu["max"] > cpu["limit"] else \
            f" - the client machine above {MACHINE_CPU_LIMIT:.0f}%"
        line += ": the client may be the bottleneck"
    console.print(line, highlight=False, style="bold red" if cpu["bottleneck"] else None)
    if cpu.get("machine_max") is not None:
        console.print(f"client machine cpu: max {cpu['machine_max']:.0f}% of all cores",
                      highlight=False)
    broker = summary.get("broker_cpu")
    if broker:
        ms = broker["cpu_ms_per_received_msg"]
        console.print(f"broker cpu: mean {broker['mean']:.0f}% max {broker['max']:.0f}% of a "
                      f"core over the measured span; {BROKER_CPU_LABEL} {ms:.4f}"
                      if ms is not None else f"broker cpu: mean {broker['mean']:.0f}%",
                      highlight=False)
    if memory := summary.get("memory"):
        sides = [f"{side} {m['bytes_per_connection'] / 1024:.1f} KiB a connection "
                 f"({m['start_bytes'] / 2**20:.0f} -> {m['end_bytes'] / 2**20:.0f} MiB)"
                 for side in ("client", "broker") if (m := memory.get(side))]
        console.print(f"memory with {memory['connections']:,} connections held: "
                      f"{', '.join(sides)}", highlight=False)


def _warnings(console: Console, summary: dict[str, Any]) -> None:
    """What makes a group's figures read otherwise: closed-loop latency, clamped samples,
    unsent messages, outages."""
    for name, g in summary["groups"].items():
        if g.get("closed_loop"):
            console.print(f"{name}: no rate set, so no intended send times: its latency is "
                          "closed-loop (service) latency, not comparable with a paced run's",
                          highlight=False, style="yellow")
        if g.get("clamped"):
            console.print(f"{name}: {g['clamped']} samples outside the histograms' range "
                          "(negative: clocks apart; or above an hour) were clamped into it",
                          highlight=False, style="yellow")
        if short_of_target(g):
            console.print(f"{name}: {g['rate']:,.1f} msg/s is {g['rate'] / g['target']:.0%} of "
                          f"the {g['target']:,g}/s asked: the client, the broker or the "
                          "network held it back (see client cpu, outages and errors)",
                          highlight=False, style="yellow")
        if g.get("untaken"):
            console.print(f"{name}: {g['untaken']:,} sends of the measured span were refused "
                          "or in doubt: its rate and count are the "
                          f"{g['taken']:,} the broker took", highlight=False, style="yellow")
        if g.get("unsent"):
            console.print(f"{name}: {g['unsent']} messages were due but unsent at the stop; "
                          "their delay is recorded as at least their wait to the stop",
                          highlight=False, style="yellow")
    for name, g in summary["groups"].items():
        if g["reconnects"] or g["outage_ms"]:
            doubt = f", {g['in_doubt']} sends in doubt" if g.get("in_doubt") else ""
            console.print(f"outage {name}: {g['reconnects']} reconnects, "
                          f"{g['outage_ms'] / 1000:.1f} s disconnected (summed over threads), "
                          f"{g['errors']} errors{doubt}", highlight=False, style="yellow")


def _verdicts(console: Console, summary: dict[str, Any]) -> None:
    """The delivery check per destination, and the thresholds' verdict."""
    for check in summary["delivery"]:
        bad = check["missing"] or check["unexpected"] or check["duplicated"]
        doubt = ""
        if check.get("in_doubt"):
            arrived = f": {check['in_doubt_arrived']} arrived, " \
                f"{check['in_doubt_not_arrived']} not" if "in_doubt_arrived" in check else ""
            doubt = f" ({check['in_doubt']} of them in doubt{arrived})"
        unexpected = f", unexpected {check['unexpected']}" if check["unexpected"] else ""
        console.print(f"delivery {check['destination']}: expected {check['expected']}{doubt}, "
                      f"received {check['received']}, missing {check['missing']}"
                      f"{unexpected}, duplicated {check['duplicated']}",
                      highlight=False, style="bold red" if bad else None)
    for point in summary.get("unchecked", ()):
        console.print(f"delivery {point['destination']}: no check: {point['why']}",
                      highlight=False)
    verdict = summary.get("slo")
    if verdict:
        console.print(slo_table(verdict))
        console.print("thresholds: " + ("all met" if verdict["passed"] else
                      f"{sum(not v['passed'] for v in verdict['thresholds'])} of "
                      f"{len(verdict['thresholds'])} missed (exit {EXIT_SLO})"),
                      highlight=False, style=None if verdict["passed"] else "bold red")


def slo_table(verdict: dict[str, Any]) -> Table:
    """The thresholds, met or missed, over the measured span (and its intervals)."""
    every = any("intervals_judged" in v for v in verdict["thresholds"])
    table = Table(title="Thresholds", title_justify="left")
    for column in ("threshold", "measured", "verdict", *(("intervals missed",) if every else ())):
        table.add_column(column)
    for v in verdict["thresholds"]:
        mark = "[green]pass[/]" if v["passed"] else "[bold red]FAIL[/]"
        if v["span_passed"] is None:
            mark += " (not measured)"
        row = [escape(v["threshold"]), escape(v["shown"]), mark]
        if every:
            row.append(f"{v['intervals_missed']} of {v['intervals_judged']}")
        table.add_row(*row)
    return table
