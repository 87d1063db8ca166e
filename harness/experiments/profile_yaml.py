"""A profile's YAML read with the line of each key, its fields addressed by dotted paths
(sweeps, --set, a search's field), its variables substituted, and its problems collected with
their paths and lines (harness.experiments.profile reads a profile with these)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import BadInput

PathKey = tuple[str | int, ...]

TOP_KEYS = ("name", "description", "vars", "connections", "defaults", "groups", "run", "sweep",
            "search", "settle", "results", "scenario", "cluster", "slo", "omb", "omb-driver")
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




# -- reading YAML with line numbers ---------------------------------------------------------
def read_with_lines(text: str) -> tuple[Any, dict[PathKey, int]]:
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


def show(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(top)"


class Checker:
    def __init__(self, lines: dict[PathKey, int]) -> None:
        self.lines = lines
        self.problems: list[Problem] = []

    def add(self, path: PathKey, message: str, line_of: PathKey | None = None) -> None:
        self.problems.append(Problem(show(path), self._line(line_of or path), message))

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
def resolve(data: dict[str, Any], dotted: str) -> PathKey:
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


def assign(data: dict[str, Any], path: PathKey, value: Any) -> None:
    target: Any = data
    for part in path[:-1]:
        if isinstance(part, int):
            if not isinstance(target, list) or part >= len(target):
                raise ValueError(f"{show(path)}: no such entry")
            target = target[part]
        else:
            if not isinstance(target, dict):
                raise ValueError(f"{show(path)}: not a mapping")
            target = target.setdefault(part, {})
    if not isinstance(target, dict) or isinstance(path[-1], int):
        raise ValueError(f"{show(path)}: not a field")
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


def substitute(value: Any, variables: dict[str, Any], path: PathKey, check: Checker) -> Any:
    if isinstance(value, dict):
        return {k: substitute(v, variables, (*path, k), check) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, variables, (*path, i), check) for i, v in enumerate(value)]
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
