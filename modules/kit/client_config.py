"""--client-config: a client library's own settings, passed to it as they are. KEY=VALUE items
and @FILE files of them (a .properties file, as a Kafka user's producer.config; or a YAML
mapping) become one mapping; each transport says which keys its library takes and which of
them a flag of the harness sets (refused, naming the flag: one way to set each) or the harness
owns to measure (refused). A key the library does not take is refused before anything
connects, naming it."""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from types import MappingProxyType
from typing import Any

HELP = ("A setting of the transport's client library, KEY=VALUE, given as it is to every "
        "client the group makes (librdkafka's properties; pika's ConnectionParameters; paho's "
        "connect() bind_port and MQTT 5 CONNECT properties as properties.NAME; nats-py's "
        "connect(); redis-py's Redis(); "
        "stomp.py's Connection), or @FILE: a .properties or YAML file of them, as a "
        "producer.config or an OMB driver's producerConfig holds them (repeatable). A setting "
        "a flag gives is refused naming the flag; a secret is taken from a @FILE only.")
NONE: Mapping[str, str] = MappingProxyType({})
# Keys that may hold a secret: given in a file only, never echoed.
SECRET = re.compile(r"password|secret|token|credential|\.pem$|key\.pem|jaas|seed",
                    re.IGNORECASE)


def read_items(items: Iterable[str], flagged: Mapping[str, str] = NONE,
               owned: Collection[str] = (), handled: Collection[str] = ()) -> dict[str, str]:
    """--client-config as one mapping of text values. @FILE#SECTION reads the properties a
    YAML file holds under SECTION (an OpenMessaging Benchmark driver file's producerConfig),
    leaving out the keys `handled` (those its reader made into flags). ValueError names what
    is wrong."""
    from harness.textfiles import read_text

    out: dict[str, str] = {}
    for item in items:
        if item.startswith("@"):
            path, _, section = item[1:].partition("#")
            text = read_text(path)
            if section:
                entries = _section_lines(_yaml(text, path), section, path)
            elif path.endswith((".yaml", ".yml")):
                entries = _yaml_entries(text, path)
            else:
                entries = [(f"{path} line {n}", line.strip()) for n, line in
                           enumerate(text.splitlines(), 1)]
        else:  # named by its key alone where it may hold a secret
            shown = repr(item) if not SECRET.search(item) else \
                repr(re.split(r"[=:\s]", item.strip())[0])
            entries = [(shown, item.strip())]
        for where, line in entries:
            if not line or line[0] in "#!":
                continue
            key, value = _split(where, line)
            if "#" in item and key in handled:
                continue
            if key in flagged:
                raise ValueError(f"{where}: {key} is set with {flagged[key]}")
            if key in owned:
                raise ValueError(f"{where}: the harness sets {key} itself to measure")
            if not item.startswith("@") and SECRET.search(key):
                raise ValueError(f"{key}: a secret is given in a @FILE, never on the "
                                 "command line (every process on the machine can read it, "
                                 "and the run's manifest records the flags)")
            out[key] = value
    return out


def _split(where: str, line: str) -> tuple[str, str]:
    """KEY=VALUE or KEY: VALUE, as a .properties file has them."""
    cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
    key, value = line[:cut].strip(), line[cut + 1:].strip()
    if cut < 0 or not key:
        raise ValueError(f"{where}: give KEY=VALUE")
    return key, value


def section_properties(data: dict[Any, Any], section: str, where: str) -> dict[str, str]:
    """The properties a YAML mapping holds under `section` (none where it has none)."""
    return dict(_split(at, line) for at, line in _section_lines(data, section, where)
                if line and line[0] not in "#!")


def _section_lines(data: dict[Any, Any], section: str, where: str) -> list[tuple[str, str]]:
    """The lines of a YAML mapping's SECTION: a block of properties, or a mapping."""
    value = data.get(section)
    if isinstance(value, dict):
        return _pairs(value, f"{where} {section}")
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}: {section}: give properties, KEY=VALUE a line")
    return [(f"{where} {section} line {n}", line.strip())
            for n, line in enumerate((value or "").splitlines(), 1)]


def _yaml(text: str, path: str) -> dict[Any, Any]:
    import yaml

    from harness.textfiles import load_yaml

    try:
        data = load_yaml(text, path)
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: give a mapping of KEY: VALUE")
    return data


def _yaml_entries(text: str, path: str) -> list[tuple[str, str]]:
    """A YAML mapping's KEY: VALUE pairs as the lines of a .properties file."""
    return _pairs(_yaml(text, path), path)


def _pairs(data: dict[Any, Any], where: str) -> list[tuple[str, str]]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict | list):
            raise ValueError(f"{where}: {key}: give a single value")
        text_value = "" if value is None else \
            str(value).lower() if isinstance(value, bool) else str(value)
        out.append((f"{where} key {key}", f"{key}={text_value}"))
    return out


class Unwritable(str):
    """A parameter whose type annotation admits no value a KEY=VALUE can write (a mapping,
    a callback, a library's own class): its annotation."""


def parameters(*calls: Callable[..., Any], skip: Collection[str] = ()) -> dict[str, Any]:
    """The keyword parameters of the library's calls a setting may go to, with their
    defaults (which say a value's type), or Unwritable."""
    out: dict[str, Any] = {}
    for call in calls:
        for name, parameter in inspect.signature(call).parameters.items():
            if name in ("self", *skip) or parameter.kind in (parameter.VAR_POSITIONAL,
                                                            parameter.VAR_KEYWORD):
                continue
            annotation = parameter.annotation
            if annotation is not parameter.empty:
                text = annotation if isinstance(annotation, str) else \
                    annotation.__name__ if isinstance(annotation, type) else str(annotation)
                if not _writable(text):
                    out.setdefault(name, Unwritable(text))
                    continue
            out.setdefault(name, parameter.default)
    return out


SCALARS = {"str", "int", "float", "bool", "bytes"}
CONTAINERS = {"Mapping", "MutableMapping", "Dict", "dict", "List", "list", "Sequence", "Tuple",
              "tuple", "Set", "set", "FrozenSet", "frozenset", "Collection", "Iterable",
              "Callable", "Type", "type", "Awaitable", "Coroutine"}


def _writable(annotation: str) -> bool:
    """Whether a type annotation admits a number, a boolean or text (a member of a union
    or an Optional does)."""
    text = annotation.strip().strip("'\"").removeprefix("typing.")
    match = re.fullmatch(r"(Optional|Union)\[(.*)\]", text)
    members = _top_level(match[2]) if match else _top_level(text, "|")
    if len(members) > 1 or match:
        return any(_writable(member) for member in members)
    generic = re.fullmatch(r"([\w.]+)\[(.*)\]", text)
    if generic and generic[1].rpartition(".")[2] not in CONTAINERS:
        # A library's own wrapper of a value (pika's DefaultT[int]): what it wraps.
        return any(_writable(member) for member in _top_level(generic[2]))
    return text in SCALARS


def _top_level(text: str, separators: str = ",|") -> list[str]:
    """text split at the separators that no bracket holds."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "[") - (char == "]")
        if depth == 0 and char in separators:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def library_values(given: Mapping[str, str], takes: Mapping[str, Any], library: str,
          flagged: Mapping[str, str] = NONE, owned: Collection[str] = ()) -> dict[str, Any]:
    """Each value as the library's parameter takes it (its default's type: a number, true or
    false, text; where the default says no type, a number, a boolean, none or the text).
    ValueError names a key the library does not take, or a value it cannot be."""
    out: dict[str, Any] = {}
    for key, text in given.items():
        if key in flagged:
            raise ValueError(f"{key} is set with {flagged[key]}")
        if key in owned:
            raise ValueError(f"the harness sets {key} itself to measure")
        if key not in takes:
            close = difflib.get_close_matches(key, [k for k in takes if k not in flagged and
                                                    k not in owned], 1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(f"{key}: not a setting {library} takes{hint}")
        if isinstance(takes[key], Unwritable):
            raise ValueError(f"{key}: {library} takes {takes[key]} there, which KEY=VALUE "
                             "cannot give")
        out[key] = _value(key, text, takes[key])
    return out


def _value(key: str, text: str, default: Any) -> Any:
    shown = "a secret value" if SECRET.search(key) else repr(text)
    lowered = text.strip().lower()
    if isinstance(default, bool):
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ValueError(f"{key}: {shown} is not true or false")
    if isinstance(default, int | float):
        try:
            number = float(text) if isinstance(default, float) or "." in text else int(text)
        except ValueError:
            raise ValueError(f"{key}: {shown} is not a number") from None
        return number
    if not isinstance(default, str | bytes):  # None, or a library's own marker: guessed
        if lowered in ("true", "false"):
            return lowered == "true"
        if lowered in ("none", "null", ""):
            return None
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
    return text


def library_settings(items: tuple[str, ...], takes: Mapping[str, Any], library: str,
                     flagged: Mapping[str, str] = NONE, owned: Collection[str] = (),
                     check: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    """--client-config's items as the library's keyword arguments, each key one `takes`
    names, and the values as `check` (the library's own call, connecting to nothing) takes
    them. ValueError says what is wrong."""
    values = library_values(read_items(items, flagged, owned), takes, library, flagged, owned)
    if check is not None and values:
        try:
            check(values)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{library} refuses {', '.join(values)}: {exc}") from None
    return values


def client_config_option() -> Any:
    """The --client-config field of a transport's options dataclass."""
    from harness.modules.interface.options import option

    return option((), HELP, scope="connection", multiple=True,
                  convert=lambda items: tuple(items or ()))


def config_problems(items: tuple[str, ...], settings_for: Callable[[tuple[str, ...]], Any]
                    ) -> list[tuple[str, str]]:
    """A transport's refusal of --client-config, before anything connects."""
    if items:
        try:
            settings_for(items)
        except ValueError as exc:
            return [("--client-config", str(exc))]
    return []
