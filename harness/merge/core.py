"""The exact merge of run directories, as plain functions over lines of intervals.jsonl, so
that the Spark job (harness.merge) runs them inside executors, one partition at a time, and
`harness report` runs them in one process over one run.

Every interval of every node goes on one epoch grid of the statistics interval: slot =
round(start / interval). Histograms are added, never percentiles averaged, keyed by
(run, slot, tag) and (run, node, tag) (the whole run per tag is the sum of its slots after
the warm-up); counters are summed by (run, slot, group) and (run, slot, node, group).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from hdrh.histogram import HdrHistogram

from harness.rundir.writer import SCHEMA_VERSION
from harness.stats.histogram import decode, encode, new_histogram

PHASE_ORDER = {"warmup": 0, "measure": 1, "drain": 2}
Key = tuple[Any, ...]


def slot_of(start: float, interval: float) -> int:
    return int(start / interval + 0.5)


def fold_partition(lines: Iterable[str], layout: dict[str, dict[str, Any]],
                   problems: dict[str, int]) -> Iterator[tuple[Key, Any]]:
    """(key, value) partial aggregates of one partition of lines. problems counts what is
    skipped: truncated (unparseable) lines, corrupt histograms, records of another schema."""
    hists: dict[Key, HdrHistogram] = {}
    sums: dict[Key, dict[str, int]] = {}
    maxima: dict[Key, float] = {}
    phases: dict[Key, str] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            problems["truncated_lines"] = problems.get("truncated_lines", 0) + 1
            continue
        if not isinstance(record, dict) or record.get("v") != SCHEMA_VERSION:
            problems["other_schema"] = problems.get("other_schema", 0) + 1
            continue
        kind, run = record.get("type"), record.get("run")
        if run not in layout or kind not in ("histogram", "counters", "process", "broker"):
            continue
        interval = layout[run]["interval"]
        if kind == "broker":
            key = ("broker", run, slot_of(record["start"], interval))
            maxima[key] = max(maxima.get(key, 0.0), float(record["cpu"]))
            continue
        slot = slot_of(record["start"], interval)
        node = record["node"]
        phase_key = ("phase", run, slot)
        if PHASE_ORDER.get(record["phase"], 1) < PHASE_ORDER.get(phases.get(phase_key, "drain"),
                                                                 2):
            phases[phase_key] = record["phase"]
        length_key = ("length", run, slot)
        maxima[length_key] = max(maxima.get(length_key, 0.0), float(record["length"]))
        if kind == "process":
            key = ("cpu", run, slot, node)
            maxima[key] = max(maxima.get(key, 0.0), float(record["cpu"]))
        elif kind == "counters":
            group = record["group"]
            counts = {k: v for k, v in record.items() if isinstance(v, int) and
                      k not in ("v", "process", "interval", "threads", "threads_up", "clamped")}
            for key in (("counters", run, slot, group), ("node_counters", run, slot, node, group),
                        ("total_counters", run, group)):
                if key[0] == "total_counters" and record["phase"] == "warmup":
                    continue
                target = sums.setdefault(key, {})
                for name, value in counts.items():
                    target[name] = target.get(name, 0) + value
        else:
            if not record.get("count"):
                continue
            tag = record["tag"]
            node_key = ("node", run, node, tag)
            target = hists.get(node_key)
            if target is None:
                target = hists[node_key] = new_histogram()
            try:
                # Decoding straight into the sum: no histogram allocated per record.
                target.decode_and_add(record["hist"])
            except Exception:
                problems["corrupt_histograms"] = problems.get("corrupt_histograms", 0) + 1
                continue
            # A partition holds one record per slot and tag from each process it read:
            # adding here would only decode and encode each again, so the raw encoding goes
            # on to the reduce, which adds all the nodes' records of a slot at once.
            yield ("slot", run, slot, tag), record["hist"]
    for key, histogram in hists.items():
        yield key, encode(histogram)
    for key, counts in sums.items():
        yield key, counts
    for key, value in maxima.items():
        yield key, value
    for key, phase in phases.items():
        yield key, phase


def combine(a: Any, b: Any) -> Any:
    """Merge two partial values of the same key (one function for every kind of key)."""
    if isinstance(a, str) and isinstance(b, str) and a not in PHASE_ORDER:
        histogram = decode(a)
        histogram.add(decode(b))
        return encode(histogram)
    if isinstance(a, str):  # a phase: the earliest wins (any node still warming up)
        return a if PHASE_ORDER[a] <= PHASE_ORDER[b] else b
    if isinstance(a, dict):
        out = dict(a)
        for name, value in b.items():
            out[name] = out.get(name, 0) + value
        return out
    return max(a, b)


def merge_values(values: Iterable[Any]) -> Any:
    """All partial values of one key merged (histograms decoded once each, encoded once)."""
    values = list(values)
    first = values[0]
    if isinstance(first, str) and first not in PHASE_ORDER:
        histogram = decode(first)
        for encoded in values[1:]:
            histogram.decode_and_add(encoded)
        return encode(histogram)
    merged = first
    for value in values[1:]:
        merged = combine(merged, value)
    return merged


def fold_all(lines: Iterable[str], layout: dict[str, dict[str, Any]],
             problems: dict[str, int]) -> dict[Key, Any]:
    """The whole merge in one process (a single run, or tests)."""
    grouped: dict[Key, list[Any]] = {}
    for key, value in fold_partition(lines, layout, problems):
        grouped.setdefault(key, []).append(value)
    return {key: merge_values(values) for key, values in grouped.items()}


def layout_from(manifests: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]],
                                                           list[str]]:
    """The layout of the runs, and the problems that make the inputs unmergeable."""
    problems = []
    layout: dict[str, dict[str, Any]] = {}
    seen: set[tuple[str, str]] = set()
    for m in manifests:
        source = m.get("_path", "?")
        if m.get("schema") != SCHEMA_VERSION:
            problems.append(f"{source}: schema version {m.get('schema')!r}; this merge reads "
                            f"{SCHEMA_VERSION}")
            continue
        run, node = m["run_id"], m["node"]
        if (run, node) in seen:
            problems.append(f"{source}: node {node!r} of run {run} is given twice")
            continue
        seen.add((run, node))
        options = m["options"]
        entry = layout.setdefault(run, {"interval": options["interval"], "nodes": [],
                                        "roles": {g["name"]: g["module"].partition(".")[2]
                                                  for g in options["groups"]},
                                        "name": m.get("name", run)})
        if entry["interval"] != options["interval"]:
            problems.append(f"{source}: statistics interval {options['interval']} s, other "
                            f"nodes of run {run} use {entry['interval']} s")
        entry["nodes"].append(m)
    return layout, problems
