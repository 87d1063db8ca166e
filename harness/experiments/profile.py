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
import difflib
import itertools
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from harness.distributed.cluster import CLUSTER_KEYS, ClusterSpec, cluster_from
from harness.errors import BadInput
from harness.modules import TRANSPORTS, transport_class
from harness.modules.interface.base import Capability
from harness.plan.group import GroupSpec, group_spec, validate_group
from harness.plan.options import by_flag, in_scope, table
from harness.plan.run import RunSpec, run_spec, validate_run
from harness.stats.slo import thresholds
from harness.textfiles import load_yaml, read_text
from harness.units import parse_size

PathKey = tuple[str | int, ...]

TOP_KEYS = ("name", "description", "vars", "connections", "defaults", "groups", "run", "sweep",
            "search", "settle", "results", "scenario", "cluster", "slo", "omb")
SCENARIO_KEYS = ("topology", "base", "connection", "locations", "rates", "interactions",
                 "sizes", "search")
BASE_SEARCH_KEYS = ("start", "factor", "max", "precision")
SEARCH_KEYS = ("field", "start", "factor", "max", "precision", "criteria")
CRITERIA_KEYS = ("p99-ms", "p50-ms", "group", "loss", "backlog", "backlog-max", "achieved")
SETTLE_KEYS = ("drain", "wait", "broker-cpu-below")
RESULTS_KEYS = ("rate", "latency")
RATE_CHOICES = ("dispatched", "received-by-broker", "overall")
# What the supply-chain scenario's steps need of a transport.
SCENARIO_NEEDS = Capability.QUEUES | Capability.TOPICS | Capability.TRANSACTIONS
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class Problem:
    path: str
    line: int | None
    message: str

    def render(self, file: Path) -> str:
        where = f"{file}:{self.line}" if self.line else str(file)
        return f"{where}: {self.path}: {self.message}"


class ProfileError(Exception):
    def __init__(self, file: Path, problems: list[Problem]) -> None:
        # In file order; problems from the command line (no line) first.
        problems = sorted(problems, key=lambda p: p.line or 0)
        super().__init__("\n".join(p.render(file) for p in problems))
        self.file = file
        self.problems = problems


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


# -- reading YAML with line numbers ---------------------------------------------------------
def _load(text: str) -> tuple[Any, dict[PathKey, int]]:
    lines: dict[PathKey, int] = {}

    def walk(node: yaml.Node, path: PathKey) -> Any:
        lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            out = {}
            for key_node, value_node in node.value:
                key = yaml.safe_load(yaml.serialize(key_node))
                lines[(*path, str(key))] = key_node.start_mark.line + 1
                out[str(key)] = walk(value_node, (*path, str(key)))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [walk(item, (*path, i)) for i, item in enumerate(node.value)]
        return yaml.safe_load(yaml.serialize(node))

    node = yaml.compose(text, Loader=yaml.SafeLoader)
    return (walk(node, ()) if node is not None else None), lines


def _show(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(top)"


class _Checker:
    def __init__(self, lines: dict[PathKey, int]) -> None:
        self.lines = lines
        self.problems: list[Problem] = []

    def add(self, path: PathKey, message: str, line_of: PathKey | None = None) -> None:
        self.problems.append(Problem(_show(path), self._line(line_of or path), message))

    def _line(self, path: PathKey) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())

    def keys(self, mapping: Any, path: PathKey, allowed: tuple[str, ...] | list[str]) -> bool:
        if not isinstance(mapping, dict):
            self.add(path, f"must be a mapping of {', '.join(map(str, allowed[:6]))} ...")
            return False
        for key in mapping:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                self.add((*path, key), f"unknown key{hint}")
        return True


# -- field addressing (sweeps, --set, search) ---------------------------------------------
def _resolve(data: dict[str, Any], dotted: str) -> PathKey:
    """groups.pub.rate / groups[0].rate / vars.n / run.run-length -> a path in data."""
    parts: list[str | int] = []
    for piece in dotted.split("."):
        match = re.fullmatch(r"([^\[\]]+)((?:\[\d+\])*)", piece)
        if not match:
            raise ValueError(f"{dotted!r} is not a field path like groups.sender.thread-rate")
        parts.append(match.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    if len(parts) < 2:
        raise ValueError(f"{dotted!r} names a section, not a field (e.g. run.run-length)")
    if parts[0] == "groups" and isinstance(parts[1], str):
        names = [g.get("name") if isinstance(g, dict) else None
                 for g in data.get("groups") or []]
        if parts[1] not in names:
            raise ValueError(f"no group named {parts[1]!r} (groups: "
                             f"{', '.join(str(n) for n in names if n)})")
        parts[1] = names.index(parts[1])
    if parts[0] not in TOP_KEYS:
        raise ValueError(f"{dotted!r}: {parts[0]!r} is not a section of a profile")
    return tuple(parts)


def _assign(data: dict[str, Any], path: PathKey, value: Any) -> None:
    target: Any = data
    for part in path[:-1]:
        if isinstance(part, int):
            if not isinstance(target, list) or part >= len(target):
                raise ValueError(f"{_show(path)}: no such entry")
            target = target[part]
        else:
            if not isinstance(target, dict):
                raise ValueError(f"{_show(path)}: not a mapping")
            target = target.setdefault(part, {})
    if not isinstance(target, dict) or isinstance(path[-1], int):
        raise ValueError(f"{_show(path)}: not a field")
    target[path[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """--set groups.pub.rate=500 -> ("groups.pub.rate", 500); the value is read as YAML."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise BadInput("--set", f"{text!r} is not FIELD=VALUE (e.g. groups.sender.rate=500)")
    try:
        return key.strip(), yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        return key.strip(), value


def _substitute(value: Any, variables: dict[str, Any], path: PathKey, check: _Checker) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, variables, (*path, k), check) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, variables, (*path, i), check) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value
    whole = _VAR.fullmatch(value)
    for name in _VAR.findall(value):
        if name not in variables:
            check.add(path, f"unknown variable ${{{name}}} (vars: "
                            f"{', '.join(variables) or 'none'})")
            return value
    if whole:
        return variables[whole.group(1)]
    return _VAR.sub(lambda m: str(variables[m.group(1)]), value)


# -- turning one resolved point into a RunSpec through the option table ---------------------
class _Builder:
    """Builds the RunSpec of one point; records problems instead of stopping at the first."""

    def __init__(self, check: _Checker) -> None:
        self.check = check
        self.options = table()
        self.group_keys = [o.key for o in in_scope("group", "connection")]
        self.connection_keys = [o.key for o in in_scope("connection")]
        self.run_keys = [o.key for o in in_scope("run")]

    def _parse(self, values: dict[str, tuple[Any, PathKey]]) -> dict[str, Any] | None:
        """Each value checked against its option's type, so that every bad value is
        reported; None if one was bad."""
        out, good = {}, True
        for key, (value, path) in values.items():
            option = self.options.get(key)
            if option is None:
                continue  # reported as an unknown key
            if value is None:
                continue
            try:
                out[key] = option.value(value)
            except ValueError as exc:
                self.check.add(path, str(exc))
                good = False
        return out if good else None

    def _bad_input(self, exc: BadInput, sources: dict[str, PathKey], fallback: PathKey) -> None:
        option = by_flag().get(exc.where)
        key = option.key if option else exc.where.lstrip("-")
        self.check.add(sources.get(key, fallback), exc.problem)

    def group(self, data: dict[str, Any], index: int, raw: dict[str, Any]) -> GroupSpec | None:
        path: PathKey = ("groups", index)
        merged: dict[str, tuple[Any, PathKey]] = {}
        for key, value in (data.get("defaults") or {}).items():
            merged[key] = (value, ("defaults", key))
        for key, value in raw.items():
            merged[key] = (value, (*path, key))
        connection_name, connection_path = merged.pop("connection", (None, path))
        transport = None
        if connection_name is not None:
            connection = (data.get("connections") or {}).get(connection_name)
            if not isinstance(connection, dict):
                self.check.add(connection_path, f"no connection named {connection_name!r}")
                return None
            transport = connection.get("transport")
            if transport not in TRANSPORTS:
                return None  # reported with the connection
            for key, value in connection.items():
                if key != "transport":
                    merged.setdefault(key, (value, ("connections", connection_name, key)))
        name, _ = merged.pop("name", (None, path))
        module, module_path = merged.pop("module", (None, path))
        if not module:
            self.check.add(path, "needs a module (a role with a connection, or "
                                 "<transport>.<Role>)")
            return None
        if "." not in str(module):
            if transport is None:
                self.check.add(module_path, f"{module!r} has no transport: give a connection "
                                            "or write <transport>.<Role>")
                return None
            module = f"{transport}.{module}"
        given = self._parse(merged)
        if given is None:
            return None
        given["module"] = str(module)
        if name:
            given["group-name"] = str(name)
        sources = {k: p for k, (_, p) in merged.items()}
        sources.update(module=module_path)
        try:
            spec = group_spec(given)
            validate_group(spec, index)
        except BadInput as exc:
            self._bad_input(exc, sources, path)
            return None
        return spec

    def run(self, data: dict[str, Any], groups: list[GroupSpec],
            judged: bool = True) -> RunSpec | None:
        """The run; judged: its thresholds checked against these groups (a scenario's are
        made later)."""
        values = {k: (v, ("run", k)) for k, v in (data.get("run") or {}).items()}
        if "slo" in data:
            if "slo" in values:
                self.check.add(("slo",), "the thresholds are given in run: too; give them "
                                         "once")
                return None
            listed = data["slo"] if isinstance(data["slo"], list) else [data["slo"]]
            values["slo"] = (listed, ("slo",))
        given = self._parse(values)
        if given is None:
            return None
        sources = {k: p for k, (_, p) in values.items()}
        try:
            spec = run_spec(given, groups)
        except BadInput as exc:
            self._bad_input(exc, sources, ("run",))
            return None
        output = (data.get("cluster") or {}).get("output") \
            if isinstance(data.get("cluster"), dict) else None
        if output is not None:
            if "output" in values:
                self.check.add(("cluster", "output"), "the output is given in run: too; give "
                                                      "it once")
            spec.output = str(output)
        if self.check.problems:
            return None  # the run as a whole is checked only once its parts are sound
        try:
            validate_run(spec)
            if judged:
                thresholds(spec)
        except BadInput as exc:
            self._bad_input(exc, sources, ("run",))
            return None
        return spec


# What each top-level section is, where it is given (null: as if not given).
SHAPES: dict[str, tuple[type, ...]] = {
    "name": (str, int, float), "description": (str,), "vars": (dict,), "connections": (dict,),
    "defaults": (dict,), "groups": (list,), "run": (dict,), "sweep": (dict,),
    "search": (dict,), "settle": (dict,), "results": (dict,), "scenario": (dict,),
    "cluster": (dict,), "slo": (str, list), "omb": (str, dict)}
SHAPE_NAMES = {str: "text", int: "a number", float: "a number", dict: "a mapping",
               list: "a list"}


def _check_shapes(data: dict[str, Any], check: _Checker) -> None:
    """Each section, and each group, of the shape the rest of the reading takes it for: a
    list where a mapping belongs is one line naming it, not a traceback."""
    for key, shapes in SHAPES.items():
        value = data.get(key)
        if value is None and key in data and key not in ("vars", "groups"):
            del data[key]  # given empty: as if not given
        elif value is not None and not isinstance(value, shapes):
            wanted = " or ".join(dict.fromkeys(SHAPE_NAMES[s] for s in shapes))
            check.add((key,), f"must be {wanted}, not {type(value).__name__}")
    groups = data.get("groups")
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        if not isinstance(group, dict):
            check.add(("groups", i), f"a group is a mapping of its options, not "
                                     f"{type(group).__name__}")
    for key in ("connections", "vars"):
        for name, value in (data.get(key) or {}).items() if isinstance(data.get(key), dict) \
                else ():
            if key == "connections" and not isinstance(value, dict | None):
                check.add((key, str(name)), "a connection is a mapping of its options")


# -- the profile as a whole ------------------------------------------------------------------
def load(path: Path, overrides: list[str] | None = None) -> Profile:
    """Read, override, expand and validate a profile; ProfileError lists every problem."""
    text = read_text(path, "PROFILE")
    try:
        data, lines = load_yaml(text, f"PROFILE ({path})", _load)
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
    check = _Checker(lines)
    if not isinstance(data, dict):
        raise ProfileError(path, [Problem("(top)", 1, "a profile is a mapping of "
                                          f"{', '.join(TOP_KEYS)}")])
    check.keys(data, (), TOP_KEYS)
    _check_shapes(data, check)
    if check.problems:
        raise ProfileError(path, check.problems)  # what follows reads each section by shape
    builder = _Builder(check)
    if "omb" in data:
        _expand_omb(data, path, check)
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
            target = _resolve(data, key)
            _assign(data, target, value)
            lines[target] = 0  # from the command line, not the file
            for swept in [k for k in sweep if key in k.split(",")]:
                # A field given on the command line is no longer swept.
                if "," in swept:
                    raise ValueError(f"{key} is swept together with other fields "
                                     f"({swept}); override the sweep with --set sweep.{swept}=")
                del sweep[swept]
        except ValueError as exc:
            check.problems.append(Problem(f"--set {override}", None, str(exc)))
    _check_sections(data, builder, check)
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
                _assign(point, _resolve(point, name.strip()), one)
            labels[key] = values[0] if len(fields) > 1 else value
        variables = point.get("vars") or {}
        before = len(check.problems)
        for _ in range(3):  # a variable's value may name other variables (set by a sweep)
            variables = _substitute(variables, variables, ("vars",), check)
        point = _substitute(point, variables, (), check)
        if len(check.problems) > before:
            break
        made = None
        if "scenario" in point:
            made = _scenario_run(point, builder, check)
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
        raise ProfileError(path, _unique(check.problems))
    header = "\n".join(line[1:].strip() for line in
                       itertools.takewhile(lambda s: s.startswith("#"), text.splitlines()))
    results = data.get("results") or {}
    cluster = cluster_from(data["cluster"]) if data.get("cluster") else None
    base_search = (data.get("scenario") or {}).get("search")
    return Profile(path, str(data.get("name") or path.stem), str(data.get("description") or ""),
                   header, points, _search(data.get("search")), _settle(data.get("settle")),
                   str(results.get("rate", "dispatched")), results.get("latency"),
                   {k: float(v) for k, v in base_search.items()} if base_search else None,
                   cluster)


def _expand_omb(data: dict[str, Any], path: Path, check: _Checker) -> None:
    """An OpenMessaging Benchmark workload (omb:) made into the profile's groups, run and
    search, on the profile's one connection; what the profile's run: and search: give
    themselves stands."""
    from harness.experiments.omb import WorkloadError, profile_parts, read_workload

    for key in ("groups", "scenario"):
        if key in data:
            check.add((key,), "an OpenMessaging Benchmark workload (omb:) makes the groups: "
                              f"give either omb or {key}")
    connections = data.get("connections")
    if not isinstance(connections, dict) or len(connections) != 1:
        check.add(("connections",), "with omb: exactly one connection, the broker the "
                                    "workload runs against")
        return
    (name, connection), = connections.items()
    transport = connection.get("transport") if isinstance(connection, dict) else None
    if transport not in TRANSPORTS:
        return  # reported with the connection
    try:
        workload, file = read_workload(data["omb"], path.parent)
        parts = profile_parts(workload, transport, name, file)
    except WorkloadError as exc:
        check.add(("omb", exc.key) if exc.key != "omb" else ("omb",), exc.problem)
        return
    if check.problems:
        return
    data["groups"] = parts["groups"]
    # Problems in the groups made are shown at the omb: key.
    check.lines.setdefault(("groups",), check.lines.get(("omb",), 0))
    data["run"] = {**parts["run"], **(data.get("run") or {})}
    if "search" in parts and "search" not in data:
        data["search"] = parts["search"]


def _scenario_run(point: dict[str, Any], builder: _Builder,
                  check: _Checker) -> tuple[RunSpec, Any] | None:
    """The run of a scenario profile: its groups made by the scenario, on its connection."""
    from harness.experiments.scenarios.supplychain import run_spec, scenario

    raw = point["scenario"]
    template = builder.group(point, 0, {"connection": raw.get("connection", "local"),
                                        "module": "Sender", "destination": "scenario"})
    if template is None:
        return None
    def able(name: str) -> bool:
        try:
            return transport_class(name).capabilities & SCENARIO_NEEDS == SCENARIO_NEEDS
        except BadInput:  # its client library is not installed
            return False

    if not able(template.transport):
        names = ", ".join(name for name in TRANSPORTS if able(name))
        check.add(("scenario", "connection"), f"the supply-chain scenario runs on {names}, "
                  f"not {template.transport}: its steps route by correlation id over queues "
                  "and topics and commit in transactions")
        return None
    base = builder.run(point, [template], judged=False)
    if base is None:
        return None
    try:
        made = scenario(raw.get("topology", "horizontal"), float(raw.get("base", 1)),
                        raw.get("locations"), raw.get("rates"),
                        tuple(raw.get("interactions") or (1, 2, 3, 4, 5, 6, 7)),
                        {k: parse_size(v) for k, v in (raw.get("sizes") or {}).items()})
    except ValueError as exc:
        check.add(("scenario",), str(exc))
        return None
    run, steps = run_spec(made, base, template)
    try:
        validate_run(run)
        thresholds(run)
    except BadInput as exc:
        check.add(("scenario",), f"{exc.where}: {exc.problem}")
        return None
    return run, (made, steps)


def _unique(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.path, p.message) not in seen:
            seen.add((p.path, p.message))
            out.append(p)
    return out


def _check_sections(data: dict[str, Any], builder: _Builder, check: _Checker) -> None:
    name = data.get("name")
    if name is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", str(name)):
        check.add(("name",), "must be a letter followed by letters, digits, - or _")
    variables = data.get("vars")
    if variables is not None and check.keys(variables, ("vars",), list(variables or {})):
        for key, value in variables.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                check.add(("vars", key), "a variable name is letters, digits and _")
            if isinstance(value, dict | list):
                check.add(("vars", key), "a variable holds a single value")
    connections = data.get("connections") or {}
    if check.keys(connections, ("connections",), list(connections)):
        for cname, connection in connections.items():
            if check.keys(connection, ("connections", cname),
                          ["transport", *builder.connection_keys]):
                if connection.get("transport") not in TRANSPORTS:
                    check.add(("connections", cname, "transport"),
                              f"must be one of {', '.join(TRANSPORTS)}")
                if "password" in connection:
                    check.add(("connections", cname, "password"),
                              "a password does not belong in a file: use password-env or "
                              "password-file")
    if "defaults" in data:
        check.keys(data["defaults"] or {}, ("defaults",),
                   ["connection", "module", *builder.group_keys])
    groups = data.get("groups")
    if "scenario" in data:
        _check_scenario(data, check)
        if groups is not None:
            check.add(("groups",), "a scenario makes its own groups: give either scenario or "
                                   "groups")
    elif not isinstance(groups, list) or not groups:
        check.add(("groups",), "a profile needs a list of at least one worker group")
    else:
        names = []
        for i, group in enumerate(groups):
            if check.keys(group, ("groups", i),
                          ["name", "module", "connection", *builder.group_keys]):
                if "password" in group:
                    check.add(("groups", i, "password"), "a password does not belong in a "
                                                         "file: use password-env or "
                                                         "password-file")
                names.append(group.get("name"))
        for i, gname in enumerate(names):
            if gname is not None and names.count(gname) > 1 and names.index(gname) == i:
                check.add(("groups", i, "name"), f"{gname!r} names more than one group")
    if "run" in data:
        check.keys(data["run"] or {}, ("run",), builder.run_keys)
    sweep = data.get("sweep")
    if sweep is not None and check.keys(sweep, ("sweep",), list(sweep or {})):
        for key, values in sweep.items():
            if not isinstance(values, list) or not values:
                check.add(("sweep", key), "must be a list of at least one value")
                continue
            fields = [f.strip() for f in key.split(",")]
            if len(fields) > 1 and not all(isinstance(v, list) and len(v) == len(fields)
                                           for v in values):
                check.add(("sweep", key), f"sweeps {len(fields)} fields together: each value "
                                          f"must be a list of {len(fields)}")
            for name in fields:
                try:
                    _resolve(data, name)
                except ValueError as exc:
                    check.add(("sweep", key), str(exc))
    cluster = data.get("cluster")
    if cluster is not None and check.keys(cluster, ("cluster",), CLUSTER_KEYS):
        try:
            cluster_from(cluster)
        except BadInput as exc:
            check.add(("cluster", exc.where) if exc.where in cluster else ("cluster",),
                      exc.problem)
    search = data.get("search")
    if search is not None and check.keys(search, ("search",), SEARCH_KEYS):
        _check_search(data, search, check)
    if "settle" in data:
        check.keys(data["settle"] or {}, ("settle",), SETTLE_KEYS)
    results = data.get("results")
    if results is not None and check.keys(results, ("results",), RESULTS_KEYS):
        names = [g.get("name") for g in groups or [] if isinstance(g, dict)]
        rate = results.get("rate")
        if rate is not None and rate not in RATE_CHOICES and rate not in names:
            check.add(("results", "rate"), f"must be one of {', '.join(RATE_CHOICES)} or a "
                                           "group name")
        latency = results.get("latency")
        if latency is not None and latency not in names:
            check.add(("results", "latency"), f"no group named {latency!r}")


def _check_scenario(data: dict[str, Any], check: _Checker) -> None:
    from harness.experiments.scenarios.supplychain import RATES, SIZE_CLASSES

    raw = data["scenario"]
    if not check.keys(raw, ("scenario",), SCENARIO_KEYS):
        return
    topology = raw.get("topology", "horizontal")
    if topology not in ("horizontal", "vertical", "freeform"):
        check.add(("scenario", "topology"), "must be horizontal, vertical or freeform")
    base = raw.get("base", 1)
    if not isinstance(base, int | float) or isinstance(base, bool) or base <= 0:
        check.add(("scenario", "base"), "must be a number above 0")
    connection = raw.get("connection", "local")
    if connection not in (data.get("connections") or {}):
        check.add(("scenario", "connection"), f"no connection named {connection!r}")
    # SPECjms2007: only the freeform topology lets counts, rates and interactions be chosen.
    for key in ("locations", "rates", "interactions"):
        if key in raw and topology != "freeform":
            check.add(("scenario", key), f"the {topology} topology sets {key} from BASE and "
                                         "the business model; use topology: freeform")
    locations = raw.get("locations")
    if locations is not None and check.keys(locations, ("scenario", "locations"),
                                            ["dc", "sm", "sp", "families"]):
        for key, value in locations.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                check.add(("scenario", "locations", key), "must be a whole number >= 1")
    rates = raw.get("rates")
    if rates is not None and check.keys(rates, ("scenario", "rates"), list(RATES)):
        for key, value in rates.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                check.add(("scenario", "rates", key), "must be interactions a second, above 0")
    interactions = raw.get("interactions")
    if interactions is not None and (not isinstance(interactions, list) or not interactions or
                                     not all(i in range(1, 8) for i in interactions)):
        check.add(("scenario", "interactions"), "must be a list of interaction numbers 1 to 7")
    sizes = raw.get("sizes")
    if sizes is not None and check.keys(sizes, ("scenario", "sizes"), list(SIZE_CLASSES)):
        for key, value in sizes.items():
            try:
                if parse_size(value) < 64:
                    raise ValueError("must be at least 64 bytes")
            except ValueError as exc:
                check.add(("scenario", "sizes", key), str(exc))
    search = raw.get("search")
    if search is not None and check.keys(search, ("scenario", "search"), BASE_SEARCH_KEYS):
        for key, value in search.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                check.add(("scenario", "search", key), "must be a number above 0")
        if search.get("factor", 2) <= 1:
            check.add(("scenario", "search", "factor"), "must be above 1")


def _check_search(data: dict[str, Any], search: dict[str, Any], check: _Checker) -> None:
    target = search.get("field")
    if not isinstance(target, str):
        check.add(("search", "field"), "names the field to raise, e.g. groups.sender.rate")
    else:
        try:
            _resolve(data, target)
            if target.rsplit(".", 1)[-1] not in ("rate", "thread-rate", "threads"):
                check.add(("search", "field"), "the search raises a rate (rate, thread-rate) "
                                               "or a thread count (threads)")
        except ValueError as exc:
            check.add(("search", "field"), str(exc))
    for key, low in (("start", 0.0), ("max", 0.0)):
        value = search.get(key)
        if key == "start" and value is None:
            check.add(("search",), "needs start (the first value to probe)")
        elif value is not None and (not isinstance(value, int | float) or value <= low):
            check.add(("search", key), f"must be a number above {low:g}")
    factor = search.get("factor", 2)
    if not isinstance(factor, int | float) or factor <= 1:
        check.add(("search", "factor"), "must be a number above 1 (each step multiplies)")
    precision = search.get("precision", 0.05)
    if not isinstance(precision, int | float) or not 0 < precision < 1:
        check.add(("search", "precision"), "must be a fraction between 0 and 1")
    criteria = search.get("criteria")
    if criteria is not None and check.keys(criteria, ("search", "criteria"), CRITERIA_KEYS):
        for key in ("p99-ms", "p50-ms"):
            value = criteria.get(key)
            if value is not None and (not isinstance(value, int | float) or value <= 0):
                check.add(("search", "criteria", key), "must be a number of milliseconds "
                                                       "above 0")
        if "backlog" in criteria and criteria["backlog"] not in ("stable", "any"):
            check.add(("search", "criteria", "backlog"), "must be stable or any")
        most = criteria.get("backlog-max")
        if most is not None and (isinstance(most, bool) or not isinstance(most, int) or
                                 most < 0):
            check.add(("search", "criteria", "backlog-max"), "must be a whole number of "
                                                             "messages >= 0")
        loss = criteria.get("loss", 0)
        if loss is not None and loss != "any" and (not isinstance(loss, int) or loss < 0):
            check.add(("search", "criteria", "loss"), "must be a whole number >= 0, or any")
        achieved = criteria.get("achieved", 0.95)
        if not isinstance(achieved, int | float) or not 0 < achieved <= 1:
            check.add(("search", "criteria", "achieved"), "must be a fraction above 0, at "
                                                          "most 1")


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
    _assign(data, _resolve(data, dotted), int(value) if dotted.endswith("threads") else value)
    check = _Checker({})
    builder = _Builder(check)
    made = None
    if "scenario" in data:
        made = _scenario_run(data, builder, check)
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
