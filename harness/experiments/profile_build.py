"""One point of a profile made into its RunSpec through the option table, every bad value
recorded with its path rather than stopping at the first; an OpenMessaging Benchmark
workload (omb:) made into the profile's groups; a scenario's run made by the scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.experiments.profile_yaml import Checker, PathKey
from harness.modules import TRANSPORTS, transport_class
from harness.modules.interface.base import Capability
from harness.plan.group import GroupSpec, group_spec, validate_group
from harness.plan.options import by_flag, in_scope, table
from harness.plan.run import RunSpec, run_spec, validate_run
from harness.stats.slo import thresholds
from harness.units import parse_size

# What the supply-chain scenario's steps need of a transport.
SCENARIO_NEEDS = Capability.QUEUES | Capability.TOPICS | Capability.TRANSACTIONS


class Builder:
    """Builds the RunSpec of one point; records problems instead of stopping at the first."""

    def __init__(self, check: Checker) -> None:
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




def expand_omb(data: dict[str, Any], path: Path, check: Checker) -> list[str]:
    """An OpenMessaging Benchmark workload (omb:) made into the profile's groups, run and
    search, on the profile's one connection, with a driver file's settings (omb-driver:);
    what the profile's run: and search: give themselves stands. Returns what the driver
    file asked that was left out, a line each."""
    from harness.experiments.omb import (
        WorkloadError,
        driver_parts,
        profile_parts,
        read_workload,
    )

    for key in ("groups", "scenario"):
        if key in data:
            check.add((key,), "an OpenMessaging Benchmark workload (omb:) makes the groups: "
                              f"give either omb or {key}")
    if "omb" not in data:
        check.add(("omb-driver",), "a driver file's settings are for a workload: give omb")
        return []
    connections = data.get("connections")
    if not isinstance(connections, dict) or len(connections) != 1:
        check.add(("connections",), "with omb: exactly one connection, the broker the "
                                    "workload runs against")
        return []
    (name, connection), = connections.items()
    transport = connection.get("transport") if isinstance(connection, dict) else None
    if transport not in TRANSPORTS:
        return []  # reported with the connection
    driver: dict[str, Any] = {}
    try:
        workload, file = read_workload(data["omb"], path.parent)
        parts = profile_parts(workload, transport, name, file)
        if data.get("omb-driver") is not None:
            driver = driver_parts(data["omb-driver"], transport, path.parent)
    except WorkloadError as exc:
        check.add((exc.key,) if exc.key in ("omb", "omb-driver") else ("omb", exc.key),
                  exc.problem)
        return []
    if check.problems:
        return []
    if driver:
        # The driver's server where the connection names none; its settings on each group,
        # under what the profile's connection gives (its client settings after the
        # driver's, so that the profile's own stand).
        for key, value in driver["connection"].items():
            connection.setdefault(key, value)
        given = {**(data.get("defaults") or {}), **connection}
        for group in parts["groups"]:
            for key, value in driver[group["name"]].items():
                if key == "client-config":
                    group[key] = [*value, *_items(given.get(key))]
                elif key not in given:
                    group[key] = value
    data["groups"] = parts["groups"]
    # Problems in the groups made are shown at the omb: key.
    check.lines.setdefault(("groups",), check.lines.get(("omb",), 0))
    data["run"] = {**parts["run"], **(data.get("run") or {})}
    if "search" in parts and "search" not in data:
        data["search"] = parts["search"]
    return [f"omb-driver: {key} left out: {why}" for key, why in driver.get("left_out", ())]


def _items(value: Any) -> list[Any]:
    return [] if value is None else value if isinstance(value, list) else [value]


def scenario_run(point: dict[str, Any], builder: Builder,
                  check: Checker) -> tuple[RunSpec, Any] | None:
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
