"""From merged aggregates (harness.merge.core) to what a merge writes: the interval rows
(parquet / CSV), summary.json, merged.hlog and the data report.html draws."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.merge.core import PHASES
from harness.rundir.reader import replay, run_from_manifest
from harness.rundir.writer import SCHEMA_VERSION, hlog_header, hlog_line, record_base
from harness.spec.roles import ROLES
from harness.stats.figures import CLIENT_CPU_LIMIT, rate
from harness.stats.histogram import decode, encode, percentiles
from harness.stats.nines import distribution

ROW_COLUMNS = ("run", "interval_start", "t", "phase", "tag", "group", "metric", "count",
               "rate", "p50", "p90", "p99", "p99.9", "max", "hist")
SKEW_WARN_S = 0.001


@dataclass
class Merged:
    rows: list[dict[str, Any]]  # one per (run, interval slot, tag)
    summary: dict[str, Any]
    hlog: str
    report: dict[str, Any]  # what report.html draws
    warnings: list[str] = field(default_factory=list)
    # The merged run in the harness's own run-directory format (one run only), so that
    # `harness view` replays it like any run.
    manifest: dict[str, Any] | None = None
    intervals: list[dict[str, Any]] = field(default_factory=list)


# Below this share of overlap between the nodes' measured spans, the merged rate (a sum of
# rates over different spans) describes no moment of the run: the summary says so.
OVERLAP_WARN = 0.9


class _Run:
    """One run's part of the folded aggregates: its intervals as (slot, phase), one record
    per node each, which harness.rundir.reader replays into the run's figures exactly as it
    does for any run directory (and `harness view` does for the merge's output)."""

    def __init__(self, run: str, entry: dict[str, Any],
                 by_kind: dict[str, list[tuple[tuple[Any, ...], Any]]]) -> None:
        self.run, self.entry, self.by_kind = run, entry, by_kind
        self.interval = entry["interval"]
        self.roles: dict[str, str] = entry["roles"]
        self.spec = run_from_manifest(entry["nodes"][0])
        self.length = {k[2:]: v for k, v in self.items("length")}  # (slot, phase, node)
        self.begin = {k[2:]: v for k, v in self.items("begin")}
        self.slots = sorted({(slot, phase) for slot, phase, _ in self.length},
                            key=lambda sp: (sp[0], PHASES.index(sp[1])))
        self.first = self.slots[0][0]
        self.base_time = self.first * self.interval

    def items(self, kind: str) -> list[tuple[tuple[Any, ...], Any]]:
        return [(k, v) for k, v in self.by_kind.get(kind, []) if k[1] == self.run]

    def t(self, slot: int) -> float:
        return (slot - self.first) * self.interval

    def seconds(self, slot: int, phase: str) -> float:
        return max((v for (s, p, _), v in self.length.items() if (s, p) == (slot, phase)),
                   default=self.interval)

    def records(self) -> list[dict[str, Any]]:
        """The merged run's interval records: per (slot, phase), one per node."""
        index = {sp: i for i, sp in enumerate(self.slots)}
        records: list[dict[str, Any]] = []
        bases = {}
        cpu = {k[2:]: v for k, v in self.items("cpu")}
        for (slot, phase, node), length in sorted(self.length.items()):
            base = bases[slot, phase, node] = record_base(
                self.run, node, 0, index[slot, phase], self.begin[slot, phase, node], length,
                phase)
            records.append({"type": "process", **base, "pid": 0,
                            "cpu": cpu.get((slot, phase, node), 0.0)})
        for (_, _, slot, phase, node, group), counters in self.items("counters"):
            records.append({"type": "counters", **bases[slot, phase, node], "group": group,
                            **counters, "threads": 0, "threads_up": 0})
        for (_, _, slot, phase, node, tag), encoded in self.items("hist"):
            histogram = decode(encoded)
            records.append({"type": "histogram", **bases[slot, phase, node],
                            "group": tag.rpartition(".")[0], "tag": tag,
                            "count": histogram.get_total_count(),
                            "max": histogram.get_max_value(), "hist": encoded})
        common = {"v": SCHEMA_VERSION, "run": self.run, "node": "merged"}
        for kind in ("broker", "host"):
            for (_, _, slot, phase), value in self.items(kind):
                records.append({"type": kind, **common, "interval": index[slot, phase],
                                "start": slot * self.interval, "phase": phase, "cpu": value})
        for (_, _, kind, name), value in self.items("reconcile"):
            key = "group" if kind == "reconciliation" else "destination"
            records.append({"type": kind, **common, key: name, **value})
        return records

    def rows(self, hlog_parts: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The interval rows (one per slot, phase and tag, every node's summed), their .hlog
        lines and the latency series report.html draws."""
        summed: dict[tuple[int, str, str], Any] = {}
        for (_, _, slot, phase, _, tag), encoded in self.items("hist"):
            key = (slot, phase, tag)
            if key in summed:
                summed[key].decode_and_add(encoded)
            else:
                summed[key] = decode(encoded)
        rows, series = [], {}
        order = {sp: i for i, sp in enumerate(self.slots)}
        for (slot, phase, tag), histogram in sorted(summed.items(),
                                                    key=lambda kv: (order[kv[0][:2]], kv[0][2])):
            p = percentiles(histogram)
            encoded = encode(histogram)
            group, _, metric = tag.rpartition(".")
            count = histogram.get_total_count()
            seconds = self.seconds(slot, phase)
            rows.append({"run": self.run, "interval_start": slot * self.interval,
                         "t": self.t(slot), "phase": phase, "tag": tag, "group": group,
                         "metric": metric, "count": count, "rate": rate(count, seconds), **p,
                         "hist": encoded})
            hlog_parts.append(hlog_line(self.base_time, tag, slot * self.interval, seconds,
                                        histogram.get_max_value(), encoded))
            series.setdefault(tag, []).append([self.t(slot), p["p50"], p["p90"], p["p99"],
                                               p["p99.9"], p["max"]])
        return rows, series

    def tags(self) -> dict[str, dict[str, Any]]:
        """Each tag over the whole run, warm-up left out."""
        whole: dict[str, Any] = {}
        for (_, _, _, phase, _, tag), encoded in self.items("hist"):
            if phase != "warmup":
                if tag in whole:
                    whole[tag].decode_and_add(encoded)
                else:
                    whole[tag] = decode(encoded)
        return {tag: {"count": h.get_total_count(), **percentiles(h), "hist": encode(h),
                      "distribution": distribution(h)} for tag, h in whole.items()}

    def per_node(self) -> dict[str, dict[str, Any]]:
        """Each node's tags over its run, warm-up left out."""
        whole: dict[tuple[str, str], Any] = {}
        for (_, _, _, phase, node, tag), encoded in self.items("hist"):
            if phase != "warmup":
                if (node, tag) in whole:
                    whole[node, tag].decode_and_add(encoded)
                else:
                    whole[node, tag] = decode(encoded)
        out: dict[str, dict[str, Any]] = {}
        for (node, tag), histogram in sorted(whole.items()):
            out.setdefault(node, {})[tag] = {"count": histogram.get_total_count(),
                                             **percentiles(histogram)}
        return out

    def spans(self, warnings: list[str]) -> dict[str, Any]:
        """Each node's measured span, the span in which every node was measuring, and how
        much of the longest span that is."""
        spans: dict[str, list[float]] = {}
        for (_, phase, node), begin in self.begin.items():
            if phase != "measure":
                continue
            end = begin + self.length[_, phase, node]
            low, high = spans.get(node, [begin, end])
            spans[node] = [min(low, begin), max(high, end)]
        if not spans:
            return {"nodes": {}, "common": None, "overlap": None}
        low = max(s[0] for s in spans.values())
        high = min(s[1] for s in spans.values())
        longest = max(s[1] - s[0] for s in spans.values())
        overlap = max(high - low, 0.0) / longest if longest > 0 else 1.0
        if len(spans) > 1 and overlap < OVERLAP_WARN:
            warnings.append(f"run {self.run}: the nodes measured together for "
                            f"{max(high - low, 0.0):.1f} s, {overlap:.0%} of the longest "
                            f"node's span (below {OVERLAP_WARN:.0%}): the merged rate sums "
                            "rates measured at different times")
        base = self.base_time
        return {"nodes": {n: [s[0] - base, s[1] - base] for n, s in spans.items()},
                "common": [low - base, high - base] if high > low else None,
                "overlap": overlap}

    def throughput(self) -> tuple[list[list[float]], dict[str, list[list[float]]]]:
        """Messages received a second, in all and per node, slot by slot."""
        per_slot: dict[int, float] = {}
        node_slot: dict[str, dict[int, float]] = {}
        for (_, _, slot, phase, node, group), counters in self.items("counters"):
            if group in self.roles and ROLES[self.roles[group]].consumes:
                received = rate(counters.get("received", 0), self.seconds(slot, phase))
                per_slot[slot] = per_slot.get(slot, 0) + received
                values = node_slot.setdefault(node, {})
                values[slot] = values.get(slot, 0) + received
        slots = sorted({slot for slot, _ in self.slots})
        total = [[self.t(s), per_slot.get(s, 0)] for s in slots]
        nodes = {node: [[self.t(s), values.get(s, 0)] for s in slots]
                 for node, values in node_slot.items()}
        return total, nodes

    def cpu(self) -> dict[str, list[list[float]]]:
        cpu: dict[str, dict[int, float]] = {}
        for (_, _, slot, _, node), value in self.items("cpu"):
            values = cpu.setdefault(node, {})
            values[slot] = max(values.get(slot, 0.0), value)
        return {node: [[self.t(s), v] for s, v in sorted(values.items())]
                for node, values in cpu.items()}

    def nodes(self, cpu: dict[str, list[list[float]]], skew_warn_s: float,
              warnings: list[str]) -> list[dict[str, Any]]:
        nodes = []
        for m in self.entry["nodes"]:
            offset = float((m.get("clock") or {}).get("offset_estimate_s") or 0.0)
            busiest = max((v for _, v in cpu.get(m["node"], [])), default=0.0)
            nodes.append({"node": m["node"], "host": m.get("host", {}), "start": m.get("start"),
                          "clock_offset_s": offset, "status": m.get("status"),
                          "cpu_max": busiest})
            if abs(offset) > skew_warn_s:
                warnings.append(f"run {self.run}: node {m['node']} clock offset "
                                f"{offset * 1000:.1f} ms (above {skew_warn_s * 1000:g} ms): "
                                "latency measured across nodes is unreliable by that much")
            if busiest > CLIENT_CPU_LIMIT:
                warnings.append(f"run {self.run}: node {m['node']} client CPU {busiest:.0f}% "
                                f"(above {CLIENT_CPU_LIMIT:.0f}%): the client may be the "
                                "bottleneck")
        return nodes

    def figures(self, records: list[dict[str, Any]], warnings: list[str]) -> dict[str, Any]:
        """The run's figures from its merged records, as for any run (harness.stats)."""
        stats, _, _ = replay(self.spec, records, self.base_time)
        summary = stats.summary()
        for name, group in summary["groups"].items():
            group.pop("histograms", None)
            group["role"] = self.roles.get(name, "")
            bad = {k: group.get(k, 0) for k in ("lost", "duplicated", "reordered", "corrupt",
                                                "clamped") if group.get(k, 0)}
            if bad:
                warnings.append(f"run {self.run}: {name}: " + ", ".join(
                    f"{v} {k}" for k, v in bad.items()))
        return summary

    def manifest(self) -> dict[str, Any]:
        """The merged run's manifest, so that `harness view` replays it like any run."""
        manifest = {k: v for k, v in self.entry["nodes"][0].items() if k != "_path"}
        manifest.update(node="merged", start=self.base_time,
                        merged_from=[m["node"] for m in self.entry["nodes"]])
        return manifest


def build(folded: dict[tuple[Any, ...], Any], layout: dict[str, dict[str, Any]],
          problems: dict[str, int], skew_warn_s: float = SKEW_WARN_S) -> Merged:
    by_kind: dict[str, list[tuple[tuple[Any, ...], Any]]] = {}
    for key, value in folded.items():
        by_kind.setdefault(key[0], []).append((key, value))
    rows: list[dict[str, Any]] = []
    warnings = [f"{count} {name.replace('_', ' ')} skipped"
                for name, count in sorted(problems.items()) if count]
    merged_manifest: dict[str, Any] | None = None
    merged_intervals: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"runs": {}, "skipped": dict(problems)}
    report: dict[str, Any] = {"runs": []}
    hlog_parts: list[str] = []
    runs_with_intervals = {k[1] for k, _ in by_kind.get("length", [])}
    for run, entry in sorted(layout.items()):
        if run not in runs_with_intervals:
            warnings.append(f"run {run}: no intervals")
            continue
        one = _Run(run, entry, by_kind)
        hlog_parts.append(hlog_header(one.base_time, f"harness merge of run {run}, nodes "
                                      f"{', '.join(m['node'] for m in entry['nodes'])}"))
        run_rows, series = one.rows(hlog_parts)
        rows += run_rows
        tags = one.tags()
        throughput, node_rates = one.throughput()
        cpu = one.cpu()
        nodes = one.nodes(cpu, skew_warn_s, warnings)
        records = one.records()
        figures = one.figures(records, warnings)
        spans = one.spans(warnings)
        broker = sorted([k[2] - one.first, v] for k, v in one.items("broker"))
        summary["runs"][run] = {
            "name": entry.get("name"), "interval": one.interval, "nodes": nodes,
            **figures, "spans": spans,
            "tags": {t: {k: v for k, v in d.items() if k != "distribution"}
                     for t, d in tags.items()},
            "per_node": one.per_node()}
        if len(layout) == 1:
            merged_manifest, merged_intervals = one.manifest(), records
        report["runs"].append({"run": run, "name": entry.get("name"),
                               "interval": one.interval, "nodes": nodes, "tags": tags,
                               "series": series, "throughput": throughput,
                               "node_throughput": node_rates, "cpu": cpu,
                               "broker_cpu": broker, "groups": figures["groups"],
                               "measured_seconds": figures["measured_seconds"],
                               "spans": spans})
    summary["warnings"] = warnings
    report["warnings"] = warnings
    report["skipped"] = dict(problems)
    return Merged(rows, summary, "".join(hlog_parts), report, warnings, merged_manifest,
                  merged_intervals)


def from_run_dirs(paths: list[Any], skew_warn_s: float = SKEW_WARN_S) -> Merged:
    """The same merge in this process, for a single run (harness report)."""
    import json

    from harness.errors import BadInput
    from harness.merge.core import fold_all, layout_from

    manifests, lines = [], []
    for path in paths:
        try:
            manifest = json.loads((path / "manifest.json").read_text())
            lines += (path / "intervals.jsonl").read_text().splitlines()
        except (OSError, ValueError) as exc:
            raise BadInput("RUN_DIR", f"{path}: not a run directory ({exc})") from None
        manifest["_path"] = str(path)
        manifests.append(manifest)
    layout, problems = layout_from(manifests)
    if problems:
        raise BadInput("RUN_DIR", "; ".join(problems))
    skipped: dict[str, int] = {}
    folded = fold_all(lines, {run: {"interval": e["interval"]} for run, e in layout.items()},
                      skipped)
    return build(folded, layout, skipped, skew_warn_s)
