"""From merged aggregates (harness.mergecore) to what a merge writes: the interval rows
(parquet / CSV), summary.json, merged.hlog and the data report.html draws."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.rundir.writer import hlog_header, hlog_line, record_base
from harness.spec.roles import ROLES
from harness.stats.histogram import decode, encode, percentiles
from harness.stats.intervals import CLIENT_CPU_LIMIT
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


def _count(role: str, counters: dict[str, int]) -> int:
    return counters.get("received", 0) if ROLES[role].consumes else counters.get("sent", 0)


class _Run:
    """One run's part of the folded aggregates, with the slots and phases its outputs share."""

    def __init__(self, run: str, entry: dict[str, Any],
                 by_kind: dict[str, list[tuple[tuple[Any, ...], Any]]],
                 slots: list[int]) -> None:
        self.run, self.entry, self.by_kind = run, entry, by_kind
        self.interval = entry["interval"]
        self.roles: dict[str, str] = entry["roles"]
        self.slots = slots
        self.first = slots[0]
        self.base_time = self.first * self.interval
        self.length = self.of("length")
        self.phase = self.of("phase")

    def of(self, kind: str) -> dict[Any, Any]:
        """This run's values of one kind, by the rest of their key."""
        return {k[2]: v for k, v in self.by_kind.get(kind, []) if k[1] == self.run}

    def items(self, kind: str) -> list[tuple[tuple[Any, ...], Any]]:
        return [(k, v) for k, v in self.by_kind.get(kind, []) if k[1] == self.run]

    def t(self, slot: int) -> float:
        return (slot - self.first) * self.interval

    def seconds(self, slot: int) -> float:
        return self.length.get(slot) or self.interval

    def rows(self, hlog_parts: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The interval rows (one per slot and tag), their .hlog lines and the latency
        series report.html draws."""
        rows, series = [], {}
        for (_, _, slot, tag), encoded in sorted(self.items("slot"),
                                                 key=lambda kv: (kv[0][2], kv[0][3])):
            histogram = decode(encoded)
            p = percentiles(histogram)
            group, _, metric = tag.rpartition(".")
            count = histogram.get_total_count()
            rows.append({"run": self.run, "interval_start": slot * self.interval,
                         "t": self.t(slot), "phase": self.phase.get(slot, "measure"),
                         "tag": tag, "group": group, "metric": metric, "count": count,
                         "rate": count / self.seconds(slot), **p, "hist": encoded})
            hlog_parts.append(hlog_line(self.base_time, tag, slot * self.interval,
                                        self.seconds(slot), histogram.get_max_value(),
                                        encoded))
            series.setdefault(tag, []).append([self.t(slot), p["p50"], p["p90"], p["p99"],
                                               p["p99.9"], p["max"]])
        return rows, series

    def tags(self) -> dict[str, dict[str, Any]]:
        """Each tag over the whole run, warm-up left out."""
        whole: dict[str, Any] = {}
        for (_, _, slot, tag), encoded in self.items("slot"):
            if self.phase.get(slot) != "warmup":
                if tag in whole:
                    whole[tag].decode_and_add(encoded)
                else:
                    whole[tag] = decode(encoded)
        return {tag: {"count": h.get_total_count(), **percentiles(h), "hist": encode(h),
                      "distribution": distribution(h)} for tag, h in whole.items()}

    def per_node(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for (_, _, node, tag), encoded in self.items("node"):
            histogram = decode(encoded)
            out.setdefault(node, {})[tag] = {"count": histogram.get_total_count(),
                                             **percentiles(histogram)}
        return out

    def measured(self) -> float:
        return sum(self.length.get(s, self.interval) for s in self.slots
                   if self.phase.get(s) == "measure")

    def throughput(self) -> tuple[list[list[float]], dict[str, list[list[float]]]]:
        """Messages received a second, in all and per node, slot by slot."""
        per_slot: dict[int, float] = {}
        for (_, _, slot, group), counters in self.items("counters"):
            if group in self.roles and ROLES[self.roles[group]].consumes:
                per_slot[slot] = per_slot.get(slot, 0) + counters.get("received", 0)
        total = [[self.t(s), per_slot.get(s, 0) / self.seconds(s)] for s in self.slots]
        node_slot: dict[str, dict[int, float]] = {}
        for (_, _, slot, node, group), counters in self.items("node_counters"):
            if group in self.roles and ROLES[self.roles[group]].consumes:
                values = node_slot.setdefault(node, {})
                values[slot] = values.get(slot, 0) + counters.get("received", 0)
        nodes = {node: [[self.t(s), values.get(s, 0) / self.seconds(s)] for s in self.slots]
                 for node, values in node_slot.items()}
        return total, nodes

    def cpu(self) -> dict[str, list[list[float]]]:
        cpu: dict[str, list[list[float]]] = {}
        for (_, _, slot, node), value in self.items("cpu"):
            cpu.setdefault(node, []).append([self.t(slot), value])
        for values in cpu.values():
            values.sort()
        return cpu

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

    def groups(self, measured: float, warnings: list[str]) -> dict[str, dict[str, Any]]:
        measured_counts: dict[str, int] = {}
        for (_, _, slot, group), counters in self.items("counters"):
            if group in self.roles and self.phase.get(slot) == "measure":
                measured_counts[group] = measured_counts.get(group, 0) + \
                    _count(self.roles[group], counters)
        totals = self.of("total_counters")
        groups = {}
        for group, role in self.roles.items():
            counters = totals.get(group, {})
            groups[group] = {"role": role, "rate": measured_counts.get(group, 0) / measured
                             if measured else 0.0, **counters}
            bad = {k: counters.get(k, 0) for k in ("lost", "duplicated", "reordered",
                                                    "corrupt") if counters.get(k, 0)}
            if bad:
                warnings.append(f"run {self.run}: {group}: " + ", ".join(
                    f"{v} {k}" for k, v in bad.items()))
        return groups

    def replay(self, rows: list[dict[str, Any]], cpu: dict[str, list[list[float]]]
               ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The merged run as a run directory's manifest and interval records, so that
        `harness view` replays it."""
        entry, interval, first = self.entry, self.interval, self.first
        manifest = {k: v for k, v in entry["nodes"][0].items() if k != "_path"}
        manifest.update(node="merged", start=self.base_time,
                        merged_from=[m["node"] for m in entry["nodes"]])
        cpu_at: dict[int, float] = {}
        for node_values in cpu.values():
            for t, value in node_values:
                at = round(t / interval)
                cpu_at[at] = max(cpu_at.get(at, 0.0), value)
        records, bases = [], {}
        counters_at: dict[int, list[tuple[str, dict[str, int]]]] = {}
        for (_, _, slot, group), counters in self.items("counters"):
            counters_at.setdefault(slot, []).append((group, counters))
        for slot in self.slots:
            base = bases[slot] = record_base(self.run, "merged", 0, slot - first,
                                             slot * interval, self.seconds(slot),
                                             self.phase.get(slot, "measure"))
            records.append({"type": "process", **base, "pid": 0,
                            "cpu": cpu_at.get(slot - first, 0.0)})
            for group, counters in counters_at.get(slot, []):
                records.append({"type": "counters", **base, "group": group, **counters,
                                "threads": 0, "threads_up": 0, "clamped": 0})
        for row in rows:
            slot = round(row["interval_start"] / interval)
            records.append({"type": "histogram", **bases[slot], "group": row["group"],
                            "tag": row["tag"], "count": row["count"], "max": row["max"],
                            "hist": row["hist"]})
        return manifest, records


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
    slots_of: dict[str, list[int]] = {}
    for (_, run, slot), _length in by_kind.get("length", []):
        slots_of.setdefault(run, []).append(slot)
    for run, entry in sorted(layout.items()):
        if not slots_of.get(run):
            warnings.append(f"run {run}: no intervals")
            continue
        one = _Run(run, entry, by_kind, sorted(slots_of[run]))
        hlog_parts.append(hlog_header(one.base_time, f"harness merge of run {run}, nodes "
                                      f"{', '.join(m['node'] for m in entry['nodes'])}"))
        run_rows, series = one.rows(hlog_parts)
        rows += run_rows
        tags = one.tags()
        measured = one.measured()
        throughput, node_rates = one.throughput()
        cpu = one.cpu()
        nodes = one.nodes(cpu, skew_warn_s, warnings)
        groups = one.groups(measured, warnings)
        broker = sorted([k[2] - one.first, v] for k, v in one.items("broker"))
        summary["runs"][run] = {
            "name": entry.get("name"), "interval": one.interval, "nodes": nodes,
            "measured_seconds": measured, "groups": groups,
            "tags": {t: {k: v for k, v in d.items() if k != "distribution"}
                     for t, d in tags.items()},
            "per_node": one.per_node()}
        if len(layout) == 1:
            merged_manifest, merged_intervals = one.replay(run_rows, cpu)
        report["runs"].append({"run": run, "name": entry.get("name"),
                               "interval": one.interval, "nodes": nodes, "tags": tags,
                               "series": series, "throughput": throughput,
                               "node_throughput": node_rates, "cpu": cpu,
                               "broker_cpu": broker, "groups": groups,
                               "measured_seconds": measured})
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
