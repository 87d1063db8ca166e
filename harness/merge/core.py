"""The exact merge of run directories, as plain functions over lines of intervals.jsonl, so
that the Spark job (harness.merge) runs them inside executors, one partition at a time, and
`harness report` runs them in one process over one run.

Every interval of every node goes on one epoch grid of the statistics interval: slot =
round(start / interval), and keeps its node's phase. Histograms are added, never
percentiles averaged, keyed by (run, slot, phase, node, tag); counters are summed by (run,
slot, phase, node, group); each node's processes become one. harness.merge.build turns
these into the merged run, whose figures harness.stats computes as for any run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from hdrh.histogram import HdrHistogram

from harness.rundir.writer import SCHEMA_VERSION
from harness.stats.histogram import decode, encode, new_histogram

PHASES = ("warmup", "measure", "drain")
KINDS = ("histogram", "counters", "process", "broker", "host", "reconciliation", "union")
Key = tuple[Any, ...]


def slot_of(start: float, interval: float) -> int:
    return int(start / interval + 0.5)


def fold_partition(lines: Iterable[str], layout: dict[str, dict[str, Any]],
                   problems: dict[str, int]) -> Iterator[tuple[Key, Any]]:
    """(key, value) partial aggregates of one partition of lines. problems counts what is
    skipped: truncated (unparseable) lines, corrupt histograms, records of another schema.

    Every key holds the phase of the node that measured it: a slot takes from each node
    only what that node measured in each phase, and each node's processes are summed into
    one record per slot, phase and group (the merged run as its own run directory)."""
    hists: dict[Key, HdrHistogram] = {}
    sums: dict[Key, dict[str, int]] = {}
    maxima: dict[Key, float] = {}
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
        if run not in layout or kind not in KINDS:
            continue
        if kind in ("reconciliation", "union"):
            # Summed over nodes: a union's count is exact within a node; across nodes it
            # assumes no message reached receivers on two of them.
            name = record.get("group") or record["destination"]
            target = sums.setdefault(("reconcile", run, kind, name), {})
            for field in ("lost_at_tail", "failed_sends", "received_once"):
                if field in record:
                    target[field] = target.get(field, 0) + record[field]
            continue
        interval = layout[run]["interval"]
        slot = slot_of(record["start"], interval)
        phase, node = record.get("phase", "measure"), record["node"]
        if kind in ("broker", "host"):
            key = (kind, run, slot, phase)
            maxima[key] = max(maxima.get(key, 0.0), float(record["cpu"]))
            continue
        length_key = ("length", run, slot, phase, node)
        maxima[length_key] = max(maxima.get(length_key, 0.0), float(record["length"]))
        # Every process of a node begins an interval at the same instant.
        maxima["begin", run, slot, phase, node] = float(record["start"])
        if kind == "process":
            key = ("cpu", run, slot, phase, node)
            maxima[key] = max(maxima.get(key, 0.0), float(record["cpu"]))
        elif kind == "counters":
            counts = {k: v for k, v in record.items() if isinstance(v, int) and
                      k not in ("v", "process", "interval", "threads", "threads_up")}
            target = sums.setdefault(("counters", run, slot, phase, node, record["group"]), {})
            for name, value in counts.items():
                target[name] = target.get(name, 0) + value
        else:
            if not record.get("count"):
                continue
            key = ("hist", run, slot, phase, node, record["tag"])
            target = hists.get(key)
            if target is None:
                target = hists[key] = new_histogram()
            try:
                # Decoding straight into the sum: no histogram allocated per record.
                target.decode_and_add(record["hist"])
            except Exception:
                problems["corrupt_histograms"] = problems.get("corrupt_histograms", 0) + 1
                continue
    for key, histogram in hists.items():
        yield key, encode(histogram)
    for key, counts in sums.items():
        yield key, counts
    for key, value in maxima.items():
        yield key, value


def combine(a: Any, b: Any) -> Any:
    """Merge two partial values of the same key (one function for every kind of key)."""
    if isinstance(a, str):
        histogram = decode(a)
        histogram.add(decode(b))
        return encode(histogram)
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
    if isinstance(first, str):
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
