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


def build(folded: dict[tuple[Any, ...], Any], layout: dict[str, dict[str, Any]],
          problems: dict[str, int], skew_warn_s: float = SKEW_WARN_S) -> Merged:
    by_kind: dict[str, list[tuple[tuple[Any, ...], Any]]] = {}
    for key, value in folded.items():
        by_kind.setdefault(key[0], []).append((key, value))
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    merged_manifest: dict[str, Any] | None = None
    merged_intervals: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"runs": {}, "skipped": dict(problems)}
    report: dict[str, Any] = {"runs": []}
    hlog_parts: list[str] = []
    slots_of: dict[str, list[int]] = {}
    for (_, run, slot), _length in by_kind.get("length", []):
        slots_of.setdefault(run, []).append(slot)
    for name, count in sorted(problems.items()):
        if count:
            warnings.append(f"{count} {name.replace('_', ' ')} skipped")
    for run, entry in sorted(layout.items()):
        interval = entry["interval"]
        slots = sorted(slots_of.get(run, []))
        if not slots:
            warnings.append(f"run {run}: no intervals")
            continue
        first = slots[0]
        length = {k[2]: v for k, v in by_kind.get("length", []) if k[1] == run}
        phase = {k[2]: v for k, v in by_kind.get("phase", []) if k[1] == run}
        roles = entry["roles"]
        base_time = first * interval
        hlog_parts.append(hlog_header(base_time, f"harness merge of run {run}, nodes "
                                      f"{', '.join(m['node'] for m in entry['nodes'])}"))
        series: dict[str, list[list[Any]]] = {}
        for (_, r, slot, tag), encoded in sorted(by_kind.get("slot", []),
                                                 key=lambda kv: (kv[0][2], kv[0][3])):
            if r != run:
                continue
            histogram = decode(encoded)
            p = percentiles(histogram)
            group, _, metric = tag.rpartition(".")
            count = histogram.get_total_count()
            seconds = length.get(slot) or interval
            rows.append({"run": run, "interval_start": slot * interval,
                         "t": (slot - first) * interval, "phase": phase.get(slot, "measure"),
                         "tag": tag, "group": group, "metric": metric, "count": count,
                         "rate": count / seconds, **p, "hist": encoded})
            hlog_parts.append(hlog_line(base_time, tag, slot * interval, seconds,
                                        histogram.get_max_value(), encoded))
            series.setdefault(tag, []).append([(slot - first) * interval, p["p50"], p["p90"],
                                               p["p99"], p["p99.9"], p["max"]])
        whole: dict[str, Any] = {}
        for (_, r, slot, tag), encoded in by_kind.get("slot", []):
            if r == run and phase.get(slot) != "warmup":
                if tag in whole:
                    whole[tag].decode_and_add(encoded)
                else:
                    whole[tag] = decode(encoded)
        tags = {}
        for tag, histogram in whole.items():
            tags[tag] = {"count": histogram.get_total_count(), **percentiles(histogram),
                         "hist": encode(histogram), "distribution": distribution(histogram)}
        per_node = {}
        for (_, r, node, tag), encoded in by_kind.get("node", []):
            if r == run:
                histogram = decode(encoded)
                per_node.setdefault(node, {})[tag] = {"count": histogram.get_total_count(),
                                                      **percentiles(histogram)}
        totals = {k[2]: v for k, v in by_kind.get("total_counters", []) if k[1] == run}
        measured = sum(length.get(s, interval) for s in slots if phase.get(s) == "measure")
        measured_counts: dict[str, int] = {}
        throughput: dict[str, list[list[float]]] = {"total": []}
        node_rates: dict[str, list[list[float]]] = {}
        per_slot: dict[int, float] = {}
        for (_, r, slot, group), counters in by_kind.get("counters", []):
            if r != run or group not in roles:
                continue
            if phase.get(slot) == "measure":
                measured_counts[group] = measured_counts.get(group, 0) + \
                    _count(roles[group], counters)
            if ROLES[roles[group]].consumes:
                per_slot[slot] = per_slot.get(slot, 0) + counters.get("received", 0)
        throughput["total"] = [[(s - first) * interval, per_slot.get(s, 0) /
                                (length.get(s) or interval)] for s in slots]
        node_slot: dict[str, dict[int, float]] = {}
        for (_, r, slot, node, group), counters in by_kind.get("node_counters", []):
            if r == run and group in roles and ROLES[roles[group]].consumes:
                node_slot.setdefault(node, {})[slot] = \
                    node_slot.setdefault(node, {}).get(slot, 0) + counters.get("received", 0)
        for node, values in node_slot.items():
            node_rates[node] = [[(s - first) * interval, values.get(s, 0) /
                                 (length.get(s) or interval)] for s in slots]
        cpu: dict[str, list[list[float]]] = {}
        for (_, r, slot, node), value in by_kind.get("cpu", []):
            if r == run:
                cpu.setdefault(node, []).append([(slot - first) * interval, value])
        for values in cpu.values():
            values.sort()
        nodes = []
        for m in entry["nodes"]:
            offset = float((m.get("clock") or {}).get("offset_estimate_s") or 0.0)
            busiest = max((v for _, v in cpu.get(m["node"], [])), default=0.0)
            nodes.append({"node": m["node"], "host": m.get("host", {}), "start": m.get("start"),
                          "clock_offset_s": offset, "status": m.get("status"),
                          "cpu_max": busiest})
            if abs(offset) > skew_warn_s:
                warnings.append(f"run {run}: node {m['node']} clock offset {offset * 1000:.1f} "
                                f"ms (above {skew_warn_s * 1000:g} ms): latency measured "
                                "across nodes is unreliable by that much")
            if busiest > CLIENT_CPU_LIMIT:
                warnings.append(f"run {run}: node {m['node']} client CPU {busiest:.0f}% (above "
                                f"{CLIENT_CPU_LIMIT:.0f}%): the client may be the bottleneck")
        groups = {}
        for group, role in roles.items():
            counters = totals.get(group, {})
            groups[group] = {"role": role, "rate": measured_counts.get(group, 0) / measured
                             if measured else 0.0, **counters}
            bad = {k: counters.get(k, 0) for k in ("lost", "duplicated", "reordered",
                                                    "corrupt") if counters.get(k, 0)}
            if bad:
                warnings.append(f"run {run}: {group}: " + ", ".join(f"{v} {k}"
                                                                   for k, v in bad.items()))
        broker = sorted([k[2] - first, v] for k, v in by_kind.get("broker", []) if k[1] == run)
        summary["runs"][run] = {
            "name": entry.get("name"), "interval": interval, "nodes": nodes,
            "measured_seconds": measured, "groups": groups,
            "tags": {t: {k: v for k, v in d.items() if k != "distribution"}
                     for t, d in tags.items()},
            "per_node": per_node}
        if len(layout) == 1:
            first_manifest = entry["nodes"][0]
            manifest = {k: v for k, v in first_manifest.items() if k != "_path"}
            manifest.update(node="merged", start=base_time, merged_from=[
                m["node"] for m in entry["nodes"]])
            replay = []
            cpu_at: dict[int, float] = {}
            for node_values in cpu.values():
                for t, value in node_values:
                    cpu_at[round(t / interval)] = max(cpu_at.get(round(t / interval),
                                                                      0.0), value)
            bases = {}
            for slot in slots:
                base = bases[slot] = record_base(run, "merged", 0, slot - first, slot * interval,
                                                 length.get(slot) or interval,
                                                 phase.get(slot, "measure"))
                replay.append({"type": "process", **base, "pid": 0,
                               "cpu": cpu_at.get(slot - first, 0.0)})
                for (_, r, s2, group), counters in by_kind.get("counters", []):
                    if r == run and s2 == slot:
                        replay.append({"type": "counters", **base, "group": group, **counters,
                                       "threads": 0, "threads_up": 0, "clamped": 0})
            for row in rows:
                if row["run"] == run:
                    slot = round(row["interval_start"] / interval)
                    replay.append({"type": "histogram", **bases[slot], "group": row["group"],
                                   "tag": row["tag"], "count": row["count"], "max": row["max"],
                                   "hist": row["hist"]})
            merged_manifest, merged_intervals = manifest, replay
        report["runs"].append({"run": run, "name": entry.get("name"), "interval": interval,
                               "nodes": nodes, "tags": tags, "series": series,
                               "throughput": throughput["total"], "node_throughput": node_rates,
                               "cpu": cpu, "broker_cpu": broker, "groups": groups,
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
