"""YAML profiles: whole experiments in a file, checked before anything runs.

A profile names its connections, group defaults, worker groups and run-wide settings with the
very names of `harness run`'s long flags (`thread-rate`, `run-length`, `password-env` ...),
and may add variables, a sweep (a matrix over any fields: each combination is one run), a
capacity search, what happens between runs, and what the results table reports. Every value
goes through the same option definitions and validation as the command line, and every
problem is reported with its path (groups[1].thread-rate) and its line in the file.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from harness.distributed.cluster import ClusterSpec, cluster_from
from harness.errors import BadInput
from harness.experiments.profile_build import Builder, expand_omb, scenario_run
from harness.experiments.profile_check import check_sections, check_shapes, unique_problems
from harness.experiments.profile_yaml import (
    TOP_KEYS,
    Checker,
    PathKey,
    Problem,
    ProfileError,
    assign,
    parse_override,
    read_with_lines,
    resolve,
    substitute,
)
from harness.plan.run import RunSpec
from harness.textfiles import load_yaml, read_text

# What a profile's readers import from here, besides what is defined here.
__all__ = ["Point", "Profile", "ProfileError", "find_profile", "listing", "load", "load_data",
           "parse_override", "shipped_dir", "with_value"]


@dataclass
class Criteria:
    p99_ms: float | None = None
    p50_ms: float | None = None
    group: str | None = None  # whose latency; default: every consumer and requestor group
    loss: int | None = 0  # most messages lost, duplicated or missing; None: not checked
    backlog: bool = True  # the backlog must not grow
    backlog_max: int | None = None  # most messages sent and not received at the end
    achieved: float = 0.95  # the achieved rate must reach this share of the target


@dataclass
class Search:
    field: str  # groups.<name>.thread-rate, .rate or .threads
    start: float
    factor: float = 2.0
    max: float = 1e9
    precision: float = 0.05  # bisect until the bracket is this narrow (relative)
    criteria: Criteria = field(default_factory=Criteria)


@dataclass
class Settle:
    drain: bool = True  # consume what the runs left on the queues they used
    wait: float = 2.0  # seconds between runs
    broker_cpu_below: float | None = None  # with run.broker-pid: wait until below this %


@dataclass
class Point:
    index: int
    labels: dict[str, Any]  # sweep field -> value
    run: RunSpec
    data: dict[str, Any]  # the resolved profile of this point
    scenario: Any = None  # (Scenario, its steps) for a scenario profile


@dataclass
class Profile:
    path: Path
    name: str
    description: str
    header: str  # the leading comment: which experiment the profile reproduces
    points: list[Point]
    search: Search | None
    settle: Settle
    rate: str  # results table's Message Rate: a choice of RATE_CHOICES or a group name
    latency: str | None  # the group whose latency the table shows; None: the first consumer
    base_search: dict[str, float] | None = None  # a scenario's BASE search
    cluster: ClusterSpec | None = None  # every run on the nodes of this Spark cluster
    # What the profile asked that is left out, said before its runs (an OMB driver's keys
    # that only the Java client has).
    notes: list[str] = field(default_factory=list)


def load(path: Path, overrides: list[str] | None = None) -> Profile:
    """Read, override, expand and validate a profile; ProfileError lists every problem."""
    text = read_text(path, "PROFILE")
    try:
        data, lines = load_yaml(text, f"PROFILE ({path})", read_with_lines)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ProfileError(path, [Problem("(yaml)", mark.line + 1 if mark else None,
                                          f"not valid YAML: {problem}")]) from None
    return load_data(path, text, data, lines, overrides)


def load_data(path: Path, text: str, data: Any, lines: dict[PathKey, int],
              overrides: list[str] | None = None) -> Profile:
    """A profile read from `path` (its text, its data and the lines of its keys), or made
    by the command line (`harness run --omb`: no text, no lines)."""
    check = Checker(lines)
    if not isinstance(data, dict):
        raise ProfileError(path, [Problem("(top)", 1, "a profile is a mapping of "
                                          f"{', '.join(TOP_KEYS)}")])
    check.keys(data, (), TOP_KEYS)
    check_shapes(data, check)
    if check.problems:
        raise ProfileError(path, check.problems)  # what follows reads each section by shape
    builder = Builder(check)
    notes: list[str] = []
    if "omb" in data or "omb-driver" in data:
        notes = expand_omb(data, path, check)
        if check.problems:
            raise ProfileError(path, check.problems)
    for override in overrides or []:
        key, value = parse_override(override)
        sweep = data.setdefault("sweep", {}) if isinstance(data.get("sweep"), dict | None) \
            else {}
        try:
            if key.startswith("sweep."):
                # --set sweep.vars.size=[4k,8m]: new values for a swept field
                sweep[key.removeprefix("sweep.")] = value
                continue
            target = resolve(data, key)
            assign(data, target, value)
            lines[target] = 0  # from the command line, not the file
            for swept in [k for k in sweep if key in k.split(",")]:
                # A field given on the command line is no longer swept.
                if "," in swept:
                    raise ValueError(f"{key} is swept together with other fields "
                                     f"({swept}); override the sweep with --set sweep.{swept}=")
                del sweep[swept]
        except ValueError as exc:
            check.problems.append(Problem(f"--set {override}", None, str(exc)))
    check_sections(data, builder, check)
    points: list[Point] = []
    sweep = data.get("sweep") or {}
    # With problems in the layout, still read the values of one point, so that every
    # problem is reported at once; a broken sweep is not expanded.
    keys = [] if check.problems or not isinstance(sweep, dict) else list(sweep)
    for index, combination in enumerate(itertools.product(*(sweep[k] for k in keys))):
        point = copy.deepcopy(data)
        labels: dict[str, Any] = {}
        for key, value in zip(keys, combination, strict=True):
            # "a,b": [[a1, b1], [a2, b2]] sweeps fields together
            fields = key.split(",")
            values = value if len(fields) > 1 else [value]
            for name, one in zip(fields, values, strict=True):
                assign(point, resolve(point, name.strip()), one)
            labels[key] = values[0] if len(fields) > 1 else value
        variables = point.get("vars") or {}
        before = len(check.problems)
        for _ in range(3):  # a variable's value may name other variables (set by a sweep)
            variables = substitute(variables, variables, ("vars",), check)
        point = substitute(point, variables, (), check)
        if len(check.problems) > before:
            break
        made = None
        if "scenario" in point:
            made = scenario_run(point, builder, check)
            if made is None:
                break
            run = made[0]
        else:
            groups = []
            for i, raw in enumerate(point.get("groups") or []):
                spec = builder.group(point, i, raw)
                if spec is not None:
                    groups.append(spec)
            if len(groups) != len(point.get("groups") or []):
                break
            run = builder.run(point, groups)
            if run is None:
                break
        if keys:
            run.name = f"p{index + 1:03d}"
        elif "name" not in (point.get("run") or {}) and data.get("name"):
            run.name = str(data["name"])
        points.append(Point(index, labels, run, point, made[1] if made else None))
    if check.problems:
        # A sweep repeats its problems at every point: the first point that fails says it.
        raise ProfileError(path, unique_problems(check.problems))
    header = "\n".join(line[1:].strip() for line in
                       itertools.takewhile(lambda s: s.startswith("#"), text.splitlines()))
    results = data.get("results") or {}
    cluster = cluster_from(data["cluster"]) if data.get("cluster") else None
    base_search = (data.get("scenario") or {}).get("search")
    return Profile(path, str(data.get("name") or path.stem), str(data.get("description") or ""),
                   header, points, _search(data.get("search")), _settle(data.get("settle")),
                   str(results.get("rate", "dispatched")), results.get("latency"),
                   {k: float(v) for k, v in base_search.items()} if base_search else None,
                   cluster, notes)


def _search(raw: dict[str, Any] | None) -> Search | None:
    if raw is None:
        return None
    c = raw.get("criteria") or {}
    loss = c.get("loss", 0)
    criteria = Criteria(c.get("p99-ms"), c.get("p50-ms"), c.get("group"),
                        None if loss == "any" else loss, c.get("backlog", "stable") == "stable",
                        c.get("backlog-max"), float(c.get("achieved", 0.95)))
    return Search(raw["field"], float(raw["start"]), float(raw.get("factor", 2)),
                  float(raw.get("max", 1e9)), float(raw.get("precision", 0.05)), criteria)


def _settle(raw: dict[str, Any] | None) -> Settle:
    raw = raw or {}
    return Settle(bool(raw.get("drain", True)), float(raw.get("wait", 2.0)),
                  raw.get("broker-cpu-below"))


def with_value(point: Point, dotted: str, value: float, builder_check: Path) -> Point:
    """The point with one field changed (a search probe), built and validated again."""
    data = copy.deepcopy(point.data)
    assign(data, resolve(data, dotted), int(value) if dotted.endswith("threads") else value)
    check = Checker({})
    builder = Builder(check)
    made = None
    if "scenario" in data:
        made = scenario_run(data, builder, check)
        run = made[0] if made else None
    else:
        groups = [builder.group(data, i, raw) for i, raw in enumerate(data.get("groups") or [])]
        run = builder.run(data, [g for g in groups if g is not None]) \
            if all(g is not None for g in groups) else None
    if run is None or check.problems:
        raise ProfileError(builder_check, check.problems)
    run.name = point.run.name
    return Point(point.index, point.labels, run, data, made[1] if made else None)


def shipped_dir() -> Path:
    """Where the profiles shipped with harness are (package data: harness.profiles)."""
    return Path(str(resources.files("harness.profiles")))


def find_profile(path: Path) -> Path:
    """A profile by path, or by the name of a shipped one (quickstart, wmb-pubsub.yaml)."""
    if path.exists() or path.parent != Path():
        return path
    for candidate in (path.name, f"{path.name}.yaml"):
        shipped = shipped_dir() / candidate
        if shipped.is_file():
            return shipped
    import difflib
    names = sorted(p.stem for p in shipped_dir().glob("*.yaml"))
    near = difflib.get_close_matches(path.name.removesuffix(".yaml"), names, n=1, cutoff=0.6)
    if near:
        raise BadInput("PROFILE", f"{path}: no such file, nor a shipped profile; did you mean "
                       f"{near[0]}? (`harness profiles list` lists them)")
    return path


def listing(directory: Path) -> list[tuple[Path, str]]:
    """(file, what it is) of each profile in a directory: the first sentence of its header
    comment, whole, however many lines it spans."""
    out = []
    for file in sorted(directory.glob("*.y*ml")):
        header = []
        for line in read_text(file).splitlines():
            if not line.startswith("#"):
                break
            header.append(line.lstrip("#").strip())
        text = " ".join(" ".join(header).split())
        end = re.search(r"(?<!\be\.g)(?<!\bi\.e)\.(\s|$)", text)
        out.append((file, text[:end.start() + 1] if end else text))
    return out
