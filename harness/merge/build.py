"""From what a merge's partitions leave (harness.merge.core.Partial, the nodes' sums) to what
it writes besides the interval rows: summary.json, the data report.html draws and the merged
run's manifest. Everything here is sized by the output (groups, tags, nodes, the report's
points), never by the number of intervals."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.merge.core import (
    Partial,
    RunLayout,
    SlotMerger,
    figures_of,
    node_figures,
    slot_of,
)
from harness.merge.report import attempted_rate
from harness.rundir.reader import Intervals, Records
from harness.stats.backlog import warmup_note
from harness.stats.figures import CLIENT_CPU_LIMIT
from harness.stats.histogram import encode, percentiles
from harness.stats.nines import distribution

SKEW_WARN_S = 0.001
# Below this share of overlap between the nodes' measured spans, the merged rate (a sum of
# rates over different spans) describes no moment of the run: the summary says so.
OVERLAP_WARN = 0.9


@dataclass
class Merged:
    summary: dict[str, Any]
    report: dict[str, Any]  # what report.html draws
    warnings: list[str] = field(default_factory=list)


@dataclass
class Gathered:
    """What the driver gathers of one run's merge."""

    partial: Partial
    per_node: dict[str, dict[str, dict[str, Any]]]
    reconcile: list[dict[str, Any]]
    skipped: dict[str, int]


def run_entry(layout: RunLayout, gathered: Gathered, warnings: list[str],
              skew_warn_s: float = SKEW_WARN_S) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's entry in summary.json, and in the report."""
    stats = gathered.partial.stats
    stats.every_node = len(layout.nodes) >= stats.run.nodes
    if not stats.every_node:
        warnings.append(f"run {layout.run}: {len(layout.nodes)} of its {stats.run.nodes} "
                        "nodes merged: what was sent and received on a broker's destinations "
                        "is not balanced without every node")
    stats.add_reconciliation(gathered.reconcile)
    figures = stats.summary()
    for name, group in figures["groups"].items():
        group.pop("histograms", None)
        group["role"] = layout.roles.get(name, "")
        bad = {k: group.get(k, 0) for k in ("lost", "duplicated", "reordered", "corrupt",
                                            "clamped") if group.get(k, 0)}
        if bad:
            warnings.append(f"run {layout.run}: {name}: " + ", ".join(
                f"{v} {k}" for k, v in bad.items()))
    for point, left in figures.get("warmup_backlog", {}).items():
        warnings.append(f"run {layout.run}: {warmup_note(point, left)}")
    tags = {}
    for totals in stats.groups:
        for metric, histogram in totals.histograms.items():
            if histogram.get_total_count():
                tags[f"{totals.spec.name}.{metric}"] = {
                    "count": histogram.get_total_count(), **percentiles(histogram),
                    "hist": encode(histogram), "distribution": distribution(histogram)}
    points = sorted(gathered.partial.points, key=lambda p: p["t"])
    cpu = _series(points, "cpu")
    nodes = _nodes(layout, cpu, skew_warn_s, warnings)
    spans = _spans(layout, gathered.partial.spans, warnings)
    series: dict[str, list[list[Any]]] = {}
    for point in points:
        for tag, values in point["latency"].items():
            series.setdefault(tag, []).append([point["t"], *values])
    summary = {"name": layout.name, "interval": layout.interval, "nodes": nodes, **figures,
               "spans": spans,
               "tags": {t: {k: v for k, v in d.items() if k != "distribution"}
                        for t, d in sorted(tags.items())},
               "per_node": gathered.per_node}
    report = {"run": layout.run, "name": layout.name, "interval": layout.interval,
              "nodes": nodes, "tags": tags, "series": series,
              "points_per": layout.bucket,
              "throughput": [[p["t"], p["received"]] for p in points],
              "node_throughput": _series(points, "nodes", 0.0), "cpu": cpu,
              "broker_cpu": [[p["t"], p["broker_cpu"]] for p in points
                             if p["broker_cpu"] is not None],
              "groups": figures["groups"], "measured_seconds": figures["measured_seconds"],
              "spans": spans, "steps": figures.get("steps"),
              "attempted": attempted_rate(layout.spec.to_dict())}
    return summary, report


def _series(points: list[dict[str, Any]], key: str, absent: float | None = None
            ) -> dict[str, list[list[float]]]:
    """A per-node figure of the points as a series per node; where a node has no value,
    `absent` if given (a node that received nothing received 0), else no point."""
    nodes = sorted({node for point in points for node in point[key]})
    out: dict[str, list[list[float]]] = {node: [] for node in nodes}
    for point in points:
        for node in nodes:
            value = point[key].get(node, absent)
            if value is not None:
                out[node].append([point["t"], value])
    return out


def _nodes(layout: RunLayout, cpu: dict[str, list[list[float]]], skew_warn_s: float,
           warnings: list[str]) -> list[dict[str, Any]]:
    nodes = []
    for m in layout.nodes:
        offset = float((m.get("clock") or {}).get("offset_estimate_s") or 0.0)
        busiest = max((v for _, v in cpu.get(m["node"], [])), default=0.0)
        nodes.append({"node": m["node"], "host": m.get("host", {}), "start": m.get("start"),
                      "clock_offset_s": offset, "status": m.get("status"),
                      "cpu_max": busiest})
        if abs(offset) > skew_warn_s:
            warnings.append(f"run {layout.run}: node {m['node']} clock offset "
                            f"{offset * 1000:.1f} ms (above {skew_warn_s * 1000:g} ms): "
                            "latency measured across nodes is unreliable by that much")
        if busiest > CLIENT_CPU_LIMIT:
            warnings.append(f"run {layout.run}: node {m['node']} client CPU {busiest:.0f}% "
                            f"(above {CLIENT_CPU_LIMIT:.0f}%): the client may be the "
                            "bottleneck")
    return nodes


def _spans(layout: RunLayout, spans: dict[str, list[float]], warnings: list[str]
           ) -> dict[str, Any]:
    """Each node's measured span, the span in which every node was measuring, and how much
    of the longest span that is."""
    if not spans:
        return {"nodes": {}, "common": None, "overlap": None}
    low = max(s[0] for s in spans.values())
    high = min(s[1] for s in spans.values())
    longest = max(s[1] - s[0] for s in spans.values())
    overlap = max(high - low, 0.0) / longest if longest > 0 else 1.0
    if len(spans) > 1 and overlap < OVERLAP_WARN:
        warnings.append(f"run {layout.run}: the nodes measured together for "
                        f"{max(high - low, 0.0):.1f} s, {overlap:.0%} of the longest "
                        f"node's span (below {OVERLAP_WARN:.0%}): the merged rate sums "
                        "rates measured at different times")
    base = layout.base_time
    return {"nodes": {n: [s[0] - base, s[1] - base] for n, s in sorted(spans.items())},
            "common": [low - base, high - base] if high > low else None,
            "overlap": overlap}


def merged_manifest(layout: RunLayout) -> dict[str, Any]:
    """The merged run's manifest, so that `harness view` replays it like any run."""
    manifest = {k: v for k, v in layout.nodes[0].items() if not k.startswith("_")}
    manifest.update(node="merged", start=layout.base_time,
                    merged_from=[m["node"] for m in layout.nodes])
    return manifest


def gather_locally(layout: RunLayout, records: Records) -> Gathered:
    """One run directory's merge in this process, as the executors would do it (harness
    report): its intervals read as they come, never held."""
    merger = SlotMerger(layout)
    intervals = Intervals(records)
    for _, each in intervals:
        start = min((r["start"] for r in each if "length" in r), default=None)
        if start is not None:
            merger.slot(slot_of(start, layout.interval), each)
    return Gathered(merger.finish(), node_figures(
        (key, figures_of(h)) for key, h in merger.node_sums().items()),
                    intervals.reconciliation,
                    {"truncated_lines": records.skipped, "corrupt_histograms": merger.corrupt})


def report_run(run_dir: Path) -> Merged:
    """One run directory's summary and report in this process, without Spark (harness
    report), by the code the executors run."""
    import os

    from harness.merge.core import layouts_from
    from harness.rundir.reader import load

    recorded = load(run_dir)
    manifest = {**recorded.manifest, "_path": str(run_dir),
                "_end": os.path.getmtime(recorded.path)}
    layouts, _ = layouts_from([manifest])
    warnings: list[str] = []
    if not layouts:
        raise BadInput("RUN_DIR", f"{run_dir} holds no intervals")
    (layout,) = layouts.values()
    gathered = gather_locally(layout, Records(recorded.path))
    warnings += [f"{count} {name.replace('_', ' ')} skipped"
                 for name, count in sorted(gathered.skipped.items()) if count]
    entry, drawn = run_entry(layout, gathered, warnings)
    return Merged({"runs": {layout.run: entry}, "skipped": gathered.skipped,
                   "warnings": warnings},
                  {"runs": [drawn], "warnings": warnings, "skipped": gathered.skipped},
                  warnings)
