"""The transports. A module name reads `<transport>.<Role>`, like `loopback.Sender`.

Installed as `harness.transports` (the repository keeps them in modules/). Each is imported
only when used, so that a client library that is not installed matters only to its own
transport, and asking for it says which extra to install.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from harness.transports.base import Transport

from harness.errors import BadInput


class Entry(NamedTuple):
    path: str  # module:Class
    extra: str  # the optional dependency set that installs its client library; "": core


TRANSPORTS: dict[str, Entry] = {
    "loopback": Entry("harness.transports.loopback:LoopbackTransport", ""),
    "stomp": Entry("harness.transports.stomp:StompTransport", ""),
    "mqtt": Entry("harness.transports.mqtt:MqttTransport", ""),
    "amqp": Entry("harness.transports.amqp:AmqpTransport", "amqp"),
    "amqp10": Entry("harness.transports.amqp10:Amqp10Transport", "amqp10"),
    "nats": Entry("harness.transports.nats:NatsTransport", "nats"),
    "redis": Entry("harness.transports.redis:RedisTransport", "redis"),
    "http": Entry("harness.transports.http:HttpTransport", "http"),
}
DISTRIBUTION = "broker-harness"


def transport_class(name: str) -> type[Transport]:
    entry = TRANSPORTS[name]
    module_name, _, class_name = entry.path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "harness":
            raise
        extra = f"[{entry.extra}]" if entry.extra else ""
        raise BadInput("-m", f"the {name} transport needs the Python package {exc.name}: "
                       f"pip install '{DISTRIBUTION}{extra}'") from None
    return getattr(module, class_name)
