"""A profile's sections checked before any run is built: each section of the shape the rest
takes it for, and the sweep, search, settle, results, scenario and cluster sections' keys
and values, each problem with its path and line."""

from __future__ import annotations

import re
from typing import Any

from harness.distributed.cluster import CLUSTER_KEYS, cluster_from
from harness.errors import BadInput
from harness.experiments.profile_build import Builder
from harness.experiments.profile_yaml import Checker, Problem, resolve
from harness.modules import TRANSPORTS
from harness.units import parse_size

SCENARIO_KEYS = ("topology", "base", "connection", "locations", "rates", "interactions",
                 "sizes", "search")
BASE_SEARCH_KEYS = ("start", "factor", "max", "precision")
SEARCH_KEYS = ("field", "start", "factor", "max", "precision", "criteria")
CRITERIA_KEYS = ("p99-ms", "p50-ms", "group", "loss", "backlog", "backlog-max", "achieved")
SETTLE_KEYS = ("drain", "wait", "broker-cpu-below")
RESULTS_KEYS = ("rate", "latency")
RATE_CHOICES = ("dispatched", "received-by-broker", "overall")


# What each top-level section is, where it is given (null: as if not given).
SHAPES: dict[str, tuple[type, ...]] = {
    "name": (str, int, float), "description": (str,), "vars": (dict,), "connections": (dict,),
    "defaults": (dict,), "groups": (list,), "run": (dict,), "sweep": (dict,),
    "search": (dict,), "settle": (dict,), "results": (dict,), "scenario": (dict,),
    "cluster": (dict,), "slo": (str, list), "omb": (str, dict), "omb-driver": (str,)}
SHAPE_NAMES = {str: "text", int: "a number", float: "a number", dict: "a mapping",
               list: "a list"}


def check_shapes(data: dict[str, Any], check: Checker) -> None:
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


def unique_problems(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if (p.path, p.message) not in seen:
            seen.add((p.path, p.message))
            out.append(p)
    return out


def check_sections(data: dict[str, Any], builder: Builder, check: Checker) -> None:
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
                    resolve(data, name)
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


def _check_scenario(data: dict[str, Any], check: Checker) -> None:
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


def _check_search(data: dict[str, Any], search: dict[str, Any], check: Checker) -> None:
    target = search.get("field")
    if not isinstance(target, str):
        check.add(("search", "field"), "names the field to raise, e.g. groups.sender.rate")
    else:
        try:
            resolve(data, target)
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
