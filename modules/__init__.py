"""The transports. A module name reads `<transport>.<Role>`, like `loopback.Sender`.

Installed as `harness.modules`, the folder modules/ in three parts: interface/ (what a
transport implements), kit/ (helpers it may use) and the drivers beside them, each one file
or one package of part files (amqp/, kafka/, nats/), which imports those two and never
another driver. Each driver is imported only when used, so that
a client library that is not installed matters only to its own transport, and asking for it
says which extra to install.

Transports register under the entry-point group `harness.transports` (name = "module:Class"),
the built-in ones in this distribution's own metadata and a plug-in in its package's, as
pytest's plug-ins do. The built-in ones are also known without metadata (BUILT_IN): the zip a
distributed run ships to Spark's executors has none.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys
from typing import NamedTuple

from harness.modules.interface.base import Transport

from harness.errors import BadInput


class Entry(NamedTuple):
    path: str  # module:Class
    extra: str  # the optional dependency set that installs its client library; "": core
    plugin: str = ""  # the distribution a plug-in came from; "": built in


GROUP = "harness.transports"
BUILT_IN: dict[str, Entry] = {
    "loopback": Entry("harness.modules.loopback:LoopbackTransport", ""),
    "stomp": Entry("harness.modules.stomp:StompTransport", ""),
    "mqtt": Entry("harness.modules.mqtt:MqttTransport", ""),
    "amqp": Entry("harness.modules.amqp:AmqpTransport", "amqp"),
    "amqp10": Entry("harness.modules.amqp10:Amqp10Transport", "amqp10"),
    "nats": Entry("harness.modules.nats:NatsTransport", "nats"),
    "redis": Entry("harness.modules.redis:RedisTransport", "redis"),
    "http": Entry("harness.modules.http:HttpTransport", "http"),
    "kafka": Entry("harness.modules.kafka:KafkaTransport", "kafka"),
}
DISTRIBUTION = "broker-harness"
NAME = re.compile(r"[a-z][a-z0-9_]*")


def registered() -> dict[str, Entry]:
    """The built-in transports, then every plug-in's, in the order pip installed them. A
    plug-in cannot take a built-in's name, and one whose name could not be a module name
    (`name.Role`) is left out; both are said on stderr, never a failed start."""
    found = dict(BUILT_IN)
    for point in importlib.metadata.entry_points(group=GROUP):
        dist = point.dist.name if point.dist is not None else "?"
        if dist == DISTRIBUTION or found.get(point.name, Entry("", "")).path == point.value:
            continue
        if point.name in found or not NAME.fullmatch(point.name):
            why = "a built-in transport's name" if point.name in BUILT_IN else \
                "taken by another plug-in" if point.name in found else \
                "not lower-case letters, digits and _"
            print(f"harness: transport plug-in {point.name!r} of {dist} left out: {why}",
                  file=sys.stderr)
            continue
        found[point.name] = Entry(point.value, "", dist)
    return found


TRANSPORTS = registered()


def transport_class(name: str) -> type[Transport]:
    entry = TRANSPORTS[name]
    module_name, _, class_name = entry.path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "harness":
            raise
        if entry.plugin:
            raise BadInput("-m", f"the {name} transport (plug-in {entry.plugin}) needs the "
                           f"Python package {exc.name}") from None
        extra = f"[{entry.extra}]" if entry.extra else ""
        raise BadInput("-m", f"the {name} transport needs the Python package {exc.name}: "
                       f"pip install '{DISTRIBUTION}{extra}'") from None
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, Transport)):
        raise BadInput("-m", f"the {name} transport's entry point {entry.path} "
                       f"({entry.plugin or DISTRIBUTION}) names no Transport class")
    return found
