"""report.html: one self-contained file (inline SVG and CSS, no script, nothing fetched)
with the run facts per node, a summary per tag, throughput, latency over time, the percentile
distribution on a nines axis, client CPU per node, loss, and warnings."""

from __future__ import annotations

import html
import math
from typing import Any

from harness.errors import BadInput
from harness.modules.interface.roles import ROLES
from harness.stats.figures import cost_cells
from harness.units import format_us

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")
W, H, PAD_L, PAD_B, PAD_T, PAD_R = 760, 280, 70, 40, 30, 150
STYLE = ("body{font-family:sans-serif;margin:24px;color:#222}"
         "table{border-collapse:collapse;margin:8px 0 16px}"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
         "th{background:#f0f0f0}.warnings{background:#fff3f3;border:1px solid #d62728;"
         "padding:4px 12px}.chart{background:#fff}.frame{fill:#fafafa;stroke:#999}"
         ".grid{stroke:#ddd}.tick{font-size:11px;fill:#444}.title{font-size:14px;"
         "font-weight:bold}figure{margin:12px 0}")


def _nice(top: float) -> float:
    if top <= 0:
        return 1.0
    exponent = 10 ** math.floor(math.log10(top))
    for step in (1, 2, 2.5, 5, 10):
        if top <= step * exponent:
            return step * exponent
    return 10 * exponent


def chart(title: str, series: dict[str, list[list[float]]], y_label: str,
          y_format: Any = lambda v: f"{v:,.0f}", x_ticks: list[tuple[float, str]] | None = None,
          x_label: str = "seconds") -> str:
    """A line chart in SVG: one polyline per series, axes with ticks, a legend."""
    points = [p for values in series.values() for p in values if p[1] is not None]
    out = [f'<figure><svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{W}" '
           f'height="{H}" viewBox="0 0 {W} {H}" role="img" aria-label="{html.escape(title)}">',
           f'<text x="{PAD_L}" y="18" class="title">{html.escape(title)}</text>']
    plot_w, plot_h = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    if not points:
        out.append(f'<text x="{PAD_L + 10}" y="{PAD_T + 40}">no data</text></svg></figure>')
        return "".join(out)
    x_min = min(p[0] for p in points)
    x_max = max(max(p[0] for p in points), x_min + 1e-9)
    y_max = _nice(max(p[1] for p in points) * 1.05)

    def sx(x: float) -> float:
        return PAD_L + (x - x_min) / (x_max - x_min) * plot_w

    def sy(y: float) -> float:
        return PAD_T + plot_h - y / y_max * plot_h

    out.append(f'<rect x="{PAD_L}" y="{PAD_T}" width="{plot_w}" height="{plot_h}" '
               'class="frame"/>')
    for i in range(5):
        y = y_max * i / 4
        out.append(f'<line x1="{PAD_L}" x2="{PAD_L + plot_w}" y1="{sy(y):.1f}" '
                   f'y2="{sy(y):.1f}" class="grid"/><text x="{PAD_L - 6}" y="{sy(y) + 4:.1f}" '
                   f'class="tick" text-anchor="end">{html.escape(y_format(y))}</text>')
    ticks = x_ticks or [(x_min + (x_max - x_min) * i / 5, f"{x_min + (x_max - x_min) * i / 5:g}")
                        for i in range(6)]
    for x, label in ticks:
        out.append(f'<text x="{sx(x):.1f}" y="{PAD_T + plot_h + 16}" class="tick" '
                   f'text-anchor="middle">{html.escape(label)}</text>')
    out.append(f'<text x="{PAD_L + plot_w / 2}" y="{H - 4}" class="tick" '
               f'text-anchor="middle">{html.escape(x_label)}</text>'
               f'<text x="12" y="{PAD_T + plot_h / 2}" class="tick" text-anchor="middle" '
               f'transform="rotate(-90 12 {PAD_T + plot_h / 2})">{html.escape(y_label)}</text>')
    for i, (name, values) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in values if y is not None)
        if coords:
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                       f'points="{coords}"/>')
        out.append(f'<rect x="{W - PAD_R + 12}" y="{PAD_T + 16 * i}" width="10" height="10" '
                   f'fill="{colour}"/><text x="{W - PAD_R + 26}" y="{PAD_T + 16 * i + 9}" '
                   f'class="tick">{html.escape(name)}</text>')
    out.append("</svg></figure>")
    return "".join(out)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _ms(v: float) -> str:
    return format_us(v * 1000)


def step_asked(step: dict[str, Any]) -> float | None:
    """The rate a step asked of its stepped group (summary.json's steps), if any."""
    return next((g["asked"] for g in step["groups"].values() if "asked" in g), None)


def step_charts(steps: list[dict[str, Any]], groups: dict[str, Any]) -> list[str]:
    """A stepped run's (--rate-steps) table and charts: what each step asked against what
    each group achieved, and each group's headline latency against what was asked (RabbitMQ
    PerfTestMulti's rate-against-latency graph), a point a step."""
    asked = [step_asked(s) for s in steps]
    rows, achieved, latency = [], {}, {}
    for step, attempt in zip(steps, asked, strict=True):
        for name, g in step["groups"].items():
            head = groups[name].get("headline", "latency")
            p = g.get(head) or {}
            rows.append([step["step"], f"{step['begin']:g}-{step['end']:g} s", name,
                         "" if "asked" not in g else f"{g['asked']:,.1f}", f"{g['rate']:,.1f}",
                         head, *(format_us(p.get(q)) for q in ("p50", "p90", "p99", "p99.9",
                                                               "max"))])
            if attempt is None:
                continue
            achieved.setdefault(name, []).append([attempt, g["rate"]])
            if p.get("p50") is not None:
                for q in ("p50", "p99"):
                    latency.setdefault(f"{name} {head} {q}", []).append(
                        [attempt, p[q] / 1000])
    out = ["<h3>Rate steps (each over its own measured seconds)</h3>", _table(
        ["step", "span", "group", "asked/s", "rate/s", "metric", "p50", "p90", "p99", "p99.9",
         "max"], rows)]
    if achieved:
        line = sorted({a for a in asked if a is not None})
        ordered = {"asked": [[a, a] for a in line],
                   **{n: sorted(v) for n, v in achieved.items()}}
        out.append(chart("Achieved against attempted rate, a point a step", ordered,
                         "msgs/s achieved", x_label="msgs/s attempted (the steps' rates)"))
        out.append(chart("Latency against attempted rate, a point a step",
                         {n: sorted(v) for n, v in latency.items()}, "ms", y_format=_ms,
                         x_label="msgs/s attempted (the steps' rates)"))
    return out


def headline_tag(runs: list[dict[str, Any]]) -> str:
    """The tag every run has, a consumer's latency first: what the charts compare."""
    common = set.intersection(*(set(r["tags"]) for r in runs)) if runs else set()
    for suffix in (".latency", ".service"):
        for tag in sorted(common):
            if tag.endswith(suffix):
                return tag
    if not common:
        raise BadInput("--tag", "the runs have no metric in common to compare: give --tag "
                       "GROUP.METRIC")
    return sorted(common)[0]


def attempted_rate(options: dict[str, Any]) -> float | None:
    """What a run's producers were asked to send a second in all, of its options (a
    manifest's): a paced run's; None where one sent as fast as it could, or stepped (its
    steps say it)."""
    total = 0.0
    for group in options.get("groups") or []:
        if ROLES.get(group.get("module", "").partition(".")[2]) is None or \
                not ROLES[group["module"].partition(".")[2]].produces:
            continue
        if group.get("rate_steps"):
            return None
        streams = (group.get("clients") or group.get("threads") or 1) * \
            (group.get("processes") or 1)
        rate = group.get("rate") or (group.get("thread_rate") or 0) * streams
        if not rate:
            return None
        total += rate
    nodes = options.get("nodes") or 1
    return total * nodes or None


def run_point_charts(runs: list[dict[str, Any]], attempted: list[float | None], tag: str
                     ) -> list[str]:
    """Runs each paced at a rate of its own (a sweep's): achieved, and the tag's p50 and
    p99, against each run's attempted rate, a point a run (PerfTestMulti's graph)."""
    if len(runs) < 2 or any(a is None for a in attempted) or len(set(attempted)) < 2:
        return []
    group = tag.rpartition(".")[0]
    achieved = sorted([a, run["groups"].get(group, {}).get("rate", 0.0)]
                      for a, run in zip(attempted, runs, strict=True))
    latency = {q: sorted([a, run["tags"][tag][q] / 1000]
                         for a, run in zip(attempted, runs, strict=True) if tag in run["tags"])
               for q in ("p50", "p99")}
    x_label = "msgs/s attempted (each run's producers)"
    return [chart("Achieved against attempted rate, a point a run",
                  {"attempted": [[a, a] for a, _ in achieved], group: achieved},
                  "msgs/s achieved", x_label=x_label),
            chart(f"{tag} against attempted rate, a point a run",
                  {f"{tag} {q}": v for q, v in latency.items()}, "ms", y_format=_ms,
                  x_label=x_label)]


def render(report: dict[str, Any], title: str) -> str:
    parts = [f"<h1>{html.escape(title)}</h1>"]
    runs = report["runs"]
    if len(runs) > 1:  # a sweep's: its points side by side first
        common = set.intersection(*(set(r["tags"]) for r in runs))
        if common:
            parts += run_point_charts(runs, [r.get("attempted") for r in runs],
                                      headline_tag(runs))
    warnings = report.get("warnings") or []
    if warnings:
        parts.append('<div class="warnings"><h2>Warnings</h2><ul>' +
                     "".join(f"<li>{html.escape(w)}</li>" for w in warnings) + "</ul></div>")
    for run in report["runs"]:
        parts.append(f"<h2>Run {html.escape(str(run['name']))} ({html.escape(run['run'])}), "
                     f"intervals of {run['interval']:g} s, {run['measured_seconds']:.2f} s "
                     "measured</h2>")
        spans = run.get("spans") or {}
        if len(spans.get("nodes") or {}) > 1:
            common = spans["common"]
            parts.append("<p>Every node measuring: " + (
                f"from {common[0]:.2f} s to {common[1]:.2f} s, {spans['overlap']:.0%} of the "
                "longest node's measured span" if common else "never at the same time") +
                ". A group's rate is the sum of its nodes' rates, each over its own span.</p>")
        parts.append(_table(
            ["node", "host", "CPUs", "python", "start (epoch s)", "clock offset",
             "status", "client CPU max"],
            [[n["node"], n["host"].get("hostname", ""), n["host"].get("cpus", ""),
              n["host"].get("python", ""), f"{n['start'] or 0:.3f}",
              f"{n['clock_offset_s'] * 1000:.2f} ms", n.get("status", ""),
              f"{n['cpu_max']:.0f}%"] for n in run["nodes"]]))
        verdict = run.get("slo")
        if verdict:
            parts.append(f"<h3>Thresholds: {'all met' if verdict['passed'] else 'MISSED'}"
                         "</h3>")
            every = any("intervals_judged" in v for v in verdict["thresholds"])
            parts.append(_table(
                ["threshold", "measured", "verdict", *(["intervals missed"] if every else [])],
                [[v["threshold"], v["shown"], "pass" if v["passed"] else "FAIL",
                  *([f"{v['intervals_missed']} of {v['intervals_judged']}"] if every else [])]
                 for v in verdict["thresholds"]]))
        parts.append("<h3>Summary per tag (after warm-up; histograms added across nodes)</h3>")
        parts.append(_table(
            ["tag", "count", "p50", "p90", "p99", "p99.9", "max"],
            [[tag, f"{t['count']:,}", *(format_us(t[k]) for k in
                                        ("p50", "p90", "p99", "p99.9", "max"))]
             for tag, t in sorted(run["tags"].items())]))
        parts.append(_table(
            ["group", "role", "rate/s", "sent", "taken", "in doubt", "received", "errors",
             "lost", "duplicated", "reordered", "corrupt", "clamped", "unsent",
             "client CPU us/msg", "msg/s per core"],
            [[g, v["role"], f"{v['rate']:,.1f}", v.get("sent", 0), v.get("taken", "-"),
              v.get("in_doubt", 0), v.get("received", 0),
              v.get("errors", 0), v.get("lost", 0), v.get("duplicated", 0),
              v.get("reordered", 0), v.get("corrupt", 0), v.get("clamped", 0),
              v.get("unsent", 0), *cost_cells(v)] for g, v in run["groups"].items()]))
        if run.get("steps"):
            parts += step_charts(run["steps"], run["groups"])
        if run.get("points_per", 1) > 1:
            parts.append(f"<p>Each point of the charts over time stands for "
                         f"{run['points_per']} intervals ({run['points_per'] * run['interval']:g}"
                         " s): latency from their histograms added, rates over their span, "
                         "CPU their busiest. Every interval's own figures are in "
                         "merged_intervals.parquet and .csv.</p>")
        throughput = {"all nodes": run["throughput"]}
        if len(run["node_throughput"]) > 1:
            throughput.update(run["node_throughput"])
        parts.append(chart("Throughput: messages received per second", throughput, "msgs/s"))
        for tag, values in sorted(run["series"].items()):
            if not tag.endswith(".latency") and f"{tag.rpartition('.')[0]}.latency" in \
                    run["series"]:
                continue  # one latency chart per group: its headline metric
            series = {name: [[v[0], v[i] / 1000 if v[i] is not None else None]
                             for v in values] for i, name in
                      ((1, "p50"), (2, "p90"), (3, "p99"), (4, "p99.9"), (5, "max"))}
            parts.append(chart(f"{tag} over time", series, "ms", y_format=_ms))
        distributions = {tag: [[x, v / 1000] for x, v in t["distribution"]]
                         for tag, t in sorted(run["tags"].items()) if t["distribution"]}
        top = max((p[0] for d in distributions.values() for p in d), default=1.0)
        nines = [(n, "0%" if n == 0 else f"{100 - 10 ** (2 - n):.{max(n - 2, 0)}f}%")
                 for n in range(int(top) + 1)]
        parts.append(chart("Percentile distribution (nines axis)", distributions, "ms",
                           y_format=_ms, x_ticks=nines, x_label="percentile"))
        cpu = {f"{node} (client)": values for node, values in run["cpu"].items()}
        if run["broker_cpu"]:
            cpu["broker"] = run["broker_cpu"]
        parts.append(chart("CPU per node (% of one core, busiest process)", cpu, "%"))
    skipped = {k: v for k, v in (report.get("skipped") or {}).items() if v}
    if skipped:
        parts.append("<p>Skipped input: " + ", ".join(f"{v} {html.escape(k)}"
                                                       for k, v in skipped.items()) + "</p>")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            + "".join(parts) + "</body></html>\n")
