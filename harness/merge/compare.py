"""compare.html: several runs (brokers, versions, settings) on shared axes, each labelled by
what differs between their manifests: the latency distribution of one tag on a nines axis,
the throughput over time, latency against attempted rate where runs have rate steps, and a
table of each run's figures. One self-contained file, as report.html is."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.merge.report import (
    STYLE,
    _ms,
    _table,
    attempted_rate,
    chart,
    headline_tag,
    run_point_charts,
    step_asked,
)
from harness.modules.interface.roles import ROLES
from harness.units import format_us

# What says nothing of how a run was set up: left out of the labels.
UNLABELLED = {"run_id", "node", "nodes", "password", "name", "plan", "slo", "thresholds"}


def _flatten(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in UNLABELLED:
                _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list):
        out[prefix] = json.dumps(value, sort_keys=True)
    else:
        out[prefix] = "" if value is None else str(value)


def setup_of(manifest: dict[str, Any]) -> dict[str, str]:
    """A run's settings, flat (groups by name): what a label may name."""
    options = dict(manifest.get("options") or {})
    groups = options.pop("groups", None) or []
    out: dict[str, str] = {}
    _flatten(options, "", out)
    for group in groups:
        _flatten({k: v for k, v in group.items() if k != "name"}, str(group.get("name")), out)
    host = manifest.get("host") or {}
    out["host"] = str(host.get("hostname", ""))
    for library, version in (host.get("libraries") or {}).items():
        out[f"library.{library}"] = str(version)
    return out


def labels(manifests: list[dict[str, Any]]) -> list[str]:
    """Each run's label: the settings whose values differ between the runs, of those set in
    every run, and each group's module where the runs' groups differ (a queue's run beside a
    topic's: not the other transport's options, empty in the run that did not use them); its
    run id where none does, or where two runs would read alike."""
    setups = [setup_of(m) for m in manifests]
    keys = sorted({k for s in setups for k in s})
    differ = [k for k in keys if len({s.get(k, "") for s in setups}) > 1 and
              (all(s.get(k) for s in setups) or k.endswith(".module"))]
    out = [", ".join(f"{k}={s[k]}" for k in differ if s.get(k)) or m.get("run_id", "?")
           for s, m in zip(setups, manifests, strict=True)]
    if len(set(out)) < len(out):
        out = [f"{label} ({m.get('run_id', '?')})" if label else m.get("run_id", "?")
               for label, m in zip(out, manifests, strict=True)]
    return out


def render_compare(runs: list[dict[str, Any]], names: list[str], tag: str,
                   attempted: list[float | None] | None = None) -> str:
    parts = [f"<h1>harness compare: {html.escape(tag)}</h1>",
             "<p>Each run is labelled by the settings that differ between the runs' manifests."
             "</p>"]
    rows = []
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        t = run["tags"][tag]
        group = run["groups"].get(tag.rpartition(".")[0], {})
        rows.append([f"run {i + 1}", name, run["run"], f"{group.get('rate', 0):,.1f}",
                     f"{t['count']:,}",
                     *(format_us(t[q]) for q in ("p50", "p90", "p99", "p99.9", "max"))])
    parts.append(_table(["", "settings that differ", "run id",
                         f"{tag.rpartition('.')[0]} rate/s", "count", "p50", "p90", "p99",
                         "p99.9", "max"], rows))
    # The charts' legends name each run by its row of the table: labels can be long.
    names = [f"run {i + 1}" for i in range(len(runs))]
    distributions = {name: [[x, v / 1000] for x, v in run["tags"][tag]["distribution"]]
                     for run, name in zip(runs, names, strict=True)}
    top = max((p[0] for d in distributions.values() for p in d), default=1.0)
    nines = [(n, "0%" if n == 0 else f"{100 - 10 ** (2 - n):.{max(n - 2, 0)}f}%")
             for n in range(int(top) + 1)]
    parts.append(chart(f"{tag}: percentile distribution (nines axis)", distributions, "ms",
                       y_format=_ms, x_ticks=nines, x_label="percentile"))
    parts.append(chart("Throughput: messages received per second",
                       {name: run["throughput"] for run, name in zip(runs, names, strict=True)},
                       "msgs/s", x_label="seconds from each run's first interval"))
    # Every run a series, in order, so that each keeps its colour from chart to chart.
    stepped: dict[str, list[list[float]]] = {name: [] for name in names}
    group, _, metric = tag.rpartition(".")
    for run, name in zip(runs, names, strict=True):
        for step in run.get("steps") or []:
            asked = step_asked(step)
            p = step["groups"].get(group, {}).get(metric)
            if asked is not None and p and p.get("p99") is not None:
                stepped[name].append([asked, p["p99"] / 1000])
    parts += run_point_charts(runs, attempted or [], tag)
    if any(stepped.values()):
        parts.append(chart(f"{tag} p99 against attempted rate, a point a step",
                           {n: sorted(v) for n, v in stepped.items()}, "ms", y_format=_ms,
                           x_label="msgs/s attempted (the steps' rates)"))
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>harness compare</title><style>{STYLE}</style></head><body>"
            + "".join(parts) + "</body></html>\n")


# The sides a group's role puts it on, by which runs whose groups are named otherwise line up
# (a Receiver's latency beside a Subscriber's): a consumer, a producer, a requestor.
SIDES = ("consumer", "producer", "requestor")


def side_of(module: str) -> str | None:
    role = ROLES.get(module.partition(".")[2])
    if role is None:
        return None
    if role.asks:
        return "requestor"
    if role.consumes:
        return "consumer"
    return "producer" if role.produces else None


def by_side(run: dict[str, Any], manifest: dict[str, Any]) -> dict[str, str]:
    """A run's groups by side, where the side has exactly one group: {side: group}."""
    sides: dict[str, list[str]] = {}
    for group in (manifest.get("options") or {}).get("groups") or []:
        side = side_of(str(group.get("module", "")))
        if side is not None and group.get("name") in run["groups"]:
            sides.setdefault(side, []).append(group["name"])
    return {side: names[0] for side, names in sides.items() if len(names) == 1}


def lined_up(runs: list[dict[str, Any]], manifests: list[dict[str, Any]]) -> None:
    """Each run's tags and groups also under its sides' names (consumer.latency, producer),
    so that runs whose groups are named otherwise compare by role."""
    for run, manifest in zip(runs, manifests, strict=True):
        for side, group in by_side(run, manifest).items():
            run["groups"].setdefault(side, run["groups"][group])
            for tag in list(run["tags"]):
                name, _, metric = tag.rpartition(".")
                if name == group:
                    run["tags"].setdefault(f"{side}.{metric}", run["tags"][tag])


def compare(run_dirs: list[Path], tag: str | None = None) -> tuple[str, list[str], str]:
    """compare.html's text for the runs, each run's label, and the tag compared."""
    from harness.merge.build import report_run
    from harness.rundir.reader import load

    if len(run_dirs) < 2:
        raise BadInput("RUN_DIR", "give two runs or more to compare")
    runs, manifests = [], []
    for run_dir in run_dirs:
        merged = report_run(run_dir)
        runs.append(merged.report["runs"][0])
        manifests.append(load(run_dir).manifest)
    named = {t for run in runs for t in run["tags"]}
    lined_up(runs, manifests)
    if tag is None:
        common = set.intersection(*(set(r["tags"]) for r in runs))
        if not common & named and not any(t.partition(".")[0] in SIDES for t in common):
            raise BadInput("--tag", "the runs have no group, and no role with one group in "
                           "each, in common: name their groups alike (-gn) and give --tag "
                           "GROUP.METRIC")
        # By group name where the runs share one, else by role.
        tag = headline_tag([{"tags": {t: None for t in common & named}}]) if common & named \
            else headline_tag(runs)
    for run_dir, run in zip(run_dirs, runs, strict=True):
        if tag not in run["tags"]:
            sides = sorted({t for t in run["tags"] if t.partition(".")[0] in SIDES} &
                           set.intersection(*(set(r["tags"]) for r in runs)))
            hint = f"; by role, the runs share {', '.join(sides)}" if sides else \
                "; name the runs' groups alike (-gn) to compare them"
            raise BadInput("--tag", f"{tag!r} is not in {run_dir} (it has "
                           f"{', '.join(sorted(t for t in run['tags'] if t in named))})"
                           f"{hint}")
    names = labels(manifests)
    attempted = [attempted_rate(m.get("options") or {}) for m in manifests]
    compared = tag
    side, _, metric = tag.partition(".")
    if side in SIDES and tag not in named:
        groups = [by_side(run, m)[side] for run, m in zip(runs, manifests, strict=True)]
        compared = f"{tag}: by role, each run's one {side} group: " + \
            ", ".join(f"{g}.{metric}" for g in groups)
    return render_compare(runs, names, tag, attempted), names, compared
