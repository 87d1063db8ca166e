"""The transports. A module name reads `<transport>.<Role>`, like `loopback.Sender`.

Installed as `harness.modules`, the folder modules/ in three parts: interface/ (what a
transport implements), kit/ (helpers it may use) and one file per driver beside them, which
imports those two and never another driver. Each driver is imported only when used, so that
a client library that is not installed matters only to its own transport, and asking for it
says which extra to install.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from harness.modules.interface.base import Transport

from harness.errors import BadInput


class Entry(NamedTuple):
    path: str  # module:Class
    extra: str  # the optional dependency set that installs its client library; "": core


TRANSPORTS: dict[str, Entry] = {
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
